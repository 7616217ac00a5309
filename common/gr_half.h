/* gr_half.h — fp16 and bf16: rounding an fp32 value to the nearest half
 * value (kept in a float), and the 16-bit storage patterns.
 *
 * Under mixed precision the plan stores activations and their gradients in
 * half (graph/precision.c); a kernel without a native half path reads them
 * decoded to fp32 and its outputs are encoded back (kernels/backend.c), so
 * overflow to inf, underflow to 0 and the loss-scaling logic behave as with
 * any half storage. The in-place rounding is the same conversion without
 * the narrow storage (tests and the CUDA kernels' bodies use it).
 *
 * The rounding is the hardware / PyTorch conversion float -> half -> float:
 * round to nearest, ties to even. It works on the bit pattern with integer
 * arithmetic only, so it does not depend on the FPU rounding mode, on
 * flush-to-zero settings, or on compiler support for half types (the GPU's
 * storage encode and decode are the hardware conversions, which round the
 * same: below). A NaN is returned as it came (still a NaN; its payload is
 * not narrowed). */
#ifndef GR_HALF_H
#define GR_HALF_H

#include <stdint.h>
#include <string.h>

#include "gr_hd.h"

#ifdef __CUDACC__
#include <cuda_fp16.h>
#endif

/* The storage format of activations; GR_HALF_NONE is plain fp32. */
typedef enum gr_half_fmt { GR_HALF_NONE, GR_HALF_FP16, GR_HALF_BF16 } gr_half_fmt;

/* memcpy is the bit cast that is defined in C and in CUDA device code
 * alike; compilers turn it into a register move. */
GR_HD uint32_t gr_half_bits_hd(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

GR_HD float gr_half_float_hd(uint32_t u) {
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* The nearest bfloat16 value (8 significant bits, fp32's exponent range):
 * drop the low 16 bits with round-to-nearest-even. Adding 0x7FFF plus the
 * kept lowest bit carries exactly when the dropped part exceeds half, or
 * equals half with an odd kept part; a carry out of the mantissa steps the
 * exponent, which past the largest bf16 lands on inf as in hardware. */
GR_HD float gr_round_bf16_hd(float x) {
    uint32_t u = gr_half_bits_hd(x);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return x; /* NaN: the carry could make it inf or -0 */
    u += 0x7FFFu + ((u >> 16) & 1u);
    return gr_half_float_hd(u & 0xFFFF0000u);
}

/* The nearest IEEE binary16 value: 11 significant bits for |x| >= 2^-14,
 * a fixed quantum of 2^-24 below (the fp16 subnormals), inf from 65520 up
 * (the midpoint between 65504, whose last bit is odd, and 2^16). */
GR_HD float gr_round_fp16_hd(float x) {
    uint32_t u = gr_half_bits_hd(x);
    uint32_t sign = u & 0x80000000u, a = u & 0x7FFFFFFFu;
    if (a > 0x7F800000u) return x;                               /* NaN */
    if (a >= 0x477FF000u) return gr_half_float_hd(sign | 0x7F800000u); /* >= 65520: inf */
    if (a >= 0x38800000u) {                                      /* >= 2^-14: normal fp16 */
        /* drop 13 of fp32's 23 mantissa bits, as in gr_round_bf16_hd */
        a += 0xFFFu + ((a >> 13) & 1u);
        return gr_half_float_hd(sign | (a & 0xFFFFE000u));
    }
    /* fp16 subnormal range: count quanta of 2^-24. The value is
     * m * 2^(e - 150) with e the biased exponent (fp32 subnormals: e = 1,
     * no implicit bit), i.e. m >> (126 - e) quanta, shift >= 14. */
    uint32_t e = a >> 23;
    uint32_t m = e ? (a & 0x7FFFFFu) | 0x800000u : a;
    uint32_t sh = 126u - (e ? e : 1u);
    uint32_t q = 0;
    if (sh <= 24u) { /* below 2^-25 (shift > 24) everything rounds to 0 */
        uint32_t rem = m & ((1u << sh) - 1u), half = 1u << (sh - 1u);
        q = m >> sh;
        if (rem > half || (rem == half && (q & 1u))) q++;
    }
    /* q <= 1024 quanta: (float)q is exact and the scaling by 2^-24 lands on
     * a normal float, so no rounding happens here; the sign is put back by
     * bits so that a value rounding to zero keeps it (-0). */
    return gr_half_float_hd(sign | gr_half_bits_hd((float)q * 0x1p-24f));
}

/* The rounding of format f; GR_HALF_NONE (and anything unknown) leaves x. */
GR_HD float gr_round_half_hd(gr_half_fmt f, float x) {
    switch (f) {
    case GR_HALF_FP16: return gr_round_fp16_hd(x);
    case GR_HALF_BF16: return gr_round_bf16_hd(x);
    default: return x;
    }
}

/* ---- half storage: the 16-bit patterns ----
 * Encoding rounds exactly as gr_round_*_hd (round to nearest, ties to
 * even), so decode(encode(x)) == gr_round_*_hd(x) bit for bit for every
 * non-NaN x: an array stored in half and read back holds the values the
 * in-place emulation would. A NaN stays a NaN (quiet; its payload is not
 * kept). */

/* branch-free (a select), so loops over it vectorize */
GR_HD uint16_t gr_bf16_encode_hd(float x) {
    uint32_t u = gr_half_bits_hd(x);
    uint32_t nan = (u >> 16) | 0x0040u, rounded = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
    return (uint16_t)((u & 0x7FFFFFFFu) > 0x7F800000u ? nan : rounded);
}

GR_HD float gr_bf16_decode_hd(uint16_t h) { return gr_half_float_hd((uint32_t)h << 16); }

/* On the GPU the conversions are the hardware's (one cvt instruction, the
 * same round to nearest even, subnormals kept; a NaN becomes the canonical
 * 0x7FFF): the integer code costs ~30 instructions an element, which made
 * the memory-bound fp16 kernels (batchnorm, relu, add) of ResNet-50 on an
 * H200 1.4x to 2x slower than their bf16 twins. */
GR_HD uint16_t gr_fp16_encode_hd(float x) {
#ifdef __CUDA_ARCH__
    return __half_as_ushort(__float2half_rn(x));
#else
    uint32_t u = gr_half_bits_hd(x);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)(sign | 0x7E00u);
    uint32_t a = gr_half_bits_hd(gr_round_fp16_hd(x)) & 0x7FFFFFFFu; /* an fp16 value now */
    if (a == 0x7F800000u) return (uint16_t)(sign | 0x7C00u);
    if (a >= 0x38800000u) /* normal: rebias the exponent, keep the top 10 mantissa bits */
        return (uint16_t)(sign | (((a >> 23) - 112u) << 10) | ((a >> 13) & 0x3FFu));
    /* subnormal (or zero): a whole number of 2^-24 quanta below 1024 */
    return (uint16_t)(sign | (uint16_t)(gr_half_float_hd(a) * 0x1p24f));
#endif
}

GR_HD float gr_fp16_decode_hd(uint16_t h) {
#ifdef __CUDA_ARCH__
    return __half2float(__ushort_as_half(h));
#else
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1Fu, m = h & 0x3FFu;
    if (e == 0x1Fu) return gr_half_float_hd(sign | 0x7F800000u | (m << 13));
    if (e) return gr_half_float_hd(sign | ((e + 112u) << 23) | (m << 13));
    return gr_half_float_hd(sign | gr_half_bits_hd((float)m * 0x1p-24f));
#endif
}

/* Element i of an in-place rounding pass (kernels/cuda/round.cu). */
GR_HD void gr_body_round(gr_half_fmt f, float *x, int64_t i) { x[i] = gr_round_half_hd(f, x[i]); }

#endif
