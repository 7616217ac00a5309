/* conv.h — the CPU convolution (PyTorch nn.Conv2d semantics, NCHW) behind
 * gr_cpu_conv / gr_cpu_conv_bwd_data / gr_cpu_conv_bwd_params.
 *
 * Two paths with the same contract:
 *   ref    — im2col (col2im) + gr_cpu_sgemm per sample and group (conv.c);
 *            the numerical reference.
 *   onednn — oneDNN convolution primitives, cached per shape; the buffers
 *            stay nchw/oihw and blocked layouts are reached by reorders
 *            where they pay (conv_onednn.c); the default.
 * GPURUN_CONV=ref|onednn picks one at backend creation (the path is the
 * backend's state, cpu.h); gr_cpu_conv_set_path switches later (tests). Both paths give the same
 * results to ~1e-6 relative (tests/ops/test_op_conv.c, conv_parity_torch.py).
 *
 * Contract of every path: fwd and bwd_data overwrite their output;
 * bwd_params ADDS dW (and db when db != NULL) into its outputs, because the
 * grads arena accumulates over micro-batches. */
#ifndef GR_CPU_CONV_H
#define GR_CPU_CONV_H

#include <stdbool.h>
#include <stdint.h>

#include "../../graph/graph.h"
#include "../conv_shape.h"

typedef struct gr_cpu gr_cpu;

typedef enum gr_conv_path { GR_CONV_ONEDNN, GR_CONV_REF } gr_conv_path;
typedef enum gr_conv_dir { GR_CONV_FWD, GR_CONV_BWD_DATA, GR_CONV_BWD_WEIGHTS } gr_conv_dir;

/* Sets cpu's path: "ref" or "onednn" (NULL or "" = onednn); false for any
 * other name. */
bool gr_cpu_conv_set_path(gr_cpu *cpu, const char *name);
/* Frees cpu's conv scratch and oneDNN state (the backend's destroy). */
void gr_cpu_conv_free(gr_cpu *cpu);

/* x [n,c,h,w], w [f, c/groups, kh, kw], b [f] or NULL -> y [n,f,ho,wo] */
void gr_cpu_conv_ref_fwd(gr_cpu *cpu, const gr_conv_shape *s, const float *x, const float *w, const float *b,
                         float *y);
/* dy, w -> dx (overwritten) */
void gr_cpu_conv_ref_bwd_data(gr_cpu *cpu, const gr_conv_shape *s, const float *dy, const float *w, float *dx);
/* dw += dW(dy, x); db += sum(dy) when db != NULL */
void gr_cpu_conv_ref_bwd_params(gr_cpu *cpu, const gr_conv_shape *s, const float *dy, const float *x, float *dw,
                                float *db);

/* The storage of the conv's activations on the oneDNN path: x (or dx) and
 * y (or dy), each GR_F32 or GR_BF16, NCHW or NHWC. With either in bf16 the
 * primitive computes in bf16 (fp32 accumulation) and its weights are
 * converted from the fp32 masters on each call; dW and db stay fp32. With
 * either channels-last the primitive runs on nhwc (the CPU plans NHWC only
 * with native bf16: oneDNN's fp32 nhwc kernels are slower than its blocked
 * ones here, and for some shapes only a reference kernel). */
typedef struct gr_conv_store {
    gr_elem x, y;
    gr_layout lx, ly;
} gr_conv_store;

void gr_cpu_conv_onednn_fwd_as(gr_cpu *cpu, const gr_conv_shape *s, const gr_conv_store *t, const void *x,
                               const float *w, const float *b, void *y);
void gr_cpu_conv_onednn_bwd_data_as(gr_cpu *cpu, const gr_conv_shape *s, const gr_conv_store *t, const void *dy,
                                    const float *w, void *dx);
void gr_cpu_conv_onednn_bwd_params_as(gr_cpu *cpu, const gr_conv_shape *s, const gr_conv_store *t, const void *dy,
                                      const void *x, float *dw, float *db);
/* the same in fp32 */
void gr_cpu_conv_onednn_fwd(gr_cpu *cpu, const gr_conv_shape *s, const float *x, const float *w, const float *b,
                            float *y);
void gr_cpu_conv_onednn_bwd_data(gr_cpu *cpu, const gr_conv_shape *s, const float *dy, const float *w, float *dx);
void gr_cpu_conv_onednn_bwd_params(gr_cpu *cpu, const gr_conv_shape *s, const float *dy, const float *x, float *dw,
                                   float *db);
void gr_cpu_conv_onednn_free(gr_cpu *cpu);
/* The pool bytes of the primitive for (dir, s, bias, t), made and cached now. */
size_t gr_cpu_conv_onednn_need(gr_cpu *cpu, gr_conv_dir dir, const gr_conv_shape *s, bool bias,
                               const gr_conv_store *t);
/* Grows the pool to at least bytes (false: past the CPU's memory limit). */
bool gr_cpu_conv_onednn_reserve(gr_cpu *cpu, size_t bytes);
/* How many primitives ran blocked because oneDNN had only its reference
 * kernel for their nhwc shape. */
int gr_cpu_conv_onednn_nhwc_fallbacks(const gr_cpu *cpu);
/* Convolution calls run as a matmul (1x1 channels-last bf16 ones, conv_onednn.c). */
int64_t gr_cpu_conv_onednn_matmul_calls(const gr_cpu *cpu);

#endif
