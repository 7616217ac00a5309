/* op_act.c — elementwise activations: the GR_OPF_ACT rows of ops.def
 * (relu, sigmoid, tanh, gelu: exact, erf; gelu_tanh: the tanh approximation).
 * Their backward reads the output y, or the input x on a GR_OPF_ACT_SAVES_X
 * row (gelu, gelu_tanh). One infer and one backward serve them all. */
#include "graph.h"

/* Flops per element (forward; the backward counts the same), per activation. */
static const int gr_act_flops[GR_OP_COUNT] = {
    [GR_OP_RELU] = 1,
    [GR_OP_SIGMOID] = 4,
    [GR_OP_TANH] = 4,
    [GR_OP_GELU] = 8,
    [GR_OP_GELU_TANH] = 10,
};

static gr_status gr_act_infer(gr_graph *g, int node, const gr_cfg *at, const char *key, gr_error *err) {
    (void)at; (void)key; (void)err;
    gr_node *nd = &g->nodes[node];
    gr_tensor x = g->tensors[nd->in[0]];
    int y = gr_graph_add_tensor(g, g->layers[nd->layer].name, GR_TK_ACT, GR_F32, x.ndim, x.shape,
                                x.batched);
    nd = &g->nodes[node];
    nd->out[0] = y;
    nd->nout = 1;
    int64_t per = gr_tensor_sample_numel(&x);
    GR_ASSERT((gr_op_flags(nd->op) & GR_OPF_ACT) && gr_act_flops[nd->op] > 0);
    nd->flops = gr_act_flops[nd->op] * per;
    return GR_OK;
}

static void gr_act_backward(gr_graph *g, int node) {
    gr_node nd = g->nodes[node];
    int x = nd.in[0];
    if (!g->tensors[x].requires_grad) return;
    int saved = (gr_op_flags(nd.op) & GR_OPF_ACT_SAVES_X) ? x : nd.out[0];
    int dy = gr_graph_grad(g, nd.out[0]);
    int dx = gr_graph_grad(g, x);
    int in[2] = {dy, saved}, out[1] = {dx};
    int k = gr_graph_add_node(g, gr_op_bwd(nd.op), nd.layer, in, 2, out, 1);
    g->nodes[k].fwd = node;
    g->nodes[k].flops = nd.flops;
}

const gr_op_impl gr_op_impl_relu = {NULL, NULL, gr_act_infer, gr_act_backward};
const gr_op_impl gr_op_impl_sigmoid = {NULL, NULL, gr_act_infer, gr_act_backward};
const gr_op_impl gr_op_impl_tanh = {NULL, NULL, gr_act_infer, gr_act_backward};
const gr_op_impl gr_op_impl_gelu = {NULL, NULL, gr_act_infer, gr_act_backward};
const gr_op_impl gr_op_impl_gelu_tanh = {NULL, NULL, gr_act_infer, gr_act_backward};
