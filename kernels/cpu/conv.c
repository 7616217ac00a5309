/* conv.c — CPU conv kernels. STUB: being written. */
#include "cpu_kernels.h"

void gr_cpu_conv(const gr_kargs *a) {
    (void)a;
    GR_ASSERT(!"gr_cpu_conv: not implemented yet");
}

void gr_cpu_conv_bwd_data(const gr_kargs *a) {
    (void)a;
    GR_ASSERT(!"gr_cpu_conv_bwd_data: not implemented yet");
}

void gr_cpu_conv_bwd_params(const gr_kargs *a) {
    (void)a;
    GR_ASSERT(!"gr_cpu_conv_bwd_params: not implemented yet");
}
