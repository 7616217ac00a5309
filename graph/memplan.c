/* memplan.c — packs a pass's activation arena.
 *
 * Liveness: a storage root (a tensor that is not a view) lives from the
 * first step that writes it or any view of it to the last step that reads
 * or writes either; inputs, labels and stats live for the whole pass. Roots
 * are placed largest first at the lowest 64-byte aligned offset that does
 * not overlap any placed root whose lifetime intersects its own (intervals
 * are inclusive, so a step never reads and writes the same bytes). */
#include "memplan.h"

#include <stdlib.h>
#include <string.h>

static size_t gr_align64(size_t x) { return (x + 63) & ~(size_t)63; }

static size_t gr_tensor_bytes(const gr_tensor *t) {
    return (size_t)gr_tensor_numel(t) * gr_elem_size(t->elem);
}

static int gr_root(const gr_graph *g, int t) {
    while (g->tensors[t].alias_of >= 0) t = g->tensors[t].alias_of;
    return t;
}

static bool gr_in_arena(const gr_tensor *t) {
    return t->kind == GR_TK_ACT || t->kind == GR_TK_INPUT || t->kind == GR_TK_LABEL || t->kind == GR_TK_STAT ||
           t->kind == GR_TK_CACHE;
}

size_t gr_model_bytes(const gr_graph *g, int optim_slots, size_t *params, size_t *grads, size_t *optim) {
    *params = (size_t)g->n_params * sizeof(float);
    *grads = (size_t)g->n_trainable * sizeof(float);
    *optim = (size_t)optim_slots * (size_t)g->n_trainable * sizeof(float);
    return *params + *grads + *optim;
}

int64_t gr_memplan_offset(const gr_memplan *mp, int t) { return mp->offset[gr_root(mp->g, t)]; }

typedef struct { int root; int first, last; size_t bytes; } gr_live;

static int gr_live_cmp(const void *a, const void *b) {
    const gr_live *x = a, *y = b;
    if (x->bytes != y->bytes) return x->bytes < y->bytes ? 1 : -1;
    return x->root - y->root;
}

/* The lifetimes of the pass's storage roots, largest first; returns how many.
 * run (NULL: every node) the nodes this process runs; pin (NULL: none) the
 * roots that live for the whole pass. */
static int gr_memplan_lifetimes(const gr_graph *g, int n_nodes, const uint8_t *run, const uint8_t *pin,
                                gr_live *lv) {
    int nt = g->n_tensors;
    int *first = gr_xmalloc((size_t)nt * sizeof *first), *last = gr_xmalloc((size_t)nt * sizeof *last);
    for (int t = 0; t < nt; t++) { first[t] = -1; last[t] = -1; }
    for (int i = 0; i < n_nodes; i++) {
        const gr_node *nd = &g->nodes[i];
        if (run && !run[i]) continue;
        for (int k = 0; k < nd->nin + nd->nout; k++) {
            int t = k < nd->nin ? nd->in[k] : nd->out[k - nd->nin];
            if (!gr_in_arena(&g->tensors[t])) continue;
            int r = gr_root(g, t);
            if (first[r] < 0) first[r] = i;
            last[r] = i;
        }
    }
    int nl = 0;
    for (int t = 0; t < nt; t++) {
        if (first[t] < 0 || g->tensors[t].alias_of >= 0) continue;
        gr_tensor_kind k = g->tensors[t].kind;
        /* the batch, the stats read back after the pass, a decoding cache
         * and the input's gradient (when asked for) live for the whole pass */
        bool pinned = k == GR_TK_INPUT || k == GR_TK_LABEL || k == GR_TK_STAT || k == GR_TK_CACHE ||
                      t == g->tensors[g->input].grad || (pin && pin[t]);
        lv[nl++] = (gr_live){t, pinned ? 0 : first[t], pinned ? n_nodes : last[t],
                             gr_align64(gr_tensor_bytes(&g->tensors[t]))};
    }
    free(first);
    free(last);
    qsort(lv, (size_t)nl, sizeof *lv, gr_live_cmp);
    return nl;
}

void gr_memplan_init(gr_memplan *mp, const gr_graph *g, gr_plan_mode mode) {
    gr_memplan_init_part(mp, g, mode, NULL, NULL);
}

void gr_memplan_init_part(gr_memplan *mp, const gr_graph *g, gr_plan_mode mode, const uint8_t *run,
                          const uint8_t *pin) {
    memset(mp, 0, sizeof *mp);
    mp->g = g;
    mp->mode = mode;
    mp->n_nodes = mode == GR_PLAN_TRAIN ? g->n_nodes : g->n_forward;
    int nt = g->n_tensors;
    gr_live *lv = gr_xmalloc((size_t)(nt ? nt : 1) * sizeof *lv);
    int nl = gr_memplan_lifetimes(g, mp->n_nodes, run, pin, lv);
    mp->offset = gr_xmalloc((size_t)(nt ? nt : 1) * sizeof *mp->offset);
    for (int t = 0; t < nt; t++) mp->offset[t] = -1;
    size_t *placed_off = gr_xmalloc((size_t)(nl ? nl : 1) * sizeof *placed_off);
    for (int i = 0; i < nl; i++) {
        size_t off = 0;
        bool moved = true;
        while (moved) { /* bump past every conflicting block until none overlaps */
            moved = false;
            for (int j = 0; j < i; j++) {
                bool live_overlap = lv[j].first <= lv[i].last && lv[i].first <= lv[j].last;
                bool mem_overlap = placed_off[j] < off + lv[i].bytes && off < placed_off[j] + lv[j].bytes;
                if (live_overlap && mem_overlap) { off = placed_off[j] + lv[j].bytes; moved = true; }
            }
        }
        placed_off[i] = off;
        mp->offset[lv[i].root] = (int64_t)off;
        if (off + lv[i].bytes > mp->act_bytes) mp->act_bytes = off + lv[i].bytes;
        mp->act_bytes_naive += lv[i].bytes;
        mp->naive_by_elem[mp->g->tensors[lv[i].root].elem] += lv[i].bytes;
    }
    free(placed_off);
    free(lv);
}

void gr_memplan_free(gr_memplan *mp) {
    free(mp->offset);
    memset(mp, 0, sizeof *mp);
}
