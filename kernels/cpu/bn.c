/* bn.c — CPU kernels of batchnorm and its backward (graph/op_bn.c has the
 * node layout). x is [n, C, hw] (hw = H*W, 1 for [n, C]); channel c's m =
 * n*hw values are n planes of hw floats, C*hw apart.
 *
 * Training forward and the backward work channel by channel (in parallel
 * over channels), two passes over a channel's planes each: statistics, then
 * the output (so the second pass reads what the first brought into cache).
 * Sums are taken in float over blocks of GR_BN_BLOCK elements (vectorized)
 * and added up in double; the forward's sums are of x - x[first], so the
 * variance E[d^2] - E[d]^2 does not cancel when |mean| >> std.
 *
 * Writes to inputs: the training forward updates running_mean (in[3]) and
 * running_var (in[4]), which live in the params arena. */
#include <math.h>
#include <string.h>

#include "cpu_kernels.h"

#define GR_BN_BLOCK 1024

typedef struct gr_bn_dims {
    int64_t n, c, hw;
} gr_bn_dims;

static gr_bn_dims gr_bn_dims_of(const gr_kargs *a, const gr_tensor *x) {
    gr_bn_dims d = {a->n, x->shape[1], x->ndim == 4 ? x->shape[2] * x->shape[3] : 1};
    return d;
}

/* s += sum(p[i] - k), ss += sum((p[i] - k)^2) over len floats. */
static void gr_bn_sums(const float *p, int64_t len, float k, double *s, double *ss) {
    for (int64_t b0 = 0; b0 < len; b0 += GR_BN_BLOCK) {
        int64_t b1 = b0 + GR_BN_BLOCK < len ? b0 + GR_BN_BLOCK : len;
        float s1 = 0.0f, s2 = 0.0f;
        #pragma omp simd reduction(+ : s1, s2)
        for (int64_t i = b0; i < b1; i++) {
            float v = p[i] - k;
            s1 += v;
            s2 += v * v;
        }
        *s += s1;
        *ss += s2;
    }
}

/* s += sum(dy[i]), sdx += sum(dy[i] * (x[i] - mean)) over len floats. */
static void gr_bn_grad_sums(const float *dy, const float *x, int64_t len, float mean, double *s, double *sdx) {
    for (int64_t b0 = 0; b0 < len; b0 += GR_BN_BLOCK) {
        int64_t b1 = b0 + GR_BN_BLOCK < len ? b0 + GR_BN_BLOCK : len;
        float s1 = 0.0f, s2 = 0.0f;
        #pragma omp simd reduction(+ : s1, s2)
        for (int64_t i = b0; i < b1; i++) {
            s1 += dy[i];
            s2 += dy[i] * (x[i] - mean);
        }
        *s += s1;
        *sdx += s2;
    }
}

/* out = (in - mean) * scale + shift over len floats. */
static void gr_bn_affine(float *restrict out, const float *restrict in, int64_t len, float mean, float scale,
                         float shift) {
    #pragma omp simd
    for (int64_t i = 0; i < len; i++) out[i] = (in[i] - mean) * scale + shift;
}

/* One channel in training: batch statistics, running stats, saved, y. */
static void gr_bn_train_channel(const gr_kargs *a, const gr_bn_dims *d, int64_t c, float *rvar) {
    const float *x = a->in[0], *w = a->in[1], *b = a->in[2];
    float *rmean = a->in[3], *y = a->out[0], *saved = a->out[1];
    int64_t stride = d->c * d->hw, m = d->n * d->hw;
    const float *xc = x + c * d->hw;
    float k = xc[0];
    double s = 0.0, ss = 0.0;
    if (d->hw == 1) {
        for (int64_t i = 0; i < d->n; i++) {
            double v = (double)xc[i * stride] - k;
            s += v;
            ss += v * v;
        }
    } else {
        for (int64_t i = 0; i < d->n; i++) gr_bn_sums(xc + i * stride, d->hw, k, &s, &ss);
    }
    double dm = s / (double)m, var = ss / (double)m - dm * dm;
    if (var < 0.0) var = 0.0;
    double mean = (double)k + dm, invstd = 1.0 / sqrt(var + a->node->attrs.eps);
    double mom = a->node->attrs.momentum;
    saved[c] = (float)mean;
    saved[d->c + c] = (float)invstd;
    rmean[c] = (float)((1.0 - mom) * rmean[c] + mom * mean);
    rvar[c] = (float)((1.0 - mom) * rvar[c] + mom * var * (double)m / (double)(m - 1));
    float scale = (float)(w[c] * invstd);
    for (int64_t i = 0; i < d->n; i++)
        gr_bn_affine(y + c * d->hw + i * stride, xc + i * stride, d->hw, saved[c], scale, b[c]);
}

void gr_cpu_batchnorm(const gr_kargs *a) {
    gr_bn_dims d = gr_bn_dims_of(a, a->tin[0]);
    GR_ASSERT(d.n * d.hw >= 2 || !a->ctx->training);
    float *rvar = a->in[4];
    bool par = d.n * d.c * d.hw >= GR_OMP_MIN;
    if (a->ctx->training) {
        #pragma omp parallel for if (par)
        for (int64_t c = 0; c < d.c; c++) gr_bn_train_channel(a, &d, c, rvar);
        return;
    }
    /* eval: the running stats, unchanged */
    const float *x = a->in[0], *w = a->in[1], *b = a->in[2], *rmean = a->in[3];
    float *y = a->out[0], *saved = a->out[1];
    float eps = (float)a->node->attrs.eps;
    for (int64_t c = 0; c < d.c; c++) {
        saved[c] = rmean[c];
        saved[d.c + c] = 1.0f / sqrtf(rvar[c] + eps);
    }
    #pragma omp parallel for if (par)
    for (int64_t p = 0; p < d.n * d.c; p++) {
        int64_t c = p % d.c;
        gr_bn_affine(y + p * d.hw, x + p * d.hw, d.hw, saved[c], w[c] * saved[d.c + c], b[c]);
    }
}

/* Training: with xhat = (x - mean) * invstd,
 *   dweight += sum(dy * xhat), dbias += sum(dy),
 *   dx = weight * invstd * (dy - sum(dy) / m - xhat * sum(dy * xhat) / m),
 * computed as dx = A dy + B (x - mean) + C0 per channel. Eval (frozen statistics):
 * dx = weight * invstd * dy. */
void gr_cpu_batchnorm_bwd(const gr_kargs *a) {
    const float *dy = a->in[0], *x = a->in[1], *w = a->in[2], *saved = a->in[3];
    float *dw = a->out[0], *db = a->out[1], *dx = a->node->nout > 2 ? a->out[2] : NULL;
    gr_bn_dims d = gr_bn_dims_of(a, a->tin[1]);
    int64_t stride = d.c * d.hw, m = d.n * d.hw;
    bool training = a->ctx->training;
    #pragma omp parallel for if (d.n * d.c * d.hw >= GR_OMP_MIN)
    for (int64_t c = 0; c < d.c; c++) {
        const float *dyc = dy + c * d.hw, *xc = x + c * d.hw;
        float mean = saved[c], invstd = saved[d.c + c];
        double s = 0.0, sdx = 0.0;
        if (d.hw == 1) {
            for (int64_t i = 0; i < d.n; i++) {
                s += dyc[i * stride];
                sdx += (double)dyc[i * stride] * (xc[i * stride] - mean);
            }
        } else {
            for (int64_t i = 0; i < d.n; i++) gr_bn_grad_sums(dyc + i * stride, xc + i * stride, d.hw, mean, &s, &sdx);
        }
        dw[c] += (float)(sdx * invstd);
        db[c] += (float)s;
        if (!dx) continue;
        double A = (double)w[c] * invstd, B = 0.0, C0 = 0.0;
        if (training) {
            B = -A * invstd * invstd * sdx / (double)m;
            C0 = -A * s / (double)m;
        }
        float fa = (float)A, fb = (float)B, fc = (float)C0;
        for (int64_t i = 0; i < d.n; i++) {
            const float *restrict g = dyc + i * stride, *restrict xi = xc + i * stride;
            float *restrict o = dx + c * d.hw + i * stride;
            #pragma omp simd
            for (int64_t j = 0; j < d.hw; j++) o[j] = fa * g[j] + fb * (xi[j] - mean) + fc;
        }
    }
}
