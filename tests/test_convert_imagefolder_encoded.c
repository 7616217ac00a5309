/* test_convert_imagefolder_encoded.c — unit tests for `gpurun data
 * imagefolder --store jpeg` (convert_encoded.c) and its reader
 * (gr_source_encoded): kept files' bytes back bit-exact (JPEG, grayscale
 * JPEG, PNG), larger ones re-encoded with the long side at --max-side (RGB
 * and gray) and decodable, the file within 2% of the stored bytes on a few
 * hundred small JPEGs, a truncated file under --on-error fail and skip, the
 * option checks, and the raw readers refusing the split (exit 3). */
#include "convert_images.h"
#include "../dataio/image.h"
#include "../dataio/source.h"

/* Noise, so the small JPEGs are a few KB as photos are, not a few hundred bytes. */
static uint8_t px_noise(int x, int y, int c) {
    uint32_t h = (uint32_t)x * 73856093u ^ (uint32_t)y * 19349663u ^ (uint32_t)c * 83492791u;
    h ^= h >> 13, h *= 0x5bd1e995u, h ^= h >> 15;
    return (uint8_t)(h & 0xff);
}

static uint8_t *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    GR_ASSERT(f);
    uint8_t *b;
    *n = gr_image_read_all(f, &b);
    fclose(f);
    return b;
}

static int64_t file_size(const char *p) {
    struct stat sb;
    return stat(p, &sb) == 0 ? (int64_t)sb.st_size : -1;
}

/* dir/cls/name, in a buffer of its own (join's rotate). */
static const char *in_class(const char *dir, const char *cls, const char *name) {
    static char buf[4][1024];
    static int k;
    char *p = buf[k++ % 4];
    snprintf(p, 1024, "%s/%s/%s", dir, cls, name);
    return p;
}

#define NSMALL 300

/* dir/a/000.jpg..: NSMALL noisy 48x40 JPEGs; dir/b: big.jpg (200x100, over
 * max-side 64), gray.jpg (30x30 gray), graybig.jpg (120x90 gray, over),
 * pic.png (20x10 RGB, a PNG). */
static void make_corpus(const char *dir) {
    rm_rf(dir);
    mkdir(dir, 0755);
    mkdir(join(dir, "a"), 0755);
    mkdir(join(dir, "b"), 0755);
    for (int i = 0; i < NSMALL; i++) {
        char name[32];
        snprintf(name, sizeof name, "%03d.jpg", i);
        write_jpeg_as(in_class(dir, "a", name), 48, 40, 3, 90, false, px_noise);
    }
    write_jpeg(in_class(dir, "b", "big.jpg"), 200, 100, 3, px_noise);
    write_jpeg(in_class(dir, "b", "gray.jpg"), 30, 30, 1, px_noise);
    write_jpeg(in_class(dir, "b", "graybig.jpg"), 120, 90, 1, px_noise);
    write_png(in_class(dir, "b", "pic.png"), 20, 10, PNG_COLOR_TYPE_RGB, 8, px_noise);
}

/* Sample idx's fields through a reader. */
static void read_sample(gr_source *s, int64_t idx, gr_blob *bytes, uint16_t shape[3], uint8_t *format,
                        int32_t *label) {
    gr_source_reader r;
    gr_error err = {0};
    gr_source_reader_init(&r, s);
    CHECK_MSG(gr_source_read_blob(&r, idx, gr_source_find(s, "encoded"), bytes, &err) == GR_OK, "%s", err.msg);
    CHECK(gr_source_read(&r, idx, gr_source_find(s, "shape"), shape, &err) == GR_OK);
    CHECK(gr_source_read(&r, idx, gr_source_find(s, "format"), format, &err) == GR_OK);
    CHECK(gr_source_read(&r, idx, gr_source_find(s, "label"), label, &err) == GR_OK);
    gr_source_reader_free(&r);
}

/* A re-encoded sample: a JPEG of w x h with `channels` that decodes. */
static void check_reencoded(const gr_blob *b, const uint16_t shape[3], int64_t w, int64_t h, int channels) {
    gr_image_info info;
    gr_image img;
    char why[GR_IMAGE_WHY_MAX];
    CHECK_MSG(gr_image_probe_mem(b->data, b->n, &info, why), "%s", why);
    CHECK(info.format == GR_IMAGE_JPEG && info.w == w && info.h == h && info.channels == channels);
    CHECK(shape[0] == h && shape[1] == w && shape[2] == channels);
    CHECK_MSG(gr_image_decode_mem(b->data, b->n, 1000, &img, why), "%s", why);
    CHECK(img.w == w && img.h == h);
    gr_image_free(&img);
}

static void test_round_trip(const char *dir) {
    const char *out = tmp_path("enc.h5");
    remove(out);
    gr_error err = {0};
    gr_imagefolder_config cfg = {.dir = dir, .store = GR_STORE_JPEG, .max_side = 64};
    CHECK_MSG(gr_data_convert_imagefolder(&cfg, out, false, false, NULL, &err) == GR_OK, "%s", err.msg);
    gr_source *s = gr_source_encoded(out, "/train", &err);
    CHECK_MSG(s != NULL, "%s", err.msg);
    if (!s) return;
    CHECK(s->n == NSMALL + 4);
    gr_blob b = {0};
    uint16_t shape[3];
    uint8_t format;
    int32_t label;
    uint64_t stored = 0;
    for (int i = 0; i < NSMALL; i++) {
        char name[32];
        size_t n;
        snprintf(name, sizeof name, "%03d.jpg", i);
        uint8_t *want = slurp(in_class(dir, "a", name), &n);
        read_sample(s, i, &b, shape, &format, &label);
        CHECK_MSG(b.n == n && memcmp(b.data, want, n) == 0, "sample %d: bytes differ from %s", i, name);
        CHECK(shape[0] == 40 && shape[1] == 48 && shape[2] == 3 && format == 0 && label == 0);
        stored += b.n;
        free(want);
    }
    const char *keep[2] = {"gray.jpg", "pic.png"};
    const int64_t at[2] = {NSMALL + 1, NSMALL + 3};
    const uint16_t kshape[2][3] = {{30, 30, 1}, {10, 20, 3}};
    for (int k = 0; k < 2; k++) {
        size_t n;
        uint8_t *want = slurp(in_class(dir, "b", keep[k]), &n);
        read_sample(s, at[k], &b, shape, &format, &label);
        CHECK_MSG(b.n == n && memcmp(b.data, want, n) == 0, "%s: bytes differ", keep[k]);
        CHECK(!memcmp(shape, kshape[k], sizeof shape) && format == (k == 1) && label == 1);
        stored += b.n;
        free(want);
    }
    read_sample(s, NSMALL, &b, shape, &format, &label); /* big.jpg: 200x100 -> 64x32 */
    check_reencoded(&b, shape, 64, 32, 3);
    CHECK(format == 0 && label == 1);
    stored += b.n;
    read_sample(s, NSMALL + 2, &b, shape, &format, &label); /* graybig.jpg: 120x90 -> 64x48, gray */
    check_reencoded(&b, shape, 64, 48, 1);
    stored += b.n;
    /* the file against the bytes stored: offsets, shapes, labels, formats (16 bytes a sample) and HDF5's own */
    const int64_t size = file_size(out);
    printf("  encoded split: %lld bytes stored, file %lld bytes (%.2f%% over)\n", (long long)stored,
           (long long)size, 100.0 * ((double)size / (double)stored - 1));
    CHECK_MSG((double)size <= 1.02 * (double)stored, "file %lld bytes for %llu stored", (long long)size,
              (unsigned long long)stored);
    gr_blob_free(&b);
    gr_source_close(s);

    /* gr_dataset_open takes it as [3, 0, 0] uint8 images (the loader decodes
     * them); a table refuses it, naming the file (a job's exit 3) */
    gr_dataset *ds = NULL;
    CHECK(gr_dataset_open(out, "/train", &ds, &err) == GR_OK && ds != NULL);
    if (ds) {
        int64_t chw[3];
        gr_dataset_sample_shape(ds, chw);
        CHECK(gr_dataset_encoded(ds) && chw[0] == 3 && chw[1] == 0 && gr_dataset_dtype(ds) == GR_DT_UINT8);
        gr_source *ss = gr_source_dataset(ds);
        CHECK(gr_source_find(ss, "encoded") >= 0 && gr_source_find(ss, "label") >= 0 && ss->n == gr_dataset_len(ds));
        gr_source_close(ss);
        gr_dataset_close(ds);
    }
    CHECK(gr_source_table(out, "/train", GR_CACHE_AUTO, &err) == NULL);
    CHECK_STR_CONTAINS(err.msg, out);
    CHECK_STR_CONTAINS(err.msg, "not as a table of named fields");
}

/* No --max-side: every file kept; --val-fraction writes both groups encoded. */
static void test_val_fraction(const char *dir) {
    const char *out = tmp_path("enc_val.h5");
    remove(out);
    gr_error err = {0};
    gr_imagefolder_config cfg = {.dir = dir, .store = GR_STORE_JPEG, .val_fraction = 0.1, .seed = 3};
    gr_imagefolder_report rep = {0};
    CHECK_MSG(gr_data_convert_imagefolder(&cfg, out, false, false, &rep, &err) == GR_OK, "%s", err.msg);
    CHECK(rep.samples == NSMALL + 4 && rep.val_samples > 0);
    gr_source *t = gr_source_encoded(out, "/train", &err), *v = gr_source_encoded(out, "/val", &err);
    CHECK(t && v && t->n + v->n == NSMALL + 4 && v->n == rep.val_samples);
    gr_source_close(t);
    gr_source_close(v);
    gr_imagefolder_report_free(&rep);
}

/* A cut JPEG: the conversion fails naming it (nothing left), or it is skipped. */
static void test_truncated(const char *dir) {
    size_t n;
    uint8_t *bytes = slurp(in_class(dir, "a", "000.jpg"), &n);
    write_bytes(in_class(dir, "b", "cut.jpg"), bytes, n / 2);
    free(bytes);
    const char *out = tmp_path("enc_cut.h5");
    remove(out);
    gr_error err = {0};
    gr_imagefolder_config cfg = {.dir = dir, .store = GR_STORE_JPEG, .max_side = 64};
    CHECK_FAILED(gr_data_convert_imagefolder(&cfg, out, false, false, NULL, &err), GR_ERR_DATA, "cut.jpg: cannot "
                 "decode: JPEG", out);
    cfg.on_error = GR_ON_ERROR_SKIP;
    gr_imagefolder_report rep = {0};
    CHECK_MSG(gr_data_convert_imagefolder(&cfg, out, false, false, &rep, &err) == GR_OK, "%s", err.msg);
    CHECK(rep.nbad == 1 && rep.samples == NSMALL + 4 && !tmp_exists(out));
    if (rep.nbad == 1) CHECK_STR_CONTAINS(rep.bad[0].path, "cut.jpg");
    gr_source *s = gr_source_encoded(out, "/train", &err);
    CHECK(s && s->n == NSMALL + 4);
    gr_source_close(s);
    gr_imagefolder_report_free(&rep);
    remove(in_class(dir, "b", "cut.jpg"));
}

static void test_options(const char *dir) {
    const char *out = tmp_path("enc_opt.h5");
    gr_error err = {0};
    const gr_imagefolder_config bad[] = {
        {.dir = dir, .size = 8, .max_side = 64},                          /* --max-side without --store jpeg */
        {.dir = dir, .size = 8, .quality = 80},
        {.dir = dir, .store = GR_STORE_JPEG, .size = 8},                  /* --size with --store jpeg */
        {.dir = dir, .store = GR_STORE_JPEG, .quality = 101},
        {.dir = dir, .store = GR_STORE_JPEG, .max_side = 40000},
    };
    const char *needle[] = {"--max-side applies only with --store jpeg", "--quality applies only",
                            "--size does not apply with --store jpeg", "--quality must be in [1, 100]",
                            "--max-side must be in [1, 32768]"};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++)
        CHECK_FAILED(gr_data_convert_imagefolder(&bad[k], out, false, false, NULL, &err), GR_ERR_USAGE, needle[k],
                     out);
}

int main(void) {
    mkdir(GR_TEST_TMP, 0755);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    const char *dir = tmp_path("enc_folder");
    make_corpus(dir);
    test_round_trip(dir);
    test_val_fraction(dir);
    test_truncated(dir);
    test_options(dir);
    rm_rf(dir);
    return gr_test_report();
}
