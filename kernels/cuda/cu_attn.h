/* cu_attn.h — launchers of attention's kernels (attn.cu), one thread per
 * query or key row of a head running the bodies of kernels/body_attn.h:
 * gpurun's own kernel, simple and deterministic (no atomics), not a tuned
 * one. Each launches on the given stream without synchronizing or
 * allocating (CUDA Graph capture), with the semantics of kernels/cpu/attn.c. */
#ifndef GR_CU_ATTN_H
#define GR_CU_ATTN_H

#include <cuda_runtime_api.h>
#include <stdint.h>

#include "../body_attn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* y [n, T, C] and lse [n, heads, T] from qkv [n, T, 3C]. */
void gr_cu_attention(cudaStream_t s, const gr_attn_geo *g, int64_t n, const float *qkv, float *y, float *lse);
/* dqkv [n, T, 3C] (overwritten) and delta [n, heads, T] from dy, qkv, y, lse. */
void gr_cu_attention_bwd(cudaStream_t s, const gr_attn_geo *g, int64_t n, const float *dy, const float *qkv,
                         const float *y, const float *lse, float *dqkv, float *delta);

/* A decoding graph's step: qkv [n, 1, 3C] at position ctx->pos (read on the
 * device, so a captured launch decodes whatever position a replay is at)
 * into cache [n, tmax, 2C], y [n, 1, C] and lse [n, heads, 1]. */
void gr_cu_attention_decode(cudaStream_t s, const gr_attn_geo *g, int64_t n, int64_t tmax, const gr_dev_ctx *ctx,
                            const float *qkv, float *cache, float *y, float *lse);

#ifdef __cplusplus
}
#endif

#endif
