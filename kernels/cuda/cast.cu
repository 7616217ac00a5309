// cast.cu — fp32 <-> fp16 / bf16 conversion of half-precision storage (the
// fp32 staging of steps whose kernel computes in fp32, kernels/backend.c;
// the half copies of weights that native half convs and GEMMs read), and
// the accumulation of a half weight gradient into the fp32 one. Elements
// are read and written through body_half.h (common/gr_half.h's encoding,
// shared with the CPU backend), so both backends encode every value
// identically. One element per thread; the type and direction are template
// parameters, so the per-element code has no switch.
#include <stdint.h>

#include "../body_half.h"
#include "cu_cast.h"
#include "cu_check.h"

template <int E, bool TO_HALF>
__global__ void gr_cast_kernel(float *x, uint16_t *h, int64_t n) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    if (TO_HALF) gr_st_hd(h, E, i, x[i]);
    else x[i] = gr_ld_hd(h, E, i);
}

template <int E>
static void gr_cast_launch(cudaStream_t s, float *x, uint16_t *h, int64_t n, int to_half) {
    if (to_half) gr_cast_kernel<E, true><<<GR_CU_BLOCKS(n), GR_CU_THREADS, 0, s>>>(x, h, n);
    else gr_cast_kernel<E, false><<<GR_CU_BLOCKS(n), GR_CU_THREADS, 0, s>>>(x, h, n);
    GR_CU_LAUNCHED();
}

extern "C" void gr_cu_cast(cudaStream_t s, float *x, uint16_t *h, int64_t n, int e, int to_half) {
    if (n <= 0) return;
    if (e == GR_BODY_BF16) gr_cast_launch<GR_BODY_BF16>(s, x, h, n, to_half);
    else gr_cast_launch<GR_BODY_F16>(s, x, h, n, to_half);
}

template <int E>
__global__ void gr_cast_add_kernel(float *x, const uint16_t *h, int64_t n) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] += gr_ld_hd(h, E, i);
}

extern "C" void gr_cu_cast_add(cudaStream_t s, float *x, const uint16_t *h, int64_t n, int e) {
    if (n <= 0) return;
    if (e == GR_BODY_BF16) gr_cast_add_kernel<GR_BODY_BF16><<<GR_CU_BLOCKS(n), GR_CU_THREADS, 0, s>>>(x, h, n);
    else gr_cast_add_kernel<GR_BODY_F16><<<GR_CU_BLOCKS(n), GR_CU_THREADS, 0, s>>>(x, h, n);
    GR_CU_LAUNCHED();
}
