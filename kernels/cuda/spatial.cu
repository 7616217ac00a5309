// spatial.cu — the spatial kernels: max/avg pooling and their backward,
// global average pooling, batchnorm (training, eval, backward), and the
// per-channel bias add and bias gradient of dense and conv. The math is
// body_spatial.h; this file maps threads to the bodies' indices. Kernels
// first, then the launchers (cu_spatial.h).
//
// Every reduction has a fixed order (thread partials, a fixed tree in the
// block or warp, then the slices in order), so a run gives the same bits
// every time; there are no atomics.
#include <stdint.h>

#include "../body_spatial.h"
#include "cu_check.h"
#include "cu_spatial.h"

#define GR_WARP 32
#define GR_FULL_MASK 0xffffffffu

// The scratch of the per-channel reductions: partial sums [c][slices][2]
// and per-channel coefficients [c][4] of the elementwise passes. One copy
// per device serves every node, since one stream runs them in order.
__device__ double gr_sp_part[2 * GR_CHAN_PARTS_MAX];
__device__ float gr_sp_coef[4 * GR_CHAN_MAX];

// ---- pooling ----

// S: the stride of both axes when it is 1 or 2, so the compiler folds it
// into the bodies' divisions; 0 reads it from g.
template <int S>
__device__ __forceinline__ gr_pool_geo gr_pool_fixed(const gr_pool_geo &g) {
    gr_pool_geo f = g;
    if (S) {
        f.sh = S;
        f.sw = S;
    }
    return f;
}

// One thread per output (p, oh, ow); I: the index type (32 bits when the count allows).
template <typename I, int S>
__global__ void gr_maxpool_kernel(gr_pool_geo g, const float *x, float *y, int32_t *idx, I total) {
    I o = (I)blockIdx.x * GR_CU_THREADS + threadIdx.x;
    if (o >= total) return;
    gr_pool_geo f = gr_pool_fixed<S>(g);
    I wo = (I)g.wo, ho = (I)g.ho, t = o / wo;
    gr_body_maxpool(&f, x, y, idx, (int64_t)(t / ho), (int64_t)(t % ho), (int64_t)(o % wo));
}

template <typename I, int S>
__global__ void gr_avgpool_kernel(gr_pool_geo g, const float *x, float *y, I total) {
    I o = (I)blockIdx.x * GR_CU_THREADS + threadIdx.x;
    if (o >= total) return;
    gr_pool_geo f = gr_pool_fixed<S>(g);
    I wo = (I)g.wo, ho = (I)g.ho, t = o / wo;
    gr_body_avgpool(&f, x, y, (int64_t)(t / ho), (int64_t)(t % ho), (int64_t)(o % wo));
}

// One thread per input element (p, ih, iw): a gather over the covering outputs.
template <typename I, int S>
__global__ void gr_maxpool_bwd_kernel(gr_pool_geo g, const float *dy, const int32_t *idx, float *dx, I total) {
    I i = (I)blockIdx.x * GR_CU_THREADS + threadIdx.x;
    if (i >= total) return;
    gr_pool_geo f = gr_pool_fixed<S>(g);
    I w = (I)g.w, h = (I)g.h, t = i / w;
    gr_body_maxpool_bwd(&f, dy, idx, dx, (int64_t)(t / h), (int64_t)(t % h), (int64_t)(i % w));
}

template <typename I, int S>
__global__ void gr_avgpool_bwd_kernel(gr_pool_geo g, const float *dy, float *dx, I total) {
    I i = (I)blockIdx.x * GR_CU_THREADS + threadIdx.x;
    if (i >= total) return;
    gr_pool_geo f = gr_pool_fixed<S>(g);
    I w = (I)g.w, h = (I)g.h, t = i / w;
    gr_body_avgpool_bwd(&f, dy, dx, (int64_t)(t / h), (int64_t)(t % h), (int64_t)(i % w));
}

// One warp per plane: lane partials, then a fixed shuffle tree into lane 0.
__global__ void gr_gap_kernel(const float *x, float *y, int64_t planes, int64_t hw) {
    int64_t p = ((int64_t)blockIdx.x * GR_CU_THREADS + threadIdx.x) / GR_WARP;
    if (p >= planes) return; // the whole warp: p is the same for its lanes
    int lane = threadIdx.x % GR_WARP;
    float s = gr_body_gap_part(x, hw, p, lane, GR_WARP);
    for (int off = GR_WARP / 2; off > 0; off >>= 1) s += __shfl_down_sync(GR_FULL_MASK, s, off);
    if (lane == 0) gr_body_gap_finish(y, hw, p, s);
}

template <typename I>
__global__ void gr_gap_bwd_kernel(const float *dy, float *dx, I hw, I total) {
    I i = (I)blockIdx.x * GR_CU_THREADS + threadIdx.x;
    if (i < total) gr_body_gap_bwd(dy, dx, (int64_t)hw, (int64_t)(i / hw), (int64_t)(i % hw));
}

// ---- per-channel reductions, stage 1: partials per (channel, slice) ----

enum { GR_RED_STATS, GR_RED_GRAD, GR_RED_BIAS };

struct gr_red_in {
    gr_chan_geo g;
    const void *a, *b;   // STATS: x; GRAD: dy, x; BIAS: dy; stored as the kernel's E
    const float *saved;  // GRAD: the forward's {mean, invstd}
    float *db;           // BIAS with one slice: finished here, into db
};

template <int KIND, int E>
__device__ __forceinline__ void gr_red_part(const gr_red_in &r, int64_t ch, int64_t e0, int64_t e1, int64_t step,
                                            double *s1, double *s2) {
    if (KIND == GR_RED_STATS) {
        gr_body_bn_stats_part(&r.g, r.a, E, ch, e0, e1, step, s1, s2);
    } else if (KIND == GR_RED_GRAD) {
        gr_body_bn_grad_part(&r.g, r.a, r.b, E, r.saved[ch], ch, e0, e1, step, s1, s2);
    } else {
        *s1 = gr_body_bias_grad_part(&r.g, r.a, E, ch, e0, e1, step);
        *s2 = 0.0;
    }
}

template <int KIND>
__device__ __forceinline__ void gr_red_store(const gr_red_in &r, int64_t ch, int64_t s, double s1, double s2) {
    if (KIND == GR_RED_BIAS && r.db) {
        gr_body_bias_grad_finish(ch, s1, r.db);
        return;
    }
    double *p = gr_sp_part + 2 * (ch * r.g.slices + s);
    p[0] = s1;
    p[1] = s2;
}

// (a, b) summed over the block in a fixed tree (warps, then the warps'
// sums); thread 0 holds the totals. Every thread of the block must call it.
__device__ __forceinline__ void gr_block_sum2(double *a, double *b) {
    __shared__ double sh[2][GR_CHAN_THREADS / GR_WARP];
    double x = *a, y = *b;
    for (int off = GR_WARP / 2; off > 0; off >>= 1) {
        x += __shfl_down_sync(GR_FULL_MASK, x, off);
        y += __shfl_down_sync(GR_FULL_MASK, y, off);
    }
    int warp = threadIdx.x / GR_WARP, lane = threadIdx.x % GR_WARP;
    if (lane == 0) {
        sh[0][warp] = x;
        sh[1][warp] = y;
    }
    __syncthreads();
    if (warp == 0) {
        x = lane < GR_CHAN_THREADS / GR_WARP ? sh[0][lane] : 0.0;
        y = lane < GR_CHAN_THREADS / GR_WARP ? sh[1][lane] : 0.0;
        for (int off = GR_CHAN_THREADS / GR_WARP / 2; off > 0; off >>= 1) {
            x += __shfl_down_sync(GR_FULL_MASK, x, off);
            y += __shfl_down_sync(GR_FULL_MASK, y, off);
        }
    }
    *a = x;
    *b = y;
}

// Planes mode: block = (channel, slice), its threads striding over the slice.
template <int KIND, int E>
__global__ void __launch_bounds__(GR_CHAN_THREADS) gr_red_planes_kernel(gr_red_in r) {
    int64_t ch = blockIdx.x / r.g.slices, s = blockIdx.x % r.g.slices;
    int64_t e0, e1, step;
    gr_chan_span(&r.g, s, threadIdx.x, &e0, &e1, &step);
    double s1, s2;
    gr_red_part<KIND, E>(r, ch, e0, e1, step, &s1, &s2);
    gr_block_sum2(&s1, &s2);
    if (threadIdx.x == 0) gr_red_store<KIND>(r, ch, s, s1, s2);
}

// Columns mode ([n, c]): thread = channel, blockIdx.y = slice of rows (channels on x: gridDim.y stops at 65535).
template <int KIND, int E>
__global__ void __launch_bounds__(GR_CHAN_THREADS) gr_red_cols_kernel(gr_red_in r) {
    int64_t ch = (int64_t)blockIdx.x * GR_CHAN_THREADS + threadIdx.x, s = blockIdx.y;
    if (ch >= r.g.c) return;
    int64_t e0, e1, step;
    gr_chan_span(&r.g, s, 0, &e0, &e1, &step);
    double s1, s2;
    gr_red_part<KIND, E>(r, ch, e0, e1, step, &s1, &s2);
    gr_red_store<KIND>(r, ch, s, s1, s2);
}

// ---- stage 2: one warp per channel adds its partials, lane 0 finishes ----

// Lane l adds slices l, l + 32, ... in order, then a fixed shuffle tree; lane 0 holds the sums.
__device__ __forceinline__ void gr_warp_parts(int64_t ch, int64_t slices, double *a, double *b) {
    const double *p = gr_sp_part + 2 * ch * slices;
    double x = 0.0, y = 0.0;
    for (int64_t s = threadIdx.x % GR_WARP; s < slices; s += GR_WARP) {
        x += p[2 * s];
        y += p[2 * s + 1];
    }
    for (int off = GR_WARP / 2; off > 0; off >>= 1) {
        x += __shfl_down_sync(GR_FULL_MASK, x, off);
        y += __shfl_down_sync(GR_FULL_MASK, y, off);
    }
    *a = x;
    *b = y;
}

__global__ void gr_bn_train_finish_kernel(gr_chan_geo g, const void *x, int ex, double eps, double mom,
                                          const float *w, const float *b, float *saved, float *rmean, float *rvar) {
    int64_t ch = ((int64_t)blockIdx.x * GR_CU_THREADS + threadIdx.x) / GR_WARP;
    if (ch >= g.c) return; // the whole warp
    double s1, s2;
    gr_warp_parts(ch, g.slices, &s1, &s2);
    if (threadIdx.x % GR_WARP == 0)
        gr_body_bn_train_finish(&g, ch, s1, s2, x, ex, eps, mom, w, b, saved, rmean, rvar, gr_sp_coef);
}

__global__ void gr_bn_bwd_finish_kernel(gr_chan_geo g, int training, const float *w, const float *saved, float *dw,
                                        float *db) {
    int64_t ch = ((int64_t)blockIdx.x * GR_CU_THREADS + threadIdx.x) / GR_WARP;
    if (ch >= g.c) return;
    double s1, s2;
    gr_warp_parts(ch, g.slices, &s1, &s2);
    if (threadIdx.x % GR_WARP == 0) gr_body_bn_bwd_finish(&g, ch, s1, s2, training, w, saved, dw, db, gr_sp_coef);
}

__global__ void gr_bias_finish_kernel(gr_chan_geo g, float *db) {
    int64_t ch = ((int64_t)blockIdx.x * GR_CU_THREADS + threadIdx.x) / GR_WARP;
    if (ch >= g.c) return;
    double s1, s2;
    gr_warp_parts(ch, g.slices, &s1, &s2);
    if (threadIdx.x % GR_WARP == 0) gr_body_bias_grad_finish(ch, s1, db);
}

__global__ void gr_bn_eval_finish_kernel(int64_t c, float eps, const float *w, const float *b, const float *rmean,
                                         const float *rvar, float *saved) {
    int64_t ch = (int64_t)blockIdx.x * GR_CU_THREADS + threadIdx.x;
    if (ch < c) gr_body_bn_eval_finish(c, ch, eps, w, b, rmean, rvar, saved, gr_sp_coef);
}

// ---- stage 3: elementwise passes with per-channel values ----

enum { GR_APPLY_NORM, GR_APPLY_DX, GR_APPLY_BIAS };

// Element l of arrays a, b, out stored as E (the thread's elements): NORM
// out = y from a = x; DX out = dx from a = dy, b = x (both with
// gr_sp_coef); BIAS out += bias[ch].
template <int KIND, int E>
__device__ __forceinline__ void gr_apply1(const void *a, const void *b, void *out, const float *bias, int64_t l,
                                          int64_t ch) {
    if (KIND == GR_APPLY_NORM) gr_st_hd(out, E, l, gr_body_bn_norm(gr_ld_hd(a, E, l), gr_sp_coef + 4 * ch));
    else if (KIND == GR_APPLY_DX)
        gr_st_hd(out, E, l, gr_body_bn_dx(gr_ld_hd(a, E, l), gr_ld_hd(b, E, l), gr_sp_coef + 4 * ch));
    else gr_body_bias_add(out, E, bias, l, ch);
}

__device__ __forceinline__ void gr_load4(float *v, const float *p) {
    float4 q = *(const float4 *)p;
    v[0] = q.x;
    v[1] = q.y;
    v[2] = q.z;
    v[3] = q.w;
}

// Thread v takes elements V*v .. V*v + V - 1 of [n][c][inner]; V = 4 needs
// inner % 4 == 0 (one channel per thread) and 16-byte aligned fp32 arrays
// (half storage takes V = 1).
template <typename I, int KIND, int V, int E>
__global__ void gr_apply_kernel(const void *a, const void *b, void *out, const float *bias, I total, I inner,
                                I c) {
    I i = ((I)blockIdx.x * GR_CU_THREADS + threadIdx.x) * V;
    if (i >= total) return;
    int64_t ch = (int64_t)((i / inner) % c);
    if (V == 1) {
        gr_apply1<KIND, E>(a, b, out, bias, (int64_t)i, ch);
        return;
    }
    float av[4] = {0, 0, 0, 0}, bv[4] = {0, 0, 0, 0}, ov[4] = {0, 0, 0, 0};
    if (KIND != GR_APPLY_BIAS) gr_load4(av, (const float *)a + i);
    if (KIND == GR_APPLY_DX) gr_load4(bv, (const float *)b + i);
    if (KIND == GR_APPLY_BIAS) gr_load4(ov, (const float *)out + i);
#pragma unroll
    for (int l = 0; l < 4; l++) gr_apply1<KIND, GR_BODY_F32>(av, bv, ov, bias, l, ch);
    *(float4 *)((float *)out + i) = make_float4(ov[0], ov[1], ov[2], ov[3]);
}

// ---- launchers ----

static bool gr_fits32(int64_t n) { return n < ((int64_t)1 << 31); }

// kern<I, S> over `total` threads: 32-bit indices when they fit, the
// stride folded in when both axes have stride 1 or 2.
#define GR_POOL_LAUNCH(kern, stream, total, g, ...) do { \
    int64_t tot_ = (total); \
    int st_ = (g).sh == (g).sw && ((g).sh == 1 || (g).sh == 2) ? (int)(g).sh : 0; \
    if (gr_fits32(tot_)) { \
        uint32_t t32_ = (uint32_t)tot_; \
        if (st_ == 1) kern<uint32_t, 1><<<GR_CU_BLOCKS(tot_), GR_CU_THREADS, 0, stream>>>(g, __VA_ARGS__, t32_); \
        else if (st_ == 2) kern<uint32_t, 2><<<GR_CU_BLOCKS(tot_), GR_CU_THREADS, 0, stream>>>(g, __VA_ARGS__, t32_); \
        else kern<uint32_t, 0><<<GR_CU_BLOCKS(tot_), GR_CU_THREADS, 0, stream>>>(g, __VA_ARGS__, t32_); \
    } else { \
        kern<int64_t, 0><<<GR_CU_BLOCKS(tot_), GR_CU_THREADS, 0, stream>>>(g, __VA_ARGS__, tot_); \
    } \
    GR_CU_LAUNCHED(); \
} while (0)

extern "C" void gr_cu_maxpool(cudaStream_t s, const gr_pool_geo *g, const float *x, float *y, int32_t *idx) {
    int64_t total = g->planes * g->ho * g->wo;
    if (total <= 0) return;
    GR_POOL_LAUNCH(gr_maxpool_kernel, s, total, *g, x, y, idx);
}

extern "C" void gr_cu_maxpool_bwd(cudaStream_t s, const gr_pool_geo *g, const float *dy, const int32_t *idx,
                                  float *dx) {
    int64_t total = g->planes * g->h * g->w;
    if (total <= 0) return;
    GR_POOL_LAUNCH(gr_maxpool_bwd_kernel, s, total, *g, dy, idx, dx);
}

extern "C" void gr_cu_avgpool(cudaStream_t s, const gr_pool_geo *g, const float *x, float *y) {
    int64_t total = g->planes * g->ho * g->wo;
    if (total <= 0) return;
    GR_POOL_LAUNCH(gr_avgpool_kernel, s, total, *g, x, y);
}

extern "C" void gr_cu_avgpool_bwd(cudaStream_t s, const gr_pool_geo *g, const float *dy, float *dx) {
    int64_t total = g->planes * g->h * g->w;
    if (total <= 0) return;
    GR_POOL_LAUNCH(gr_avgpool_bwd_kernel, s, total, *g, dy, dx);
}

extern "C" void gr_cu_global_avgpool(cudaStream_t s, const float *x, float *y, int64_t planes, int64_t hw) {
    if (planes <= 0) return;
    gr_gap_kernel<<<GR_CU_BLOCKS(planes * GR_WARP), GR_CU_THREADS, 0, s>>>(x, y, planes, hw);
    GR_CU_LAUNCHED();
}

extern "C" void gr_cu_global_avgpool_bwd(cudaStream_t s, const float *dy, float *dx, int64_t planes, int64_t hw) {
    int64_t total = planes * hw;
    if (total <= 0) return;
    if (gr_fits32(total))
        gr_gap_bwd_kernel<uint32_t><<<GR_CU_BLOCKS(total), GR_CU_THREADS, 0, s>>>(dy, dx, (uint32_t)hw,
                                                                                 (uint32_t)total);
    else
        gr_gap_bwd_kernel<int64_t><<<GR_CU_BLOCKS(total), GR_CU_THREADS, 0, s>>>(dy, dx, hw, total);
    GR_CU_LAUNCHED();
}

template <int KIND, int E>
static void gr_red_launch_e(cudaStream_t s, const gr_red_in &r) {
    if (r.g.cols) {
        dim3 grid((unsigned)((r.g.c + GR_CHAN_THREADS - 1) / GR_CHAN_THREADS), (unsigned)r.g.slices);
        gr_red_cols_kernel<KIND, E><<<grid, GR_CHAN_THREADS, 0, s>>>(r);
    } else {
        gr_red_planes_kernel<KIND, E><<<(unsigned)(r.g.c * r.g.slices), GR_CHAN_THREADS, 0, s>>>(r);
    }
    GR_CU_LAUNCHED();
}

// the reduction over arrays stored as e (fp32, bf16 or fp16)
template <int KIND>
static void gr_red_launch(cudaStream_t s, const gr_red_in &r, int e) {
    if (e == GR_BODY_BF16) gr_red_launch_e<KIND, GR_BODY_BF16>(s, r);
    else if (e == GR_BODY_F16) gr_red_launch_e<KIND, GR_BODY_F16>(s, r);
    else gr_red_launch_e<KIND, GR_BODY_F32>(s, r);
}

static bool gr_aligned16(const void *p) { return ((uintptr_t)p & 15) == 0; }

template <int KIND, int E>
static void gr_apply_launch_e(cudaStream_t s, const void *a, const void *b, void *out, const float *bias,
                              int64_t total, int64_t inner, int64_t c) {
    bool vec = E == GR_BODY_F32 && inner % 4 == 0 && gr_aligned16(a) && gr_aligned16(b) && gr_aligned16(out);
    int64_t threads = vec ? total / 4 : total;
    unsigned blocks = GR_CU_BLOCKS(threads);
    if (gr_fits32(total)) {
        uint32_t t = (uint32_t)total, in = (uint32_t)inner, cc = (uint32_t)c;
        if (vec) gr_apply_kernel<uint32_t, KIND, 4, E><<<blocks, GR_CU_THREADS, 0, s>>>(a, b, out, bias, t, in, cc);
        else gr_apply_kernel<uint32_t, KIND, 1, E><<<blocks, GR_CU_THREADS, 0, s>>>(a, b, out, bias, t, in, cc);
    } else {
        if (vec)
            gr_apply_kernel<int64_t, KIND, 4, E><<<blocks, GR_CU_THREADS, 0, s>>>(a, b, out, bias, total, inner, c);
        else
            gr_apply_kernel<int64_t, KIND, 1, E><<<blocks, GR_CU_THREADS, 0, s>>>(a, b, out, bias, total, inner, c);
    }
    GR_CU_LAUNCHED();
}

// the elementwise pass over arrays stored as e
template <int KIND>
static void gr_apply_launch(cudaStream_t s, int e, const void *a, const void *b, void *out, const float *bias,
                            int64_t total, int64_t inner, int64_t c) {
    if (e == GR_BODY_BF16) gr_apply_launch_e<KIND, GR_BODY_BF16>(s, a, b, out, bias, total, inner, c);
    else if (e == GR_BODY_F16) gr_apply_launch_e<KIND, GR_BODY_F16>(s, a, b, out, bias, total, inner, c);
    else gr_apply_launch_e<KIND, GR_BODY_F32>(s, a, b, out, bias, total, inner, c);
}

static void gr_bn_check_channels(int64_t c, const char *who) {
    if (c > GR_CHAN_MAX)
        gr_cuda_die(__FILE__, __LINE__, who, "batchnorm has more channels than GR_CHAN_MAX (16384)");
}

extern "C" void gr_cu_batchnorm_train(cudaStream_t s, int e, const void *x, const float *w, const float *b,
                                      float *rmean, float *rvar, void *y, float *saved, int64_t n, int64_t c,
                                      int64_t hw, double eps, double momentum) {
    if (n * c * hw <= 0) return;
    gr_bn_check_channels(c, "gr_cu_batchnorm_train");
    gr_red_in r = {};
    r.g = gr_chan_geo_make(n, c, hw);
    r.a = x;
    gr_red_launch<GR_RED_STATS>(s, r, e);
    gr_bn_train_finish_kernel<<<GR_CU_BLOCKS(c * GR_WARP), GR_CU_THREADS, 0, s>>>(r.g, x, e, eps, momentum, w, b,
                                                                                   saved, rmean, rvar);
    GR_CU_LAUNCHED();
    gr_apply_launch<GR_APPLY_NORM>(s, e, x, NULL, y, NULL, n * c * hw, hw, c);
}

extern "C" void gr_cu_batchnorm_eval(cudaStream_t s, int e, const void *x, const float *w, const float *b,
                                     const float *rmean, const float *rvar, void *y, float *saved, int64_t n,
                                     int64_t c, int64_t hw, float eps) {
    if (n * c * hw <= 0) return;
    gr_bn_check_channels(c, "gr_cu_batchnorm_eval");
    gr_bn_eval_finish_kernel<<<GR_CU_BLOCKS(c), GR_CU_THREADS, 0, s>>>(c, eps, w, b, rmean, rvar, saved);
    GR_CU_LAUNCHED();
    gr_apply_launch<GR_APPLY_NORM>(s, e, x, NULL, y, NULL, n * c * hw, hw, c);
}

extern "C" void gr_cu_batchnorm_bwd(cudaStream_t s, int e, const void *dy, const void *x, const float *w,
                                    const float *saved, float *dw, float *db, void *dx, int64_t n, int64_t c,
                                    int64_t hw, int training) {
    if (n * c * hw <= 0) return;
    gr_bn_check_channels(c, "gr_cu_batchnorm_bwd");
    gr_red_in r = {};
    r.g = gr_chan_geo_make(n, c, hw);
    r.a = dy;
    r.b = x;
    r.saved = saved;
    gr_red_launch<GR_RED_GRAD>(s, r, e);
    gr_bn_bwd_finish_kernel<<<GR_CU_BLOCKS(c * GR_WARP), GR_CU_THREADS, 0, s>>>(r.g, training, w, saved, dw, db);
    GR_CU_LAUNCHED();
    if (dx) gr_apply_launch<GR_APPLY_DX>(s, e, dy, x, dx, NULL, n * c * hw, hw, c);
}

extern "C" void gr_cu_bias_add(cudaStream_t s, int e, void *y, const float *b, int64_t n, int64_t c, int64_t inner) {
    if (n * c * inner <= 0) return;
    gr_apply_launch<GR_APPLY_BIAS>(s, e, NULL, NULL, y, b, n * c * inner, inner, c);
}

extern "C" void gr_cu_bias_grad(cudaStream_t s, int e, const void *dy, float *db, int64_t n, int64_t c,
                                int64_t inner) {
    if (n * c * inner <= 0) return;
    gr_red_in r = {};
    r.g = gr_chan_geo_make(n, c, inner);
    r.a = dy;
    // one slice per channel (small batches, or more channels than the
    // scratch holds partials for): the first stage finishes into db
    if (r.g.slices == 1) r.db = db;
    gr_red_launch<GR_RED_BIAS>(s, r, e);
    if (r.g.slices == 1) return;
    gr_bias_finish_kernel<<<GR_CU_BLOCKS(c * GR_WARP), GR_CU_THREADS, 0, s>>>(r.g, db);
    GR_CU_LAUNCHED();
}
