/* op_dense.c — dense (PyTorch nn.Linear): y[n, units] = x[n, in] W[units, in]^T + b.
 * Backward: dx = dy W (only when x needs a gradient: the row's bwd op, dense_bwd_data),
 * dW += dy^T x, db += sum_n dy (dense_bwd_params). */
#include "graph.h"

static const gr_attr_def gr_dense_attr_defs[] = {
    GR_ATTR("units", units, 1, 1 << 24, 0, GR_ATTR_REQUIRED),
    GR_ATTR("bias", bias, 0, 0, 1, 0),
};
static const gr_attr_table gr_dense_attrs =
    GR_ATTR_TABLE(gr_dense_attr_defs, "dense needs attributes, e.g. {units: 10}", NULL);

static gr_status gr_dense_infer(gr_graph *g, int node, const gr_cfg *at, const char *key, gr_error *err) {
    gr_node *nd = &g->nodes[node];
    const gr_tensor x = g->tensors[nd->in[0]];
    if (x.ndim != 2) {
        char buf[64];
        return gr_cfg_error(err, at, key, "dense needs a flat input [batch, features], got %s "
                            "(put a flatten before it)", gr_shape_str(&x, buf, sizeof buf));
    }
    const int layer = nd->layer; /* nd is read before the appends below, never after */
    const bool bias = nd->attrs.bias;
    int64_t units = nd->attrs.units, fin = x.shape[1];
    int64_t wshape[2] = {units, fin}, bshape[1] = {units}, yshape[2] = {x.shape[0], units};
    int w = gr_graph_add_param(g, layer, "weight", 2, wshape);
    int b = bias ? gr_graph_add_param(g, layer, "bias", 1, bshape) : -1;
    int y = gr_graph_add_tensor(g, g->layers[layer].name, GR_TK_ACT, GR_F32, 2, yshape, true);
    nd = &g->nodes[node];
    nd->in[1] = w;
    nd->nin = 2;
    if (b >= 0) nd->in[nd->nin++] = b;
    nd->out[0] = y;
    nd->nout = 1;
    nd->flops = 2 * fin * units + (b >= 0 ? units : 0);
    return GR_OK;
}

static void gr_dense_backward(gr_graph *g, int node) {
    gr_node nd = g->nodes[node];
    int x = nd.in[0], w = nd.in[1], b = nd.nin > 2 ? nd.in[2] : -1;
    int dy = gr_graph_grad(g, nd.out[0]);
    int64_t fin = g->tensors[w].shape[1], units = g->tensors[w].shape[0];
    if (g->tensors[x].requires_grad) {
        int dx = gr_graph_grad(g, x);
        int in[2] = {dy, w}, out[1] = {dx};
        int k = gr_graph_add_node(g, gr_op_bwd(nd.op), nd.layer, in, 2, out, 1);
        g->nodes[k].fwd = node;
        g->nodes[k].flops = 2 * fin * units;
    }
    int dw = gr_graph_grad(g, w);
    int db = b >= 0 ? gr_graph_grad(g, b) : -1;
    int in[2] = {dy, x}, out[2] = {dw, db};
    int k = gr_graph_add_node(g, GR_OP_DENSE_BWD_PARAMS, nd.layer, in, 2, out, db >= 0 ? 2 : 1);
    g->nodes[k].fwd = node;
    g->nodes[k].flops = 2 * fin * units + (db >= 0 ? units : 0);
}

const gr_op_impl gr_op_impl_dense = {&gr_dense_attrs, NULL, gr_dense_infer, gr_dense_backward};
