/* layout.c — the layout pass (graph.h: gr_graph_set_layout). Tensors that
 * must share a layout are joined into groups (union-find). Channels-last is
 * a layout of 4-D batched activations; whether one is an image is the ops'
 * to say (the backend's caps, from ops.def's columns), not its rank's: a
 * group goes NHWC when every node reading or writing a member takes NHWC.
 * A GR_LAYOUT_CAP_SAME node (relu, add, batchnorm, maxpool) joins its
 * tensors only when its batched ones are all 4-D activations and its batched
 * inputs have one shape: one that broadcasts, or reads the input batch
 * (which stays NCHW), keeps them NCHW. So a 4-D activation reaches NHWC only
 * from an op that converts (GR_LAYOUT_CAP_ANY: conv, global_avgpool) through
 * ops that keep it. Pure planning: it only sets gr_tensor.layout. */
#include "graph.h"

#include <stdlib.h>
#include <string.h>

static int gr_uf_find(int *up, int t) {
    while (up[t] != t) t = up[t] = up[up[t]];
    return t;
}

static void gr_uf_join(int *up, int a, int b) {
    a = gr_uf_find(up, a);
    b = gr_uf_find(up, b);
    if (a != b) up[a < b ? b : a] = a < b ? a : b;
}

static bool gr_is_4d_act(const gr_tensor *t) { return t->kind == GR_TK_ACT && t->batched && t->ndim == 4; }

static int gr_node_tensor(const gr_node *nd, int k) { return k < nd->nin ? nd->in[k] : nd->out[k - nd->nin]; }

/* Whether a SAME node may join its tensors: every batched tensor it reads
 * or writes is a 4-D activation (not the input batch), and its batched
 * inputs have one shape (not a broadcast). Unbatched ones (batchnorm's
 * per-channel scale, shift and statistics) do not count. */
static bool gr_node_joinable(const gr_graph *g, const gr_node *nd) {
    const gr_tensor *in0 = NULL;
    for (int k = 0; k < nd->nin + nd->nout; k++) {
        const gr_tensor *t = &g->tensors[gr_node_tensor(nd, k)];
        if (!t->batched) continue;
        if (!gr_is_4d_act(t)) return false;
        if (k >= nd->nin) continue;
        if (in0 && memcmp(t->shape, in0->shape, 4 * sizeof t->shape[0])) return false;
        if (!in0) in0 = t;
    }
    return true;
}

void gr_graph_set_layout(gr_graph *g, const gr_layout_cap caps[GR_OP_COUNT]) {
    const int nt = g->n_tensors;
    const size_t n = (size_t)(nt ? nt : 1);
    int *up = gr_xmalloc(n * sizeof *up);
    bool *ok = gr_xmalloc(n * sizeof *ok);
    for (int t = 0; t < nt; t++) {
        up[t] = t;
        ok[t] = gr_is_4d_act(&g->tensors[t]);
    }
    for (int t = 0; t < nt; t++) {
        const gr_tensor *x = &g->tensors[t];
        if (x->alias_of >= 0) gr_uf_join(up, t, x->alias_of);
        if (x->grad >= 0) gr_uf_join(up, t, x->grad);
    }
    for (int i = 0; i < g->n_nodes; i++) {
        const gr_node *nd = &g->nodes[i];
        const gr_layout_cap cap = caps[nd->op];
        const bool same = cap == GR_LAYOUT_CAP_SAME && gr_node_joinable(g, nd);
        int first = -1;
        for (int k = 0; k < nd->nin + nd->nout; k++) {
            const int t = gr_node_tensor(nd, k);
            if (!gr_is_4d_act(&g->tensors[t])) continue;
            if (cap == GR_LAYOUT_CAP_ANY) continue;
            if (!same) ok[t] = false;
            else {
                if (first >= 0) gr_uf_join(up, first, t);
                first = t;
            }
        }
    }
    /* a group is NHWC when all of its members may be */
    bool *group_ok = gr_xmalloc(n * sizeof *group_ok);
    for (int t = 0; t < nt; t++) group_ok[t] = true;
    for (int t = 0; t < nt; t++)
        if (!ok[t]) group_ok[gr_uf_find(up, t)] = false;
    for (int t = 0; t < nt; t++) g->tensors[t].layout = ok[t] && group_ok[gr_uf_find(up, t)] ? GR_NHWC : GR_NCHW;
    free(group_ok);
    free(ok);
    free(up);
}
