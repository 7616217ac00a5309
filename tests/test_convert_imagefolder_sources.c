/* test_convert_imagefolder_sources.c — unit tests for `gpurun data
 * imagefolder` on what ImageNet holds besides RGB JPEGs (CMYK and YCCK JPEGs,
 * a PNG named .JPEG), on files no decoder should accept (a huge claimed size,
 * scan data cut at an EOI marker, garbage), and on --on-error skip: the bad
 * files reported, the statistics of the samples kept, write blocks closing
 * up over skipped files. */
#include "convert_images.h"

#include "../dataio/convert_out.h" /* gr_conv_block_samples */

/* What ImageNet holds besides RGB JPEGs: CMYK and YCCK JPEGs (Adobe's
 * inverted convention and plain), a PNG named .JPEG; and files no decoder
 * should accept: a header claiming 65500x65500 over a few bytes of data, scan
 * data that ends early at an EOI marker, garbage. */
static void test_imagefolder_sources(void) {
    const char *dir = tmp_path("imgs_src"), *out = tmp_path("imgs_src.h5");
    gr_error err = {0};
    gr_imagefolder_report rep = {0};
    rm_rf(dir);
    remove(out);
    mkdir(dir, 0755);
    const char *k = join(dir, "k");
    char kdir[600];
    snprintf(kdir, sizeof kdir, "%s", k);
    mkdir(kdir, 0755);
    const uint8_t cmyk[4] = {200, 100, 50, 220};
    write_jpeg_cmyk(join(kdir, "a_adobe.jpg"), 24, 24, cmyk, 0);
    write_jpeg_cmyk(join(kdir, "b_plain.jpg"), 24, 24, cmyk, 1);
    write_jpeg_cmyk(join(kdir, "c_ycck.jpeg"), 24, 24, cmyk, 2);
    write_png(join(kdir, "d_png.JPEG"), 16, 16, PNG_COLOR_TYPE_RGB, 8, px_solid);
    CHECK_MSG(gr_data_convert_imagefolder(&(gr_imagefolder_config){.dir = dir, .size = 8}, out, false, false, &rep,
                                          &err) == GR_OK, "%s", err.msg);
    split_data d;
    if (file_exists(out) && read_split(out, "/train", &d)) {
        CHECK(d.n == 4);
        for (int c = 0; c < 3; c++) {
            const double inv = cmyk[c] * cmyk[3] / 255.0, plain = (255 - cmyk[c]) * (255 - cmyk[3]) / 255.0;
            for (int64_t p = 0; p < 64; p++) {
                CHECK_CLOSE(d.x[(0 * 3 + c) * 64 + p], inv, 0, 3);   /* Adobe: R = C * K / 255 */
                CHECK_CLOSE(d.x[(1 * 3 + c) * 64 + p], plain, 0, 3); /* R = (255 - C)(255 - K) / 255 */
                CHECK_CLOSE(d.x[(2 * 3 + c) * 64 + p], inv, 0, 3);   /* YCCK -> Adobe CMYK */
                CHECK(d.x[(3 * 3 + c) * 64 + p] == px_solid(0, 0, c)); /* by its signature, not its name */
            }
        }
        split_free(&d);
    }
    remove(out);
    rm_rf(dir);

    /* bad files, each alone beside a good one: exit 3 naming the file and why */
    mkdir(dir, 0755);
    mkdir(kdir, 0755);
    write_jpeg(join(kdir, "e_good.jpg"), 16, 16, 3, px_solid);
    uint8_t buf[1 << 16];
    write_jpeg(join(dir, "busy.tmp"), 64, 64, 3, px_busy);
    size_t n = read_bytes(join(dir, "busy.tmp"), buf, sizeof buf);
    GR_ASSERT(n > 4096 && n + 2 < sizeof buf);
    remove(join(dir, "busy.tmp"));
    jpeg_claim_size(buf, n, 65500, 65500);
    static const char *const why[] = {
        "header claims 65500x65500 pixels", "header claims 65500x65500 pixels", "Corrupt JPEG data",
        "not a JPEG or PNG file"};
    for (int bad = 0; bad < 4; bad++) {
        const char *name = join(kdir, "f_bad.jpg");
        remove(out);
        if (bad == 0) write_bytes(name, buf, n);          /* 65500x65500 over 64x64's data and its EOI */
        if (bad == 1) write_bytes(name, buf, n * 3 / 4);  /* the same, cut */
        if (bad == 2) {                                   /* 64x64, scan cut, then EOI */
            jpeg_claim_size(buf, n, 64, 64);
            buf[n / 2] = 0xFF, buf[n / 2 + 1] = 0xD9;
            write_bytes(name, buf, n / 2 + 2);
        }
        if (bad == 3) write_bytes(name, "GIF89a garbage", 14);
        CHECK_FAILED(gr_data_convert_imagefolder(&(gr_imagefolder_config){.dir = dir, .size = 8}, out, false, false,
                                                 &rep, &err),
                     GR_ERR_DATA, "k/f_bad.jpg: cannot decode: ", out);
        CHECK_STR_CONTAINS(err.msg, why[bad]);
        if (bad == 0) CHECK_STR_CONTAINS(err.msg, "(--on-error skip leaves such files out)");
    }

    /* --on-error skip: every bad file above, in two classes; the others convert */
    write_bytes(join(kdir, "f_bad.jpg"), "GIF89a garbage", 14);                   /* k: e_good f_bad g_png h_bad */
    write_png(join(kdir, "g_png.jpg"), 12, 12, PNG_COLOR_TYPE_PALETTE, 8, px_pal);
    write_bytes(join(kdir, "h_bad.jpeg"), "", 0);
    char mdir[600];
    snprintf(mdir, sizeof mdir, "%s/m", dir);
    mkdir(mdir, 0755);
    jpeg_claim_size(buf, n, 65500, 65500);
    write_bytes(join(mdir, "a_huge.jpg"), buf, n * 3 / 4);                      /* m: a_huge b_cmyk c_eoi */
    write_jpeg_cmyk(join(mdir, "b_cmyk.jpg"), 24, 24, cmyk, 0);
    jpeg_claim_size(buf, n, 64, 64);
    write_bytes(join(mdir, "c_eoi.jpg"), buf, n / 2 + 2);
    remove(out);
    CHECK_FAILED(gr_data_convert_imagefolder(&(gr_imagefolder_config){.dir = dir, .size = 8}, out, false, false,
                                             &rep, &err),
                 GR_ERR_DATA, "k/f_bad.jpg: cannot decode: not a JPEG or PNG file (it starts with 47 49 46 38)", out);
    CHECK(rep.nbad == 0);
    gr_imagefolder_config skip = {.dir = dir, .size = 8, .on_error = GR_ON_ERROR_SKIP};
    CHECK_MSG(gr_data_convert_imagefolder(&skip, out, false, false, &rep, &err) == GR_OK, "%s", err.msg);
    CHECK(rep.samples == 3 && rep.skipped == 0);
    static const char *const bad_names[] = {"k/f_bad.jpg", "k/h_bad.jpeg", "m/a_huge.jpg", "m/c_eoi.jpg"};
    static const char *const bad_why[] = {"not a JPEG or PNG file (it starts with 47 49 46 38)",
                                          "not a JPEG or PNG file (it is empty)",
                                          "JPEG: header claims 65500x65500 pixels, more than this converter takes "
                                          "(sides up to 32768, up to 268435456 pixels)",
                                          "JPEG: Corrupt JPEG data: premature end of data segment"};
    CHECK_MSG(rep.nbad == 4, "%lld files left out", (long long)rep.nbad);
    for (int64_t i = 0; i < GR_MIN(rep.nbad, 4); i++) {
        CHECK_STR_CONTAINS(rep.bad[i].path, bad_names[i]);
        CHECK_MSG(strcmp(rep.bad[i].why, bad_why[i]) == 0, "%s: %s", rep.bad[i].path, rep.bad[i].why);
    }
    gr_imagefolder_report_free(&rep);
    CHECK(rep.bad == NULL && rep.nbad == 0);
    if (read_split(out, "/train", &d)) {
        CHECK(d.n == 3 && d.y[0] == 0 && d.y[1] == 0 && d.y[2] == 1); /* e_good g_png b_cmyk */
        CHECK_CLOSE(max_err(&d, 0, 0, 8, want_solid), 0, 0, 4);
        CHECK(max_err(&d, 1, 0, 8, want_pal) == 0);
        CHECK_CLOSE(d.x[(2 * 3 + 0) * 64], cmyk[0] * cmyk[3] / 255.0, 0, 3);
        double want_m[3], want_s[3], m[3], sd[3];
        stats_of(&d, want_m, want_s); /* of the samples written, not of a padded split */
        CHECK(read_attr(out, "/train", "mean", m, 3) == 3 && read_attr(out, "/train", "std", sd, 3) == 3);
        for (int c = 0; c < 3; c++) CHECK_CLOSE(m[c], want_m[c], 1e-9, 1e-9);
        for (int c = 0; c < 3; c++) CHECK_CLOSE(sd[c], want_s[c], 1e-6, 1e-6);
        split_free(&d);
    }
    char cls[4][32] = {{0}};
    CHECK(read_classes(out, "/train", cls, 4) == 2 && strcmp(cls[1], "m") == 0);
    remove(out);

    /* nothing decodes: an error, even under skip */
    rm_rf(dir);
    mkdir(dir, 0755);
    mkdir(kdir, 0755);
    write_bytes(join(kdir, "x.jpg"), "garbage", 7);
    write_bytes(join(kdir, "y.png"), "garbage", 7);
    CHECK_FAILED(gr_data_convert_imagefolder(&skip, out, false, false, &rep, &err), GR_ERR_DATA,
                 "convert_imgs_src: none of the 2 images could be decoded (the first: ", out);
    CHECK_STR_CONTAINS(err.msg, "k/x.jpg: not a JPEG or PNG file");
    gr_imagefolder_report_free(&rep);
    CHECK_FAILED(gr_data_convert_imagefolder(&(gr_imagefolder_config){.dir = dir, .size = 8, .on_error = 7}, out,
                                             false, false, &rep, &err),
                 GR_ERR_USAGE, "--on-error must be skip or fail", out);
    rm_rf(dir);
}

/* --on-error skip across write blocks (S = 2048: 12 MiB samples, blocks of
 * 5): the blocks close up and the split's labels are the kept files'. */
static void test_imagefolder_skip_blocks(void) {
    const char *dir = tmp_path("imgs_blocks"), *out = tmp_path("imgs_blocks.h5");
    gr_error err = {0};
    rm_rf(dir);
    remove(out);
    mkdir(dir, 0755);
    char a[600], b[600];
    snprintf(a, sizeof a, "%s/a", dir);
    snprintf(b, sizeof b, "%s/b", dir);
    mkdir(a, 0755);
    mkdir(b, 0755);
    /* block 1: a/0 a/1(bad) a/2 b/0 b/1, block 2: b/2(bad) b/3 b/4(bad) */
    write_jpeg(join(a, "0.jpg"), 16, 16, 3, px_solid);
    write_bytes(join(a, "1.jpg"), "bad", 3);
    write_png(join(a, "2.png"), 8, 8, PNG_COLOR_TYPE_PALETTE, 8, px_pal);
    write_png(join(b, "0.png"), 8, 8, PNG_COLOR_TYPE_GRAY, 8, px_solid);
    write_png(join(b, "1.png"), 8, 8, PNG_COLOR_TYPE_PALETTE, 8, px_pal);
    write_bytes(join(b, "2.png"), "bad", 3);
    write_png(join(b, "3.png"), 8, 8, PNG_COLOR_TYPE_RGBA, 8, px_rgba);
    write_bytes(join(b, "4.png"), "bad", 3);
    const int64_t S = 2048;
    CHECK(gr_conv_block_samples(8, 3 * S * S) == 5);
    gr_imagefolder_report rep = {0};
    gr_imagefolder_config cfg = {.dir = dir, .size = S, .on_error = GR_ON_ERROR_SKIP};
    CHECK_MSG(gr_data_convert_imagefolder(&cfg, out, false, false, &rep, &err) == GR_OK, "%s", err.msg);
    CHECK(rep.samples == 5 && rep.nbad == 3);
    gr_imagefolder_report_free(&rep);
    hid_t f = H5Fopen(out, H5F_ACC_RDONLY, H5P_DEFAULT);
    CHECK(f >= 0);
    if (f >= 0) {
        hid_t im = H5Dopen2(f, "/train/images", H5P_DEFAULT), lb = H5Dopen2(f, "/train/labels", H5P_DEFAULT);
        hid_t sp = H5Dget_space(im);
        hsize_t dims[4] = {0}, nl = 0;
        H5Sget_simple_extent_dims(sp, dims, NULL);
        H5Sclose(sp);
        sp = H5Dget_space(lb);
        H5Sget_simple_extent_dims(sp, &nl, NULL);
        H5Sclose(sp);
        CHECK(dims[0] == 5 && dims[1] == 3 && dims[2] == (hsize_t)S && nl == 5);
        int32_t y[5] = {0};
        CHECK(nl == 5 && H5Dread(lb, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, y) >= 0);
        CHECK(y[0] == 0 && y[1] == 0 && y[2] == 1 && y[3] == 1 && y[4] == 1);
        /* one pixel of each sample, in the middle */
        static const uint8_t want[5][3] = {{200, 30, 90}, {1, 2, 3}, {77, 77, 77}, {1, 2, 3}, {10, 20, 30}};
        for (hsize_t i = 0; i < 5 && dims[0] == 5; i++) {
            const hsize_t start[4] = {i, 0, 1000, 1000}, cnt[4] = {1, 3, 1, 1};
            uint8_t px[3] = {0};
            hid_t fsp = H5Dget_space(im), msp = H5Screate_simple(4, cnt, NULL);
            H5Sselect_hyperslab(fsp, H5S_SELECT_SET, start, NULL, cnt, NULL);
            CHECK(H5Dread(im, H5T_NATIVE_UINT8, msp, fsp, H5P_DEFAULT, px) >= 0);
            for (int c = 0; c < 3; c++)
                CHECK_MSG(abs(px[c] - want[i][c]) <= (i == 0 ? 4 : 0), "sample %d channel %d: %d, expected %d",
                          (int)i, c, px[c], want[i][c]);
            H5Sclose(fsp);
            H5Sclose(msp);
        }
        H5Dclose(im);
        H5Dclose(lb);
        H5Fclose(f);
    }
    remove(out);
    rm_rf(dir);
}

int main(void) {
    mkdir(GR_TEST_TMP, 0755);
    test_imagefolder_sources();
    test_imagefolder_skip_blocks();
    return gr_test_report();
}
