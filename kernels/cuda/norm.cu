// norm.cu — the layernorm kernels: forward, the input gradient and the
// parameter gradients. The math is body_norm.h; this file maps threads to
// the bodies' indices. Kernels first, then the launchers (cu_norm.h).
//
// Rows: a warp per row (GR_LN_LANES lanes), its lanes' double partials
// added by a butterfly of shuffles (fixed, so every lane holds the same
// sums and a run gives the same bits every time). Parameter gradients: a
// column reduction in body_spatial.h's columns mode, a thread per (column,
// slice of rows), then the slices' partials added in order; no atomics.
#include <stdint.h>

#include "../body_norm.h"
#include "cu_check.h"
#include "cu_norm.h"

#define GR_FULL_MASK 0xffffffffu

static_assert(GR_CU_THREADS % GR_LN_LANES == 0, "a block holds whole warps (rows)");

// The column reduction's partials [c][slices][2] (c * slices <= GR_CHAN_PARTS_MAX).
__device__ double gr_ln_part[2 * GR_CHAN_PARTS_MAX];

// v summed over the warp's lanes, the same bits in every lane.
__device__ __forceinline__ double gr_ln_warp_sum(double v) {
    for (int off = GR_LN_LANES / 2; off > 0; off >>= 1) v += __shfl_xor_sync(GR_FULL_MASK, v, off);
    return v;
}

// ---- rows: a warp each ----

__global__ void gr_ln_fwd_kernel(const float *x, const float *w, const float *b, float *y, float *saved,
                                 int64_t rows, int64_t c, double eps) {
    int64_t row = ((int64_t)blockIdx.x * GR_CU_THREADS + threadIdx.x) / GR_LN_LANES;
    if (row >= rows) return; // the whole warp: row is the same for its lanes
    int64_t lane = threadIdx.x % GR_LN_LANES;
    float mean = gr_body_ln_mean(gr_ln_warp_sum(gr_body_ln_sum_part(x, row, c, lane, GR_LN_LANES)), c);
    float rstd = gr_body_ln_rstd(gr_ln_warp_sum(gr_body_ln_sqdev_part(x, row, c, mean, lane, GR_LN_LANES)), c, eps);
    if (lane == 0) {
        saved[2 * row] = mean;
        saved[2 * row + 1] = rstd;
    }
    gr_body_ln_y_part(x, w, b, y, row, c, mean, rstd, lane, GR_LN_LANES);
}

__global__ void gr_ln_dx_kernel(const float *dy, const float *x, const float *w, const float *saved, float *dx,
                                int64_t rows, int64_t c) {
    int64_t row = ((int64_t)blockIdx.x * GR_CU_THREADS + threadIdx.x) / GR_LN_LANES;
    if (row >= rows) return;
    int64_t lane = threadIdx.x % GR_LN_LANES;
    float mean = saved[2 * row], rstd = saved[2 * row + 1];
    double sg, sgx;
    gr_body_ln_dx_part(dy, x, w, row, c, mean, rstd, lane, GR_LN_LANES, &sg, &sgx);
    sg = gr_ln_warp_sum(sg);
    sgx = gr_ln_warp_sum(sgx);
    gr_body_ln_dx_apply(dy, x, w, dx, row, c, mean, rstd, sg, sgx, lane, GR_LN_LANES);
}

// ---- parameter gradients: columns ----

// Stage 1: blockIdx.x = slice, blockIdx.y * GR_CU_THREADS + threadIdx.x =
// column (adjacent threads read adjacent columns of a row). One slice
// finishes here, into dw and db.
__global__ void gr_ln_param_part_kernel(gr_chan_geo g, const float *dy, const float *x, const float *saved,
                                        float *dw, float *db) {
    int64_t ch = (int64_t)blockIdx.y * GR_CU_THREADS + threadIdx.x, s = blockIdx.x;
    if (ch >= g.c) return;
    int64_t e0, e1, step;
    gr_chan_span(&g, s, 0, &e0, &e1, &step);
    double sw, sb;
    gr_body_ln_param_part(dy, x, saved, g.c, ch, e0, e1, &sw, &sb);
    if (g.slices == 1) {
        gr_body_ln_param_finish(ch, sw, sb, dw, db);
        return;
    }
    double *p = gr_ln_part + 2 * (ch * g.slices + s);
    p[0] = sw;
    p[1] = sb;
}

// Stage 2: a thread per column adds its slices' partials in slice order.
__global__ void gr_ln_param_finish_kernel(gr_chan_geo g, float *dw, float *db) {
    int64_t ch = (int64_t)blockIdx.x * GR_CU_THREADS + threadIdx.x;
    if (ch >= g.c) return;
    const double *p = gr_ln_part + 2 * ch * g.slices;
    double sw = 0.0, sb = 0.0;
    for (int64_t s = 0; s < g.slices; s++) {
        sw += p[2 * s];
        sb += p[2 * s + 1];
    }
    gr_body_ln_param_finish(ch, sw, sb, dw, db);
}

// ---- launchers ----

extern "C" void gr_cu_layernorm(cudaStream_t s, const float *x, const float *w, const float *b, float *y,
                                float *saved, int64_t rows, int64_t c, double eps) {
    if (rows <= 0 || c <= 0) return;
    gr_ln_fwd_kernel<<<GR_CU_BLOCKS(rows * GR_LN_LANES), GR_CU_THREADS, 0, s>>>(x, w, b, y, saved, rows, c, eps);
    GR_CU_LAUNCHED();
}

extern "C" void gr_cu_layernorm_bwd(cudaStream_t s, const float *dy, const float *x, const float *w,
                                    const float *saved, float *dw, float *db, float *dx, int64_t rows, int64_t c) {
    if (rows <= 0 || c <= 0) return;
    if (dx) {
        gr_ln_dx_kernel<<<GR_CU_BLOCKS(rows * GR_LN_LANES), GR_CU_THREADS, 0, s>>>(dy, x, w, saved, dx, rows, c);
        GR_CU_LAUNCHED();
    }
    gr_chan_geo g = gr_chan_geo_make(rows, c, 1);
    int64_t col_blocks = (c + GR_CU_THREADS - 1) / GR_CU_THREADS;
    if (col_blocks > 65535) // gridDim.y
        gr_cuda_die(__FILE__, __LINE__, "gr_cu_layernorm_bwd", "layernorm has more than 16,776,960 columns");
    dim3 grid((unsigned)g.slices, (unsigned)col_blocks);
    gr_ln_param_part_kernel<<<grid, GR_CU_THREADS, 0, s>>>(g, dy, x, saved, dw, db);
    GR_CU_LAUNCHED();
    if (g.slices > 1) {
        gr_ln_param_finish_kernel<<<GR_CU_BLOCKS(c), GR_CU_THREADS, 0, s>>>(g, dw, db);
        GR_CU_LAUNCHED();
    }
}
