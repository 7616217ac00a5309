/* op_act.c — elementwise activations: relu, sigmoid, tanh, gelu (exact, erf).
 * relu/sigmoid/tanh differentiate through their output y; gelu through its
 * input x. */
#include "graph.h"

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
    nd->flops = nd->op == GR_OP_RELU ? per : nd->op == GR_OP_GELU ? 8 * per : 4 * per;
    return GR_OK;
}

static void gr_act_backward(gr_graph *g, int node) {
    gr_node nd = g->nodes[node];
    int x = nd.in[0];
    if (!g->tensors[x].requires_grad) return;
    gr_op bop = nd.op == GR_OP_RELU ? GR_OP_RELU_BWD : nd.op == GR_OP_SIGMOID ? GR_OP_SIGMOID_BWD
              : nd.op == GR_OP_TANH ? GR_OP_TANH_BWD : GR_OP_GELU_BWD;
    int saved = nd.op == GR_OP_GELU ? x : nd.out[0];
    int dy = gr_graph_grad(g, nd.out[0]);
    int dx = gr_graph_grad(g, x);
    int in[2] = {dy, saved}, out[1] = {dx};
    int k = gr_graph_add_node(g, bop, nd.layer, in, 2, out, 1);
    g->nodes[k].fwd = node;
    g->nodes[k].flops = nd.flops;
}

const gr_op_desc gr_op_desc_relu = {"relu", GR_OPF_LAYER, NULL, gr_act_infer, gr_act_backward};
const gr_op_desc gr_op_desc_sigmoid = {"sigmoid", GR_OPF_LAYER, NULL, gr_act_infer, gr_act_backward};
const gr_op_desc gr_op_desc_tanh = {"tanh", GR_OPF_LAYER, NULL, gr_act_infer, gr_act_backward};
const gr_op_desc gr_op_desc_gelu = {"gelu", GR_OPF_LAYER, NULL, gr_act_infer, gr_act_backward};
const gr_op_desc gr_op_desc_relu_bwd = {"relu_bwd", GR_OPF_BACKWARD, NULL, NULL, NULL};
const gr_op_desc gr_op_desc_sigmoid_bwd = {"sigmoid_bwd", GR_OPF_BACKWARD, NULL, NULL, NULL};
const gr_op_desc gr_op_desc_tanh_bwd = {"tanh_bwd", GR_OPF_BACKWARD, NULL, NULL, NULL};
const gr_op_desc gr_op_desc_gelu_bwd = {"gelu_bwd", GR_OPF_BACKWARD, NULL, NULL, NULL};
