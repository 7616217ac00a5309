/* body_shape.h — bodies of the shape and broadcasting kernels
 * (kernels/cuda/shape.cu): NumPy-broadcast add and mul, the reduction of a
 * gradient over the axes an input was broadcast along (add_bwd_reduce,
 * mul_bwd), permute, and the slice backward. The slice forward and the
 * concat of any axis are the row copies of body_elem.h (gr_body_concat,
 * gr_body_concat_bwd) over outer = n * the axes before the cut.
 *
 * Every array is described on GR_SHAPE_DIMS logical axes, a tensor of fewer
 * padded in front with axes of 1; a stride of 0 reads one element along an
 * axis (a broadcast input). The CPU kernels (kernels/cpu/{join,shape}.c)
 * compute the same in nested loops, in the same order and types;
 * tests/ops/test_op_shape.c sweeps these bodies against them. */
#ifndef GR_BODY_SHAPE_H
#define GR_BODY_SHAPE_H

#include <stdint.h>

#include "body.h"
#include "body_elem.h"
#include "body_half.h"

#define GR_SHAPE_DIMS 4 /* graph.h's GR_MAX_DIMS (kernels/shape_args.h checks) */

/* y = x0 + x1 + ... (mul: x0 * x1 * ...), each input read through its
 * strides; the output's strides say where element i (row-major over dim)
 * goes, so a channels-last add works too. */
typedef struct gr_bcast_in {
    const void *x[GR_ELEM_MAX_IN];
    int64_t xs[GR_ELEM_MAX_IN][GR_SHAPE_DIMS]; /* element strides per axis, 0 on a broadcast axis */
    int64_t ys[GR_SHAPE_DIMS];
    int64_t dim[GR_SHAPE_DIMS];                /* the output's axes (dim[0] from the run's batch) */
    int nin;
    int mul;                                   /* 0: the sum, 1: the product */
    int e;                                     /* the storage type of every x and y (body_half.h) */
} gr_bcast_in;

/* Element i of the output, combined left to right in fp32, rounded once */
GR_HD void gr_body_bcast(const gr_bcast_in *in, void *y, int64_t i) {
    int64_t yo = 0, xo[GR_ELEM_MAX_IN];
    for (int k = 0; k < GR_ELEM_MAX_IN; k++) xo[k] = 0;
    for (int d = GR_SHAPE_DIMS - 1; d >= 0; d--) {
        int64_t c = i % in->dim[d];
        i /= in->dim[d];
        yo += c * in->ys[d];
        for (int k = 0; k < in->nin; k++) xo[k] += c * in->xs[k][d];
    }
    float v = gr_ld_hd(in->x[0], in->e, xo[0]);
    for (int k = 1; k < in->nin; k++) {
        float u = gr_ld_hd(in->x[k], in->e, xo[k]);
        v = in->mul ? v * u : v + u;
    }
    gr_st_hd(y, in->e, yo, v);
}

/* dx = dy (add_bwd_reduce) or dy * other (mul_bwd), summed over the axes
 * where dx has 1 and dy more: dx's shape, its input's. fp32, dense
 * row-major (the ops' rows take neither half storage nor channels-last). */
typedef struct gr_reduce_in {
    const float *dy;                  /* [dim], dense */
    const float *other;               /* mul_bwd: the other factor, read through os; NULL: add */
    int64_t os[GR_SHAPE_DIMS];
    int64_t dim[GR_SHAPE_DIMS];       /* dy's axes */
    int64_t kdim[GR_SHAPE_DIMS];      /* dx's axes: dim[d], or 1 where reduced */
} gr_reduce_in;

/* Element j of dx: a sum in double over the reduced coordinates in
 * row-major order, each term the float dy[p] (* other), as the CPU kernel. */
GR_HD void gr_body_reduce(const gr_reduce_in *in, float *dx, int64_t j) {
    int64_t c[GR_SHAPE_DIMS], r = 1;
    int64_t t = j;
    for (int d = GR_SHAPE_DIMS - 1; d >= 0; d--) {
        c[d] = t % in->kdim[d];
        t /= in->kdim[d];
        if (in->kdim[d] != in->dim[d]) r *= in->dim[d];
    }
    double s = 0.0;
    for (int64_t q = 0; q < r; q++) {
        int64_t qq = q, p = 0, po = 0, step = 1;
        for (int d = GR_SHAPE_DIMS - 1; d >= 0; d--) {
            int64_t o = c[d];
            if (in->kdim[d] != in->dim[d]) {
                o = qq % in->dim[d];
                qq /= in->dim[d];
            }
            p += o * step;
            step *= in->dim[d];
            po += o * in->os[d];
        }
        float v = in->dy[p];
        if (in->other) v *= in->other[po];
        s += (double)v;
    }
    dx[j] = (float)s;
}

/* y = x with its axes reordered: output element i (row-major over dim)
 * reads x at the strides x has along the axis each output axis came from. */
typedef struct gr_permute_in {
    int64_t dim[GR_SHAPE_DIMS];       /* the output's axes */
    int64_t xs[GR_SHAPE_DIMS];        /* x's stride along output axis d's source axis */
} gr_permute_in;

GR_HD void gr_body_permute(const gr_permute_in *in, const float *x, float *y, int64_t i) {
    int64_t xo = 0, t = i;
    for (int d = GR_SHAPE_DIMS - 1; d >= 0; d--) {
        xo += (t % in->dim[d]) * in->xs[d];
        t /= in->dim[d];
    }
    y[i] = x[xo];
}

/* The slice backward: dx[s, c] = dy[s, c - off] inside the slice's row
 * floats at column off of dx's rows of out_row floats, 0 elsewhere. */
GR_HD void gr_body_slice_bwd(const float *dy, float *dx, int64_t out_row, int64_t row, int64_t off, int64_t s,
                             int64_t c) {
    int64_t k = c - off;
    dx[s * out_row + c] = k >= 0 && k < row ? dy[s * row + k] : 0.0f;
}

#endif
