// optim.cu — the optimizer kernels: SGD and AdamW over the flat parameter
// arena in one launch each, and the gradient sum of squares for clipping.
// The per-element math is body_optim.h.
#include "../body_optim.h"
#include "cu_check.h"
#include "cu_optim.h"

__global__ void gr_sgd_kernel(gr_optim_k k, float *w, const float *g, float *buf, int64_t n) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) gr_body_sgd(&k, w, g, buf, i);
}

__global__ void gr_adamw_kernel(gr_optim_k k, float *w, const float *g, float *m, float *v, int64_t n) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) gr_body_adamw(&k, w, g, m, v, i);
}

#define GR_SUMSQ_BLOCKS GR_SUMSQ_SCRATCH

// One block of partials per launch: thread t of the whole grid sums its
// stride, then each block reduces in shared memory and the last stage (a
// second one-block launch) sums the block results in a fixed order.
__global__ void gr_sumsq_kernel(const float *g, int64_t n, double *part) {
    __shared__ double sh[GR_CU_THREADS];
    int64_t T = (int64_t)gridDim.x * blockDim.x;
    int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    sh[threadIdx.x] = gr_body_sumsq_part(g, n, t, T);
    __syncthreads();
    for (unsigned k = blockDim.x / 2; k > 0; k >>= 1) {
        if (threadIdx.x < k) sh[threadIdx.x] += sh[threadIdx.x + k];
        __syncthreads();
    }
    if (threadIdx.x == 0) part[blockIdx.x] = sh[0];
}

__global__ void gr_sum_doubles_kernel(double *part, int n) {
    if (threadIdx.x == 0 && blockIdx.x == 0) {
        double s = 0.0;
        for (int i = 0; i < n; i++) s += part[i];
        part[0] = s;
    }
}

extern "C" void gr_cu_sgd(cudaStream_t s, float *w, const float *g, float *buf, int64_t n,
                          const gr_sgd_hparams *h) {
    if (n <= 0) return;
    gr_optim_k k = gr_optim_sgd_k(h);
    gr_sgd_kernel<<<GR_CU_BLOCKS(n), GR_CU_THREADS, 0, s>>>(k, w, g, h->momentum != 0.0f ? buf : NULL, n);
    GR_CU_LAUNCHED();
}

extern "C" void gr_cu_adamw(cudaStream_t s, float *w, const float *g, float *m, float *v, int64_t n,
                            const gr_adamw_hparams *h) {
    if (n <= 0) return;
    gr_optim_k k = gr_optim_adamw_k(h);
    gr_adamw_kernel<<<GR_CU_BLOCKS(n), GR_CU_THREADS, 0, s>>>(k, w, g, m, v, n);
    GR_CU_LAUNCHED();
}

// out holds GR_SUMSQ_SCRATCH doubles; the sum lands in out[0].
extern "C" void gr_cu_sumsq(cudaStream_t s, const float *g, int64_t n, double *out) {
    gr_sumsq_kernel<<<GR_SUMSQ_BLOCKS, GR_CU_THREADS, 0, s>>>(g, n, out);
    GR_CU_LAUNCHED();
    gr_sum_doubles_kernel<<<1, 1, 0, s>>>(out, GR_SUMSQ_BLOCKS);
    GR_CU_LAUNCHED();
}
