/* bn.c — CPU kernels of batchnorm and its backward (graph/op_bn.c has the
 * node layout). x is [n, C, hw] (hw = H*W, 1 for [n, C]); channel c's m =
 * n*hw values are n planes of hw values, C*hw apart, in fp32 or bf16
 * (the sums read bf16 a block at a time through fp32, half_io.h; the
 * output passes decode and encode each value in place).
 *
 * Training forward and the backward work channel by channel (in parallel
 * over channels), two passes over a channel's planes each: statistics, then
 * the output (so the second pass reads what the first brought into cache).
 * Sums are taken in float over blocks of GR_BN_BLOCK elements (vectorized)
 * and added up in double; the forward's sums are of x - x[first], so the
 * variance E[d^2] - E[d]^2 does not cancel when |mean| >> std.
 *
 * Writes to inputs: the training forward updates running_mean (in[3]) and
 * running_var (in[4]), which live in the params arena.
 *
 * A relu fused after it (attrs.relu, graph/fuse.c): the forward writes
 * relu(y) (in bf16 the relu comes before the rounding, which keeps the sign:
 * the bits of the relu kernel on the rounded y), and
 * the backward reads relu(y) (in[4]) and takes dy as 0 where it is <= 0,
 * the relu backward's mask: the unfused pair's results, bit for bit. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_kernels.h"
#include "half_io.h"

#define GR_BN_BLOCK 1024

typedef struct gr_bn_dims {
    int64_t n, c, hw;
} gr_bn_dims;

static gr_bn_dims gr_bn_dims_of(const gr_kargs *a, const gr_tensor *x) {
    gr_bn_dims d = {a->n, x->shape[1], x->ndim == 4 ? x->shape[2] * x->shape[3] : 1};
    return d;
}

/* s += sum(p[i] - k), ss += sum((p[i] - k)^2) over len values. */
static void gr_bn_sums(const void *p, bool h, int64_t len, float k, double *s, double *ss) {
    float tmp[GR_BN_BLOCK];
    for (int64_t b0 = 0; b0 < len; b0 += GR_BN_BLOCK) {
        int64_t nb = b0 + GR_BN_BLOCK < len ? GR_BN_BLOCK : len - b0;
        const float *q = gr_hio_read(gr_hio_cat(p, h, b0), h, nb, tmp);
        float s1 = 0.0f, s2 = 0.0f;
        #pragma omp simd reduction(+ : s1, s2)
        for (int64_t i = 0; i < nb; i++) {
            float v = q[i] - k;
            s1 += v;
            s2 += v * v;
        }
        *s += s1;
        *ss += s2;
    }
}

/* g[i] = y[i] <= 0 ? 0 : dy[i] (the relu backward's mask, y its output), in fp32 */
GR_ISA_CLONES static void gr_bn_mask(float *restrict g, const float *restrict dy, const float *restrict y, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        const float d = dy[i];
        g[i] = y[i] <= 0.0f ? 0.0f : d;
    }
}

GR_ISA_CLONES static void gr_bn_mask_bf16(float *restrict g, const uint16_t *restrict dy, const uint16_t *restrict y,
                                          int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        const float d = gr_bf16_decode_hd(dy[i]);
        g[i] = gr_bf16_decode_hd(y[i]) <= 0.0f ? 0.0f : d;
    }
}

/* s += sum(dy[i]), sdx += sum(dy[i] * (x[i] - mean)) over len values; y: dy
 * masked by a fused relu's output (NULL: none). */
static void gr_bn_grad_sums(const void *dy, const void *x, const void *y, bool h, int64_t len, float mean, double *s,
                            double *sdx) {
    float t1[GR_BN_BLOCK], t2[GR_BN_BLOCK];
    for (int64_t b0 = 0; b0 < len; b0 += GR_BN_BLOCK) {
        int64_t nb = b0 + GR_BN_BLOCK < len ? GR_BN_BLOCK : len - b0;
        const float *g = t1;
        if (y && h) gr_bn_mask_bf16(t1, (const uint16_t *)dy + b0, (const uint16_t *)y + b0, nb);
        else if (y) gr_bn_mask(t1, (const float *)dy + b0, (const float *)y + b0, nb);
        else g = gr_hio_read(gr_hio_cat(dy, h, b0), h, nb, t1);
        const float *q = gr_hio_read(gr_hio_cat(x, h, b0), h, nb, t2);
        float s1 = 0.0f, s2 = 0.0f;
        #pragma omp simd reduction(+ : s1, s2)
        for (int64_t i = 0; i < nb; i++) {
            s1 += g[i];
            s2 += g[i] * (q[i] - mean);
        }
        *s += s1;
        *sdx += s2;
    }
}

/* The two elementwise passes below on bf16 storage: each value decoded where it is read and each
 * output encoded where it is written (the results of decoding into fp32 blocks first, bit for
 * bit, without those passes over memory), built for AVX-512 and AVX2 too (GR_ISA_CLONES: one
 * rounding an operation). */
GR_ISA_CLONES static void gr_bn_affine_bf16(uint16_t *restrict o, const uint16_t *restrict q, int64_t len, float mean,
                                            float scale, float shift) {
    for (int64_t i = 0; i < len; i++) o[i] = gr_bf16_encode_hd((gr_bf16_decode_hd(q[i]) - mean) * scale + shift);
}

GR_ISA_CLONES static void gr_bn_dx_bf16(uint16_t *restrict o, const uint16_t *restrict g, const uint16_t *restrict q,
                                        int64_t len, float mean, float fa, float fb, float fc) {
    for (int64_t j = 0; j < len; j++)
        o[j] = gr_bf16_encode_hd(fa * gr_bf16_decode_hd(g[j]) + fb * (gr_bf16_decode_hd(q[j]) - mean) + fc);
}

/* with a fused relu: relu before the rounding, which keeps the sign (a positive value rounds to one
 * >= +0), so the bits are the relu kernel's of the rounded output; dy masked by that output (y) */
GR_ISA_CLONES static void gr_bn_affine_relu_bf16(uint16_t *restrict o, const uint16_t *restrict q, int64_t len,
                                                 float mean, float scale, float shift) {
    for (int64_t i = 0; i < len; i++) {
        const float v = (gr_bf16_decode_hd(q[i]) - mean) * scale + shift;
        o[i] = gr_bf16_encode_hd(v <= 0.0f ? 0.0f : v);
    }
}

GR_ISA_CLONES static void gr_bn_dx_relu_bf16(uint16_t *restrict o, const uint16_t *restrict g,
                                             const uint16_t *restrict q, const uint16_t *restrict y, int64_t len,
                                             float mean, float fa, float fb, float fc) {
    for (int64_t j = 0; j < len; j++) {
        const float gj = gr_bf16_decode_hd(y[j]) <= 0.0f ? 0.0f : gr_bf16_decode_hd(g[j]);
        o[j] = gr_bf16_encode_hd(fa * gj + fb * (gr_bf16_decode_hd(q[j]) - mean) + fc);
    }
}

/* out = (in - mean) * scale + shift over len values; relu: then relu(out). */
static void gr_bn_affine(void *out, const void *in, bool h, bool relu, int64_t len, float mean, float scale,
                         float shift) {
    if (h) {
        if (relu) gr_bn_affine_relu_bf16(out, in, len, mean, scale, shift);
        else gr_bn_affine_bf16(out, in, len, mean, scale, shift);
        return;
    }
    const float *restrict q = in;
    float *restrict o = out;
    #pragma omp simd
    for (int64_t i = 0; i < len; i++) o[i] = (q[i] - mean) * scale + shift;
    if (!relu) return;
    #pragma omp simd
    for (int64_t i = 0; i < len; i++) o[i] = o[i] <= 0.0f ? 0.0f : o[i];
}

/* out = fa * dy + fb * (x - mean) + fc over len values; y: dy masked by a fused relu's output. */
static void gr_bn_dx(void *out, const void *dy, const void *x, const void *y, bool h, int64_t len, float mean, float fa,
                     float fb, float fc) {
    if (h) {
        if (y) gr_bn_dx_relu_bf16(out, dy, x, y, len, mean, fa, fb, fc);
        else gr_bn_dx_bf16(out, dy, x, len, mean, fa, fb, fc);
        return;
    }
    const float *restrict g = dy, *restrict q = x;
    float *restrict o = out;
    if (y) {
        const float *restrict r = y;
        #pragma omp simd
        for (int64_t j = 0; j < len; j++) {
            const float gj = g[j];
            o[j] = fa * (r[j] <= 0.0f ? 0.0f : gj) + fb * (q[j] - mean) + fc;
        }
        return;
    }
    #pragma omp simd
    for (int64_t j = 0; j < len; j++) o[j] = fa * g[j] + fb * (q[j] - mean) + fc;
}

/* Channel c's sums of x - k and (x - k)^2 over the batch. */
static void gr_bn_channel_sums(const gr_kargs *a, const gr_bn_dims *d, int64_t c, bool h, float k, double *s,
                               double *ss) {
    const int64_t stride = d->c * d->hw;
    const void *xc = gr_hio_cat(a->in[0], h, c * d->hw);
    *s = *ss = 0.0;
    if (d->hw == 1) {
        for (int64_t i = 0; i < d->n; i++) {
            double v = (double)gr_hio_get(xc, h, i * stride) - k;
            *s += v;
            *ss += v * v;
        }
    } else {
        for (int64_t i = 0; i < d->n; i++) gr_bn_sums(gr_hio_cat(xc, h, i * stride), h, d->hw, k, s, ss);
    }
}

/* Channel c in training from its sums of x - k (s, ss) over m values:
 * batch statistics, running stats, saved, y. */
static void gr_bn_channel_finish(const gr_kargs *a, const gr_bn_dims *d, int64_t c, float *rvar, bool h, float k,
                                 double s, double ss, double m) {
    const float *w = a->in[1], *b = a->in[2];
    float *rmean = a->in[3], *saved = a->out[1];
    const int64_t stride = d->c * d->hw;
    const void *xc = gr_hio_cat(a->in[0], h, c * d->hw);
    void *yc = gr_hio_at(a->out[0], h, c * d->hw);
    double dm = s / m, var = ss / m - dm * dm;
    if (var < 0.0) var = 0.0;
    double mean = (double)k + dm, invstd = 1.0 / sqrt(var + a->node->attrs.eps);
    double mom = a->node->attrs.momentum;
    saved[c] = (float)mean;
    saved[d->c + c] = (float)invstd;
    if (!a->node->attrs.stats_later) { /* else the recomputation updates them */
        rmean[c] = (float)((1.0 - mom) * rmean[c] + mom * mean);
        rvar[c] = (float)((1.0 - mom) * rvar[c] + mom * var * m / (m - 1.0));
    }
    float scale = (float)(w[c] * invstd);
    for (int64_t i = 0; i < d->n; i++)
        gr_bn_affine(gr_hio_at(yc, h, i * stride), gr_hio_cat(xc, h, i * stride), h, a->node->attrs.relu, d->hw,
                     saved[c], scale, b[c]);
}

/* One channel in training, this process's batch alone; the shift is the
 * channel's first value (the variance does not cancel when |mean| >> std). */
static void gr_bn_train_channel(const gr_kargs *a, const gr_bn_dims *d, int64_t c, float *rvar, bool h) {
    float k = gr_hio_get(a->in[0], h, c * d->hw);
    double s, ss;
    gr_bn_channel_sums(a, d, c, h, k, &s, &ss);
    gr_bn_channel_finish(a, d, c, rvar, h, k, s, ss, (double)(d->n * d->hw));
}

/* Training over the processes' global batch (a->ctx->xsum): every channel's
 * sums, summed over the processes with the value count, then the rest.
 * The shift is the running mean, which every process holds alike (it is
 * updated from the global statistics only). */
static void gr_bn_train_sync(const gr_kargs *a, const gr_bn_dims *d, float *rvar, bool h, bool par) {
    const float *rmean = a->in[3];
    double *S = gr_xmalloc((size_t)(2 * d->c + 1) * sizeof *S);
    #pragma omp parallel for if (par)
    for (int64_t c = 0; c < d->c; c++) gr_bn_channel_sums(a, d, c, h, rmean[c], &S[c], &S[d->c + c]);
    S[2 * d->c] = (double)(d->n * d->hw);
    a->ctx->xsum->sum(a->ctx->xsum->user, S, (int)(2 * d->c + 1));
    const double m = S[2 * d->c];
    #pragma omp parallel for if (par)
    for (int64_t c = 0; c < d->c; c++) gr_bn_channel_finish(a, d, c, rvar, h, rmean[c], S[c], S[d->c + c], m);
    free(S);
}

/* x and y in fp32, or both in bf16 (the CPU's native half steps) */
void gr_cpu_batchnorm(const gr_kargs *a) {
    if (a->tin[0]->layout == GR_NHWC) {
        gr_cpu_batchnorm_nhwc(a);
        return;
    }
    gr_bn_dims d = gr_bn_dims_of(a, a->tin[0]);
    GR_ASSERT(d.n * d.hw >= 2 || !a->ctx->training);
    const bool h = a->ein[0] == GR_BF16;
    GR_ASSERT(h == (a->eout[0] == GR_BF16));
    float *rvar = a->in[4];
    bool par = d.n * d.c * d.hw >= GR_OMP_MIN;
    if (a->ctx->training && a->ctx->xsum) {
        gr_bn_train_sync(a, &d, rvar, h, par);
        return;
    }
    if (a->ctx->training) {
        #pragma omp parallel for if (par)
        for (int64_t c = 0; c < d.c; c++) gr_bn_train_channel(a, &d, c, rvar, h);
        return;
    }
    /* eval: the running stats, unchanged */
    const float *w = a->in[1], *b = a->in[2], *rmean = a->in[3];
    float *saved = a->out[1];
    float eps = (float)a->node->attrs.eps;
    for (int64_t c = 0; c < d.c; c++) {
        saved[c] = rmean[c];
        saved[d.c + c] = 1.0f / sqrtf(rvar[c] + eps);
    }
    #pragma omp parallel for if (par)
    for (int64_t p = 0; p < d.n * d.c; p++) {
        int64_t c = p % d.c;
        gr_bn_affine(gr_hio_at(a->out[0], h, p * d.hw), gr_hio_cat(a->in[0], h, p * d.hw), h, a->node->attrs.relu,
                     d.hw, saved[c], w[c] * saved[d.c + c], b[c]);
    }
}

/* Channel c's backward sums: s = sum(dy), sdx = sum(dy (x - mean)). */
static void gr_bn_grad_channel_sums(const gr_kargs *a, const gr_bn_dims *d, int64_t c, bool h, double *s,
                                    double *sdx) {
    const int64_t stride = d->c * d->hw;
    const void *dyc = gr_hio_cat(a->in[0], h, c * d->hw), *xc = gr_hio_cat(a->in[1], h, c * d->hw);
    const void *yc = a->node->attrs.relu ? gr_hio_cat(a->in[4], h, c * d->hw) : NULL;
    const float mean = ((const float *)a->in[3])[c];
    *s = *sdx = 0.0;
    if (d->hw == 1) {
        for (int64_t i = 0; i < d->n; i++) {
            float g = gr_hio_get(dyc, h, i * stride);
            if (yc && gr_hio_get(yc, h, i * stride) <= 0.0f) g = 0.0f;
            *s += g;
            *sdx += (double)g * (gr_hio_get(xc, h, i * stride) - mean);
        }
    } else {
        for (int64_t i = 0; i < d->n; i++)
            gr_bn_grad_sums(gr_hio_cat(dyc, h, i * stride), gr_hio_cat(xc, h, i * stride),
                            yc ? gr_hio_cat(yc, h, i * stride) : NULL, h, d->hw, mean, s, sdx);
    }
}

/* Channel c: dweight and dbias from this process's sums (the gradient
 * all-reduce adds the processes' up), dx from the sums over the m values the
 * statistics came from (the same, or over the processes). */
static void gr_bn_grad_channel_finish(const gr_kargs *a, const gr_bn_dims *d, int64_t c, bool h, double s_own,
                                      double sdx_own, double s, double sdx, double m) {
    const float *w = a->in[2], *saved = a->in[3];
    float *dw = a->out[0], *db = a->out[1];
    void *dx = a->node->nout > 2 ? a->out[2] : NULL;
    const int64_t stride = d->c * d->hw;
    const float mean = saved[c], invstd = saved[d->c + c];
    dw[c] += (float)(sdx_own * invstd);
    db[c] += (float)s_own;
    if (!dx) return;
    double A = (double)w[c] * invstd, B = 0.0, C0 = 0.0;
    if (a->ctx->training) {
        B = -A * invstd * invstd * sdx / m;
        C0 = -A * s / m;
    }
    const void *dyc = gr_hio_cat(a->in[0], h, c * d->hw), *xc = gr_hio_cat(a->in[1], h, c * d->hw);
    const void *yc = a->node->attrs.relu ? gr_hio_cat(a->in[4], h, c * d->hw) : NULL;
    for (int64_t i = 0; i < d->n; i++)
        gr_bn_dx(gr_hio_at(dx, h, c * d->hw + i * stride), gr_hio_cat(dyc, h, i * stride),
                 gr_hio_cat(xc, h, i * stride), yc ? gr_hio_cat(yc, h, i * stride) : NULL, h, d->hw, mean, (float)A,
                 (float)B, (float)C0);
}

/* Training: with xhat = (x - mean) * invstd,
 *   dweight += sum(dy * xhat), dbias += sum(dy),
 *   dx = weight * invstd * (dy - sum(dy) / m - xhat * sum(dy * xhat) / m),
 * computed as dx = A dy + B (x - mean) + C0 per channel. Eval (frozen statistics):
 * dx = weight * invstd * dy. dy, x and dx in fp32, or all in bf16. With the
 * statistics taken over the processes (a->ctx->xsum), so are the sums and m. */
void gr_cpu_batchnorm_bwd(const gr_kargs *a) {
    if (a->tin[1]->layout == GR_NHWC) {
        gr_cpu_batchnorm_bwd_nhwc(a);
        return;
    }
    const bool h = a->ein[0] == GR_BF16;
    gr_bn_dims d = gr_bn_dims_of(a, a->tin[1]);
    const bool par = d.n * d.c * d.hw >= GR_OMP_MIN;
    if (!(a->ctx->training && a->ctx->xsum)) { /* channel by channel: the second pass finds the first's data in cache */
        #pragma omp parallel for if (par)
        for (int64_t c = 0; c < d.c; c++) {
            double s, sdx;
            gr_bn_grad_channel_sums(a, &d, c, h, &s, &sdx);
            gr_bn_grad_channel_finish(a, &d, c, h, s, sdx, s, sdx, (double)(d.n * d.hw));
        }
        return;
    }
    /* S: this process's sums, then (G) the sums over the processes */
    double *S = gr_xmalloc((size_t)(4 * d.c + 2) * sizeof *S), *G = S + 2 * d.c + 1;
    #pragma omp parallel for if (par)
    for (int64_t c = 0; c < d.c; c++) gr_bn_grad_channel_sums(a, &d, c, h, &S[c], &S[d.c + c]);
    S[2 * d.c] = (double)(d.n * d.hw);
    memcpy(G, S, (size_t)(2 * d.c + 1) * sizeof *S);
    a->ctx->xsum->sum(a->ctx->xsum->user, G, (int)(2 * d.c + 1));
    #pragma omp parallel for if (par)
    for (int64_t c = 0; c < d.c; c++)
        gr_bn_grad_channel_finish(a, &d, c, h, S[c], S[d.c + c], G[c], G[d.c + c], G[2 * d.c]);
    free(S);
}
