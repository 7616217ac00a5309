/* body_spatial.h — per-element, per-thread and per-channel bodies of the
 * spatial kernels (kernels/cuda/spatial.cu): max/avg pooling, global average pooling,
 * batchnorm, and the per-channel bias add and bias gradient of dense and
 * conv. The semantics are kernels/cpu/pool.c, kernels/cpu/bn.c and the db of
 * kernels/cpu/dense.c and conv.c; tests/ops/test_op_{pool,bn,dense_act}.c drive these
 * bodies over whole grids against those CPU kernels.
 *
 * Pooling: one thread per output (forward) or per input element (backward,
 * a gather over the output windows that cover it, so no atomics).
 *
 * Per-channel reductions (batchnorm statistics and gradient sums, bias
 * gradients) over a tensor [n][c][inner] run in two deterministic stages:
 * each of the `slices` slices of a channel's m = n*inner elements is summed
 * in double into a partial (gr_chan_*_part per thread, then a fixed tree in
 * the block), then one warp per channel adds the channel's partials in a
 * fixed order and a per-channel body finishes (statistics, running stats,
 * the per-channel coefficients of the elementwise pass). */
#ifndef GR_BODY_SPATIAL_H
#define GR_BODY_SPATIAL_H

#include <math.h>

#include "body.h"
#include "body_half.h"


/* ---- pooling ---- */

/* One pooling geometry: planes = n*C planes of h x w in, ho x wo out. */
typedef struct gr_pool_geo {
    int64_t planes, h, w, ho, wo;
    int64_t kh, kw, sh, sw, ph, pw;
    int32_t include_pad;     /* avgpool: divide by kh*kw (else by the in-bounds count) */
} gr_pool_geo;

/* The outputs [*lo, *hi) along one axis whose window (start o*s - pad,
 * length k) covers input coordinate i >= 0. */
GR_HD void gr_pool_cover(int64_t i, int64_t pad, int64_t k, int64_t s, int64_t nout, int64_t *lo, int64_t *hi) {
    int64_t a = i + pad - k; /* o*s > a */
    int64_t l = a < 0 ? 0 : a / s + 1, h = (i + pad) / s + 1;
    if (h > nout) h = nout;
    *lo = l < h ? l : h;
    *hi = h;
}

/* Output (p, oh, ow): the window's maximum and its flat index ih*w + iw,
 * scanning rows then columns and keeping the first maximum (a later value
 * must be strictly greater; NaN propagates), from -inf at the first
 * in-bounds element, as the CPU kernel and PyTorch. */
GR_HD void gr_body_maxpool(const gr_pool_geo *g, const float *x, float *y, int32_t *idx, int64_t p, int64_t oh,
                           int64_t ow) {
    const float *xp = x + p * g->h * g->w;
    int64_t h0 = oh * g->sh - g->ph, w0 = ow * g->sw - g->pw;
    float best = -INFINITY;
    int64_t bi = (h0 > 0 ? h0 : 0) * g->w + (w0 > 0 ? w0 : 0);
    for (int64_t kh = 0; kh < g->kh; kh++) {
        int64_t ih = h0 + kh;
        if (ih < 0 || ih >= g->h) continue;
        for (int64_t kw = 0; kw < g->kw; kw++) {
            int64_t iw = w0 + kw;
            if (iw < 0 || iw >= g->w) continue;
            float v = xp[ih * g->w + iw];
            if (v > best || v != v) {
                best = v;
                bi = ih * g->w + iw;
            }
        }
    }
    int64_t o = (p * g->ho + oh) * g->wo + ow;
    y[o] = best;
    idx[o] = (int32_t)bi;
}

/* Input element (p, ih, iw): the sum of dy over the covering outputs whose
 * saved argmax is this element, in output order from 0.0f (the order the
 * CPU kernel adds them in, so the result is bit-identical). */
GR_HD void gr_body_maxpool_bwd(const gr_pool_geo *g, const float *dy, const int32_t *idx, float *dx, int64_t p,
                               int64_t ih, int64_t iw) {
    int64_t oh0, oh1, ow0, ow1;
    gr_pool_cover(ih, g->ph, g->kh, g->sh, g->ho, &oh0, &oh1);
    gr_pool_cover(iw, g->pw, g->kw, g->sw, g->wo, &ow0, &ow1);
    int32_t self = (int32_t)(ih * g->w + iw);
    float s = 0.0f;
    for (int64_t oh = oh0; oh < oh1; oh++) {
        int64_t row = (p * g->ho + oh) * g->wo;
        for (int64_t ow = ow0; ow < ow1; ow++)
            if (idx[row + ow] == self) s += dy[row + ow];
    }
    dx[(p * g->h + ih) * g->w + iw] = s;
}

/* 1 / the divisor of output (oh, ow). */
GR_HD float gr_avgpool_inv_hd(const gr_pool_geo *g, int64_t oh, int64_t ow) {
    if (g->include_pad) return 1.0f / (float)(g->kh * g->kw);
    int64_t h0 = oh * g->sh - g->ph, w0 = ow * g->sw - g->pw;
    int64_t r0 = h0 > 0 ? h0 : 0, r1 = h0 + g->kh < g->h ? h0 + g->kh : g->h;
    int64_t c0 = w0 > 0 ? w0 : 0, c1 = w0 + g->kw < g->w ? w0 + g->kw : g->w;
    return 1.0f / (float)((r1 - r0) * (c1 - c0));
}

/* Output (p, oh, ow): the window's in-bounds sum, rows then columns (the
 * CPU kernel's order), times 1 / the divisor. */
GR_HD void gr_body_avgpool(const gr_pool_geo *g, const float *x, float *y, int64_t p, int64_t oh, int64_t ow) {
    const float *xp = x + p * g->h * g->w;
    int64_t h0 = oh * g->sh - g->ph, w0 = ow * g->sw - g->pw;
    int64_t r0 = h0 > 0 ? h0 : 0, r1 = h0 + g->kh < g->h ? h0 + g->kh : g->h;
    int64_t c0 = w0 > 0 ? w0 : 0, c1 = w0 + g->kw < g->w ? w0 + g->kw : g->w;
    float s = 0.0f;
    for (int64_t ih = r0; ih < r1; ih++)
        for (int64_t iw = c0; iw < c1; iw++) s += xp[ih * g->w + iw];
    y[(p * g->ho + oh) * g->wo + ow] = s * gr_avgpool_inv_hd(g, oh, ow);
}

/* Input element (p, ih, iw): the sum over the covering outputs of dy / the
 * divisor, output rows in order and, within a row, window columns kw in
 * order (the CPU kernel's order for rows of up to 256 outputs). */
GR_HD void gr_body_avgpool_bwd(const gr_pool_geo *g, const float *dy, float *dx, int64_t p, int64_t ih,
                               int64_t iw) {
    int64_t oh0, oh1;
    gr_pool_cover(ih, g->ph, g->kh, g->sh, g->ho, &oh0, &oh1);
    float s = 0.0f;
    for (int64_t oh = oh0; oh < oh1; oh++) {
        const float *dyr = dy + (p * g->ho + oh) * g->wo;
        for (int64_t kw = 0; kw < g->kw; kw++) {
            int64_t t = iw + g->pw - kw; /* ow * sw */
            if (t < 0) break;
            if (t % g->sw != 0 || t / g->sw >= g->wo) continue;
            int64_t ow = t / g->sw;
            s += gr_mul_rn(dyr[ow], gr_avgpool_inv_hd(g, oh, ow));
        }
    }
    dx[(p * g->h + ih) * g->w + iw] = s;
}

/* Lane `lane` of T lanes summing plane p of hw floats: its float partial
 * over elements lane, lane + T, ... (the kernel's warp then adds the
 * partials in a fixed tree and scales by 1 / hw). */
GR_HD float gr_body_gap_part(const float *x, int64_t hw, int64_t p, int64_t lane, int64_t T) {
    const float *xp = x + p * hw;
    float s = 0.0f;
    for (int64_t i = lane; i < hw; i += T) s += xp[i];
    return s;
}

/* Plane p's mean from the sum of its partials. */
GR_HD void gr_body_gap_finish(float *y, int64_t hw, int64_t p, float s) { y[p] = s * (1.0f / (float)hw); }

/* Element j of plane p of the global-average-pool backward: dy[p] / hw. */
GR_HD void gr_body_gap_bwd(const float *dy, float *dx, int64_t hw, int64_t p, int64_t j) {
    dx[p * hw + j] = dy[p] * (1.0f / (float)hw);
}

/* ---- per-channel reductions over [n][c][inner] ---- */

#define GR_CHAN_THREADS 256        /* threads per block of a slice (planes mode) */
#define GR_CHAN_PER_THREAD 16      /* target elements per thread of a slice */
#define GR_CHAN_PARTS_MAX 65536    /* partials (of two doubles) in the device scratch */
#define GR_CHAN_MAX 16384          /* channels of the per-channel coefficient scratch */

/* A reduction geometry. Channel ch's element e = i*inner + j (i < n,
 * j < inner) lives at i*c*inner + ch*inner + j. Planes mode (inner > 1):
 * a block of GR_CHAN_THREADS threads per (channel, slice), thread t taking
 * elements t, t + GR_CHAN_THREADS, ... of the slice. Columns mode
 * (inner == 1, a [n, c] matrix): a thread per (channel, slice) walking the
 * slice's rows, so a warp reads 32 adjacent channels of a row. */
typedef struct gr_chan_geo {
    int64_t n, c, inner, m;  /* m = n * inner elements per channel */
    int64_t slices, len;     /* slices per channel, of len elements (the last may be shorter) */
    int32_t cols;            /* columns mode */
} gr_chan_geo;

/* Slices so that a thread sums about GR_CHAN_PER_THREAD elements, and the
 * c * slices partials fit GR_CHAN_PARTS_MAX (1 slice when c exceeds it). */
GR_HD gr_chan_geo gr_chan_geo_make(int64_t n, int64_t c, int64_t inner) {
    gr_chan_geo g;
    g.n = n;
    g.c = c;
    g.inner = inner;
    g.m = n * inner;
    g.cols = inner == 1;
    int64_t per_slice = g.cols ? GR_CHAN_PER_THREAD : (int64_t)GR_CHAN_THREADS * GR_CHAN_PER_THREAD;
    int64_t s = (g.m + per_slice - 1) / per_slice, cap = c > 0 ? GR_CHAN_PARTS_MAX / c : 1;
    if (s > cap) s = cap;
    if (s < 1) s = 1;
    g.len = g.m > 0 ? (g.m + s - 1) / s : 1;
    g.slices = g.m > 0 ? (g.m + g.len - 1) / g.len : 1; /* no empty slice */
    return g;
}

/* The elements [*e0, *e1) step *step that thread t of slice s sums (t is
 * the thread of the block in planes mode; unused in columns mode). */
GR_HD void gr_chan_span(const gr_chan_geo *g, int64_t s, int64_t t, int64_t *e0, int64_t *e1, int64_t *step) {
    int64_t end = (s + 1) * g->len;
    *e1 = end < g->m ? end : g->m;
    *e0 = s * g->len + (g->cols ? 0 : t);
    *step = g->cols ? 1 : GR_CHAN_THREADS;
}

/* Walks a channel's elements e0, e0 + step, ... as offsets from the
 * channel's first element without a division per element. */
typedef struct gr_chan_cur {
    int64_t off, j, inner, r, dq, wrap;
} gr_chan_cur;

GR_HD gr_chan_cur gr_chan_cur_at(const gr_chan_geo *g, int64_t e0, int64_t step) {
    gr_chan_cur k;
    int64_t stride = g->c * g->inner;
    k.inner = g->inner;
    k.j = e0 % g->inner;
    k.off = (e0 / g->inner) * stride + k.j;
    k.r = step % g->inner;
    k.dq = (step / g->inner) * stride + k.r;
    k.wrap = stride - g->inner;
    return k;
}

GR_HD void gr_chan_cur_next(gr_chan_cur *k) {
    k->off += k->dq;
    k->j += k->r;
    if (k->j >= k->inner) {
        k->j -= k->inner;
        k->off += k->wrap;
    }
}

/* The channel of flat element i of [n][c][inner]. */
GR_HD int64_t gr_chan_of(int64_t i, int64_t inner, int64_t c) { return (i / inner) % c; }

/* The loops below take 4 elements per round, loads first, so a GPU thread
 * has 4 loads in flight instead of waiting on each one (the sums are still
 * taken in element order). */

/* Batchnorm statistics, one thread's part: the sums of x - k and (x - k)^2
 * over its elements of channel ch, k = the channel's first element (the
 * shift keeps E[d^2] - E[d]^2 from cancelling when |mean| >> std, as the
 * CPU kernel). */
GR_HD void gr_body_bn_stats_part(const gr_chan_geo *g, const void *x, int ex, int64_t ch, int64_t e0, int64_t e1,
                                 int64_t step, double *s1, double *s2) {
    const int64_t x0 = ch * g->inner;
    double k = (double)gr_ld_hd(x, ex, x0), a = 0.0, b = 0.0;
    gr_chan_cur cur = gr_chan_cur_at(g, e0, step);
    int64_t e = e0;
    for (; e + 3 * step < e1; e += 4 * step) {
        float v[4];
        for (int u = 0; u < 4; u++) {
            v[u] = gr_ld_hd(x, ex, x0 + cur.off);
            gr_chan_cur_next(&cur);
        }
        for (int u = 0; u < 4; u++) {
            double d = (double)v[u] - k;
            a += d;
            b += d * d;
        }
    }
    for (; e < e1; e += step) {
        double d = (double)gr_ld_hd(x, ex, x0 + cur.off) - k;
        a += d;
        b += d * d;
        gr_chan_cur_next(&cur);
    }
    *s1 = a;
    *s2 = b;
}

/* Batchnorm training, channel ch, from the channel's sums: batch mean and
 * biased variance, saved {mean, invstd}, running stats (momentum, variance
 * unbiased by m / (m - 1)), and the coefficients {mean, scale, shift} of
 * y = (x - mean) * scale + shift. */
GR_HD void gr_body_bn_train_finish(const gr_chan_geo *g, int64_t ch, double s1, double s2, const void *x,
                                   int ex, double eps, double mom, const float *w, const float *b, float *saved,
                                   float *rmean, float *rvar, float *coef) {
    double m = (double)g->m, k = (double)gr_ld_hd(x, ex, ch * g->inner);
    double dm = s1 / m, var = s2 / m - dm * dm;
    if (var < 0.0) var = 0.0;
    double mean = k + dm, invstd = 1.0 / sqrt(var + eps);
    saved[ch] = (float)mean;
    saved[g->c + ch] = (float)invstd;
    if (rmean) { /* NULL: a recomputation, which leaves them alone */
        rmean[ch] = (float)((1.0 - mom) * rmean[ch] + mom * mean);
        rvar[ch] = (float)((1.0 - mom) * rvar[ch] + mom * var * m / (m - 1.0));
    }
    coef[4 * ch] = saved[ch];
    coef[4 * ch + 1] = (float)(w[ch] * invstd);
    coef[4 * ch + 2] = b[ch];
    coef[4 * ch + 3] = 0.0f;
}

/* Batchnorm eval, channel ch: saved and the coefficients from the running
 * stats (left unchanged). */
GR_HD void gr_body_bn_eval_finish(int64_t c, int64_t ch, float eps, const float *w, const float *b,
                                  const float *rmean, const float *rvar, float *saved, float *coef) {
    saved[ch] = rmean[ch];
    saved[c + ch] = 1.0f / sqrtf(rvar[ch] + eps);
    coef[4 * ch] = saved[ch];
    coef[4 * ch + 1] = w[ch] * saved[c + ch];
    coef[4 * ch + 2] = b[ch];
    coef[4 * ch + 3] = 0.0f;
}

/* y of one element from its channel's coefficients cf = coef + 4*ch. */
GR_HD float gr_body_bn_norm(float x, const float *cf) { return gr_mul_rn(x - cf[0], cf[1]) + cf[2]; }

/* Batchnorm backward, one thread's part: the sums of dy and
 * dy * (x - mean) over its elements of channel ch. */
GR_HD void gr_body_bn_grad_part(const gr_chan_geo *g, const void *dy, const void *x, int et, float mean,
                                int64_t ch, int64_t e0, int64_t e1, int64_t step, double *s1, double *s2) {
    const int64_t c0 = ch * g->inner;
    double a = 0.0, b = 0.0;
    gr_chan_cur cur = gr_chan_cur_at(g, e0, step);
    int64_t e = e0;
    for (; e + 3 * step < e1; e += 4 * step) {
        float dv[4], xv[4];
        for (int u = 0; u < 4; u++) {
            dv[u] = gr_ld_hd(dy, et, c0 + cur.off);
            xv[u] = gr_ld_hd(x, et, c0 + cur.off);
            gr_chan_cur_next(&cur);
        }
        for (int u = 0; u < 4; u++) {
            a += (double)dv[u];
            b += (double)dv[u] * ((double)xv[u] - (double)mean);
        }
    }
    for (; e < e1; e += step) {
        double d = (double)gr_ld_hd(dy, et, c0 + cur.off);
        a += d;
        b += d * ((double)gr_ld_hd(x, et, c0 + cur.off) - (double)mean);
        gr_chan_cur_next(&cur);
    }
    *s1 = a;
    *s2 = b;
}

/* Batchnorm backward, channel ch, from s = sum(dy), sdx = sum(dy (x - mean)):
 * dweight += sdx * invstd, dbias += s (they accumulate over micro-batches),
 * and the coefficients {mean, A, B, C0} of dx = A dy + B (x - mean) + C0:
 * A = weight * invstd, and in training B = -A invstd^2 sdx / m, C0 = -A s / m
 * (the batch statistics' own gradient); 0 in eval (frozen statistics). */
GR_HD void gr_body_bn_bwd_finish(const gr_chan_geo *g, int64_t ch, double s, double sdx, int32_t training,
                                 const float *w, const float *saved, float *dw, float *db, float *coef) {
    float mean = saved[ch], invstd = saved[g->c + ch];
    dw[ch] += (float)(sdx * invstd);
    db[ch] += (float)s;
    double A = (double)w[ch] * invstd, B = 0.0, C0 = 0.0;
    if (training) {
        B = -A * invstd * invstd * sdx / (double)g->m;
        C0 = -A * s / (double)g->m;
    }
    coef[4 * ch] = mean;
    coef[4 * ch + 1] = (float)A;
    coef[4 * ch + 2] = (float)B;
    coef[4 * ch + 3] = (float)C0;
}

/* dx of one element from its channel's coefficients cf = coef + 4*ch. */
GR_HD float gr_body_bn_dx(float dy, float x, const float *cf) {
    return gr_mul_rn(cf[1], dy) + gr_mul_rn(cf[2], x - cf[0]) + cf[3];
}

/* Bias gradient, one thread's part: the sum of dy over its elements of
 * channel ch. */
GR_HD double gr_body_bias_grad_part(const gr_chan_geo *g, const void *dy, int et, int64_t ch, int64_t e0,
                                    int64_t e1, int64_t step) {
    const int64_t c0 = ch * g->inner;
    double a = 0.0;
    gr_chan_cur cur = gr_chan_cur_at(g, e0, step);
    int64_t e = e0;
    for (; e + 3 * step < e1; e += 4 * step) {
        float v[4];
        for (int u = 0; u < 4; u++) {
            v[u] = gr_ld_hd(dy, et, c0 + cur.off);
            gr_chan_cur_next(&cur);
        }
        for (int u = 0; u < 4; u++) a += (double)v[u];
    }
    for (; e < e1; e += step) {
        a += (double)gr_ld_hd(dy, et, c0 + cur.off);
        gr_chan_cur_next(&cur);
    }
    return a;
}

/* Bias gradient, channel ch: db accumulates (over micro-batches) the
 * channel's sum, rounded once (kernels/cpu/conv.c's db). */
GR_HD void gr_body_bias_grad_finish(int64_t ch, double s, float *db) { db[ch] += (float)s; }

/* Bias add, element i of channel ch, y stored as e (rounded once). */
GR_HD void gr_body_bias_add(void *y, int e, const float *b, int64_t i, int64_t ch) {
    gr_st_hd(y, e, i, gr_ld_hd(y, e, i) + b[ch]);
}

#endif
