/* test_dataio.c — unit tests for dataio/: dataset open/validation errors,
 * normalized reads (NCHW, NHWC, float16, on-disk path vs in-memory path),
 * loader order/sharding/seek/ring, and the IDX converter (hand-made files,
 * broken ones, and the real Fashion-MNIST files when installed). */
#include "../dataio/dataio.h"
#include "../dataio/convert.h"
#include "gr_test.h"

#include <hdf5.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#define FMNIST_DIR "/usr/share/datasets/fashion-mnist"

static const char *tmp_path(const char *name) {
    static char buf[8][512];
    static int k;
    char *p = buf[k++ % 8];
    snprintf(p, 512, "%s/dataio_%s", GR_TEST_TMP, name);
    return p;
}

static bool file_exists(const char *p) {
    struct stat sb;
    return stat(p, &sb) == 0;
}

/* IEEE binary16, little-endian, built by hand (HDF5 1.10 has none). */
static hid_t f16_type(H5T_order_t order) {
    hid_t t = H5Tcopy(H5T_IEEE_F32LE);
    H5Tset_fields(t, 15, 10, 5, 0, 10);
    H5Tset_precision(t, 16);
    H5Tset_size(t, 2);
    H5Tset_ebias(t, 15);
    H5Tset_order(t, order);
    return t;
}

typedef struct h5spec {
    const char *group;            /* created when not "/" */
    hid_t img_ftype, img_mtype;   /* file / memory type of images */
    int rank;
    hsize_t dims[4];
    const void *img;              /* NULL: no images dataset */
    const char *layout;           /* NULL: no attribute */
    bool layout_vlen_utf8;        /* as h5py writes a str attribute (else fixed-length ASCII) */
    bool layout_on_group;         /* the attribute on the split's group instead of images */
    int chunk;                    /* samples per chunk when chunked (0: 2) */
    hsize_t hole[2];              /* hole[0] < hole[1]: samples [hole[0], hole[1]) never written */
    hid_t lab_ftype;
    hsize_t nlab;
    const int64_t *labels;        /* NULL: no labels dataset */
    bool chunked;
    int n_stats;                  /* mean/std group attributes */
    double mean[4], std[4];
} h5spec;

static void write_h5(const char *path, const h5spec *s) {
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    GR_ASSERT(f >= 0);
    hid_t g = f;
    if (strcmp(s->group, "/") != 0) {
        hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
        H5Pset_create_intermediate_group(lcpl, 1);
        g = H5Gcreate2(f, s->group, lcpl, H5P_DEFAULT, H5P_DEFAULT);
        H5Pclose(lcpl);
        GR_ASSERT(g >= 0);
    }
    if (s->img) {
        hid_t sp = H5Screate_simple(s->rank, s->dims, NULL);
        hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
        if (s->chunked) {
            hsize_t ch[4];
            for (int d = 0; d < s->rank; d++) ch[d] = s->dims[d];
            ch[0] = s->chunk ? (hsize_t)s->chunk : 2;
            H5Pset_chunk(dcpl, s->rank, ch);
        }
        hid_t d = H5Dcreate2(g, "images", s->img_ftype, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
        GR_ASSERT(d >= 0);
        if (s->hole[1] > s->hole[0]) { /* all but the hole: its chunks are never allocated */
            hsize_t start[4] = {0}, count[4];
            for (int d2 = 0; d2 < s->rank; d2++) count[d2] = s->dims[d2];
            count[0] = s->hole[0];
            H5Sselect_hyperslab(sp, H5S_SELECT_SET, start, NULL, count, NULL);
            start[0] = s->hole[1];
            count[0] = s->dims[0] - s->hole[1];
            if (count[0]) H5Sselect_hyperslab(sp, H5S_SELECT_OR, start, NULL, count, NULL);
            GR_ASSERT(H5Dwrite(d, s->img_mtype, sp, sp, H5P_DEFAULT, s->img) >= 0);
            H5Sselect_all(sp);
        } else {
            GR_ASSERT(H5Dwrite(d, s->img_mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, s->img) >= 0);
        }
        if (s->layout) {
            hid_t st = H5Tcopy(H5T_C_S1);
            H5Tset_size(st, s->layout_vlen_utf8 ? H5T_VARIABLE : strlen(s->layout));
            if (s->layout_vlen_utf8) H5Tset_cset(st, H5T_CSET_UTF8);
            hid_t asp = H5Screate(H5S_SCALAR);
            hid_t a = H5Acreate2(s->layout_on_group ? g : d, "layout", st, asp, H5P_DEFAULT, H5P_DEFAULT);
            if (s->layout_vlen_utf8) H5Awrite(a, st, &s->layout);
            else H5Awrite(a, st, s->layout);
            H5Aclose(a);
            H5Sclose(asp);
            H5Tclose(st);
        }
        H5Dclose(d);
        H5Pclose(dcpl);
        H5Sclose(sp);
    }
    if (s->labels) {
        hid_t sp = H5Screate_simple(1, &s->nlab, NULL);
        hid_t d = H5Dcreate2(g, "labels", s->lab_ftype, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        GR_ASSERT(d >= 0);
        GR_ASSERT(H5Dwrite(d, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, s->labels) >= 0);
        H5Dclose(d);
        H5Sclose(sp);
    }
    if (s->n_stats) {
        hsize_t n = (hsize_t)s->n_stats;
        hid_t sp = H5Screate_simple(1, &n, NULL);
        hid_t a = H5Acreate2(g, "mean", H5T_IEEE_F64LE, sp, H5P_DEFAULT, H5P_DEFAULT);
        H5Awrite(a, H5T_NATIVE_DOUBLE, s->mean);
        H5Aclose(a);
        a = H5Acreate2(g, "std", H5T_IEEE_F32LE, sp, H5P_DEFAULT, H5P_DEFAULT);
        H5Awrite(a, H5T_NATIVE_DOUBLE, s->std);
        H5Aclose(a);
        H5Sclose(sp);
    }
    if (g != f) H5Gclose(g);
    H5Fclose(f);
}

/* A valid /train split: n uint8 images [n,1,2,3] and int32 labels. */
static h5spec simple_spec(const uint8_t *img, const int64_t *lab, hsize_t n) {
    h5spec s = {.group = "/train", .img_ftype = H5T_STD_U8LE, .img_mtype = H5T_NATIVE_UINT8, .rank = 4,
                .dims = {n, 1, 2, 3}, .img = img, .lab_ftype = H5T_STD_I32LE, .nlab = n, .labels = lab};
    return s;
}

static gr_status try_open(const char *path, const char *group, gr_error *err) {
    gr_dataset *ds = NULL;
    memset(err, 0, sizeof *err);
    gr_status st = gr_dataset_open(path, group, &ds, err);
    CHECK(st == GR_OK || ds == NULL);
    gr_dataset_close(ds);
    return st;
}

static void copy_prefix(const char *src, const char *dst, double frac) {
    FILE *in = fopen(src, "rb");
    GR_ASSERT(in);
    fseek(in, 0, SEEK_END);
    long n = ftell(in);
    fseek(in, 0, SEEK_SET);
    long keep = (long)((double)n * frac);
    char *buf = malloc((size_t)n + 1);
    GR_ASSERT(fread(buf, 1, (size_t)n, in) == (size_t)n);
    fclose(in);
    FILE *out = fopen(dst, "wb");
    fwrite(buf, 1, (size_t)keep, out);
    fclose(out);
    free(buf);
}

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

/* The on-disk path (memory limit 0) gives the same values as in-memory. */
static void test_disk_path(void) {
    enum { N = 37, C = 3, H = 5, W = 4, S = C * H * W };
    float *imgf = malloc(N * S * sizeof *imgf);
    uint8_t *img8 = malloc(N * S);
    uint16_t *img16 = malloc(N * S * sizeof *img16);
    int64_t lab[N];
    for (int i = 0; i < N * S; i++) {
        imgf[i] = (float)(gr_hash64(1, (uint64_t)i) % 1000) * 0.25f;
        img8[i] = (uint8_t)gr_hash64(2, (uint64_t)i);
        img16[i] = (uint16_t)(0x3C00 + gr_hash64(3, (uint64_t)i) % 2000);
    }
    for (int i = 0; i < N; i++) lab[i] = i;
    hid_t f16 = f16_type(H5T_ORDER_LE);
    for (int variant = 0; variant < 4; variant++) {
        h5spec s = {.group = "/d", .img_ftype = H5T_IEEE_F32LE, .img_mtype = H5T_NATIVE_FLOAT, .rank = 4,
                    .dims = {N, C, H, W}, .img = imgf, .lab_ftype = H5T_STD_I32LE, .nlab = N, .labels = lab,
                    .chunked = variant != 1};
        if (variant == 2) s.img_ftype = s.img_mtype = H5T_NATIVE_UINT8, s.img = img8, s.layout = "NHWC",
                          s.dims[1] = H, s.dims[2] = W, s.dims[3] = C;
        if (variant == 3) s.img_ftype = s.img_mtype = f16, s.img = img16;
        const char *p = tmp_path("disk.h5");
        write_h5(p, &s);
        gr_error err = {0};
        gr_dataset *mem = NULL, *disk = NULL;
        gr_dataset_set_memory_limit(-1);
        CHECK(gr_dataset_open(p, "/d", &mem, &err) == GR_OK);
        gr_dataset_set_memory_limit(0);
        CHECK(gr_dataset_open(p, "/d", &disk, &err) == GR_OK);
        gr_dataset_set_memory_limit(-1);
        if (!mem || !disk) {
            gr_dataset_close(mem);
            gr_dataset_close(disk);
            continue;
        }
        CHECK(gr_dataset_in_memory(mem) && !gr_dataset_in_memory(disk));
        /* every chunk written, uncompressed, little-endian: pread past HDF5 (chunks of 2 with an
         * edge chunk, contiguous, NHWC uint8, float16) */
        CHECK_MSG(gr_dataset_reads_direct(disk), "variant %d: not read directly", variant);
        const double mean[C] = {3, 100, -2}, std[C] = {7, 0.5, 3};
        enum { B = 23 };
        float xa[B * S], xb[B * S];
        int32_t ya[B], yb[B];
        for (int round = 0; round < 4; round++) {
            int64_t idx[B];
            for (int k = 0; k < B; k++) idx[k] = (int64_t)(gr_hash64(round + 10, (uint64_t)k) % N);
            if (round == 3)
                for (int k = 0; k < B; k++) idx[k] = N - 1 - k; /* one descending run */
            idx[5] = idx[2];                                     /* duplicates */
            CHECK(gr_dataset_read(mem, idx, B, mean, std, xa, ya, &err) == GR_OK);
            CHECK(gr_dataset_read(disk, idx, B, mean, std, xb, yb, &err) == GR_OK);
            CHECK_MSG(memcmp(xa, xb, sizeof xa) == 0, "variant %d round %d", variant, round);
            CHECK(memcmp(ya, yb, sizeof ya) == 0);
            CHECK(ya[3] == idx[3]);
        }
        gr_dataset_close(mem);
        gr_dataset_close(disk);
    }
    /* the environment variable sets the limit when the function has not */
    setenv("GPURUN_DATA_MEM_LIMIT", "0", 1);
    CHECK(gr_dataset_memory_limit() == 0);
    gr_dataset_set_memory_limit(12345);
    CHECK(gr_dataset_memory_limit() == 12345);
    gr_dataset_set_memory_limit(-1);
    unsetenv("GPURUN_DATA_MEM_LIMIT");
    size_t avail = 0, total = 0;
    const int64_t def = gr_host_mem_info(&avail, &total) && (int64_t)(avail / 4) < ((int64_t)2 << 30)
                            ? (int64_t)(avail / 4) : (int64_t)2 << 30;
    CHECK_MSG(llabs(gr_dataset_memory_limit() - def) <= (64 << 20), "default limit %lld, expected about %lld",
              (long long)gr_dataset_memory_limit(), (long long)def); /* MemAvailable moves a little */
    H5Tclose(f16);
    free(imgf);
    free(img8);
    free(img16);
}

/* Chunks never written read as the fill value (0), on the in-memory and the
 * on-disk path alike: a hole in the middle, at the end (the sample the
 * direct-read check tries last; this was a double free), one sample per
 * chunk; and the file's last chunk only. */
static void test_unwritten_chunks(void) {
    enum { N = 37, C = 1, H = 3, W = 4, S = C * H * W };
    uint8_t img[N * S];
    int64_t lab[N];
    for (int i = 0; i < N * S; i++) img[i] = (uint8_t)(1 + gr_hash64(9, (uint64_t)i) % 250);
    for (int i = 0; i < N; i++) lab[i] = i % 10;
    static const struct { int chunk; hsize_t hole[2]; } v[] = {{4, {8, 24}}, {4, {20, 37}}, {1, {3, 9}}, {5, {0, 35}}};
    for (size_t t = 0; t < GR_ARRAY_LEN(v); t++) {
        h5spec s = {.group = "/d", .img_ftype = H5T_STD_U8LE, .img_mtype = H5T_NATIVE_UINT8, .rank = 4,
                    .dims = {N, C, H, W}, .img = img, .lab_ftype = H5T_STD_I32LE, .nlab = N, .labels = lab,
                    .chunked = true, .chunk = v[t].chunk, .hole = {v[t].hole[0], v[t].hole[1]}};
        const char *p = tmp_path("holes.h5");
        write_h5(p, &s);
        gr_error err = {0};
        gr_dataset *mem = NULL, *disk = NULL;
        gr_dataset_set_memory_limit(-1);
        CHECK_MSG(gr_dataset_open(p, "/d", &mem, &err) == GR_OK, "case %zu: %s", t, err.msg);
        gr_dataset_set_memory_limit(0);
        CHECK_MSG(gr_dataset_open(p, "/d", &disk, &err) == GR_OK, "case %zu: %s", t, err.msg);
        gr_dataset_set_memory_limit(-1);
        /* a chunk to pread is missing (only the file's last chunk exists in case 3 as well) */
        CHECK_MSG(!disk || !gr_dataset_reads_direct(disk), "case %zu: direct reads over unwritten chunks", t);
        if (mem && disk) {
            int64_t idx[N];
            for (int k = 0; k < N; k++) idx[k] = (k * 7) % N;
            static float xa[N * S], xb[N * S];
            int32_t ya[N], yb[N];
            const double mean[1] = {0}, sd[1] = {1};
            CHECK_MSG(gr_dataset_read(mem, idx, N, mean, sd, xa, ya, &err) == GR_OK, "case %zu: %s", t, err.msg);
            CHECK_MSG(gr_dataset_read(disk, idx, N, mean, sd, xb, yb, &err) == GR_OK, "case %zu: %s", t, err.msg);
            int bad = 0;
            for (int k = 0; k < N; k++)
                for (int e = 0; e < S; e++) {
                    const int64_t i = idx[k];
                    const float want = (hsize_t)i >= v[t].hole[0] && (hsize_t)i < v[t].hole[1] ? 0.0f
                                                                                              : (float)img[i * S + e];
                    bad += xa[k * S + e] != want || xb[k * S + e] != want;
                }
            CHECK_MSG(bad == 0, "case %zu (chunk %d, hole [%llu, %llu)): %d wrong values", t, v[t].chunk,
                      (unsigned long long)v[t].hole[0], (unsigned long long)v[t].hole[1], bad);
        }
        gr_dataset_close(mem);
        gr_dataset_close(disk);
    }
}

/* ---- loader ---- */

enum { LN = 103 };

/* Labels are the sample indices; pixel 0 is index % 256. */
static gr_dataset *loader_dataset(void) {
    static uint8_t img[LN * 4];
    int64_t lab[LN];
    for (int i = 0; i < LN; i++) {
        lab[i] = i;
        for (int k = 0; k < 4; k++) img[i * 4 + k] = (uint8_t)(i + k);
    }
    h5spec s = {.group = "/", .img_ftype = H5T_STD_U8LE, .img_mtype = H5T_NATIVE_UINT8, .rank = 3,
                .dims = {LN, 2, 2}, .img = img, .lab_ftype = H5T_STD_I32LE, .nlab = LN, .labels = lab};
    const char *p = tmp_path("loader.h5");
    write_h5(p, &s);
    gr_dataset *ds = NULL;
    gr_error err = {0};
    GR_ASSERT(gr_dataset_open(p, "/", &ds, &err) == GR_OK);
    return ds;
}

static gr_loader_config loader_cfg(int64_t batch, bool shuffle, bool drop_last, uint64_t seed) {
    gr_loader_config c = {.batch = batch, .shuffle = shuffle, .drop_last = drop_last, .seed = seed,
                          .rank = 0, .world = 1, .n_norm = 0, .prefetch = 2};
    return c;
}

/* Collects the sample indices of the next `batches` batches into out. */
static int64_t take(gr_loader *ld, int64_t batches, int32_t *out, gr_batch *meta) {
    int64_t k = 0;
    gr_error err = {0};
    for (int64_t b = 0; b < batches; b++) {
        gr_batch *bt = NULL;
        if (gr_loader_next(ld, &bt, &err) != GR_OK) {
            fprintf(stderr, "loader: %s\n", err.msg);
            return -1;
        }
        if (meta) meta[b] = *bt;
        memcpy(out + k, bt->y, (size_t)bt->n * sizeof *out);
        k += bt->n;
        gr_loader_release(ld, bt);
    }
    return k;
}

static bool is_permutation(const int32_t *v, int64_t n, int64_t of) {
    if (n != of) return false;
    char *seen = calloc((size_t)of, 1);
    bool ok = true;
    for (int64_t i = 0; i < n && ok; i++) {
        if (v[i] < 0 || v[i] >= of || seen[v[i]]) ok = false;
        else seen[v[i]] = 1;
    }
    free(seen);
    return ok;
}

static void test_loader(void) {
    gr_dataset *ds = loader_dataset();
    gr_error err = {0};
    int32_t a[4 * LN], b[4 * LN];
    gr_batch meta[64];

    /* file order, kept last batch */
    gr_loader_config c = loader_cfg(10, false, false, 0);
    c.n_norm = 1;
    c.mean[0] = 1;
    c.std[0] = 2;
    gr_loader *ld = NULL;
    CHECK(gr_loader_open(ds, &c, &ld, &err) == GR_OK);
    CHECK(gr_loader_batches_per_epoch(ld) == 11);
    CHECK(gr_loader_samples_per_epoch(ld) == LN);
    gr_batch *bt = NULL;
    CHECK(gr_loader_next(ld, &bt, &err) == GR_OK);
    CHECK(bt->n == 10 && bt->epoch == 0 && bt->index == 0 && bt->sample_in_epoch == 0 && !bt->last_in_epoch);
    CHECK(bt->y[0] == 0 && bt->y[9] == 9);
    CHECK(bt->x[4 * 3 + 1] == (4.0f - 1.0f) / 2.0f); /* sample 3, pixel 1 = 4 */
    /* ring of prefetch=2 buffers */
    gr_batch *bt2 = NULL, *bt3 = NULL;
    CHECK(gr_loader_next(ld, &bt2, &err) == GR_OK);
    CHECK(bt2 != bt && bt2->y[0] == 10);
    CHECK(gr_loader_next(ld, &bt3, &err) == GR_ERR_INTERNAL);
    CHECK_STR_CONTAINS(err.msg, "batch buffers are held");
    CHECK(bt->y[0] == 0); /* untouched while held */
    gr_loader_release(ld, bt);
    gr_loader_release(ld, bt2);
    int64_t got = take(ld, 9, a, meta);
    CHECK(got == LN - 20);
    CHECK(meta[8].n == 3 && meta[8].last_in_epoch && meta[8].index == 10 && meta[8].sample_in_epoch == 100);
    bool order = true;
    for (int64_t i = 0; i < got; i++) order = order && a[i] == 20 + i;
    CHECK(order);
    CHECK(take(ld, 1, a, meta) == 10);
    CHECK(meta[0].epoch == 1 && meta[0].index == 0 && a[0] == 0);
    CHECK(gr_loader_wait_s(ld) > 0);
    gr_loader_close(ld);

    /* drop_last */
    c = loader_cfg(10, true, true, 5);
    CHECK(gr_loader_open(ds, &c, &ld, &err) == GR_OK);
    CHECK(gr_loader_batches_per_epoch(ld) == 10);
    CHECK(gr_loader_samples_per_epoch(ld) == 100);
    CHECK(take(ld, 11, a, meta) == 110);
    CHECK(meta[9].last_in_epoch && meta[9].n == 10 && meta[10].epoch == 1 && meta[10].index == 0);
    gr_loader_close(ld);

    /* shuffle: determinism, each sample once per epoch, epochs differ */
    c = loader_cfg(8, true, false, 1234);
    gr_loader *l1 = NULL, *l2 = NULL;
    CHECK(gr_loader_open(ds, &c, &l1, &err) == GR_OK);
    CHECK(gr_loader_open(ds, &c, &l2, &err) == GR_OK);
    const int64_t bpe = gr_loader_batches_per_epoch(l1);
    CHECK(bpe == 13);
    CHECK(take(l1, 3 * bpe, a, NULL) == 3 * LN);
    CHECK(take(l2, 3 * bpe, b, NULL) == 3 * LN);
    CHECK(memcmp(a, b, 3 * LN * sizeof *a) == 0);
    for (int e = 0; e < 3; e++) CHECK_MSG(is_permutation(a + e * LN, LN, LN), "epoch %d", e);
    CHECK(memcmp(a, a + LN, LN * sizeof *a) != 0);
    CHECK(memcmp(a + LN, a + 2 * LN, LN * sizeof *a) != 0);
    bool identity = true;
    for (int i = 0; i < LN; i++) identity = identity && a[i] == i;
    CHECK(!identity);
    gr_loader_close(l2);
    c.seed = 1235;
    CHECK(gr_loader_open(ds, &c, &l2, &err) == GR_OK);
    CHECK(take(l2, bpe, b, NULL) == LN);
    CHECK(memcmp(a, b, LN * sizeof *a) != 0);
    gr_loader_close(l2);

    /* seek to mid-epoch: same remaining batches as the uninterrupted run */
    c.seed = 1234;
    CHECK(gr_loader_open(ds, &c, &l2, &err) == GR_OK);
    CHECK(gr_loader_seek(l2, 1, 40, &err) == GR_OK);
    gr_batch m2[64];
    int64_t rest = take(l2, (bpe - 5) + 3, b, m2);
    CHECK(rest == (LN - 40) + 3 * 8);
    CHECK(m2[bpe - 5].epoch == 2 && m2[bpe - 5].index == 0);
    CHECK(memcmp(b, a + LN + 40, (size_t)rest * sizeof *b) == 0);
    CHECK(m2[0].epoch == 1 && m2[0].index == 5 && m2[0].sample_in_epoch == 40);
    CHECK(gr_loader_seek(l2, 0, 12, &err) == GR_ERR_DATA);
    CHECK_STR_CONTAINS(err.msg, "multiple of the batch (8)");
    CHECK(gr_loader_seek(l2, 0, 104, &err) == GR_ERR_DATA);
    CHECK(gr_loader_seek(l2, -1, 0, &err) == GR_ERR_DATA);
    CHECK(gr_loader_seek(l2, 0, 96, &err) == GR_OK); /* the kept last batch */
    CHECK(take(l2, 1, b, m2) == LN - 96);
    CHECK(m2[0].last_in_epoch);
    CHECK(memcmp(b, a + 96, (LN - 96) * sizeof *b) == 0);
    gr_loader_close(l2);
    gr_loader_close(l1);

    /* two ranks: disjoint, covering all but the remainder, same permutation */
    for (int shuffle = 0; shuffle < 2; shuffle++) {
        int32_t r0[LN], r1[LN];
        gr_loader_config c0 = loader_cfg(5, shuffle, false, 99), c1 = c0;
        c0.world = c1.world = 2;
        c1.rank = 1;
        gr_loader *k0 = NULL, *k1 = NULL;
        CHECK(gr_loader_open(ds, &c0, &k0, &err) == GR_OK);
        CHECK(gr_loader_open(ds, &c1, &k1, &err) == GR_OK);
        CHECK(gr_loader_samples_per_epoch(k0) == LN / 2 && gr_loader_batches_per_epoch(k0) == 11);
        CHECK(take(k0, 11, r0, NULL) == LN / 2);
        CHECK(take(k1, 11, r1, NULL) == LN / 2);
        int32_t both[LN];
        memcpy(both, r0, LN / 2 * sizeof *both);
        memcpy(both + LN / 2, r1, LN / 2 * sizeof *both);
        char seen[LN] = {0};
        int dup = 0;
        for (int i = 0; i < 2 * (LN / 2); i++) dup += seen[both[i]]++ ? 1 : 0;
        CHECK(dup == 0);
        if (!shuffle) CHECK(r0[0] == 0 && r0[1] == 2 && r1[0] == 1 && r1[50] == 101);
        if (shuffle) {
            /* interleaving the shards gives the single-process permutation */
            gr_loader_config cs = loader_cfg(5, true, false, 99);
            gr_loader *ks = NULL;
            int32_t full[LN];
            CHECK(gr_loader_open(ds, &cs, &ks, &err) == GR_OK);
            CHECK(take(ks, 21, full, NULL) == LN);
            bool ok = true;
            for (int i = 0; i < LN / 2; i++) ok = ok && full[2 * i] == r0[i] && full[2 * i + 1] == r1[i];
            CHECK(ok);
            gr_loader_close(ks);
        }
        gr_loader_close(k0);
        gr_loader_close(k1);
    }

    /* configuration errors */
    c = loader_cfg(0, false, false, 0);
    CHECK(gr_loader_open(ds, &c, &ld, &err) == GR_ERR_USAGE && ld == NULL);
    c = loader_cfg(8, false, false, 0);
    c.n_norm = 3;
    CHECK(gr_loader_open(ds, &c, &ld, &err) == GR_ERR_USAGE);
    CHECK_STR_CONTAINS(err.msg, "3 values");
    c = loader_cfg(8, false, false, 0);
    c.world = 200;
    CHECK(gr_loader_open(ds, &c, &ld, &err) == GR_ERR_DATA);
    c = loader_cfg(200, false, true, 0);
    CHECK(gr_loader_open(ds, &c, &ld, &err) == GR_ERR_DATA);
    CHECK_STR_CONTAINS(err.msg, "drop_last");
    gr_dataset_close(ds);
}

/* ---- IDX converter ---- */

static void put_be32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16), p[2] = (uint8_t)(v >> 8), p[3] = (uint8_t)v;
}

/* Writes an IDX file (gzipped when gz); bytes_cut drops that many bytes at the end. */
static void write_idx(const char *dir, const char *name, bool gz, uint32_t magic, uint32_t n, uint32_t h,
                      uint32_t w, uint8_t seed, size_t bytes_cut) {
    char path[600];
    snprintf(path, sizeof path, "%s/%s%s", dir, name, gz ? ".gz" : "");
    const bool images = magic == 0x803;
    size_t hl = images ? 16 : 8, dl = images ? (size_t)n * h * w : n;
    uint8_t *buf = malloc(hl + dl);
    put_be32(buf, magic);
    put_be32(buf + 4, n);
    if (images) put_be32(buf + 8, h), put_be32(buf + 12, w);
    for (size_t i = 0; i < dl; i++) buf[hl + i] = images ? (uint8_t)(i * 3 + seed) : (uint8_t)((i + seed) % 10);
    size_t len = hl + dl - bytes_cut;
    if (gz) {
        gzFile f = gzopen(path, "wb");
        gzwrite(f, buf, (unsigned)len);
        gzclose(f);
    } else {
        FILE *f = fopen(path, "wb");
        fwrite(buf, 1, len, f);
        fclose(f);
    }
    free(buf);
}

static void make_idx_dir(const char *dir, bool gz) {
    mkdir(dir, 0755);
    const char *names[4] = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
                            "t10k-labels-idx1-ubyte"};
    for (int k = 0; k < 4; k++) {
        char p[600];
        snprintf(p, sizeof p, "%s/%s.gz", dir, names[k]);
        remove(p);
        snprintf(p, sizeof p, "%s/%s", dir, names[k]);
        remove(p);
    }
    write_idx(dir, "train-images-idx3-ubyte", gz, 0x803, 6, 4, 3, 1, 0);
    write_idx(dir, "train-labels-idx1-ubyte", gz, 0x801, 6, 0, 0, 2, 0);
    write_idx(dir, "t10k-images-idx3-ubyte", false, 0x803, 3, 4, 3, 5, 0); /* mixed: plain */
    write_idx(dir, "t10k-labels-idx1-ubyte", gz, 0x801, 3, 0, 0, 7, 0);
}

static void read_classes(const char *path, const char *group, char out[10][32]) {
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    hid_t a = H5Aopen_by_name(f, group, "classes", H5P_DEFAULT, H5P_DEFAULT);
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, H5T_VARIABLE);
    H5Tset_cset(t, H5T_CSET_UTF8);
    char *v[10] = {0};
    if (a >= 0 && H5Aread(a, t, v) >= 0)
        for (int i = 0; i < 10; i++) {
            snprintf(out[i], 32, "%s", v[i] ? v[i] : "");
            H5free_memory(v[i]);
        }
    H5Tclose(t);
    if (a >= 0) H5Aclose(a);
    H5Fclose(f);
}

static void test_convert_small(void) {
    const char *dir = tmp_path("idx");
    const char *out = tmp_path("idx_out.h5");
    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s.tmp", out);
    remove(out);
    make_idx_dir(dir, true);
    gr_error err = {0};
    CHECK(gr_data_convert_idx("mnist", dir, out, false, false, &err) == GR_OK);
    CHECK(file_exists(out) && !file_exists(tmp));
    gr_dataset *ds = NULL;
    CHECK(gr_dataset_open(out, "/train", &ds, &err) == GR_OK);
    if (ds) {
        int64_t chw[3];
        gr_dataset_sample_shape(ds, chw);
        CHECK(gr_dataset_len(ds) == 6 && chw[0] == 1 && chw[1] == 4 && chw[2] == 3);
        CHECK(gr_dataset_labels(ds)[0] == 2 && gr_dataset_labels(ds)[5] == 7);
        int64_t i1 = 1;
        float x[12];
        int32_t y;
        CHECK(gr_dataset_read(ds, &i1, 1, NULL, NULL, x, &y, &err) == GR_OK);
        CHECK(x[0] == (float)(uint8_t)(12 * 3 + 1) && x[11] == (float)(uint8_t)(23 * 3 + 1) && y == 3);
        double sum = 0, sum2 = 0;
        for (int i = 0; i < 72; i++) sum += (uint8_t)(i * 3 + 1), sum2 += (double)(uint8_t)(i * 3 + 1) * (uint8_t)(i * 3 + 1);
        double m = 0, s = 0;
        CHECK(gr_dataset_attr_floats(ds, "mean", &m, 1) == 1);
        CHECK(gr_dataset_attr_floats(ds, "std", &s, 1) == 1);
        CHECK_CLOSE(m, sum / 72, 1e-12, 0);
        CHECK_CLOSE(s, sqrt(sum2 / 72 - (sum / 72) * (sum / 72)), 1e-9, 0);
        gr_dataset_close(ds);
    }
    CHECK(gr_dataset_open(out, "/test", &ds, &err) == GR_OK);
    if (ds) {
        CHECK(gr_dataset_len(ds) == 3 && gr_dataset_labels(ds)[0] == 7);
        gr_dataset_close(ds);
    }
    char cls[10][32] = {{0}};
    read_classes(out, "/test", cls);
    CHECK(strcmp(cls[0], "0") == 0 && strcmp(cls[9], "9") == 0);

    /* existing output */
    CHECK(gr_data_convert_idx("mnist", dir, out, false, false, &err) == GR_ERR_USAGE);
    CHECK_STR_CONTAINS(err.msg, "dataio_idx_out.h5: already exists (pass --force to overwrite)");
    CHECK(gr_data_convert_idx("fashion-mnist", dir, out, true, false, &err) == GR_OK);
    read_classes(out, "/train", cls);
    CHECK(strcmp(cls[0], "T-shirt/top") == 0 && strcmp(cls[9], "Ankle boot") == 0);
    CHECK(gr_data_convert_idx("cifar", dir, out, true, false, &err) == GR_ERR_USAGE);

    /* broken inputs: exit 3 naming the file, nothing left behind */
    remove(out);
    write_idx(dir, "train-labels-idx1-ubyte", true, 0x803, 6, 0, 0, 2, 0);
    CHECK(gr_data_convert_idx("mnist", dir, out, false, false, &err) == GR_ERR_DATA);
    CHECK_STR_CONTAINS(err.msg, "train-labels-idx1-ubyte.gz: bad magic 0x00000803; expected 0x00000801");
    make_idx_dir(dir, true);
    write_idx(dir, "t10k-images-idx3-ubyte", false, 0x803, 3, 4, 3, 5, 7);
    CHECK(gr_data_convert_idx("mnist", dir, out, false, false, &err) == GR_ERR_DATA);
    CHECK_STR_CONTAINS(err.msg, "t10k-images-idx3-ubyte: truncated");
    make_idx_dir(dir, true);
    write_idx(dir, "train-images-idx3-ubyte", true, 0x803, 6, 4, 3, 1, 20);
    CHECK(gr_data_convert_idx("mnist", dir, out, false, false, &err) == GR_ERR_DATA);
    CHECK_STR_CONTAINS(err.msg, "train-images-idx3-ubyte.gz: truncated");
    make_idx_dir(dir, true);
    write_idx(dir, "train-labels-idx1-ubyte", true, 0x801, 5, 0, 0, 2, 0);
    CHECK(gr_data_convert_idx("mnist", dir, out, false, false, &err) == GR_ERR_DATA);
    CHECK_STR_CONTAINS(err.msg, "count mismatch: 6 images but");
    CHECK_STR_CONTAINS(err.msg, "train-labels-idx1-ubyte.gz has 5 labels");
    make_idx_dir(dir, true);
    write_idx(dir, "t10k-images-idx3-ubyte", false, 0x803, 3, 5, 3, 5, 0);
    CHECK(gr_data_convert_idx("mnist", dir, out, false, false, &err) == GR_ERR_DATA);
    CHECK_STR_CONTAINS(err.msg, "t10k-images-idx3-ubyte: images are 5x3");
    make_idx_dir(dir, true);
    write_idx(dir, "t10k-images-idx3-ubyte", false, 0x803, 3, 4, 3, 5, 0);
    {   /* a header claiming a huge count must fail as truncated, not allocate it */
        char hp[600];
        uint8_t hdr[11] = {0};
        put_be32(hdr, 0x801);
        put_be32(hdr + 4, 0xF0000000u);
        snprintf(hp, sizeof hp, "%s/t10k-labels-idx1-ubyte.gz", dir);
        gzFile hf = gzopen(hp, "wb");
        gzwrite(hf, hdr, sizeof hdr);
        gzclose(hf);
        CHECK(gr_data_convert_idx("mnist", dir, out, false, false, &err) == GR_ERR_DATA);
        CHECK_STR_CONTAINS(err.msg, "t10k-labels-idx1-ubyte.gz: truncated");
    }
    make_idx_dir(dir, true);
    { /* a gzip stream cut in half */
        char gzp[600], cut[640];
        snprintf(gzp, sizeof gzp, "%s/train-images-idx3-ubyte.gz", dir);
        snprintf(cut, sizeof cut, "%s.cut", gzp);
        copy_prefix(gzp, cut, 0.5);
        rename(cut, gzp);
        CHECK(gr_data_convert_idx("mnist", dir, out, false, false, &err) == GR_ERR_DATA);
        CHECK_STR_CONTAINS(err.msg, "train-images-idx3-ubyte.gz: ");
    }
    make_idx_dir(dir, true);
    char lp[600];
    snprintf(lp, sizeof lp, "%s/t10k-labels-idx1-ubyte.gz", dir);
    remove(lp);
    CHECK(gr_data_convert_idx("mnist", dir, out, false, false, &err) == GR_ERR_DATA);
    CHECK_STR_CONTAINS(err.msg, "t10k-labels-idx1-ubyte.gz: no such file");
    CHECK(gr_data_convert_idx("mnist", tmp_path("no_dir"), out, false, false, &err) == GR_ERR_DATA);
    CHECK_STR_CONTAINS(err.msg, "no such directory");
    CHECK(!file_exists(out) && !file_exists(tmp));
    /* unwritable output location: HDF5 failure translated, no tmp left */
    make_idx_dir(dir, false);
    const char *bad_out = tmp_path("no_dir/x.h5");
    CHECK(gr_data_convert_idx("mnist", dir, bad_out, false, false, &err) == GR_ERR_DATA);
    CHECK_STR_CONTAINS(err.msg, "x.h5.tmp: cannot create (HDF5: ");
}

static void test_convert_fashion_mnist(void) {
    if (!file_exists(FMNIST_DIR "/train-images-idx3-ubyte.gz")) {
        gr_test_skip("the Fashion-MNIST conversion check: " FMNIST_DIR " is not installed (dataset-fashion-mnist)");
        return;
    }
    const char *out = tmp_path("fmnist.h5");
    gr_error err = {0};
    CHECK(gr_data_convert_idx("fashion-mnist", FMNIST_DIR, out, true, false, &err) == GR_OK);
    uint8_t raw_lab[16 + 8];
    gzFile gz = gzopen(FMNIST_DIR "/train-labels-idx1-ubyte.gz", "rb");
    CHECK(gzread(gz, raw_lab, sizeof raw_lab) == (int)sizeof raw_lab);
    gzclose(gz);
    uint8_t raw_img[16 + 784];
    gz = gzopen(FMNIST_DIR "/train-images-idx3-ubyte.gz", "rb");
    CHECK(gzread(gz, raw_img, sizeof raw_img) == (int)sizeof raw_img);
    gzclose(gz);

    gr_dataset *ds = NULL;
    CHECK(gr_dataset_open(out, "/train", &ds, &err) == GR_OK);
    if (!ds) return;
    int64_t chw[3];
    gr_dataset_sample_shape(ds, chw);
    CHECK(gr_dataset_len(ds) == 60000 && chw[0] == 1 && chw[1] == 28 && chw[2] == 28);
    CHECK(gr_dataset_in_memory(ds));
    bool same = true;
    for (int i = 0; i < 16; i++) same = same && gr_dataset_labels(ds)[i] == raw_lab[8 + i];
    CHECK(same);
    CHECK(gr_dataset_check_labels(ds, 10, &err) == GR_OK);
    double m = 0, s = 0;
    CHECK(gr_dataset_attr_floats(ds, "mean", &m, 1) == 1 && gr_dataset_attr_floats(ds, "std", &s, 1) == 1);
    CHECK_CLOSE(m, 72.94, 0, 0.01);
    CHECK_CLOSE(s, 90.02, 0, 0.01);
    char cls[10][32] = {{0}};
    read_classes(out, "/train", cls);
    CHECK(strcmp(cls[0], "T-shirt/top") == 0 && strcmp(cls[6], "Shirt") == 0);

    float x0[784];
    int64_t i0 = 0;
    int32_t y0;
    CHECK(gr_dataset_read(ds, &i0, 1, &m, &s, x0, &y0, &err) == GR_OK);
    int bad = 0;
    for (int i = 0; i < 784; i++)
        if (fabsf(x0[i] - (float)((raw_img[16 + i] - m) / s)) > 1e-6f) bad++;
    CHECK(bad == 0 && y0 == raw_lab[8]);

    /* the loader over the real data: one epoch of 128-sample shuffled batches */
    gr_loader_config c = {.batch = 128, .shuffle = true, .seed = 7, .rank = 0, .world = 1, .n_norm = 1,
                          .mean = {m}, .std = {s}, .prefetch = 4};
    gr_loader *ld = NULL;
    CHECK(gr_loader_open(ds, &c, &ld, &err) == GR_OK);
    if (ld) {
        CHECK(gr_loader_batches_per_epoch(ld) == 469);
        const int nb = 469;
        int64_t seen = 0;
        double t0 = gr_now();
        for (int b = 0; b < nb; b++) {
            gr_batch *bt = NULL;
            if (gr_loader_next(ld, &bt, &err) != GR_OK) break;
            seen += bt->n;
            gr_loader_release(ld, bt);
        }
        double per = (gr_now() - t0) / nb;
        CHECK(seen == 60000);
        /* printed for the eye only: speed is the benchmarks' business (bench/), never a test's */
        printf("Fashion-MNIST: %.1f us per 128-sample batch (wait_s %.3f)\n", per * 1e6, gr_loader_wait_s(ld));
        gr_loader_close(ld);
    }
    gr_dataset_close(ds);
    CHECK(gr_dataset_open(out, "/test", &ds, &err) == GR_OK);
    if (ds) {
        CHECK(gr_dataset_len(ds) == 10000);
        gr_dataset_close(ds);
    }
    /* a truncated copy of the real file */
    const char *trunc = tmp_path("fmnist_trunc.h5");
    copy_prefix(out, trunc, 0.5);
    CHECK(try_open(trunc, "/train", &err) == GR_ERR_DATA);
    CHECK_STR_CONTAINS(err.msg, "dataio_fmnist_trunc.h5: not an HDF5 file or corrupt (HDF5: ");
    remove(trunc);
    remove(out);
}

/* Float images holding inf/NaN are a data error (exit 3) naming the file,
 * the images dataset and the sample: at open when the split is held in
 * memory, as the batch is read (gr_dataset_read, the loader's workers) when
 * it is read from the file. */
static void test_nonfinite(void) {
    enum { N = 6, S = 8 };
    float img[N * S];
    uint16_t img16[N * S];
    int64_t lab[N];
    for (int i = 0; i < N * S; i++) img[i] = (float)i * 0.5f, img16[i] = 0x3C00;
    for (int i = 0; i < N; i++) lab[i] = i % 2;
    img[3 * S + 6] = NAN;        /* sample 3, element 6 */
    img[5 * S + 1] = -INFINITY;  /* sample 5, element 1 */
    img16[1 * S + 2] = 0x7E00;   /* half NaN: sample 1, element 2 */
    img16[4 * S + 0] = 0x7C00;   /* half inf: sample 4 */
    hid_t f16 = f16_type(H5T_ORDER_LE);
    for (int half = 0; half < 2; half++) {
        h5spec s = {.group = "/train", .img_ftype = half ? f16 : H5T_IEEE_F32LE,
                    .img_mtype = half ? f16 : H5T_NATIVE_FLOAT, .rank = 3, .dims = {N, 2, 4},
                    .img = half ? (const void *)img16 : (const void *)img, .lab_ftype = H5T_STD_I64LE, .nlab = N,
                    .labels = lab};
        const char *p = tmp_path(half ? "nonfinite16.h5" : "nonfinite32.h5");
        write_h5(p, &s);
        const int64_t bad = half ? 1 : 3;
        char want[128];
        snprintf(want, sizeof want, "sample %lld holds NaN at element %d of 8", (long long)bad, half ? 2 : 6);
        /* held in memory: refused at open, naming the first bad sample and counting the others */
        gr_dataset *ds = NULL;
        gr_error err = {0};
        CHECK(gr_dataset_open(p, "/train", &ds, &err) == GR_ERR_DATA);
        CHECK(ds == NULL);
        CHECK_STR_CONTAINS(err.msg, p);
        CHECK_STR_CONTAINS(err.msg, "/train/images: ");
        CHECK_STR_CONTAINS(err.msg, want);
        CHECK_STR_CONTAINS(err.msg, "(and 1 more sample)");
        gr_dataset_close(ds);

        /* read from the file: the batches before the bad sample are fine, its batch is the error */
        gr_dataset_set_memory_limit(0);
        ds = NULL;
        CHECK(gr_dataset_open(p, "/train", &ds, &err) == GR_OK);
        if (ds) {
            CHECK(!gr_dataset_in_memory(ds));
            float x[2 * S];
            int64_t ok_idx[2] = {0, 2}, bad_idx[2] = {2, bad};
            CHECK(gr_dataset_read(ds, ok_idx, 2, NULL, NULL, x, NULL, &err) == GR_OK);
            memset(&err, 0, sizeof err);
            CHECK(gr_dataset_read(ds, bad_idx, 2, NULL, NULL, x, NULL, &err) == GR_ERR_DATA);
            CHECK_STR_CONTAINS(err.msg, p);
            CHECK_STR_CONTAINS(err.msg, "/train/images: ");
            CHECK_STR_CONTAINS(err.msg, want);
            /* the loader with worker threads, in file order: batch 0 (samples 0, 1) of the float32
             * file is fine, batch 1 (2, 3) fails; of the half file batch 0 fails */
            gr_loader_config c = loader_cfg(2, false, true, 0);
            c.workers = 2;
            gr_loader *ld = NULL;
            CHECK(gr_loader_open(ds, &c, &ld, &err) == GR_OK);
            if (ld) {
                gr_batch *bt = NULL;
                if (!half) {
                    CHECK(gr_loader_next(ld, &bt, &err) == GR_OK);
                    if (bt) gr_loader_release(ld, bt);
                }
                memset(&err, 0, sizeof err);
                CHECK(gr_loader_next(ld, &bt, &err) == GR_ERR_DATA);
                CHECK_STR_CONTAINS(err.msg, "/train/images: ");
                CHECK_STR_CONTAINS(err.msg, want);
                gr_loader_close(ld);
            }
            gr_dataset_close(ds);
        }
        gr_dataset_set_memory_limit(-1);
    }
    H5Tclose(f16);
}

int main(void) {
    mkdir(GR_TEST_TMP, 0755);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    test_open_errors();
    test_labels_and_attrs();
    test_read_normalize();
    test_nhwc();
    test_unwritten_chunks();
    test_float16();
    test_disk_path();
    test_loader();
    test_convert_small();
    test_convert_fashion_mnist();
    test_nonfinite();
    H5close();
    return gr_test_report();
}
