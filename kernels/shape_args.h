/* shape_args.h — the shape kernels' arguments from a step's kargs, as both
 * backends read them (kernels/cpu/{join,shape}.c, kernels/cuda/op_{elem,shape}.c):
 * a tensor's logical strides in this run (channels-last too), the
 * broadcast, reduction and permute descriptions of kernels/body_shape.h,
 * and the rows a cut along an axis makes (concat, slice). */
#ifndef GR_SHAPE_ARGS_H
#define GR_SHAPE_ARGS_H

#include <string.h>

#include "backend.h"
#include "body_shape.h"

_Static_assert(GR_SHAPE_DIMS == GR_MAX_DIMS, "body_shape.h's axes must be the graph's");

/* t's axes in a's run (the batch a->n), padded in front with 1 to GR_SHAPE_DIMS */
static inline void gr_shape_dims(const gr_kargs *a, const gr_tensor *t, int64_t dim[GR_SHAPE_DIMS]) {
    const int pad = GR_SHAPE_DIMS - t->ndim;
    for (int d = 0; d < GR_SHAPE_DIMS; d++) dim[d] = d < pad ? 1 : t->shape[d - pad];
    if (t->batched) dim[pad] = a->n;
}

/* Element strides of t along its padded axes: row-major, or channels-last
 * for an NHWC tensor ([n, C, H, W] stored n, H, W, C); 0 on axes of 1. */
static inline void gr_shape_strides(const gr_kargs *a, const gr_tensor *t, int64_t s[GR_SHAPE_DIMS]) {
    int64_t dim[GR_SHAPE_DIMS];
    gr_shape_dims(a, t, dim);
    if (t->layout == GR_NHWC && t->ndim == 4) {
        s[1] = 1;
        s[3] = dim[1];
        s[2] = dim[3] * dim[1];
        s[0] = dim[2] * dim[3] * dim[1];
    } else {
        int64_t step = 1;
        for (int d = GR_SHAPE_DIMS - 1; d >= 0; d--) {
            s[d] = step;
            step *= dim[d];
        }
    }
    for (int d = 0; d < GR_SHAPE_DIMS; d++)
        if (dim[d] == 1) s[d] = 0;
}

/* Whether some input of a's add or mul has another shape than its output */
static inline bool gr_shape_is_bcast(const gr_kargs *a) {
    const gr_tensor *y = a->tout[0];
    for (int k = 0; k < a->node->nin; k++) {
        const gr_tensor *x = a->tin[k];
        if (x->ndim != y->ndim) return true;
        for (int d = 0; d < y->ndim; d++)
            if (x->shape[d] != y->shape[d]) return true;
    }
    return false;
}

/* The broadcast add (mul = 0) or mul (mul = 1) of a, every array stored as e */
static inline void gr_shape_bcast_args(const gr_kargs *a, int mul, int e, gr_bcast_in *in) {
    GR_ASSERT(a->node->nin >= 1 && a->node->nin <= GR_ELEM_MAX_IN);
    memset(in, 0, sizeof *in);
    in->nin = a->node->nin;
    in->mul = mul;
    in->e = e;
    gr_shape_dims(a, a->tout[0], in->dim);
    gr_shape_strides(a, a->tout[0], in->ys);
    for (int k = 0; k < in->nin; k++) {
        in->x[k] = a->in[k];
        gr_shape_strides(a, a->tin[k], in->xs[k]);
    }
}

/* a's add_bwd_reduce (in: dy) or mul_bwd (in: dy, the other factor) into
 * its output, whose shape is its input's */
static inline void gr_shape_reduce_args(const gr_kargs *a, gr_reduce_in *in) {
    memset(in, 0, sizeof *in);
    GR_ASSERT(a->tin[0]->layout == GR_NCHW && a->tout[0]->layout == GR_NCHW);
    in->dy = a->in[0];
    gr_shape_dims(a, a->tin[0], in->dim);
    gr_shape_dims(a, a->tout[0], in->kdim);
    if (a->node->nin > 1) {
        in->other = a->in[1];
        gr_shape_strides(a, a->tin[1], in->os);
    }
}

/* a's permute (or its backward, the inverse order): node->attrs.axes of the
 * full tensor, x and y dense row-major */
static inline void gr_shape_permute_args(const gr_kargs *a, gr_permute_in *in) {
    const gr_tensor *x = a->tin[0];
    const int nd = x->ndim, pad = GR_SHAPE_DIMS - nd;
    GR_ASSERT(a->node->attrs.axes.n == nd && x->layout == GR_NCHW);
    int64_t xs[GR_SHAPE_DIMS];
    gr_shape_strides(a, x, xs);
    gr_shape_dims(a, a->tout[0], in->dim);
    for (int d = 0; d < GR_SHAPE_DIMS; d++) in->xs[d] = d < pad ? 0 : xs[pad + a->node->attrs.axes.v[d - pad]];
}

/* A cut of t along axis (>= 1): rows of t's axis-length * inner values,
 * outer of them in a's run (the batch times the axes before axis) */
static inline void gr_shape_rows(const gr_kargs *a, const gr_tensor *t, int64_t axis, int64_t *outer,
                                 int64_t *inner) {
    GR_ASSERT(axis >= 1 && axis < t->ndim);
    *outer = a->n;
    *inner = 1;
    for (int d = 1; d < axis; d++) *outer *= t->shape[d];
    for (int d = (int)axis + 1; d < t->ndim; d++) *inner *= t->shape[d];
}

#endif
