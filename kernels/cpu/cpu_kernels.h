/* cpu_kernels.h — the CPU kernel of every op in graph/ops.def. */
#ifndef GR_CPU_KERNELS_H
#define GR_CPU_KERNELS_H

#include "../backend.h"

typedef struct gr_cpu gr_cpu;

#define X(E, name, ...) void gr_cpu_##name(const gr_kargs *a);
#include "../../graph/ops.def"
#undef X

/* batchnorm and its backward on channels-last activations (bn_nhwc.c),
 * called by gr_cpu_batchnorm / gr_cpu_batchnorm_bwd for NHWC tensors */
void gr_cpu_batchnorm_nhwc(const gr_kargs *a);
void gr_cpu_batchnorm_bwd_nhwc(const gr_kargs *a);
/* The work of one unit u (a plane, a sample) of a pooling kernel: in
 * (in_len values of a->in[0]) to out (out_len values of a->out[0]), fp32. */
typedef void (*gr_pool_unit_fn)(const gr_kargs *a, const void *ctx, int64_t u, const float *in, float *out);
/* fn over every unit, in parallel (pool.c); with a->in[0] and a->out[0] in
 * bf16 each unit is decoded before fn and its result encoded after it. */
void gr_cpu_pool_units(const gr_kargs *a, int64_t units, int64_t in_len, int64_t out_len, gr_pool_unit_fn fn,
                       const void *ctx);
/* maxpool and its backward on channels-last activations (pool_nhwc.c) */
void gr_cpu_maxpool_nhwc(const gr_kargs *a);
void gr_cpu_maxpool_bwd_nhwc(const gr_kargs *a);
/* maxpool or maxpool_bwd whose input, output and indices are not all in one layout (pool_nhwc.c) */
void gr_cpu_maxpool_mixed(const gr_kargs *a);
/* A sample's planes [c][s] as rows [s][c] (to_rows), or back; 4-byte values (fp32, int32) (pool_nhwc.c) */
void gr_cpu_transpose_sample(const void *restrict src, void *restrict dst, int64_t c, int64_t s, bool to_rows);

/* dense and its backward on bf16 activations, and the fp32 forward under
 * the oneDNN GEMM provider, on oneDNN matmul primitives (dense_onednn.c),
 * called by gr_cpu_dense*; the path's state is freed with the backend */
void gr_cpu_dense_bf16(const gr_kargs *a);
void gr_cpu_dense_bf16_bwd_data(const gr_kargs *a);
void gr_cpu_dense_bf16_bwd_params(const gr_kargs *a);
void gr_cpu_dense_f32_onednn(const gr_kargs *a);
void gr_cpu_dense_onednn_free(gr_cpu *cpu);
/* Their bf16 products on explicit operands: x [n, f], W [u, f] fp32 (wt: [f, u]),
 * y [n, u]: y = x W^T + b, dx = dy W, dW += dy^T x (acc; else dW =)
 * (conv_onednn.c runs some channels-last convolutions on them) */
void gr_cpu_mm_bf16_fwd(gr_cpu *cpu, int64_t n, int64_t u, int64_t f, bool wt, const void *x, gr_elem ex,
                        const float *w, const float *b, void *y, gr_elem ey);
void gr_cpu_mm_bf16_bwd_data(gr_cpu *cpu, int64_t n, int64_t u, int64_t f, bool wt, const void *dy, gr_elem edy,
                             const float *w, void *dx, gr_elem edx);
void gr_cpu_mm_bf16_bwd_w(gr_cpu *cpu, int64_t n, int64_t u, int64_t f, bool wt, const uint16_t *dy, const void *x,
                          gr_elem ex, float *dw, bool acc);

#endif
