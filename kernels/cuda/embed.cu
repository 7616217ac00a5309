// embed.cu — the embedding family's kernels: the token gather and its
// scatter-add backward, the positional broadcast add and its sum over the
// batch. The math is body_embed.h; these kernels only map threads to its
// indices. The two weight gradients use no atomics: each element of dw is
// owned by one thread, which adds its terms in a fixed order (so the sums
// are the CPU's, bit for bit).
#include <stdint.h>

#include "../body_embed.h"
#include "cu_check.h"
#include "cu_embed.h"

#define GR_EMBED_GRID_MAX 8192
// embedding_bwd: the vocabulary's rows split into at most this many parts
// (grid.y), each (part, column) one thread walking every token
#define GR_EMBED_PARTS_MAX 64

static unsigned gr_embed_blocks(int64_t n) {
    unsigned b = GR_CU_BLOCKS(n > 0 ? n : 1);
    return b < GR_EMBED_GRID_MAX ? b : GR_EMBED_GRID_MAX;
}

__global__ void gr_embedding_kernel(const int32_t *ids, const float *w, float *y, int64_t vocab, int64_t dim,
                                    int64_t n) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        gr_body_embedding(ids, w, y, vocab, dim, i);
}

extern "C" void gr_cu_embedding(cudaStream_t s, const int32_t *ids, const float *w, float *y, int64_t ntok,
                                int64_t vocab, int64_t dim) {
    const int64_t n = ntok * dim;
    if (n <= 0) return;
    gr_embedding_kernel<<<gr_embed_blocks(n), GR_CU_THREADS, 0, s>>>(ids, w, y, vocab, dim, n);
    GR_CU_LAUNCHED();
}

// x: the column j; y: the part of the vocabulary's rows (id % parts)
__global__ void gr_embedding_bwd_kernel(const int32_t *ids, const float *dy, float *dw, int64_t ntok, int64_t vocab,
                                        int64_t dim, int64_t parts) {
    const int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (j < dim) gr_body_embedding_bwd(ids, dy, dw, ntok, vocab, dim, parts, blockIdx.y, j);
}

extern "C" void gr_cu_embedding_bwd(cudaStream_t s, const int32_t *ids, const float *dy, float *dw, int64_t ntok,
                                    int64_t vocab, int64_t dim) {
    if (ntok <= 0 || dim <= 0) return;
    const int64_t parts = vocab < GR_EMBED_PARTS_MAX ? vocab : GR_EMBED_PARTS_MAX;
    dim3 grid(GR_CU_BLOCKS(dim), (unsigned)parts);
    gr_embedding_bwd_kernel<<<grid, GR_CU_THREADS, 0, s>>>(ids, dy, dw, ntok, vocab, dim, parts);
    GR_CU_LAUNCHED();
}

// decode: a decoding graph's one position, at row ctx->pos of the weight (read on the device)
__global__ void gr_pos_embedding_kernel(const float *x, const float *w, float *y, int64_t tc, int64_t n,
                                        const gr_dev_ctx *decode) {
    if (decode) w += decode->pos * tc;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        gr_body_pos_embedding(x, w, y, tc, i);
}

extern "C" void gr_cu_pos_embedding(cudaStream_t s, const float *x, const float *w, float *y, int64_t n,
                                    int64_t tc, const gr_dev_ctx *decode) {
    if (n <= 0 || tc <= 0) return;
    gr_pos_embedding_kernel<<<gr_embed_blocks(n * tc), GR_CU_THREADS, 0, s>>>(x, w, y, tc, n * tc, decode);
    GR_CU_LAUNCHED();
}

// one thread per weight element k, the samples in order (reads coalesce across k)
__global__ void gr_pos_embedding_bwd_kernel(const float *dy, float *dw, int64_t n, int64_t tc) {
    for (int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; k < tc; k += (int64_t)gridDim.x * blockDim.x)
        gr_body_pos_embedding_bwd(dy, dw, n, tc, k);
}

extern "C" void gr_cu_pos_embedding_bwd(cudaStream_t s, const float *dy, float *dw, int64_t n, int64_t tc) {
    if (n <= 0 || tc <= 0) return;
    gr_pos_embedding_bwd_kernel<<<gr_embed_blocks(tc), GR_CU_THREADS, 0, s>>>(dy, dw, n, tc);
    GR_CU_LAUNCHED();
}
