/* test_dataio_source.c — unit tests for the sample-source interface
 * (dataio/source.h):
 *   1. a dataset as a source (gr_source_dataset) describes its fields as
 *      the dataset is stored: `image` with the stored element type, shape
 *      [C,H,W] "CHW" or [H,W,C] "HWC", origin the images dataset; `label`
 *      an int32 scalar; for uint8 / float16 / float32, NCHW / NHWC, in
 *      memory and read from the file (pread and HDF5 paths);
 *   2. sample i read through the source (gr_source_read, a batch fetch with
 *      repeats viewed in place, gr_source_read_blob) equals the dataset's
 *      own bytes (gr_dataset_fetch / gr_rows_sample) and label, and the
 *      pixels the file was written from; an index outside [0, N) is an
 *      error naming the file;
 *   3. the loader over the source (gr_loader_open_source) delivers the very
 *      batches of gr_loader_open over the dataset, bit for bit, with
 *      augmentation and workers; its host-memory figure is the same;
 *   4. a source of other fields (a variable-size blob per sample, as an
 *      encoded-image source would hold) is described and read through the
 *      same API, and the loader refuses it naming the source and field.
 * Fixtures: loader_fixture.h. */
#define LOADER_TMP_TAG "source"
#include "loader_fixture.h"

typedef struct variant {
    const char *name, *file;
    gr_dtype dt;
    bool nhwc;
    store_kind store;
    hsize_t chunk_n;
    gr_cache_mode cache;
} variant;

static const variant g_vs[] = {
    {"uint8 contiguous, memory", "u8.h5", GR_DT_UINT8, false, STORE_CONTIG, 0, GR_CACHE_MEMORY},
    {"uint8 contiguous, file (pread)", "u8.h5", GR_DT_UINT8, false, STORE_CONTIG, 0, GR_CACHE_NONE},
    {"uint8 deflate, file (HDF5)", "u8z.h5", GR_DT_UINT8, false, STORE_DEFLATE, 4, GR_CACHE_NONE},
    {"uint8 NHWC chunks of 7, file", "u8nc.h5", GR_DT_UINT8, true, STORE_CHUNKED, 7, GR_CACHE_NONE},
    {"uint8 NHWC, memory", "u8n.h5", GR_DT_UINT8, true, STORE_CONTIG, 0, GR_CACHE_MEMORY},
    {"float16 chunks of 5, file", "f16.h5", GR_DT_FLOAT16, false, STORE_CHUNKED, 5, GR_CACHE_NONE},
    {"float32, memory", "f32.h5", GR_DT_FLOAT32, false, STORE_CONTIG, 0, GR_CACHE_MEMORY},
    {"float32 NHWC, file", "f32n.h5", GR_DT_FLOAT32, true, STORE_CONTIG, 0, GR_CACHE_NONE},
};
enum { NV = sizeof g_vs / sizeof g_vs[0] };

static const char *write_variant(const variant *v) {
    return write_random(v->file, v->dt, v->nhwc, v->store, v->chunk_n);
}

/* Stored element k of random sample i as a double (the fixture's pixel). */
static double stored_pixel(const variant *v, const void *sample, int64_t k) {
    if (v->dt == GR_DT_UINT8) return ((const uint8_t *)sample)[k];
    if (v->dt == GR_DT_FLOAT32) return ((const float *)sample)[k];
    return -1; /* float16: compared bytewise with the dataset's only */
}

/* ---- 1. fields ---- */

static void test_fields(void) {
    for (int k = 0; k < NV; k++) {
        const variant *v = &g_vs[k];
        const char *path = write_variant(v);
        gr_dataset *ds = open_ds(path, v->cache);
        if (!ds) continue;
        gr_source *src = gr_source_dataset(ds);
        CHECK_MSG(src->n == RN && src->nfields == 2 && strcmp(src->path, path) == 0, "%s: n %lld, %d fields, %s",
                  v->name, (long long)src->n, src->nfields, src->path);
        const int fi = gr_source_find(src, "image"), fl = gr_source_find(src, "label");
        CHECK_MSG(fi >= 0 && fl >= 0 && fi != fl, "%s: image %d, label %d", v->name, fi, fl);
        CHECK(gr_source_find(src, "tokens") == -1);
        if (fi < 0 || fl < 0) {
            gr_source_close(src);
            gr_dataset_close(ds);
            continue;
        }
        const gr_field *im = &src->fields[fi], *lab = &src->fields[fl];
        const gr_ftype want = v->dt == GR_DT_UINT8 ? GR_FT_UINT8 : v->dt == GR_DT_FLOAT16 ? GR_FT_FLOAT16
                                                                                             : GR_FT_FLOAT32;
        const int64_t want_shape[3] = {v->nhwc ? RH : RC, v->nhwc ? RW : RH, v->nhwc ? RC : RW};
        CHECK_MSG(im->type == want && !im->variable && im->rank == 3 && im->shape[0] == want_shape[0] &&
                  im->shape[1] == want_shape[1] && im->shape[2] == want_shape[2],
                  "%s: image %s rank %d [%lld,%lld,%lld]", v->name, gr_ftype_name(im->type), im->rank,
                  (long long)im->shape[0], (long long)im->shape[1], (long long)im->shape[2]);
        CHECK_MSG(strcmp(im->layout, v->nhwc ? "HWC" : "CHW") == 0, "%s: layout '%s'", v->name, im->layout);
        CHECK_MSG(strcmp(im->origin, "/train/images") == 0, "%s: origin %s", v->name, im->origin);
        CHECK(gr_field_bytes(im) == gr_dataset_sample_bytes(ds));
        CHECK(gr_field_bytes(im) == (size_t)(RC * RH * RW) * gr_ftype_size(want));
        CHECK_MSG(lab->type == GR_FT_INT32 && !lab->variable && lab->rank == 0 && gr_field_bytes(lab) == 4 &&
                  strcmp(lab->origin, "/train/labels") == 0 && lab->layout[0] == '\0',
                  "%s: label %s rank %d origin %s", v->name, gr_ftype_name(lab->type), lab->rank, lab->origin);
        gr_source_close(src);
        gr_dataset_close(ds);
    }
    /* a split wrapped from memory (gpurun predict's) */
    uint8_t pix[2 * 3 * 4 * 5];
    for (size_t i = 0; i < sizeof pix; i++) pix[i] = (uint8_t)(i * 7);
    gr_dataset *ds = gr_dataset_wrap("inputs", pix, 2, 3, 4, 5);
    gr_source *src = gr_source_dataset(ds);
    const gr_field *im = &src->fields[gr_source_find(src, "image")];
    CHECK(src->n == 2 && strcmp(src->path, "inputs") == 0 && im->type == GR_FT_UINT8 && im->shape[0] == 3 &&
          im->shape[1] == 4 && im->shape[2] == 5 && strcmp(im->layout, "CHW") == 0);
    gr_source_reader r;
    gr_source_reader_init(&r, src);
    uint8_t got[3 * 4 * 5];
    gr_error err = {0};
    CHECK(gr_source_read(&r, 1, gr_source_find(src, "image"), got, &err) == GR_OK);
    CHECK(memcmp(got, pix + sizeof got, sizeof got) == 0);
    gr_source_reader_free(&r);
    gr_source_close(src);
    gr_dataset_close(ds);
}

/* ---- 2. sample i through the source equals the dataset's ---- */

static void check_samples(const variant *v, gr_dataset *ds, gr_source *src) {
    const int fi = gr_source_find(src, "image"), fl = gr_source_find(src, "label");
    const size_t sb = gr_dataset_sample_bytes(ds);
    uint8_t *got = gr_xmalloc(sb);
    gr_rows rows = {0};
    gr_source_reader r;
    gr_source_reader_init(&r, src);
    gr_blob blob = {0};
    gr_error err = {0};
    int64_t bad_bytes = 0, bad_label = 0, bad_pixel = 0, bad_blob = 0;
    for (int64_t i = 0; i < RN; i++) {
        int32_t label = -1;
        gr_status st = gr_source_read(&r, i, fi, got, &err);
        if (st == GR_OK) st = gr_source_read(&r, i, fl, &label, &err);
        if (st == GR_OK) st = gr_dataset_fetch(ds, &i, 1, &rows, &err);
        if (st == GR_OK) st = gr_source_read_blob(&r, i, fi, &blob, &err);
        if (st != GR_OK) {
            CHECK_MSG(st == GR_OK, "%s: sample %lld: %s", v->name, (long long)i, err.msg);
            break;
        }
        const void *want = gr_rows_sample(ds, &rows, i);
        bad_bytes += memcmp(got, want, sb) != 0;
        bad_blob += blob.n != sb || memcmp(blob.data, want, sb) != 0;
        bad_label += label != gr_dataset_labels(ds)[i] || label != g_rlab[i];
        if (v->dt != GR_DT_FLOAT16)
            for (int64_t c = 0; c < RC; c++)
                for (int64_t y = 0; y < RH; y++)
                    for (int64_t x = 0; x < RW; x++) {
                        const int64_t k = v->nhwc ? (y * RW + x) * RC + c : (c * RH + y) * RW + x;
                        bad_pixel += stored_pixel(v, got, k) != g_rpix[i * RC * RH * RW + (c * RH + y) * RW + x];
                    }
    }
    CHECK_MSG(bad_bytes == 0 && bad_blob == 0, "%s: %lld samples (%lld as blobs) differ from the dataset's bytes",
              v->name, (long long)bad_bytes, (long long)bad_blob);
    CHECK_MSG(bad_label == 0, "%s: %lld labels differ", v->name, (long long)bad_label);
    CHECK_MSG(bad_pixel == 0, "%s: %lld pixels differ from the file's", v->name, (long long)bad_pixel);

    /* one batch fetch, unsorted with repeats, viewed in place */
    const int64_t idx[] = {17, 3, 59, 3, 0, 42, 17, 8};
    const int64_t n = (int64_t)(sizeof idx / sizeof idx[0]);
    gr_status st = gr_source_fetch(&r, idx, n, &err);
    CHECK_MSG(st == GR_OK, "%s: fetch: %s", v->name, err.msg);
    for (int64_t k = 0; st == GR_OK && k < n; k++) {
        size_t bytes = 0, lbytes = 0;
        const void *p = gr_source_view(&r, idx[k], fi, &bytes);
        const int32_t *l = gr_source_view(&r, idx[k], fl, &lbytes);
        gr_status s2 = gr_dataset_fetch(ds, &idx[k], 1, &rows, &err);
        CHECK_MSG(s2 == GR_OK && bytes == sb && lbytes == 4 && memcmp(p, gr_rows_sample(ds, &rows, idx[k]), sb) == 0 &&
                  *l == g_rlab[idx[k]], "%s: batch view of sample %lld", v->name, (long long)idx[k]);
    }
    /* outside [0, N) */
    const int64_t out = RN;
    memset(&err, 0, sizeof err);
    st = gr_source_fetch(&r, &out, 1, &err);
    CHECK_MSG(st != GR_OK, "%s: fetching sample %d of %d succeeded", v->name, RN, RN);
    CHECK_STR_CONTAINS(err.msg, src->path);
    CHECK_STR_CONTAINS(err.msg, "sample index 60 is outside [0, 60)");
    gr_blob_free(&blob);
    gr_source_reader_free(&r);
    gr_rows_free(&rows);
    free(got);
}

static void test_samples(void) {
    for (int k = 0; k < NV; k++) {
        const variant *v = &g_vs[k];
        gr_dataset *ds = open_ds(write_variant(v), v->cache);
        if (!ds) continue;
        CHECK_MSG(gr_dataset_in_memory(ds) == (v->cache == GR_CACHE_MEMORY), "%s: held in memory: %d", v->name,
                  (int)gr_dataset_in_memory(ds));
        gr_source *src = gr_source_dataset(ds);
        check_samples(v, ds, src);
        gr_source_close(src);
        gr_dataset_close(ds);
    }
}

/* ---- 3. the loader over the source ---- */

static void test_loader_same(void) {
    enum { B = 7, NB = 23 };
    static const gr_crop_kind crops[] = {GR_CROP_NONE, GR_CROP_RANDOM, GR_CROP_RESIZED};
    for (int k = 0; k < NV; k++) {
        const variant *v = &g_vs[k];
        gr_dataset *ds = open_ds(write_variant(v), v->cache);
        if (!ds) continue;
        for (int c = 0; c < 3; c++)
            for (int workers = 0; workers <= 2; workers += 2) {
                gr_loader_config cfg = aug_cfg(B, crops[c], 99 + (uint64_t)c);
                cfg.workers = workers;
                cfg.prefetch = 3;
                cfg.drop_last = c == 1;
                gr_source *src = gr_source_dataset(ds);
                gr_loader *a = open_loader(ds, &cfg), *b = NULL;
                gr_error err = {0};
                gr_status st = gr_loader_open_source(src, &cfg, &b, &err);
                CHECK_MSG(st == GR_OK, "%s: gr_loader_open_source: %s", v->name, err.msg);
                CHECK(gr_loader_host_bytes(ds, &cfg) == gr_loader_host_bytes_source(src, &cfg));
                if (a && b) {
                    stream sa = {0}, sb = {0};
                    bool ok = stream_take(a, B, NB, &sa);
                    ok = stream_take(b, B, NB, &sb) && ok;
                    CHECK_MSG(ok && stream_same(&sa, 0, &sb, 0, NB, 0), "%s, crop %d, %d workers: the loader over "
                              "the source differs from the loader over the dataset", v->name, (int)crops[c], workers);
                    stream_free(&sa);
                    stream_free(&sb);
                    /* a seek, as a resume makes it */
                    CHECK(gr_loader_seek(a, 4, 2 * B, &err) == GR_OK && gr_loader_seek(b, 4, 2 * B, &err) == GR_OK);
                    ok = stream_take(a, B, 5, &sa);
                    ok = stream_take(b, B, 5, &sb) && ok;
                    CHECK_MSG(ok && stream_same(&sa, 0, &sb, 0, 5, 0), "%s: after a seek", v->name);
                    stream_free(&sa);
                    stream_free(&sb);
                }
                gr_loader_close(a);
                gr_loader_close(b);
                gr_source_close(src);
            }
        gr_dataset_close(ds);
    }
}

/* ---- 4. a source of other fields ---- */

/* A toy encoded-image source: sample i is a blob of i + 1 bytes (value i)
 * and label 2i; no reader state (everything is in memory). */
enum { BLOB_N = 9 };
typedef struct blob_impl {
    uint8_t bytes[BLOB_N * (BLOB_N + 1) / 2];
    int32_t labels[BLOB_N];
} blob_impl;

static gr_status blob_fetch(gr_source *s, void *state, const int64_t *idx, int64_t n, gr_error *err) {
    (void)state;
    for (int64_t k = 0; k < n; k++)
        if (idx[k] < 0 || idx[k] >= s->n)
            return gr_error_set(err, GR_ERR_INTERNAL, "%s: sample %lld is outside [0, %lld)", s->path,
                                (long long)idx[k], (long long)s->n);
    return GR_OK;
}

static const void *blob_view(const gr_source *s, const void *state, int64_t idx, int f, size_t *bytes) {
    (void)state;
    const blob_impl *b = s->impl;
    if (f == 1) {
        *bytes = sizeof(int32_t);
        return &b->labels[idx];
    }
    *bytes = (size_t)idx + 1;
    return b->bytes + idx * (idx + 1) / 2;
}

static void blob_close(gr_source *s) { free(s); }

static const gr_source_ops blob_ops = {.fetch = blob_fetch, .view = blob_view, .close = blob_close};

static void test_other_source(void) {
    static blob_impl impl;
    for (int i = 0; i < BLOB_N; i++) {
        memset(impl.bytes + i * (i + 1) / 2, i, (size_t)i + 1);
        impl.labels[i] = 2 * i;
    }
    gr_source *src = gr_xcalloc(1, sizeof *src);
    *src = (gr_source){.ops = &blob_ops, .impl = &impl, .path = "blobs.bin", .n = BLOB_N, .nfields = 2};
    src->fields[0] = (gr_field){.name = "jpeg", .origin = "/train/jpeg", .type = GR_FT_UINT8, .variable = true,
                                .rank = 1, .shape = {GR_FIELD_VARIABLE}};
    src->fields[1] = (gr_field){.name = "label", .origin = "/train/labels", .type = GR_FT_INT32};
    CHECK(gr_field_bytes(&src->fields[0]) == 0 && gr_field_bytes(&src->fields[1]) == 4);
    gr_source_reader r;
    gr_source_reader_init(&r, src);
    CHECK(r.state == NULL);
    gr_blob blob = {0};
    gr_error err = {0};
    int64_t bad = 0;
    for (int64_t i = 0; i < BLOB_N; i++) {
        int32_t label = -1;
        gr_status st = gr_source_read_blob(&r, i, 0, &blob, &err);
        if (st == GR_OK) st = gr_source_read(&r, i, 1, &label, &err);
        bool ok = st == GR_OK && blob.n == (size_t)i + 1 && label == 2 * i;
        for (size_t k = 0; ok && k < blob.n; k++) ok = blob.data[k] == i;
        bad += !ok;
    }
    CHECK_MSG(bad == 0, "%lld samples of the blob source read wrong", (long long)bad);
    CHECK(gr_source_read(&r, 3, 0, blob.data, &err) == GR_ERR_INTERNAL);
    CHECK_STR_CONTAINS(err.msg, "blobs.bin: field jpeg (/train/jpeg) varies in size per sample");
    const int64_t out = BLOB_N;
    CHECK(gr_source_fetch(&r, &out, 1, &err) == GR_ERR_INTERNAL);
    CHECK_STR_CONTAINS(err.msg, "blobs.bin: sample 9 is outside [0, 9)");

    /* the loader takes an image and a label field: it refuses this one */
    gr_loader_config cfg = base_cfg(4, true, false, 1);
    gr_loader *ld = NULL;
    CHECK(gr_loader_open_source(src, &cfg, &ld, &err) == GR_ERR_DATA && ld == NULL);
    CHECK_STR_CONTAINS(err.msg, "loader: blobs.bin has no field 'image'");
    CHECK(gr_loader_host_bytes_source(src, &cfg) == 0);
    /* an `image` field the decoder cannot read */
    src->fields[0].name = "image";
    CHECK(gr_loader_open_source(src, &cfg, &ld, &err) == GR_ERR_DATA && ld == NULL);
    CHECK_STR_CONTAINS(err.msg, "loader: blobs.bin: /train/jpeg: field 'image' is variable-size uint8 of rank 1");
    src->fields[0] = (gr_field){.name = "image", .origin = "/train/x", .type = GR_FT_UINT8, .rank = 3,
                                .shape = {1, 2, 2}, .layout = "CHW"};
    src->fields[1].type = GR_FT_INT64;
    CHECK(gr_loader_open_source(src, &cfg, &ld, &err) == GR_ERR_DATA && ld == NULL);
    CHECK_STR_CONTAINS(err.msg, "field 'label' is int64 of rank 0; the loader reads one int32 per sample");
    gr_blob_free(&blob);
    gr_source_reader_free(&r);
    gr_source_close(src);
}

int main(void) {
    mkdir(GR_TEST_TMP, 0755);
    make_random_pixels();
    test_fields();
    test_samples();
    test_loader_same();
    test_other_source();
    return gr_test_report();
}
