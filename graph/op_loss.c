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
    int k = gr_graph_add_node(g, gr_op_bwd(nd.op), -1, in, 2, out, 1);
    g->nodes[k].fwd = node;
    g->nodes[k].attrs = nd.attrs;
    g->nodes[k].flops = 2 * g->tensors[z].shape[1];
}

/* built by graph/build.c from train.loss, not from a layer: no attributes, no infer */
const gr_op_impl gr_op_impl_softmax_cross_entropy = {NULL, NULL, NULL, gr_softmax_ce_backward};
