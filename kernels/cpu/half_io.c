/* half_io.c — the conversion spans and bf16 elementwise spans of half_io.h. */
#include "half_io.h"


GR_ISA_CLONES void gr_hio_decode_bf16(const uint16_t *restrict h, float *restrict f, int64_t n) {
    for (int64_t i = 0; i < n; i++) f[i] = gr_bf16_decode_hd(h[i]);
}

GR_ISA_CLONES void gr_hio_encode_bf16(const float *restrict f, uint16_t *restrict h, int64_t n) {
    for (int64_t i = 0; i < n; i++) h[i] = gr_bf16_encode_hd(f[i]);
}

/* fp16: the scalar conversions, and on x86-64 with F16C the hardware's
 * (vcvtps2ph rounds to nearest even; vcvtph2ps is exact), picked once. A NaN
 * is made the quiet NaN of its sign before vcvtps2ph, which then gives the
 * scalar encoder's pattern (sign | 0x7E00); the decoded patterns are equal
 * for every stored one (tests/test_precision.c checks both). */
static void gr_hio_decode_fp16_c(const uint16_t *restrict h, float *restrict f, int64_t n) {
    for (int64_t i = 0; i < n; i++) f[i] = gr_fp16_decode_hd(h[i]);
}

static void gr_hio_encode_fp16_c(const float *restrict f, uint16_t *restrict h, int64_t n) {
    for (int64_t i = 0; i < n; i++) h[i] = gr_fp16_encode_hd(f[i]);
}

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__SANITIZE_THREAD__)
#include <immintrin.h>

__attribute__((target("avx2,f16c"))) static void gr_hio_decode_fp16_hw(const uint16_t *restrict h,
                                                                        float *restrict f, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(f + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(h + i))));
    gr_hio_decode_fp16_c(h + i, f + i, n - i);
}

__attribute__((target("avx2,f16c"))) static void gr_hio_encode_fp16_hw(const float *restrict f,
                                                                        uint16_t *restrict h, int64_t n) {
    const __m256 sign = _mm256_set1_ps(-0.0f), qnan = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FC00000));
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 x = _mm256_loadu_ps(f + i);
        __m256 nan = _mm256_cmp_ps(x, x, _CMP_UNORD_Q);
        x = _mm256_blendv_ps(x, _mm256_or_ps(_mm256_and_ps(x, sign), qnan), nan);
        _mm_storeu_si128((__m128i *)(h + i), _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
    gr_hio_encode_fp16_c(f + i, h + i, n - i);
}

/* libgcc reads the CPU's features once at start; this only tests them */
static bool gr_hio_f16c(void) { return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c"); }

void gr_hio_decode_fp16(const uint16_t *restrict h, float *restrict f, int64_t n) {
    if (gr_hio_f16c()) gr_hio_decode_fp16_hw(h, f, n);
    else gr_hio_decode_fp16_c(h, f, n);
}

void gr_hio_encode_fp16(const float *restrict f, uint16_t *restrict h, int64_t n) {
    if (gr_hio_f16c()) gr_hio_encode_fp16_hw(f, h, n);
    else gr_hio_encode_fp16_c(f, h, n);
}
#else
void gr_hio_decode_fp16(const uint16_t *restrict h, float *restrict f, int64_t n) { gr_hio_decode_fp16_c(h, f, n); }
void gr_hio_encode_fp16(const float *restrict f, uint16_t *restrict h, int64_t n) { gr_hio_encode_fp16_c(f, h, n); }
#endif

/* relu(NaN) = NaN as on fp32 (PyTorch's clamp_min) */
GR_ISA_CLONES void gr_hio_relu_bf16(const uint16_t *restrict x, uint16_t *restrict y, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        float v = gr_bf16_decode_hd(x[i]);
        y[i] = gr_bf16_encode_hd(v <= 0.0f ? 0.0f : v);
    }
}

GR_ISA_CLONES void gr_hio_relu_bwd_bf16(const uint16_t *restrict dy, const uint16_t *restrict y,
                                        uint16_t *restrict dx, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        float g = gr_bf16_decode_hd(dy[i]);
        dx[i] = gr_bf16_encode_hd(gr_bf16_decode_hd(y[i]) <= 0.0f ? 0.0f : g);
    }
}

GR_ISA_CLONES void gr_hio_add2_relu_bf16(const uint16_t *restrict x0, const uint16_t *restrict x1,
                                         uint16_t *restrict y, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        const float v = gr_bf16_decode_hd(x0[i]) + gr_bf16_decode_hd(x1[i]);
        y[i] = gr_bf16_encode_hd(v <= 0.0f ? 0.0f : v); /* the rounding keeps the sign: the unfused bits */
    }
}

GR_ISA_CLONES void gr_hio_add2_mask_bf16(const uint16_t *restrict x0, const uint16_t *restrict x1,
                                         const uint16_t *restrict m, uint16_t *restrict y, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        const float s = gr_bf16_decode_hd(gr_bf16_encode_hd(gr_bf16_decode_hd(x0[i]) + gr_bf16_decode_hd(x1[i])));
        y[i] = gr_bf16_encode_hd(gr_bf16_decode_hd(m[i]) <= 0.0f ? 0.0f : s); /* the sum, then relu_bwd's bits */
    }
}

GR_ISA_CLONES void gr_hio_add2_bf16(const uint16_t *restrict x0, const uint16_t *restrict x1, uint16_t *restrict y,
                                    int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = gr_bf16_encode_hd(gr_bf16_decode_hd(x0[i]) + gr_bf16_decode_hd(x1[i]));
}
