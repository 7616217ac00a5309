/* test_image_body.c — the bodies of the device image decoder
 * (kernels/body_image.h, launched by kernels/cuda/imgproc.cu) swept on the
 * CPU over whole outputs against the host path on the same decoded pixels:
 *   - training: RandomResizedCrop draws (boxes resized up and down, S x S
 *     windows, flips) against augment.c's gr_decode_sample on the image as
 *     an HWC uint8 sample, RGB and gray (one plane read as three);
 *   - evaluation: short side to R and the centre crop against image.c's
 *     gr_image_resize_crop then the decoder's table, images smaller and
 *     larger than R, wide and tall;
 * bit for bit. No GPU needed. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dataio/augment.h"
#include "dataio/image.h"
#include "gr_test.h"
#include "kernels/body_image.h"

static const double mean[3] = {123.675, 116.28, 103.53}, stdv[3] = {58.395, 57.12, 57.375};

static void make_image(gr_image *img, int64_t w, int64_t h, bool gray, uint32_t seed) {
    img->w = w, img->h = h;
    img->rgb = malloc((size_t)(w * h * 3));
    for (int64_t y = 0; y < h; y++)
        for (int64_t x = 0; x < w; x++)
            for (int c = 0; c < 3; c++) {
                uint32_t v = (uint32_t)(x * 7 + y * 13 + (gray ? 0 : c * 50)) ^ (seed * 2654435761u);
                v = (v * 2246822519u) >> 24;
                img->rgb[(y * w + x) * 3 + c] = (uint8_t)((v + (uint32_t)(x * 3 + y)) & 0xff);
                if (gray && c > 0) img->rgb[(y * w + x) * 3 + c] = img->rgb[(y * w + x) * 3];
            }
}

static void norm_init(gr_img_norm *nm, int64_t S, const gr_decoder *dec) {
    nm->S = S;
    for (int c = 0; c < 3; c++) {
        nm->k[c] = dec->scale[c], nm->b[c] = dec->bias[c];
        nm->mean[c] = mean[c], nm->std[c] = stdv[c];
    }
}

/* d over img: RGB interleaved, or its first channel alone as a gray plane */
static void desc_of(gr_img_desc *d, const gr_image *img, bool gray, uint8_t **plane) {
    memset(d, 0, sizeof *d);
    d->h = (int32_t)img->h, d->w = (int32_t)img->w;
    if (!gray) {
        d->px = img->rgb, d->pitch = img->w * 3, d->chans = 3;
        return;
    }
    *plane = malloc((size_t)(img->w * img->h));
    for (int64_t i = 0; i < img->w * img->h; i++) (*plane)[i] = img->rgb[i * 3];
    d->px = *plane, d->pitch = img->w, d->chans = 1;
}

/* 1 (and a failed check naming the first element) when got differs from want in any bit */
static int compare(const float *want, const float *got, int64_t n, const char *what) {
    int64_t i = 0;
    while (i < n && memcmp(&want[i], &got[i], sizeof(float)) == 0) i++;
    CHECK_MSG(i == n, "%s: element %lld: host %.9g, body %.9g", what, (long long)i, want[i < n ? i : 0],
              got[i < n ? i : 0]);
    return i < n;
}

static void test_train(int64_t W, int64_t H, int64_t S, bool gray, int draws) {
    gr_image img;
    make_image(&img, W, H, gray, (uint32_t)(W * 31 + H));
    const int64_t chw[3] = {3, H, W};
    gr_decoder dec;
    gr_decoder_init(&dec, GR_DT_UINT8, chw, true, S, S, mean, stdv);
    void *scratch = malloc(gr_decoder_scratch_bytes(&dec));
    const int64_t n = 3 * S * S;
    float *want = malloc((size_t)n * sizeof *want), *got = malloc((size_t)n * sizeof *got);
    gr_img_norm nm;
    norm_init(&nm, S, &dec);
    uint8_t *plane = NULL;
    gr_img_desc d;
    desc_of(&d, &img, gray, &plane);
    const gr_augment aug = {.crop = GR_CROP_RESIZED, .size = S, .scale = {0.08, 1.0}, .ratio = {0.75, 4.0 / 3.0},
                            .flip = true};
    int bad = 0, windows = 0, flips = 0;
    for (int k = 0; k < draws && !bad; k++) {
        gr_xform t;
        gr_augment_draw(&aug, H, W, 5, k / 7, k, &t);
        if (k % 5 == 4) t.h = t.w = S, t.y0 = (H - S) / 2, t.x0 = (W - S) / 2; /* a window (when it fits) */
        if (t.h > H || t.w > W) continue;
        windows += t.h == S && t.w == S;
        flips += t.flip;
        gr_decode_sample(&dec, img.rgb, &t, want, scratch);
        d.y0 = (int32_t)t.y0, d.x0 = (int32_t)t.x0, d.bh = (int32_t)t.h, d.bw = (int32_t)t.w, d.flip = t.flip;
        for (int64_t y = 0; y < S; y++)
            for (int64_t x = 0; x < S; x++) gr_body_img_train(&d, &nm, y, x, got);
        char what[128];
        snprintf(what, sizeof what, "train %lldx%lld%s S %lld draw %d (box %lldx%lld at %lld,%lld flip %d)",
                 (long long)W, (long long)H, gray ? " gray" : "", (long long)S, k, (long long)t.h, (long long)t.w,
                 (long long)t.y0, (long long)t.x0, (int)t.flip);
        bad = compare(want, got, n, what);
    }
    CHECK(flips > 0);
    if (S <= W && S <= H) CHECK(windows > 0);
    free(plane);
    free(want);
    free(got);
    free(scratch);
    gr_decoder_free(&dec);
    gr_image_free(&img);
}

static void test_eval(int64_t W, int64_t H, int64_t S, bool gray) {
    gr_image img;
    make_image(&img, W, H, gray, (uint32_t)(W + H * 17));
    const int64_t R = (S * 256 + 112) / 224;
    uint8_t *planes = malloc((size_t)(3 * S * S));
    gr_image_resize_crop(&img, R, S, planes);
    const int64_t chw[3] = {3, S, S};
    gr_decoder dec;
    gr_decoder_init(&dec, GR_DT_UINT8, chw, false, S, S, mean, stdv);
    const int64_t n = 3 * S * S;
    float *want = malloc((size_t)n * sizeof *want), *got = malloc((size_t)n * sizeof *got);
    const gr_xform t = {.h = S, .w = S};
    gr_decode_sample(&dec, planes, &t, want, NULL);
    gr_img_norm nm;
    norm_init(&nm, S, &dec);
    uint8_t *plane = NULL;
    gr_img_desc d;
    desc_of(&d, &img, gray, &plane);
    if (W <= H) d.fw = (int32_t)R, d.fh = (int32_t)GR_MAX(llround((double)H * (double)R / (double)W), R);
    else d.fh = (int32_t)R, d.fw = (int32_t)GR_MAX(llround((double)W * (double)R / (double)H), R);
    for (int64_t y = 0; y < S; y++)
        for (int64_t x = 0; x < S; x++) gr_body_img_eval(&d, &nm, y, x, got);
    char what[96];
    snprintf(what, sizeof what, "eval %lldx%lld%s S %lld R %lld", (long long)W, (long long)H, gray ? " gray" : "",
             (long long)S, (long long)R);
    compare(want, got, n, what);
    free(plane);
    free(want);
    free(got);
    free(planes);
    gr_decoder_free(&dec);
    gr_image_free(&img);
}

int main(void) {
    /* training: boxes shrunk (large images) and grown (small ones), odd sizes */
    test_train(500, 375, 224, false, 40);
    test_train(97, 131, 64, false, 60);
    test_train(40, 30, 56, false, 60);
    test_train(333, 200, 32, true, 60);
    test_train(64, 64, 64, false, 20);
    /* evaluation: shrinking and growing to R, wide and tall, gray */
    test_eval(500, 375, 224, false);
    test_eval(375, 500, 224, false);
    test_eval(120, 90, 224, false);
    test_eval(301, 203, 32, true);
    test_eval(37, 250, 24, false);
    test_eval(256, 256, 224, false);
    test_eval(1500, 1000, 32, false); /* 27 taps an axis */
    return gr_test_report();
}
