/* op_dense.c — dense (PyTorch nn.Linear): y[n, units] = x[n, in] W[units, in]^T + b.
 * Backward: dx = dy W (only when x needs a gradient), dW += dy^T x, db += sum_n dy. */
#include "graph.h"

#include <stdio.h>
#include <string.h>

static gr_status gr_dense_parse(gr_attrs *a, const gr_cfg *attrs, const char *key, gr_error *err) {
    a->bias = true;
    if (!attrs || attrs->kind != GR_CFG_MAP)
        return gr_cfg_error(err, attrs, key, "dense needs attributes, e.g. {units: 10}");
    bool have_units = false;
    for (int i = 0; i < attrs->n; i++) {
        char sub[300];
        snprintf(sub, sizeof sub, "%s.%s", key, attrs->keys[i]);
        gr_status st;
        if (strcmp(attrs->keys[i], "units") == 0) {
            st = gr_cfg_int(attrs->items[i], sub, 1, (int64_t)1 << 24, &a->units, err);
            have_units = true;
        } else if (strcmp(attrs->keys[i], "bias") == 0) {
            st = gr_cfg_bool(attrs->items[i], sub, &a->bias, err);
        } else {
            st = gr_attr_unknown(err, attrs, i, sub, "dense takes units, bias");
        }
        if (st) return st;
    }
    if (!have_units) return gr_cfg_error(err, attrs, key, "units: required attribute missing");
    return GR_OK;
}

static gr_status gr_dense_infer(gr_graph *g, int node, const gr_cfg *at, const char *key, gr_error *err) {
    gr_node *nd = &g->nodes[node];
    const gr_tensor x = g->tensors[nd->in[0]];
    if (x.ndim != 2) {
        char buf[64];
        return gr_cfg_error(err, at, key, "dense needs a flat input [batch, features], got %s "
                            "(put a flatten before it)", gr_shape_str(&x, buf, sizeof buf));
    }
    int layer = nd->layer;
    int64_t units = nd->attrs.units, fin = x.shape[1];
    int64_t wshape[2] = {units, fin}, bshape[1] = {units}, yshape[2] = {x.shape[0], units};
    int w = gr_graph_add_param(g, layer, "weight", 2, wshape);
    int b = nd->attrs.bias ? gr_graph_add_param(g, layer, "bias", 1, bshape) : -1;
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
        int k = gr_graph_add_node(g, GR_OP_DENSE_BWD_DATA, nd.layer, in, 2, out, 1);
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

const gr_op_desc gr_op_desc_dense = {"dense", GR_OPF_LAYER, gr_dense_parse, gr_dense_infer,
                                     gr_dense_backward};
const gr_op_desc gr_op_desc_dense_bwd_data = {"dense_bwd_data", GR_OPF_BACKWARD, NULL, NULL, NULL};
const gr_op_desc gr_op_desc_dense_bwd_params = {"dense_bwd_params", GR_OPF_BACKWARD, NULL, NULL, NULL};
