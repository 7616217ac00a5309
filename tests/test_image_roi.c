/* test_image_roi.c — gr_image_decode_roi (dataio/image.c), the partial,
 * reduced-scale decode the loader's JPEG path is to crop with (issue 26):
 *   - the scale: the smallest N/8, N = 1, 2, 4 or 8, whose scaled box still
 *     covers the output;
 *   - at scale 8/8 the box's pixels are the full decode's, bit for bit, on
 *     the iMCU grid (16 pixels for 4:2:0) and off it, at the image's edges
 *     too; the region starts on the iMCU column before the box;
 *   - scaled: the box cut from the region and resized (area averaging) is
 *     within 35 dB PSNR of the box cut from the full decode and resized the
 *     same way (DCT scaling is near an area average, so the two agree where
 *     an interpolating resize would alias), on a photo-like image at q90:
 *     smooth shading, edges and fine texture;
 *   - grayscale JPEGs, PNG (decoded whole, the box cut out, scale 8), and a
 *     corrupt file failing with libjpeg's reason;
 *   - the same 8/8 and scaled checks on 4:4:4, 4:2:2 and progressive JPEGs
 *     and a CMYK one, and a progressive file cut short. */
#include <math.h>

#include "convert_images.h"
#include "../dataio/image.h"

enum { W = 480, H = 360 };

/* Smooth shading, a few hard edges and a fine texture: what a photo has. */
static uint8_t px_photo(int x, int y, int c) {
    double v = 120.0 + 60.0 * sin(x * 0.02 + c) * cos(y * 0.015 - c) + 30.0 * sin((x + 2 * y) * 0.35 + c);
    if ((x / 60 + y / 45) % 3 == 0) v += 40.0;
    uint32_t h = (uint32_t)x * 73856093u ^ (uint32_t)y * 19349663u ^ (uint32_t)c * 83492791u;
    h ^= h >> 13, h *= 0x5bd1e995u, h ^= h >> 15;
    v += (double)(h & 15) - 7.5;
    return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

static gr_image photo(int w, int h) {
    gr_image img = {gr_xmalloc((size_t)(w * h * 3)), w, h};
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            for (int c = 0; c < 3; c++) img.rgb[(y * w + x) * 3 + c] = px_photo(x, y, c);
    return img;
}

/* The box [x, x+w) x [y, y+h) of img as its own image. */
static gr_image cut(const gr_image *img, int64_t x, int64_t y, int64_t w, int64_t h) {
    gr_image o = {gr_xmalloc((size_t)(w * h * 3)), w, h};
    for (int64_t r = 0; r < h; r++) memcpy(o.rgb + r * w * 3, img->rgb + ((y + r) * img->w + x) * 3, (size_t)(w * 3));
    return o;
}

static double psnr(const gr_image *a, const gr_image *b) {
    GR_ASSERT(a->w == b->w && a->h == b->h);
    double se = 0.0;
    const int64_t n = a->w * a->h * 3;
    for (int64_t i = 0; i < n; i++) se += ((double)a->rgb[i] - b->rgb[i]) * ((double)a->rgb[i] - b->rgb[i]);
    return se == 0.0 ? INFINITY : 10.0 * log10(255.0 * 255.0 / (se / (double)n));
}

/* Whether the region holds the full decode's pixels of the box [bx, bx+bw) x [by, by+bh) (scale 8/8). */
static bool box_equals(const gr_image_roi *r, const gr_image *full, int64_t bx, int64_t by, int64_t bw, int64_t bh) {
    if (bx < r->x0 || by < r->y0 || bx + bw > r->x0 + r->img.w || by + bh > r->y0 + r->img.h) return false;
    for (int64_t y = by; y < by + bh; y++)
        if (memcmp(r->img.rgb + ((y - r->y0) * r->img.w + bx - r->x0) * 3, full->rgb + (y * full->w + bx) * 3,
                   (size_t)(bw * 3)) != 0)
            return false;
    return true;
}

static void test_scale_one(const uint8_t *jpg, size_t n, const gr_image *full) {
    char why[GR_IMAGE_WHY_MAX];
    gr_image_roi r;
    /* on the iMCU grid (4:2:0: 16 pixels), off it, and at the image's edges: the region starts on an iMCU
     * column before the box (one more column is asked for on each side) and holds the box's pixels as the
     * full decode has them */
    const int64_t boxes[][4] = {{160, 96, 128, 64}, {101, 37, 90, 70}, {0, 0, 64, 48}, {W - 70, H - 50, 70, 50}};
    for (size_t i = 0; i < GR_ARRAY_LEN(boxes); i++) {
        const int64_t *b = boxes[i], box[6] = {b[0], b[1], b[2], b[3], b[2], b[3]};
        CHECK_MSG(gr_image_decode_roi(jpg, n, box, &r, why), "box %zu: %s", i, why);
        CHECK_MSG(r.scale_num == 8 && r.x0 % 16 == 0 && r.x0 <= GR_MAX(b[0] - 1, 0) && r.y0 == b[1] &&
                  r.img.h == b[3] && r.x0 + r.img.w >= GR_MIN(b[0] + b[2] + 1, W),
                  "box %zu: region %lldx%lld at %lld,%lld, scale %d/8", i, (long long)r.img.w, (long long)r.img.h,
                  (long long)r.x0, (long long)r.y0, r.scale_num);
        CHECK_MSG(box_equals(&r, full, b[0], b[1], b[2], b[3]), "box %zu at 8/8: its pixels differ from the full "
                  "decode's", i);
        gr_image_free(&r.img);
    }
}

/* box (multiples of 8, so the scaled box has whole pixels) to out x out */
static void test_scaled_min(const uint8_t *jpg, size_t n, const gr_image *full, int64_t bx, int64_t by, int64_t bs,
                            int64_t out, int want_num, double min_db) {
    char why[GR_IMAGE_WHY_MAX];
    gr_image_roi r;
    const int64_t box[6] = {bx, by, bs, bs, out, out};
    CHECK_MSG(gr_image_decode_roi(jpg, n, box, &r, why), "box %lld at %lld,%lld: %s", (long long)bs, (long long)bx,
              (long long)by, why);
    CHECK_MSG(r.scale_num == want_num, "box %lld to %lld: scale %d/8, want %d/8", (long long)bs, (long long)out,
              r.scale_num, want_num);
    const int64_t num = r.scale_num, sx = bx * num / 8 - r.x0, sy = by * num / 8 - r.y0, ss = bs * num / 8;
    CHECK(sx >= 0 && sy >= 0 && sx + ss <= r.img.w && sy + ss <= r.img.h);
    CHECK(r.sw == (W * num + 7) / 8 && r.sh == (H * num + 7) / 8);
    gr_image a = cut(&r.img, sx, sy, ss, ss), b = cut(full, bx, by, bs, bs), ra, rb;
    gr_image_resize(&a, out, out, &ra);
    gr_image_resize(&b, out, out, &rb);
    const double p = psnr(&ra, &rb);
    CHECK_MSG(p >= min_db, "box %lld to %lld at %d/8: PSNR %.1f dB against the full decode's, want >= %.0f",
              (long long)bs, (long long)out, r.scale_num, p, min_db);
    printf("box %3lld -> %3lld: scale %d/8, region %lldx%lld of %lldx%lld, PSNR %.1f dB\n", (long long)bs,
           (long long)out, r.scale_num, (long long)r.img.w, (long long)r.img.h, (long long)r.sw, (long long)r.sh, p);
    gr_image_free(&a), gr_image_free(&b), gr_image_free(&ra), gr_image_free(&rb), gr_image_free(&r.img);
}

static void test_scaled(const uint8_t *jpg, size_t n, const gr_image *full, int64_t bx, int64_t by, int64_t bs,
                        int64_t out, int want_num) {
    test_scaled_min(jpg, n, full, bx, by, bs, out, want_num, 35.0);
}

static void test_gray_png_corrupt(const gr_image *src) {
    char why[GR_IMAGE_WHY_MAX];
    uint8_t *jpg;
    size_t n;
    gr_image full, png_full;
    gr_image_roi r;
    CHECK(gr_image_encode_jpeg(src, 1, 90, &jpg, &n, why));
    CHECK(gr_image_decode_mem(jpg, n, GR_IMAGE_MAX_SIDE, &full, why));
    const int64_t box[6] = {64, 32, 200, 100, 200, 100};
    CHECK_MSG(gr_image_decode_roi(jpg, n, box, &r, why), "gray: %s", why);
    CHECK_MSG(r.scale_num == 8 && box_equals(&r, &full, 64, 32, 200, 100), "gray at 8/8: the box differs from the "
              "full decode's");
    gr_image_free(&r.img), gr_image_free(&full);

    /* cut short inside the box's rows: libjpeg's reason */
    const int64_t low[6] = {0, H - 40, 64, 32, 64, 32};
    CHECK(!gr_image_decode_roi(jpg, n / 2, low, &r, why) && strstr(why, "JPEG: ") == why);
    CHECK(r.img.rgb == NULL);
    free(jpg);

    const char *png = tmp_path("roi.png");
    write_png(png, 96, 64, PNG_COLOR_TYPE_RGB, 8, px_photo);
    FILE *f = fopen(png, "rb");
    GR_ASSERT(f);
    uint8_t *pb;
    const size_t pn = gr_image_read_all(f, &pb);
    fclose(f);
    CHECK(gr_image_decode_mem(pb, pn, GR_IMAGE_MAX_SIDE, &png_full, why));
    const int64_t pbox[6] = {10, 20, 30, 25, 15, 12};
    CHECK_MSG(gr_image_decode_roi(pb, pn, pbox, &r, why), "png: %s", why);
    CHECK(r.scale_num == 8 && r.x0 == 10 && r.y0 == 20 && r.img.w == 30 && r.img.h == 25);
    CHECK_MSG(box_equals(&r, &png_full, 10, 20, 30, 25), "png: the box differs from the full decode's");
    gr_image_free(&r.img), gr_image_free(&png_full);
    free(pb);
}

/* The bytes of the file at path into *data; their count. */
static size_t slurp(const char *path, uint8_t **data) {
    FILE *f = fopen(path, "rb");
    GR_ASSERT(f);
    const size_t n = gr_image_read_all(f, data);
    fclose(f);
    return n;
}

/* The kinds of JPEG a corpus has, each through an off-grid box at 8/8 (bit
 * for bit the full decode's) and two scaled ones (>= 35 dB, as above;
 * 4:2:2 at 2/8 >= 30, libjpeg's own figure there):
 * 4:2:0, 4:4:4, 4:2:2, progressive 4:2:0 and 4:4:4, and a CMYK file (solid:
 * the colour conversion of a cropped row); a progressive file cut short
 * inside the box's rows fails with libjpeg's reason. */
static void test_kinds(void) {
    const struct { const char *name; int h, v; bool prog; } kinds[] = {
        {"420", 2, 2, false}, {"444", 1, 1, false}, {"422", 2, 1, false}, {"420p", 2, 2, true}, {"444p", 1, 1, true}};
    char why[GR_IMAGE_WHY_MAX];
    for (size_t k = 0; k < GR_ARRAY_LEN(kinds); k++) {
        char name[32];
        snprintf(name, sizeof name, "roi_%s.jpg", kinds[k].name);
        const char *path = tmp_path(name);
        write_jpeg_sampled(path, W, H, 3, 90, kinds[k].prog, kinds[k].h, kinds[k].v, px_photo);
        uint8_t *jpg;
        const size_t n = slurp(path, &jpg);
        gr_image full;
        CHECK_MSG(gr_image_decode_mem(jpg, n, GR_IMAGE_MAX_SIDE, &full, why), "%s: %s", kinds[k].name, why);
        gr_image_roi r;
        const int64_t box[6] = {101, 37, 90, 70, 90, 70};
        CHECK_MSG(gr_image_decode_roi(jpg, n, box, &r, why), "%s: %s", kinds[k].name, why);
        CHECK_MSG(r.scale_num == 8 && box_equals(&r, &full, 101, 37, 90, 70), "%s at 8/8: the box differs from the "
                  "full decode's", kinds[k].name);
        gr_image_free(&r.img);
        test_scaled(jpg, n, &full, 40, 24, 320, 160, 4);
        /* 4:2:2 at 2/8: 31.4 dB, and so is the whole image decoded at 1/4 (PIL's draft mode too): libjpeg's
         * chroma at that scale, not the region */
        test_scaled_min(jpg, n, &full, 80, 40, 256, 64, 2, kinds[k].h != kinds[k].v ? 30.0 : 35.0);
        if (kinds[k].prog) {
            const int64_t low[6] = {0, H - 40, 64, 32, 64, 32};
            CHECK_MSG(!gr_image_decode_roi(jpg, n / 2, low, &r, why) && strstr(why, "JPEG: ") == why,
                      "%s cut short: decoded", kinds[k].name);
        }
        gr_image_free(&full);
        free(jpg);
    }
    const uint8_t cmyk[4] = {20, 140, 60, 30};
    const char *path = tmp_path("roi_cmyk.jpg");
    write_jpeg_cmyk(path, 200, 120, cmyk, 0);
    uint8_t *jpg;
    const size_t n = slurp(path, &jpg);
    gr_image full;
    gr_image_roi r;
    CHECK_MSG(gr_image_decode_mem(jpg, n, GR_IMAGE_MAX_SIDE, &full, why), "cmyk: %s", why);
    const int64_t box[6] = {37, 21, 90, 70, 90, 70}, half[6] = {37, 21, 120, 90, 60, 45};
    CHECK_MSG(gr_image_decode_roi(jpg, n, box, &r, why), "cmyk: %s", why);
    CHECK_MSG(r.scale_num == 8 && box_equals(&r, &full, 37, 21, 90, 70), "cmyk at 8/8: the box differs");
    gr_image_free(&r.img);
    CHECK_MSG(gr_image_decode_roi(jpg, n, half, &r, why) && r.scale_num == 4, "cmyk at 4/8: %s", why);
    int worst = 0; /* solid: every pixel of the region is the full decode's colour, within rounding */
    for (int64_t i = 0; i < r.img.w * r.img.h * 3; i++)
        worst = GR_MAX(worst, abs((int)r.img.rgb[i] - (int)full.rgb[i % 3]));
    CHECK_MSG(worst <= 2, "cmyk at 4/8: off by %d from the full decode's colour", worst);
    gr_image_free(&r.img), gr_image_free(&full);
    free(jpg);
}

int main(void) {
    mkdir(GR_TEST_TMP, 0755);
    char why[GR_IMAGE_WHY_MAX];
    gr_image src = photo(W, H), full;
    uint8_t *jpg;
    size_t n;
    CHECK(gr_image_encode_jpeg(&src, 3, 90, &jpg, &n, why)); /* 4:2:0 */
    CHECK(gr_image_decode_mem(jpg, n, GR_IMAGE_MAX_SIDE, &full, why) && full.w == W && full.h == H);
    test_scale_one(jpg, n, &full);
    /* scales: the smallest N with ceil(bs N / 8) >= out */
    test_scaled(jpg, n, &full, 40, 24, 320, 224, 8); /* not 6/8: only 1, 2, 4, 8 (image.c says why) */
    test_scaled(jpg, n, &full, 40, 24, 320, 160, 4);
    test_scaled(jpg, n, &full, 80, 40, 256, 64, 2);
    test_scaled(jpg, n, &full, 0, 0, 352, 40, 1);
    test_scaled(jpg, n, &full, 96, 64, 200, 100, 4);
    test_gray_png_corrupt(&src);
    test_kinds();
    gr_image_free(&full), gr_image_free(&src);
    free(jpg);
    return gr_test_report();
}
