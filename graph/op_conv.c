/* op_conv.c — conv (PyTorch nn.Conv2d):
 *   y[n, F, Ho, Wo] = conv(x[n, C, H, W], W[F, C/groups, kh, kw]) + b[F],
 *   Ho = (H + 2*ph - kh) / sh + 1, Wo likewise.
 * Backward: dx = conv_bwd_data(dy, W) (only when x needs a gradient: the
 * row's bwd op);
 * dW += conv_bwd_params(dy, x), db += sum over n, Ho, Wo of dy.
 * Backward nodes carry the forward node's attrs, so kernels read stride,
 * padding and groups from their own node. */
#include "graph.h"

static const gr_attr_def gr_conv_attr_defs[] = {
    GR_ATTR("filters", filters, 1, 1 << 20, 0, GR_ATTR_REQUIRED),
    GR_ATTR("kernel", kernel, 1, 1 << 20, 0, GR_ATTR_REQUIRED),
    GR_ATTR("stride", stride, 1, 1 << 20, 1, 0),
    GR_ATTR("padding", padding, 0, 1 << 20, 0, 0),
    GR_ATTR("groups", groups, 1, 1 << 20, 1, 0),
    GR_ATTR("bias", bias, 0, 0, 1, 0),
};
static const gr_attr_table gr_conv_attrs =
    GR_ATTR_TABLE(gr_conv_attr_defs, "conv needs attributes, e.g. {filters: 64, kernel: 3}", NULL);

static gr_status gr_conv_check(gr_attrs *a, const gr_cfg *attrs, const char *key, gr_error *err) {
    if (a->filters % a->groups != 0)
        return gr_cfg_error(err, attrs, key, "filters %lld are not divisible by groups %lld",
                            (long long)a->filters, (long long)a->groups);
    return GR_OK;
}

static gr_status gr_conv_infer(gr_graph *g, int node, const gr_cfg *at, const char *key, gr_error *err) {
    gr_node *nd = &g->nodes[node];
    const gr_attrs *a = &nd->attrs;
    const gr_tensor x = g->tensors[nd->in[0]];
    if (x.ndim != 4) {
        char buf[96];
        return gr_cfg_error(err, at, key, "conv needs [batch, C, H, W] input, got %s",
                            gr_shape_str_n(&x, buf, sizeof buf));
    }
    int64_t c = x.shape[1], h = x.shape[2], w = x.shape[3], f = a->filters, grp = a->groups;
    if (c % grp != 0)
        return gr_cfg_error(err, at, key, "input channels %lld are not divisible by groups %lld",
                            (long long)c, (long long)grp);
    int64_t hp = h + 2 * a->padding[0], wp = w + 2 * a->padding[1];
    if (a->kernel[0] > hp || a->kernel[1] > wp)
        return gr_cfg_error(err, at, key, "kernel %lldx%lld is larger than the padded input %lldx%lld "
                            "(input %lldx%lld, padding [%lld, %lld])",
                            (long long)a->kernel[0], (long long)a->kernel[1], (long long)hp, (long long)wp,
                            (long long)h, (long long)w, (long long)a->padding[0], (long long)a->padding[1]);
    int64_t ho = (hp - a->kernel[0]) / a->stride[0] + 1, wo = (wp - a->kernel[1]) / a->stride[1] + 1;
    int layer = nd->layer;
    int64_t wshape[4] = {f, c / grp, a->kernel[0], a->kernel[1]}, bshape[1] = {f};
    int64_t yshape[4] = {x.shape[0], f, ho, wo};
    bool bias = a->bias;
    int wt = gr_graph_add_param(g, layer, "weight", 4, wshape);
    int b = bias ? gr_graph_add_param(g, layer, "bias", 1, bshape) : -1;
    int y = gr_graph_add_tensor(g, g->layers[layer].name, GR_TK_ACT, GR_F32, 4, yshape, true);
    nd = &g->nodes[node];
    nd->in[1] = wt;
    nd->nin = 2;
    if (b >= 0) nd->in[nd->nin++] = b;
    nd->out[0] = y;
    nd->nout = 1;
    int64_t macs = f * (c / grp) * a->kernel[0] * a->kernel[1] * ho * wo;
    nd->flops = 2 * macs + (b >= 0 ? f * ho * wo : 0);
    return GR_OK;
}

static void gr_conv_backward(gr_graph *g, int node) {
    gr_node nd = g->nodes[node];
    int x = nd.in[0], w = nd.in[1], b = nd.nin > 2 ? nd.in[2] : -1;
    int dy = gr_graph_grad(g, nd.out[0]);
    const gr_tensor *yt = &g->tensors[nd.out[0]];
    int64_t per_out = yt->shape[1] * yt->shape[2] * yt->shape[3]; /* F * Ho * Wo */
    int64_t macs = (nd.flops - (b >= 0 ? per_out : 0)) / 2;
    if (g->tensors[x].requires_grad) {
        int dx = gr_graph_grad(g, x);
        int in[2] = {dy, w}, out[1] = {dx};
        int k = gr_graph_add_node(g, gr_op_bwd(nd.op), nd.layer, in, 2, out, 1);
        g->nodes[k].fwd = node;
        g->nodes[k].attrs = nd.attrs;
        g->nodes[k].flops = 2 * macs;
    }
    int dw = gr_graph_grad(g, w);
    int db = b >= 0 ? gr_graph_grad(g, b) : -1;
    int in[2] = {dy, x}, out[2] = {dw, db};
    int k = gr_graph_add_node(g, GR_OP_CONV_BWD_PARAMS, nd.layer, in, 2, out, db >= 0 ? 2 : 1);
    g->nodes[k].fwd = node;
    g->nodes[k].attrs = nd.attrs;
    g->nodes[k].flops = 2 * macs + (db >= 0 ? per_out : 0);
}

const gr_op_impl gr_op_impl_conv = {&gr_conv_attrs, gr_conv_check, gr_conv_infer, gr_conv_backward};
