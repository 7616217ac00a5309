/* optim.h — CPU optimizer updates over flat fp32 arrays (all parameters of a
 * model live in one arena, so one call updates them all), and the global
 * gradient norm used for clipping. The CUDA backend mirrors these.
 *
 * Semantics are PyTorch's (torch.optim.SGD / AdamW, foreach=False):
 *   every update first scales the gradient: g = grad_mult * g[i]
 *   (grad_mult folds loss-scale removal and clipping into one multiply).
 *   SGD:   g += wd * w;  buf = momentum * buf + g  (buf starts at zero, so the
 *          first step gives buf = g, as PyTorch);  d = nesterov ? g + momentum*buf : buf
 *          (d = g when momentum == 0);  w -= lr * d
 *   AdamW: w *= 1 - lr * wd;  m = b1*m + (1-b1)*g;  v = b2*v + (1-b2)*g*g;
 *          mhat = m / (1 - b1^t);  vhat = v / (1 - b2^t);
 *          w -= lr * mhat / (sqrt(vhat) + eps)       (t = 1 on the first step) */
#ifndef GR_CPU_OPTIM_H
#define GR_CPU_OPTIM_H

#include <stdint.h>
#include <stdbool.h>

typedef struct gr_sgd_hparams {
    float lr, momentum, weight_decay, grad_mult;
    bool nesterov;
} gr_sgd_hparams;

typedef struct gr_adamw_hparams {
    float lr, beta1, beta2, eps, weight_decay, grad_mult;
    int64_t t; /* 1-based step count */
} gr_adamw_hparams;

/* buf may be NULL when momentum == 0. */
void gr_cpu_sgd_update(float *w, const float *g, float *buf, int64_t n, const gr_sgd_hparams *h);
void gr_cpu_adamw_update(float *w, const float *g, float *m, float *v, int64_t n,
                         const gr_adamw_hparams *h);
/* Sum of squares of g[0..n), accumulated in double. */
double gr_cpu_sumsq(const float *g, int64_t n);
/* Clipping factor for torch.nn.utils.clip_grad_norm_: min(1, max_norm / (norm + 1e-6));
 * 1 when max_norm <= 0. */
float gr_clip_factor(double norm, double max_norm);

#endif
