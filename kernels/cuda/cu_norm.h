/* cu_norm.h — launchers of the layernorm kernels (norm.cu), with the
 * semantics of kernels/cpu/norm.c: rows of c values over the last axis,
 * fp32 storage (mixed precision stages these steps). Each takes the stream
 * first and launches on it without synchronizing or allocating (they run
 * inside CUDA Graph capture); every reduction has a fixed order, so a run
 * gives the same bits every time.
 *
 * The parameter gradients' column reduction keeps its partials in one
 * device scratch in norm.cu (GR_CHAN_PARTS_MAX partials of two doubles,
 * 1 MiB), shared by all nodes: one stream runs them in order. */
#ifndef GR_CU_NORM_H
#define GR_CU_NORM_H

#include <cuda_runtime_api.h>
#include <stdint.h>

#include "../body_norm.h"

#ifdef __cplusplus
extern "C" {
#endif

/* y [rows][c] = (x - mean) * rstd * w (+ b; NULL: none), saved [rows][2] =
 * {mean, rstd} per row, rstd = 1 / sqrt(biased var + eps). */
void gr_cu_layernorm(cudaStream_t s, const float *x, const float *w, const float *b, float *y, float *saved,
                     int64_t rows, int64_t c, double eps);
/* dx [rows][c] (overwritten; NULL: not wanted) from dy, x, w and the
 * forward's saved; dw += sum over rows of dy * xhat, db += sum of dy (NULL: no bias). */
void gr_cu_layernorm_bwd(cudaStream_t s, const float *dy, const float *x, const float *w, const float *saved,
                         float *dw, float *db, float *dx, int64_t rows, int64_t c);

#ifdef __cplusplus
}
#endif

#endif
