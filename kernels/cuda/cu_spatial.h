/* cu_spatial.h — launchers of the spatial kernels (spatial.cu): pooling,
 * global average pooling, batchnorm, and the per-channel bias add and bias
 * gradient that the dense and conv kernels use. Each takes the stream
 * first, launches on it without synchronizing or allocating (they run
 * inside CUDA Graph capture), and gives the same result on every run.
 *
 * The per-channel reductions (batchnorm, gr_cu_bias_grad) use one device
 * scratch in spatial.cu: GR_CHAN_PARTS_MAX partials of two doubles (1 MiB)
 * and per-channel coefficients for up to GR_CHAN_MAX channels (256 KiB). It
 * is shared by all nodes, which is safe because one stream runs them in
 * order; batchnorm needs c <= GR_CHAN_MAX. */
#ifndef GR_CU_SPATIAL_H
#define GR_CU_SPATIAL_H

#include <cuda_runtime_api.h>
#include <stdint.h>

#include "../body_spatial.h"

#ifdef __cplusplus
extern "C" {
#endif

/* y, idx [planes, ho, wo] from x [planes, h, w] (kernels/cpu/pool.c). */
void gr_cu_maxpool(cudaStream_t s, const gr_pool_geo *g, const float *x, float *y, int32_t *idx);
/* dx [planes, h, w] (overwritten) from dy and the saved argmax. */
void gr_cu_maxpool_bwd(cudaStream_t s, const gr_pool_geo *g, const float *dy, const int32_t *idx, float *dx);
void gr_cu_avgpool(cudaStream_t s, const gr_pool_geo *g, const float *x, float *y);
void gr_cu_avgpool_bwd(cudaStream_t s, const gr_pool_geo *g, const float *dy, float *dx);
/* y [planes] = the mean of each plane of hw floats; dx = dy / hw over each plane. */
void gr_cu_global_avgpool(cudaStream_t s, const float *x, float *y, int64_t planes, int64_t hw);
void gr_cu_global_avgpool_bwd(cudaStream_t s, const float *dy, float *dx, int64_t planes, int64_t hw);

/* Batchnorm on x [n][c][hw] (kernels/cpu/bn.c); x, y, dy and dx are stored
 * as e (body_half.h: fp32, bf16 or fp16; statistics and parameters are
 * fp32). Training: batch statistics, saved [2][c] = {mean, invstd}, running
 * stats updated in place (rmean and rvar NULL: left alone, a recomputation). */
void gr_cu_batchnorm_train(cudaStream_t s, int e, const void *x, const float *w, const float *b, float *rmean,
                           float *rvar, void *y, float *saved, int64_t n, int64_t c, int64_t hw, double eps,
                           double momentum);
/* Eval: the running stats, unchanged; saved = {running_mean, 1/sqrt(running_var + eps)}. */
void gr_cu_batchnorm_eval(cudaStream_t s, int e, const void *x, const float *w, const float *b, const float *rmean,
                          const float *rvar, void *y, float *saved, int64_t n, int64_t c, int64_t hw, float eps);
/* dw += sum(dy xhat), db += sum(dy); dx (overwritten; NULL: not wanted) with
 * the statistics' gradient in training, weight * invstd * dy in eval. */
void gr_cu_batchnorm_bwd(cudaStream_t s, int e, const void *dy, const void *x, const float *w, const float *saved,
                         float *dw, float *db, void *dx, int64_t n, int64_t c, int64_t hw, int training);

/* y[i][j][k] += b[j], y is [n][c][inner] stored as e (rounded once). */
void gr_cu_bias_add(cudaStream_t s, int e, void *y, const float *b, int64_t n, int64_t c, int64_t inner);
/* db[j] += sum over i, k of dy[i][j][k] (dy stored as e; summed in double, rounded once). */
void gr_cu_bias_grad(cudaStream_t s, int e, const void *dy, float *db, int64_t n, int64_t c, int64_t inner);

#ifdef __cplusplus
}
#endif

#endif
