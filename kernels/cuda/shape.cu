// shape.cu — the shape and broadcasting kernels: broadcast add and mul,
// the gradient reductions over broadcast axes (add_bwd_reduce, mul_bwd),
// permute and the slice backward. The math is body_shape.h; these kernels
// only map threads to its indices (grid-stride loops over a capped grid).
#include <stdint.h>

#include "../body_shape.h"
#include "cu_check.h"
#include "cu_shape.h"

#define GR_SHAPE_GRID_MAX 8192
#define GR_SHAPE_GRID_Y 65535

static unsigned gr_shape_blocks(int64_t n) {
    unsigned b = GR_CU_BLOCKS(n > 0 ? n : 1);
    return b < GR_SHAPE_GRID_MAX ? b : GR_SHAPE_GRID_MAX;
}

// __grid_constant__: the body reads the struct in place (its storage type
// too: one value for the whole launch, so every thread takes one branch)
__global__ void gr_bcast_kernel(const __grid_constant__ gr_bcast_in in, void *y, int64_t n) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        gr_body_bcast(&in, y, i);
}

extern "C" void gr_cu_bcast(cudaStream_t s, const gr_bcast_in *in, void *y, int64_t n) {
    if (n <= 0) return;
    gr_bcast_kernel<<<gr_shape_blocks(n), GR_CU_THREADS, 0, s>>>(*in, y, n);
    GR_CU_LAUNCHED();
}

__global__ void gr_reduce_kernel(const __grid_constant__ gr_reduce_in in, float *dx, int64_t m) {
    for (int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; j < m; j += (int64_t)gridDim.x * blockDim.x)
        gr_body_reduce(&in, dx, j);
}

extern "C" void gr_cu_reduce(cudaStream_t s, const gr_reduce_in *in, float *dx, int64_t m) {
    if (m <= 0) return;
    gr_reduce_kernel<<<gr_shape_blocks(m), GR_CU_THREADS, 0, s>>>(*in, dx, m);
    GR_CU_LAUNCHED();
}

__global__ void gr_permute_kernel(const __grid_constant__ gr_permute_in in, const float *x, float *y, int64_t n) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        gr_body_permute(&in, x, y, i);
}

extern "C" void gr_cu_permute(cudaStream_t s, const gr_permute_in *in, const float *x, float *y, int64_t n) {
    if (n <= 0) return;
    gr_permute_kernel<<<gr_shape_blocks(n), GR_CU_THREADS, 0, s>>>(*in, x, y, n);
    GR_CU_LAUNCHED();
}

// blockIdx.y walks the rows, as the concat kernels do
__global__ void gr_slice_bwd_kernel(const float *dy, float *dx, int64_t outer, int64_t out_row, int64_t row,
                                    int64_t off) {
    int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= out_row) return;
    for (int64_t r = blockIdx.y; r < outer; r += gridDim.y) gr_body_slice_bwd(dy, dx, out_row, row, off, r, c);
}

extern "C" void gr_cu_slice_bwd(cudaStream_t s, const float *dy, float *dx, int64_t outer, int64_t out_row,
                                int64_t row, int64_t off) {
    if (outer <= 0 || out_row <= 0) return;
    dim3 grid(GR_CU_BLOCKS(out_row), (unsigned)(outer < GR_SHAPE_GRID_Y ? outer : GR_SHAPE_GRID_Y));
    gr_slice_bwd_kernel<<<grid, GR_CU_THREADS, 0, s>>>(dy, dx, outer, out_row, row, off);
    GR_CU_LAUNCHED();
}
