/* op_loss.c — softmax cross-entropy with label smoothing (PyTorch's
 * F.cross_entropy(label_smoothing=eps)): target = (1-eps) onehot + eps/K,
 * loss_i = -sum_k target_k log softmax(z_i)_k. Forward writes the softmax
 * (saved for backward) and stats = [sum of loss_i, correct argmax count];
 * backward: dz_i = (softmax(z_i) - target_i) * grad_scale, where grad_scale
 * is 1 / (samples per optimizer step), so micro-batch gradients sum to the
 * gradient of the whole batch's mean loss. */
#include "graph.h"

static void gr_softmax_ce_backward(gr_graph *g, int node) {
    gr_node nd = g->nodes[node];
    int z = nd.in[0];
    if (!g->tensors[z].requires_grad) return;
    int dz = gr_graph_grad(g, z);
    int in[2] = {nd.out[0], nd.in[1]}, out[1] = {dz};
    int k = gr_graph_add_node(g, GR_OP_SOFTMAX_CE_BWD, -1, in, 2, out, 1);
    g->nodes[k].fwd = node;
    g->nodes[k].attrs = nd.attrs;
    g->nodes[k].flops = 2 * g->tensors[z].shape[1];
}

const gr_op_desc gr_op_desc_softmax_cross_entropy = {"softmax_cross_entropy", GR_OPF_LOSS, NULL, NULL,
                                                     gr_softmax_ce_backward};
const gr_op_desc gr_op_desc_softmax_cross_entropy_bwd = {"softmax_cross_entropy_bwd", GR_OPF_BACKWARD,
                                                         NULL, NULL, NULL};
