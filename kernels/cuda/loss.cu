// loss.cu — the kernels of mse, bce with logits and the accuracy metric.
// The math is body_loss.h (and loss_math.h); these kernels only map
// threads to its units and run its fixed-order reduction.
#include <stdint.h>

#include "../body_elem.h"
#include "../body_loss.h"
#include "cu_check.h"
#include "cu_loss.h"

// Block b's [sum, count] into part[2b], part[2b+1]: each thread's units in
// order, then the shared-memory tree of body_loss.h.
template <int OP>
__global__ void gr_loss_sum_kernel(gr_loss_in in, int64_t units, double *part) {
    __shared__ double sum[GR_LOSS_THREADS], count[GR_LOSS_THREADS];
    const int t = threadIdx.x;
    const int64_t stride = (int64_t)gridDim.x * GR_LOSS_THREADS;
    double a = 0.0, c = 0.0;
    for (int64_t u = (int64_t)blockIdx.x * GR_LOSS_THREADS + t; u < units; u += stride)
        gr_body_loss_unit(OP, &in, u, &a, &c);
    sum[t] = a;
    count[t] = c;
    __syncthreads();
    for (int s = GR_LOSS_THREADS / 2; s > 0; s >>= 1) {
        if (t < s) gr_loss_tree_pairs(sum, count, t, s);
        __syncthreads();
    }
    if (t == 0) {
        part[2 * blockIdx.x] = sum[0];
        part[2 * blockIdx.x + 1] = count[0];
    }
}

__global__ void gr_loss_stats_kernel(const double *part, int64_t blocks, float *stats) {
    gr_body_sce_stats(part, blocks, stats);
}

template <int OP>
__global__ void gr_loss_bwd_kernel(const gr_dev_ctx *ctx, const float *x, const float *t, float *dx, int64_t n,
                                   int64_t per) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) gr_body_loss_bwd(OP, x, t, dx, gr_loss_elem_scale(ctx->grad_scale, per), i);
}

extern "C" void gr_cu_loss_sum(cudaStream_t s, int op, const gr_loss_in *in, int64_t units, float *stats,
                               double *part) {
    const int64_t blocks = gr_loss_blocks(units);
    const unsigned g = (unsigned)blocks;
    if (op == GR_OP_MSE) gr_loss_sum_kernel<GR_OP_MSE><<<g, GR_LOSS_THREADS, 0, s>>>(*in, units, part);
    else if (op == GR_OP_BCE_WITH_LOGITS)
        gr_loss_sum_kernel<GR_OP_BCE_WITH_LOGITS><<<g, GR_LOSS_THREADS, 0, s>>>(*in, units, part);
    else gr_loss_sum_kernel<GR_OP_ACCURACY><<<g, GR_LOSS_THREADS, 0, s>>>(*in, units, part);
    GR_CU_LAUNCHED();
    gr_loss_stats_kernel<<<1, 1, 0, s>>>(part, blocks, stats);
    GR_CU_LAUNCHED();
}

extern "C" void gr_cu_loss_bwd(cudaStream_t s, int op, const gr_dev_ctx *ctx, const float *x, const float *t,
                               float *dx, int64_t n, int64_t per) {
    if (n <= 0) return;
    if (op == GR_OP_MSE) gr_loss_bwd_kernel<GR_OP_MSE><<<GR_CU_BLOCKS(n), GR_CU_THREADS, 0, s>>>(ctx, x, t, dx, n, per);
    else gr_loss_bwd_kernel<GR_OP_BCE_WITH_LOGITS><<<GR_CU_BLOCKS(n), GR_CU_THREADS, 0, s>>>(ctx, x, t, dx, n, per);
    GR_CU_LAUNCHED();
}
