/* test_convert_imagefolder.c — unit tests for `gpurun data imagefolder`
 * (gr_data_convert_imagefolder of dataio/convert.h) on PNG and JPEG files
 * written here (convert_images.h): the decoding variants (RGBA, gray, 16-bit,
 * palette, grayscale and scaled JPEG), the resize and crop arithmetic, class
 * order and labels, statistics, another group into the same file, corrupt files and
 * usage errors with their exit codes and messages. The other image sources and
 * --on-error skip are in test_convert_imagefolder_sources.c. */
#include "convert_images.h"

static uint8_t px_grad64(int x, int y, int c) { /* 64x32: R = 4x, G = 255 - 4x, B = 8y */
    return (uint8_t)(c == 0 ? 4 * x : c == 1 ? 255 - 4 * x : 8 * y);
}

static uint8_t px_grad8(int x, int y, int c) { /* 8x8: R = 16x + 8, G = B = 16y + 8 */
    return (uint8_t)(c == 0 ? 16 * x + 8 : 16 * y + 8);
}

static uint8_t px_deep(int x, int y, int c) { /* 16-bit samples 0xAB54 (the low byte is 255 - high) */
    (void)x, (void)y, (void)c;
    return 0xAB;
}

/* grad64 at R = S = 16: resized 32x16 (2x2 box averages), crop x offset 8 */
static double want_grad64_16(int c, int y, int x) {
    return c == 0 ? 8 * x + 66 : c == 1 ? 189 - 8 * x : 16 * y + 4;
}

/* grad64 at R = 16, S = 8: resized 32x16, crop offsets x 12, y 4 */
static double want_grad64_8(int c, int y, int x) {
    return c == 0 ? 8 * x + 98 : c == 1 ? 157 - 8 * x : 16 * y + 68;
}

/* grad8 grown to 16: bilinear at (x + 0.5) / 2 - 0.5, so 8x + 4 inside */
static double want_grad8_16(int c, int y, int x) {
    return c == 0 ? 8 * x + 4 : 8 * y + 4;
}

static double want_77(int c, int y, int x) {
    (void)c, (void)y, (void)x;
    return 77;
}

static double want_rgba(int c, int y, int x) {
    (void)y, (void)x;
    return px_rgba(0, 0, c);
}

static double want_deep(int c, int y, int x) {
    (void)c, (void)y, (void)x;
    return 0xAB;
}

static void if_make(const char *dir) {
    rm_rf(dir);
    mkdir(dir, 0755);
    char a[600], b[600];
    snprintf(a, sizeof a, "%s/a_cls", dir);
    snprintf(b, sizeof b, "%s/b_cls", dir);
    mkdir(a, 0755);
    mkdir(b, 0755);
    /* a_cls, in name order: UPPER.PNG grad.png gray.png solid.jpg */
    write_png(join(a, "UPPER.PNG"), 20, 20, PNG_COLOR_TYPE_RGBA, 8, px_rgba);
    write_png(join(a, "grad.png"), 64, 32, PNG_COLOR_TYPE_RGB, 8, px_grad64);
    write_png(join(a, "gray.png"), 16, 16, PNG_COLOR_TYPE_GRAY, 8, px_solid);
    write_jpeg(join(a, "solid.jpg"), 64, 48, 3, px_solid); /* decoded at 1/2 scale for R = 16 */
    write_bytes(join(a, "notes.txt"), "not an image", 12);
    /* b_cls: deep.png gray.jpeg pal.png small.png */
    write_png(join(b, "deep.png"), 16, 16, PNG_COLOR_TYPE_RGB, 16, px_deep);
    write_jpeg(join(b, "gray.jpeg"), 24, 24, 1, px_solid);
    write_png(join(b, "pal.png"), 12, 12, PNG_COLOR_TYPE_PALETTE, 8, px_pal);
    write_png(join(b, "small.png"), 8, 8, PNG_COLOR_TYPE_RGB, 8, px_grad8);
    write_bytes(join(dir, "README"), "x", 1);
    write_bytes(join(dir, ".hidden"), "x", 1);
}

static void test_imagefolder(void) {
    const char *dir = tmp_path("imgs"), *out = tmp_path("imgs.h5");
    gr_error err = {0};
    if_make(dir);
    remove(out);
    gr_imagefolder_report rep = {0};
    gr_imagefolder_config cfg = {.dir = dir, .size = 16};
    CHECK(gr_data_convert_imagefolder(&cfg, out, false, false, &rep, &err) == GR_OK);
    CHECK_MSG(rep.skipped == 3, "skipped %lld (README, .hidden, notes.txt)", (long long)rep.skipped);
    split_data d;
    if (read_split(out, "/train", &d)) {
        CHECK(d.n == 8 && d.chw[0] == 3 && d.chw[1] == 16 && d.chw[2] == 16);
        const int32_t want_y[8] = {0, 0, 0, 0, 1, 1, 1, 1};
        CHECK(memcmp(d.y, want_y, sizeof want_y) == 0);
        CHECK(max_err(&d, 0, 0, 16, want_rgba) == 0);           /* RGBA: alpha dropped */
        CHECK_CLOSE(max_err(&d, 1, 0, 16, want_grad64_16), 0, 0, 1); /* shrink x2 + crop */
        CHECK(max_err(&d, 2, 0, 16, want_77) == 0);             /* gray -> 3 channels */
        CHECK_CLOSE(max_err(&d, 3, 0, 16, want_solid), 0, 0, 4); /* JPEG, lossy */
        CHECK(max_err(&d, 4, 0, 16, want_deep) == 0);           /* 16 bits -> 8 */
        CHECK_CLOSE(max_err(&d, 5, 0, 16, want_77), 0, 0, 3);   /* grayscale JPEG */
        CHECK(max_err(&d, 6, 0, 16, want_pal) == 0);            /* palette */
        CHECK_CLOSE(max_err(&d, 7, 1, 15, want_grad8_16), 0, 0, 1); /* grow x2, bilinear */
        /* grown edges clamp to the border pixels */
        CHECK(d.x[((7 * 3 + 0) * 16 + 5) * 16 + 0] == 8 && d.x[((7 * 3 + 0) * 16 + 5) * 16 + 15] == 120);
        double want_m[3], want_s[3], m[3], s[3];
        stats_of(&d, want_m, want_s);
        CHECK(read_attr(out, "/train", "mean", m, 3) == 3 && read_attr(out, "/train", "std", s, 3) == 3);
        for (int c = 0; c < 3; c++) CHECK_CLOSE(m[c], want_m[c], 1e-9, 1e-9);
        for (int c = 0; c < 3; c++) CHECK_CLOSE(s[c], want_s[c], 1e-6, 1e-6);
        split_free(&d);
    }
    char cls[4][32] = {{0}};
    CHECK(read_classes(out, "/train", cls, 4) == 2 && strcmp(cls[0], "a_cls") == 0 && strcmp(cls[1], "b_cls") == 0);

    /* short side 16 cropped to 8, into another group of the same file (which
     * keeps /train); that group again needs --force (test_convert_imagefolder_groups.c) */
    cfg.size = 8, cfg.short_side = 16, cfg.group = "/val";
    CHECK(gr_data_convert_imagefolder(&cfg, out, false, false, &rep, &err) == GR_OK);
    CHECK(gr_data_convert_imagefolder(&cfg, out, false, false, &rep, &err) == GR_ERR_USAGE);
    CHECK(gr_data_convert_imagefolder(&cfg, out, true, false, &rep, &err) == GR_OK);
    if (read_split(out, "/train", &d)) {
        CHECK(d.n == 8 && d.chw[1] == 16);
        split_free(&d);
    }
    if (read_split(out, "/val", &d)) {
        CHECK(d.n == 8 && d.chw[1] == 8 && d.chw[2] == 8);
        CHECK_CLOSE(max_err(&d, 1, 0, 8, want_grad64_8), 0, 0, 1);
        CHECK_CLOSE(max_err(&d, 3, 0, 8, want_solid), 0, 0, 4);
        split_free(&d);
    }
    remove(out);

    /* corrupt files: exit 3 naming the file and the decoder's message */
    const char *bdir = tmp_path("imgs_bad");
    rm_rf(bdir);
    mkdir(bdir, 0755);
    char cdir[600];
    snprintf(cdir, sizeof cdir, "%s/c", bdir);
    CHECK_FAILED(gr_data_convert_imagefolder(&(gr_imagefolder_config){.dir = bdir, .size = 8}, out, false, false,
                                             &rep, &err),
                 GR_ERR_DATA, "convert_imgs_bad: no class sub-folders", out);
    mkdir(cdir, 0755);
    write_bytes(join(cdir, "x.txt"), "x", 1);
    CHECK_FAILED(gr_data_convert_imagefolder(&(gr_imagefolder_config){.dir = bdir, .size = 8}, out, false, false,
                                             &rep, &err),
                 GR_ERR_DATA, "convert_imgs_bad/c: no JPEG or PNG images", out);
    uint8_t buf[1 << 16];
    write_jpeg(join(cdir, "a_good.jpg"), 64, 64, 3, px_busy);
    size_t n = read_bytes(join(cdir, "a_good.jpg"), buf, sizeof buf);
    GR_ASSERT(n > 4096 && n < sizeof buf);
    write_bytes(join(cdir, "b_cut.jpg"), buf, n * 3 / 4); /* cut inside the scan data */
    CHECK_FAILED(gr_data_convert_imagefolder(&(gr_imagefolder_config){.dir = bdir, .size = 8}, out, false, false,
                                             &rep, &err),
                 GR_ERR_DATA, "c/b_cut.jpg: cannot decode: JPEG: Premature end of JPEG file", out);
    remove(join(cdir, "b_cut.jpg"));
    write_bytes(join(cdir, "b_text.jpg"), "hello", 5);
    CHECK_FAILED(gr_data_convert_imagefolder(&(gr_imagefolder_config){.dir = bdir, .size = 8}, out, false, false,
                                             &rep, &err),
                 GR_ERR_DATA, "c/b_text.jpg: cannot decode: not a JPEG or PNG file (it starts with 68 65 6C 6C)", out);
    remove(join(cdir, "b_text.jpg"));
    n = read_bytes(join(dir, "a_cls/grad.png"), buf, sizeof buf);
    write_bytes(join(cdir, "b_cut.png"), buf, n - 20);
    CHECK_FAILED(gr_data_convert_imagefolder(&(gr_imagefolder_config){.dir = bdir, .size = 8}, out, false, false,
                                             &rep, &err),
                 GR_ERR_DATA, "c/b_cut.png: cannot decode: PNG: ", out);
    remove(join(cdir, "b_cut.png"));
    CHECK(gr_data_convert_imagefolder(&(gr_imagefolder_config){.dir = bdir, .size = 8}, out, false, false, &rep,
                                      &err) == GR_OK);
    CHECK(rep.skipped == 1);
    remove(out);
    CHECK_FAILED(gr_data_convert_imagefolder(&(gr_imagefolder_config){.dir = tmp_path("nope"), .size = 8}, out, false,
                                             false, &rep, &err),
                 GR_ERR_DATA, "convert_nope: no such directory", out);

    /* usage errors */
    CHECK_FAILED(gr_data_convert_imagefolder(&(gr_imagefolder_config){.dir = bdir, .size = 0}, out, false, false,
                                             &rep, &err),
                 GR_ERR_USAGE, "--size must be in [1, 65536], got 0", out);
    CHECK_FAILED(gr_data_convert_imagefolder(&(gr_imagefolder_config){.dir = bdir, .size = 8, .short_side = 7}, out,
                                             false, false, &rep, &err),
                 GR_ERR_USAGE, "--short-side must be in [--size 8, 65536], got 7", out);
    CHECK_FAILED(gr_data_convert_imagefolder(&(gr_imagefolder_config){.dir = bdir, .size = 8, .group = "train"}, out,
                                             false, false, &rep, &err),
                 GR_ERR_USAGE, "--group must be an absolute HDF5 path", out);
    /* a sample is one chunk, under HDF5's 4 GiB: refused before any image
     * of the folder is decoded (issue 30 item 6) */
    CHECK_FAILED(gr_data_convert_imagefolder(&(gr_imagefolder_config){.dir = bdir, .size = 37838}, out, false, false,
                                             &rep, &err),
                 GR_ERR_USAGE, "data imagefolder: --size 37838 is too large: a 3-channel sample of 37838x37838 is "
                 "over HDF5's 4 GiB chunk limit; the largest --size is 37837", out);
    rm_rf(bdir);
    rm_rf(dir);
}

int main(void) {
    mkdir(GR_TEST_TMP, 0755);
    test_imagefolder();
    return gr_test_report();
}
