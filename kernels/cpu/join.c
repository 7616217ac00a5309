/* join.c — CPU kernels of add (also the sum of partial gradients emitted by
 * autodiff) and mul, both with NumPy broadcasting, and their backward
 * reductions over the broadcast axes (add_bwd_reduce, mul_bwd); concat along
 * any axis and its backward slice; add_bwd is a view. An add of equal
 * shapes may have a relu fused after it (attrs.relu, graph/fuse.c). */
#include <string.h>

#include "../shape_args.h"
#include "cpu_kernels.h"
#include "half_io.h"

/* y = x0 + x1 + ... (mul: x0 * x1 * ...) with broadcasting, every array
 * stored as e, combined left to right in fp32: a loop per axis over the
 * output's, each array read through its strides (kernels/shape_args.h). */
static void gr_cpu_bcast(const gr_kargs *a, int mul, int e) {
    gr_bcast_in b;
    gr_shape_bcast_args(a, mul, e, &b);
    const int64_t *dim = b.dim;
    #pragma omp parallel for collapse(2) if (dim[0] * dim[1] * dim[2] * dim[3] >= GR_OMP_MIN)
    for (int64_t i0 = 0; i0 < dim[0]; i0++)
        for (int64_t i1 = 0; i1 < dim[1]; i1++)
            for (int64_t i2 = 0; i2 < dim[2]; i2++)
                for (int64_t i3 = 0; i3 < dim[3]; i3++) {
                    float v = 0.0f;
                    for (int k = 0; k < b.nin; k++) {
                        const int64_t *s = b.xs[k];
                        float u = gr_ld_hd(b.x[k], e, i0 * s[0] + i1 * s[1] + i2 * s[2] + i3 * s[3]);
                        v = k == 0 ? u : mul ? v * u : v + u;
                    }
                    gr_st_hd(a->out[0], e, i0 * b.ys[0] + i1 * b.ys[1] + i2 * b.ys[2] + i3 * b.ys[3], v);
                }
}

/* The terms of an add: its inputs, less the last when that is a relu's output masking the sum
 * (attrs.relu_mask: a relu's backward folded into autodiff's sum of gradients, graph/fuse.c). */
static int gr_add_terms(const gr_kargs *a) { return a->node->nin - (a->node->attrs.relu_mask ? 1 : 0); }

/* y = x0 + x1 + ... in bf16 storage, summed in fp32 left to right; with a relu fused after it
 * (attrs.relu, graph/fuse.c), relu of the rounded sum (the unfused pair's bits); with a relu's
 * backward folded in (attrs.relu_mask), the rounded sum where the relu's output m > 0 (or NaN),
 * else 0, decoded and encoded as relu_bwd does (its bits) */
static void gr_cpu_add_bf16(const gr_kargs *a, int64_t total) {
    uint16_t *y = a->out[0];
    const int nin = gr_add_terms(a);
    const bool relu = a->node->attrs.relu;
    const uint16_t *x0 = a->in[0], *x1 = nin > 1 ? a->in[1] : NULL;
    const uint16_t *m = a->node->attrs.relu_mask ? a->in[nin] : NULL;
    if (nin == 2) { /* the residual add, and a sum of two gradients */
        #pragma omp parallel for if (total >= GR_OMP_MIN)
        for (int64_t i = 0; i < total; i += GR_HIO_CHUNK) {
            const int64_t len = GR_MIN(GR_HIO_CHUNK, total - i);
            if (m) gr_hio_add2_mask_bf16(x0 + i, x1 + i, m + i, y + i, len);
            else if (relu) gr_hio_add2_relu_bf16(x0 + i, x1 + i, y + i, len);
            else gr_hio_add2_bf16(x0 + i, x1 + i, y + i, len);
        }
        return;
    }
    #pragma omp parallel for if (total >= GR_OMP_MIN)
    for (int64_t i = 0; i < total; i++) {
        float v = gr_bf16_decode_hd(x0[i]);
        if (x1) v += gr_bf16_decode_hd(x1[i]);
        for (int k = 2; k < nin; k++) v += gr_bf16_decode_hd(((const uint16_t *)a->in[k])[i]);
        uint16_t o = gr_bf16_encode_hd(relu && v <= 0.0f ? 0.0f : v); /* the rounding keeps the sign */
        if (m) o = gr_bf16_encode_hd(gr_bf16_decode_hd(m[i]) <= 0.0f ? 0.0f : gr_bf16_decode_hd(o));
        y[i] = o;
    }
}

/* y = x0 + x1 on a chunk of fp32 (relu: relu of the sum; m: the sum where m > 0 or NaN, else 0,
 * relu_bwd's rule): built for AVX-512 and AVX2 too. y may be x0 or x1 (an add in place): each
 * element is read before it is written. The residual add's fp32 loop was the general one below,
 * which GCC left scalar (an input pointer reloaded each element): ResNet-50's adds ran at
 * 14 GB/s, 6% of its step. */
GR_ISA_CLONES static void gr_add2_f32(const float *x0, const float *x1, const float *m, float *y, int64_t n,
                                      bool relu) {
    if (m) {
        #pragma omp simd
        for (int64_t i = 0; i < n; i++) {
            const float v = x0[i] + x1[i];
            y[i] = m[i] <= 0.0f ? 0.0f : v;
        }
    } else if (relu) {
        #pragma omp simd
        for (int64_t i = 0; i < n; i++) {
            const float v = x0[i] + x1[i];
            y[i] = v <= 0.0f ? 0.0f : v;
        }
    } else {
        #pragma omp simd
        for (int64_t i = 0; i < n; i++) y[i] = x0[i] + x1[i];
    }
}

/* y = x0 + x1 + ... (nin >= 1; one input is a copy) */
void gr_cpu_add(const gr_kargs *a) {
    if (gr_shape_is_bcast(a)) { /* inputs of other shapes: their storage type is the output's (ops.def) */
        GR_ASSERT(!a->node->attrs.relu_mask);
        gr_cpu_bcast(a, 0, (int)a->eout[0]);
        return;
    }
    const int64_t total = a->n * gr_tensor_sample_numel(a->tout[0]);
    if (a->eout[0] == GR_BF16) {
        gr_cpu_add_bf16(a, total);
        return;
    }
    float *y = a->out[0];
    const int nin = gr_add_terms(a);
    const bool relu = a->node->attrs.relu; /* fused after it (graph/fuse.c) */
    const float *x0 = a->in[0], *x1 = nin > 1 ? a->in[1] : NULL;
    const float *m = a->node->attrs.relu_mask ? a->in[nin] : NULL;
    if (nin == 2) { /* the residual add, and autodiff's sum of two partial gradients */
        #pragma omp parallel for if (total >= GR_OMP_MIN)
        for (int64_t i = 0; i < total; i += GR_HIO_CHUNK)
            gr_add2_f32(x0 + i, x1 + i, m ? m + i : NULL, y + i, GR_MIN(GR_HIO_CHUNK, total - i), relu);
        return;
    }
    #pragma omp parallel for if (total >= GR_OMP_MIN)
    for (int64_t i = 0; i < total; i++) {
        float v = x0[i];
        if (x1) v += x1[i];
        for (int k = 2; k < nin; k++) v += ((const float *)a->in[k])[i];
        v = relu && v <= 0.0f ? 0.0f : v;
        y[i] = m && m[i] <= 0.0f ? 0.0f : v;
    }
}

void gr_cpu_add_bwd(const gr_kargs *a) { (void)a; }

void gr_cpu_mul(const gr_kargs *a) { gr_cpu_bcast(a, 1, GR_F32); }

/* dx[j] = the sum of dy (add_bwd_reduce) or of dy * the other factor
 * (mul_bwd) over the axes where dx has 1 and dy more, in double, over the
 * reduced coordinates in row-major order (kernels/body_shape.h's order). */
static void gr_cpu_reduce(const gr_kargs *a) {
    gr_reduce_in r;
    gr_shape_reduce_args(a, &r);
    const int64_t *dim = r.dim, *kd = r.kdim;
    int64_t lo[GR_SHAPE_DIMS], hi[GR_SHAPE_DIMS], ds[GR_SHAPE_DIMS], step = 1;
    for (int d = GR_SHAPE_DIMS - 1; d >= 0; d--) {
        ds[d] = step;
        step *= dim[d];
    }
    float *dx = a->out[0];
    const int64_t total = kd[0] * kd[1] * kd[2] * kd[3];
    #pragma omp parallel for private(lo, hi) if (total >= GR_OMP_MIN)
    for (int64_t j = 0; j < total; j++) {
        int64_t t = j;
        for (int d = GR_SHAPE_DIMS - 1; d >= 0; d--) {
            const int64_t c = t % kd[d];
            t /= kd[d];
            lo[d] = kd[d] == dim[d] ? c : 0;
            hi[d] = kd[d] == dim[d] ? c + 1 : dim[d];
        }
        double s = 0.0;
        for (int64_t o0 = lo[0]; o0 < hi[0]; o0++)
            for (int64_t o1 = lo[1]; o1 < hi[1]; o1++)
                for (int64_t o2 = lo[2]; o2 < hi[2]; o2++)
                    for (int64_t o3 = lo[3]; o3 < hi[3]; o3++) {
                        float v = r.dy[o0 * ds[0] + o1 * ds[1] + o2 * ds[2] + o3 * ds[3]];
                        if (r.other) v *= r.other[o0 * r.os[0] + o1 * r.os[1] + o2 * r.os[2] + o3 * r.os[3]];
                        s += (double)v;
                    }
        dx[j] = (float)s;
    }
}

void gr_cpu_add_bwd_reduce(const gr_kargs *a) { gr_cpu_reduce(a); }
void gr_cpu_mul_bwd(const gr_kargs *a) { gr_cpu_reduce(a); }

/* Rows along the axis: outer rows (n times the axes before it) to which each
 * input contributes its axis-length * inner contiguous floats (axis 1 of
 * [n, C, H, W]: n rows, inner = H*W; of [n, F]: inner 1). */
void gr_cpu_concat(const gr_kargs *a) {
    int64_t outer, inner;
    gr_shape_rows(a, a->tout[0], a->node->attrs.axis, &outer, &inner);
    const int64_t axis = a->node->attrs.axis, out_row = a->tout[0]->shape[axis] * inner;
    float *y = a->out[0];
    int64_t off = 0;
    for (int k = 0; k < a->node->nin; k++) {
        const int64_t row = a->tin[k]->shape[axis] * inner;
        const float *x = a->in[k];
        for (int64_t i = 0; i < outer; i++) memcpy(y + i * out_row + off, x + i * row, (size_t)row * sizeof *y);
        off += row;
    }
}

/* dx = dy[..., offset : offset + C, ...] along the axis (the slice kernel's cut) */
void gr_cpu_concat_bwd(const gr_kargs *a) {
    int64_t outer, inner;
    gr_shape_rows(a, a->tout[0], a->node->attrs.axis, &outer, &inner);
    const int64_t axis = a->node->attrs.axis;
    const int64_t in_row = a->tin[0]->shape[axis] * inner, row = a->tout[0]->shape[axis] * inner;
    const int64_t off = a->node->attrs.offset * inner;
    const float *dy = a->in[0];
    float *dx = a->out[0];
    for (int64_t i = 0; i < outer; i++) memcpy(dx + i * row, dy + i * in_row + off, (size_t)row * sizeof *dx);
}
