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
/* maxpool and its backward on channels-last activations (pool_nhwc.c) */
void gr_cpu_maxpool_nhwc(const gr_kargs *a);
void gr_cpu_maxpool_bwd_nhwc(const gr_kargs *a);

/* dense and its backward on bf16 activations (dense_bf16.c), called by
 * gr_cpu_dense* for native bf16 steps; the path's state is freed with the
 * backend */
void gr_cpu_dense_bf16(const gr_kargs *a);
void gr_cpu_dense_bf16_bwd_data(const gr_kargs *a);
void gr_cpu_dense_bf16_bwd_params(const gr_kargs *a);
void gr_cpu_dense_bf16_free(gr_cpu *cpu);

#endif
