/* test_cuda_decode.c — data.decode gpu end to end below the runner: an
 * encoded split made here (JPEGs 4:2:0 and grayscale from gr_image_encode_jpeg,
 * 4:4:4 and progressive from libjpeg, a CMYK JPEG, a PNG) read by the
 * loader with encoded_payload, each batch decoded by the CUDA backend's
 * image decoder (nvJPEG + kernels/cuda/imgproc.cu) into a device tensor,
 * against the plain loader's host decode of the same batch (the same
 * draws), training (resized crops, flips) and evaluation (centre):
 *   - every JPEG but the CMYK one is taken by the device (need_host 0), the
 *     CMYK one is given back, the PNG's row is left alone;
 *   - each sample the device decoded is within 30 dB PSNR of the host
 *     path's (which decodes at a reduced DCT scale: a different resampling
 *     of the same picture), and within 35 dB of the same transform on
 *     libjpeg's full-size decode (tests/test_image_body.c shows the
 *     transform itself is the host's bit for bit, so this bounds only
 *     nvJPEG's IDCT and chroma upsampling against libjpeg-turbo's).
 * Label `gpu`: exits 77 (skipped) without a CUDA device, or in a CUDA build
 * without nvJPEG. */
#include <math.h>

#include "convert_images.h"
#include "dataio/image.h"
#include "kernels/backend.h"
#include "kernels/body_image.h"

#define SIDE 64
#define BATCH 6

static uint8_t px_smooth(int x, int y, int c) {
    const double v = 128 + 70 * sin(0.045 * x + 1.3 * (c % 3)) * cos(0.037 * y) + 25 * sin(0.11 * (x + y));
    return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

/* An image of px_smooth as JPEG bytes: gr_image_encode_jpeg (4:2:0, or gray)
 * or, for 4:4:4 and progressive, libjpeg directly. */
static void write_test_jpeg(const char *path, int w, int h, int kind) {
    if (kind == 2) { /* 4:4:4 */
        write_jpeg_sampled(path, w, h, 3, 92, false, 1, 1, px_smooth);
        return;
    }
    if (kind == 3) { /* progressive 4:2:0 */
        write_jpeg_as(path, w, h, 3, 90, true, px_smooth);
        return;
    }
    gr_image img = {.w = w, .h = h, .rgb = malloc((size_t)(w * h * 3))};
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            for (int c = 0; c < 3; c++) img.rgb[(y * w + x) * 3 + c] = px_smooth(x, y, c);
    uint8_t *buf = NULL;
    size_t n = 0;
    char why[GR_IMAGE_WHY_MAX];
    GR_ASSERT(gr_image_encode_jpeg(&img, kind == 1 ? 1 : 3, 90, &buf, &n, why));
    write_bytes(path, buf, n);
    free(buf);
    gr_image_free(&img);
}

static void make_corpus(const char *dir) {
    static const struct { int w, h, kind; } im[] = {
        {320, 240, 0}, {97, 131, 0}, {500, 375, 0}, {64, 48, 0}, {51, 77, 0}, /* 4:2:0 */
        {200, 150, 2}, {123, 77, 2},                                           /* 4:4:4 */
        {160, 120, 1}, {45, 61, 1},                                            /* gray */
        {180, 140, 3},                                                         /* progressive */
    };
    rm_rf(dir);
    mkdir(dir, 0755);
    mkdir(join(dir, "a"), 0755);
    mkdir(join(dir, "b"), 0755);
    char path[1024];
    for (size_t i = 0; i < sizeof im / sizeof im[0]; i++) {
        snprintf(path, sizeof path, "%s/%s/%02zu.jpg", dir, i % 2 ? "a" : "b", i);
        write_test_jpeg(path, im[i].w, im[i].h, im[i].kind);
    }
    const uint8_t ink[4] = {30, 90, 150, 20};
    snprintf(path, sizeof path, "%s/a/cmyk.jpg", dir);
    write_jpeg_cmyk(path, 40, 30, ink, 0);
    snprintf(path, sizeof path, "%s/b/pic.png", dir);
    write_png(path, 50, 40, PNG_COLOR_TYPE_RGB, 8, px_smooth);
}

/* PSNR (dB, 255 peak) of a against b, [3, SIDE, SIDE] normalized floats, in stored units. */
static double psnr(const float *a, const float *b, const double *std, double *maxd) {
    double se = 0;
    *maxd = 0;
    for (int c = 0; c < 3; c++)
        for (int k = 0; k < SIDE * SIDE; k++) {
            const double d = ((double)a[c * SIDE * SIDE + k] - b[c * SIDE * SIDE + k]) * std[c];
            se += d * d;
            *maxd = fmax(*maxd, fabs(d));
        }
    const double mse = se / (3.0 * SIDE * SIDE);
    return mse > 0 ? 10 * log10(255.0 * 255.0 / mse) : 999;
}

/* The transform of sample i of e on libjpeg's full-size decode of its bytes. */
static bool full_size_ref(const gr_enc_batch *e, int64_t i, float *out) {
    const gr_enc_sample *o = &e->s[i];
    gr_image img;
    char why[GR_IMAGE_WHY_MAX];
    if (!gr_image_decode_mem(e->bytes + o->off, o->len, GR_IMAGE_MAX_SIDE, &img, why)) return false;
    gr_img_desc d = {.px = img.rgb, .pitch = img.w * 3, .h = (int32_t)img.h, .w = (int32_t)img.w, .chans = 3,
                     .y0 = o->y0, .x0 = o->x0, .bh = o->bh, .bw = o->bw, .flip = o->flip};
    const int64_t R = e->short_side;
    if (o->w <= o->h) d.fw = (int32_t)R, d.fh = (int32_t)GR_MAX(llround((double)o->h * R / o->w), R);
    else d.fh = (int32_t)R, d.fw = (int32_t)GR_MAX(llround((double)o->w * R / o->h), R);
    gr_img_norm nm = {.S = SIDE};
    for (int c = 0; c < 3; c++) {
        nm.mean[c] = e->mean[c], nm.std[c] = e->std[c];
        nm.k[c] = (float)(1.0 / e->std[c]), nm.b[c] = (float)(-e->mean[c] / e->std[c]);
    }
    for (int64_t y = 0; y < SIDE; y++)
        for (int64_t x = 0; x < SIDE; x++) {
            if (e->center) gr_body_img_eval(&d, &nm, y, x, out);
            else gr_body_img_train(&d, &nm, y, x, out);
        }
    gr_image_free(&img);
    return true;
}

static double worst_host = 999, worst_full = 999;
static int decoded, refused, left;

static void run(gr_backend *be, gr_dataset *ds, const gr_augment *aug, bool shuffle, bool drop_last) {
    gr_error err = {0};
    gr_loader_config lc = {.batch = BATCH, .shuffle = shuffle, .drop_last = drop_last, .seed = 21, .world = 1,
                           .n_norm = 3, .mean = {123.675, 116.28, 103.53}, .std = {58.395, 57.12, 57.375},
                           .prefetch = 2, .workers = 2, .aug = *aug};
    gr_loader *ref = NULL, *pay = NULL;
    CHECK_MSG(gr_loader_open(ds, &lc, &ref, &err) == GR_OK, "%s", err.msg);
    lc.encoded_payload = true;
    CHECK_MSG(gr_loader_open(ds, &lc, &pay, &err) == GR_OK, "%s", err.msg);
    if (!ref || !pay) return;
    const size_t per = 3 * SIDE * SIDE, bytes = BATCH * per * sizeof(float);
    float *dev = gr_backend_alloc(be, bytes), *got = malloc(bytes), *full = malloc(per * sizeof(float));
    uint8_t *nan_rows = malloc(bytes);
    memset(nan_rows, 0xff, bytes);
    uint8_t need[BATCH];
    char why[256];
    const int64_t nb = 2 * gr_loader_batches_per_epoch(ref);
    for (int64_t k = 0; k < nb; k++) {
        gr_batch *a = NULL, *b = NULL;
        CHECK(gr_loader_next(ref, &a, &err) == GR_OK && gr_loader_next(pay, &b, &err) == GR_OK);
        if (!a || !b || !b->enc) break;
        const gr_enc_batch *e = b->enc;
        gr_backend_upload(be, dev, nan_rows, bytes); /* NaN in every row left alone */
        CHECK_MSG(gr_backend_decode_images(be, e, dev, need, why, sizeof why, &err) == GR_OK, "%s", err.msg);
        gr_backend_download(be, got, dev, bytes);
        for (int64_t i = 0; i < b->n; i++) {
            const gr_enc_sample *o = &e->s[i];
            const bool cmyk = o->c == 3 && !o->host && need[i];
            if (o->host || need[i]) {
                uint32_t bits;
                memcpy(&bits, got + i * per, sizeof bits);
                CHECK_MSG(bits == 0xffffffffu, "sample %lld: its row was written though the host decodes it",
                          (long long)o->index);
                CHECK_MSG(o->host || cmyk, "sample %lld (%dx%dx%d): given back to the host: %s", (long long)o->index,
                          o->h, o->w, o->c, why);
                left += o->host, refused += need[i];
                continue;
            }
            decoded++;
            double md, mf;
            const double p = psnr(got + i * per, a->x + i * per, lc.std, &md);
            CHECK_MSG(p >= 30, "sample %lld (%dx%dx%d, %s, box %dx%d): %.1f dB against the host path (max diff %.1f)",
                      (long long)o->index, o->h, o->w, o->c, e->center ? "centre" : "train", o->bh, o->bw, p, md);
            worst_host = fmin(worst_host, p);
            CHECK(full_size_ref(e, i, full));
            const double q = psnr(got + i * per, full, lc.std, &mf);
            CHECK_MSG(q >= 35, "sample %lld (%dx%dx%d): %.1f dB against libjpeg's full-size decode (max diff %.1f)",
                      (long long)o->index, o->h, o->w, o->c, q, mf);
            worst_full = fmin(worst_full, q);
        }
        gr_loader_release(ref, a);
        gr_loader_release(pay, b);
    }
    gr_backend_dealloc(be, dev);
    free(got);
    free(full);
    free(nan_rows);
    gr_loader_close(ref);
    gr_loader_close(pay);
}

int main(void) {
    gr_error err = {0};
    gr_backend *be = NULL;
    if (gr_backend_create("cuda:0", 0, &be, &err) != GR_OK) {
        printf("SKIP: %s\n", err.msg);
        return 77;
    }
    char desc[640];
    if (gr_backend_decoder_open(be, desc, sizeof desc, &err) != GR_OK) {
#ifdef GR_HAVE_NVJPEG
        CHECK_MSG(false, "the decoder did not open: %s", err.msg);
        gr_backend_free(be);
        return gr_test_report();
#else
        printf("SKIP: %s\n", err.msg);
        gr_backend_free(be);
        return 77;
#endif
    }
    printf("  decoder: %s\n", desc);
    const char *dir = tmp_path("cuda_decode_pics"), *out = tmp_path("cuda_decode.h5");
    make_corpus(dir);
    remove(out);
    gr_imagefolder_config cfg = {.dir = dir, .store = GR_STORE_JPEG};
    CHECK_MSG(gr_data_convert_imagefolder(&cfg, out, false, false, NULL, &err) == GR_OK, "%s", err.msg);
    gr_dataset *ds = NULL;
    CHECK_MSG(gr_dataset_open(out, "/train", &ds, &err) == GR_OK, "%s", err.msg);
    if (ds) {
        const gr_augment train = {.crop = GR_CROP_RESIZED, .size = SIDE, .scale = {0.08, 1.0},
                                  .ratio = {0.75, 4.0 / 3.0}, .flip = true};
        const gr_augment val = {.crop = GR_CROP_CENTER, .size = SIDE};
        run(be, ds, &train, true, true);
        run(be, ds, &val, false, false);
    }
    printf("  %d samples decoded on the GPU, %d JPEGs given back, %d PNGs left; worst PSNR %.1f dB against the host "
           "path, %.1f dB against libjpeg's full-size decode\n", decoded, refused, left, worst_host, worst_full);
    CHECK(decoded > 0 && refused > 0 && left > 0);
    gr_dataset_close(ds);
    gr_backend_free(be);
    rm_rf(dir);
    remove(out);
    return gr_test_report();
}
