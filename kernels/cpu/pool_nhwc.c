/* pool_nhwc.c — maxpool and its backward on channels-last activations
 * (graph.h: gr_layout): a sample is rows of C channels, [H][W][C]. Each
 * channel is pooled as pool.c's NCHW kernel pools its plane: windows scanned
 * in (kh, kw) order from -inf with the index of their first in-bounds
 * element, a later value taken when greater or NaN; indices are ih*W + iw
 * (PyTorch's), stored [Ho][Wo][C]. The results are the NCHW kernel's,
 * transposed, bit for bit. bf16 storage is decoded a sample at a time
 * (exact: a maximum is one of the inputs; the backward sums in fp32 and
 * encodes once). Parallel over samples (gr_cpu_pool_units).
 *
 * Mixed layouts (the layout pass lets a maxpool's input and outputs differ,
 * ops.def's GR_CAP_NHWC_ANY: a pool before a flatten reads its conv's
 * channels-last output and writes channels-first): each sample goes through
 * the channels-last kernel, its input, outputs or gradients transposed in
 * fp32 scratch on the way; the same bits. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_kernels.h"

typedef struct gr_mpn {
    int64_t c, h, w, ho, wo, kh, kw, sh, sw, ph, pw;
} gr_mpn;

static gr_mpn gr_mpn_of(const gr_kargs *a, const gr_tensor *x, const gr_tensor *y) {
    const gr_attrs *at = &a->node->attrs;
    gr_mpn d = {x->shape[1], x->shape[2], x->shape[3], y->shape[2], y->shape[3], at->kernel[0], at->kernel[1],
                at->stride[0], at->stride[1], at->padding[0], at->padding[1]};
    return d;
}

/* One sample: y [Ho][Wo][C] and idx from x [H][W][C]. Built for AVX-512 and AVX2 too
 * (GR_ISA_CLONES: compares and selects, the same results on each), as its channel loops are
 * contiguous: the Fashion-MNIST CNN's first pool in bf16 on 2 threads, the fastest of 5
 * profiled runs each on a noisy 2-core AMD EPYC, 347 us against the baseline build's 515. */
GR_ISA_CLONES static void gr_mpn_sample(const gr_mpn *d, const float *restrict x, float *restrict y,
                                        int32_t *restrict idx) {
    const int64_t c = d->c;
    for (int64_t oh = 0; oh < d->ho; oh++)
        for (int64_t ow = 0; ow < d->wo; ow++) {
            float *restrict yr = y + (oh * d->wo + ow) * c;
            int32_t *restrict ir = idx + (oh * d->wo + ow) * c;
            const int64_t h0 = oh * d->sh - d->ph, w0 = ow * d->sw - d->pw;
            const int32_t first = (int32_t)((h0 > 0 ? h0 : 0) * d->w + (w0 > 0 ? w0 : 0));
            for (int64_t j = 0; j < c; j++) yr[j] = -INFINITY, ir[j] = first;
            for (int64_t kh = 0; kh < d->kh; kh++) {
                const int64_t ih = h0 + kh;
                if (ih < 0 || ih >= d->h) continue;
                for (int64_t kw = 0; kw < d->kw; kw++) {
                    const int64_t iw = w0 + kw;
                    if (iw < 0 || iw >= d->w) continue;
                    const float *restrict xr = x + (ih * d->w + iw) * c;
                    const int32_t at = (int32_t)(ih * d->w + iw);
                    for (int64_t j = 0; j < c; j++) {
                        bool take = xr[j] > yr[j] || xr[j] != xr[j]; /* NaN propagates, as PyTorch */
                        yr[j] = take ? xr[j] : yr[j];
                        ir[j] = take ? at : ir[j];
                    }
                }
            }
        }
}

static void gr_mpn_fwd(const gr_kargs *a, const void *ctx, int64_t i, const float *x, float *y) {
    const gr_mpn *d = ctx;
    gr_mpn_sample(d, x, y, (int32_t *)a->out[1] + i * d->ho * d->wo * d->c);
}

void gr_cpu_maxpool_nhwc(const gr_kargs *a) {
    const gr_mpn d = gr_mpn_of(a, a->tin[0], a->tout[0]);
    gr_cpu_pool_units(a, a->n, d.h * d.w * d.c, d.ho * d.wo * d.c, gr_mpn_fwd, &d);
}

/* Windows that tile the input (stride = kernel, no padding: the CNN's 2x2): every input row
 * [ih][iw] is read by at most one window, so dx is written once, position by position, from that
 * window's dy where its index is this position (0 + dy, the sum below's bits: -0 becomes +0),
 * else 0; no clearing pass and no scattered adds. Built for AVX-512 and AVX2 too (compares and
 * selects over the contiguous channels). */
GR_ISA_CLONES static void gr_mpn_bwd_tiled(const gr_mpn *d, const float *restrict dy, const int32_t *restrict idx,
                                           float *restrict dx) {
    const int64_t c = d->c;
    for (int64_t ih = 0; ih < d->h; ih++)
        for (int64_t iw = 0; iw < d->w; iw++) {
            const int64_t oh = ih / d->kh, ow = iw / d->kw, at = ih * d->w + iw;
            float *restrict o = dx + at * c;
            if (oh >= d->ho || ow >= d->wo) { /* past the last whole window (floor mode) */
                for (int64_t j = 0; j < c; j++) o[j] = 0.0f;
                continue;
            }
            const float *restrict g = dy + (oh * d->wo + ow) * c;
            const int32_t *restrict ir = idx + (oh * d->wo + ow) * c;
            for (int64_t j = 0; j < c; j++) {
                const float gj = 0.0f + g[j];
                o[j] = ir[j] == (int32_t)at ? gj : 0.0f;
            }
        }
}

static bool gr_mpn_tiled(const gr_mpn *d) { return d->sh == d->kh && d->sw == d->kw && d->ph == 0 && d->pw == 0; }

/* dx = 0, then dx[idx] += dy, channel by channel (the baseline build: an AVX-512 one measured no
 * faster, its scattered adds bound by memory); tiling windows: gr_mpn_bwd_tiled */
static void gr_mpn_scatter(const gr_mpn *d, const float *restrict dy, const int32_t *restrict idx,
                           float *restrict dx) {
    const int64_t c = d->c;
    if (gr_mpn_tiled(d)) {
        gr_mpn_bwd_tiled(d, dy, idx, dx);
        return;
    }
    memset(dx, 0, (size_t)(d->h * d->w * c) * sizeof *dx);
    for (int64_t p = 0; p < d->ho * d->wo; p++)
        for (int64_t j = 0; j < c; j++) dx[(int64_t)idx[p * c + j] * c + j] += dy[p * c + j];
}

static void gr_mpn_bwd(const gr_kargs *a, const void *ctx, int64_t i, const float *restrict dy,
                       float *restrict dx) {
    const gr_mpn *d = ctx;
    gr_mpn_scatter(d, dy, (const int32_t *)a->in[1] + i * d->ho * d->wo * d->c, dx);
}

void gr_cpu_maxpool_bwd_nhwc(const gr_kargs *a) {
    const gr_mpn d = gr_mpn_of(a, a->tout[0], a->tin[0]);
    gr_cpu_pool_units(a, a->n, d.ho * d.wo * d.c, d.h * d.w * d.c, gr_mpn_bwd, &d);
}

/* A sample's planes [c][s] as rows [s][c] (to_rows), or back; 4-byte values (fp32, int32). */
static void gr_mpn_transpose(const void *restrict src, void *restrict dst, int64_t c, int64_t s, bool to_rows) {
    const uint32_t *restrict x = src;
    uint32_t *restrict y = dst;
    for (int64_t ch = 0; ch < c; ch++)
        for (int64_t p = 0; p < s; p++) {
            if (to_rows) y[p * c + ch] = x[ch * s + p];
            else y[ch * s + p] = x[p * c + ch];
        }
}

typedef struct gr_mpn_mixed {
    gr_mpn d;
    bool x_rows, y_rows, i_rows; /* channels-last: the input (dx), the output (dy), the indices */
} gr_mpn_mixed;

static void gr_mpm_fwd(const gr_kargs *a, const void *ctx, int64_t i, const float *x, float *y) {
    const gr_mpn_mixed *m = ctx;
    const gr_mpn *d = &m->d;
    const int64_t s_in = d->h * d->w, s_out = d->ho * d->wo, c = d->c;
    int32_t *idx = (int32_t *)a->out[1] + i * s_out * c;
    float *buf = gr_xmalloc((size_t)(s_in + 2 * s_out) * (size_t)c * sizeof *buf), *yr = buf + s_in * c;
    int32_t *ir = (int32_t *)(yr + s_out * c);
    const float *xr = x;
    if (!m->x_rows) gr_mpn_transpose(x, buf, c, s_in, true), xr = buf;
    gr_mpn_sample(d, xr, m->y_rows ? y : yr, m->i_rows ? idx : ir);
    if (!m->y_rows) gr_mpn_transpose(yr, y, c, s_out, false);
    if (!m->i_rows) gr_mpn_transpose(ir, idx, c, s_out, false);
    free(buf);
}

static void gr_mpm_bwd(const gr_kargs *a, const void *ctx, int64_t i, const float *dy, float *dx) {
    const gr_mpn_mixed *m = ctx;
    const gr_mpn *d = &m->d;
    const int64_t s_in = d->h * d->w, s_out = d->ho * d->wo, c = d->c;
    const int32_t *idx = (const int32_t *)a->in[1] + i * s_out * c;
    float *buf = gr_xmalloc((size_t)(s_in + 2 * s_out) * (size_t)c * sizeof *buf), *dyr = buf + s_in * c;
    int32_t *ir = (int32_t *)(dyr + s_out * c);
    if (!m->y_rows) gr_mpn_transpose(dy, dyr, c, s_out, true), dy = dyr;
    if (!m->i_rows) gr_mpn_transpose(idx, ir, c, s_out, true), idx = ir;
    gr_mpn_scatter(d, dy, idx, m->x_rows ? dx : buf);
    if (!m->x_rows) gr_mpn_transpose(buf, dx, c, s_in, false);
    free(buf);
}

void gr_cpu_maxpool_mixed(const gr_kargs *a) {
    const bool fwd = a->node->op == GR_OP_MAXPOOL;
    const gr_tensor *x = fwd ? a->tin[0] : a->tout[0], *y = fwd ? a->tout[0] : a->tin[0];
    const gr_tensor *ix = fwd ? a->tout[1] : a->tin[1];
    const gr_mpn_mixed m = {gr_mpn_of(a, x, y), x->layout == GR_NHWC, y->layout == GR_NHWC, ix->layout == GR_NHWC};
    const int64_t in = m.d.h * m.d.w * m.d.c, out = m.d.ho * m.d.wo * m.d.c;
    if (fwd) gr_cpu_pool_units(a, a->n, in, out, gr_mpm_fwd, &m);
    else gr_cpu_pool_units(a, a->n, out, in, gr_mpm_bwd, &m);
}
