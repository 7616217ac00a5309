/* cpu_kernels.h — the CPU kernel of every op in graph/ops.def. */
#ifndef GR_CPU_KERNELS_H
#define GR_CPU_KERNELS_H

#include "../backend.h"

#define X(E, name, ...) void gr_cpu_##name(const gr_kargs *a);
#include "../../graph/ops.def"
#undef X

/* batchnorm and its backward on channels-last activations (bn_nhwc.c),
 * called by gr_cpu_batchnorm / gr_cpu_batchnorm_bwd for NHWC tensors */
void gr_cpu_batchnorm_nhwc(const gr_kargs *a);
void gr_cpu_batchnorm_bwd_nhwc(const gr_kargs *a);

#endif
