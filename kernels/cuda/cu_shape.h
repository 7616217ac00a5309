/* cu_shape.h — launchers of the shape and broadcasting kernels (shape.cu),
 * each on the given stream, with the semantics of the CPU kernels in
 * kernels/cpu/{join,shape}.c; the math is kernels/body_shape.h. Nothing
 * here synchronizes or allocates, so every launcher may run inside CUDA
 * Graph capture. The slice forward is gr_cu_concat_bwd's row cut (cu_elem.h). */
#ifndef GR_CU_SHAPE_H
#define GR_CU_SHAPE_H

#include <cuda_runtime_api.h>
#include <stdint.h>

#include "../body_shape.h"

#ifdef __cplusplus
extern "C" {
#endif

/* y = the broadcast sum or product of in->x: n output elements, stored as in->e */
void gr_cu_bcast(cudaStream_t s, const gr_bcast_in *in, void *y, int64_t n);
/* dx[0..m) = in->dy (* in->other) summed over the reduced axes */
void gr_cu_reduce(cudaStream_t s, const gr_reduce_in *in, float *dx, int64_t m);
/* y[0..n) = x permuted as in says */
void gr_cu_permute(cudaStream_t s, const gr_permute_in *in, const float *x, float *y, int64_t n);
/* outer rows of out_row floats of dx: dy's rows of row floats at column off, 0 elsewhere */
void gr_cu_slice_bwd(cudaStream_t s, const float *dy, float *dx, int64_t outer, int64_t out_row, int64_t row,
                     int64_t off);

#ifdef __cplusplus
}
#endif

#endif
