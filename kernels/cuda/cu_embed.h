/* cu_embed.h — launchers of the embedding family's kernels (embed.cu), each
 * on the given stream, with the semantics of the CPU kernels in
 * kernels/cpu/embed.c; the math is kernels/body_embed.h. Nothing here
 * synchronizes or allocates, so every launcher may run inside CUDA Graph
 * capture. */
#ifndef GR_CU_EMBED_H
#define GR_CU_EMBED_H

#include <cuda_runtime_api.h>
#include <stdint.h>

#include "../body.h"

#ifdef __cplusplus
extern "C" {
#endif

/* y[t, :] = w[ids[t], :] for ntok tokens (NaN rows for ids outside [0, vocab)) */
void gr_cu_embedding(cudaStream_t s, const int32_t *ids, const float *w, float *y, int64_t ntok, int64_t vocab,
                     int64_t dim);
/* dw[ids[t], :] += dy[t, :] for every token t, in order per element (no atomics) */
void gr_cu_embedding_bwd(cudaStream_t s, const int32_t *ids, const float *dy, float *dw, int64_t ntok, int64_t vocab,
                         int64_t dim);
/* y[b, k] = x[b, k] + w[k], k over tc = T*C, b over n samples */
void gr_cu_pos_embedding(cudaStream_t s, const float *x, const float *w, float *y, int64_t n, int64_t tc,
                         const gr_dev_ctx *decode);
/* dw[k] += the sum over the n samples of dy[b, k] */
void gr_cu_pos_embedding_bwd(cudaStream_t s, const float *dy, float *dw, int64_t n, int64_t tc);

#ifdef __cplusplus
}
#endif

#endif
