/* cpu_kernels.h — the CPU kernel of every op in graph/ops.def. */
#ifndef GR_CPU_KERNELS_H
#define GR_CPU_KERNELS_H

#include "../backend.h"

#define X(E, name, ...) void gr_cpu_##name(const gr_kargs *a);
#include "../../graph/ops.def"
#undef X

#endif
