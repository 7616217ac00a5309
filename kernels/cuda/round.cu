// round.cu — the in-place fp16 / bf16 rounding of activations (the storage
// emulation of mixed precision). The math is common/gr_half.h, shared with
// the CPU backend, so both round every value identically.
//
// Like the streaming kernels of elem.cu: four floats per thread with 16-byte
// accesses when x is aligned; a thread of the first block also takes one of
// the last n % 4 elements. The format is a template parameter so that the
// per-element code has no format switch.
#include <stdint.h>

#include "../../common/gr_half.h"
#include "cu_check.h"
#include "cu_round.h"

template <gr_half_fmt F, bool V>
__global__ void gr_round_kernel(float *x, int64_t n) {
    int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (!V) {
        if (t < n) gr_body_round(F, x, t);
        return;
    }
    int64_t n4 = n >> 2;
    if (t < n4) {
        float4 v = reinterpret_cast<const float4 *>(x)[t];
        v.x = gr_round_half_hd(F, v.x);
        v.y = gr_round_half_hd(F, v.y);
        v.z = gr_round_half_hd(F, v.z);
        v.w = gr_round_half_hd(F, v.w);
        reinterpret_cast<float4 *>(x)[t] = v;
    }
    if (t < (n & 3)) gr_body_round(F, x, (n4 << 2) + t);
}

template <gr_half_fmt F>
static void gr_round_launch(cudaStream_t s, float *x, int64_t n) {
    if (((uintptr_t)x & 15u) == 0) {
        int64_t t = n >> 2;
        gr_round_kernel<F, true><<<GR_CU_BLOCKS(t > 0 ? t : 1), GR_CU_THREADS, 0, s>>>(x, n);
    } else {
        gr_round_kernel<F, false><<<GR_CU_BLOCKS(n), GR_CU_THREADS, 0, s>>>(x, n);
    }
    GR_CU_LAUNCHED();
}

extern "C" void gr_cu_round(cudaStream_t s, float *x, int64_t n, int fmt) {
    if (n <= 0) return;
    switch (fmt) {
    case GR_HALF_FP16: gr_round_launch<GR_HALF_FP16>(s, x, n); break;
    case GR_HALF_BF16: gr_round_launch<GR_HALF_BF16>(s, x, n); break;
    default: break; // GR_HALF_NONE: fp32 storage, nothing to round
    }
}
