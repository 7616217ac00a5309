/* test_dataio.c — unit tests for opening and reading a dataset of dataio/:
 * open/validation errors (missing file, group or datasets, N mismatch, bad
 * labels, ranks, dtypes, layout, no samples, truncated and garbage files),
 * labels and attributes, and normalized reads (NCHW, NHWC as h5py writes the
 * layout, float16 in both byte orders). The on-disk read path, unwritten
 * chunks and non-finite values are in test_dataio_ondisk.c, the loader in
 * test_dataio_loader.c, the IDX converter in test_dataio_idx.c. */
#include "dataio_fixture.h"

static void test_open_errors(void) {
    uint8_t img[5 * 6];
    int64_t lab[5] = {0, 1, 2, 1, 0};
    for (int i = 0; i < 30; i++) img[i] = (uint8_t)i;
    gr_error err;
    const char *p = tmp_path("good.h5");
    h5spec s = simple_spec(img, lab, 5);
    write_h5(p, &s);
    CHECK(try_open(p, "/train", &err) == GR_OK);
    CHECK(try_open(p, "train/", &err) == GR_OK);

    /* missing file */
    const char *missing = tmp_path("nope.h5");
    CHECK(try_open(missing, "/", &err) == GR_ERR_DATA);
    CHECK_STR_CONTAINS(err.msg, "dataio_nope.h5: no such file");

    /* missing group */
    CHECK(try_open(p, "/val", &err) == GR_ERR_DATA);
    CHECK_STR_CONTAINS(err.msg, "dataio_good.h5: group /val: no such group");
    CHECK(try_open(p, "/a/b", &err) == GR_ERR_DATA);
    CHECK_STR_CONTAINS(err.msg, "group /a/b: no such group");

    /* missing datasets */
    const char *q = tmp_path("nolabels.h5");
    s = simple_spec(img, NULL, 5);
    write_h5(q, &s);
    CHECK(try_open(q, "/train", &err) == GR_ERR_DATA);
    CHECK_STR_CONTAINS(err.msg, "dataio_nolabels.h5: /train/labels: no such dataset");
    s = simple_spec(NULL, lab, 5);
    write_h5(q, &s);
    CHECK(try_open(q, "/train", &err) == GR_ERR_DATA);
    CHECK_STR_CONTAINS(err.msg, "dataio_nolabels.h5: /train/images: no such dataset");
    s = simple_spec(img, lab, 5);
    s.group = "/";
    write_h5(q, &s);
    CHECK(try_open(q, "/train", &err) == GR_ERR_DATA);
    CHECK_STR_CONTAINS(err.msg, "group /train: no such group");
    CHECK(try_open(q, NULL, &err) == GR_OK);

    /* N mismatch */
    s = simple_spec(img, lab, 5);
    s.nlab = 4;
    write_h5(q, &s);
    CHECK(try_open(q, "/train", &err) == GR_ERR_DATA);
    CHECK_STR_CONTAINS(err.msg, "dataio_nolabels.h5: /train: images has N=5 but labels has N=4");

    /* negative label, in an int16 dataset */
    int64_t neg[5] = {0, 1, -1, 1, 0};
    s = simple_spec(img, neg, 5);
    s.lab_ftype = H5T_STD_I16BE;
    write_h5(q, &s);
    CHECK(try_open(q, "/train", &err) == GR_ERR_DATA);
    CHECK_STR_CONTAINS(err.msg, "/train/labels[2]: label -1 is negative");

    /* float labels */
    s = simple_spec(img, lab, 5);
    s.lab_ftype = H5T_IEEE_F32LE;
    write_h5(q, &s);
    CHECK(try_open(q, "/train", &err) == GR_ERR_DATA);
    CHECK_STR_CONTAINS(err.msg, "/train/labels: unsupported dtype (float32)");

    /* wrong rank */
    s = simple_spec(img, lab, 5);
    s.rank = 2;
    s.dims[1] = 6;
    write_h5(q, &s);
    CHECK(try_open(q, "/train", &err) == GR_ERR_DATA);
    CHECK_STR_CONTAINS(err.msg, "/train/images: rank 2");
    s = simple_spec(img, lab, 1);
    s.rank = 1;
    s.nlab = 1;
    write_h5(q, &s);
    CHECK(try_open(q, "/train", &err) == GR_ERR_DATA);
    CHECK_STR_CONTAINS(err.msg, "rank 1");

    /* unsupported dtypes */
    int16_t img16[30] = {0};
    s = simple_spec(NULL, lab, 5);
    s.img = img16;
    s.img_ftype = H5T_STD_I16LE;
    s.img_mtype = H5T_NATIVE_INT16;
    write_h5(q, &s);
    CHECK(try_open(q, "/train", &err) == GR_ERR_DATA);
    CHECK_STR_CONTAINS(err.msg, "dataio_nolabels.h5: /train/images: unsupported dtype (int16); expected uint8, float16 or float32");
    double img64[30] = {0};
    s.img = img64;
    s.img_ftype = H5T_IEEE_F64LE;
    s.img_mtype = H5T_NATIVE_DOUBLE;
    write_h5(q, &s);
    CHECK(try_open(q, "/train", &err) == GR_ERR_DATA);
    CHECK_STR_CONTAINS(err.msg, "unsupported dtype (float64)");
    s = simple_spec(img, lab, 5);
    s.img_ftype = H5T_STD_I8LE;
    write_h5(q, &s);
    CHECK(try_open(q, "/train", &err) == GR_ERR_DATA);
    CHECK_STR_CONTAINS(err.msg, "unsupported dtype (int8)");

    /* bad layout attribute, no samples */
    s = simple_spec(img, lab, 5);
    s.layout = "HWCN";
    write_h5(q, &s);
    CHECK(try_open(q, "/train", &err) == GR_ERR_DATA);
    CHECK_STR_CONTAINS(err.msg, "attribute layout: \"HWCN\"");
    s = simple_spec(img, lab, 0);
    write_h5(q, &s);
    CHECK(try_open(q, "/train", &err) == GR_ERR_DATA);
    CHECK_STR_CONTAINS(err.msg, "no samples");

    /* truncated copy of a real file (contiguous images, data at the end) */
    enum { BIG = 64 * 3 * 16 * 16 };
    float *big = malloc(BIG * sizeof *big);
    int64_t blab[64];
    for (int i = 0; i < BIG; i++) big[i] = (float)i;
    for (int i = 0; i < 64; i++) blab[i] = i % 10;
    h5spec b = {.group = "/train", .img_ftype = H5T_IEEE_F32LE, .img_mtype = H5T_NATIVE_FLOAT, .rank = 4,
                .dims = {64, 3, 16, 16}, .img = big, .lab_ftype = H5T_STD_U8LE, .nlab = 64, .labels = blab};
    const char *real = tmp_path("real.h5"), *trunc = tmp_path("trunc.h5");
    write_h5(real, &b);
    CHECK(try_open(real, "/train", &err) == GR_OK);
    copy_prefix(real, trunc, 0.5);
    CHECK(try_open(trunc, "/train", &err) == GR_ERR_DATA);
    CHECK_STR_CONTAINS(err.msg, "dataio_trunc.h5: not an HDF5 file or corrupt (HDF5: ");
    copy_prefix(real, trunc, 0.01);
    CHECK(try_open(trunc, "/train", &err) == GR_ERR_DATA);
    CHECK_STR_CONTAINS(err.msg, "dataio_trunc.h5: ");
    /* same, on the on-disk path, chunked */
    b.chunked = true;
    write_h5(real, &b);
    copy_prefix(real, trunc, 0.5);
    gr_dataset_set_memory_limit(0);
    CHECK(try_open(trunc, "/train", &err) == GR_ERR_DATA);
    CHECK_STR_CONTAINS(err.msg, "dataio_trunc.h5: ");
    gr_dataset_set_memory_limit(-1);
    free(big);

    /* random garbage, and an empty file */
    const char *junk = tmp_path("garbage.h5");
    FILE *fj = fopen(junk, "wb");
    for (int i = 0; i < 8192; i++) fputc((int)(gr_hash64(7, (uint64_t)i) & 0xff), fj);
    fclose(fj);
    CHECK(try_open(junk, "/", &err) == GR_ERR_DATA);
    CHECK_STR_CONTAINS(err.msg, "dataio_garbage.h5: not an HDF5 file or corrupt (HDF5: ");
    fj = fopen(junk, "wb");
    fclose(fj);
    CHECK(try_open(junk, "/", &err) == GR_ERR_DATA);
    CHECK_STR_CONTAINS(err.msg, "dataio_garbage.h5: not an HDF5 file or corrupt");
    CHECK(try_open(GR_TEST_TMP, "/", &err) == GR_ERR_DATA);
    CHECK_STR_CONTAINS(err.msg, "is a directory");
}

static void test_labels_and_attrs(void) {
    uint8_t img[5 * 6] = {0};
    int64_t lab[5] = {0, 2, 1, 3, 4};
    const char *p = tmp_path("labels.h5");
    h5spec s = simple_spec(img, lab, 5);
    s.lab_ftype = H5T_STD_U64LE;
    s.n_stats = 1;
    s.mean[0] = 12.5;
    s.std[0] = 3.25;
    write_h5(p, &s);
    gr_error err = {0};
    gr_dataset *ds = NULL;
    CHECK(gr_dataset_open(p, "/train", &ds, &err) == GR_OK);
    if (!ds) return;
    CHECK(gr_dataset_len(ds) == 5);
    const int32_t *l = gr_dataset_labels(ds);
    CHECK(l[0] == 0 && l[1] == 2 && l[4] == 4);
    CHECK(gr_dataset_check_labels(ds, 5, &err) == GR_OK);
    CHECK(gr_dataset_check_labels(ds, 3, &err) == GR_ERR_DATA);
    CHECK_STR_CONTAINS(err.msg, "dataio_labels.h5: /train/labels[3]: label 3 is outside [0, 3) (the model has 3 outputs)");
    double v[4] = {0};
    CHECK(gr_dataset_attr_floats(ds, "mean", v, 4) == 1);
    CHECK(v[0] == 12.5);
    CHECK(gr_dataset_attr_floats(ds, "std", v, 4) == 1);
    CHECK(v[0] == 3.25);
    CHECK(gr_dataset_attr_floats(ds, "classes", v, 4) == 0);
    CHECK(gr_dataset_dtype(ds) == GR_DT_UINT8);
    gr_dataset_close(ds);
}

static void test_read_normalize(void) {
    enum { N = 4, C = 2, H = 3, W = 3, S = C * H * W };
    uint8_t img[N * S];
    int64_t lab[N] = {3, 1, 4, 1};
    for (int i = 0; i < N * S; i++) img[i] = (uint8_t)(i * 7 % 256);
    h5spec s = {.group = "/", .img_ftype = H5T_STD_U8LE, .img_mtype = H5T_NATIVE_UINT8, .rank = 4,
                .dims = {N, C, H, W}, .img = img, .lab_ftype = H5T_STD_U16LE, .nlab = N, .labels = lab};
    const char *p = tmp_path("norm.h5");
    write_h5(p, &s);
    gr_error err = {0};
    gr_dataset *ds = NULL;
    CHECK(gr_dataset_open(p, "/", &ds, &err) == GR_OK);
    if (!ds) return;
    int64_t chw[3];
    gr_dataset_sample_shape(ds, chw);
    CHECK(chw[0] == C && chw[1] == H && chw[2] == W);
    const double mean[C] = {10, 20}, std[C] = {2, 4};
    int64_t idx[3] = {2, 0, 2};
    float x[3 * S];
    int32_t y[3];
    CHECK(gr_dataset_read(ds, idx, 3, mean, std, x, y, &err) == GR_OK);
    CHECK(y[0] == 4 && y[1] == 3 && y[2] == 4);
    int bad = 0;
    for (int k = 0; k < 3; k++)
        for (int c = 0; c < C; c++)
            for (int i = 0; i < H * W; i++) {
                double raw = img[idx[k] * S + c * H * W + i];
                double want = (raw - mean[c]) / std[c];
                if (fabs(x[k * S + c * H * W + i] - want) > 1e-5) bad++;
            }
    CHECK(bad == 0);
    CHECK(gr_dataset_read(ds, idx, 3, NULL, NULL, x, y, &err) == GR_OK);
    CHECK(x[0] == (float)img[2 * S] && x[S + 5] == (float)img[5]);
    int64_t oob = 4;
    CHECK(gr_dataset_read(ds, &oob, 1, NULL, NULL, x, y, &err) != GR_OK);
    const double zero[C] = {1, 0};
    CHECK(gr_dataset_read(ds, idx, 1, mean, zero, x, y, &err) != GR_OK);
    gr_dataset_close(ds);
}

static void test_nhwc(void) {
    enum { N = 3, H = 2, W = 3, C = 3, S = H * W * C };
    uint8_t img[N * S];
    float imgf[N * S];
    int64_t lab[N] = {0, 1, 2};
    for (int i = 0; i < N * S; i++) img[i] = (uint8_t)(i * 5 + 1), imgf[i] = (float)i * 0.5f - 3.0f;
    const double mean[C] = {1, 2, 3}, std[C] = {0.5, 2, 4};
    for (int variant = 0; variant < 4; variant++) {
        h5spec s = {.group = "/x", .img_ftype = H5T_STD_U8LE, .img_mtype = H5T_NATIVE_UINT8, .rank = 4,
                    .dims = {N, H, W, C}, .img = img, .layout = "NHWC", .lab_ftype = H5T_STD_I8LE, .nlab = N,
                    .labels = lab};
        if (variant == 1) s.img_ftype = H5T_IEEE_F32BE, s.img_mtype = H5T_NATIVE_FLOAT, s.img = imgf;
        if (variant == 2) s.layout_vlen_utf8 = true; /* h5py: d.attrs["layout"] = "NHWC" */
        if (variant == 3) s.layout_on_group = true;  /* h5py: f["x"].attrs["layout"] = "NHWC" */
        const char *p = tmp_path("nhwc.h5");
        write_h5(p, &s);
        gr_error err = {0};
        gr_dataset *ds = NULL;
        CHECK_MSG(gr_dataset_open(p, "/x", &ds, &err) == GR_OK, "variant %d: %s", variant, err.msg);
        if (!ds) return;
        int64_t chw[3];
        gr_dataset_sample_shape(ds, chw);
        CHECK(chw[0] == C && chw[1] == H && chw[2] == W);
        CHECK(gr_dataset_dtype(ds) == (variant == 1 ? GR_DT_FLOAT32 : GR_DT_UINT8));
        int64_t idx[2] = {1, 2};
        float x[2 * S];
        int32_t y[2];
        CHECK(gr_dataset_read(ds, idx, 2, mean, std, x, y, &err) == GR_OK);
        int bad = 0;
        for (int k = 0; k < 2; k++)
            for (int c = 0; c < C; c++)
                for (int h = 0; h < H; h++)
                    for (int w = 0; w < W; w++) {
                        int src = (int)idx[k] * S + (h * W + w) * C + c;
                        double raw = variant == 1 ? imgf[src] : img[src];
                        float got = x[k * S + c * H * W + h * W + w];
                        if (fabs(got - (raw - mean[c]) / std[c]) > 1e-5) bad++;
                    }
        CHECK_MSG(bad == 0, "variant %d: %d mismatches", variant, bad);
        gr_dataset_close(ds);
    }
}

static void test_float16(void) {
    enum { N = 2, S = 8 };
    /* finite values only: inf and NaN images are refused (test_nonfinite) */
    const uint16_t bits[N * S] = {0x3C00, 0xC000, 0x7BFF, 0x0001, 0x3555, 0x0000, 0x8000, 0xFBFF,
                                  0x03FF, 0x0400, 0xBC00, 0x4248, 0x5640, 0x8001, 0x3800, 0x2E66};
    const float want[N * S] = {1.0f, -2.0f, 65504.0f, 5.9604644775390625e-8f, 0.333251953125f, 0.0f, -0.0f,
                               -65504.0f, 6.097555160522461e-5f, 6.103515625e-5f, -1.0f, 3.140625f, 100.0f,
                               -5.9604644775390625e-8f, 0.5f, 0.0999755859375f};
    int64_t lab[N] = {0, 1};
    for (int order = 0; order < 2; order++) {
        hid_t ft = f16_type(order ? H5T_ORDER_BE : H5T_ORDER_LE), mt = f16_type(H5T_ORDER_LE);
        h5spec s = {.group = "/", .img_ftype = ft, .img_mtype = mt, .rank = 3, .dims = {N, 2, 4}, .img = bits,
                    .lab_ftype = H5T_STD_I64LE, .nlab = N, .labels = lab};
        const char *p = tmp_path("f16.h5");
        write_h5(p, &s);
        H5Tclose(ft);
        H5Tclose(mt);
        gr_error err = {0};
        gr_dataset *ds = NULL;
        CHECK(gr_dataset_open(p, "/", &ds, &err) == GR_OK);
        if (!ds) return;
        CHECK(gr_dataset_dtype(ds) == GR_DT_FLOAT16);
        int64_t idx[2] = {0, 1};
        float x[N * S];
        int32_t y[N];
        CHECK(gr_dataset_read(ds, idx, 2, NULL, NULL, x, y, &err) == GR_OK);
        int bad = 0;
        for (int i = 0; i < N * S; i++)
            if (!(x[i] == want[i] && signbit(x[i]) == signbit(want[i]))) {
                bad++;
                fprintf(stderr, "f16 %d: 0x%04x -> %.9g, want %.9g\n", i, bits[i], x[i], want[i]);
            }
        CHECK_MSG(bad == 0, "order %d", order);
        const double mean[1] = {1}, std[1] = {2};
        CHECK(gr_dataset_read(ds, idx, 1, mean, std, x, y, &err) == GR_OK);
        CHECK(x[0] == 0.0f && x[1] == -1.5f);
        gr_dataset_close(ds);
    }
}

int main(void) {
    mkdir(GR_TEST_TMP, 0755);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    test_open_errors();
    test_labels_and_attrs();
    test_read_normalize();
    test_nhwc();
    test_float16();
    H5close();
    return gr_test_report();
}
