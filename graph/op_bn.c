/* op_bn.c — batchnorm (PyTorch nn.BatchNorm2d on [n, C, H, W], nn.BatchNorm1d
 * on [n, C]): per channel c over the m = n*H*W values of a batch,
 *   y = (x - mean) * invstd * weight[c] + bias[c],  invstd = 1 / sqrt(var + eps).
 * Training uses the batch mean and biased variance and updates the running
 * stats (running = (1 - momentum) * running + momentum * batch, the variance
 * unbiased by m / (m - 1)); eval uses the running stats and changes nothing.
 *
 * Node layout:
 *   batchnorm      in  {x, weight, bias, running_mean, running_var}   out {y, saved}
 *   batchnorm_bwd  in  {dy, x, weight, saved}   out {dweight, dbias, dx (when x needs it)}
 * The forward kernel writes the running stats although they are inputs (they
 * live in the params arena, outside any liveness plan). saved [2, C] holds
 * the mean and invstd the forward used, for the backward. */
#include "graph.h"

#include <stdio.h>

static const gr_attr_def gr_bn_attr_defs[] = {
    GR_ATTR("momentum", momentum, 0.0, 1.0, 0.1, 0),
    GR_ATTR("eps", eps, 0.0, 1.0, 1e-5, GR_ATTR_POSITIVE),
};
static const gr_attr_table gr_bn_attrs =
    GR_ATTR_TABLE(gr_bn_attr_defs, "expected a map of attributes, e.g. {momentum: 0.1, eps: 1e-5}", NULL);

static gr_status gr_bn_infer(gr_graph *g, int node, const gr_cfg *at, const char *key, gr_error *err) {
    gr_node *nd = &g->nodes[node];
    const gr_tensor x = g->tensors[nd->in[0]];
    if (x.ndim != 4 && x.ndim != 2) {
        char buf[96];
        return gr_cfg_error(err, at, key, "batchnorm needs [batch, C, H, W] or [batch, C] input, got %s",
                            gr_shape_str_n(&x, buf, sizeof buf));
    }
    int64_t c = x.shape[1], per_channel = gr_tensor_sample_numel(&x) / c;
    if (x.shape[0] * per_channel < 2)
        return gr_cfg_error(err, at, key, "batchnorm needs more than one value per channel in training "
                            "(micro-batch %lld x %lld per sample)", (long long)x.shape[0],
                            (long long)per_channel);
    int layer = nd->layer;
    int64_t cshape[1] = {c}, sshape[2] = {2, c};
    int w = gr_graph_add_param(g, layer, "weight", 1, cshape);
    int b = gr_graph_add_param(g, layer, "bias", 1, cshape);
    int rm = gr_graph_add_state(g, layer, "running_mean", 1, cshape);
    int rv = gr_graph_add_state(g, layer, "running_var", 1, cshape);
    g->tensors[w].init = GR_INIT_ONE; /* as nn.BatchNorm: running_mean (a state) 0 too */
    g->tensors[b].init = GR_INIT_ZERO;
    g->tensors[rv].init = GR_INIT_ONE;
    const char *lname = g->layers[layer].name;
    int y = gr_graph_add_tensor(g, lname, GR_TK_ACT, GR_F32, x.ndim, x.shape, true);
    char sname[GR_NAME_MAX + 8];
    snprintf(sname, sizeof sname, "%s.saved", lname);
    int saved = gr_graph_add_tensor(g, sname, GR_TK_ACT, GR_F32, 2, sshape, false);
    nd = &g->nodes[node];
    nd->in[1] = w;
    nd->in[2] = b;
    nd->in[3] = rm;
    nd->in[4] = rv;
    nd->nin = 5;
    nd->out[0] = y;
    nd->out[1] = saved;
    nd->nout = 2;
    nd->min_batch = (2 + per_channel - 1) / per_channel; /* at another micro-batch (gr_graph_set_batch) */
    /* statistics (sum, sum of squares) and the affine map: ~ 5 per element */
    nd->flops = 5 * gr_tensor_sample_numel(&x);
    return GR_OK;
}

static void gr_bn_backward(gr_graph *g, int node) {
    gr_node nd = g->nodes[node];
    int x = nd.in[0], w = nd.in[1], b = nd.in[2];
    int dy = gr_graph_grad(g, nd.out[0]);
    int dw = gr_graph_grad(g, w), db = gr_graph_grad(g, b);
    int in[4] = {dy, x, w, nd.out[1]}, out[3] = {dw, db, -1};
    int nout = 2;
    if (g->tensors[x].requires_grad) out[nout++] = gr_graph_grad(g, x);
    int k = gr_graph_add_node(g, gr_op_bwd(nd.op), nd.layer, in, 4, out, nout);
    g->nodes[k].fwd = node;
    g->nodes[k].attrs = nd.attrs;
    /* sums of dy and dy*xhat, then dx: ~ 4 + 4 per element */
    g->nodes[k].flops = (nout > 2 ? 8 : 4) * gr_tensor_sample_numel(&g->tensors[x]);
}

const gr_op_impl gr_op_impl_batchnorm = {&gr_bn_attrs, NULL, gr_bn_infer, gr_bn_backward};
