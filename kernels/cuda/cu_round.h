/* cu_round.h — launcher of the storage-rounding kernel (round.cu): the
 * fp16 / bf16 emulation of common/gr_half.h over a device array. */
#ifndef GR_CU_ROUND_H
#define GR_CU_ROUND_H

#include <cuda_runtime_api.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* x[0..n) rounded in place, on stream s, to the nearest value of format fmt
 * (a gr_half_fmt: GR_HALF_FP16 or GR_HALF_BF16); nothing for n <= 0 or
 * GR_HALF_NONE. One launch, no sync, no allocation: capturable in a graph. */
void gr_cu_round(cudaStream_t s, float *x, int64_t n, int fmt);

#ifdef __cplusplus
}
#endif

#endif
