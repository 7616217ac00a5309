/* bn.c — CPU batchnorm kernels. STUB: being written. */
#include "cpu_kernels.h"

void gr_cpu_batchnorm(const gr_kargs *a) {
    (void)a;
    GR_ASSERT(!"gr_cpu_batchnorm: not implemented yet");
}

void gr_cpu_batchnorm_bwd(const gr_kargs *a) {
    (void)a;
    GR_ASSERT(!"gr_cpu_batchnorm_bwd: not implemented yet");
}
