/* op_shape.c — the ops that move a tensor's elements without arithmetic:
 *   reshape {shape: [a, b, ...]}: a new per-sample shape (the batch axis is
 *     implicit and stays first), one entry -1 (what the others leave); a
 *     view, as flatten: torch.reshape of a contiguous tensor;
 *   permute {axes: [0, 2, 1, 3]}: the full tensor's axes reordered
 *     (torch.permute, then .contiguous()); axis 0, the batch, stays first;
 *     a copy; backward the inverse permute;
 *   slice {axis: A, start: s, end: e}: x[:, ..., s:e] along axis A (a copy);
 *     backward writes dy into that slice of a zeroed dx. Slicing one tensor
 *     several times (a split) reads it several times, and autodiff sums the
 *     slices' gradients as for any tensor read twice.
 * Axes count the full tensor as PyTorch does (0 the batch, 1 the channels
 * of [n, C, H, W]); a negative axis counts from the end (-1 the last). */
#include "graph.h"

#include <stdio.h>
#include <string.h>

/* ---- reshape ---- */

static const gr_attr_def gr_reshape_attr_defs[] = {
    GR_ATTR("shape", shape, -1, (double)(INT64_C(1) << 40), 0, GR_ATTR_REQUIRED),
};
static const gr_attr_table gr_reshape_attrs =
    GR_ATTR_TABLE(gr_reshape_attr_defs, "reshape needs attributes, e.g. {shape: [4, -1]} (per sample)", NULL);

static gr_status gr_reshape_check(gr_attrs *a, const gr_cfg *attrs, const char *key, gr_error *err) {
    if (a->shape.n > GR_MAX_DIMS - 1)
        return gr_cfg_error(err, attrs, key, "reshape: shape has %d axes, at most %d per sample (the batch axis "
                            "makes %d)", a->shape.n, GR_MAX_DIMS - 1, GR_MAX_DIMS);
    int unknown = 0;
    for (int i = 0; i < a->shape.n; i++) {
        if (a->shape.v[i] == 0) return gr_cfg_error(err, attrs, key, "reshape: shape[%d] is 0", i);
        unknown += a->shape.v[i] == -1;
    }
    if (unknown > 1) return gr_cfg_error(err, attrs, key, "reshape: shape has more than one -1");
    return GR_OK;
}

static gr_status gr_reshape_infer(gr_graph *g, int node, const gr_cfg *at, const char *key, gr_error *err) {
    gr_node *nd = &g->nodes[node];
    const int xi = nd->in[0];
    gr_tensor x = g->tensors[xi];
    const gr_ilist s = nd->attrs.shape;
    const int64_t numel = gr_tensor_sample_numel(&x);
    int64_t shape[GR_MAX_DIMS] = {x.shape[0]}, known = 1;
    int unknown = -1;
    for (int i = 0; i < s.n; i++) {
        shape[i + 1] = s.v[i];
        if (s.v[i] == -1) unknown = i + 1;
        else known *= s.v[i];
    }
    if (unknown > 0 && known > 0 && numel % known == 0) shape[unknown] = numel / known;
    char sx[64];
    if ((unknown > 0 && numel % known != 0) || (unknown < 0 && known != numel))
        return gr_cfg_error(err, at, key, "reshape cannot make %lld values per sample of '%s' %s into the "
                            "shape given", (long long)numel, x.name, gr_shape_str_n(&x, sx, sizeof sx));
    gr_graph_view_out(g, node, s.n + 1, shape);
    return GR_OK;
}

/* ---- axes ---- */

gr_status gr_axis_resolve(int64_t a, int ndim, bool batch_ok, const char *op, const gr_cfg *at,
                                 const char *key, int64_t *out, gr_error *err) {
    int64_t r = a < 0 ? a + ndim : a;
    if (r < 0 || r >= ndim)
        return gr_cfg_error(err, at, key, "%s: axis %lld is outside a tensor of %d axes (0 is the batch, "
                            "-1 the last)", op, (long long)a, ndim);
    if (r == 0 && !batch_ok)
        return gr_cfg_error(err, at, key, "%s: axis %lld is the batch axis, which stays as it is", op, (long long)a);
    *out = r;
    return GR_OK;
}

/* ---- permute ---- */

static const gr_attr_def gr_permute_attr_defs[] = {
    GR_ATTR("axes", axes, -GR_MAX_DIMS, GR_MAX_DIMS - 1, 0, GR_ATTR_REQUIRED),
};
static const gr_attr_table gr_permute_attrs =
    GR_ATTR_TABLE(gr_permute_attr_defs, "permute needs attributes, e.g. {axes: [0, 2, 1]} (axis 0 the batch)",
                  NULL);

static gr_status gr_permute_infer(gr_graph *g, int node, const gr_cfg *at, const char *key, gr_error *err) {
    gr_node *nd = &g->nodes[node];
    gr_tensor x = g->tensors[nd->in[0]];
    gr_ilist ax = nd->attrs.axes;
    char sx[64];
    if (ax.n != x.ndim)
        return gr_cfg_error(err, at, key, "permute: %d axes given for '%s' %s, which has %d", ax.n, x.name,
                            gr_shape_str_n(&x, sx, sizeof sx), x.ndim);
    bool seen[GR_MAX_DIMS] = {false};
    int64_t shape[GR_MAX_DIMS];
    for (int d = 0; d < ax.n; d++) {
        gr_status st = gr_axis_resolve(ax.v[d], x.ndim, true, "permute", at, key, &ax.v[d], err);
        if (st) return st;
        if (seen[ax.v[d]])
            return gr_cfg_error(err, at, key, "permute: axis %lld is given twice", (long long)ax.v[d]);
        seen[ax.v[d]] = true;
        shape[d] = x.shape[ax.v[d]];
    }
    if (ax.v[0] != 0)
        return gr_cfg_error(err, at, key, "permute: axes[0] must be 0 (the batch axis stays first)");
    int y = gr_graph_add_tensor(g, g->layers[nd->layer].name, GR_TK_ACT, GR_F32, x.ndim, shape, true);
    nd = &g->nodes[node];
    nd->attrs.axes = ax; /* resolved: no negative axes left for the kernels */
    nd->out[0] = y;
    nd->nout = 1;
    return GR_OK;
}

/* permute_bwd: dx = dy permuted by the inverse order */
static void gr_permute_backward(gr_graph *g, int node) {
    const gr_node nd = g->nodes[node];
    const int k = gr_graph_unary_backward(g, node);
    if (k < 0) return;
    g->nodes[k].attrs.axes.n = nd.attrs.axes.n;
    for (int d = 0; d < nd.attrs.axes.n; d++) g->nodes[k].attrs.axes.v[nd.attrs.axes.v[d]] = d;
}

/* ---- slice ---- */

#define GR_SLICE_MAX ((double)(INT64_C(1) << 40))
static const gr_attr_def gr_slice_attr_defs[] = {
    GR_ATTR("axis", axis, -GR_MAX_DIMS, GR_MAX_DIMS - 1, 0, GR_ATTR_REQUIRED),
    GR_ATTR("start", start, -GR_SLICE_MAX, GR_SLICE_MAX, 0, 0),
    GR_ATTR("end", end, -GR_SLICE_MAX, GR_SLICE_MAX, 0, GR_ATTR_REQUIRED),
};
static const gr_attr_table gr_slice_attrs =
    GR_ATTR_TABLE(gr_slice_attr_defs, "slice needs attributes, e.g. {axis: 1, start: 0, end: 4}", NULL);

static gr_status gr_slice_infer(gr_graph *g, int node, const gr_cfg *at, const char *key, gr_error *err) {
    gr_node *nd = &g->nodes[node];
    gr_tensor x = g->tensors[nd->in[0]];
    int64_t axis = 0;
    gr_status st = gr_axis_resolve(nd->attrs.axis, x.ndim, false, "slice", at, key, &axis, err);
    if (st) return st;
    const int64_t len = x.shape[axis];
    int64_t s = nd->attrs.start < 0 ? nd->attrs.start + len : nd->attrs.start;
    int64_t e = nd->attrs.end < 0 ? nd->attrs.end + len : nd->attrs.end;
    if (s < 0 || e > len || s >= e) {
        char sx[64];
        return gr_cfg_error(err, at, key, "slice [%lld, %lld) along axis %lld of '%s' %s is empty or outside "
                            "[0, %lld)", (long long)nd->attrs.start, (long long)nd->attrs.end, (long long)axis,
                            x.name, gr_shape_str_n(&x, sx, sizeof sx), (long long)len);
    }
    int64_t shape[GR_MAX_DIMS];
    memcpy(shape, x.shape, sizeof shape);
    shape[axis] = e - s;
    int y = gr_graph_add_tensor(g, g->layers[nd->layer].name, GR_TK_ACT, GR_F32, x.ndim, shape, true);
    nd = &g->nodes[node];
    nd->attrs.axis = axis; /* resolved for the kernels */
    nd->attrs.start = s;
    nd->attrs.end = e;
    nd->out[0] = y;
    nd->nout = 1;
    return GR_OK;
}

/* slice_bwd: dx = 0 with dy at [start, end) along axis */
static void gr_slice_backward(gr_graph *g, int node) {
    const gr_node nd = g->nodes[node];
    const int k = gr_graph_unary_backward(g, node);
    if (k < 0) return;
    g->nodes[k].attrs.axis = nd.attrs.axis;
    g->nodes[k].attrs.offset = nd.attrs.start;
}

const gr_op_impl gr_op_impl_reshape = {&gr_reshape_attrs, gr_reshape_check, gr_reshape_infer, gr_graph_view_backward};
const gr_op_impl gr_op_impl_permute = {&gr_permute_attrs, NULL, gr_permute_infer, gr_permute_backward};
const gr_op_impl gr_op_impl_slice = {&gr_slice_attrs, NULL, gr_slice_infer, gr_slice_backward};
