/* pool.c — CPU kernels of maxpool, avgpool, global_avgpool and their
 * backward, on NCHW planes: every (sample, channel) plane is independent,
 * so the loops run in parallel over the n*C planes.
 *
 * maxpool and avgpool walk one output row at a time and, for each window
 * offset (kh, kw) in PyTorch's scan order, sweep the outputs of the row
 * whose input column is in bounds: the inner loop is a strided load and a
 * compare/add the compiler can vectorize, and ties keep the first maximum
 * in scan order (a later value must be strictly greater), as PyTorch. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_kernels.h"
#include "half_io.h"

/* Window columns whose output ranges are precomputed (wider kernels compute them per row). */
#define GR_POOL_KW_TABLE 16

/* One pooling geometry, read from the node's attrs and tensors. */
typedef struct gr_pool_dims {
    int64_t planes;          /* n * C */
    int64_t h, w, ho, wo;
    int64_t kh, kw, sh, sw, ph, pw;
    int64_t lo[GR_POOL_KW_TABLE], hi[GR_POOL_KW_TABLE]; /* gr_pool_cols of the first columns */
} gr_pool_dims;

static void gr_pool_cols_calc(const gr_pool_dims *d, int64_t kw, int64_t *lo, int64_t *hi);

static gr_pool_dims gr_pool_dims_of(const gr_kargs *a, const gr_tensor *x, const gr_tensor *y) {
    const gr_attrs *at = &a->node->attrs;
    gr_pool_dims d = {
        .planes = a->n * x->shape[1], .h = x->shape[2], .w = x->shape[3], .ho = y->shape[2], .wo = y->shape[3],
        .kh = at->kernel[0], .kw = at->kernel[1], .sh = at->stride[0], .sw = at->stride[1],
        .ph = at->padding[0], .pw = at->padding[1],
    };
    for (int64_t kw = 0; kw < d.kw && kw < GR_POOL_KW_TABLE; kw++) gr_pool_cols_calc(&d, kw, &d.lo[kw], &d.hi[kw]);
    return d;
}

/* The outputs [lo, hi) of a row whose window column kw lands inside [0, w). */
static void gr_pool_cols_calc(const gr_pool_dims *d, int64_t kw, int64_t *lo, int64_t *hi) {
    int64_t first = d->pw - kw;            /* ow * sw >= pw - kw */
    int64_t last = d->w - 1 + d->pw - kw;  /* ow * sw <= w - 1 + pw - kw */
    *lo = first > 0 ? (first + d->sw - 1) / d->sw : 0;
    *hi = last < 0 ? 0 : last / d->sw + 1;
    if (*hi > d->wo) *hi = d->wo;
    if (*lo > *hi) *lo = *hi;
}

/* The same from the table (the divisions stay out of the row loops). */
static inline void gr_pool_cols(const gr_pool_dims *d, int64_t kw, int64_t *lo, int64_t *hi) {
    if (kw < GR_POOL_KW_TABLE) {
        *lo = d->lo[kw];
        *hi = d->hi[kw];
    } else {
        gr_pool_cols_calc(d, kw, lo, hi);
    }
}

/* One window offset over count outputs of a row: output j sees x[j * sw],
 * whose flat index in the plane is base + j * sw. */
static inline void gr_maxpool_sweep(float *restrict yr, int32_t *restrict ir, const float *restrict x,
                                    int32_t base, int64_t count, int64_t sw) {
    for (int64_t j = 0; j < count; j++) {
        float v = x[j * sw], m = yr[j];
        bool take = v > m || v != v; /* NaN propagates, as PyTorch */
        yr[j] = take ? v : m;
        ir[j] = take ? base + (int32_t)(j * sw) : ir[j];
    }
}

/* The 2x2 stride-2 unpadded window (LeNet's, the Fashion-MNIST CNN's): the
 * four values in scan order, the same rule as the sweep. (Built for
 * AVX-512 it is twice as slow on the CNN's 14- and 7-wide rows.) */
static void gr_maxpool_plane_2x2(int64_t ho, int64_t wo, int64_t w, const float *restrict xp,
                                               float *restrict yp, int32_t *restrict ip) {
    for (int64_t oh = 0; oh < ho; oh++) {
        const float *restrict r0 = xp + 2 * oh * w, *restrict r1 = r0 + w;
        float *restrict yr = yp + oh * wo;
        int32_t *restrict ir = ip + oh * wo;
        const int32_t base = (int32_t)(2 * oh * w), w32 = (int32_t)w;
        for (int64_t ow = 0; ow < wo; ow++) {
            float a = r0[2 * ow], b = r0[2 * ow + 1], c = r1[2 * ow], e = r1[2 * ow + 1], m = a;
            int32_t at = 0;
            bool t = b > m || b != b;
            m = t ? b : m;
            at = t ? 1 : at;
            t = c > m || c != c;
            m = t ? c : m;
            at = t ? w32 : at;
            t = e > m || e != e;
            m = t ? e : m;
            at = t ? w32 + 1 : at;
            yr[ow] = m;
            ir[ow] = base + (int32_t)(2 * ow) + at;
        }
    }
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

/* The 2x2 window with AVX-512 (picked at run time): 16 outputs of a row a vector, each input row's
 * 32 values loaded (masked past the row's end) and split into its even and odd columns; the four
 * candidates compared in scan order by the scalar loop's rule: the same maxima and indices. Where
 * GCC's build of the loop above for AVX-512 gathered the strided values one by one. */
#define GR_POOL_AVX512 __attribute__((target("avx512f")))

GR_POOL_AVX512 static void gr_maxpool_plane_2x2_512(int64_t ho, int64_t wo, int64_t w, const float *restrict xp,
                                                    float *restrict yp, int32_t *restrict ip) {
    const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
    const __m512i lane2 = _mm512_slli_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0), 1);
    for (int64_t oh = 0; oh < ho; oh++) {
        const float *r0 = xp + 2 * oh * w, *r1 = r0 + w;
        for (int64_t ow0 = 0; ow0 < wo; ow0 += 16) {
            const int64_t cnt = GR_MIN(16, wo - ow0);
            const __mmask16 out = (__mmask16)((1u << cnt) - 1u);
            const __mmask16 lo = (__mmask16)(cnt >= 8 ? 0xFFFFu : (1u << (2 * cnt)) - 1u);
            const __mmask16 hi = (__mmask16)(cnt > 8 ? (1u << (2 * cnt - 16)) - 1u : 0u);
            const float *p0 = r0 + 2 * ow0, *p1 = r1 + 2 * ow0;
            const __m512 a0 = _mm512_maskz_loadu_ps(lo, p0), a1 = _mm512_maskz_loadu_ps(hi, p0 + 16);
            const __m512 b0 = _mm512_maskz_loadu_ps(lo, p1), b1 = _mm512_maskz_loadu_ps(hi, p1 + 16);
            const __m512 c[3] = {_mm512_permutex2var_ps(a0, odd, a1), _mm512_permutex2var_ps(b0, even, b1),
                                 _mm512_permutex2var_ps(b0, odd, b1)};
            const int32_t off[3] = {1, (int32_t)w, (int32_t)w + 1};
            __m512 m = _mm512_permutex2var_ps(a0, even, a1);
            __m512i at = _mm512_setzero_si512();
            for (int k = 0; k < 3; k++) {
                const __mmask16 t = _mm512_cmp_ps_mask(c[k], m, _CMP_GT_OQ) | _mm512_cmp_ps_mask(c[k], c[k], _CMP_UNORD_Q);
                m = _mm512_mask_mov_ps(m, t, c[k]);
                at = _mm512_mask_mov_epi32(at, t, _mm512_set1_epi32(off[k]));
            }
            const __m512i idx = _mm512_add_epi32(_mm512_add_epi32(at, lane2),
                                                 _mm512_set1_epi32((int32_t)(2 * oh * w + 2 * ow0)));
            _mm512_mask_storeu_ps(yp + oh * wo + ow0, out, m);
            _mm512_mask_storeu_epi32(ip + oh * wo + ow0, out, idx);
        }
    }
}

/* Its backward, a plane: each output's 0 + dy (as the scatter's sum into a cleared dx gives it, -0
 * becoming +0) at the one of its four positions its index names, 0 at the other three, written as
 * the two input rows (even and odd columns interleaved back); 0 past the last whole window. Every
 * value written once, where the scatter cleared the plane and added into it. */
GR_POOL_AVX512 static void gr_maxpool_bwd_plane_2x2_512(int64_t h, int64_t w, int64_t ho, int64_t wo,
                                                        const float *restrict dy, const int32_t *restrict ip,
                                                        float *restrict dx) {
    const __m512i lo_ix = _mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    const __m512i hi_ix = _mm512_add_epi32(lo_ix, _mm512_set1_epi32(8));
    const __m512i lane2 = _mm512_slli_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0), 1);
    const __m512i wv = _mm512_set1_epi32((int32_t)w), one = _mm512_set1_epi32(1);
    for (int64_t oh = 0; oh < ho; oh++) {
        float *r0 = dx + 2 * oh * w, *r1 = r0 + w;
        for (int64_t ow0 = 0; ow0 < wo; ow0 += 16) {
            const int64_t cnt = GR_MIN(16, wo - ow0);
            const __mmask16 out = (__mmask16)((1u << cnt) - 1u);
            const __mmask16 lo = (__mmask16)(cnt >= 8 ? 0xFFFFu : (1u << (2 * cnt)) - 1u);
            const __mmask16 hi = (__mmask16)(cnt > 8 ? (1u << (2 * cnt - 16)) - 1u : 0u);
            const __m512 g = _mm512_add_ps(_mm512_setzero_ps(), _mm512_maskz_loadu_ps(out, dy + oh * wo + ow0));
            const __m512i at = _mm512_sub_epi32(_mm512_maskz_loadu_epi32(out, ip + oh * wo + ow0),
                _mm512_add_epi32(lane2, _mm512_set1_epi32((int32_t)(2 * oh * w + 2 * ow0))));
            const __m512 v00 = _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(at, _mm512_setzero_si512()), g);
            const __m512 v01 = _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(at, one), g);
            const __m512 v10 = _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(at, wv), g);
            const __m512 v11 = _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(at, _mm512_add_epi32(wv, one)), g);
            _mm512_mask_storeu_ps(r0 + 2 * ow0, lo, _mm512_permutex2var_ps(v00, lo_ix, v01));
            _mm512_mask_storeu_ps(r0 + 2 * ow0 + 16, hi, _mm512_permutex2var_ps(v00, hi_ix, v01));
            _mm512_mask_storeu_ps(r1 + 2 * ow0, lo, _mm512_permutex2var_ps(v10, lo_ix, v11));
            _mm512_mask_storeu_ps(r1 + 2 * ow0 + 16, hi, _mm512_permutex2var_ps(v10, hi_ix, v11));
        }
        for (int64_t c = 2 * wo; c < w; c++) r0[c] = r1[c] = 0.0f; /* a ragged right edge */
    }
    memset(dx + 2 * ho * w, 0, (size_t)((h - 2 * ho) * w) * sizeof *dx); /* a ragged bottom edge */
}

/* libgcc reads the CPU's features once at start; this only tests them */
static bool gr_pool_avx512(void) { return __builtin_cpu_supports("avx512f"); }
#else
static bool gr_pool_avx512(void) { return false; }
static void gr_maxpool_plane_2x2_512(int64_t ho, int64_t wo, int64_t w, const float *xp, float *yp, int32_t *ip) {
    gr_maxpool_plane_2x2(ho, wo, w, xp, yp, ip);
}
static void gr_maxpool_bwd_plane_2x2_512(int64_t h, int64_t w, int64_t ho, int64_t wo, const float *dy,
                                         const int32_t *ip, float *dx) {
    (void)h, (void)w, (void)ho, (void)wo, (void)dy, (void)ip, (void)dx;
}
#endif

/* One (sample, channel) plane: yp = the window maxima of xp (padding =
 * -inf); ip = their flat indices ih*W + iw. */
static void gr_maxpool_plane(const gr_pool_dims *d, const float *xp, float *yp, int32_t *ip) {
    if (d->kh == 2 && d->kw == 2 && d->sh == 2 && d->sw == 2 && d->ph == 0 && d->pw == 0) {
        if (gr_pool_avx512()) gr_maxpool_plane_2x2_512(d->ho, d->wo, d->w, xp, yp, ip);
        else gr_maxpool_plane_2x2(d->ho, d->wo, d->w, xp, yp, ip);
        return;
    }
    for (int64_t oh = 0; oh < d->ho; oh++) {
        float *restrict yr = yp + oh * d->wo;
        int32_t *restrict ir = ip + oh * d->wo;
        int64_t h0 = oh * d->sh - d->ph;
        /* PyTorch starts each window at -inf with the index of its first in-bounds element */
        int64_t ih0 = h0 > 0 ? h0 : 0;
        for (int64_t ow = 0; ow < d->wo; ow++) {
            int64_t w0 = ow * d->sw - d->pw;
            yr[ow] = -INFINITY;
            ir[ow] = (int32_t)(ih0 * d->w + (w0 > 0 ? w0 : 0));
        }
        for (int64_t kh = 0; kh < d->kh; kh++) {
            int64_t ih = h0 + kh;
            if (ih < 0 || ih >= d->h) continue;
            const float *restrict xr = xp + ih * d->w;
            for (int64_t kw = 0; kw < d->kw; kw++) {
                int64_t lo, hi;
                gr_pool_cols(d, kw, &lo, &hi);
                if (lo >= hi) continue;
                int64_t iw = lo * d->sw + kw - d->pw; /* >= 0 by lo's choice */
                int32_t base = (int32_t)(ih * d->w + iw);
                /* constant strides let the compiler vectorize the strided loads */
                if (d->sw == 1) gr_maxpool_sweep(yr + lo, ir + lo, xr + iw, base, hi - lo, 1);
                else if (d->sw == 2) gr_maxpool_sweep(yr + lo, ir + lo, xr + iw, base, hi - lo, 2);
                else gr_maxpool_sweep(yr + lo, ir + lo, xr + iw, base, hi - lo, d->sw);
            }
        }
    }
}

void gr_cpu_pool_units(const gr_kargs *a, int64_t units, int64_t in_len, int64_t out_len, gr_pool_unit_fn fn,
                       const void *ctx) {
    const bool h = a->ein[0] == GR_BF16;
    GR_ASSERT(h == (a->eout[0] == GR_BF16));
    #pragma omp parallel if (units * (in_len > out_len ? in_len : out_len) >= GR_OMP_MIN)
    {
        float *tin = h ? gr_xmalloc((size_t)(in_len + out_len) * sizeof *tin) : NULL;
        float *tout = tin ? tin + in_len : NULL;
        #pragma omp for
        for (int64_t u = 0; u < units; u++) {
            const float *in = gr_hio_read(gr_hio_cat(a->in[0], h, u * in_len), h, in_len, tin);
            void *ob = gr_hio_at(a->out[0], h, u * out_len);
            float *out = gr_hio_dst(ob, h, tout);
            fn(a, ctx, u, in, out);
            gr_hio_write(ob, h, out_len, out);
        }
        free(tin);
    }
}

static void gr_maxpool_fwd_plane(const gr_kargs *a, const void *ctx, int64_t p, const float *x, float *y) {
    const gr_pool_dims *d = ctx;
    gr_maxpool_plane(d, x, y, (int32_t *)a->out[1] + p * d->ho * d->wo);
}

/* y = max over each window; idx = its flat index ih*W + iw. x and y in fp32,
 * or both in bf16 (exact: a maximum is one of the inputs). */
void gr_cpu_maxpool(const gr_kargs *a) {
    if (a->tin[0]->layout != a->tout[0]->layout || a->tout[0]->layout != a->tout[1]->layout) {
        gr_cpu_maxpool_mixed(a);
        return;
    }
    if (a->tin[0]->layout == GR_NHWC) {
        gr_cpu_maxpool_nhwc(a);
        return;
    }
    gr_pool_dims d = gr_pool_dims_of(a, a->tin[0], a->tout[0]);
    gr_cpu_pool_units(a, d.planes, d.h * d.w, d.ho * d.wo, gr_maxpool_fwd_plane, &d);
}

static void gr_maxpool_bwd_plane(const gr_kargs *a, const void *ctx, int64_t p, const float *restrict dy,
                                 float *restrict dx) {
    const gr_pool_dims *d = ctx;
    const int64_t out_plane = d->ho * d->wo;
    const int32_t *restrict ip = (const int32_t *)a->in[1] + p * out_plane;
    if (d->kh == 2 && d->kw == 2 && d->sh == 2 && d->sw == 2 && d->ph == 0 && d->pw == 0 && gr_pool_avx512()) {
        gr_maxpool_bwd_plane_2x2_512(d->h, d->w, d->ho, d->wo, dy, ip, dx);
        return;
    }
    memset(dx, 0, (size_t)(d->h * d->w) * sizeof *dx);
    for (int64_t j = 0; j < out_plane; j++) dx[ip[j]] += dy[j];
}

/* dx = 0, then dx[idx] += dy for every output (summed in fp32: a bf16 dx
 * is encoded once per plane). */
void gr_cpu_maxpool_bwd(const gr_kargs *a) {
    if (a->tout[0]->layout != a->tin[0]->layout || a->tin[0]->layout != a->tin[1]->layout) {
        gr_cpu_maxpool_mixed(a);
        return;
    }
    if (a->tout[0]->layout == GR_NHWC) {
        gr_cpu_maxpool_bwd_nhwc(a);
        return;
    }
    gr_pool_dims d = gr_pool_dims_of(a, a->tout[0], a->tin[0]);
    gr_cpu_pool_units(a, d.planes, d.ho * d.wo, d.h * d.w, gr_maxpool_bwd_plane, &d);
}

/* Rows [*h0, *h1) of output row oh's window inside the input; the count of
 * rows the divisor uses (the padded window's, or only the in-bounds ones). */
static int64_t gr_avgpool_rows(const gr_pool_dims *d, int64_t oh, bool include_pad, int64_t *h0, int64_t *h1) {
    int64_t s = oh * d->sh - d->ph, e = s + d->kh;
    *h0 = s > 0 ? s : 0;
    *h1 = e < d->h ? e : d->h;
    return include_pad ? d->kh : *h1 - *h0;
}

/* 1 / the divisor of output (oh, ow) given its row count. */
static float gr_avgpool_inv(const gr_pool_dims *d, int64_t rows, int64_t ow, bool include_pad) {
    if (include_pad) return 1.0f / (float)(rows * d->kw);
    int64_t s = ow * d->sw - d->pw, e = s + d->kw;
    int64_t c0 = s > 0 ? s : 0, c1 = e < d->w ? e : d->w;
    return 1.0f / (float)(rows * (c1 - c0));
}

/* y[j] += x[j * sw] for count outputs. */
static inline void gr_avgpool_sum(float *restrict y, const float *restrict x, int64_t count, int64_t sw) {
    for (int64_t j = 0; j < count; j++) y[j] += x[j * sw];
}

/* dx[j * sw] += g[j] for count outputs. */
static inline void gr_avgpool_spread(float *restrict dx, const float *restrict g, int64_t count, int64_t sw) {
    for (int64_t j = 0; j < count; j++) dx[j * sw] += g[j];
}

/* One plane of avgpool: y = the window's sum (window rows, then columns, from 0) / (kh*kw, or its
 * in-bounds count without count_include_pad). Built for AVX-512 and AVX2 too: each output its own
 * adds in that order, so the bits do not depend on the ISA. */
GR_ISA_CLONES static void gr_avgpool_plane(const gr_pool_dims *d, const float *restrict inv, const float *restrict xp,
                                           float *restrict yp) {
    if (d->kh == 2 && d->kw == 2 && d->sh == 2 && d->sw == 2 && d->ph == 0 && d->pw == 0) {
        /* the 2x2 tiling window: its four values in the loops' order below, from +0 (the same bits) */
        for (int64_t oh = 0; oh < d->ho; oh++) {
            const float *restrict r0 = xp + 2 * oh * d->w, *restrict r1 = r0 + d->w;
            float *restrict yr = yp + oh * d->wo;
            const float *restrict ir = inv + oh * d->wo;
            for (int64_t ow = 0; ow < d->wo; ow++)
                yr[ow] = ((((0.0f + r0[2 * ow]) + r0[2 * ow + 1]) + r1[2 * ow]) + r1[2 * ow + 1]) * ir[ow];
        }
        return;
    }
    for (int64_t oh = 0; oh < d->ho; oh++) {
        float *restrict yr = yp + oh * d->wo;
        const float *restrict ir = inv + oh * d->wo;
        int64_t ih0, ih1;
        (void)gr_avgpool_rows(d, oh, true, &ih0, &ih1);
        for (int64_t ow = 0; ow < d->wo; ow++) yr[ow] = 0.0f;
        for (int64_t ih = ih0; ih < ih1; ih++) {
            const float *restrict xr = xp + ih * d->w;
            for (int64_t kw = 0; kw < d->kw; kw++) {
                int64_t lo, hi;
                gr_pool_cols(d, kw, &lo, &hi);
                if (lo >= hi) continue;
                int64_t iw = lo * d->sw + kw - d->pw;
                if (d->sw == 1) gr_avgpool_sum(yr + lo, xr + iw, hi - lo, 1);
                else if (d->sw == 2) gr_avgpool_sum(yr + lo, xr + iw, hi - lo, 2);
                else gr_avgpool_sum(yr + lo, xr + iw, hi - lo, d->sw);
            }
        }
        for (int64_t ow = 0; ow < d->wo; ow++) yr[ow] *= ir[ow];
    }
}

/* Outputs of a row scaled by their divisors, a chunk at a time (no allocation). */
#define GR_AVGPOOL_CHUNK 256

/* One plane of avgpool's backward: dx = 0, then every output spreads dy / divisor over its window,
 * for each chunk of a row's outputs by window rows, then columns. */
GR_ISA_CLONES static void gr_avgpool_bwd_plane_of(const gr_pool_dims *d, const float *restrict inv,
                                                  const float *restrict dyp, float *restrict dxp) {
    if (d->kh == 2 && d->kw == 2 && d->sh == 2 && d->sw == 2 && d->ph == 0 && d->pw == 0) {
        /* the 2x2 tiling window: each dx is in at most one window, so written once, 0 + its
         * rounded share (the adds below onto the cleared plane: the same bits), else 0 */
        for (int64_t ih = 0; ih < d->h; ih++) {
            float *restrict row = dxp + ih * d->w;
            const int64_t oh = ih / 2, cols = oh < d->ho ? 2 * d->wo : 0;
            const float *restrict dyr = dyp + oh * d->wo, *restrict ir = inv + oh * d->wo;
            for (int64_t ow = 0; 2 * ow < cols; ow++) {
                const float g = dyr[ow] * ir[ow];
                row[2 * ow] = row[2 * ow + 1] = 0.0f + g;
            }
            for (int64_t iw = cols; iw < d->w; iw++) row[iw] = 0.0f;
        }
        return;
    }
    memset(dxp, 0, (size_t)(d->h * d->w) * sizeof *dxp);
    for (int64_t oh = 0; oh < d->ho; oh++) {
        const float *dyr = dyp + oh * d->wo, *ir = inv + oh * d->wo;
        int64_t ih0, ih1;
        (void)gr_avgpool_rows(d, oh, true, &ih0, &ih1);
        for (int64_t c0 = 0; c0 < d->wo; c0 += GR_AVGPOOL_CHUNK) {
            int64_t c1 = c0 + GR_AVGPOOL_CHUNK < d->wo ? c0 + GR_AVGPOOL_CHUNK : d->wo;
            float g[GR_AVGPOOL_CHUNK];
            for (int64_t ow = c0; ow < c1; ow++) g[ow - c0] = dyr[ow] * ir[ow];
            for (int64_t ih = ih0; ih < ih1; ih++) {
                float *restrict dxr = dxp + ih * d->w;
                for (int64_t kw = 0; kw < d->kw; kw++) {
                    int64_t lo, hi;
                    gr_pool_cols(d, kw, &lo, &hi);
                    if (lo < c0) lo = c0;
                    if (hi > c1) hi = c1;
                    if (lo >= hi) continue;
                    int64_t iw = lo * d->sw + kw - d->pw;
                    const float *gl = g + (lo - c0);
                    if (d->sw == 1) gr_avgpool_spread(dxr + iw, gl, hi - lo, 1);
                    else if (d->sw == 2) gr_avgpool_spread(dxr + iw, gl, hi - lo, 2);
                    else gr_avgpool_spread(dxr + iw, gl, hi - lo, d->sw);
                }
            }
        }
    }
}

/* One sample of avgpool on channels-last rows: y [Ho][Wo][C] from x [H][W][C], every channel
 * summed as gr_avgpool_plane sums its plane (window rows, then columns, from 0) and scaled by the
 * same divisor: that kernel's results, transposed, bit for bit; the channel loops contiguous. */
GR_ISA_CLONES static void gr_avgpool_sample_nhwc(const gr_pool_dims *d, int64_t c, const float *restrict inv,
                                                 const float *restrict x, float *restrict y) {
    for (int64_t oh = 0; oh < d->ho; oh++) {
        float *restrict yr = y + oh * d->wo * c;
        int64_t ih0, ih1;
        (void)gr_avgpool_rows(d, oh, true, &ih0, &ih1);
        for (int64_t i = 0; i < d->wo * c; i++) yr[i] = 0.0f;
        for (int64_t ih = ih0; ih < ih1; ih++)
            for (int64_t kw = 0; kw < d->kw; kw++) {
                int64_t lo, hi;
                gr_pool_cols(d, kw, &lo, &hi);
                for (int64_t ow = lo; ow < hi; ow++) {
                    const float *restrict xr = x + (ih * d->w + ow * d->sw + kw - d->pw) * c;
                    float *restrict o = yr + ow * c;
                    for (int64_t j = 0; j < c; j++) o[j] += xr[j];
                }
            }
        for (int64_t ow = 0; ow < d->wo; ow++) {
            const float v = inv[oh * d->wo + ow];
            float *restrict o = yr + ow * c;
            for (int64_t j = 0; j < c; j++) o[j] *= v;
        }
    }
}

/* Its backward: dx = 0, then each output's dy * (1 / divisor), rounded as gr_avgpool_bwd_plane_of
 * rounds it, added over its window in that kernel's order (per chunk of a row's outputs, window
 * rows, then columns): its results, transposed, bit for bit. */
GR_ISA_CLONES static void gr_avgpool_bwd_sample_nhwc(const gr_pool_dims *d, int64_t c, const float *restrict inv,
                                                     const float *restrict dy, float *restrict dx) {
    memset(dx, 0, (size_t)(d->h * d->w * c) * sizeof *dx);
    for (int64_t oh = 0; oh < d->ho; oh++) {
        int64_t ih0, ih1;
        (void)gr_avgpool_rows(d, oh, true, &ih0, &ih1);
        for (int64_t c0 = 0; c0 < d->wo; c0 += GR_AVGPOOL_CHUNK) {
            int64_t c1 = c0 + GR_AVGPOOL_CHUNK < d->wo ? c0 + GR_AVGPOOL_CHUNK : d->wo;
            for (int64_t ih = ih0; ih < ih1; ih++)
                for (int64_t kw = 0; kw < d->kw; kw++) {
                    int64_t lo, hi;
                    gr_pool_cols(d, kw, &lo, &hi);
                    if (lo < c0) lo = c0;
                    if (hi > c1) hi = c1;
                    for (int64_t ow = lo; ow < hi; ow++) {
                        const float v = inv[oh * d->wo + ow];
                        const float *restrict g = dy + (oh * d->wo + ow) * c;
                        float *restrict o = dx + (ih * d->w + ow * d->sw + kw - d->pw) * c;
                        for (int64_t j = 0; j < c; j++) o[j] += g[j] * v;
                    }
                }
        }
    }
}

/* A call's geometry, channels (channels-last) and the inverse divisor of each output position
 * [Ho][Wo] (gr_avgpool_inv's, worked out once for all planes, not a division an output). */
/* How a call's units are pooled: NCHW planes, channels-last samples, or samples whose input and
 * output layouts differ (ops.def's GR_CAP_NHWC_ANY: a pool before a flatten reads channels-last
 * and writes channels-first), which go through the channels-last kernels with the channels-first
 * side transposed in scratch, so their results are those kernels', the NCHW kernels' bits. */
typedef enum gr_avgpool_units { GR_AVG_PLANES, GR_AVG_ROWS, GR_AVG_ROWS_IN, GR_AVG_ROWS_OUT } gr_avgpool_units;

/* A call's geometry, direction, units, channels and the inverse divisor of each output position
 * [Ho][Wo] (gr_avgpool_inv's, worked out once for all units, not a division an output). */
typedef struct gr_avgpool_ctx {
    gr_pool_dims d;
    bool bwd;
    gr_avgpool_units units;
    int64_t c;
    float *inv;
} gr_avgpool_ctx;

/* One unit: in (x or dy) to out (y or dx) */
static void gr_avgpool_unit(const gr_kargs *a, const void *ctx, int64_t u, const float *in, float *out) {
    (void)a, (void)u;
    const gr_avgpool_ctx *q = ctx;
    const gr_pool_dims *d = &q->d;
    if (q->units == GR_AVG_PLANES) {
        if (q->bwd) gr_avgpool_bwd_plane_of(d, q->inv, in, out);
        else gr_avgpool_plane(d, q->inv, in, out);
        return;
    }
    const int64_t xs = d->h * d->w, ys = d->ho * d->wo, si = q->bwd ? ys : xs, so = q->bwd ? xs : ys;
    float *tin = q->units == GR_AVG_ROWS_OUT ? gr_xmalloc((size_t)(si * q->c) * sizeof *tin) : NULL;
    float *tout = q->units == GR_AVG_ROWS_IN ? gr_xmalloc((size_t)(so * q->c) * sizeof *tout) : NULL;
    if (tin) gr_cpu_transpose_sample(in, tin, q->c, si, true);
    const float *ri = tin ? tin : in;
    float *ro = tout ? tout : out;
    if (q->bwd) gr_avgpool_bwd_sample_nhwc(d, q->c, q->inv, ri, ro);
    else gr_avgpool_sample_nhwc(d, q->c, q->inv, ri, ro);
    if (tout) gr_cpu_transpose_sample(tout, out, q->c, so, false);
    free(tin);
    free(tout);
}

/* avgpool (bwd false: x -> y) or its backward (dy -> dx); x, y: the forward's input and output
 * tensors. Each unit in fp32, or decoded from bf16 into fp32 and its results encoded once
 * (gr_cpu_pool_units). */
static void gr_avgpool_run(const gr_kargs *a, const gr_tensor *x, const gr_tensor *y, bool bwd) {
    gr_avgpool_ctx q = {gr_pool_dims_of(a, x, y), bwd, GR_AVG_PLANES, x->shape[1], NULL};
    const gr_pool_dims *d = &q.d;
    const bool xr = x->layout == GR_NHWC, yr = y->layout == GR_NHWC, rin = bwd ? yr : xr, rout = bwd ? xr : yr;
    q.units = rin && rout ? GR_AVG_ROWS : rin ? GR_AVG_ROWS_IN : rout ? GR_AVG_ROWS_OUT : GR_AVG_PLANES;
    const bool inc = a->node->attrs.count_include_pad;
    q.inv = gr_xmalloc((size_t)(d->ho * d->wo) * sizeof *q.inv);
    for (int64_t oh = 0; oh < d->ho; oh++) {
        int64_t ih0, ih1;
        const int64_t rows = gr_avgpool_rows(d, oh, inc, &ih0, &ih1);
        for (int64_t ow = 0; ow < d->wo; ow++) q.inv[oh * d->wo + ow] = gr_avgpool_inv(d, rows, ow, inc);
    }
    const int64_t c = q.units == GR_AVG_PLANES ? 1 : q.c, xl = d->h * d->w * c, yl = d->ho * d->wo * c;
    gr_cpu_pool_units(a, q.units == GR_AVG_PLANES ? d->planes : a->n, bwd ? yl : xl, bwd ? xl : yl, gr_avgpool_unit,
                      &q);
    free(q.inv);
}

void gr_cpu_avgpool(const gr_kargs *a) { gr_avgpool_run(a, a->tin[0], a->tout[0], false); }

/* dx = 0, then every output spreads dy / divisor over its window */
void gr_cpu_avgpool_bwd(const gr_kargs *a) { gr_avgpool_run(a, a->tout[0], a->tin[0], true); }

/* y[n, C, 1, 1] = the mean of each plane (x NCHW) or of each sample's rows
 * of C (x NHWC); x and y in fp32 or bf16 (y [n, C, 1, 1] is the same in
 * both layouts). */
void gr_cpu_global_avgpool(const gr_kargs *a) {
    const gr_tensor *xt = a->tin[0];
    const bool hx = a->ein[0] == GR_BF16, hy = a->eout[0] == GR_BF16;
    const int64_t n = a->n, c = xt->shape[1], hw = xt->shape[2] * xt->shape[3], planes = n * c;
    const float inv = 1.0f / (float)hw;
    if (xt->layout == GR_NHWC) {
        #pragma omp parallel if (planes * hw >= GR_OMP_MIN)
        {
            float *acc = gr_xmalloc((size_t)(2 * c) * sizeof *acc), *row = acc + c;
            #pragma omp for
            for (int64_t i = 0; i < n; i++) {
                memset(acc, 0, (size_t)c * sizeof *acc);
                for (int64_t p = 0; p < hw; p++) {
                    const float *restrict r = gr_hio_read(gr_hio_cat(a->in[0], hx, (i * hw + p) * c), hx, c, row);
                    #pragma omp simd
                    for (int64_t j = 0; j < c; j++) acc[j] += r[j];
                }
                for (int64_t j = 0; j < c; j++) acc[j] *= inv;
                float *yd = gr_hio_dst(gr_hio_at(a->out[0], hy, i * c), hy, row);
                memcpy(yd, acc, (size_t)c * sizeof *acc);
                gr_hio_write(gr_hio_at(a->out[0], hy, i * c), hy, c, yd);
            }
            free(acc);
        }
        return;
    }
    #pragma omp parallel if (planes * hw >= GR_OMP_MIN)
    {
        float *tmp = hx ? gr_xmalloc((size_t)hw * sizeof *tmp) : NULL;
        #pragma omp for
        for (int64_t p = 0; p < planes; p++) {
            const float *xp = gr_hio_read(gr_hio_cat(a->in[0], hx, p * hw), hx, hw, tmp);
            float s = 0.0f;
            #pragma omp simd reduction(+ : s)
            for (int64_t i = 0; i < hw; i++) s += xp[i];
            s *= inv;
            if (hy) ((uint16_t *)a->out[0])[p] = gr_bf16_encode_hd(s);
            else ((float *)a->out[0])[p] = s;
        }
        free(tmp);
    }
}

/* dx = dy / (H*W) over each plane (dx NCHW) or each sample's rows (NHWC). */
void gr_cpu_global_avgpool_bwd(const gr_kargs *a) {
    const gr_tensor *xt = a->tout[0];
    const bool hy = a->ein[0] == GR_BF16, hx = a->eout[0] == GR_BF16;
    const int64_t n = a->n, c = xt->shape[1], hw = xt->shape[2] * xt->shape[3], planes = n * c;
    const float inv = 1.0f / (float)hw;
    const bool nhwc = xt->layout == GR_NHWC;
    #pragma omp parallel if (planes * hw >= GR_OMP_MIN)
    {
        /* one sample's gradient rows (NHWC: C values; NCHW: a plane of hw) */
        const int64_t len = nhwc ? c : hw;
        float *g = gr_xmalloc((size_t)(2 * len) * sizeof *g), *dyv = g + len;
        #pragma omp for
        for (int64_t q = 0; q < (nhwc ? n : planes); q++) {
            if (nhwc) {
                const float *d = gr_hio_read(gr_hio_cat(a->in[0], hy, q * c), hy, c, dyv);
                for (int64_t j = 0; j < c; j++) g[j] = d[j] * inv;
                for (int64_t p = 0; p < hw; p++) {
                    void *o = gr_hio_at(a->out[0], hx, (q * hw + p) * c);
                    if (hx) gr_hio_write(o, true, c, g);
                    else memcpy(o, g, (size_t)c * sizeof *g);
                }
            } else {
                float v = gr_hio_get(a->in[0], hy, q) * inv;
                for (int64_t i = 0; i < hw; i++) g[i] = v;
                void *o = gr_hio_at(a->out[0], hx, q * hw);
                if (hx) gr_hio_write(o, true, hw, g);
                else memcpy(o, g, (size_t)hw * sizeof *g);
            }
        }
        free(g);
    }
}
