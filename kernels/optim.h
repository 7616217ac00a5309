/* optim.h — the optimizer updates every backend implements (the CPU's in
 * kernels/cpu/optim.c, the CUDA's in kernels/cuda/optim.cu through
 * kernels/body_optim.h): their hyperparameters and semantics, and the
 * gradient-clipping factor. Updates run over flat fp32 arrays (all
 * parameters of a model live in one arena, so one call updates them all).
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
#ifndef GR_OPTIM_H
#define GR_OPTIM_H

#include <stdbool.h>
#include <stdint.h>

typedef struct gr_sgd_hparams {
    float lr, momentum, weight_decay, grad_mult;
    bool nesterov;
} gr_sgd_hparams;

typedef struct gr_adamw_hparams {
    float lr, beta1, beta2, eps, weight_decay, grad_mult;
    int64_t t; /* 1-based step count */
} gr_adamw_hparams;

/* Clipping factor for torch.nn.utils.clip_grad_norm_: min(1, max_norm / (norm + 1e-6));
 * 1 when max_norm <= 0. As PyTorch's, a NaN norm gives NaN and an infinite
 * one 0 (the training loop reports a non-finite norm as divergence before
 * any update). */
static inline float gr_clip_factor(double norm, double max_norm) {
    if (!(max_norm > 0.0))
        return 1.0f;
    double c = max_norm / (norm + 1e-6);
    return c < 1.0 || c != c ? (float)c : 1.0f;
}

#endif
