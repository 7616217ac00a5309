/* cu_optim.h — launchers of the optimizer kernels (optim.cu): one launch
 * over the flat parameter arena, on the given stream, with the semantics of
 * kernels/cpu/optim.h. */
#ifndef GR_CU_OPTIM_H
#define GR_CU_OPTIM_H

#include <cuda_runtime_api.h>
#include <stdint.h>

#include "../optim.h"

#ifdef __cplusplus
extern "C" {
#endif

void gr_cu_sgd(cudaStream_t s, float *w, const float *g, float *buf, int64_t n, const gr_sgd_hparams *h);
void gr_cu_adamw(cudaStream_t s, float *w, const float *g, float *m, float *v, int64_t n,
                 const gr_adamw_hparams *h);
/* sum of g[i]^2 in double into out[0] (device memory holding GR_SUMSQ_SCRATCH
 * doubles), in a fixed order (the same result every run) */
#define GR_SUMSQ_SCRATCH 256
void gr_cu_sumsq(cudaStream_t s, const float *g, int64_t n, double *out);

#ifdef __cplusplus
}
#endif

#endif
