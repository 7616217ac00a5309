/* op_dense.c — dense (PyTorch nn.Linear): y[n, units] = x[n, in] W[units, in]^T + b.
 * Backward: dx = dy W (only when x needs a gradient: the row's bwd op, dense_bwd_data),
 * dW += dy^T x, db += sum_n dy (dense_bwd_params).
 *
 * Tying (`tied: LAYER`, optionally `transpose: true`): the layer reads the
 * weight tensor of an earlier dense or embedding layer (a GR_OPF_TIEABLE row:
 * an embedding's [vocab, dim] is nn.Linear's [units, in], a GPT's LM head)
 * instead of making its own (its bias is its own). Used transposed, the
 * tensor it reads is stored [in, units] (attrs.weight_t): y = x W + b,
 * dx = dy W^T, dW += x^T dy, the kernels' transposed GEMMs. A parameter read
 * by several layers gets the sum of their gradients: each dense_bwd_params
 * (and an embedding's embedding_bwd) adds into the one grads slot
 * (autodiff.c).
 * Backward nodes carry the forward node's attrs, so kernels read weight_t
 * from their own node. */
#include "graph.h"

static const gr_attr_def gr_dense_attr_defs[] = {
    GR_ATTR("units", units, 1, 1 << 24, 0, GR_ATTR_REQUIRED),
    GR_ATTR("bias", bias, 0, 0, 1, 0),
    GR_ATTR("tied", tied, 0, 0, 0, 0),
    GR_ATTR("transpose", transpose, 0, 0, 0, 0),
};
static const gr_attr_table gr_dense_attrs =
    GR_ATTR_TABLE(gr_dense_attr_defs, "dense needs attributes, e.g. {units: 10}", NULL);

static gr_status gr_dense_check(gr_attrs *a, const gr_cfg *attrs, const char *key, gr_error *err) {
    if (a->transpose && !a->tied[0]) {
        const gr_cfg *v = gr_cfg_get(attrs, "transpose");
        char sub[700];
        snprintf(sub, sizeof sub, "%s.transpose", key);
        return gr_cfg_error(err, v ? v : attrs, sub, "only with tied (it says how the weight of the layer "
                            "named by tied is used), e.g. {units: 784, tied: enc, transpose: true}");
    }
    return GR_OK;
}

/* The weight a tied layer reads: its tied_layer's weight tensor, used as that
 * layer uses it (itself perhaps a transposed tied use; an embedding's
 * plainly), transposed once more when transpose is given. It must be
 * [units, in] as used, in = x's features. */
static gr_status gr_dense_tied_weight(gr_graph *g, int node, const gr_cfg *at, const char *key, int *w,
                                      bool *weight_t, gr_error *err) {
    const gr_node nd = g->nodes[node];
    const gr_node src = g->nodes[g->layers[nd.attrs.tied_layer].node];
    GR_ASSERT((gr_op_flags(src.op) & GR_OPF_TIEABLE) && src.nin >= 2);
    const gr_tensor wt = g->tensors[src.in[1]];
    const bool t = src.attrs.weight_t != nd.attrs.transpose;
    const gr_tensor *x = &g->tensors[nd.in[0]];
    const int64_t units = nd.attrs.units, fin = x->shape[x->ndim - 1];
    const int64_t r = t ? wt.shape[1] : wt.shape[0], c = t ? wt.shape[0] : wt.shape[1];
    if (r == units && c == fin) {
        *w = src.in[1];
        *weight_t = t;
        return GR_OK;
    }
    char sub[700], ws[64], used[96] = "";
    snprintf(sub, sizeof sub, "%s.tied", key);
    gr_shape_str(&wt, ws, sizeof ws);
    if (t) snprintf(used, sizeof used, " transposed, [%lld, %lld]", (long long)r, (long long)c);
    const bool other = c == units && r == fin; /* the other orientation would fit */
    return gr_cfg_error(err, at, sub, "layer '%s' needs a weight [%lld, %lld] ([units, in]: units %lld, input "
                        "[n, %lld]), but tied to '%s' it uses %s %s%s%s%s", g->layers[nd.layer].name,
                        (long long)units, (long long)fin, (long long)units, (long long)fin,
                        g->layers[nd.attrs.tied_layer].name, wt.name, ws, used, other ? "; it fits " : "",
                        other ? (nd.attrs.transpose ? "without transpose: true" : "with transpose: true") : "");
}

static gr_status gr_dense_infer(gr_graph *g, int node, const gr_cfg *at, const char *key, gr_error *err) {
    gr_node *nd = &g->nodes[node];
    const gr_tensor x = g->tensors[nd->in[0]];
    if (x.elem != GR_F32) {
        char buf[64];
        return gr_cfg_error(err, at, key, "dense takes a float input; '%s' is %s %s (integer ids need an embedding)",
                            x.name, gr_elem_name(x.elem), gr_shape_str_n(&x, buf, sizeof buf));
    }
    if (x.ndim < 2) {
        char buf[64];
        return gr_cfg_error(err, at, key, "dense needs a flat input [batch, features] (or [batch, ..., features]: "
                            "it applies to the last axis), got %s (put a flatten before it)",
                            gr_shape_str(&x, buf, sizeof buf));
    }
    const int layer = nd->layer; /* nd is read before the appends below, never after */
    const bool bias = nd->attrs.bias, tied = nd->attrs.tied[0] != '\0';
    /* the last axis: a [n, ..., F] input is n x ... rows of F features (nn.Linear) */
    int64_t units = nd->attrs.units, fin = x.shape[x.ndim - 1], rows = gr_tensor_sample_numel(&x) / fin;
    int64_t wshape[2] = {units, fin}, bshape[1] = {units}, yshape[GR_MAX_DIMS];
    for (int d = 0; d < x.ndim; d++) yshape[d] = x.shape[d];
    yshape[x.ndim - 1] = units;
    int w = -1;
    bool weight_t = false;
    if (tied) {
        gr_status st = gr_dense_tied_weight(g, node, at, key, &w, &weight_t, err);
        if (st) return st;
    } else {
        w = gr_graph_add_param(g, layer, "weight", 2, wshape);
    }
    int b = bias ? gr_graph_add_param(g, layer, "bias", 1, bshape) : -1;
    int y = gr_graph_add_tensor(g, g->layers[layer].name, GR_TK_ACT, GR_F32, x.ndim, yshape, true);
    nd = &g->nodes[node];
    nd->in[1] = w;
    nd->nin = 2;
    if (b >= 0) nd->in[nd->nin++] = b;
    nd->out[0] = y;
    nd->nout = 1;
    nd->attrs.weight_t = weight_t;
    nd->flops = rows * (2 * fin * units + (b >= 0 ? units : 0));
    return GR_OK;
}

static void gr_dense_backward(gr_graph *g, int node) {
    gr_node nd = g->nodes[node];
    int x = nd.in[0], w = nd.in[1], b = nd.nin > 2 ? nd.in[2] : -1;
    int dy = gr_graph_grad(g, nd.out[0]);
    const bool t = nd.attrs.weight_t;
    int64_t fin = g->tensors[w].shape[t ? 0 : 1], units = g->tensors[w].shape[t ? 1 : 0];
    const int64_t rows = gr_tensor_sample_numel(&g->tensors[x]) / fin; /* positions a sample ([n, ..., F]) */
    if (g->tensors[x].requires_grad) {
        int dx = gr_graph_grad(g, x);
        int in[2] = {dy, w}, out[1] = {dx};
        int k = gr_graph_add_node(g, gr_op_bwd(nd.op), nd.layer, in, 2, out, 1);
        g->nodes[k].fwd = node;
        g->nodes[k].attrs = nd.attrs;
        g->nodes[k].flops = rows * 2 * fin * units;
    }
    int dw = gr_graph_grad(g, w);
    int db = b >= 0 ? gr_graph_grad(g, b) : -1;
    int in[2] = {dy, x}, out[2] = {dw, db};
    int k = gr_graph_add_node(g, GR_OP_DENSE_BWD_PARAMS, nd.layer, in, 2, out, db >= 0 ? 2 : 1);
    g->nodes[k].fwd = node;
    g->nodes[k].attrs = nd.attrs;
    g->nodes[k].flops = rows * (2 * fin * units + (db >= 0 ? units : 0));
}

const gr_op_impl gr_op_impl_dense = {&gr_dense_attrs, gr_dense_check, gr_dense_infer, gr_dense_backward};
