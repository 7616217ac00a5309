/* op_loss.c — the losses (GR_OPF_LOSS rows) and the metric (GR_OPF_METRIC)
 * of ops.def, emitted by the builder on the model's last output.
 *
 * A loss node reads in[0] = the prediction (fp32, batched, rank >= 2) and
 * in[1] = the target; it writes its saved tensors first (softmax CE: the
 * probabilities) and last a stats tensor (GR_TK_STAT, fp32, unbatched, [2]):
 * stats[0] = the loss summed over what it averages, stats[1] = how many
 * that is, so the reported loss is stats[0] / stats[1].
 *   softmax_cross_entropy: over the last axis of [n, ..., C] with int32
 *     targets [n, ...] (PyTorch's F.cross_entropy with the classes moved
 *     last): with label smoothing eps, target = (1-eps) onehot + eps/C and
 *     loss_t = -sum_c target_c log softmax(z_t)_c per token t. A target equal
 *     to ignore_index (-100) counts nowhere; count = the other tokens.
 *   mse: (pred - target)^2 per element, count = n * elements per sample.
 *   bce_with_logits: max(x,0) - x t + log1p(exp(-|x|)) per element, target
 *     in [0, 1] of the prediction's shape, count as mse.
 *
 * Gradient scaling. grad_scale (gr_exec_ctx) is 1 / (samples per optimizer
 * step): a backward turns the gradient of its micro-batch's per-sample mean
 * loss into its share of the step's mean, so micro-batch gradients sum to
 * the gradient of the whole batch's mean. mse and bce average each sample's
 * E elements first: dx = dloss/dx * grad_scale / E. Softmax CE averages over
 * the micro-batch's counted tokens as PyTorch does (the mean over
 * non-ignored tokens): dz_t = (softmax(z_t) - target_t) * grad_scale * n /
 * count for each counted token, 0 for an ignored one, where n is the
 * micro-batch's samples and count its counted tokens (stats[1] of the
 * forward, which the backward reads). For [n, C] logits, count is n and the
 * factor n / count is exactly 1, so the gradient is (p - target) *
 * grad_scale bit for bit as it always was. With one micro-batch per step
 * all three match PyTorch's reduction='mean' exactly up to rounding; with
 * several, each micro-batch's mean is weighted by its share of the samples.
 * A micro-batch whose tokens are all ignored has count 0: loss 0/0 (NaN, as
 * PyTorch) and a zero gradient.
 *
 * accuracy (a metric: no backward, autodiff never reaches it): in[0] =
 * logits [n, ..., C], in[1] = int32 targets [n, ...]; writes [correct,
 * count]: a token is correct when fewer than top_k logits rank above its
 * target's, ranking NaN above every number and, among equal values, the
 * lower column first, so top_k 1 counts exactly the first maximum softmax
 * cross-entropy's argmax picked before (torch.argmax). Targets equal to
 * ignore_index are not counted. */
#include "graph.h"

#include <stdio.h>

/* ---- shapes: infer checks the target against the prediction and adds the outputs ---- */

/* The prediction is [n, ...] of rank >= 2; a class target drops its last axis. */
static gr_status gr_loss_check_shapes(const gr_graph *g, const gr_node *nd, bool classes, const char *key,
                                      gr_error *err) {
    const gr_tensor *x = &g->tensors[nd->in[0]], *t = &g->tensors[nd->in[1]];
    const char *op = gr_op_name(nd->op);
    char xs[64], ts[64];
    if (x->ndim < 2 || !x->batched || x->elem != GR_F32)
        return gr_error_set(err, GR_ERR_USAGE, "%s: %s needs a prediction of shape [batch, ...] (rank 2 or more), "
                            "not %s", key, op, gr_shape_str_n(x, xs, sizeof xs));
    int want = classes ? x->ndim - 1 : x->ndim;
    bool same = t->ndim == want && t->batched && t->elem == (classes ? GR_I32 : GR_F32);
    for (int d = 0; same && d < want; d++) same = t->shape[d] == x->shape[d];
    if (!same)
        return gr_error_set(err, GR_ERR_USAGE, "%s: %s: the prediction is %s and the target %s %s; it needs %s "
                            "targets shaped like %s%s", key, op, gr_shape_str_n(x, xs, sizeof xs),
                            gr_elem_name(t->elem), gr_shape_str_n(t, ts, sizeof ts), classes ? "int32 class" : "fp32",
                            classes ? "the prediction without its last axis" : "the prediction",
                            classes ? " (the classes)" : "");
    return GR_OK;
}

/* The unbatched [2] stats tensor of node nd, named "<prefix>.stats". */
static int gr_loss_add_stats(gr_graph *g, const char *prefix) {
    char name[GR_TNAME_MAX];
    snprintf(name, sizeof name, "%s.stats", prefix);
    int64_t shape[1] = {2};
    return gr_graph_add_tensor(g, name, GR_TK_STAT, GR_F32, 1, shape, false);
}

/* flops per element of the prediction, forward; the backward takes about half */
static const int gr_loss_flops[GR_OP_COUNT] = {
    [GR_OP_SOFTMAX_CE] = 5, [GR_OP_MSE] = 3, [GR_OP_BCE_WITH_LOGITS] = 6, [GR_OP_ACCURACY] = 2,
};

static gr_status gr_loss_infer(gr_graph *g, int node, const gr_cfg *at, const char *key, gr_error *err) {
    (void)at;
    const gr_op op = g->nodes[node].op;
    const bool classes = op == GR_OP_SOFTMAX_CE || op == GR_OP_ACCURACY; /* the family's own ops */
    gr_status st = gr_loss_check_shapes(g, &g->nodes[node], classes, key, err);
    if (st) return st;
    gr_tensor x = g->tensors[g->nodes[node].in[0]];
    if (op == GR_OP_ACCURACY && g->nodes[node].attrs.top_k > x.shape[x.ndim - 1])
        return gr_error_set(err, GR_ERR_USAGE, "%s: accuracy: top_k %lld is more than the %lld classes", key,
                            (long long)g->nodes[node].attrs.top_k, (long long)x.shape[x.ndim - 1]);
    int outs[GR_MAX_OUT], nout = 0;
    if (op == GR_OP_SOFTMAX_CE) outs[nout++] = gr_graph_add_tensor(g, "loss.probs", GR_TK_ACT, GR_F32, x.ndim,
                                                                   x.shape, true);
    outs[nout++] = gr_loss_add_stats(g, op == GR_OP_ACCURACY ? gr_op_name(op) : "loss");
    gr_node *nd = &g->nodes[node];
    for (int k = 0; k < nout; k++) nd->out[k] = outs[k];
    nd->nout = nout;
    nd->flops = gr_loss_flops[op] * gr_tensor_sample_numel(&x);
    return GR_OK;
}

/* ---- backward: one node computing d(prediction) ---- */

/* softmax CE reads (probs, target, stats): stats[1] is the count its
 * gradient averages over; mse and bce read (prediction, target). */
static void gr_loss_backward(gr_graph *g, int node) {
    gr_node nd = g->nodes[node];
    int x = nd.in[0];
    if (!g->tensors[x].requires_grad) return;
    int dx = gr_graph_grad(g, x);
    int in[3] = {nd.in[0], nd.in[1], -1}, nin = 2, out[1] = {dx};
    if (nd.op == GR_OP_SOFTMAX_CE) {
        in[0] = nd.out[0];
        in[2] = nd.out[1];
        nin = 3;
    }
    int k = gr_graph_add_node(g, gr_op_bwd(nd.op), -1, in, nin, out, 1);
    g->nodes[k].fwd = node;
    g->nodes[k].attrs = nd.attrs;
    g->nodes[k].flops = 2 * gr_tensor_sample_numel(&g->tensors[x]);
}

/* ---- attributes: the builder reads them from train.loss (and the metric's keys) ---- */

static const gr_attr_def gr_sce_attr_defs[] = {
    GR_ATTR("label_smoothing", label_smoothing, 0.0, 1.0, 0.0, 0),
    GR_ATTR("ignore_index", ignore_index, -2147483648.0, 2147483647.0, -100, 0),
};
static const gr_attr_table gr_sce_attrs = GR_ATTR_TABLE(
    gr_sce_attr_defs, "softmax_cross_entropy takes attributes like {label_smoothing: 0.1, ignore_index: -100}", NULL);

static const gr_attr_def gr_accuracy_attr_defs[] = {
    GR_ATTR("top_k", top_k, 1, 1 << 24, 1, 0),
    GR_ATTR("ignore_index", ignore_index, -2147483648.0, 2147483647.0, -100, 0),
};
static const gr_attr_table gr_accuracy_attrs =
    GR_ATTR_TABLE(gr_accuracy_attr_defs, "accuracy takes attributes like {top_k: 5, ignore_index: -100}", NULL);

const gr_op_impl gr_op_impl_softmax_cross_entropy = {&gr_sce_attrs, NULL, gr_loss_infer, gr_loss_backward};
const gr_op_impl gr_op_impl_mse = {NULL, NULL, gr_loss_infer, gr_loss_backward};
const gr_op_impl gr_op_impl_bce_with_logits = {NULL, NULL, gr_loss_infer, gr_loss_backward};
/* a metric has no backward: autodiff visits a forward node only when a gradient
 * reaches its output (a loss's always), and nothing reads a metric's stats */
const gr_op_impl gr_op_impl_accuracy = {&gr_accuracy_attrs, NULL, gr_loss_infer, NULL};
