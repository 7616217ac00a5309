/* op_join.c — the ops with several inputs, named in the layer's `input:`
 * list: add (PyTorch's x + y + ...), mul (x * y) and concat (torch.cat along
 * any axis but the batch; axis 1 by default, the channels of [n, C, H, W]
 * or the features of [n, F]; negative from the end).
 * add and mul broadcast by NumPy's rules on the full tensors: every input
 * carries the batch axis first, so they have one rank, and along each other
 * axis the sizes agree or one is 1 (reshape adds axes of 1).
 * Backward: add passes dy to every input of the output's shape unchanged (a
 * view) and sums it over the broadcast axes for the others (add_bwd_reduce);
 * mul_bwd gives each input dy times the other, summed likewise; concat hands
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

/* The broadcast shape of nd's inputs into shape (NumPy's rules; one rank). */
static gr_status gr_bcast_shape(const gr_graph *g, const gr_node *nd, const gr_cfg *at, const char *key,
                                const char *op, int64_t shape[GR_MAX_DIMS], gr_error *err) {
    const gr_tensor *a = &g->tensors[nd->in[0]];
    memcpy(shape, a->shape, sizeof a->shape);
    for (int k = 1; k < nd->nin; k++) {
        const gr_tensor *b = &g->tensors[nd->in[k]];
        bool ok = a->ndim == b->ndim;
        for (int d = 1; ok && d < a->ndim; d++) {
            ok = shape[d] == b->shape[d] || shape[d] == 1 || b->shape[d] == 1;
            if (ok && b->shape[d] != 1) shape[d] = b->shape[d];
        }
        if (!ok) {
            char sa[64], sb[64];
            return gr_cfg_error(err, at, key, "%s cannot broadcast '%s' %s with '%s' %s (NumPy's rules on the "
                                "full tensors, batch first: one rank, and along each axis equal sizes or a 1)",
                                op, a->name, gr_shape_str_n(a, sa, sizeof sa), b->name,
                                gr_shape_str_n(b, sb, sizeof sb));
        }
    }
    return GR_OK;
}

/* add and mul: the output has the inputs' broadcast shape */
static gr_status gr_bcast_infer(gr_graph *g, int node, const gr_cfg *at, const char *key, const char *op,
                                gr_error *err) {
    gr_node *nd = &g->nodes[node];
    gr_status st = gr_join_inputs(g, nd, at, key, op, err);
    if (st) return st;
    int64_t shape[GR_MAX_DIMS];
    if ((st = gr_bcast_shape(g, nd, at, key, op, shape, err))) return st;
    const int ndim = g->tensors[nd->in[0]].ndim;
    int y = gr_graph_add_tensor(g, g->layers[nd->layer].name, GR_TK_ACT, GR_F32, ndim, shape, true);
    nd = &g->nodes[node];
    nd->out[0] = y;
    nd->nout = 1;
    nd->flops = (nd->nin - 1) * gr_tensor_sample_numel(&g->tensors[y]);
    return GR_OK;
}

static gr_status gr_add_infer(gr_graph *g, int node, const gr_cfg *at, const char *key, gr_error *err) {
    return gr_bcast_infer(g, node, at, key, "add", err);
}

static bool gr_same_shape(const gr_tensor *a, const gr_tensor *b) {
    bool same = a->ndim == b->ndim;
    for (int d = 0; same && d < a->ndim; d++) same = a->shape[d] == b->shape[d];
    return same;
}

static void gr_add_backward(gr_graph *g, int node) {
    gr_node nd = g->nodes[node];
    int dy = gr_graph_grad(g, nd.out[0]);
    for (int k = 0; k < nd.nin; k++) {
        if (!g->tensors[nd.in[k]].requires_grad) continue;
        g->ad_slot = k; /* `input: [a, a]` reads a twice: two partials, summed into 2 dy */
        int dx = gr_graph_grad(g, nd.in[k]);
        g->ad_slot = 0;
        /* an input of the output's shape: dy itself; a broadcast one: dy summed over its broadcast axes */
        const bool same = gr_same_shape(&g->tensors[nd.in[k]], &g->tensors[nd.out[0]]);
        if (same) g->tensors[dx].alias_of = dy;
        int in[1] = {dy}, out[1] = {dx};
        int b = gr_graph_add_node(g, same ? gr_op_bwd(nd.op) : GR_OP_ADD_BWD_REDUCE, nd.layer, in, 1, out, 1);
        g->nodes[b].fwd = node;
        if (!same) g->nodes[b].flops = gr_tensor_sample_numel(&g->tensors[dy]);
    }
}

/* ---- mul ---- */

static gr_status gr_mul_infer(gr_graph *g, int node, const gr_cfg *at, const char *key, gr_error *err) {
    if (g->nodes[node].nin != 2)
        return gr_cfg_error(err, at, key, "mul multiplies two layers: give them as a list, e.g. input: [a, b]");
    return gr_bcast_infer(g, node, at, key, "mul", err);
}

/* d input k = dy * the other input, summed over k's broadcast axes */
static void gr_mul_backward(gr_graph *g, int node) {
    gr_node nd = g->nodes[node];
    int dy = gr_graph_grad(g, nd.out[0]);
    for (int k = 0; k < 2; k++) {
        if (!g->tensors[nd.in[k]].requires_grad) continue;
        g->ad_slot = k; /* `input: [a, a]`: a partial per read, summed into 2 a dy */
        int dx = gr_graph_grad(g, nd.in[k]);
        g->ad_slot = 0;
        int in[2] = {dy, nd.in[1 - k]}, out[1] = {dx};
        int b = gr_graph_add_node(g, gr_op_bwd(nd.op), nd.layer, in, 2, out, 1);
        g->nodes[b].fwd = node;
        g->nodes[b].flops = 2 * gr_tensor_sample_numel(&g->tensors[dy]);
    }
}

static const gr_attr_def gr_concat_attr_defs[] = {
    GR_ATTR("axis", axis, -GR_MAX_DIMS, GR_MAX_DIMS - 1, 1, 0),
};
static const gr_attr_table gr_concat_attrs =
    GR_ATTR_TABLE(gr_concat_attr_defs, "expected attributes like {axis: 1}", NULL);

static gr_status gr_concat_infer(gr_graph *g, int node, const gr_cfg *at, const char *key, gr_error *err) {
    gr_node *nd = &g->nodes[node];
    gr_status st = gr_join_inputs(g, nd, at, key, "concat", err);
    if (st) return st;
    gr_tensor a = g->tensors[nd->in[0]];
    int64_t axis = 0;
    if ((st = gr_axis_resolve(nd->attrs.axis, a.ndim, false, "concat", at, key, &axis, err))) return st;
    int64_t shape[GR_MAX_DIMS];
    memcpy(shape, a.shape, sizeof shape);
    shape[axis] = 0;
    for (int k = 0; k < nd->nin; k++) {
        const gr_tensor *b = &g->tensors[nd->in[k]];
        bool same = a.ndim == b->ndim;
        for (int d = 1; same && d < a.ndim; d++) same = d == axis || a.shape[d] == b->shape[d];
        if (!same) {
            char sa[64], sb[64];
            return gr_cfg_error(err, at, key, "concat along axis %lld needs inputs that agree elsewhere, but "
                                "'%s' is %s and '%s' is %s", (long long)axis, a.name, gr_shape_str(&a, sa, sizeof sa),
                                b->name, gr_shape_str(b, sb, sizeof sb));
        }
        shape[axis] += b->shape[axis];
    }
    int y = gr_graph_add_tensor(g, g->layers[nd->layer].name, GR_TK_ACT, GR_F32, a.ndim, shape, true);
    nd = &g->nodes[node];
    nd->attrs.axis = axis; /* resolved for the kernels */
    nd->out[0] = y;
    nd->nout = 1;
    return GR_OK;
}

static void gr_concat_backward(gr_graph *g, int node) {
    gr_node nd = g->nodes[node];
    int dy = gr_graph_grad(g, nd.out[0]);
    int64_t offset = 0;
    for (int k = 0; k < nd.nin; k++) {
        int64_t c = g->tensors[nd.in[k]].shape[nd.attrs.axis];
        if (g->tensors[nd.in[k]].requires_grad) {
            g->ad_slot = k; /* `input: [a, a]`: each slice its own partial */
            int dx = gr_graph_grad(g, nd.in[k]);
            g->ad_slot = 0;
            int in[1] = {dy}, out[1] = {dx};
            int b = gr_graph_add_node(g, gr_op_bwd(nd.op), nd.layer, in, 1, out, 1);
            g->nodes[b].fwd = node;
            g->nodes[b].attrs.axis = nd.attrs.axis;
            g->nodes[b].attrs.offset = offset;
        }
        offset += c;
    }
}

const gr_op_impl gr_op_impl_add = {NULL, NULL, gr_add_infer, gr_add_backward};
const gr_op_impl gr_op_impl_concat = {&gr_concat_attrs, NULL, gr_concat_infer, gr_concat_backward};
const gr_op_impl gr_op_impl_mul = {NULL, NULL, gr_mul_infer, gr_mul_backward};
