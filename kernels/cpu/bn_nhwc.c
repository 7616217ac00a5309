/* bn_nhwc.c — batchnorm and its backward on channels-last activations
 * (graph.h: gr_layout): x is rows of C channels, m = n*H*W rows, in fp32
 * or bf16 (half_io.h). Same formulas as bn.c (the NCHW kernels): shifted
 * sums for the statistics, dx = A dy + B (x - mean) + C0; summed over the
 * processes of a data-parallel run when a->ctx->xsum says so.
 *
 * The rows are cut into blocks of a fixed count (from C alone), each block
 * sums its rows per channel in float over the channels as one vector
 * (parallel over blocks), and the blocks' sums are added up in double in
 * block order: the result does not depend on the thread count, so runs
 * repeat bit for bit.
 *
 * A fused relu (attrs.relu, graph/fuse.c) as in bn.c: the forward writes
 * relu(y), the backward masks dy by that output (in[4]). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_kernels.h"
#include "half_io.h"

/* rows per block: about 16k values, at least one row */
static int64_t gr_bnh_rows(int64_t c) { return c >= 16384 ? 1 : 16384 / c; }

typedef struct gr_bnh {
    int64_t m, c, rows, nblk;
    bool h;                  /* bf16 storage */
} gr_bnh;

static gr_bnh gr_bnh_of(const gr_kargs *a, const gr_tensor *x, bool h) {
    gr_bnh b = {a->n * x->shape[2] * x->shape[3], x->shape[1], gr_bnh_rows(x->shape[1]), 0, h};
    b.nblk = (b.m + b.rows - 1) / b.rows;
    return b;
}

/* The row loops, built for AVX-512/AVX2 too (GR_ISA_CLONES): each channel's
 * values are summed row after row and every output is its own expression,
 * so the vector width changes no result (and ISO C compiles no a*b+c into
 * a fused multiply-add). Over nr rows of c channels: */

/* s1[j] += p - shift, s2[j] += (p - shift)^2 (q NULL), or s1[j] += p,
 * s2[j] += p * (q - shift) */
GR_ISA_CLONES static void gr_bnh_rows_sums(const float *restrict pv, const float *restrict qv,
                                           const float *restrict shift, float *restrict s1, float *restrict s2,
                                           int64_t nr, int64_t c) {
    for (int64_t r = 0; r < nr; r++) {
        const float *restrict pr = pv + r * c;
        if (qv) {
            const float *restrict qr = qv + r * c;
            for (int64_t j = 0; j < c; j++) {
                s1[j] += pr[j];
                s2[j] += pr[j] * (qr[j] - shift[j]);
            }
        } else {
            for (int64_t j = 0; j < c; j++) {
                float v = pr[j] - shift[j];
                s1[j] += v;
                s2[j] += v * v;
            }
        }
    }
}

/* out = fa * p + fb * (q - mean) + fc, or (p - mean) * fa + fc (q NULL) */
GR_ISA_CLONES static void gr_bnh_rows_apply(const float *restrict pv, const float *restrict qv, float *restrict ov,
                                            const float *restrict mean, const float *restrict fa,
                                            const float *restrict fb, const float *restrict fc, int64_t nr,
                                            int64_t c) {
    for (int64_t r = 0; r < nr; r++) {
        const float *restrict pr = pv + r * c;
        float *restrict orow = ov + r * c;
        if (qv) {
            const float *restrict qr = qv + r * c;
            for (int64_t j = 0; j < c; j++) orow[j] = fa[j] * pr[j] + fb[j] * (qr[j] - mean[j]) + fc[j];
        } else {
            for (int64_t j = 0; j < c; j++) orow[j] = (pr[j] - mean[j]) * fa[j] + fc[j];
        }
    }
}

/* The same two on bf16 rows, each value decoded where it is read and each output encoded where it
 * is written (exact decoding, one rounding: the results of decoding the rows into fp32 first,
 * without that pass over memory). */
GR_ISA_CLONES static void gr_bnh_rows_sums_bf16(const uint16_t *restrict pv, const uint16_t *restrict qv,
                                                const float *restrict shift, float *restrict s1, float *restrict s2,
                                                int64_t nr, int64_t c) {
    for (int64_t r = 0; r < nr; r++) {
        const uint16_t *restrict pr = pv + r * c;
        if (qv) {
            const uint16_t *restrict qr = qv + r * c;
            for (int64_t j = 0; j < c; j++) {
                const float pj = gr_bf16_decode_hd(pr[j]);
                s1[j] += pj;
                s2[j] += pj * (gr_bf16_decode_hd(qr[j]) - shift[j]);
            }
        } else {
            for (int64_t j = 0; j < c; j++) {
                float v = gr_bf16_decode_hd(pr[j]) - shift[j];
                s1[j] += v;
                s2[j] += v * v;
            }
        }
    }
}

GR_ISA_CLONES static void gr_bnh_rows_apply_bf16(const uint16_t *restrict pv, const uint16_t *restrict qv,
                                                 uint16_t *restrict ov, const float *restrict mean,
                                                 const float *restrict fa, const float *restrict fb,
                                                 const float *restrict fc, int64_t nr, int64_t c) {
    for (int64_t r = 0; r < nr; r++) {
        const uint16_t *restrict pr = pv + r * c;
        uint16_t *restrict orow = ov + r * c;
        if (qv) {
            const uint16_t *restrict qr = qv + r * c;
            for (int64_t j = 0; j < c; j++)
                orow[j] = gr_bf16_encode_hd(fa[j] * gr_bf16_decode_hd(pr[j]) +
                                            fb[j] * (gr_bf16_decode_hd(qr[j]) - mean[j]) + fc[j]);
        } else {
            for (int64_t j = 0; j < c; j++)
                orow[j] = gr_bf16_encode_hd((gr_bf16_decode_hd(pr[j]) - mean[j]) * fa[j] + fc[j]);
        }
    }
}

/* The fused relu's rows: the backward's sums and dx with dy (p) masked by
 * the relu's output (y), and the forward's relu(y), each as the unfused
 * relu kernels round it. */
GR_ISA_CLONES static void gr_bnh_rows_sums_relu(const float *restrict pv, const float *restrict qv,
                                                const float *restrict yv, const float *restrict shift,
                                                float *restrict s1, float *restrict s2, int64_t nr, int64_t c) {
    for (int64_t r = 0; r < nr; r++)
        for (int64_t j = 0; j < c; j++) {
            const float pj = pv[r * c + j], g = yv[r * c + j] <= 0.0f ? 0.0f : pj;
            s1[j] += g;
            s2[j] += g * (qv[r * c + j] - shift[j]);
        }
}

GR_ISA_CLONES static void gr_bnh_rows_sums_relu_bf16(const uint16_t *restrict pv, const uint16_t *restrict qv,
                                                     const uint16_t *restrict yv, const float *restrict shift,
                                                     float *restrict s1, float *restrict s2, int64_t nr, int64_t c) {
    for (int64_t r = 0; r < nr; r++)
        for (int64_t j = 0; j < c; j++) {
            const float pj = gr_bf16_decode_hd(pv[r * c + j]);
            const float g = gr_bf16_decode_hd(yv[r * c + j]) <= 0.0f ? 0.0f : pj;
            s1[j] += g;
            s2[j] += g * (gr_bf16_decode_hd(qv[r * c + j]) - shift[j]);
        }
}

GR_ISA_CLONES static void gr_bnh_rows_dx_relu(const float *restrict pv, const float *restrict qv,
                                              const float *restrict yv, float *restrict ov, const float *restrict mean,
                                              const float *restrict fa, const float *restrict fb,
                                              const float *restrict fc, int64_t nr, int64_t c) {
    for (int64_t r = 0; r < nr; r++)
        for (int64_t j = 0; j < c; j++) {
            const float pj = pv[r * c + j], g = yv[r * c + j] <= 0.0f ? 0.0f : pj;
            ov[r * c + j] = fa[j] * g + fb[j] * (qv[r * c + j] - mean[j]) + fc[j];
        }
}

GR_ISA_CLONES static void gr_bnh_rows_dx_relu_bf16(const uint16_t *restrict pv, const uint16_t *restrict qv,
                                                   const uint16_t *restrict yv, uint16_t *restrict ov,
                                                   const float *restrict mean, const float *restrict fa,
                                                   const float *restrict fb, const float *restrict fc, int64_t nr,
                                                   int64_t c) {
    for (int64_t r = 0; r < nr; r++)
        for (int64_t j = 0; j < c; j++) {
            const float pj = gr_bf16_decode_hd(pv[r * c + j]);
            const float g = gr_bf16_decode_hd(yv[r * c + j]) <= 0.0f ? 0.0f : pj;
            ov[r * c + j] = gr_bf16_encode_hd(fa[j] * g + fb[j] * (gr_bf16_decode_hd(qv[r * c + j]) - mean[j]) + fc[j]);
        }
}

GR_ISA_CLONES static void gr_bnh_rows_fwd_relu(const float *restrict pv, float *restrict ov, const float *restrict mean,
                                               const float *restrict fa, const float *restrict fc, int64_t nr,
                                               int64_t c) {
    for (int64_t r = 0; r < nr; r++)
        for (int64_t j = 0; j < c; j++) {
            const float v = (pv[r * c + j] - mean[j]) * fa[j] + fc[j];
            ov[r * c + j] = v <= 0.0f ? 0.0f : v;
        }
}

GR_ISA_CLONES static void gr_bnh_rows_fwd_relu_bf16(const uint16_t *restrict pv, uint16_t *restrict ov,
                                                    const float *restrict mean, const float *restrict fa,
                                                    const float *restrict fc, int64_t nr, int64_t c) {
    for (int64_t r = 0; r < nr; r++)
        for (int64_t j = 0; j < c; j++) {
            const float v = (gr_bf16_decode_hd(pv[r * c + j]) - mean[j]) * fa[j] + fc[j];
            ov[r * c + j] = gr_bf16_encode_hd(v <= 0.0f ? 0.0f : v); /* bn.c: the relu kernel's bits */
        }
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

/* The bf16 sums with AVX-512 (picked at run time) where C is a multiple of 16: a block of 16 channels
 * at a time, its two sums in registers down the rows, where GCC's loops above load and store them at
 * every row (at C = 32, the CNN's first batchnorm, a store-to-load wait a row). The same adds and
 * products in the same order (a multiply, then an add: no fused multiply-add): the same bits. y, when
 * not NULL, masks p as gr_bnh_rows_sums_relu_bf16 does; q NULL: the forward's sums. */
#define GR_BNH_AVX512 __attribute__((target("avx512f,avx512bw")))

GR_BNH_AVX512 static inline __m512 gr_bnh_load16(const uint16_t *p) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)p)), 16));
}

GR_BNH_AVX512 static void gr_bnh_sums_bf16_512(const uint16_t *restrict pv, const uint16_t *restrict qv,
                                               const uint16_t *restrict yv, const float *restrict shift,
                                               float *restrict s1, float *restrict s2, int64_t nr, int64_t c) {
    for (int64_t j0 = 0; j0 < c; j0 += 16) {
        const __m512 sh = _mm512_loadu_ps(shift + j0);
        __m512 a1 = _mm512_loadu_ps(s1 + j0), a2 = _mm512_loadu_ps(s2 + j0);
        for (int64_t r = 0; r < nr; r++) {
            const int64_t o = r * c + j0;
            __m512 pj = gr_bnh_load16(pv + o);
            if (!qv) {
                pj = _mm512_sub_ps(pj, sh);
                a1 = _mm512_add_ps(a1, pj);
                a2 = _mm512_add_ps(a2, _mm512_mul_ps(pj, pj));
                continue;
            }
            if (yv) pj = _mm512_mask_mov_ps(pj, _mm512_cmp_ps_mask(gr_bnh_load16(yv + o), _mm512_setzero_ps(),
                                                                   _CMP_LE_OQ), _mm512_setzero_ps());
            a1 = _mm512_add_ps(a1, pj);
            a2 = _mm512_add_ps(a2, _mm512_mul_ps(pj, _mm512_sub_ps(gr_bnh_load16(qv + o), sh)));
        }
        _mm512_storeu_ps(s1 + j0, a1);
        _mm512_storeu_ps(s2 + j0, a2);
    }
}

/* libgcc reads the CPU's features once at start; this only tests them */
static bool gr_bnh_avx512(int64_t c) {
    return c % 16 == 0 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
}
#else
static bool gr_bnh_avx512(int64_t c) { (void)c; return false; }
static void gr_bnh_sums_bf16_512(const uint16_t *pv, const uint16_t *qv, const uint16_t *yv, const float *shift,
                                 float *s1, float *s2, int64_t nr, int64_t c) {
    (void)pv, (void)qv, (void)yv, (void)shift, (void)s1, (void)s2, (void)nr, (void)c;
}
#endif

/* Per block k: s1[k][c] = sum(p - shift) and s2[k][c] = sum((p - shift)^2)
 * (q NULL), or s1 = sum(p) and s2 = sum(p * (q - shift)) (the backward's
 * dy and x). The block sums are added in block order into S1, S2. */
static void gr_bnh_sums(const gr_bnh *b, const void *p, const void *q, const void *y, const float *shift, double *S1,
                        double *S2) {
    const int64_t c = b->c;
    float *part = gr_xmalloc((size_t)(2 * b->nblk * c) * sizeof *part);
    #pragma omp parallel for schedule(static) if (b->m * c >= GR_OMP_MIN)
    for (int64_t k = 0; k < b->nblk; k++) {
        int64_t r0 = k * b->rows, nr = GR_MIN(b->rows, b->m - r0);
        float *restrict s1 = part + 2 * k * c, *restrict s2 = s1 + c;
        memset(s1, 0, (size_t)(2 * c) * sizeof *s1);
        if (b->h && gr_bnh_avx512(c))
            gr_bnh_sums_bf16_512((const uint16_t *)p + r0 * c, q ? (const uint16_t *)q + r0 * c : NULL,
                                 y ? (const uint16_t *)y + r0 * c : NULL, shift, s1, s2, nr, c);
        else if (y && b->h) /* dy masked by a fused relu's output */
            gr_bnh_rows_sums_relu_bf16((const uint16_t *)p + r0 * c, (const uint16_t *)q + r0 * c,
                                       (const uint16_t *)y + r0 * c, shift, s1, s2, nr, c);
        else if (y)
            gr_bnh_rows_sums_relu((const float *)p + r0 * c, (const float *)q + r0 * c, (const float *)y + r0 * c,
                                  shift, s1, s2, nr, c);
        else if (b->h)
            gr_bnh_rows_sums_bf16((const uint16_t *)p + r0 * c, q ? (const uint16_t *)q + r0 * c : NULL, shift, s1,
                                  s2, nr, c);
        else
            gr_bnh_rows_sums((const float *)p + r0 * c, q ? (const float *)q + r0 * c : NULL, shift, s1, s2, nr, c);
    }
    for (int64_t j = 0; j < c; j++) S1[j] = S2[j] = 0.0;
    for (int64_t k = 0; k < b->nblk; k++)
        for (int64_t j = 0; j < c; j++) {
            S1[j] += part[2 * k * c + j];
            S2[j] += part[2 * k * c + c + j];
        }
    free(part);
}

/* Over all rows: out = fa * p + fb * (q - mean) + fc (the backward's dx
 * from dy and x; p masked by y, a fused relu's output, unless NULL), or
 * without q out = (p - mean) * fa + fc (the forward's y, as bn.c rounds it;
 * relu: then relu'd). Per channel j. */
static void gr_bnh_apply(const gr_bnh *b, void *out, const void *p, const void *q, const void *y, bool relu,
                         const float *mean, const float *fa, const float *fb, const float *fc) {
    const int64_t c = b->c;
    #pragma omp parallel for schedule(static) if (b->m * c >= GR_OMP_MIN)
    for (int64_t k = 0; k < b->nblk; k++) {
        int64_t r0 = k * b->rows, nr = GR_MIN(b->rows, b->m - r0);
        if (y && b->h)
            gr_bnh_rows_dx_relu_bf16((const uint16_t *)p + r0 * c, (const uint16_t *)q + r0 * c,
                                     (const uint16_t *)y + r0 * c, (uint16_t *)out + r0 * c, mean, fa, fb, fc, nr, c);
        else if (y)
            gr_bnh_rows_dx_relu((const float *)p + r0 * c, (const float *)q + r0 * c, (const float *)y + r0 * c,
                                (float *)out + r0 * c, mean, fa, fb, fc, nr, c);
        else if (relu && b->h)
            gr_bnh_rows_fwd_relu_bf16((const uint16_t *)p + r0 * c, (uint16_t *)out + r0 * c, mean, fa, fc, nr, c);
        else if (relu)
            gr_bnh_rows_fwd_relu((const float *)p + r0 * c, (float *)out + r0 * c, mean, fa, fc, nr, c);
        else if (b->h)
            gr_bnh_rows_apply_bf16((const uint16_t *)p + r0 * c, q ? (const uint16_t *)q + r0 * c : NULL,
                                   (uint16_t *)out + r0 * c, mean, fa, fb, fc, nr, c);
        else
            gr_bnh_rows_apply((const float *)p + r0 * c, q ? (const float *)q + r0 * c : NULL, (float *)out + r0 * c,
                              mean, fa, fb, fc, nr, c);
    }
}

void gr_cpu_batchnorm_nhwc(const gr_kargs *a) {
    const bool h = a->ein[0] == GR_BF16;
    gr_bnh b = gr_bnh_of(a, a->tin[0], h);
    const int64_t c = b.c;
    const float *w = a->in[1], *bias = a->in[2];
    float *rmean = a->in[3], *rvar = a->in[4], *saved = a->out[1];
    float *v = gr_xmalloc((size_t)(3 * c) * sizeof *v), *scale = v + c, *shift = v + 2 * c;
    if (a->ctx->training) {
        GR_ASSERT(b.m >= 2);
        double *S = gr_xmalloc((size_t)(2 * c + 1) * sizeof *S);
        /* the shift: the first row; over the processes (a->ctx->xsum), the running mean, which they hold alike */
        for (int64_t j = 0; j < c; j++) v[j] = a->ctx->xsum ? rmean[j] : gr_hio_get(a->in[0], h, j);
        gr_bnh_sums(&b, a->in[0], NULL, NULL, v, S, S + c);
        S[2 * c] = (double)b.m;
        if (a->ctx->xsum) a->ctx->xsum->sum(a->ctx->xsum->user, S, (int)(2 * c + 1));
        const double m = S[2 * c], mom = a->node->attrs.momentum;
        for (int64_t j = 0; j < c; j++) {
            double dm = S[j] / m, var = S[c + j] / m - dm * dm;
            if (var < 0.0) var = 0.0;
            double mean = (double)v[j] + dm, invstd = 1.0 / sqrt(var + a->node->attrs.eps);
            saved[j] = (float)mean;
            saved[c + j] = (float)invstd;
            if (!a->node->attrs.stats_later) { /* else the recomputation updates them */
                rmean[j] = (float)((1.0 - mom) * rmean[j] + mom * mean);
                rvar[j] = (float)((1.0 - mom) * rvar[j] + mom * var * m / (m - 1.0));
            }
            scale[j] = (float)(w[j] * invstd);
        }
        free(S);
    } else {
        float eps = (float)a->node->attrs.eps;
        for (int64_t j = 0; j < c; j++) {
            saved[j] = rmean[j];
            saved[c + j] = 1.0f / sqrtf(rvar[j] + eps);
            scale[j] = w[j] * saved[c + j];
        }
    }
    for (int64_t j = 0; j < c; j++) shift[j] = bias[j];
    gr_bnh_apply(&b, a->out[0], a->in[0], NULL, NULL, a->node->attrs.relu, saved, scale, NULL, shift);
    free(v);
}

void gr_cpu_batchnorm_bwd_nhwc(const gr_kargs *a) {
    const bool h = a->ein[0] == GR_BF16;
    gr_bnh b = gr_bnh_of(a, a->tin[1], h);
    const int64_t c = b.c;
    const float *w = a->in[2], *saved = a->in[3];
    float *dw = a->out[0], *db = a->out[1];
    /* S: this process's sums (dweight and dbias: the gradient all-reduce adds the processes' up); G:
     * the sums over the m values the statistics came from (over the processes with a->ctx->xsum) */
    double *S = gr_xmalloc((size_t)(4 * c + 2) * sizeof *S), *G = S + 2 * c + 1;
    const void *y = a->node->attrs.relu ? a->in[4] : NULL; /* a fused relu's output */
    gr_bnh_sums(&b, a->in[0], a->in[1], y, saved, S, S + c);
    S[2 * c] = (double)b.m;
    memcpy(G, S, (size_t)(2 * c + 1) * sizeof *S);
    if (a->ctx->training && a->ctx->xsum) a->ctx->xsum->sum(a->ctx->xsum->user, G, (int)(2 * c + 1));
    const double m = G[2 * c];
    float *f = gr_xmalloc((size_t)(3 * c) * sizeof *f);
    for (int64_t j = 0; j < c; j++) {
        double invstd = saved[c + j], s = G[j], sdx = G[c + j];
        dw[j] += (float)(S[c + j] * invstd);
        db[j] += (float)S[j];
        double A = (double)w[j] * invstd, B = 0.0, C0 = 0.0;
        if (a->ctx->training) {
            B = -A * invstd * invstd * sdx / m;
            C0 = -A * s / m;
        }
        f[j] = (float)A, f[c + j] = (float)B, f[2 * c + j] = (float)C0;
    }
    if (a->node->nout > 2) gr_bnh_apply(&b, a->out[2], a->in[0], a->in[1], y, false, saved, f, f + c, f + 2 * c);
    free(f);
    free(S);
}
