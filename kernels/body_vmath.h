/* body_vmath.h — exp for the kernels' vector loops, the same on both
 * backends. glibc's expf and tanhf are calls the compiler cannot vectorize
 * (without -ffast-math): --profile showed them as most of gelu_tanh (8.4 ms
 * for 0.8M floats on GPT-2 124M, 0.9 GFLOP/s) and much of attention. This is
 * plain float arithmetic and integer bit work, no calls and no branches, so
 * an `omp simd` loop vectorizes it, with the same bits on every ISA (each
 * operation rounds once: the CPU build does not contract a*b+c), so it may
 * run in GR_ISA_CLONES loops; a body calling it (gelu_tanh) gives the CUDA
 * kernel the same formula.
 *
 * gr_vexpf: e^x = 2^k e^r, k = round(x / ln 2), r = x - k ln 2 in two parts
 * (|r| <= ln2/2), e^r by its Taylor series to r^7 (truncation below 6e-9
 * relative). Within 1.2 ulp of exp for x in [-87, 88] (measured over the
 * range); 0 below -87 (e^-87 is 1.6e-38, just above the smallest normal
 * float: no subnormals), e^88 from 88 to 88.7, inf above; NaN stays NaN. */
#ifndef GR_BODY_VMATH_H
#define GR_BODY_VMATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "../common/gr_hd.h"

GR_HD float gr_vexpf(float x) {
    /* clamped so the integer work below stays in range (NaN: to 88, answered at the end) */
    float xc = x < 88.0f ? x : 88.0f;
    xc = xc > -88.0f ? xc : -88.0f;
    /* k = round(x log2 e): adding 1.5 * 2^23 leaves k in the low mantissa bits */
    const float kf = xc * 1.44269504088896341f + 12582912.0f, k = kf - 12582912.0f;
    int32_t ki;
    memcpy(&ki, &kf, sizeof ki);
    ki -= 0x4B400000;
    /* ln 2 = 0.693145751953125 (exact in 16 bits, so k * it is exact) + 1.42860677e-6 */
    float r = xc - k * 0.693145751953125f;
    r = r - k * 1.428606765330187e-06f;
    float p = 1.0f / 5040.0f;
    p = p * r + 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    const uint32_t sb = (uint32_t)(ki + 127) << 23; /* 2^k, k in [-127, 127] */
    float s;
    memcpy(&s, &sb, sizeof s);
    float e = x < -87.0f ? 0.0f : p * s;
    e = x > 88.7f ? (float)INFINITY : e;
    return x != x ? x : e;
}

#endif
