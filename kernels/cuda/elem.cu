// elem.cu — the elementwise kernels: activations and their backward,
// dropout, add, concat (axis 1) and softmax cross-entropy. The math is
// body_elem.h; these kernels only map threads to its indices.
//
// The big streaming ops (activations, add) move four floats per thread
// with 16-byte loads when every pointer allows it; a thread of the first
// block also takes one of the last n % 4 elements.
#include <stdint.h>

#include "../body_elem.h"
#include "cu_check.h"
#include "cu_elem.h"

// Grid cap of the grid-stride kernels (dropout): enough blocks to fill
// every SM several times, and each thread derives its key once.
#define GR_ELEM_GRID_MAX 4096

static bool gr_aligned16(const void *p) { return ((uintptr_t)p & 15u) == 0; }

// blocks for n elements, four per thread when vec (the tail rides in block 0)
static unsigned gr_elem_blocks(int64_t n, bool vec) {
    int64_t t = vec ? n >> 2 : n;
    return GR_CU_BLOCKS(t > 0 ? t : 1);
}

// ---- activations ----

// E: the storage type (body_half.h). fp32 arrays move four floats per
// thread (V); half arrays one element per thread.
template <int A, bool V, int E>
__global__ void gr_act_kernel(const void *x, void *y, int64_t n) {
    int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (!V) {
        if (t < n) gr_body_act(A, E, x, y, t);
        return;
    }
    int64_t n4 = n >> 2;
    if (t < n4) {
        float4 v = reinterpret_cast<const float4 *>(x)[t];
        v.x = gr_act_hd(A, v.x);
        v.y = gr_act_hd(A, v.y);
        v.z = gr_act_hd(A, v.z);
        v.w = gr_act_hd(A, v.w);
        reinterpret_cast<float4 *>(y)[t] = v;
    }
    if (t < (n & 3)) gr_body_act(A, GR_BODY_F32, x, y, (n4 << 2) + t);
}

template <int A, bool V, int E>
__global__ void gr_act_bwd_kernel(const void *dy, const void *s, void *dx, int64_t n) {
    int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (!V) {
        if (t < n) gr_body_act_bwd(A, E, dy, s, dx, t);
        return;
    }
    int64_t n4 = n >> 2;
    if (t < n4) {
        float4 g = reinterpret_cast<const float4 *>(dy)[t];
        float4 v = reinterpret_cast<const float4 *>(s)[t];
        g.x = gr_act_bwd_hd(A, g.x, v.x);
        g.y = gr_act_bwd_hd(A, g.y, v.y);
        g.z = gr_act_bwd_hd(A, g.z, v.z);
        g.w = gr_act_bwd_hd(A, g.w, v.w);
        reinterpret_cast<float4 *>(dx)[t] = g;
    }
    if (t < (n & 3)) gr_body_act_bwd(A, GR_BODY_F32, dy, s, dx, (n4 << 2) + t);
}

template <int A>
static void gr_act_launch(cudaStream_t s, int e, const void *x, void *y, int64_t n) {
    const unsigned b1 = gr_elem_blocks(n, false);
    if (e == GR_BODY_BF16) gr_act_kernel<A, false, GR_BODY_BF16><<<b1, GR_CU_THREADS, 0, s>>>(x, y, n);
    else if (e == GR_BODY_F16) gr_act_kernel<A, false, GR_BODY_F16><<<b1, GR_CU_THREADS, 0, s>>>(x, y, n);
    else if (gr_aligned16(x) && gr_aligned16(y))
        gr_act_kernel<A, true, GR_BODY_F32><<<gr_elem_blocks(n, true), GR_CU_THREADS, 0, s>>>(x, y, n);
    else gr_act_kernel<A, false, GR_BODY_F32><<<b1, GR_CU_THREADS, 0, s>>>(x, y, n);
    GR_CU_LAUNCHED();
}

template <int A>
static void gr_act_bwd_launch(cudaStream_t s, int e, const void *dy, const void *t, void *dx, int64_t n) {
    const unsigned b1 = gr_elem_blocks(n, false);
    if (e == GR_BODY_BF16) gr_act_bwd_kernel<A, false, GR_BODY_BF16><<<b1, GR_CU_THREADS, 0, s>>>(dy, t, dx, n);
    else if (e == GR_BODY_F16) gr_act_bwd_kernel<A, false, GR_BODY_F16><<<b1, GR_CU_THREADS, 0, s>>>(dy, t, dx, n);
    else if (gr_aligned16(dy) && gr_aligned16(t) && gr_aligned16(dx))
        gr_act_bwd_kernel<A, true, GR_BODY_F32><<<gr_elem_blocks(n, true), GR_CU_THREADS, 0, s>>>(dy, t, dx, n);
    else gr_act_bwd_kernel<A, false, GR_BODY_F32><<<b1, GR_CU_THREADS, 0, s>>>(dy, t, dx, n);
    GR_CU_LAUNCHED();
}

// The launches of activation A, instantiated for the GR_OPF_ACT rows of
// ops.def only (the switches below list every row).
template <int A, bool IS_ACT>
struct gr_act_row {
    static void fwd(cudaStream_t, int, const void *, void *, int64_t) {}
    static void bwd(cudaStream_t, int, const void *, const void *, void *, int64_t) {}
};
template <int A>
struct gr_act_row<A, true> {
    static void fwd(cudaStream_t s, int e, const void *x, void *y, int64_t n) { gr_act_launch<A>(s, e, x, y, n); }
    static void bwd(cudaStream_t s, int e, const void *dy, const void *t, void *dx, int64_t n) {
        gr_act_bwd_launch<A>(s, e, dy, t, dx, n);
    }
};
#define GR_IS_ACT(flags) (((flags) & GR_OPF_ACT) != 0)

extern "C" void gr_cu_act(cudaStream_t s, int act, int e, const void *x, void *y, int64_t n) {
    if (n <= 0) return;
    switch (act) {
#define X(E, name, flags, ...) \
    case GR_OP_##E: gr_act_row<GR_OP_##E, GR_IS_ACT(flags)>::fwd(s, e, x, y, n); break;
#include "../../graph/ops.def"
#undef X
    }
}

extern "C" void gr_cu_act_bwd(cudaStream_t s, int act, int e, const void *dy, const void *t, void *dx,
                              int64_t n) {
    if (n <= 0) return;
    switch (act) {
#define X(E, name, flags, ...) \
    case GR_OP_##E: gr_act_row<GR_OP_##E, GR_IS_ACT(flags)>::bwd(s, e, dy, t, dx, n); break;
#include "../../graph/ops.def"
#undef X
    }
}

// ---- dropout ----

__global__ void gr_dropout_kernel(const gr_dev_ctx *ctx, int layer, float rate, float scale, const float *x,
                                  float *y, uint8_t *m, int64_t n) {
    uint64_t key = gr_dropout_key_hd(ctx->rng_key, layer);
    int64_t T = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += T)
        gr_body_dropout(key, rate, scale, x, y, m, i);
}

__global__ void gr_dropout_bwd_kernel(float scale, const float *dy, const uint8_t *m, float *dx, int64_t n) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) gr_body_dropout_bwd(scale, dy, m, dx, i);
}

extern "C" void gr_cu_dropout(cudaStream_t s, const gr_dev_ctx *ctx, int layer, float rate, float scale,
                              const float *x, float *y, uint8_t *m, int64_t n) {
    if (n <= 0) return;
    unsigned blocks = GR_CU_BLOCKS(n);
    if (blocks > GR_ELEM_GRID_MAX) blocks = GR_ELEM_GRID_MAX;
    gr_dropout_kernel<<<blocks, GR_CU_THREADS, 0, s>>>(ctx, layer, rate, scale, x, y, m, n);
    GR_CU_LAUNCHED();
}

extern "C" void gr_cu_dropout_bwd(cudaStream_t s, float scale, const float *dy, const uint8_t *m, float *dx,
                                  int64_t n) {
    if (n <= 0) return;
    gr_dropout_bwd_kernel<<<GR_CU_BLOCKS(n), GR_CU_THREADS, 0, s>>>(scale, dy, m, dx, n);
    GR_CU_LAUNCHED();
}

// ---- add ----

// __grid_constant__: the body takes the struct's address without a local
// copy. V: four fp32 elements per thread (in.e is fp32 then).
template <bool V>
__global__ void gr_add_kernel(const __grid_constant__ gr_add_in in, void *y, int64_t n) {
    int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (!V) {
        if (t < n) gr_body_add(&in, y, t);
        return;
    }
    int64_t n4 = n >> 2;
    if (t < n4) {
        float4 v = reinterpret_cast<const float4 *>(in.x[0])[t];
        for (int k = 1; k < in.nin; k++) {
            float4 u = reinterpret_cast<const float4 *>(in.x[k])[t];
            v.x += u.x;
            v.y += u.y;
            v.z += u.z;
            v.w += u.w;
        }
        reinterpret_cast<float4 *>(y)[t] = v;
    }
    if (t < (n & 3)) gr_body_add(&in, y, (n4 << 2) + t);
}

extern "C" void gr_cu_add(cudaStream_t s, const gr_add_in *in, void *y, int64_t n) {
    if (n <= 0) return;
    bool vec = in->e == GR_BODY_F32 && gr_aligned16(y);
    for (int k = 0; k < in->nin; k++) vec = vec && gr_aligned16(in->x[k]);
    if (vec)
        gr_add_kernel<true><<<gr_elem_blocks(n, true), GR_CU_THREADS, 0, s>>>(*in, y, n);
    else
        gr_add_kernel<false><<<gr_elem_blocks(n, false), GR_CU_THREADS, 0, s>>>(*in, y, n);
    GR_CU_LAUNCHED();
}

// ---- concat: blockIdx.y walks the samples, so a thread divides nothing ----

#define GR_ELEM_GRID_Y 65535

__global__ void gr_concat_kernel(const __grid_constant__ gr_concat_in in, float *y, int64_t n) {
    int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= in.out_row) return;
    for (int64_t s = blockIdx.y; s < n; s += gridDim.y) gr_body_concat(&in, y, s, c);
}

__global__ void gr_concat_bwd_kernel(const float *dy, float *dx, int64_t n, int64_t in_row, int64_t row,
                                     int64_t off) {
    int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= row) return;
    for (int64_t s = blockIdx.y; s < n; s += gridDim.y) gr_body_concat_bwd(dy, dx, in_row, row, off, s, c);
}

static dim3 gr_rows_grid(int64_t n, int64_t row) {
    return dim3(GR_CU_BLOCKS(row), (unsigned)(n < GR_ELEM_GRID_Y ? n : GR_ELEM_GRID_Y));
}

extern "C" void gr_cu_concat(cudaStream_t s, const gr_concat_in *in, float *y, int64_t n) {
    if (n <= 0 || in->out_row <= 0) return;
    gr_concat_kernel<<<gr_rows_grid(n, in->out_row), GR_CU_THREADS, 0, s>>>(*in, y, n);
    GR_CU_LAUNCHED();
}

extern "C" void gr_cu_concat_bwd(cudaStream_t s, const float *dy, float *dx, int64_t n, int64_t in_row,
                                 int64_t row, int64_t off) {
    if (n <= 0 || row <= 0) return;
    gr_concat_bwd_kernel<<<gr_rows_grid(n, row), GR_CU_THREADS, 0, s>>>(dy, dx, n, in_row, row, off);
    GR_CU_LAUNCHED();
}

// ---- softmax cross-entropy ----

#define GR_FULL_MASK 0xffffffffu

// One warp per row (rows beyond the grid's warps are strided). The lanes'
// max/argmax and sums meet in xor butterflies, whose pairwise merges are
// symmetric, so all lanes agree bit for bit. Each warp sums its rows'
// losses in row order, each block its warps' in warp order; part[2b] and
// part[2b+1] get block b's loss and count of rows not ignored, and
// gr_sce_stats_kernel adds the blocks in order: the same stats every run.
// kc: the classes of a row of k (the rest, padding, get probability 0)
__global__ void gr_sce_rows_kernel(const float *z, const int32_t *label, float *p, int64_t n, int64_t k,
                                   int64_t kc, double eps, int64_t ignore, double *part) {
    __shared__ double wloss[GR_SCE_WARPS], wcount[GR_SCE_WARPS];
    const int lane = threadIdx.x % GR_SCE_LANES, warp = threadIdx.x / GR_SCE_LANES;
    const int64_t W = (int64_t)gridDim.x * GR_SCE_WARPS;
    double loss = 0.0, count = 0.0;
    for (int64_t r = (int64_t)blockIdx.x * GR_SCE_WARPS + warp; r < n; r += W) {
        const float *zr = z + r * k;
        float *pr = p + r * k;
        float m;
        int64_t arg;
        gr_body_sce_max_part(zr, kc, lane, GR_SCE_LANES, &m, &arg);
        for (int o = GR_SCE_LANES / 2; o > 0; o >>= 1) {
            float m2 = __shfl_xor_sync(GR_FULL_MASK, m, o);
            long long a2 = __shfl_xor_sync(GR_FULL_MASK, (long long)arg, o);
            gr_sce_max_combine(&m, &arg, m2, (int64_t)a2);
        }
        double sum, zsum;
        gr_body_sce_exp_part(zr, pr, kc, m, lane, GR_SCE_LANES, &sum, &zsum);
        for (int o = GR_SCE_LANES / 2; o > 0; o >>= 1) {
            sum += __shfl_xor_sync(GR_FULL_MASK, sum, o);
            zsum += __shfl_xor_sync(GR_FULL_MASK, zsum, o);
        }
        const int32_t y = label[r];
        if (!gr_loss_ignored(y, ignore)) {
            loss += gr_sce_row_loss(sum, zsum, zr[y] - m, kc, eps);
            count += 1.0;
        }
        gr_body_sce_scale_part(pr, kc, gr_sce_inv(sum), lane, GR_SCE_LANES);
        for (int64_t j = kc + lane; j < k; j += GR_SCE_LANES) pr[j] = 0.0f;
    }
    if (lane == 0) {
        wloss[warp] = loss;
        wcount[warp] = count;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        double l = 0.0, c = 0.0;
        for (int w = 0; w < GR_SCE_WARPS; w++) {
            l += wloss[w];
            c += wcount[w];
        }
        part[2 * blockIdx.x] = l;
        part[2 * blockIdx.x + 1] = c;
    }
}

__global__ void gr_sce_stats_kernel(const double *part, int64_t blocks, float *stats) {
    gr_body_sce_stats(part, blocks, stats);
}

// samples: the micro-batch's n, against which stats[1] (the forward's count) scales the gradient
__global__ void gr_sce_bwd_kernel(const gr_dev_ctx *ctx, const float *p, const int32_t *label, const float *stats,
                                  float *dz, int64_t nk, int64_t k, int64_t kc, int64_t samples, float off, float on,
                                  int64_t ignore) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < nk)
        gr_body_sce_bwd(p, label, dz, k, kc, off, on, gr_sce_token_scale(ctx->grad_scale, samples, stats[1]), ignore,
                        i);
}

extern "C" void gr_cu_sce(cudaStream_t s, const float *z, const int32_t *label, float *p, float *stats,
                          int64_t n, int64_t k, int64_t kc, double eps, int64_t ignore, double *part) {
    int64_t blocks = gr_sce_blocks(n);
    gr_sce_rows_kernel<<<(unsigned)blocks, GR_SCE_WARPS * GR_SCE_LANES, 0, s>>>(z, label, p, n, k, kc, eps, ignore,
                                                                                part);
    GR_CU_LAUNCHED();
    gr_sce_stats_kernel<<<1, 1, 0, s>>>(part, blocks, stats);
    GR_CU_LAUNCHED();
}

extern "C" void gr_cu_sce_bwd(cudaStream_t s, const gr_dev_ctx *ctx, const float *p, const int32_t *label,
                              const float *stats, float *dz, int64_t n, int64_t k, int64_t kc, int64_t samples,
                              float eps, int64_t ignore) {
    int64_t nk = n * k;
    if (nk <= 0) return;
    float off, on;
    gr_sce_targets(eps, kc, &off, &on);
    gr_sce_bwd_kernel<<<GR_CU_BLOCKS(nk), GR_CU_THREADS, 0, s>>>(ctx, p, label, stats, dz, nk, k, kc, samples, off,
                                                                 on, ignore);
    GR_CU_LAUNCHED();
}
