// cast.cu — fp32 <-> fp16 / bf16 conversion of half-precision storage (the
// fp32 staging of steps whose kernel computes in fp32, kernels/backend.c;
// the half copies of weights that native half convs and GEMMs read), and
// the accumulation of a half weight gradient into the fp32 one.
// The math is common/gr_half.h, shared with the CPU backend, so both
// backends encode every value identically. One element per thread; the
// format and direction are template parameters, so the per-element code
// has no switch.
#include <stdint.h>

#include "../../common/gr_half.h"
#include "cu_cast.h"
#include "cu_check.h"

template <int F, bool TO_HALF>
__global__ void gr_cast_kernel(float *x, uint16_t *h, int64_t n) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    if (TO_HALF) h[i] = F == GR_CU_HALF_BF16 ? gr_bf16_encode_hd(x[i]) : gr_fp16_encode_hd(x[i]);
    else x[i] = F == GR_CU_HALF_BF16 ? gr_bf16_decode_hd(h[i]) : gr_fp16_decode_hd(h[i]);
}

template <int F>
static void gr_cast_launch(cudaStream_t s, float *x, uint16_t *h, int64_t n, int to_half) {
    if (to_half) gr_cast_kernel<F, true><<<GR_CU_BLOCKS(n), GR_CU_THREADS, 0, s>>>(x, h, n);
    else gr_cast_kernel<F, false><<<GR_CU_BLOCKS(n), GR_CU_THREADS, 0, s>>>(x, h, n);
    GR_CU_LAUNCHED();
}

extern "C" void gr_cu_cast(cudaStream_t s, float *x, uint16_t *h, int64_t n, int fmt, int to_half) {
    if (n <= 0) return;
    if (fmt == GR_CU_HALF_BF16) gr_cast_launch<GR_CU_HALF_BF16>(s, x, h, n, to_half);
    else gr_cast_launch<GR_CU_HALF_FP16>(s, x, h, n, to_half);
}

template <int F>
__global__ void gr_cast_add_kernel(float *x, const uint16_t *h, int64_t n) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] += F == GR_CU_HALF_BF16 ? gr_bf16_decode_hd(h[i]) : gr_fp16_decode_hd(h[i]);
}

extern "C" void gr_cu_cast_add(cudaStream_t s, float *x, const uint16_t *h, int64_t n, int fmt) {
    if (n <= 0) return;
    if (fmt == GR_CU_HALF_BF16) gr_cast_add_kernel<GR_CU_HALF_BF16><<<GR_CU_BLOCKS(n), GR_CU_THREADS, 0, s>>>(x, h, n);
    else gr_cast_add_kernel<GR_CU_HALF_FP16><<<GR_CU_BLOCKS(n), GR_CU_THREADS, 0, s>>>(x, h, n);
    GR_CU_LAUNCHED();
}
