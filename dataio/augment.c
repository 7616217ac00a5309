/* augment.c — crop/flip draws and the sample decoder (see augment.h). */
#include "augment.h"
#include "h5util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define GR_AUGMENT_KEY 0x4155474d454e5431ull /* "AUGMENT1" */

/* Counters within one sample's stream: flip, then 4 per resized-crop try,
 * then the random-crop offsets. */
enum { DRAW_FLIP = 0, DRAW_TRY = 1, DRAW_CROP_I = 48, DRAW_CROP_J = 49, DRAWS_PER_SAMPLE = 64 };

static double draw_u01(uint64_t key, uint64_t ctr) { /* [0, 1), 53 bits */
    return (double)(gr_hash64(key, ctr) >> 11) * (1.0 / 9007199254740992.0);
}

static int64_t draw_int(uint64_t key, uint64_t ctr, int64_t n) { /* [0, n), n >= 1 */
    return (int64_t)(gr_hash64(key, ctr) % (uint64_t)n);
}

/* Python's round(): half to even (nearbyint in the default rounding mode). */
static int64_t round_even(double v) { return (int64_t)nearbyint(v); }

void gr_augment_out_shape(const gr_augment *a, int64_t H, int64_t W, int64_t *oh, int64_t *ow) {
    if (a->crop == GR_CROP_NONE) *oh = H, *ow = W;
    else *oh = *ow = a->size;
}

gr_status gr_augment_check(const gr_augment *a, int64_t H, int64_t W, const char *path, const char *dset,
                           gr_error *err) {
    if (a->crop == GR_CROP_RANDOM && (a->size > H + 2 * a->padding || a->size > W + 2 * a->padding))
        return gr_error_set(err, GR_ERR_DATA, "%s: %s: crop %lld is larger than the padded image %lldx%lld "
                            "(%lldx%lld + padding %lld); lower data.augment.crop.size or raise its padding",
                            path, dset, (long long)a->size, (long long)(H + 2 * a->padding),
                            (long long)(W + 2 * a->padding), (long long)H, (long long)W, (long long)a->padding);
    return GR_OK;
}

void gr_augment_rrc_box(const gr_augment *a, int64_t H, int64_t W, gr_rrc_draw_fn draw, void *ctx, gr_xform *t) {
    const double area = (double)H * (double)W;
    for (int k = 0; k < 10; k++) {
        const double target = area * draw(ctx, k, GR_RRC_AREA, 0), aspect = draw(ctx, k, GR_RRC_ASPECT, 0);
        const int64_t w = round_even(sqrt(target * aspect)), h = round_even(sqrt(target / aspect));
        if (w > 0 && w <= W && h > 0 && h <= H) {
            t->y0 = (int64_t)draw(ctx, k, GR_RRC_ROW, H - h + 1);
            t->x0 = (int64_t)draw(ctx, k, GR_RRC_COL, W - w + 1);
            t->h = h, t->w = w;
            return;
        }
    }
    /* torchvision's fallback: the centre box with the ratio clamped */
    const double in_ratio = (double)W / (double)H;
    int64_t w = W, h = H;
    if (in_ratio < a->ratio[0]) h = round_even((double)w / a->ratio[0]);
    else if (in_ratio > a->ratio[1]) w = round_even((double)h * a->ratio[1]);
    t->h = h, t->w = w;
    t->y0 = (H - h) / 2;
    t->x0 = (W - w) / 2;
}

/* gr_augment_draw's draws for gr_augment_rrc_box: counters base + DRAW_TRY + 4k + what. */
typedef struct rrc_hashed {
    const gr_augment *a;
    uint64_t key, base;
    double lr0, lr1;
} rrc_hashed;

static double rrc_hashed_draw(void *ctx, int k, int what, int64_t n) {
    const rrc_hashed *r = ctx;
    const uint64_t c = r->base + DRAW_TRY + 4 * (uint64_t)k + (uint64_t)what;
    switch (what) {
    case GR_RRC_AREA: return r->a->scale[0] + (r->a->scale[1] - r->a->scale[0]) * draw_u01(r->key, c);
    case GR_RRC_ASPECT: return exp(r->lr0 + (r->lr1 - r->lr0) * draw_u01(r->key, c));
    default: return (double)draw_int(r->key, c, n);
    }
}

static void draw_resized(const gr_augment *a, int64_t H, int64_t W, uint64_t key, uint64_t base, gr_xform *t) {
    rrc_hashed r = {a, key, base, log(a->ratio[0]), log(a->ratio[1])};
    gr_augment_rrc_box(a, H, W, rrc_hashed_draw, &r, t);
}

void gr_augment_draw(const gr_augment *a, int64_t H, int64_t W, uint64_t seed, int64_t epoch, int64_t sample,
                     gr_xform *t) {
    const uint64_t key = gr_hash64(seed ^ GR_AUGMENT_KEY, (uint64_t)epoch);
    const uint64_t base = (uint64_t)sample * DRAWS_PER_SAMPLE;
    t->y0 = t->x0 = 0;
    t->h = H, t->w = W;
    switch (a->crop) {
    case GR_CROP_NONE: break;
    case GR_CROP_RANDOM: {
        const int64_t P = a->padding, S = a->size;
        t->y0 = draw_int(key, base + DRAW_CROP_I, H + 2 * P - S + 1) - P;
        t->x0 = draw_int(key, base + DRAW_CROP_J, W + 2 * P - S + 1) - P;
        t->h = t->w = S;
        break;
    }
    case GR_CROP_RESIZED: draw_resized(a, H, W, key, base, t); break;
    case GR_CROP_CENTER: {
        const int64_t S = a->size;
        /* torchvision pads a smaller image by floor((S - H) / 2) first */
        t->y0 = S > H ? -((S - H) / 2) : round_even((double)(H - S) / 2.0);
        t->x0 = S > W ? -((S - W) / 2) : round_even((double)(W - S) / 2.0);
        t->h = t->w = S;
        break;
    }
    }
    t->flip = a->flip && (gr_hash64(key, base + DRAW_FLIP) >> 63);
}

/* ---- decoder ---- */

void gr_decoder_init(gr_decoder *d, gr_dtype dtype, const int64_t chw[3], bool nhwc, int64_t oh, int64_t ow,
                     const double *mean, const double *std) {
    memset(d, 0, sizeof *d);
    d->dtype = dtype;
    d->c = chw[0], d->h = chw[1], d->w = chw[2];
    d->nhwc = nhwc;
    d->oh = oh, d->ow = ow;
    d->scale = gr_xmalloc((size_t)d->c * sizeof *d->scale);
    d->bias = gr_xmalloc((size_t)d->c * sizeof *d->bias);
    d->mean = gr_xmalloc((size_t)d->c * sizeof *d->mean);
    d->inv = gr_xmalloc((size_t)d->c * sizeof *d->inv);
    if (dtype == GR_DT_UINT8) d->lut = gr_xmalloc((size_t)d->c * 256 * sizeof *d->lut);
    for (int64_t c = 0; c < d->c; c++) {
        double m = mean ? mean[c] : 0.0, s = std ? std[c] : 1.0;
        d->mean[c] = m;
        d->inv[c] = 1.0 / s;
        d->scale[c] = (float)(1.0 / s);
        d->bias[c] = (float)(-m / s);
        if (d->lut)
            for (int v = 0; v < 256; v++) d->lut[c * 256 + v] = (float)(((double)v - m) / s);
    }
}

void gr_decoder_free(gr_decoder *d) {
    free(d->scale);
    free(d->bias);
    free(d->mean);
    free(d->inv);
    free(d->lut);
    memset(d, 0, sizeof *d);
}

size_t gr_decoder_scratch_bytes_for(int64_t w, int64_t ow) {
    /* resize: x taps and weights, two interpolated rows, one box row (at
     * most the image width, plus one) */
    /* decode_resized_rgb8: two tap arrays, weights, a blended row of w x 3 */
    const size_t rgb8 = (size_t)ow * (2 * sizeof(int32_t) + sizeof(float)) + (size_t)w * 3 * sizeof(float) + 64;
    return GR_MAX(rgb8, (size_t)ow * (sizeof(int32_t) + 3 * sizeof(float)) + (size_t)(w + 1) * sizeof(float) + 64);
}

size_t gr_decoder_scratch_bytes(const gr_decoder *d) { return gr_decoder_scratch_bytes_for(d->w, d->ow); }

typedef struct strides { int64_t c, y, x; } strides;

static strides element_strides(const gr_decoder *d) {
    strides s;
    if (d->nhwc) s.c = 1, s.x = d->c, s.y = d->w * d->c;
    else s.x = 1, s.y = d->w, s.c = d->h * d->w;
    return s;
}

static inline float load_raw(const gr_decoder *d, const void *src, int64_t off) {
    switch (d->dtype) {
    case GR_DT_UINT8: return (float)((const uint8_t *)src)[off];
    case GR_DT_FLOAT16: return gr_h5_half_to_float(((const uint16_t *)src)[off]);
    case GR_DT_FLOAT32: break;
    }
    return ((const float *)src)[off];
}

static inline float load_norm(const gr_decoder *d, const void *src, int64_t off, int64_t c) {
    if (d->lut) return d->lut[c * 256 + ((const uint8_t *)src)[off]];
    return (float)(((double)load_raw(d, src, off) - d->mean[c]) * d->inv[c]);
}

/* Box the size of the output: a window (zeros outside the image), maybe
 * mirrored. */
static void decode_window(const gr_decoder *d, const void *src, const gr_xform *t, float *dst) {
    const strides s = element_strides(d);
    const int64_t oh = d->oh, ow = d->ow;
    /* output columns [xa, xb) read inside the image */
    int64_t xa, xb;
    if (!t->flip) xa = GR_MAX(0, -t->x0), xb = GR_MIN(ow, d->w - t->x0);
    else xa = GR_MAX(0, t->x0 + ow - d->w), xb = GR_MIN(ow, t->x0 + ow);
    if (xb < xa) xb = xa;
    for (int64_t c = 0; c < d->c; c++) {
        const float zero = d->bias[c];
        for (int64_t y = 0; y < oh; y++) {
            float *o = dst + (c * oh + y) * ow;
            const int64_t sy = t->y0 + y;
            if (sy < 0 || sy >= d->h) {
                for (int64_t x = 0; x < ow; x++) o[x] = zero;
                continue;
            }
            for (int64_t x = 0; x < xa; x++) o[x] = zero;
            for (int64_t x = xb; x < ow; x++) o[x] = zero;
            const int64_t row = c * s.c + sy * s.y;
            if (d->lut && s.x == 1 && !t->flip) { /* the common case: plain uint8 rows */
                const uint8_t *p = (const uint8_t *)src + row + t->x0;
                const float *lut = d->lut + c * 256;
                for (int64_t x = xa; x < xb; x++) o[x] = lut[p[x]];
            } else {
                for (int64_t x = xa; x < xb; x++) {
                    int64_t sx = t->flip ? t->x0 + ow - 1 - x : t->x0 + x;
                    o[x] = load_norm(d, src, row + sx * s.x, c);
                }
            }
        }
    }
}

/* torch's area_pixel_compute_source_index for linear modes, align_corners
 * false: the centre of output pixel i maps to scale * (i + 0.5) - 0.5,
 * clamped at 0; torch 1.13 on the CPU holds the scale in float and the rest
 * in double, then rounds the weight to float. */
static inline double source_index(float scale, int64_t i) {
    double v = (double)scale * ((double)i + 0.5) - 0.5;
    return v < 0.0 ? 0.0 : v;
}

/* The resize loops, built twice on x86-64 GCC (AVX2+FMA and baseline) and
 * picked at load time: the x pass is a float gather, which AVX2 does 8 at a
 * time. (Not under ThreadSanitizer: its runtime crashes at start on the
 * ifunc resolver target_clones makes.) */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && !defined(__SANITIZE_THREAD__)
#define GR_MULTIVERSION __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define GR_MULTIVERSION
#endif

/* One source row of the box, as floats in stored units, plus a copy of its
 * last pixel so the right tap of the last column needs no test. */
GR_MULTIVERSION
static void box_row(const gr_decoder *d, const void *src, int64_t off, int64_t xs, int64_t bw, float *restrict f) {
    if (d->dtype == GR_DT_UINT8 && xs == 1) {
        const uint8_t *restrict p = (const uint8_t *)src + off;
        for (int64_t i = 0; i < bw; i++) f[i] = (float)p[i];
    } else {
        for (int64_t i = 0; i < bw; i++) f[i] = load_raw(d, src, off + i * xs);
    }
    f[bw] = f[bw - 1];
}

GR_MULTIVERSION
static void x_pass(const float *restrict f, const int32_t *restrict xi, const float *restrict lx, int64_t ow,
                   float *restrict out) {
    for (int64_t x = 0; x < ow; x++) {
        float a = f[xi[x]], b = f[xi[x] + 1];
        out[x] = a + (b - a) * lx[x];
    }
}

GR_MULTIVERSION
static void y_pass(const float *restrict r0, const float *restrict r1, float ly, float k, float b, int64_t ow,
                   float *restrict o) {
    for (int64_t x = 0; x < ow; x++) o[x] = (r0[x] + (r1[x] - r0[x]) * ly) * k + b;
}

/* decode_resized_rgb8's passes: two byte rows blended along y into floats
 * (n = the box's width x 3, contiguous: vectorizes), then each output pixel
 * of channel c interpolated along x from them (taps xa, xb: pixel offsets x
 * 3) and normalized. */
GR_MULTIVERSION
static void rgb8_y_pass(const uint8_t *restrict r0, const uint8_t *restrict r1, float ly, int64_t n,
                        float *restrict f) {
    for (int64_t i = 0; i < n; i++) f[i] = (float)r0[i] + ((float)r1[i] - (float)r0[i]) * ly;
}

GR_MULTIVERSION
static void rgb8_x_pass(const float *restrict f, const int32_t *restrict xa, const int32_t *restrict xb,
                        const float *restrict lx, float k, float b, int64_t ow, float *restrict o) {
    for (int64_t x = 0; x < ow; x++) {
        const float a = f[xa[x]], e = f[xb[x]];
        o[x] = (a + (e - a) * lx[x]) * k + b;
    }
}

/* The same for a sub-pixel box: from `off` (the box's start past its
 * integer region's) with step `scale`, kept inside the region's n pixels. */
static inline double sub_index(double off, double scale, int64_t i, int64_t n) {
    double v = off + scale * ((double)i + 0.5) - 0.5;
    return v < 0.0 ? 0.0 : v > (double)(n - 1) ? (double)(n - 1) : v;
}

/* The source position, within the box, of output row (axis 0) or column
 * (axis 1) i of `out`: torch's index for t's integer box, or fbox's. */
static inline double box_index(const gr_xform *t, const double *fbox, int axis, int64_t out, int64_t i) {
    const int64_t n = axis ? t->w : t->h, start = axis ? t->x0 : t->y0;
    if (fbox) return sub_index(fbox[axis] - (double)start, fbox[2 + axis] / (double)out, i, n);
    return source_index((float)n / (float)out, i);
}

/* The x taps of the resize to ow columns (mirrored when t flips): column x
 * reads box pixels i and min(i + 1, w - 1) at element offsets xa[x], xb[x]
 * (pixel x stride; xb NULL: not wanted), weight lx[x] on the second. */
static void x_taps(const gr_xform *t, const double *fbox, int64_t ow, int64_t stride, int32_t *xa, int32_t *xb,
                   float *lx) {
    for (int64_t x = 0; x < ow; x++) {
        const double v = box_index(t, fbox, 1, ow, t->flip ? ow - 1 - x : x);
        const int64_t i = GR_MIN((int64_t)v, t->w - 1);
        xa[x] = (int32_t)(i * stride);
        if (xb) xb[x] = (int32_t)(GR_MIN(i + 1, t->w - 1) * stride);
        lx[x] = (float)(v - (double)i);
    }
}

/* Bilinear resize of the box (inside the image) to oh x ow, separable: each
 * source row an output row needs is converted to floats and interpolated
 * along x once (two kept, since the rows needed only move down), then the
 * two rows are blended along y and normalized in one pass. fbox (NULL: the
 * integer box) is a sub-pixel box {y, x, h, w} inside t's. */
static void decode_resized(const gr_decoder *d, const void *src, const gr_xform *t, const double *fbox, float *dst,
                           void *scratch) {
    const strides s = element_strides(d);
    const int64_t oh = d->oh, ow = d->ow, bw = t->w;
    int32_t *xi = scratch;
    float *lx = (float *)(xi + ow), *ra = lx + ow, *rb = ra + ow, *f = rb + ow;
    x_taps(t, fbox, ow, 1, xi, NULL, lx);
    for (int64_t c = 0; c < d->c; c++) {
        const float k = d->scale[c], b = d->bias[c];
        float *r0 = ra, *r1 = rb;
        int64_t have0 = -1, have1 = -1; /* source rows now in r0, r1 */
        for (int64_t y = 0; y < oh; y++) {
            const double v = box_index(t, fbox, 0, oh, y);
            int64_t i = (int64_t)v;
            int64_t y0 = t->y0 + i, y1 = y0 + (i < t->h - 1 ? 1 : 0);
            float ly = (float)(v - (double)i);
            if (have0 != y0) {
                if (have1 == y0) {
                    float *tmp = r0;
                    r0 = r1, r1 = tmp;
                    have0 = have1;
                    have1 = -1;
                } else {
                    box_row(d, src, c * s.c + y0 * s.y + t->x0 * s.x, s.x, bw, f);
                    x_pass(f, xi, lx, ow, r0);
                    have0 = y0;
                }
            }
            const float *q1 = r0;
            if (y1 != y0) {
                if (have1 != y1) {
                    box_row(d, src, c * s.c + y1 * s.y + t->x0 * s.x, s.x, bw, f);
                    x_pass(f, xi, lx, ow, r1);
                    have1 = y1;
                }
                q1 = r1;
            }
            y_pass(r0, q1, ly, k, b, ow, dst + (c * oh + y) * ow);
        }
    }
}

/* decode_resized for interleaved RGB bytes (decoded JPEGs, stored HWC
 * images), y first: each output row blends its two source rows' bytes of
 * the box, all three channels at once, then interpolates along x. Per output
 * row that is the box's width x 3 contiguous blends plus ow x 3 gathers,
 * where x first made about two source rows x ow x 3 scalar byte taps (a
 * third of the JPEG loader's time went there). The same taps and weights;
 * the order of the two lerps differs, so results differ from decode_resized's
 * in the last bits (test_loader_augment bounds it). */
static void decode_resized_rgb8(const gr_decoder *d, const uint8_t *src, const gr_xform *t, const double *fbox,
                                float *dst, void *scratch) {
    const int64_t oh = d->oh, ow = d->ow, bw = t->w, row = d->w * 3;
    int32_t *xa = scratch, *xb = xa + ow;
    float *lx = (float *)(xb + ow), *f = lx + ow;
    x_taps(t, fbox, ow, 3, xa, xb, lx);
    for (int64_t y = 0; y < oh; y++) {
        const double v = box_index(t, fbox, 0, oh, y);
        int64_t i = (int64_t)v;
        const int64_t y0 = t->y0 + i, y1 = y0 + (i < t->h - 1 ? 1 : 0);
        const uint8_t *r0 = src + y0 * row + t->x0 * 3, *r1 = src + y1 * row + t->x0 * 3;
        rgb8_y_pass(r0, r1, (float)(v - (double)i), bw * 3, f);
        for (int c = 0; c < 3; c++)
            rgb8_x_pass(f + c, xa, xb, lx, d->scale[c], d->bias[c], ow, dst + (c * oh + y) * ow);
    }
}

static bool is_rgb8(const gr_decoder *d) { return d->dtype == GR_DT_UINT8 && d->nhwc && d->c == 3; }

void gr_decode_sample(const gr_decoder *d, const void *src, const gr_xform *t, float *dst, void *scratch) {
    if (t->h == d->oh && t->w == d->ow) decode_window(d, src, t, dst);
    else if (is_rgb8(d) && t->y0 >= 0 && t->x0 >= 0) decode_resized_rgb8(d, src, t, NULL, dst, scratch);
    else decode_resized(d, src, t, NULL, dst, scratch);
}

void gr_decode_sample_sub(const gr_decoder *d, const void *src, const gr_xform *t, const double fbox[4], float *dst,
                          void *scratch) {
    if (is_rgb8(d)) decode_resized_rgb8(d, src, t, fbox, dst, scratch);
    else decode_resized(d, src, t, fbox, dst, scratch);
}
