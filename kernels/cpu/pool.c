/* pool.c — CPU pooling kernels. STUB: being written. */
#include "cpu_kernels.h"

void gr_cpu_maxpool(const gr_kargs *a) {
    (void)a;
    GR_ASSERT(!"gr_cpu_maxpool: not implemented yet");
}

void gr_cpu_avgpool(const gr_kargs *a) {
    (void)a;
    GR_ASSERT(!"gr_cpu_avgpool: not implemented yet");
}

void gr_cpu_global_avgpool(const gr_kargs *a) {
    (void)a;
    GR_ASSERT(!"gr_cpu_global_avgpool: not implemented yet");
}

void gr_cpu_maxpool_bwd(const gr_kargs *a) {
    (void)a;
    GR_ASSERT(!"gr_cpu_maxpool_bwd: not implemented yet");
}

void gr_cpu_avgpool_bwd(const gr_kargs *a) {
    (void)a;
    GR_ASSERT(!"gr_cpu_avgpool_bwd: not implemented yet");
}

void gr_cpu_global_avgpool_bwd(const gr_kargs *a) {
    (void)a;
    GR_ASSERT(!"gr_cpu_global_avgpool_bwd: not implemented yet");
}
