/* shape.c — CPU kernels of the shape ops (graph/op_shape.c): reshape and
 * its backward are views (nothing to do); permute (its backward is the
 * inverse permute) copies through strides; slice copies its part of each
 * row along the axis, and slice_bwd writes dy there in a zeroed dx. */
#include <string.h>

#include "../shape_args.h"
#include "cpu_kernels.h"

void gr_cpu_reshape(const gr_kargs *a) { (void)a; }
void gr_cpu_reshape_bwd(const gr_kargs *a) { (void)a; }

/* y[i0, i1, i2, i3] = x at the source axes' strides, a loop per output axis */
static void gr_cpu_permute_run(const gr_kargs *a) {
    gr_permute_in p;
    gr_shape_permute_args(a, &p);
    const int64_t *dim = p.dim, *xs = p.xs;
    const float *x = a->in[0];
    float *y = a->out[0];
    #pragma omp parallel for collapse(2) if (dim[0] * dim[1] * dim[2] * dim[3] >= GR_OMP_MIN)
    for (int64_t i0 = 0; i0 < dim[0]; i0++)
        for (int64_t i1 = 0; i1 < dim[1]; i1++) {
            float *yr = y + (i0 * dim[1] + i1) * dim[2] * dim[3];
            const float *xr = x + i0 * xs[0] + i1 * xs[1];
            for (int64_t i2 = 0; i2 < dim[2]; i2++)
                for (int64_t i3 = 0; i3 < dim[3]; i3++) yr[i2 * dim[3] + i3] = xr[i2 * xs[2] + i3 * xs[3]];
        }
}

void gr_cpu_permute(const gr_kargs *a) { gr_cpu_permute_run(a); }
void gr_cpu_permute_bwd(const gr_kargs *a) { gr_cpu_permute_run(a); }

/* y = x[..., start:end, ...] along the axis: of each of outer rows of x
 * (C * inner floats), the row floats from start * inner */
void gr_cpu_slice(const gr_kargs *a) {
    int64_t outer, inner;
    const int64_t axis = a->node->attrs.axis;
    gr_shape_rows(a, a->tin[0], axis, &outer, &inner);
    const int64_t in_row = a->tin[0]->shape[axis] * inner, row = a->tout[0]->shape[axis] * inner;
    const int64_t off = a->node->attrs.start * inner;
    const float *x = a->in[0];
    float *y = a->out[0];
    #pragma omp parallel for if (outer * row >= GR_OMP_MIN)
    for (int64_t i = 0; i < outer; i++) memcpy(y + i * row, x + i * in_row + off, (size_t)row * sizeof *y);
}

/* dx = 0, with dy at [offset, offset + its length) along the axis */
void gr_cpu_slice_bwd(const gr_kargs *a) {
    int64_t outer, inner;
    const int64_t axis = a->node->attrs.axis;
    gr_shape_rows(a, a->tout[0], axis, &outer, &inner);
    const int64_t out_row = a->tout[0]->shape[axis] * inner, row = a->tin[0]->shape[axis] * inner;
    const int64_t off = a->node->attrs.offset * inner;
    const float *dy = a->in[0];
    float *dx = a->out[0];
    #pragma omp parallel for if (outer * out_row >= GR_OMP_MIN)
    for (int64_t i = 0; i < outer; i++) {
        float *r = dx + i * out_row;
        memset(r, 0, (size_t)off * sizeof *r);
        memcpy(r + off, dy + i * row, (size_t)row * sizeof *r);
        memset(r + off + row, 0, (size_t)(out_row - off - row) * sizeof *r);
    }
}
