/* plan.c — schedules a pass and packs its activation arena.
 *
 * Liveness: a storage root (a tensor that is not a view) lives from the
 * first step that writes it or any view of it to the last step that reads
 * or writes either; inputs, labels and stats live for the whole pass. Roots
 * are placed largest first at the lowest 64-byte aligned offset that does
 * not overlap any placed root whose lifetime intersects its own (intervals
 * are inclusive, so a step never reads and writes the same bytes). */
#include "plan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static size_t gr_align64(size_t x) { return (x + 63) & ~(size_t)63; }

static size_t gr_elem_size(gr_elem e) { return e == GR_U8 ? 1 : 4; }

static size_t gr_tensor_bytes(const gr_tensor *t) {
    return (size_t)gr_tensor_numel(t) * gr_elem_size(t->elem);
}

static int gr_root(const gr_graph *g, int t) {
    while (g->tensors[t].alias_of >= 0) t = g->tensors[t].alias_of;
    return t;
}

static bool gr_in_arena(const gr_tensor *t) {
    return t->kind == GR_TK_ACT || t->kind == GR_TK_INPUT || t->kind == GR_TK_LABEL || t->kind == GR_TK_STAT;
}

size_t gr_model_bytes(const gr_graph *g, int optim_slots, size_t *params, size_t *grads, size_t *optim) {
    *params = (size_t)g->n_params * sizeof(float);
    *grads = (size_t)g->n_trainable * sizeof(float);
    *optim = (size_t)optim_slots * (size_t)g->n_trainable * sizeof(float);
    return *params + *grads + *optim;
}

/* "; 1234 bytes free of 5678 on cuda" where the backend can tell */
static const char *gr_free_str(gr_backend *be, char *buf, size_t n) {
    size_t fr = 0, tot = 0;
    buf[0] = 0;
    if (gr_backend_mem_info(be, &fr, &tot))
        snprintf(buf, n, "; %zu bytes free of %zu on %s", fr, tot, gr_backend_name(be));
    return buf;
}

gr_status gr_model_init(gr_model *m, const gr_graph *g, gr_backend *be, int optim_slots, gr_error *err) {
    memset(m, 0, sizeof *m);
    m->g = g;
    m->be = be;
    m->optim_slots = optim_slots;
    size_t pb, gb, ob;
    size_t total = gr_model_bytes(g, optim_slots, &pb, &gb, &ob);
    m->params = gr_backend_alloc(be, pb);
    m->grads = gr_backend_alloc(be, gb);
    m->optim = ob ? gr_backend_alloc(be, ob) : NULL;
    if (!m->params || !m->grads || (ob && !m->optim)) {
        gr_model_free(m);
        char fr[96];
        return gr_error_set(err, GR_ERR_OOM, "out of memory on %s: the model needs %zu bytes "
                            "(params %zu, grads %zu, optimizer state %zu)%s", gr_backend_name(be),
                            total, pb, gb, ob, gr_free_str(be, fr, sizeof fr));
    }
    gr_backend_zero(be, m->grads, gb);
    if (ob) gr_backend_zero(be, m->optim, ob);
    return GR_OK;
}

void gr_model_free(gr_model *m) {
    if (m->be) {
        gr_backend_dealloc(m->be, m->params);
        gr_backend_dealloc(m->be, m->grads);
        gr_backend_dealloc(m->be, m->optim);
    }
    memset(m, 0, sizeof *m);
}

void *gr_plan_ptr(const gr_plan *p, int t) {
    const gr_tensor *x = &p->g->tensors[t];
    switch (x->kind) {
    case GR_TK_PARAM:
    case GR_TK_STATE: return p->m && p->m->params ? p->m->params + x->param_offset : NULL;
    case GR_TK_GRAD: return p->m && p->m->grads ? p->m->grads + x->param_offset : NULL;
    default: {
        int r = gr_root(p->g, t);
        GR_ASSERT(p->offset[r] >= 0);
        return p->act ? (char *)p->act + p->offset[r] : NULL;
    }
    }
}

typedef struct { int root; int first, last; size_t bytes; } gr_live;

static int gr_live_cmp(const void *a, const void *b) {
    const gr_live *x = a, *y = b;
    if (x->bytes != y->bytes) return x->bytes < y->bytes ? 1 : -1;
    return x->root - y->root;
}

gr_status gr_plan_compile(gr_plan *p, gr_model *m, const gr_graph *g, gr_plan_mode mode,
                          bool alloc, gr_error *err) {
    memset(p, 0, sizeof *p);
    p->g = g;
    p->m = m;
    p->mode = mode;
    int n_nodes = mode == GR_PLAN_TRAIN ? g->n_nodes : g->n_forward;
    if (m && m->be)
        for (int i = 0; i < n_nodes; i++)
            if (!(gr_op_flags(g->nodes[i].op) & GR_OPF_VIEW) &&
                !gr_backend_supports_op(m->be, g->nodes[i].op))
                return gr_error_set(err, GR_ERR_DEVICE, "the %s backend has no kernel for op '%s' "
                                    "(layer %s); this job cannot run there", gr_backend_name(m->be),
                                    gr_op_name(g->nodes[i].op),
                                    g->nodes[i].layer >= 0 ? g->layers[g->nodes[i].layer].name : "loss");

    /* lifetimes of storage roots */
    int nt = g->n_tensors;
    int *first = gr_xmalloc((size_t)nt * sizeof *first), *last = gr_xmalloc((size_t)nt * sizeof *last);
    for (int t = 0; t < nt; t++) { first[t] = -1; last[t] = -1; }
    for (int i = 0; i < n_nodes; i++) {
        const gr_node *nd = &g->nodes[i];
        for (int k = 0; k < nd->nin + nd->nout; k++) {
            int t = k < nd->nin ? nd->in[k] : nd->out[k - nd->nin];
            if (!gr_in_arena(&g->tensors[t])) continue;
            int r = gr_root(g, t);
            if (first[r] < 0) first[r] = i;
            last[r] = i;
        }
    }
    gr_live *lv = gr_xmalloc((size_t)nt * sizeof *lv);
    int nl = 0;
    for (int t = 0; t < nt; t++) {
        if (first[t] < 0 || g->tensors[t].alias_of >= 0) continue;
        gr_tensor_kind k = g->tensors[t].kind;
        /* the batch, the stats read back after the pass, and the input's
         * gradient (when asked for) live for the whole pass */
        bool pinned = k == GR_TK_INPUT || k == GR_TK_LABEL || k == GR_TK_STAT || t == g->tensors[g->input].grad;
        lv[nl++] = (gr_live){t, pinned ? 0 : first[t], pinned ? n_nodes : last[t],
                             gr_align64(gr_tensor_bytes(&g->tensors[t]))};
    }
    qsort(lv, (size_t)nl, sizeof *lv, gr_live_cmp);
    p->offset = gr_xmalloc((size_t)nt * sizeof *p->offset);
    for (int t = 0; t < nt; t++) p->offset[t] = -1;
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
        p->offset[lv[i].root] = (int64_t)off;
        if (off + lv[i].bytes > p->act_bytes) p->act_bytes = off + lv[i].bytes;
        p->act_bytes_naive += lv[i].bytes;
    }
    free(placed_off);
    free(lv);
    free(first);
    free(last);

    if (alloc) {
        GR_ASSERT(m && m->be);
        p->act = gr_backend_alloc(m->be, p->act_bytes ? p->act_bytes : 64);
        if (!p->act) {
            size_t ab = p->act_bytes, pb, gb, ob;
            gr_model_bytes(g, m->optim_slots, &pb, &gb, &ob);
            gr_plan_free(p);
            char fr[96];
            return gr_error_set(err, GR_ERR_OOM, "out of memory on %s: the %s activation arena needs "
                                "%zu bytes at micro-batch %lld, on top of the model's params %zu, grads %zu "
                                "and optimizer state %zu%s (lower train.micro_batch)", gr_backend_name(m->be),
                                mode == GR_PLAN_TRAIN ? "training" : "eval", ab, (long long)g->micro_batch,
                                pb, gb, ob, gr_free_str(m->be, fr, sizeof fr));
        }
        gr_backend_zero(m->be, p->act, p->act_bytes);
    }

    p->steps = gr_xcalloc((size_t)(n_nodes ? n_nodes : 1), sizeof *p->steps);
    gr_precision prec = m && m->be ? gr_backend_precision(m->be) : GR_PREC_FP32;
    const bool half = prec == GR_PREC_FP16 || prec == GR_PREC_BF16;
    for (int i = 0; i < n_nodes; i++) {
        const gr_node *nd = &g->nodes[i];
        if (gr_op_flags(nd->op) & GR_OPF_VIEW) continue;
        gr_kargs *a = &p->steps[p->n_steps++];
        a->g = g;
        a->node = nd;
        a->be = m ? m->be : NULL;
        for (int k = 0; k < nd->nin; k++) {
            a->tin[k] = &g->tensors[nd->in[k]];
            a->in[k] = alloc ? gr_plan_ptr(p, nd->in[k]) : NULL;
        }
        for (int k = 0; k < nd->nout; k++) {
            a->tout[k] = &g->tensors[nd->out[k]];
            a->out[k] = alloc ? gr_plan_ptr(p, nd->out[k]) : NULL;
            /* mixed precision: activations and their gradients are stored in
             * half precision (the loss's probabilities and sums stay fp32) */
            const gr_tensor *t = a->tout[k];
            if (half && t->kind == GR_TK_ACT && t->elem == GR_F32 && t->batched && nd->op != GR_OP_SOFTMAX_CE)
                a->round_out |= 1u << k;
        }
    }
    if (alloc) {
        gr_status st = gr_backend_prepare(m->be, p, err);
        if (st) { gr_plan_free(p); return st; }
    }
    return GR_OK;
}

void gr_plan_free(gr_plan *p) {
    if (p->be_state && p->m && p->m->be) gr_backend_release(p->m->be, p);
    if (p->act && p->m && p->m->be) gr_backend_dealloc(p->m->be, p->act);
    free(p->steps);
    free(p->offset);
    memset(p, 0, sizeof *p);
}

void gr_plan_run(gr_plan *p, int64_t n, const gr_exec_ctx *ctx) {
    GR_ASSERT(p->act && n >= 1 && n <= p->g->micro_batch);
    gr_backend *be = p->m->be;
    if (gr_backend_run(be, p, n, ctx)) return;
    for (int i = 0; i < p->n_steps; i++) {
        gr_kargs *a = &p->steps[i];
        a->n = n;
        a->ctx = ctx;
        gr_backend_exec(a);
    }
}
