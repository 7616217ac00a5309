/* op_join.c — the ops with several inputs, named in the layer's `input:`
 * list: add (PyTorch's x + y + ...: same shapes) and concat (torch.cat along
 * axis 1, the channels of [n, C, H, W] or the features of [n, F]).
 * Backward: add passes dy to every input unchanged (a view); concat hands
 * each input its slice of dy. The sums of gradients where one tensor feeds
 * several layers are add nodes too (autodiff.c). */
#include "graph.h"

#include <stdio.h>
#include <string.h>

static gr_status gr_join_inputs(const gr_graph *g, const gr_node *nd, const gr_cfg *at, const char *key,
                                const char *op, gr_error *err) {
    if (nd->nin < 2)
        return gr_cfg_error(err, at, key, "%s joins two or more layers: give them as a list, "
                            "e.g. input: [a, b]", op);
    for (int k = 0; k < nd->nin; k++)
        if (g->tensors[nd->in[k]].elem != GR_F32 || !g->tensors[nd->in[k]].batched)
            return gr_cfg_error(err, at, key, "%s: input %d is not an activation", op, k);
    return GR_OK;
}

static gr_status gr_add_infer(gr_graph *g, int node, const gr_cfg *at, const char *key, gr_error *err) {
    gr_node *nd = &g->nodes[node];
    gr_status st = gr_join_inputs(g, nd, at, key, "add", err);
    if (st) return st;
    const gr_tensor *a = &g->tensors[nd->in[0]];
    for (int k = 1; k < nd->nin; k++) {
        const gr_tensor *b = &g->tensors[nd->in[k]];
        bool same = a->ndim == b->ndim;
        for (int d = 0; same && d < a->ndim; d++) same = a->shape[d] == b->shape[d];
        if (!same) {
            char sa[64], sb[64];
            return gr_cfg_error(err, at, key, "add needs inputs of one shape, but '%s' is %s and '%s' is %s",
                                a->name, gr_shape_str(a, sa, sizeof sa), b->name, gr_shape_str(b, sb, sizeof sb));
        }
    }
    gr_tensor x = *a;
    int y = gr_graph_add_tensor(g, g->layers[nd->layer].name, GR_TK_ACT, GR_F32, x.ndim, x.shape, true);
    nd = &g->nodes[node];
    nd->out[0] = y;
    nd->nout = 1;
    nd->flops = (nd->nin - 1) * gr_tensor_sample_numel(&x);
    return GR_OK;
}

static void gr_add_backward(gr_graph *g, int node) {
    gr_node nd = g->nodes[node];
    int dy = gr_graph_grad(g, nd.out[0]);
    for (int k = 0; k < nd.nin; k++) {
        if (!g->tensors[nd.in[k]].requires_grad) continue;
        g->ad_slot = k; /* `input: [a, a]` reads a twice: two partials, summed into 2 dy */
        int dx = gr_graph_grad(g, nd.in[k]);
        g->ad_slot = 0;
        g->tensors[dx].alias_of = dy;
        int in[1] = {dy}, out[1] = {dx};
        int b = gr_graph_add_node(g, gr_op_bwd(nd.op), nd.layer, in, 1, out, 1);
        g->nodes[b].fwd = node;
    }
}

static const gr_attr_def gr_concat_attr_defs[] = {
    GR_ATTR("axis", axis, 1, 1, 1, 0),
};
static const gr_attr_table gr_concat_attrs =
    GR_ATTR_TABLE(gr_concat_attr_defs, "expected attributes like {axis: 1}", ", which must be 1");

static gr_status gr_concat_infer(gr_graph *g, int node, const gr_cfg *at, const char *key, gr_error *err) {
    gr_node *nd = &g->nodes[node];
    gr_status st = gr_join_inputs(g, nd, at, key, "concat", err);
    if (st) return st;
    gr_tensor a = g->tensors[nd->in[0]];
    int64_t shape[GR_MAX_DIMS];
    memcpy(shape, a.shape, sizeof shape);
    shape[1] = 0;
    for (int k = 0; k < nd->nin; k++) {
        const gr_tensor *b = &g->tensors[nd->in[k]];
        bool same = a.ndim == b->ndim && a.ndim >= 2;
        for (int d = 2; same && d < a.ndim; d++) same = a.shape[d] == b->shape[d];
        if (!same) {
            char sa[64], sb[64];
            return gr_cfg_error(err, at, key, "concat along axis 1 needs inputs that agree elsewhere, but "
                                "'%s' is %s and '%s' is %s", a.name, gr_shape_str(&a, sa, sizeof sa), b->name,
                                gr_shape_str(b, sb, sizeof sb));
        }
        shape[1] += b->shape[1];
    }
    int y = gr_graph_add_tensor(g, g->layers[nd->layer].name, GR_TK_ACT, GR_F32, a.ndim, shape, true);
    nd = &g->nodes[node];
    nd->out[0] = y;
    nd->nout = 1;
    return GR_OK;
}

static void gr_concat_backward(gr_graph *g, int node) {
    gr_node nd = g->nodes[node];
    int dy = gr_graph_grad(g, nd.out[0]);
    int64_t offset = 0;
    for (int k = 0; k < nd.nin; k++) {
        int64_t c = g->tensors[nd.in[k]].shape[1];
        if (g->tensors[nd.in[k]].requires_grad) {
            g->ad_slot = k; /* `input: [a, a]`: each slice its own partial */
            int dx = gr_graph_grad(g, nd.in[k]);
            g->ad_slot = 0;
            int in[1] = {dy}, out[1] = {dx};
            int b = gr_graph_add_node(g, gr_op_bwd(nd.op), nd.layer, in, 1, out, 1);
            g->nodes[b].fwd = node;
            g->nodes[b].attrs.offset = offset;
        }
        offset += c;
    }
}

const gr_op_impl gr_op_impl_add = {NULL, NULL, gr_add_infer, gr_add_backward};
const gr_op_impl gr_op_impl_concat = {&gr_concat_attrs, NULL, gr_concat_infer, gr_concat_backward};
