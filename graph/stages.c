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

/* Every forward edge goes to the same stage or the next; every weight is
 * read in its owner's stage. */
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
            if ((t->kind == GR_TK_PARAM || t->kind == GR_TK_STATE) && t->layer >= 0 && stage_of[t->layer] != s)
                st = gr_spec_error(err, spec, key, "layer '%s' (stage %d) uses the weight %s of layer '%s' (stage "
                                   "%d): a weight tied across stages is not carried yet; cut so that both are in "
                                   "one stage", gr_stages_node_name(g, i), s + 1, t->name,
                                   g->layers[t->layer].name, stage_of[t->layer] + 1);
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
    free(producer);
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
    else gr_stages_balance(cost, n, p, first);
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
