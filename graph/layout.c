/* layout.c — the layout pass (graph.h: gr_graph_set_layout). Tensors that
 * must share a layout are joined into groups (union-find); a group goes
 * channels-last when every member is a 4-D batched activation whose every
 * node takes NHWC. Pure planning: it only sets gr_tensor.layout. */
#include "graph.h"

#include <stdlib.h>

static int gr_uf_find(int *up, int t) {
    while (up[t] != t) t = up[t] = up[up[t]];
    return t;
}

static void gr_uf_join(int *up, int a, int b) {
    a = gr_uf_find(up, a);
    b = gr_uf_find(up, b);
    if (a != b) up[a < b ? b : a] = a < b ? a : b;
}

static bool gr_is_image(const gr_tensor *t) { return t->kind == GR_TK_ACT && t->batched && t->ndim == 4; }

void gr_graph_set_layout(gr_graph *g, const gr_layout_cap caps[GR_OP_COUNT]) {
    const int nt = g->n_tensors;
    int *up = gr_xmalloc((size_t)(nt ? nt : 1) * sizeof *up);
    bool *ok = gr_xmalloc((size_t)(nt ? nt : 1) * sizeof *ok);
    for (int t = 0; t < nt; t++) {
        up[t] = t;
        ok[t] = gr_is_image(&g->tensors[t]);
    }
    for (int t = 0; t < nt; t++) {
        const gr_tensor *x = &g->tensors[t];
        if (x->alias_of >= 0) gr_uf_join(up, t, x->alias_of);
        if (x->grad >= 0) gr_uf_join(up, t, x->grad);
    }
    for (int i = 0; i < g->n_nodes; i++) {
        const gr_node *nd = &g->nodes[i];
        gr_layout_cap cap = caps[nd->op];
        int first = -1;
        for (int k = 0; k < nd->nin + nd->nout; k++) {
            int t = k < nd->nin ? nd->in[k] : nd->out[k - nd->nin];
            if (!gr_is_image(&g->tensors[t])) continue;
            if (cap == GR_LAYOUT_CAP_NONE) ok[t] = false;
            if (cap == GR_LAYOUT_CAP_SAME) {
                if (first >= 0) gr_uf_join(up, first, t);
                first = t;
            }
        }
    }
    /* a group is NHWC when all of its members may be */
    bool *group_ok = gr_xmalloc((size_t)(nt ? nt : 1) * sizeof *group_ok);
    for (int t = 0; t < nt; t++) group_ok[t] = true;
    for (int t = 0; t < nt; t++)
        if (!ok[t]) group_ok[gr_uf_find(up, t)] = false;
    for (int t = 0; t < nt; t++)
        g->tensors[t].layout = ok[t] && group_ok[gr_uf_find(up, t)] ? GR_NHWC : GR_NCHW;
    free(group_ok);
    free(ok);
    free(up);
}
