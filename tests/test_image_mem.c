/* test_image_mem.c — unit tests for gr_image_decode_mem (dataio/image.h):
 * decoding an image's bytes from memory gives exactly what decoding its
 * file gives (gr_image_decode) — the same pixels and size at every scale,
 * or the same failure and message — over JPEGs (RGB, gray, progressive,
 * CMYK with and without an Adobe marker, YCCK, scaled decodes) and PNGs
 * (RGB, RGBA, gray, palette, 16-bit, interlaced), and over bad bytes (none,
 * not an image, cut short at several points, a JPEG claiming a huge size,
 * scribbled scan data); the buffer is left as it was; a missing file is
 * the fopen error. Files are written here (convert_images.h). */
#include "convert_images.h"
#include "../dataio/image.h"

static uint8_t px_grad(int x, int y, int c) {
    return (uint8_t)(c == 0 ? x * 3 : c == 1 ? y * 5 : (x ^ y) * 2 + 7);
}

/* An 8-bit RGB PNG stored Adam7-interlaced. */
static void write_png_interlaced(const char *path, int w, int h, pixel_fn px) {
    FILE *f = fopen(path, "wb");
    GR_ASSERT(f);
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png_create_info_struct(png);
    png_init_io(png, f);
    png_set_IHDR(png, info, (png_uint_32)w, (png_uint_32)h, 8, PNG_COLOR_TYPE_RGB, PNG_INTERLACE_ADAM7,
                 PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    uint8_t *pix = malloc((size_t)(w * h * 3));
    png_bytep *rows = malloc((size_t)h * sizeof *rows);
    for (int y = 0; y < h; y++) {
        rows[y] = pix + (size_t)y * (size_t)w * 3;
        for (int x = 0; x < w; x++)
            for (int c = 0; c < 3; c++) rows[y][x * 3 + c] = px(x, y, c);
    }
    png_write_info(png, info);
    png_write_image(png, rows);
    png_write_end(png, NULL);
    png_destroy_write_struct(&png, &info);
    free(rows);
    free(pix);
    fclose(f);
}

static uint8_t g_buf[1 << 20];

/* The file at path decoded from memory and from the file, at short side R:
 * both succeed with the same image, or both fail with the same message
 * (holding needle when one is given: NULL for a decodable file). */
static void check_mem_same(const char *path, int64_t R, const char *needle) {
    const size_t n = read_bytes(path, g_buf, sizeof g_buf);
    GR_ASSERT(n < sizeof g_buf);
    uint8_t *copy = malloc(n ? n : 1);
    memcpy(copy, g_buf, n);
    gr_image a, b;
    char wa[GR_IMAGE_WHY_MAX] = "", wb[GR_IMAGE_WHY_MAX] = "";
    const bool oka = gr_image_decode(path, R, &a, wa);
    const bool okb = gr_image_decode_mem(copy, n, R, &b, wb);
    CHECK_MSG(oka == okb, "%s at R %lld: the file %s (%s), its bytes %s (%s)", path, (long long)R,
              oka ? "decodes" : "fails", wa, okb ? "decode" : "fail", wb);
    CHECK_MSG(memcmp(copy, g_buf, n) == 0, "%s: gr_image_decode_mem changed its buffer", path);
    if (needle) {
        CHECK_MSG(!okb, "%s: decoded from memory, expected a failure (%s)", path, needle);
        CHECK_MSG(strcmp(wa, wb) == 0, "%s: the file says \"%s\", its bytes \"%s\"", path, wa, wb);
        CHECK_STR_CONTAINS(wb, needle);
        CHECK(b.rgb == NULL && b.w == 0 && b.h == 0);
    } else {
        CHECK_MSG(oka && okb, "%s: %s / %s", path, wa, wb);
        const bool same = oka && okb && a.w == b.w && a.h == b.h && a.w >= 1 && a.h >= 1 &&
                          memcmp(a.rgb, b.rgb, (size_t)(a.w * a.h * 3)) == 0;
        CHECK_MSG(same, "%s at R %lld: file %lldx%lld, memory %lldx%lld, or their pixels differ", path,
                  (long long)R, (long long)a.w, (long long)a.h, (long long)b.w, (long long)b.h);
    }
    gr_image_free(&a);
    gr_image_free(&b);
    free(copy);
}

/* dir/name, kept (join's buffers rotate). */
static char *path_of(const char *dir, const char *name) {
    return gr_xstrdup(join(dir, name));
}

static void test_same_images(void) {
    const char *dir = tmp_path("image_mem_src");
    rm_rf(dir);
    mkdir(dir, 0755);
    static const char *const names[] = {"busy.jpg", "gray.jpeg", "prog.jpg", "cmyk.jpg", "plain_cmyk.jpg",
                                        "ycck.jpg", "grad.png", "gray.png", "deep.png", "pal.png",
                                        "rgba.png", "adam7.png"};
    enum { NFILES = sizeof names / sizeof *names };
    char *path[NFILES];
    for (int i = 0; i < NFILES; i++) path[i] = path_of(dir, names[i]);
    write_jpeg(path[0], 301, 203, 3, px_busy);
    write_jpeg(path[1], 77, 150, 1, px_busy);
    write_jpeg_as(path[2], 120, 90, 3, 90, true, px_busy); /* progressive */
    const uint8_t ink[4] = {10, 200, 50, 90};
    write_jpeg_cmyk(path[3], 40, 30, ink, 0);
    write_jpeg_cmyk(path[4], 40, 30, ink, 1);
    write_jpeg_cmyk(path[5], 40, 30, ink, 2);
    write_png(path[6], 97, 41, PNG_COLOR_TYPE_RGB, 8, px_grad);
    write_png(path[7], 16, 19, PNG_COLOR_TYPE_GRAY, 8, px_busy);
    write_png(path[8], 50, 30, PNG_COLOR_TYPE_RGB, 16, px_busy);
    write_png(path[9], 12, 12, PNG_COLOR_TYPE_PALETTE, 8, px_pal);
    write_png(path[10], 20, 33, PNG_COLOR_TYPE_RGBA, 8, px_busy);
    write_png_interlaced(path[11], 23, 17, px_grad);
    /* R = 1 takes a JPEG's smallest scale (1/8), 40 a middle one, 4096 the full size */
    static const int64_t shorts[] = {1, 40, 4096};
    for (int k = 0; k < 3; k++)
        for (int i = 0; i < NFILES; i++) check_mem_same(path[i], shorts[k], NULL);
    for (int i = 0; i < NFILES; i++) free(path[i]);
    rm_rf(dir);
}

static void test_same_failures(void) {
    const char *dir = tmp_path("image_mem_bad");
    rm_rf(dir);
    mkdir(dir, 0755);
    char *jpg = path_of(dir, "good.jpg"), *prog = path_of(dir, "prog.jpg"), *png = path_of(dir, "good.png"),
         *bad = path_of(dir, "bad"), *missing = path_of(dir, "missing.jpg");
    write_jpeg(jpg, 64, 64, 3, px_busy);
    write_jpeg_as(prog, 64, 64, 3, 90, true, px_busy);
    write_png(png, 64, 64, PNG_COLOR_TYPE_RGB, 8, px_busy);
    static uint8_t src[1 << 16];

    check_mem_same(jpg, 8, NULL);
    write_bytes(bad, "", 0);
    check_mem_same(bad, 8, "not a JPEG or PNG file (it is empty)");
    write_bytes(bad, "GIF89a, not ours", 16);
    check_mem_same(bad, 8, "not a JPEG or PNG file (it starts with 47 49 46 38)");
    write_bytes(bad, "\xFF\xD8", 2);
    check_mem_same(bad, 8, "not a JPEG or PNG file (it starts with FF D8)");

    /* cut short: in the header, in the scan data, just before the end */
    const char *const cut_src[] = {jpg, prog, png};
    const char *const cut_needle[] = {"JPEG: ", "JPEG: ", "PNG: "};
    for (int s = 0; s < 3; s++) {
        const size_t n = read_bytes(cut_src[s], src, sizeof src);
        GR_ASSERT(n < sizeof src);
        const size_t cuts[] = {3, 9, 40, n / 2, n - 2};
        for (int k = 0; k < 5; k++) {
            if (s == 2 && cuts[k] < 8) continue; /* not a PNG signature yet */
            write_bytes(bad, src, cuts[k]);
            check_mem_same(bad, 8, cut_needle[s]);
        }
    }
    /* the PNG reader's own words for bytes ending early, and libjpeg's */
    size_t n = read_bytes(png, src, sizeof src);
    write_bytes(bad, src, n / 2);
    check_mem_same(bad, 8, "PNG: Read Error");
    n = read_bytes(jpg, src, sizeof src);
    write_bytes(bad, src, n / 2);
    check_mem_same(bad, 8, "JPEG: Premature end of JPEG file");

    /* a header claiming more pixels than taken */
    jpeg_claim_size(src, n, 65500, 65500);
    write_bytes(bad, src, n);
    check_mem_same(bad, 8, "header claims 65500x65500 pixels");
    /* scan data scribbled over: the same outcome, whichever it is */
    n = read_bytes(jpg, src, sizeof src);
    for (size_t i = n / 3; i < n / 3 + 64; i++) src[i] = (uint8_t)(i * 131);
    write_bytes(bad, src, n);
    gr_image img;
    char why[GR_IMAGE_WHY_MAX];
    const bool ok = gr_image_decode(bad, 8, &img, why);
    gr_image_free(&img);
    check_mem_same(bad, 8, ok ? NULL : "JPEG: ");

    /* no file: the fopen error, nothing decoded */
    CHECK(!gr_image_decode(missing, 8, &img, why));
    CHECK_STR_CONTAINS(why, "No such file or directory");
    CHECK(img.rgb == NULL);
    free(jpg), free(prog), free(png), free(bad), free(missing);
    rm_rf(dir);
}

int main(void) {
    test_same_images();
    test_same_failures();
    return gr_test_report();
}
