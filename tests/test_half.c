/* test_half.c — the fp16 / bf16 storage rounding of common/gr_half.h
 * (gr_round_fp16_hd, gr_round_bf16_hd, gr_round_half_hd, gr_body_round)
 * against references that share no code with it:
 *   - hand-computed values: ties both ways, the fp16 overflow threshold
 *     (65504 / 65520), fp16 subnormals and underflow with the sign kept,
 *     bf16 overflow, bf16 (fp32-range) subnormals, NaN payloads, inf, ±0;
 *   - a double-arithmetic reference for both formats (frexp/floor give the
 *     two bracketing values; the nearer, the even one on a tie) over every
 *     boundary neighbourhood (each fp16 value and each midpoint ±2 float
 *     ulps, both signs; each bf16 pattern with the dropped half at 0, 1, 2,
 *     0x7FFE..0x8002, 0xFFFE, 0xFFFF), over all 2^32 patterns at a prime
 *     stride (two offsets), and through the fp16 subnormal range at a finer
 *     stride; with idempotence (a rounded value rounds to itself);
 *   - fp16 only, on x86-64 with F16C and AVX2: the hardware conversion
 *     (vcvtps2ph, round to nearest even) over every pattern of sign +
 *     (2^31: all magnitudes, NaNs and inf) and every 8th block of 2^16
 *     negative ones; and GCC's _Float16 conversion (libgcc soft-float, ~80 ns
 *     a call, so on the boundary sets and a coarse stride), itself checked
 *     against the hand table and the hardware, so it is known to be a real
 *     RNE;
 *   - the checks have teeth: a truncating bf16, a ties-away fp16 and the
 *     wrong format are caught;
 *   - the 16-bit storage (gr_*_encode_hd, gr_*_decode_hd): a value stored
 *     and read back is the rounded one over the same sets, fp16 patterns are
 *     F16C's, NaNs stay NaN;
 *   - gr_round_half_hd dispatch and gr_body_round over an array: fp16/bf16
 *     round just element i; GR_HALF_NONE (and an unknown format) leaves
 *     every value bit for bit, NaN payloads included.
 * Same value: both NaN (any payload), else the same bits, so -0 and +0 are
 * told apart. ~6 s of CPU (OpenMP over 2 cores: ~3-4 s). Needs no GPU.
 *
 * `test_half --dump` instead writes (input, fp16, bf16) bit triples of the
 * boundary sets and a stride to stdout for tests/half_torch.py. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/gr_half.h"
#include "gr_test.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>
#define HAVE_F16C_TEST 1
#endif

#ifdef _OPENMP
#define OMP(x) _Pragma(x)
#else
#define OMP(x)
#endif

typedef float (*round_fn)(float);

static uint32_t bits(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static float from_bits(uint32_t u) {
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* the same stored value: both NaN, or the same bits */
static int same(float a, float b) { return (isnan(a) && isnan(b)) || bits(a) == bits(b); }

static float fp16_fn(float x) { return gr_round_fp16_hd(x); }
static float bf16_fn(float x) { return gr_round_bf16_hd(x); }
/* stored in 16 bits and read back (gr_*_encode_hd / gr_*_decode_hd) */
static float fp16_store(float x) { return gr_fp16_decode_hd(gr_fp16_encode_hd(x)); }
static float bf16_store(float x) { return gr_bf16_decode_hd(gr_bf16_encode_hd(x)); }

/* ---- the double reference ---- */

/* A binary format: p significant bits, smallest quantum 2^qmin (its
 * subnormal step), largest finite value maxf. */
typedef struct fmt_ref {
    const char *name;
    int p, qmin;
    double maxf;
} fmt_ref;

static const fmt_ref REF_FP16 = {"fp16", 11, -24, 65504.0};
static const fmt_ref REF_BF16 = {"bf16", 8, -133, 0x1.FEp127};

/* x rounded to the format by arithmetic: in units of the quantum at x's
 * binade, x is y = lo + fr with lo = floor(y); take lo or lo + 1, whichever
 * is nearer, the even one on a tie; beyond maxf the result is inf. Every
 * step is exact in double (x has 24 bits, the scalings are powers of 2). */
static float ref_round(const fmt_ref *f, float x) {
    double v = (double)x, a = fabs(v);
    if (isnan(v) || isinf(v) || a == 0.0) return x;
    int e;
    (void)frexp(a, &e); /* 2^(e-1) <= a < 2^e */
    int qe = e - f->p;
    if (qe < f->qmin) qe = f->qmin;
    double y = ldexp(a, -qe), lo = floor(y), fr = y - lo;
    double k = fr > 0.5 ? lo + 1.0 : fr < 0.5 ? lo : fmod(lo, 2.0) == 0.0 ? lo : lo + 1.0;
    double r = ldexp(k, qe);
    if (r > f->maxf) r = INFINITY;
    return (float)copysign(r, v);
}

static float ref_fp16(float x) { return ref_round(&REF_FP16, x); }
static float ref_bf16(float x) { return ref_round(&REF_BF16, x); }

/* ---- input sets ---- */

typedef struct inputs {
    uint32_t *u;
    size_t n, cap;
} inputs;

static void push(inputs *s, float x) {
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 4096;
        s->u = realloc(s->u, s->cap * sizeof *s->u);
        if (!s->u) abort();
    }
    s->u[s->n++] = bits(x);
}

/* x and its float neighbours up to 2 ulps either way, both signs */
static void push_around(inputs *s, float x) {
    float lo = x, hi = x;
    for (int k = 0; k < 2; k++) {
        lo = nextafterf(lo, -INFINITY);
        hi = nextafterf(hi, INFINITY);
    }
    for (float t = lo; t <= hi; t = nextafterf(t, INFINITY)) {
        push(s, t);
        push(s, -t);
    }
}

/* The value of fp16 bit pattern h (0 <= h <= 0x7C00, 0x7C00 read as 2^16:
 * the rounding target just past the largest finite value). */
static double fp16_value(uint32_t h) {
    uint32_t e = h >> 10, m = h & 0x3FFu;
    return e == 0 ? ldexp((double)m, -24) : ldexp((double)(1024u + m), (int)e - 25);
}

/* NaN payloads (quiet, signalling, ones the bf16 carry would wrap into inf
 * or past the sign), infinities, zeros, the float extremes. */
static void push_specials(inputs *s) {
    static const uint32_t u[] = {
        0x7F800001u, 0x7F800100u, 0x7F807FFFu, 0x7F808000u, 0x7F80FFFFu, 0x7FC00000u, 0x7FC00001u,
        0x7FFF8000u, 0x7FFFFFFFu, 0xFF800001u, 0xFF808000u, 0xFFC00000u, 0xFFFFFFFFu, 0x7F800000u,
        0xFF800000u, 0x00000000u, 0x80000000u, 0x00000001u, 0x80000001u, 0x007FFFFFu, 0x807FFFFFu,
        0x00800000u, 0x7F7FFFFFu, 0xFF7FFFFFu, 0x7F7F8000u, 0x7F7F7FFFu, 0x7F7F8001u, 0x7F7E8000u,
    };
    for (size_t i = 0; i < sizeof u / sizeof *u; i++) push(s, from_bits(u[i]));
}

/* fp16: every finite value and every midpoint to the next (65504's next
 * is 2^16, so 65520 is among them), ±2 ulps, both signs. */
static inputs fp16_boundaries(void) {
    inputs s = {0};
    push_specials(&s);
    for (uint32_t h = 0; h < 0x7C00u; h++) {
        double v = fp16_value(h), w = fp16_value(h + 1);
        push_around(&s, (float)v);
        push_around(&s, (float)((v + w) / 2.0)); /* 12 bits: exact in float */
    }
    return s;
}

/* bf16: every 16-bit pattern (NaNs and infs included) with the dropped low
 * half at the values where the rounding changes: 0, 1, 2, the midpoint
 * 0x8000 ±2, and 0xFFFE, 0xFFFF. */
static inputs bf16_boundaries(void) {
    static const uint32_t lows[] = {0, 1, 2, 0x7FFE, 0x7FFF, 0x8000, 0x8001, 0x8002, 0xFFFE, 0xFFFF};
    inputs s = {0};
    push_specials(&s);
    for (uint32_t hi = 0; hi < 0x10000u; hi++)
        for (size_t k = 0; k < sizeof lows / sizeof *lows; k++) push(&s, from_bits(hi << 16 | lows[k]));
    return s;
}

/* ---- comparisons ---- */

/* fn against ref on bit patterns first, first+stride, ... up to last;
 * returns the mismatches, printing the first few under the label. */
static uint64_t cmp_range(const char *label, round_fn fn, round_fn ref, uint64_t first, uint64_t last,
                          uint64_t stride, int quiet) {
    uint64_t bad = 0;
    int shown = 0;
    for (uint64_t i = first; i <= last; i += stride) {
        float x = from_bits((uint32_t)i), got = fn(x), want = ref(x);
        /* idempotent: a stored value is stored unchanged */
        int ok = same(got, want) && same(fn(got), got);
        if (!ok) {
            if (!quiet && shown++ < 5)
                fprintf(stderr, "  %s: x %08x (%.9g): got %08x (%.9g), want %08x (%.9g)\n", label, (uint32_t)i,
                        (double)x, bits(got), (double)got, bits(want), (double)want);
            bad++;
        }
    }
    return bad;
}

static uint64_t cmp_set(const char *label, round_fn fn, round_fn ref, const inputs *s, int quiet) {
    uint64_t bad = 0;
    for (size_t i = 0; i < s->n; i++) bad += cmp_range(label, fn, ref, s->u[i], s->u[i], 1, quiet || bad >= 5);
    return bad;
}

/* ---- hand-computed values ---- */

typedef struct known {
    float x, fp16, bf16;
} known;

static const known KNOWN[] = {
    {1.0f, 1.0f, 1.0f},
    {0x1.002p0f, 1.0f, 1.0f},                       /* fp16 tie: 1 + 2^-11 -> 1 (even) */
    {0x1.006p0f, 0x1.008p0f, 1.0f},                 /* fp16 tie: 1 + 3*2^-11 -> 1 + 2^-9 (even) */
    {0x1.002002p0f, 0x1.004p0f, 1.0f},              /* just above the fp16 midpoint */
    {0x1.001ffep0f, 1.0f, 1.0f},                    /* just below it */
    {0x1.01p0f, 0x1.01p0f, 1.0f},                   /* bf16 tie: 1 + 2^-8 -> 1 (even) */
    {0x1.03p0f, 0x1.03p0f, 0x1.04p0f},              /* bf16 tie: 1 + 3*2^-8 -> 1 + 2^-6 (even) */
    {-0x1.03p0f, -0x1.03p0f, -0x1.04p0f},
    {0x1.010002p0f, 0x1.01p0f, 0x1.02p0f},          /* just above the bf16 midpoint */
    {3.14159274f, 3.140625f, 3.140625f},
    {0.1f, 0.0999755859375f, 0.10009765625f},
    {65504.0f, 65504.0f, 65536.0f},                 /* largest fp16 */
    {65519.0f, 65504.0f, 65536.0f},
    {0x1.ffdffep15f, 65504.0f, 65536.0f},           /* just below 65520 */
    {65520.0f, INFINITY, 65536.0f},                 /* tie: 65504 is odd -> 2^16 -> inf */
    {-65520.0f, -INFINITY, -65536.0f},
    {1e6f, INFINITY, 999424.0f},
    {0x1p-24f, 0x1p-24f, 0x1p-24f},                 /* smallest fp16 subnormal */
    {0x1p-25f, 0.0f, 0x1p-25f},                     /* tie between 0 and 2^-24 -> 0 (even) */
    {0x1.000002p-25f, 0x1p-24f, 0x1p-25f},          /* just above it */
    {-0x1p-25f, -0.0f, -0x1p-25f},                  /* underflow keeps the sign */
    {-0x1p-30f, -0.0f, -0x1p-30f},
    {0x1.8p-24f, 0x1p-23f, 0x1.8p-24f},             /* tie 1.5 quanta -> 2 (even) */
    {0x1.4p-23f, 0x1p-23f, 0x1.4p-23f},             /* tie 2.5 quanta -> 2 (even) */
    {0x1.ff8p-15f, 0x1.ff8p-15f, 0x1p-14f},         /* 1023 quanta: the largest subnormal */
    {0x1.ffcp-15f, 0x1p-14f, 0x1p-14f},             /* tie 1023.5 quanta -> 1024 = 2^-14 */
    {0x1.ff4p-15f, 0x1.ff0p-15f, 0x1p-14f},         /* tie 1022.5 quanta -> 1022 */
    {0x1.0p-14f, 0x1p-14f, 0x1p-14f},               /* smallest normal fp16 */
    {0x1.3p-20f, 0x1.3p-20f, 0x1.3p-20f},           /* 19 quanta exactly */
    {0x1.fep127f, INFINITY, 0x1.fep127f},           /* largest bf16 */
    {0x1.feffep127f, INFINITY, 0x1.fep127f},        /* below its midpoint */
    {0x1.ffp127f, INFINITY, INFINITY},              /* midpoint, 0x7F7F odd -> inf */
    {FLT_MAX, INFINITY, INFINITY},
    {-FLT_MAX, -INFINITY, -INFINITY},
    {0x1p-134f, 0.0f, 0.0f},                        /* bf16 subnormal tie -> 0 */
    {0x1.8p-133f, 0.0f, 0x1p-132f},                 /* tie 1.5 bf16 quanta -> 2 */
    {-0x1p-149f, -0.0f, -0.0f},
    {0x1.fcp-127f, 0.0f, 0x1.fcp-127f},             /* largest bf16 subnormal */
    {0x1.fep-127f, 0.0f, 0x1p-126f},                /* tie -> the smallest normal */
    {0.0f, 0.0f, 0.0f},
    {-0.0f, -0.0f, -0.0f},
    {INFINITY, INFINITY, INFINITY},
    {-INFINITY, -INFINITY, -INFINITY},
};

static void test_known(const char *label, round_fn fp16, round_fn bf16) {
    for (size_t i = 0; i < sizeof KNOWN / sizeof *KNOWN; i++) {
        const known *k = &KNOWN[i];
        if (fp16) {
            float r = fp16(k->x);
            CHECK_MSG(same(r, k->fp16), "%s fp16(%a) = %a, want %a", label, (double)k->x, (double)r,
                      (double)k->fp16);
        }
        if (bf16) {
            float r = bf16(k->x);
            CHECK_MSG(same(r, k->bf16), "%s bf16(%a) = %a, want %a", label, (double)k->x, (double)r,
                      (double)k->bf16);
        }
    }
    /* NaN stays NaN, whatever its payload or sign */
    static const uint32_t nans[] = {0x7F800001u, 0x7F808000u, 0x7FC00000u, 0x7FFFFFFFu, 0xFF800001u, 0xFFFFFFFFu};
    for (size_t i = 0; i < sizeof nans / sizeof *nans; i++) {
        float x = from_bits(nans[i]);
        if (fp16) CHECK_MSG(isnan(fp16(x)), "%s fp16(NaN %08x) = %08x", label, nans[i], bits(fp16(x)));
        if (bf16) CHECK_MSG(isnan(bf16(x)), "%s bf16(NaN %08x) = %08x", label, nans[i], bits(bf16(x)));
    }
}

/* ---- external fp16 references ---- */

#ifdef __FLT16_MANT_DIG__
/* GCC's conversion (libgcc __truncsfhf2 / __extendhfsf2 without F16C) */
static float gcc_fp16(float x) { return (float)(_Float16)x; }
#endif

/* The sweeps cover 1/GR_SWEEP of their patterns in unoptimized builds (the
 * sanitizer run of CI, ~100x slower); Release builds run them whole. */
#ifdef NDEBUG
#define GR_SWEEP 1
#else
#define GR_SWEEP 64
#endif

#ifdef HAVE_F16C_TEST
__attribute__((target("avx,f16c"))) static float f16c_fp16(float x) {
    __m128i h = _mm_cvtps_ph(_mm_set_ss(x), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    return _mm_cvtss_f32(_mm_cvtph_ps(h));
}

__attribute__((target("avx,f16c"))) static uint16_t f16c_bits(float x) {
    __m128i h = _mm_cvtps_ph(_mm_set_ss(x), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    return (uint16_t)_mm_extract_epi16(h, 0);
}

/* 65536 patterns hi << 16 | lo: gr_round_fp16_hd against vcvtps2ph eight
 * at a time; the mismatches, the first one's pattern in *first. */
__attribute__((target("avx2,f16c"))) static uint64_t f16c_block(uint32_t hi, float *buf, uint32_t *first) {
    float *restrict in = buf, *restrict got = buf + 65536, *restrict hw = buf + 2 * 65536;
    for (uint32_t lo = 0; lo < 65536u; lo++) in[lo] = from_bits(hi << 16 | lo);
    for (uint32_t lo = 0; lo < 65536u; lo++) got[lo] = gr_round_fp16_hd(in[lo]);
    for (uint32_t lo = 0; lo < 65536u; lo += 8) {
        __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(in + lo), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        _mm256_storeu_ps(hw + lo, _mm256_cvtph_ps(h));
    }
    uint64_t bad = 0;
    for (uint32_t lo = 0; lo < 65536u; lo++) {
        uint32_t g = bits(got[lo]), w = bits(hw[lo]);
        int nan_g = (g & 0x7FFFFFFFu) > 0x7F800000u, nan_w = (w & 0x7FFFFFFFu) > 0x7F800000u;
        if (g != w && !(nan_g && nan_w)) {
            if (!bad) *first = hi << 16 | lo;
            bad++;
        }
    }
    return bad;
}

/* Every non-negative float pattern (all magnitudes: 2^15 blocks) and every
 * 8th block of negative ones, over the threads: ~4 s of CPU. The sign is
 * also checked at every boundary of both signs above. */
static void test_f16c_exhaustive(void) {
    uint64_t bad = 0;
    uint32_t first = 0xFFFFFFFFu;
    OMP("omp parallel reduction(+ : bad)")
    {
        float *buf = malloc(3 * 65536 * sizeof *buf);
        uint32_t my_first = 0xFFFFFFFFu;
        if (!buf) abort();
        OMP("omp for schedule(dynamic, 64)")
        for (int k = 0; k < 0x8000 + 0x1000; k += GR_SWEEP) {
            uint32_t f = 0, hi = k < 0x8000 ? (uint32_t)k : 0x8000u + 8u * (uint32_t)(k - 0x8000);
            uint64_t b = f16c_block(hi, buf, &f);
            if (b && f < my_first) my_first = f;
            bad += b;
        }
        OMP("omp critical")
        if (my_first < first) first = my_first;
        free(buf);
    }
    CHECK_MSG(bad == 0,
              "fp16 vs F16C (patterns >= +0, every 8th 2^16 block below): %llu mismatches, first at %08x "
              "(got %08x, hw %08x)", (unsigned long long)bad, first, bits(gr_round_fp16_hd(from_bits(first))),
              bits(f16c_fp16(from_bits(first))));
}

/* F16C from cpuid (GCC's __builtin_cpu_supports knows it, clang's not);
 * AVX2 through the builtin, which also checks that the OS saves ymm. */
static int have_f16c_avx2(void) {
    unsigned a, b, c, d;
    return __builtin_cpu_supports("avx2") && __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
}
#endif

/* ---- wrong roundings the checks must catch ---- */

static float bf16_truncating(float x) { return from_bits(bits(x) & 0xFFFF0000u); }

/* fp16 with ties away from zero in the normal range (half an ulp added,
 * then truncated): differs from RNE only on ties above an even value */
static float fp16_ties_away(float x) {
    uint32_t u = bits(x), a = u & 0x7FFFFFFFu;
    if (a < 0x38800000u || a >= 0x477FF000u) return gr_round_fp16_hd(x);
    return from_bits((u & 0x80000000u) | ((a + 0x1000u) & 0xFFFFE000u));
}

/* ---- dispatch and the array body ---- */

static void test_body(void) {
    enum { N = 4099 };
    float *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y);
    if (!x || !y) abort();
    inputs sp = {0};
    push_specials(&sp);
    for (int i = 0; i < N; i++) {
        uint32_t u = (size_t)i < sp.n ? sp.u[i] : (uint32_t)gr_hash64_hd(0x4A1Full, (uint64_t)i);
        x[i] = from_bits(u);
    }
    free(sp.u);

    /* GR_HALF_NONE and an unknown format: the array comes back bit for bit */
    static const int none_fmts[] = {GR_HALF_NONE, 7};
    for (size_t k = 0; k < 2; k++) {
        memcpy(y, x, N * sizeof *y);
        for (int64_t i = 0; i < N; i++) gr_body_round((gr_half_fmt)none_fmts[k], y, i);
        CHECK_MSG(memcmp(x, y, N * sizeof *y) == 0, "gr_body_round format %d changed the array", none_fmts[k]);
        int diff = 0;
        for (int i = 0; i < N; i++) diff += bits(gr_round_half_hd((gr_half_fmt)none_fmts[k], x[i])) != bits(x[i]);
        CHECK_MSG(diff == 0, "gr_round_half_hd format %d changed %d values", none_fmts[k], diff);
    }
    /* fp16 and bf16: element i is the scalar rounding of x[i], the rest untouched */
    static const gr_half_fmt fmts[] = {GR_HALF_FP16, GR_HALF_BF16};
    for (size_t k = 0; k < 2; k++) {
        round_fn fn = fmts[k] == GR_HALF_FP16 ? fp16_fn : bf16_fn;
        memcpy(y, x, N * sizeof *y);
        for (int64_t i = 1; i < N - 1; i++) gr_body_round(fmts[k], y, i);
        int bad = !same(y[0], x[0]) || !same(y[N - 1], x[N - 1]);
        for (int i = 1; i < N - 1; i++)
            bad += !same(y[i], fn(x[i])) || !same(gr_round_half_hd(fmts[k], x[i]), fn(x[i]));
        CHECK_MSG(bad == 0, "gr_body_round format %d: %d wrong elements", (int)fmts[k], bad);
    }
    free(x);
    free(y);
}

/* ---- --dump: triples for tests/half_torch.py ---- */

static int dump(void) {
    inputs a = fp16_boundaries(), b = bf16_boundaries();
    inputs all[2] = {a, b};
    for (int k = 0; k < 2; k++)
        for (size_t i = 0; i < all[k].n; i++) {
            float x = from_bits(all[k].u[i]);
            uint32_t t[3] = {all[k].u[i], bits(gr_round_fp16_hd(x)), bits(gr_round_bf16_hd(x))};
            if (fwrite(t, sizeof t, 1, stdout) != 1) return 1;
        }
    for (uint64_t i = 0; i < (1ull << 32); i += 65537) {
        float x = from_bits((uint32_t)i);
        uint32_t t[3] = {(uint32_t)i, bits(gr_round_fp16_hd(x)), bits(gr_round_bf16_hd(x))};
        if (fwrite(t, sizeof t, 1, stdout) != 1) return 1;
    }
    free(a.u);
    free(b.u);
    return fflush(stdout) != 0;
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "--dump") == 0) return dump();

    /* hand-computed values: the functions and the double reference */
    test_known("gr", fp16_fn, bf16_fn);
    test_known("ref", ref_fp16, ref_bf16);

    inputs b16 = fp16_boundaries(), bb = bf16_boundaries();
    uint64_t bad;

    /* the double reference: boundaries, all patterns at a prime stride
     * (two offsets), the fp16 subnormal range (-2^-14, 2^-14) at a finer one */
    bad = cmp_set("fp16 boundaries", fp16_fn, ref_fp16, &b16, 0);
    CHECK_MSG(bad == 0, "fp16 vs reference on %zu boundary inputs: %llu mismatches", b16.n, (unsigned long long)bad);
    bad = cmp_set("bf16 boundaries", bf16_fn, ref_bf16, &bb, 0);
    CHECK_MSG(bad == 0, "bf16 vs reference on %zu boundary inputs: %llu mismatches", bb.n, (unsigned long long)bad);
    bad = cmp_range("fp16 stride", fp16_fn, ref_fp16, 0, 0xFFFFFFFFu, 1021u * GR_SWEEP, 0) +
          cmp_range("fp16 stride", fp16_fn, ref_fp16, 510, 0xFFFFFFFFu, 1021u * GR_SWEEP, 0);
    CHECK_MSG(bad == 0, "fp16 vs reference at stride 1021: %llu mismatches", (unsigned long long)bad);
    bad = cmp_range("bf16 stride", bf16_fn, ref_bf16, 0, 0xFFFFFFFFu, 1021u * GR_SWEEP, 0) +
          cmp_range("bf16 stride", bf16_fn, ref_bf16, 510, 0xFFFFFFFFu, 1021u * GR_SWEEP, 0);
    CHECK_MSG(bad == 0, "bf16 vs reference at stride 1021: %llu mismatches", (unsigned long long)bad);
    bad = cmp_range("fp16 subnormal", fp16_fn, ref_fp16, 0, 0x38800000u, 127, 0) +
          cmp_range("fp16 subnormal", fp16_fn, ref_fp16, 0x80000000u, 0xB8800000u, 127, 0);
    CHECK_MSG(bad == 0, "fp16 vs reference below 2^-14: %llu mismatches", (unsigned long long)bad);

    /* the checks have teeth: wrong roundings are caught */
    CHECK(cmp_set("", bf16_truncating, ref_bf16, &bb, 1) > 0);
    CHECK(cmp_set("", fp16_ties_away, ref_fp16, &b16, 1) > 0);
    CHECK(cmp_set("", bf16_fn, ref_fp16, &b16, 1) > 0);

#ifdef __FLT16_MANT_DIG__
    /* GCC's _Float16: RNE on the hand table, then the boundaries and a stride */
    test_known("_Float16", gcc_fp16, NULL);
    bad = cmp_set("fp16 vs _Float16", fp16_fn, gcc_fp16, &b16, 0);
    CHECK_MSG(bad == 0, "fp16 vs _Float16 on %zu boundary inputs: %llu mismatches", b16.n, (unsigned long long)bad);
    bad = cmp_range("fp16 vs _Float16", fp16_fn, gcc_fp16, 7, 0xFFFFFFFFu, 8191, 0);
    CHECK_MSG(bad == 0, "fp16 vs _Float16 at stride 8191: %llu mismatches", (unsigned long long)bad);
#else
    printf("_Float16 unsupported by this compiler: that fp16 reference skipped\n");
#endif

#ifdef HAVE_F16C_TEST
    if (have_f16c_avx2()) {
        test_known("F16C", f16c_fp16, NULL);
#ifdef __FLT16_MANT_DIG__
        bad = cmp_set("_Float16 vs F16C", gcc_fp16, f16c_fp16, &b16, 0);
        CHECK_MSG(bad == 0, "_Float16 vs F16C on the boundaries: %llu mismatches", (unsigned long long)bad);
#endif
        test_f16c_exhaustive();
    } else {
        printf("CPU without F16C and AVX2: the exhaustive fp16 check skipped\n");
    }
#else
    printf("not x86-64: the exhaustive fp16 check (F16C) skipped\n");
#endif

    /* half storage: read back, a stored value is the rounded one (the
     * double reference) over the same sets; fp16's bit patterns are the
     * hardware's (F16C), over the boundaries */
    bad = cmp_set("fp16 store", fp16_store, ref_fp16, &b16, 0) + cmp_set("bf16 store", bf16_store, ref_bf16, &bb, 0);
    CHECK_MSG(bad == 0, "half storage vs reference on the boundaries: %llu mismatches", (unsigned long long)bad);
    bad = cmp_range("fp16 store", fp16_store, ref_fp16, 3, 0xFFFFFFFFu, 1021u * GR_SWEEP, 0) +
          cmp_range("bf16 store", bf16_store, ref_bf16, 3, 0xFFFFFFFFu, 1021u * GR_SWEEP, 0) +
          cmp_range("fp16 store", fp16_store, ref_fp16, 0, 0x38800000u, 127, 0);
    CHECK_MSG(bad == 0, "half storage vs reference at a stride: %llu mismatches", (unsigned long long)bad);
    CHECK(cmp_set("", bf16_store, ref_fp16, &b16, 1) > 0);
    CHECK(gr_bf16_encode_hd(1.0f) == 0x3F80 && gr_fp16_encode_hd(1.0f) == 0x3C00 &&
          gr_fp16_encode_hd(-0.0f) == 0x8000 && gr_fp16_encode_hd(65520.0f) == 0x7C00 &&
          gr_fp16_encode_hd(0x1p-24f) == 0x0001 && gr_bf16_encode_hd(-INFINITY) == 0xFF80);
    /* a NaN whose payload lies in the dropped bits stays a NaN (not inf) */
    CHECK(isnan(gr_bf16_decode_hd(gr_bf16_encode_hd(from_bits(0x7F800001u)))) &&
          isnan(gr_fp16_decode_hd(gr_fp16_encode_hd(from_bits(0xFF800001u)))));
#ifdef HAVE_F16C_TEST
    if (have_f16c_avx2()) {
        uint64_t diff = 0;
        for (size_t i = 0; i < b16.n; i++) {
            float x = from_bits(b16.u[i]);
            if (isnan(x)) continue;
            diff += f16c_bits(x) != gr_fp16_encode_hd(x);
        }
        CHECK_MSG(diff == 0, "fp16 encode vs F16C bits on the boundaries: %llu mismatches", (unsigned long long)diff);
    }
#endif

    test_body();

    free(b16.u);
    free(bb.u);
    return gr_test_report();
}
