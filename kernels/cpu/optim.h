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
/* The same updates, each block of GR_SUMSQ_BLOCK gradients set to zero once it is read, while it is
 * in cache, where its values were finite: the next step adds into zeros without a pass that clears
 * them (its reads and writes of the whole arena). A block holding inf/NaN (or squares past the
 * double range) is left as it was, for the report that names the layer; true when every block was
 * cleared. The parameters come out as the updates' above, bit for bit. */
bool gr_cpu_sgd_update_clear(float *w, float *g, float *buf, int64_t n, const gr_sgd_hparams *h, double *sumsq);
bool gr_cpu_adamw_update_clear(float *w, float *g, float *m, float *v, int64_t n, const gr_adamw_hparams *h,
                               double *sumsq);
/* Sum of squares of g[0..n), accumulated in double. */
double gr_cpu_sumsq(const float *g, int64_t n);

#endif
