/* cu_cast.h — launcher of the half-storage conversion kernel (cast.cu):
 * fp32 <-> fp16 / bf16 over device arrays, with common/gr_half.h's
 * encoding (round to nearest even), shared with the CPU backend. */
#ifndef GR_CU_CAST_H
#define GR_CU_CAST_H

#include <cuda_runtime_api.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* to_half: h[0..n) = encode(x[0..n)); else x[0..n) = decode(h[0..n)); on
 * stream s, h stored as e (body_half.h: GR_BODY_BF16 or GR_BODY_F16). One
 * launch, no sync, no allocation: capturable in a graph. Nothing for n <= 0. */
void gr_cu_cast(cudaStream_t s, float *x, uint16_t *h, int64_t n, int e, int to_half);
/* x[0..n) += decode(h[0..n)): a weight gradient computed in half, accumulated
 * into the fp32 gradient (over micro-batches, as every gradient). */
void gr_cu_cast_add(cudaStream_t s, float *x, const uint16_t *h, int64_t n, int e);

#ifdef __cplusplus
}
#endif

#endif
