/* cu_loss.h — launchers of the loss kernels (loss.cu): mse, bce with
 * logits and the accuracy metric, each on the given stream with the
 * semantics of the CPU kernels in kernels/cpu/loss.c (softmax
 * cross-entropy's are in cu_elem.h). Nothing here synchronizes or
 * allocates, so every launcher may run inside CUDA Graph capture. */
#ifndef GR_CU_LOSS_H
#define GR_CU_LOSS_H

#include <cuda_runtime_api.h>
#include <stdint.h>

#include "../body_loss.h"

#ifdef __cplusplus
extern "C" {
#endif

/* stats = [sum, count] over units (elements of mse or bce, rows of
 * accuracy) as body_loss.h reduces them, through part (device doubles, at
 * least 2 * GR_LOSS_MAX_BLOCKS); op is GR_OP_MSE, GR_OP_BCE_WITH_LOGITS or
 * GR_OP_ACCURACY. */
void gr_cu_loss_sum(cudaStream_t s, int op, const gr_loss_in *in, int64_t units, float *stats, double *part);
/* dx = d loss / dx * ctx->grad_scale / per (read on the device) over n
 * elements, per of them in a sample; op GR_OP_MSE or GR_OP_BCE_WITH_LOGITS */
void gr_cu_loss_bwd(cudaStream_t s, int op, const gr_dev_ctx *ctx, const float *x, const float *t, float *dx,
                    int64_t n, int64_t per);

#ifdef __cplusplus
}
#endif

#endif
