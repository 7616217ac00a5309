/* op_misc.c — flatten (a view: [n, C, H, W] -> [n, C*H*W], PyTorch's order)
 * and dropout (inverted: kept values scaled by 1/(1-rate) in training, the
 * identity in eval; the mask is a counter-based function of the step's RNG
 * key, so it is reproducible and thread-count independent). */
#include "graph.h"

#include <stdio.h>

static gr_status gr_flatten_infer(gr_graph *g, int node, const gr_cfg *at, const char *key, gr_error *err) {
    (void)at; (void)key; (void)err;
    const gr_tensor x = g->tensors[g->nodes[node].in[0]];
    int64_t shape[2] = {x.shape[0], gr_tensor_sample_numel(&x)};
    gr_graph_view_out(g, node, 2, shape);
    return GR_OK;
}

/* rate 1 would zero everything and divide by zero */
static const gr_attr_def gr_dropout_attr_defs[] = {
    GR_ATTR("rate", rate, 0.0, 0.999, 0, GR_ATTR_REQUIRED),
};
static const gr_attr_table gr_dropout_attrs =
    GR_ATTR_TABLE(gr_dropout_attr_defs, "dropout needs attributes, e.g. {rate: 0.5}", NULL);

static gr_status gr_dropout_infer(gr_graph *g, int node, const gr_cfg *at, const char *key, gr_error *err) {
    (void)at; (void)key; (void)err;
    gr_node *nd = &g->nodes[node];
    gr_tensor x = g->tensors[nd->in[0]];
    const char *lname = g->layers[nd->layer].name;
    int y = gr_graph_add_tensor(g, lname, GR_TK_ACT, GR_F32, x.ndim, x.shape, x.batched);
    char mname[GR_NAME_MAX + 8];
    snprintf(mname, sizeof mname, "%s.mask", lname);
    int m = gr_graph_add_tensor(g, mname, GR_TK_ACT, GR_U8, x.ndim, x.shape, x.batched);
    nd = &g->nodes[node];
    nd->out[0] = y;
    nd->out[1] = m;
    nd->nout = 2;
    nd->flops = 2 * gr_tensor_sample_numel(&x);
    return GR_OK;
}

static void gr_dropout_backward(gr_graph *g, int node) {
    gr_node nd = g->nodes[node];
    if (!g->tensors[nd.in[0]].requires_grad) return;
    int dy = gr_graph_grad(g, nd.out[0]);
    int dx = gr_graph_grad(g, nd.in[0]);
    int in[2] = {dy, nd.out[1]}, out[1] = {dx};
    int k = gr_graph_add_node(g, gr_op_bwd(nd.op), nd.layer, in, 2, out, 1);
    g->nodes[k].fwd = node;
    g->nodes[k].attrs = nd.attrs;
    g->nodes[k].flops = nd.flops / 2;
}

const gr_op_impl gr_op_impl_flatten = {NULL, NULL, gr_flatten_infer, gr_graph_view_backward};
const gr_op_impl gr_op_impl_dropout = {&gr_dropout_attrs, NULL, gr_dropout_infer, gr_dropout_backward};
