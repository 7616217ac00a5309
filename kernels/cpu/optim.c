/* optim.c — CPU reference optimizer updates (SGD with momentum/nesterov,
 * AdamW) over flat fp32 arrays, and the global gradient norm.
 * Semantics and formulas: see kernels/optim.h (PyTorch's, foreach=False). Each
 * update is one branch-free loop per case so the compiler can vectorize it;
 * per-call scalars (bias corrections, decay factor) are computed once.
 * GCC vectorizes them at -O3, or at -O2 with -fvect-cost-model=cheap; the
 * AdamW loop also needs -fno-math-errno (else sqrtf may set errno). */
#include "optim.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/gr_common.h"

/* The updates run over blocks of GR_SUMSQ_BLOCK elements spread over the
 * threads; a call that asks for the gradients' sum of squares gets each
 * block's (gr_sumsq_block) in the same pass, the block read once from
 * memory, and the same bits as gr_cpu_sumsq. */
enum { GR_SUMSQ_BLOCK = 1 << 14 };

/* The squares of a block's values summed in double in 32 interleaved lanes
 * (i mod 32), the lanes then added pairwise: four independent vectors of
 * sums, where one vector (8 lanes) waited on each add's latency (about 40
 * us on a 535k-parameter MLP, 2 threads, most of its optimizer step). */
enum { GR_SUMSQ_LANES = 32 };

GR_ISA_CLONES static double gr_sumsq_block(const float *restrict g, int64_t n) {
    double l[GR_SUMSQ_LANES] = {0};
    int64_t i = 0;
    for (; i + GR_SUMSQ_LANES <= n; i += GR_SUMSQ_LANES)
        for (int k = 0; k < GR_SUMSQ_LANES; k++) {
            const double x = (double)g[i + k];
            l[k] += x * x;
        }
    for (; i < n; i++) {
        const double x = (double)g[i];
        l[i % GR_SUMSQ_LANES] += x * x;
    }
    for (int w = GR_SUMSQ_LANES / 2; w >= 1; w /= 2)
        for (int k = 0; k < w; k++) l[k] += l[k + w];
    return l[0];
}

/* momentum == 0: w -= lr * (gm*g + wd*w) */
static void sgd_plain(float *restrict w, const float *restrict g, int64_t n, float lr, float wd, float gm) {
    #pragma omp simd
    for (int64_t i = 0; i < n; i++) {
        float d = gm * g[i] + wd * w[i];
        w[i] -= lr * d;
    }
}

/* buf = mu*buf + d;  w -= lr * buf */
static void sgd_momentum(float *restrict w, const float *restrict g, float *restrict buf, int64_t n, float lr,
                         float mu, float wd, float gm) {
    #pragma omp simd
    for (int64_t i = 0; i < n; i++) {
        float d = gm * g[i] + wd * w[i];
        float b = mu * buf[i] + d;
        buf[i] = b;
        w[i] -= lr * b;
    }
}

/* buf = mu*buf + d;  w -= lr * (d + mu*buf) */
static void sgd_nesterov(float *restrict w, const float *restrict g, float *restrict buf, int64_t n, float lr,
                         float mu, float wd, float gm) {
    #pragma omp simd
    for (int64_t i = 0; i < n; i++) {
        float d = gm * g[i] + wd * w[i];
        float b = mu * buf[i] + d;
        buf[i] = b;
        w[i] -= lr * (d + mu * b);
    }
}

GR_ISA_CLONES static void gr_sgd_block(float *w, const float *g, float *buf, int64_t n, const gr_sgd_hparams *h) {
    const float lr = h->lr, mu = h->momentum, wd = h->weight_decay, gm = h->grad_mult;
    if (mu == 0.0f) sgd_plain(w, g, n, lr, wd, gm);
    else if (h->nesterov) sgd_nesterov(w, g, buf, n, lr, mu, wd, gm);
    else sgd_momentum(w, g, buf, n, lr, mu, wd, gm);
}

/* The blocks' sums (part: one per block, or NULL) added in block order. */
static double gr_sumsq_parts(const double *part, int64_t nb) {
    double s = 0.0;
    for (int64_t b = 0; b < nb; b++) s += part[b];
    return s;
}

static int64_t gr_nblocks(int64_t n) { return (n + GR_SUMSQ_BLOCK - 1) / GR_SUMSQ_BLOCK; }

/* A block of gradients after its update: zeroed (g not NULL) when its sum of squares is finite; 1 when kept. */
static int gr_clear_block(float *g, int64_t len, double sq) {
    if (!g) return 0;
    if (!isfinite(sq)) return 1;
    memset(g, 0, (size_t)len * sizeof *g);
    return 0;
}

/* The SGD update; clear: g itself, to be cleared block by block, or NULL. True when every block was. */
static bool gr_sgd_run(float *w, const float *g, float *buf, int64_t n, const gr_sgd_hparams *h, double *sumsq,
                       float *clear) {
    GR_ASSERT(w && g && h && n >= 0);
    GR_ASSERT(h->momentum == 0.0f || buf != NULL);
    const int64_t nb = gr_nblocks(n);
    double *part = sumsq || clear ? gr_xmalloc((size_t)(nb > 0 ? nb : 1) * sizeof *part) : NULL;
    int kept = 0;
    #pragma omp parallel for schedule(static) reduction(+ : kept) if (n >= GR_OMP_MIN)
    for (int64_t b = 0; b < nb; b++) {
        const int64_t i = b * GR_SUMSQ_BLOCK, len = GR_MIN(GR_SUMSQ_BLOCK, n - i);
        if (part) part[b] = gr_sumsq_block(g + i, len);
        gr_sgd_block(w + i, g + i, buf ? buf + i : NULL, len, h);
        kept += gr_clear_block(clear ? clear + i : NULL, len, part ? part[b] : 0.0);
    }
    if (sumsq) *sumsq = gr_sumsq_parts(part, nb);
    free(part);
    return clear && kept == 0;
}

void gr_cpu_sgd_update(float *w, const float *g, float *buf, int64_t n, const gr_sgd_hparams *h, double *sumsq) {
    (void)gr_sgd_run(w, g, buf, n, h, sumsq, NULL);
}

bool gr_cpu_sgd_update_clear(float *w, float *g, float *buf, int64_t n, const gr_sgd_hparams *h, double *sumsq) {
    return gr_sgd_run(w, g, buf, n, h, sumsq, g);
}

/* w = w*decay - step_size * m / (sqrt(v)/bc2_sqrt + eps), after the moment updates.
 * Built for AVX-512 and AVX2 too (GR_ISA_CLONES): a division, a square root
 * and another division an element kept the baseline's 4-wide build near
 * its compute bound on GPT-2 124M (150 ms a step on 2 cores); each
 * operation rounds once, so the bits do not depend on the ISA. */
GR_ISA_CLONES static void adamw_loop(float *restrict w, const float *restrict g, float *restrict m,
                       float *restrict v, int64_t n, float b1, float b2, float eps, float gm,
                       float decay, float step_size, float bc2_sqrt) {
    const float c1 = 1.0f - b1, c2 = 1.0f - b2;
    #pragma omp simd
    for (int64_t i = 0; i < n; i++) {
        float gi = gm * g[i];
        float mi = b1 * m[i] + c1 * gi;
        float vi = b2 * v[i] + c2 * gi * gi;
        m[i] = mi;
        v[i] = vi;
        float denom = sqrtf(vi) / bc2_sqrt + eps;
        w[i] = w[i] * decay - step_size * (mi / denom);
    }
}

/* The AdamW update; clear: g itself, to be cleared block by block, or NULL. True when every block was. */
static bool gr_adamw_run(float *w, const float *g, float *m, float *v, int64_t n, const gr_adamw_hparams *h,
                         double *sumsq, float *clear) {
    GR_ASSERT(w && g && m && v && h && n >= 0 && h->t >= 1);
    /* Per-call scalars in double, as PyTorch computes them in Python:
     * step_size = lr / (1 - b1^t), bc2_sqrt = sqrt(1 - b2^t). */
    const double t = (double)h->t;
    const double bc1 = 1.0 - pow((double)h->beta1, t);
    const double bc2 = 1.0 - pow((double)h->beta2, t);
    const float decay = (float)(1.0 - (double)h->lr * (double)h->weight_decay);
    const float step_size = (float)((double)h->lr / bc1);
    const float bc2_sqrt = (float)sqrt(bc2);

    const int64_t nb = gr_nblocks(n);
    double *part = sumsq || clear ? gr_xmalloc((size_t)(nb > 0 ? nb : 1) * sizeof *part) : NULL;
    int kept = 0;
    #pragma omp parallel for schedule(static) reduction(+ : kept) if (n >= GR_OMP_MIN)
    for (int64_t b = 0; b < nb; b++) {
        const int64_t i = b * GR_SUMSQ_BLOCK, len = GR_MIN(GR_SUMSQ_BLOCK, n - i);
        if (part) part[b] = gr_sumsq_block(g + i, len);
        adamw_loop(w + i, g + i, m + i, v + i, len, h->beta1, h->beta2, h->eps, h->grad_mult, decay, step_size,
                   bc2_sqrt);
        kept += gr_clear_block(clear ? clear + i : NULL, len, part ? part[b] : 0.0);
    }
    if (sumsq) *sumsq = gr_sumsq_parts(part, nb);
    free(part);
    return clear && kept == 0;
}

void gr_cpu_adamw_update(float *w, const float *g, float *m, float *v, int64_t n, const gr_adamw_hparams *h,
                         double *sumsq) {
    (void)gr_adamw_run(w, g, m, v, n, h, sumsq, NULL);
}

bool gr_cpu_adamw_update_clear(float *w, float *g, float *m, float *v, int64_t n, const gr_adamw_hparams *h,
                               double *sumsq) {
    return gr_adamw_run(w, g, m, v, n, h, sumsq, g);
}

/* Blocks of GR_SUMSQ_BLOCK over the threads, their sums added in block
 * order: the same bits whatever the thread count. */
double gr_cpu_sumsq(const float *g, int64_t n) {
    GR_ASSERT(g || n == 0);
    const int64_t nb = gr_nblocks(n);
    double *part = gr_xmalloc((size_t)(nb > 0 ? nb : 1) * sizeof *part);
    #pragma omp parallel for schedule(static) if (n >= GR_OMP_MIN)
    for (int64_t b = 0; b < nb; b++) {
        const int64_t i = b * GR_SUMSQ_BLOCK;
        part[b] = gr_sumsq_block(g + i, GR_MIN(GR_SUMSQ_BLOCK, n - i));
    }
    const double s = gr_sumsq_parts(part, nb);
    free(part);
    return s;
}
