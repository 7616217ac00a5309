/* join.c — CPU add/concat kernels. STUB: being written. */
#include "cpu_kernels.h"

void gr_cpu_add(const gr_kargs *a) {
    (void)a;
    GR_ASSERT(!"gr_cpu_add: not implemented yet");
}

void gr_cpu_concat(const gr_kargs *a) {
    (void)a;
    GR_ASSERT(!"gr_cpu_concat: not implemented yet");
}

void gr_cpu_add_bwd(const gr_kargs *a) {
    (void)a;
    GR_ASSERT(!"gr_cpu_add_bwd: not implemented yet");
}

void gr_cpu_concat_bwd(const gr_kargs *a) {
    (void)a;
    GR_ASSERT(!"gr_cpu_concat_bwd: not implemented yet");
}
