/* stages.c — pipeline stages cut from the built graph (stages.h): the
 * balanced cut by a binary search over the largest stage's FLOPs, the named
 * cut, and the edges a cut may not cross. */
#include "stages.h"

#include <stdlib.h>
#include <string.h>

/* Parts of at most t that a left-to-right fill makes of cost[0..n). */
static int gr_stages_parts(const int64_t *cost, int n, int64_t t) {
    int parts = 1;
    int64_t sum = 0;
    for (int i = 0; i < n; i++) {
        if (sum + cost[i] > t) parts++, sum = 0;
        sum += cost[i];
    }
    return parts;
}

void gr_stages_balance(const int64_t *cost, int n, int p, int *first) {
    GR_ASSERT(p >= 1 && p <= n);
    int64_t lo = 0, hi = 0;
    for (int i = 0; i < n; i++) lo = GR_MAX(lo, cost[i]), hi += cost[i];
    while (lo < hi) { /* the least t that p parts of at most t can hold */
        int64_t mid = lo + (hi - lo) / 2;
        if (gr_stages_parts(cost, n, mid) <= p) hi = mid;
        else lo = mid + 1;
    }
    /* Fill each part up to lo, leaving a layer for each part after it: the
     * fill reaches at least as far as the unconstrained one (which ends in
     * <= p parts) until the layers left equal the parts left, then singles. */
    int i = 0;
    for (int s = 0; s < p; s++) {
        first[s] = i;
        int64_t sum = cost[i++];
        while (i < n && sum + cost[i] <= lo && n - i - 1 >= p - 1 - s) sum += cost[i++];
        if (s == p - 1) GR_ASSERT(i == n);
    }
}

void gr_stages_free(gr_stage_plan *sp) {
    free(sp->stages);
    memset(sp, 0, sizeof *sp);
}

/* The layer called name, else the first layer of the block use name
 * (`<use>.<layer>`); -1 when none. */
static int gr_stages_find(const gr_graph *g, const char *name) {
    size_t n = strlen(name);
    for (int l = 0; l < g->n_layers; l++)
        if (strcmp(g->layers[l].name, name) == 0) return l;
    for (int l = 0; l < g->n_layers; l++)
        if (strncmp(g->layers[l].name, name, n) == 0 && g->layers[l].name[n] == '.') return l;
    return -1;
}

/* first[1..p) from parallel.stages' names. */
static gr_status gr_stages_named(const gr_graph *g, const gr_job_spec *spec, int p, int *first, gr_error *err) {
    const gr_cfg *list = spec->parallel.stages;
    if (list->n != p - 1)
        return gr_cfg_error(err, list, "parallel.stages", "%d names for parallel.pipeline = %d stages: give %d, "
                            "where stages 2..%d begin (or auto)", list->n, p, p - 1, p);
    first[0] = 0;
    for (int s = 1; s < p; s++) {
        const gr_cfg *item = list->items[s - 1];
        char key[64];
        snprintf(key, sizeof key, "parallel.stages[%d]", s - 1);
        const int l = gr_stages_find(g, item->scalar);
        if (l < 0)
            return gr_cfg_error(err, item, key, "no layer or block use is named '%s' (the layers' names are in "
                                "`gpurun plan`'s table)", item->scalar);
        if (l == 0)
            return gr_cfg_error(err, item, key, "'%s' is the first layer: stage 1 begins there, name where stages "
                                "2.. begin", item->scalar);
        if (l <= first[s - 1])
            return gr_cfg_error(err, item, key, "'%s' (layer %d) comes before or at '%s' (layer %d): name the "
                                "cuts in model order", item->scalar, l + 1, g->layers[first[s - 1]].name,
                                first[s - 1] + 1);
        first[s] = l;
    }
    return GR_OK;
}

/* The stage that runs node i (a node of no layer, the loss or a metric: the last). */
static int gr_stages_of_node(const gr_graph *g, const int *stage_of, int p, int i) {
    const int l = g->nodes[i].layer;
    return l >= 0 ? stage_of[l] : p - 1;
}

static const char *gr_stages_node_name(const gr_graph *g, int i) {
    return g->nodes[i].layer >= 0 ? g->layers[g->nodes[i].layer].name : "the loss";
}

/* Every forward edge goes to the same stage or the next; every layer state
 * is read in its owner's stage. */
static gr_status gr_stages_edges(const gr_graph *g, const gr_job_spec *spec, const int *stage_of, int p,
                                 gr_error *err) {
    const char *key = spec->parallel.stages ? "parallel.stages" : "parallel.pipeline";
    int *producer = gr_xcalloc((size_t)g->n_tensors, sizeof *producer);
    for (int t = 0; t < g->n_tensors; t++) producer[t] = -1;
    gr_status st = GR_OK;
    for (int i = 0; i < g->n_forward && !st; i++) {
        const gr_node *nd = &g->nodes[i];
        const int s = gr_stages_of_node(g, stage_of, p, i);
        for (int k = 0; k < nd->nin && !st; k++) {
            const gr_tensor *t = &g->tensors[nd->in[k]];
            /* a trainable weight may be tied across stages (gr_stages_tied); layer state is its layer's */
            if (t->kind == GR_TK_STATE && t->layer >= 0 && stage_of[t->layer] != s)
                st = gr_spec_error(err, spec, key, "layer '%s' (stage %d) uses the state %s of layer '%s' (stage "
                                   "%d): cut so that both are in one stage", gr_stages_node_name(g, i), s + 1,
                                   t->name, g->layers[t->layer].name, stage_of[t->layer] + 1);
            const int from = producer[nd->in[k]];
            if (!st && from >= 0 && gr_stages_of_node(g, stage_of, p, from) < s - 1)
                st = gr_spec_error(err, spec, key, "layer '%s' (stage %d) reads '%s' (stage %d): a stage receives "
                                   "only from the one before it, so an edge may not skip a stage; move a cut so "
                                   "that both layers are in one stage or in neighbouring ones",
                                   gr_stages_node_name(g, i), s + 1, gr_stages_node_name(g, from),
                                   gr_stages_of_node(g, stage_of, p, from) + 1);
        }
        for (int k = 0; k < nd->nout; k++) producer[nd->out[k]] = i;
    }
    for (int l = 1; l < g->n_layers && !st; l++) /* a recomputed block's copies run within one stage */
        if (g->layers[l].recompute >= 0 && g->layers[l].recompute == g->layers[l - 1].recompute &&
            stage_of[l] != stage_of[l - 1])
            st = gr_spec_error(err, spec, key, "the recomputed block use of layers '%s' (stage %d) and '%s' (stage %d) "
                               "is cut in two: its recomputation runs in the backward pass, where messages go only "
                               "backwards; cut at a block boundary, or leave that block unrecomputed",
                               g->layers[l - 1].name, stage_of[l - 1] + 1, g->layers[l].name, stage_of[l] + 1);
    free(producer);
    return st;
}

/* The balanced cut (parallel.stages: auto) of the layers' costs, a recomputed block use kept whole
 * (its copies run in the backward pass, which sends nothing forward): its layers are one unit. */
static gr_status gr_stages_auto(const gr_graph *g, const gr_job_spec *spec, const int64_t *cost, int p, int *first,
                                gr_error *err) {
    const int n = g->n_layers;
    int64_t *ucost = gr_xcalloc((size_t)n, sizeof *ucost);
    int *ufirst = gr_xcalloc((size_t)n, sizeof *ufirst), nu = 0; /* unit u begins at layer ufirst[u] */
    for (int l = 0; l < n; l++) {
        const int rc = g->layers[l].recompute;
        if (l == 0 || rc < 0 || rc != g->layers[l - 1].recompute) ufirst[nu++] = l;
        ucost[nu - 1] += cost[l];
    }
    gr_status st = GR_OK;
    if (p > nu)
        st = gr_spec_error(err, spec, "parallel.pipeline", "%d stages, but the model has %d layers or recomputed "
                           "block uses to cut between (train.recompute keeps a block use in one stage)", p, nu);
    else {
        int *cut = gr_xcalloc((size_t)p, sizeof *cut);
        gr_stages_balance(ucost, nu, p, cut);
        for (int s = 0; s < p; s++) first[s] = ufirst[cut[s]];
        free(cut);
    }
    free(ucost);
    free(ufirst);
    return st;
}

gr_status gr_stages_cut(const gr_graph *g, const gr_job_spec *spec, gr_stage_plan *out, gr_error *err) {
    memset(out, 0, sizeof *out);
    const int64_t p64 = spec->parallel.pipeline;
    const int n = g->n_layers;
    if (p64 < 1 || p64 > n)
        return gr_spec_error(err, spec, "parallel.pipeline", "%lld stages, but the model has %d layers (a stage "
                             "holds at least one)", (long long)p64, n);
    const int p = (int)p64;
    int64_t *cost = gr_xcalloc((size_t)n, sizeof *cost);
    for (int i = 0; i < g->n_nodes; i++) cost[g->nodes[i].layer >= 0 ? g->nodes[i].layer : n - 1] += g->nodes[i].flops;
    int *first = gr_xcalloc((size_t)p + 1, sizeof *first);
    int *stage_of = gr_xcalloc((size_t)n, sizeof *stage_of);
    gr_status st = GR_OK;
    if (spec->parallel.stages) st = gr_stages_named(g, spec, p, first, err);
    else st = gr_stages_auto(g, spec, cost, p, first, err);
    first[p] = n;
    for (int s = 0; s < p && !st; s++)
        for (int l = first[s]; l < first[s + 1]; l++) stage_of[l] = s;
    if (!st) st = gr_stages_edges(g, spec, stage_of, p, err);
    if (!st) {
        out->p = p;
        out->named = spec->parallel.stages != NULL;
        out->stages = gr_xcalloc((size_t)p, sizeof *out->stages);
        for (int s = 0; s < p; s++) {
            gr_stage *sg = &out->stages[s];
            sg->first = first[s], sg->last = first[s + 1] - 1;
            for (int l = sg->first; l <= sg->last; l++) sg->flops += cost[l], sg->params += g->layers[l].n_params;
        }
    }
    free(cost);
    free(first);
    free(stage_of);
    return st;
}

/* ---- a stage's nodes and messages (stage io) ---- */

static int gr_stages_root(const gr_graph *g, int t) {
    while (g->tensors[t].alias_of >= 0) t = g->tensors[t].alias_of;
    return t;
}

static bool gr_stages_in_arena(const gr_tensor *t) {
    return t->kind == GR_TK_ACT || t->kind == GR_TK_STAT || t->kind == GR_TK_CACHE;
}

/* Appends root r to list (n entries) unless it is there (lists are short). */
static void gr_stages_add(int **list, int *n, int r) {
    for (int i = 0; i < *n; i++)
        if ((*list)[i] == r) return;
    *list = gr_xrealloc(*list, (size_t)(*n + 1) * sizeof **list);
    (*list)[(*n)++] = r;
}

static int gr_stages_int_cmp(const void *a, const void *b) { return *(const int *)a - *(const int *)b; }

void gr_stage_io_init(const gr_graph *g, const gr_stage_plan *sp, int s, gr_stage_io *io) {
    memset(io, 0, sizeof *io);
    io->s = s;
    io->p = sp->p;
    GR_ASSERT(s >= 0 && s < sp->p);
    int *stage_of = gr_xcalloc((size_t)g->n_layers + 1, sizeof *stage_of);
    for (int k = 0; k < sp->p; k++)
        for (int l = sp->stages[k].first; l <= sp->stages[k].last; l++) stage_of[l] = k;
    int *node_stage = gr_xmalloc((size_t)(g->n_nodes ? g->n_nodes : 1) * sizeof *node_stage);
    int *writer = gr_xmalloc((size_t)(g->n_tensors ? g->n_tensors : 1) * sizeof *writer);
    for (int t = 0; t < g->n_tensors; t++) writer[t] = -1;
    io->run = gr_xcalloc((size_t)(g->n_nodes ? g->n_nodes : 1), 1);
    io->pin = gr_xcalloc((size_t)(g->n_tensors ? g->n_tensors : 1), 1);
    for (int i = 0; i < g->n_nodes; i++) {
        const gr_node *nd = &g->nodes[i];
        node_stage[i] = nd->layer >= 0 ? stage_of[nd->layer] : sp->p - 1;
        io->run[i] = node_stage[i] == s;
        for (int k = 0; k < nd->nout; k++) {
            const int r = gr_stages_root(g, nd->out[k]);
            if (writer[r] < 0) writer[r] = i;
        }
    }
    /* every read of a root another stage writes: a message from a neighbour */
    for (int i = 0; i < g->n_nodes; i++) {
        const gr_node *nd = &g->nodes[i];
        const int rs = node_stage[i];
        for (int k = 0; k < nd->nin; k++) {
            const int r = gr_stages_root(g, nd->in[k]);
            const int w = writer[r];
            if (w < 0 || !gr_stages_in_arena(&g->tensors[r]) || node_stage[w] == rs) continue;
            const int ws = node_stage[w];
            const bool fwd = w < g->n_forward;
            GR_ASSERT((ws == rs - 1 && fwd) || (ws == rs + 1 && !fwd)); /* gr_stages_cut refused the rest */
            if (rs == s)
                gr_stages_add(fwd ? &io->recv_act : &io->recv_grad, fwd ? &io->n_recv_act : &io->n_recv_grad, r);
            if (ws == s)
                gr_stages_add(fwd ? &io->send_act : &io->send_grad, fwd ? &io->n_send_act : &io->n_send_grad, r);
        }
    }
    int *lists[4] = {io->recv_act, io->send_act, io->recv_grad, io->send_grad};
    const int ns[4] = {io->n_recv_act, io->n_send_act, io->n_recv_grad, io->n_send_grad};
    for (int k = 0; k < 4; k++) {
        if (ns[k]) qsort(lists[k], (size_t)ns[k], sizeof *lists[k], gr_stages_int_cmp);
        for (int i = 0; i < ns[k]; i++) io->pin[lists[k][i]] = 1;
    }
    free(stage_of);
    free(node_stage);
    free(writer);
}

void gr_stage_io_free(gr_stage_io *io) {
    free(io->run);
    free(io->pin);
    free(io->recv_act);
    free(io->send_act);
    free(io->recv_grad);
    free(io->send_grad);
    memset(io, 0, sizeof *io);
}

/* The range [*off, *off + *n) spanning kind's tensors of layers [first, last]. */
static void gr_stages_span(const gr_graph *g, gr_tensor_kind kind, int first, int last, int64_t *off, int64_t *n) {
    int64_t lo = INT64_MAX, hi = -1;
    for (int t = 0; t < g->n_tensors; t++) {
        const gr_tensor *x = &g->tensors[t];
        if (x->kind != kind || x->layer < first || x->layer > last || x->alias_of >= 0) continue;
        lo = GR_MIN(lo, x->param_offset);
        hi = GR_MAX(hi, x->param_offset + gr_tensor_numel(x));
    }
    *off = hi < 0 ? 0 : lo;
    *n = hi < 0 ? 0 : hi - lo;
    for (int t = 0; t < g->n_tensors && hi >= 0; t++) { /* no other stage's tensor inside */
        const gr_tensor *x = &g->tensors[t];
        if (x->kind == kind && x->alias_of < 0 && (x->layer < first || x->layer > last))
            GR_ASSERT(x->param_offset + gr_tensor_numel(x) <= lo || x->param_offset >= hi);
    }
}

void gr_stages_ranges(const gr_graph *g, const gr_stage_plan *sp, gr_stage_range *r) {
    for (int t = 0; t < g->n_tensors; t++) /* every weight and state belongs to a layer, so to a stage */
        GR_ASSERT((g->tensors[t].kind != GR_TK_PARAM && g->tensors[t].kind != GR_TK_STATE) || g->tensors[t].layer >= 0);
    for (int s = 0; s < sp->p; s++) {
        gr_stages_span(g, GR_TK_PARAM, sp->stages[s].first, sp->stages[s].last, &r[s].param_off, &r[s].param_n);
        gr_stages_span(g, GR_TK_STATE, sp->stages[s].first, sp->stages[s].last, &r[s].state_off, &r[s].state_n);
    }
}

int gr_stages_tied(const gr_graph *g, const gr_stage_plan *sp, int *out) {
    int *stage_of = gr_xcalloc((size_t)g->n_layers + 1, sizeof *stage_of);
    for (int k = 0; k < sp->p; k++)
        for (int l = sp->stages[k].first; l <= sp->stages[k].last; l++) stage_of[l] = k;
    uint8_t *other = gr_xcalloc((size_t)(g->n_tensors ? g->n_tensors : 1), 1);
    for (int i = 0; i < g->n_forward; i++) {
        const gr_node *nd = &g->nodes[i];
        const int s = nd->layer >= 0 ? stage_of[nd->layer] : sp->p - 1;
        for (int k = 0; k < nd->nin; k++) {
            const gr_tensor *t = &g->tensors[nd->in[k]];
            if (t->kind == GR_TK_PARAM && t->layer >= 0 && stage_of[t->layer] != s) other[nd->in[k]] = 1;
        }
    }
    int n = 0;
    for (int t = 0; t < g->n_tensors; t++)
        if (other[t]) {
            if (out) out[n] = t;
            n++;
        }
    free(stage_of);
    free(other);
    return n;
}
