/* pool_nhwc.c — maxpool and its backward on channels-last activations
 * (graph.h: gr_layout): a sample is rows of C channels, [H][W][C]. Each
 * channel is pooled as pool.c's NCHW kernel pools its plane: windows scanned
 * in (kh, kw) order from -inf with the index of their first in-bounds
 * element, a later value taken when greater or NaN; indices are ih*W + iw
 * (PyTorch's), stored [Ho][Wo][C]. The results are the NCHW kernel's,
 * transposed, bit for bit. bf16 storage is read and written where it lies
 * (gr_mpb_*: each value decoded as it is read, each result encoded as it is
 * written; exact, a maximum is one of the inputs), except by a backward of
 * overlapping windows, which decodes a sample at a time, sums in fp32 and
 * encodes once. Parallel over samples (gr_cpu_pool_units, gr_mpb_run).
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
#include "half_io.h"

typedef struct gr_mpn {
    int64_t c, h, w, ho, wo, kh, kw, sh, sw, ph, pw;
} gr_mpn;

static bool gr_mpb_maxpool(const gr_kargs *a);
static bool gr_mpb_maxpool_bwd(const gr_kargs *a);

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

/* gr_mpn_sample on bf16 storage, channels [j0, C): each value decoded as it is read, the running maxima
 * in fp32 (m: C floats of scratch), each maximum encoded as it is written (exact: it is one of the
 * inputs). The decode-pool-encode path's bits, without a sample's decode into scratch and encode out of
 * it: the Fashion-MNIST CNN's two pools in bf16 took 18% of its step through that path. */
GR_ISA_CLONES static void gr_mpn_sample_bf16_c(const gr_mpn *d, const uint16_t *restrict x, uint16_t *restrict y,
                                               int32_t *restrict idx, float *restrict m, int64_t j0) {
    const int64_t c = d->c;
    for (int64_t oh = 0; oh < d->ho; oh++)
        for (int64_t ow = 0; ow < d->wo; ow++) {
            uint16_t *restrict yr = y + (oh * d->wo + ow) * c;
            int32_t *restrict ir = idx + (oh * d->wo + ow) * c;
            const int64_t h0 = oh * d->sh - d->ph, w0 = ow * d->sw - d->pw;
            const int32_t first = (int32_t)((h0 > 0 ? h0 : 0) * d->w + (w0 > 0 ? w0 : 0));
            for (int64_t j = j0; j < c; j++) m[j] = -INFINITY, ir[j] = first;
            for (int64_t kh = 0; kh < d->kh; kh++) {
                const int64_t ih = h0 + kh;
                if (ih < 0 || ih >= d->h) continue;
                for (int64_t kw = 0; kw < d->kw; kw++) {
                    const int64_t iw = w0 + kw;
                    if (iw < 0 || iw >= d->w) continue;
                    const uint16_t *restrict xr = x + (ih * d->w + iw) * c;
                    const int32_t at = (int32_t)(ih * d->w + iw);
                    for (int64_t j = j0; j < c; j++) {
                        const float v = gr_bf16_decode_hd(xr[j]);
                        bool take = v > m[j] || v != v; /* NaN propagates, as PyTorch */
                        m[j] = take ? v : m[j];
                        ir[j] = take ? at : ir[j];
                    }
                }
            }
            for (int64_t j = j0; j < c; j++) yr[j] = gr_bf16_encode_hd(m[j]);
        }
}

/* gr_mpn_bwd_tiled on bf16 storage, each dy decoded as it is read and each dx encoded as it is written;
 * channels [j0, C) */
GR_ISA_CLONES static void gr_mpn_bwd_tiled_bf16_c(const gr_mpn *d, const uint16_t *restrict dy,
                                                  const int32_t *restrict idx, uint16_t *restrict dx, int64_t j0) {
    const int64_t c = d->c;
    for (int64_t ih = 0; ih < d->h; ih++)
        for (int64_t iw = 0; iw < d->w; iw++) {
            const int64_t oh = ih / d->kh, ow = iw / d->kw, at = ih * d->w + iw;
            uint16_t *restrict o = dx + at * c;
            if (oh >= d->ho || ow >= d->wo) { /* past the last whole window (floor mode) */
                for (int64_t j = j0; j < c; j++) o[j] = gr_bf16_encode_hd(0.0f);
                continue;
            }
            const uint16_t *restrict g = dy + (oh * d->wo + ow) * c;
            const int32_t *restrict ir = idx + (oh * d->wo + ow) * c;
            for (int64_t j = j0; j < c; j++) {
                const float gj = 0.0f + gr_bf16_decode_hd(g[j]);
                o[j] = gr_bf16_encode_hd(ir[j] == (int32_t)at ? gj : 0.0f);
            }
        }
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

/* AVX-512 (picked at run time): 16 channels a vector, the running maxima and indices kept in registers
 * over the window, where GCC's vectorized loops above store and reload them at every window element and
 * its vector extensions turned the index select into scalar code. The same compares, selects and
 * encodings: the same bits. A vector of fp32 values that hold decoded bf16 ones (or -inf, or 0 + one)
 * encodes as their high halves, a NaN made quiet as gr_bf16_encode_hd makes it. */
#define GR_MPN_AVX512 __attribute__((target("avx512f,avx512bw")))

GR_MPN_AVX512 static inline __m512 gr_mpn_load16(const uint16_t *p) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)p)), 16));
}

GR_MPN_AVX512 static inline void gr_mpn_store16(uint16_t *p, __m512 v) {
    const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    __m512i b = _mm512_srli_epi32(_mm512_castps_si512(v), 16);
    b = _mm512_mask_or_epi32(b, nan, b, _mm512_set1_epi32(0x40));
    _mm256_storeu_si256((__m256i *)p, _mm512_cvtepi32_epi16(b));
}

GR_MPN_AVX512 static void gr_mpn_sample_bf16_512(const gr_mpn *d, const uint16_t *restrict x, uint16_t *restrict y,
                                                 int32_t *restrict idx, float *restrict m) {
    const int64_t c = d->c, cv = c / 16 * 16;
    for (int64_t oh = 0; oh < d->ho; oh++)
        for (int64_t ow = 0; ow < d->wo; ow++) {
            uint16_t *restrict yr = y + (oh * d->wo + ow) * c;
            int32_t *restrict ir = idx + (oh * d->wo + ow) * c;
            const int64_t h0 = oh * d->sh - d->ph, w0 = ow * d->sw - d->pw;
            const int64_t kh0 = h0 < 0 ? -h0 : 0, kh1 = GR_MIN(d->kh, d->h - h0);
            const int64_t kw0 = w0 < 0 ? -w0 : 0, kw1 = GR_MIN(d->kw, d->w - w0);
            const int32_t first = (int32_t)((h0 + kh0) * d->w + (w0 + kw0));
            for (int64_t j0 = 0; j0 < cv; j0 += 16) {
                __m512 mv = _mm512_set1_ps(-INFINITY);
                __m512i iv = _mm512_set1_epi32(first);
                for (int64_t kh = kh0; kh < kh1; kh++)
                    for (int64_t kw = kw0; kw < kw1; kw++) {
                        const int32_t at = (int32_t)((h0 + kh) * d->w + (w0 + kw));
                        const __m512 v = gr_mpn_load16(x + at * c + j0);
                        const __mmask16 take = _mm512_cmp_ps_mask(v, mv, _CMP_GT_OQ) |
                                               _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
                        mv = _mm512_mask_mov_ps(mv, take, v);
                        iv = _mm512_mask_mov_epi32(iv, take, _mm512_set1_epi32(at));
                    }
                gr_mpn_store16(yr + j0, mv);
                _mm512_storeu_si512((void *)(ir + j0), iv);
            }
        }
    if (cv < c) gr_mpn_sample_bf16_c(d, x, y, idx, m, cv);
}

GR_MPN_AVX512 static void gr_mpn_bwd_tiled_bf16_512(const gr_mpn *d, const uint16_t *restrict dy,
                                                    const int32_t *restrict idx, uint16_t *restrict dx) {
    const int64_t c = d->c, cv = c / 16 * 16;
    for (int64_t ih = 0; ih < d->h; ih++)
        for (int64_t iw = 0; iw < d->w; iw++) {
            const int64_t oh = ih / d->kh, ow = iw / d->kw, at = ih * d->w + iw;
            uint16_t *restrict o = dx + at * c;
            if (oh >= d->ho || ow >= d->wo) {
                for (int64_t j0 = 0; j0 < cv; j0 += 16) gr_mpn_store16(o + j0, _mm512_setzero_ps());
                continue;
            }
            const uint16_t *restrict g = dy + (oh * d->wo + ow) * c;
            const int32_t *restrict ir = idx + (oh * d->wo + ow) * c;
            const __m512i atv = _mm512_set1_epi32((int32_t)at);
            for (int64_t j0 = 0; j0 < cv; j0 += 16) {
                const __m512 gj = _mm512_add_ps(_mm512_setzero_ps(), gr_mpn_load16(g + j0));
                const __mmask16 hit = _mm512_cmpeq_epi32_mask(_mm512_loadu_si512((const void *)(ir + j0)), atv);
                gr_mpn_store16(o + j0, _mm512_maskz_mov_ps(hit, gj));
            }
        }
    if (cv < c) gr_mpn_bwd_tiled_bf16_c(d, dy, idx, dx, cv);
}

/* libgcc reads the CPU's features once at start; this only tests them */
static bool gr_mpn_avx512(void) { return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw"); }

static void gr_mpn_sample_bf16(const gr_mpn *d, const uint16_t *x, uint16_t *y, int32_t *idx, float *m) {
    if (gr_mpn_avx512()) gr_mpn_sample_bf16_512(d, x, y, idx, m);
    else gr_mpn_sample_bf16_c(d, x, y, idx, m, 0);
}

static void gr_mpn_bwd_tiled_bf16(const gr_mpn *d, const uint16_t *dy, const int32_t *idx, uint16_t *dx) {
    if (gr_mpn_avx512()) gr_mpn_bwd_tiled_bf16_512(d, dy, idx, dx);
    else gr_mpn_bwd_tiled_bf16_c(d, dy, idx, dx, 0);
}
#else
static void gr_mpn_sample_bf16(const gr_mpn *d, const uint16_t *x, uint16_t *y, int32_t *idx, float *m) {
    gr_mpn_sample_bf16_c(d, x, y, idx, m, 0);
}

static void gr_mpn_bwd_tiled_bf16(const gr_mpn *d, const uint16_t *dy, const int32_t *idx, uint16_t *dx) {
    gr_mpn_bwd_tiled_bf16_c(d, dy, idx, dx, 0);
}
#endif

static void gr_mpn_fwd(const gr_kargs *a, const void *ctx, int64_t i, const float *x, float *y) {
    const gr_mpn *d = ctx;
    gr_mpn_sample(d, x, y, (int32_t *)a->out[1] + i * d->ho * d->wo * d->c);
}

void gr_cpu_maxpool_nhwc(const gr_kargs *a) {
    if (gr_mpb_maxpool(a)) return;
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
    if (gr_mpb_maxpool_bwd(a)) return;
    const gr_mpn d = gr_mpn_of(a, a->tout[0], a->tin[0]);
    gr_cpu_pool_units(a, a->n, d.ho * d.wo * d.c, d.h * d.w * d.c, gr_mpn_bwd, &d);
}

void gr_cpu_transpose_sample(const void *restrict src, void *restrict dst, int64_t c, int64_t s, bool to_rows) {
    const uint32_t *restrict x = src;
    uint32_t *restrict y = dst;
    for (int64_t ch = 0; ch < c; ch++)
        for (int64_t p = 0; p < s; p++) {
            if (to_rows) y[p * c + ch] = x[ch * s + p];
            else y[ch * s + p] = x[p * c + ch];
        }
}

/* The same for 2-byte values (bf16) */
static void gr_mpn_transpose16(const uint16_t *restrict x, uint16_t *restrict y, int64_t c, int64_t s,
                               bool to_rows) {
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
    if (!m->x_rows) gr_cpu_transpose_sample(x, buf, c, s_in, true), xr = buf;
    gr_mpn_sample(d, xr, m->y_rows ? y : yr, m->i_rows ? idx : ir);
    if (!m->y_rows) gr_cpu_transpose_sample(yr, y, c, s_out, false);
    if (!m->i_rows) gr_cpu_transpose_sample(ir, idx, c, s_out, false);
    free(buf);
}

static void gr_mpm_bwd(const gr_kargs *a, const void *ctx, int64_t i, const float *dy, float *dx) {
    const gr_mpn_mixed *m = ctx;
    const gr_mpn *d = &m->d;
    const int64_t s_in = d->h * d->w, s_out = d->ho * d->wo, c = d->c;
    const int32_t *idx = (const int32_t *)a->in[1] + i * s_out * c;
    float *buf = gr_xmalloc((size_t)(s_in + 2 * s_out) * (size_t)c * sizeof *buf), *dyr = buf + s_in * c;
    int32_t *ir = (int32_t *)(dyr + s_out * c);
    if (!m->y_rows) gr_cpu_transpose_sample(dy, dyr, c, s_out, true), dy = dyr;
    if (!m->i_rows) gr_cpu_transpose_sample(idx, ir, c, s_out, true), idx = ir;
    gr_mpn_scatter(d, dy, idx, m->x_rows ? dx : buf);
    if (!m->x_rows) gr_cpu_transpose_sample(buf, dx, c, s_in, false);
    free(buf);
}

/* ---- bf16 storage where it lies (gr_mpn_sample_bf16, gr_mpn_bwd_tiled_bf16) ----
 * A forward whose input is channels-last and a backward of tiling windows whose dx is: each sample's
 * channels-first outputs (forward) or dy and indices (backward) transposed through scratch, as the fp32
 * kernels' are, in their storage type. The other cases decode (gr_cpu_pool_units). */
typedef void (*gr_mpb_fn)(const gr_kargs *a, const gr_mpn_mixed *m, int64_t i, void *scratch);

static void gr_mpb_run(const gr_kargs *a, const gr_mpn_mixed *m, size_t scratch, gr_mpb_fn fn) {
    const int64_t work = a->n * m->d.h * m->d.w * m->d.c;
    #pragma omp parallel if (work >= GR_OMP_MIN)
    {
        void *buf = gr_xmalloc(scratch);
        #pragma omp for schedule(static)
        for (int64_t i = 0; i < a->n; i++) fn(a, m, i, buf);
        free(buf);
    }
}

/* scratch: the indices [s_out][c] (int32), then the running maxima (c floats), then y [s_out][c] (bf16) */
static void gr_mpb_fwd(const gr_kargs *a, const gr_mpn_mixed *m, int64_t i, void *scratch) {
    const gr_mpn *d = &m->d;
    const int64_t s_in = d->h * d->w, s_out = d->ho * d->wo, c = d->c;
    const uint16_t *x = (const uint16_t *)a->in[0] + i * s_in * c;
    uint16_t *y = (uint16_t *)a->out[0] + i * s_out * c;
    int32_t *idx = (int32_t *)a->out[1] + i * s_out * c, *ir = scratch;
    float *mx = (float *)(ir + s_out * c);
    uint16_t *yr = (uint16_t *)(mx + c);
    gr_mpn_sample_bf16(d, x, m->y_rows ? y : yr, m->i_rows ? idx : ir, mx);
    if (!m->y_rows) gr_mpn_transpose16(yr, y, c, s_out, false);
    if (!m->i_rows) gr_cpu_transpose_sample(ir, idx, c, s_out, false);
}

/* scratch: the indices as rows (int32), then dy as rows (bf16) */
static void gr_mpb_bwd(const gr_kargs *a, const gr_mpn_mixed *m, int64_t i, void *scratch) {
    const gr_mpn *d = &m->d;
    const int64_t s_in = d->h * d->w, s_out = d->ho * d->wo, c = d->c;
    const uint16_t *dy = (const uint16_t *)a->in[0] + i * s_out * c;
    const int32_t *idx = (const int32_t *)a->in[1] + i * s_out * c;
    int32_t *ir = scratch;
    uint16_t *dyr = (uint16_t *)(ir + s_out * c);
    if (!m->y_rows) gr_mpn_transpose16(dy, dyr, c, s_out, true), dy = dyr;
    if (!m->i_rows) gr_cpu_transpose_sample(idx, ir, c, s_out, true), idx = ir;
    gr_mpn_bwd_tiled_bf16(d, dy, idx, (uint16_t *)a->out[0] + i * s_in * c);
}

static gr_mpn_mixed gr_mpb_of(const gr_kargs *a, const gr_tensor *x, const gr_tensor *y, const gr_tensor *ix) {
    const gr_mpn_mixed m = {gr_mpn_of(a, x, y), x->layout == GR_NHWC, y->layout == GR_NHWC, ix->layout == GR_NHWC};
    return m;
}

/* Runs the forward on bf16 storage where it lies; false: not this case (fp32, or an input channels-first) */
static bool gr_mpb_maxpool(const gr_kargs *a) {
    if (a->ein[0] != GR_BF16 || a->tin[0]->layout != GR_NHWC) return false;
    const gr_mpn_mixed m = gr_mpb_of(a, a->tin[0], a->tout[0], a->tout[1]);
    const size_t s_out = (size_t)(m.d.ho * m.d.wo * m.d.c);
    gr_mpb_run(a, &m, s_out * (4 + 2) + (size_t)m.d.c * 4, gr_mpb_fwd);
    return true;
}

/* The backward likewise; false: not this case (fp32, overlapping windows, or dx channels-first) */
static bool gr_mpb_maxpool_bwd(const gr_kargs *a) {
    const gr_mpn_mixed m = gr_mpb_of(a, a->tout[0], a->tin[0], a->tin[1]);
    if (a->ein[0] != GR_BF16 || !m.x_rows || !gr_mpn_tiled(&m.d)) return false;
    gr_mpb_run(a, &m, (size_t)(m.d.ho * m.d.wo * m.d.c) * (4 + 2), gr_mpb_bwd);
    return true;
}

void gr_cpu_maxpool_mixed(const gr_kargs *a) {
    const bool fwd = a->node->op == GR_OP_MAXPOOL;
    if (fwd ? gr_mpb_maxpool(a) : gr_mpb_maxpool_bwd(a)) return;
    const gr_tensor *x = fwd ? a->tin[0] : a->tout[0], *y = fwd ? a->tout[0] : a->tin[0];
    const gr_tensor *ix = fwd ? a->tout[1] : a->tin[1];
    const gr_mpn_mixed m = {gr_mpn_of(a, x, y), x->layout == GR_NHWC, y->layout == GR_NHWC, ix->layout == GR_NHWC};
    const int64_t in = m.d.h * m.d.w * m.d.c, out = m.d.ho * m.d.wo * m.d.c;
    if (fwd) gr_cpu_pool_units(a, a->n, in, out, gr_mpm_fwd, &m);
    else gr_cpu_pool_units(a, a->n, out, in, gr_mpm_bwd, &m);
}
