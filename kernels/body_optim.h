/* body_optim.h — per-element bodies of the optimizer kernels (kernels/cuda/optim.cu),
 * the formulas of kernels/optim.h; tests/ops/test_optim_body.c drives them
 * over whole arrays against the CPU updates. */
#ifndef GR_BODY_OPTIM_H
#define GR_BODY_OPTIM_H

#include <math.h>
#include <string.h>

#include "optim.h"
#include "body.h"

/* Per-call scalars of one update, computed once on the host. */
typedef struct gr_optim_k {
    float lr, mu, wd, gm;       /* SGD: lr, momentum, weight decay, gradient multiplier */
    int nesterov;
    float b1, b2, eps;          /* AdamW */
    float decay, step_size, bc2_sqrt;
} gr_optim_k;

/* The scalars of an SGD call. */
static inline gr_optim_k gr_optim_sgd_k(const gr_sgd_hparams *h) {
    gr_optim_k k;
    memset(&k, 0, sizeof k);
    k.lr = h->lr;
    k.mu = h->momentum;
    k.wd = h->weight_decay;
    k.gm = h->grad_mult;
    k.nesterov = h->nesterov;
    return k;
}

/* The scalars of an AdamW call: the bias corrections in double, as
 * kernels/cpu/optim.c (and PyTorch, in Python) compute them. */
static inline gr_optim_k gr_optim_adamw_k(const gr_adamw_hparams *h) {
    gr_optim_k k;
    memset(&k, 0, sizeof k);
    double t = (double)h->t;
    double bc1 = 1.0 - pow((double)h->beta1, t), bc2 = 1.0 - pow((double)h->beta2, t);
    k.b1 = h->beta1;
    k.b2 = h->beta2;
    k.eps = h->eps;
    k.gm = h->grad_mult;
    k.decay = (float)(1.0 - (double)h->lr * (double)h->weight_decay);
    k.step_size = (float)((double)h->lr / bc1);
    k.bc2_sqrt = (float)sqrt(bc2);
    return k;
}

/* SGD element i; buf is NULL when momentum is 0. */
GR_HD void gr_body_sgd(const gr_optim_k *k, float *w, const float *g, float *buf, int64_t i) {
    float d = k->gm * g[i] + k->wd * w[i];
    if (buf) {
        float b = k->mu * buf[i] + d;
        buf[i] = b;
        d = k->nesterov ? d + k->mu * b : b;
    }
    w[i] -= k->lr * d;
}

/* AdamW element i: decoupled decay, bias-corrected moments. */
GR_HD void gr_body_adamw(const gr_optim_k *k, float *w, const float *g, float *m, float *v, int64_t i) {
    float gi = k->gm * g[i];
    float mi = k->b1 * m[i] + (1.0f - k->b1) * gi;
    float vi = k->b2 * v[i] + (1.0f - k->b2) * gi * gi;
    m[i] = mi;
    v[i] = vi;
    float denom = sqrtf(vi) / k->bc2_sqrt + k->eps;
    w[i] = w[i] * k->decay - k->step_size * (mi / denom);
}

/* The partial sum of squares of thread t of T over g[0..n): elements t,
 * t+T, t+2T, ... (the kernel then sums the T partials in a fixed tree). */
GR_HD double gr_body_sumsq_part(const float *g, int64_t n, int64_t t, int64_t T) {
    double s = 0.0;
    for (int64_t i = t; i < n; i += T) s += (double)g[i] * (double)g[i];
    return s;
}

#endif
