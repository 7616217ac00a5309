/* test_image_load.c — unit tests for gr_image_load (dataio/image.h), the
 * preprocessing of one image file that `gpurun predict` shares with
 * `gpurun data imagefolder`: on JPEG and PNG files written here
 * (convert_images.h), its 3 channels are exactly the bytes the converter
 * stores for the same file at the same size and short side (shrinking,
 * growing, a scaled JPEG decode, gray, CMYK, palette, 16-bit, a PNG named
 * .jpg); its 1 channel is their luma; files that are not images, cut short
 * or too large are GR_ERR_DATA naming the file; bad arguments GR_ERR_USAGE. */
#include "convert_images.h"
#include "../dataio/image.h"

static uint8_t px_grad(int x, int y, int c) {
    return (uint8_t)(c == 0 ? x * 3 : c == 1 ? y * 5 : (x ^ y) * 2 + 7);
}

/* What the converter stores for the one file at path, [3,S,S] as bytes into
 * want; false (and a failed check) if it could not convert it. */
static bool converted(const char *path, const char *name, int64_t S, int64_t R, uint8_t *want) {
    static int k;
    char dir[600], cls[700], out[600];
    snprintf(dir, sizeof dir, "%s/image_load_dir%d", GR_TEST_TMP, k);
    snprintf(out, sizeof out, "%s/image_load_%d.h5", GR_TEST_TMP, k++);
    rm_rf(dir);
    remove(out);
    mkdir(dir, 0755);
    snprintf(cls, sizeof cls, "%s/c", dir);
    mkdir(cls, 0755);
    uint8_t *buf = malloc(1 << 22);
    size_t n = read_bytes(path, buf, 1 << 22);
    write_bytes(join(cls, name), buf, n);
    free(buf);
    gr_error err = {0};
    gr_imagefolder_config cfg = {.dir = dir, .size = S, .short_side = R};
    gr_status st = gr_data_convert_imagefolder(&cfg, out, false, false, NULL, &err);
    CHECK_MSG(st == GR_OK, "%s: %s", path, err.msg);
    split_data d;
    bool ok = st == GR_OK && read_split(out, "/train", &d);
    if (ok) {
        ok = d.n == 1 && d.chw[0] == 3 && d.chw[1] == S && d.chw[2] == S;
        CHECK_MSG(ok, "%s: converted to %lld samples of %lldx%lldx%lld", path, (long long)d.n,
                  (long long)d.chw[0], (long long)d.chw[1], (long long)d.chw[2]);
        for (int64_t i = 0; ok && i < 3 * S * S; i++) want[i] = (uint8_t)d.x[i];
        split_free(&d);
    }
    rm_rf(dir);
    remove(out);
    return ok;
}

/* gr_image_load(path, R, S) against the converter, with 3 channels and 1;
 * gray: the file is grayscale (its channel 1 is then its value as it is). */
static void check_same(const char *path, const char *name, int64_t S, int64_t R, bool gray) {
    const size_t n = (size_t)(3 * S * S);
    uint8_t *want = malloc(n), *got = malloc(n), *luma = malloc(n / 3);
    gr_error err = {0};
    if (converted(path, name, S, R, want)) {
        gr_status st = gr_image_load(path, R, S, 3, got, &err);
        CHECK_MSG(st == GR_OK, "%s: %s", path, err.msg);
        size_t diff = 0;
        for (size_t i = 0; i < n; i++) diff += got[i] != want[i];
        CHECK_MSG(st == GR_OK && diff == 0, "%s at S %lld, R %lld: %zu of %zu bytes differ from the converter's", path,
                  (long long)S, (long long)R, diff, n);
        st = gr_image_load(path, R, S, 1, luma, &err);
        CHECK_MSG(st == GR_OK, "%s: %s", path, err.msg);
        double worst = 0;
        size_t off = 0;
        for (size_t i = 0; i < n / 3; i++) {
            const double y = 0.299 * want[i] + 0.587 * want[n / 3 + i] + 0.114 * want[2 * n / 3 + i];
            worst = fmax(worst, fabs(luma[i] - y));
            if (gray) off += luma[i] != want[i] || want[n / 3 + i] != want[i] || want[2 * n / 3 + i] != want[i];
        }
        CHECK_MSG(worst <= 0.5 + 1e-9, "%s: channels 1 is %.3f from the luma of channels 3", path, worst);
        CHECK_MSG(off == 0, "%s: a grayscale image: %zu pixels of channels 1 are not its value", path, off);
    }
    free(want);
    free(got);
    free(luma);
}

/* dir/name, kept (join's buffers rotate). */
static char *path_of(const char *dir, const char *name) {
    return gr_xstrdup(join(dir, name));
}

static void test_matches_converter(void) {
    const char *dir = tmp_path("image_load_src");
    rm_rf(dir);
    mkdir(dir, 0755);
    static const char *const names[] = {"busy.jpg", "gray.jpeg", "grad.png", "small.png", "gray.png",
                                        "deep.png", "pal.png", "rgba.png", "cmyk.jpg", "ycck.jpg"};
    static const bool gray[] = {false, true, false, false, true, false, false, false, false, false};
    enum { NFILES = sizeof names / sizeof *names };
    char *path[NFILES];
    for (int i = 0; i < NFILES; i++) path[i] = path_of(dir, names[i]);
    write_jpeg(path[0], 301, 203, 3, px_busy); /* decoded at 1/8 scale for R = 16, 1/4 for R = 40 */
    write_jpeg(path[1], 77, 150, 1, px_busy);
    write_png(path[2], 97, 41, PNG_COLOR_TYPE_RGB, 8, px_grad);
    write_png(path[3], 9, 7, PNG_COLOR_TYPE_RGB, 8, px_grad); /* grown */
    write_png(path[4], 16, 19, PNG_COLOR_TYPE_GRAY, 8, px_busy);
    write_png(path[5], 50, 30, PNG_COLOR_TYPE_RGB, 16, px_busy);
    write_png(path[6], 12, 12, PNG_COLOR_TYPE_PALETTE, 8, px_pal);
    write_png(path[7], 20, 33, PNG_COLOR_TYPE_RGBA, 8, px_busy);
    const uint8_t ink[4] = {10, 200, 50, 90};
    write_jpeg_cmyk(path[8], 40, 30, ink, 0);
    write_jpeg_cmyk(path[9], 40, 30, ink, 2);
    static const int64_t sizes[][2] = {{16, 16}, {24, 40}, {8, 9}, {32, 32}};
    for (int k = 0; k < 4; k++)
        for (int i = 0; i < NFILES; i++) check_same(path[i], names[i], sizes[k][0], sizes[k][1], gray[i]);
    /* told by its first bytes: a PNG named .jpg */
    check_same(path[2], "named.jpg", 16, 20, false);
    for (int i = 0; i < NFILES; i++) free(path[i]);
    rm_rf(dir);
}

/* gr_image_load(path) fails with st and a message holding path and needle. */
static void check_fails(const char *path, int64_t R, int64_t S, int channels, gr_status want, const char *needle) {
    uint8_t out[3 * 16 * 16];
    gr_error err = {0};
    gr_status st = gr_image_load(path, R, S, channels, out, &err);
    CHECK_MSG(st == want, "%s: status %d, expected %d (%s)", path, (int)st, (int)want, err.msg);
    CHECK_STR_CONTAINS(err.msg, path);
    CHECK_STR_CONTAINS(err.msg, needle);
}

static void test_errors(void) {
    const char *dir = tmp_path("image_load_bad");
    rm_rf(dir);
    mkdir(dir, 0755);
    char *good = path_of(dir, "good.jpg"), *text = path_of(dir, "notes.jpg"), *empty = path_of(dir, "empty.png"),
         *cut_jpg = path_of(dir, "cut.jpg"), *cut_png = path_of(dir, "cut.png"), *huge = path_of(dir, "huge.jpg"),
         *png = path_of(dir, "good.png"), *missing = path_of(dir, "missing.jpg");
    write_jpeg(good, 64, 64, 3, px_busy);
    write_png(png, 64, 64, PNG_COLOR_TYPE_RGB, 8, px_busy);
    write_bytes(text, "hello, world", 12);
    write_bytes(empty, "", 0);
    static uint8_t buf[1 << 16];
    size_t n = read_bytes(good, buf, sizeof buf);
    GR_ASSERT(n < sizeof buf);
    write_bytes(cut_jpg, buf, n / 2);
    jpeg_claim_size(buf, n, 65500, 65500);
    write_bytes(huge, buf, n);
    n = read_bytes(png, buf, sizeof buf);
    GR_ASSERT(n < sizeof buf);
    write_bytes(cut_png, buf, n / 2);
    check_fails(text, 16, 16, 3, GR_ERR_DATA, ": cannot decode: not a JPEG or PNG file (it starts with 68 65 6C 6C)");
    check_fails(text, 16, 16, 1, GR_ERR_DATA, ": cannot decode: not a JPEG or PNG file");
    check_fails(empty, 16, 16, 3, GR_ERR_DATA, ": cannot decode: not a JPEG or PNG file (it is empty)");
    check_fails(cut_jpg, 16, 16, 3, GR_ERR_DATA, ": cannot decode: JPEG: Premature end of JPEG file");
    check_fails(cut_png, 16, 16, 3, GR_ERR_DATA, ": cannot decode: PNG: ");
    check_fails(huge, 16, 16, 3, GR_ERR_DATA, ": cannot decode: JPEG: header claims 65500x65500 pixels");
    check_fails(missing, 16, 16, 3, GR_ERR_DATA, ": cannot decode: No such file or directory");
    check_fails(dir, 16, 16, 3, GR_ERR_DATA, ": an image is a directory, not a regular file");
    /* the arguments: size in [1, 65536], short side in [size, 65536], channels 1 or 3 */
    check_fails(good, 16, 16, 2, GR_ERR_USAGE, "channels 1 or 3");
    check_fails(good, 16, 0, 3, GR_ERR_USAGE, "size must be in [1, 65536]");
    check_fails(good, 8, 16, 3, GR_ERR_USAGE, "short side in [size, 65536]");
    check_fails(good, 70000, 16, 3, GR_ERR_USAGE, "short side in [size, 65536]");
    uint8_t out[3 * 8 * 8];
    gr_error err = {0};
    CHECK_MSG(gr_image_load(good, 8, 8, 3, out, &err) == GR_OK, "%s", err.msg); /* the cut ones' source is good */
    char *const owned[] = {good, text, empty, cut_jpg, cut_png, huge, png, missing};
    for (size_t i = 0; i < sizeof owned / sizeof *owned; i++) free(owned[i]);
    rm_rf(dir);
}

int main(void) {
    test_matches_converter();
    test_errors();
    return gr_test_report();
}
