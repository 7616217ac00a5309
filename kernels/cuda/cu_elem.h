/* cu_elem.h — launchers of the elementwise kernels (elem.cu), each on the
 * given stream, with the semantics of the CPU kernels in
 * kernels/cpu/{act,misc,join,loss}.c. Counts are elements unless named
 * otherwise; nothing here synchronizes or allocates, so every launcher may
 * run inside CUDA Graph capture. */
#ifndef GR_CU_ELEM_H
#define GR_CU_ELEM_H

#include <cuda_runtime_api.h>
#include <stdint.h>

#include "../body_elem.h"

#ifdef __cplusplus
extern "C" {
#endif

/* y = act(x); dx = act'(dy, t) with t = y, or x on a GR_OPF_ACT_SAVES_X
 * row; act is the op of a GR_OPF_ACT row of ops.def (GR_OP_RELU, ...), and
 * every array is stored as e (body_half.h: fp32, bf16 or fp16) */
void gr_cu_act(cudaStream_t s, int act, int e, const void *x, void *y, int64_t n);
void gr_cu_act_bwd(cudaStream_t s, int act, int e, const void *dy, const void *t, void *dx, int64_t n);

/* Training-mode dropout; the key comes from ctx->rng_key on the device, so
 * a captured launch draws a new mask every replay. */
void gr_cu_dropout(cudaStream_t s, const gr_dev_ctx *ctx, int layer, float rate, float scale, const float *x,
                   float *y, uint8_t *m, int64_t n);
void gr_cu_dropout_bwd(cudaStream_t s, float scale, const float *dy, const uint8_t *m, float *dx, int64_t n);

/* y = sum of in->x, all stored as in->e */
void gr_cu_add(cudaStream_t s, const gr_add_in *in, void *y, int64_t n);
/* n samples of in->out_row floats; dx: n rows of row floats cut at off from rows of in_row */
void gr_cu_concat(cudaStream_t s, const gr_concat_in *in, float *y, int64_t n);
void gr_cu_concat_bwd(cudaStream_t s, const float *dy, float *dx, int64_t n, int64_t in_row, int64_t row,
                      int64_t off);

/* Softmax cross-entropy over n rows (tokens) of k logits, the first kc of
 * them classes (the rest, padding, get probability 0): probabilities into
 * p, stats[0] = summed loss and stats[1] = count of the rows whose label is
 * not ignore, reduced in a fixed order through part (device doubles, at
 * least 2 * GR_SCE_MAX_BLOCKS). */
void gr_cu_sce(cudaStream_t s, const float *z, const int32_t *label, float *p, float *stats, int64_t n,
               int64_t k, int64_t kc, double eps, int64_t ignore, double *part);
/* dz = (p - smoothed one-hot) * ctx->grad_scale * samples / stats[1], read
 * on the device (gr_sce_token_scale); 0 in ignored rows and padding columns */
void gr_cu_sce_bwd(cudaStream_t s, const gr_dev_ctx *ctx, const float *p, const int32_t *label, const float *stats,
                   float *dz, int64_t n, int64_t k, int64_t kc, int64_t samples, float eps, int64_t ignore);

#ifdef __cplusplus
}
#endif

#endif
