/* op_pool.c — maxpool, avgpool, global_avgpool on [n, C, H, W] (PyTorch
 * nn.MaxPool2d, nn.AvgPool2d with ceil_mode=False, nn.AdaptiveAvgPool2d(1)):
 *   Ho = (H + 2*ph - kh) / sh + 1, Wo likewise; global_avgpool gives [n, C, 1, 1].
 * maxpool pads with -inf and saves the argmax of every window (its flat
 * index h*W + w within the input plane, GR_I32, as PyTorch's indices) as a
 * second output; its backward routes dy there. avgpool divides by kh*kw
 * (count_include_pad) or by the window's in-bounds element count.
 * Backward nodes carry the forward node's attrs. */
#include "graph.h"

#include <stdio.h>

/* maxpool {kernel, stride: kernel, padding: 0}; avgpool adds count_include_pad: true.
 * stride 0 (never given: it is at least 1) stands for the kernel until gr_pool_check. */
static const gr_attr_def gr_maxpool_attr_defs[] = {
    GR_ATTR("kernel", kernel, 1, 1 << 20, 0, GR_ATTR_REQUIRED),
    GR_ATTR("stride", stride, 1, 1 << 20, 0, 0),
    GR_ATTR("padding", padding, 0, 1 << 20, 0, 0),
};
static const gr_attr_def gr_avgpool_attr_defs[] = {
    GR_ATTR("kernel", kernel, 1, 1 << 20, 0, GR_ATTR_REQUIRED),
    GR_ATTR("stride", stride, 1, 1 << 20, 0, 0),
    GR_ATTR("padding", padding, 0, 1 << 20, 0, 0),
    GR_ATTR("count_include_pad", count_include_pad, 0, 0, 1, 0),
};
static const gr_attr_table gr_maxpool_attrs =
    GR_ATTR_TABLE(gr_maxpool_attr_defs, "maxpool needs attributes, e.g. {kernel: 2}", NULL);
static const gr_attr_table gr_avgpool_attrs =
    GR_ATTR_TABLE(gr_avgpool_attr_defs, "avgpool needs attributes, e.g. {kernel: 2}", NULL);

static gr_status gr_pool_check(gr_attrs *a, const gr_cfg *attrs, const char *key, gr_error *err) {
    if (a->stride[0] == 0) {
        a->stride[0] = a->kernel[0];
        a->stride[1] = a->kernel[1];
    }
    /* as PyTorch: a window must never lie wholly in the padding */
    for (int d = 0; d < 2; d++)
        if (a->padding[d] > a->kernel[d] / 2)
            return gr_cfg_error(err, attrs, key, "padding %lld is more than half the kernel %lld "
                                "(it must be at most %lld)", (long long)a->padding[d],
                                (long long)a->kernel[d], (long long)(a->kernel[d] / 2));
    return GR_OK;
}

/* Per pooling op: whether it saves the argmax of each window (a second
 * output, which its backward reads to route dy). */
static const struct gr_pool {
    bool argmax;
} gr_pools[GR_OP_COUNT] = {
    [GR_OP_MAXPOOL] = {true},
};

static gr_status gr_pool_need_4d(const gr_graph *g, int node, const gr_cfg *at, const char *key, gr_error *err) {
    const gr_node *nd = &g->nodes[node];
    const gr_tensor *x = &g->tensors[nd->in[0]];
    if (x->ndim == 4) return GR_OK;
    char buf[96];
    return gr_cfg_error(err, at, key, "%s needs [batch, C, H, W] input, got %s", gr_op_name(nd->op),
                        gr_shape_str_n(x, buf, sizeof buf));
}

/* maxpool and avgpool: y [n, C, Ho, Wo] (+ maxpool's argmax, same shape, int32). */
static gr_status gr_pool_infer(gr_graph *g, int node, const gr_cfg *at, const char *key, gr_error *err) {
    gr_status st = gr_pool_need_4d(g, node, at, key, err);
    if (st) return st;
    gr_node *nd = &g->nodes[node];
    const gr_attrs *a = &nd->attrs;
    const gr_tensor x = g->tensors[nd->in[0]];
    int64_t c = x.shape[1], h = x.shape[2], w = x.shape[3];
    int64_t hp = h + 2 * a->padding[0], wp = w + 2 * a->padding[1];
    if (a->kernel[0] > hp || a->kernel[1] > wp)
        return gr_cfg_error(err, at, key, "kernel %lldx%lld is larger than the padded input %lldx%lld "
                            "(input %lldx%lld, padding [%lld, %lld])",
                            (long long)a->kernel[0], (long long)a->kernel[1], (long long)hp, (long long)wp,
                            (long long)h, (long long)w, (long long)a->padding[0], (long long)a->padding[1]);
    int64_t ho = (hp - a->kernel[0]) / a->stride[0] + 1, wo = (wp - a->kernel[1]) / a->stride[1] + 1;
    int64_t yshape[4] = {x.shape[0], c, ho, wo};
    const char *lname = g->layers[nd->layer].name;
    bool is_max = gr_pools[nd->op].argmax;
    int y = gr_graph_add_tensor(g, lname, GR_TK_ACT, GR_F32, 4, yshape, true);
    int idx = -1;
    if (is_max) {
        char iname[GR_NAME_MAX + 8];
        snprintf(iname, sizeof iname, "%s.argmax", lname);
        idx = gr_graph_add_tensor(g, iname, GR_TK_ACT, GR_I32, 4, yshape, true);
    }
    nd = &g->nodes[node];
    nd->out[0] = y;
    nd->nout = 1;
    if (is_max) nd->out[nd->nout++] = idx;
    nd->flops = c * ho * wo * a->kernel[0] * a->kernel[1]; /* one compare or add per window element */
    return GR_OK;
}

static gr_status gr_global_avgpool_infer(gr_graph *g, int node, const gr_cfg *at, const char *key,
                                         gr_error *err) {
    gr_status st = gr_pool_need_4d(g, node, at, key, err);
    if (st) return st;
    gr_node *nd = &g->nodes[node];
    const gr_tensor x = g->tensors[nd->in[0]];
    int64_t yshape[4] = {x.shape[0], x.shape[1], 1, 1};
    int y = gr_graph_add_tensor(g, g->layers[nd->layer].name, GR_TK_ACT, GR_F32, 4, yshape, true);
    nd = &g->nodes[node];
    nd->out[0] = y;
    nd->nout = 1;
    nd->flops = gr_tensor_sample_numel(&x);
    return GR_OK;
}

/* maxpool_bwd: in {dy, argmax}; avgpool_bwd, global_avgpool_bwd: in {dy}; out {dx}. */
static void gr_pool_backward(gr_graph *g, int node) {
    gr_node nd = g->nodes[node];
    if (!g->tensors[nd.in[0]].requires_grad) return;
    bool argmax = gr_pools[nd.op].argmax;
    int dy = gr_graph_grad(g, nd.out[0]);
    int dx = gr_graph_grad(g, nd.in[0]);
    int in[2] = {dy, argmax ? nd.out[1] : -1}, out[1] = {dx};
    int k = gr_graph_add_node(g, gr_op_bwd(nd.op), nd.layer, in, argmax ? 2 : 1, out, 1);
    g->nodes[k].fwd = node;
    g->nodes[k].attrs = nd.attrs;
    /* the argmax routes each dy to one place: one add per output; the others
     * spread each output over its window: as many as the forward */
    g->nodes[k].flops = argmax ? gr_tensor_sample_numel(&g->tensors[nd.out[0]]) : nd.flops;
}

const gr_op_impl gr_op_impl_maxpool = {&gr_maxpool_attrs, gr_pool_check, gr_pool_infer, gr_pool_backward};
const gr_op_impl gr_op_impl_avgpool = {&gr_avgpool_attrs, gr_pool_check, gr_pool_infer, gr_pool_backward};
const gr_op_impl gr_op_impl_global_avgpool = {NULL, NULL, gr_global_avgpool_infer, gr_pool_backward};
