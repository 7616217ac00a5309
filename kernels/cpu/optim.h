/* optim.h — the CPU's optimizer updates over flat fp32 arrays, with the
 * semantics and hyperparameters of kernels/optim.h (PyTorch's), and the
 * global gradient norm used for clipping. The CUDA backend mirrors these. */
#ifndef GR_CPU_OPTIM_H
#define GR_CPU_OPTIM_H

#include <stdint.h>

#include "../optim.h"

/* buf may be NULL when momentum == 0. sumsq, when not NULL, gets g's sum of
 * squares, taken in the same pass (the bits of gr_cpu_sumsq(g, n)). */
void gr_cpu_sgd_update(float *w, const float *g, float *buf, int64_t n, const gr_sgd_hparams *h, double *sumsq);
void gr_cpu_adamw_update(float *w, const float *g, float *m, float *v, int64_t n, const gr_adamw_hparams *h,
                         double *sumsq);
/* Sum of squares of g[0..n), accumulated in double. */
double gr_cpu_sumsq(const float *g, int64_t n);

#endif
