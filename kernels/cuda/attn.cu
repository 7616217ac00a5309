// attn.cu — attention's kernels: one thread per (sample, head, row) runs a
// body of kernels/body_attn.h. The key-side backward launch follows the
// query side's on the stream, so every delta it reads is written.
#include <stdint.h>

#include "cu_attn.h"
#include "cu_check.h"

__global__ void gr_attn_fwd_kernel(const gr_attn_geo g, int64_t rows, const float *qkv, float *y, float *lse) {
    for (int64_t r = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; r < rows; r += (int64_t)gridDim.x * blockDim.x) {
        const int64_t i = r % g.t, bh = r / g.t;
        gr_body_attn_row(qkv, y, lse, &g, bh / g.heads, bh % g.heads, i);
    }
}

__global__ void gr_attn_bwd_q_kernel(const gr_attn_geo g, int64_t rows, const float *dy, const float *qkv,
                                     const float *y, const float *lse, float *delta, float *dqkv) {
    for (int64_t r = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; r < rows; r += (int64_t)gridDim.x * blockDim.x) {
        const int64_t i = r % g.t, bh = r / g.t;
        gr_body_attn_bwd_q(dy, qkv, y, lse, delta, dqkv, &g, bh / g.heads, bh % g.heads, i);
    }
}

__global__ void gr_attn_bwd_kv_kernel(const gr_attn_geo g, int64_t rows, const float *dy, const float *qkv,
                                      const float *lse, const float *delta, float *dqkv) {
    for (int64_t r = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; r < rows; r += (int64_t)gridDim.x * blockDim.x) {
        const int64_t j = r % g.t, bh = r / g.t;
        gr_body_attn_bwd_kv(dy, qkv, lse, delta, dqkv, &g, bh / g.heads, bh % g.heads, j);
    }
}

__global__ void gr_attn_decode_kernel(const gr_attn_geo g, int64_t tasks, int64_t tmax, const gr_dev_ctx *ctx,
                                      const float *qkv, float *cache, float *y, float *lse) {
    const int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (k < tasks) gr_body_attn_decode(qkv, cache, y, lse, &g, tmax, ctx->pos, k / g.heads, k % g.heads);
}

// rows of one launch: a thread each, in blocks of 64 (a row's registers
// and local arrays are large)
#define GR_ATTN_THREADS 64
static unsigned gr_attn_blocks(int64_t rows) {
    const int64_t b = (rows + GR_ATTN_THREADS - 1) / GR_ATTN_THREADS;
    return (unsigned)(b > 65535 ? 65535 : b);
}

extern "C" void gr_cu_attention(cudaStream_t s, const gr_attn_geo *g, int64_t n, const float *qkv, float *y,
                                float *lse) {
    const int64_t rows = n * g->heads * g->t;
    if (rows <= 0) return;
    gr_attn_fwd_kernel<<<gr_attn_blocks(rows), GR_ATTN_THREADS, 0, s>>>(*g, rows, qkv, y, lse);
    GR_CU_LAUNCHED();
}

extern "C" void gr_cu_attention_decode(cudaStream_t s, const gr_attn_geo *g, int64_t n, int64_t tmax,
                                       const gr_dev_ctx *ctx, const float *qkv, float *cache, float *y, float *lse) {
    const int64_t tasks = n * g->heads;
    if (tasks <= 0) return;
    gr_attn_decode_kernel<<<gr_attn_blocks(tasks), GR_ATTN_THREADS, 0, s>>>(*g, tasks, tmax, ctx, qkv, cache, y, lse);
    GR_CU_LAUNCHED();
}

extern "C" void gr_cu_attention_bwd(cudaStream_t s, const gr_attn_geo *g, int64_t n, const float *dy,
                                    const float *qkv, const float *y, const float *lse, float *dqkv, float *delta) {
    const int64_t rows = n * g->heads * g->t;
    if (rows <= 0) return;
    gr_attn_bwd_q_kernel<<<gr_attn_blocks(rows), GR_ATTN_THREADS, 0, s>>>(*g, rows, dy, qkv, y, lse, delta, dqkv);
    GR_CU_LAUNCHED();
    gr_attn_bwd_kv_kernel<<<gr_attn_blocks(rows), GR_ATTN_THREADS, 0, s>>>(*g, rows, dy, qkv, lse, delta, dqkv);
    GR_CU_LAUNCHED();
}
