/* test_loader_fields.c — unit tests for the loader delivering named fields
 * (gr_loader_config.fields, dataio.h):
 *   1. a dataset's `image` delivered as an image and `label` as int32 equal
 *      the x and y of a loader without fields, bit for bit, with crop, flip,
 *      normalization and workers; x and y are then NULL;
 *   2. over a table source (gr_source_table): every field of every sample
 *      holds the values of its sample, in the order the fields were listed
 *      (float32 from float32, uint8 and float16; int32 from int32 and int64;
 *      a rank-4 uint8 field through the image path), and the samples come in
 *      the order a loader over an image dataset of as many samples takes;
 *   3. the same stream with 0 and 2 workers, and after a seek;
 *   4. normalization per column and by one value;
 *   5. errors naming the source and the field, an int64 value outside int32
 *      at the batch that holds it, and what gr_loader_fields_describe says;
 *   6. host memory: the buffers come from host_alloc, and
 *      gr_loader_host_bytes_source counts them.
 * Fixtures: loader_fixture.h. */
#define LOADER_TMP_TAG "fields"
#include "loader_fixture.h"

/* ---- the table file: ID_N samples, fields named by what they hold ---- */

static float v_x(int64_t i, int j) { return (float)i + (float)j * 0.25f; } /* x float32 [N,3] */
static int64_t v_tok(int64_t i, int j) { return 1000 * i + j; }             /* tok int64 [N,4] */
static uint8_t v_u(int64_t i, int j) { return (uint8_t)((i * 7 + j) % 256); } /* u uint8 [N,2] */

static void put(hid_t g, const char *name, hid_t ft, hid_t mt, int rank, const hsize_t *dims, const void *data) {
    hid_t sp = H5Screate_simple(rank, dims, NULL);
    hid_t d = H5Dcreate2(g, name, ft, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    GR_ASSERT(d >= 0 && H5Dwrite(d, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) >= 0);
    H5Dclose(d);
    H5Sclose(sp);
}

static const char *write_table(void) {
    const char *p = tmp_path("table.h5");
    static float x[ID_N][3];
    static int32_t id[ID_N];
    static int64_t tok[ID_N][4];
    static uint8_t u[ID_N][2], img[ID_N][1][2][2];
    static uint16_t h[ID_N];
    for (int i = 0; i < ID_N; i++) {
        for (int j = 0; j < 3; j++) x[i][j] = v_x(i, j);
        for (int j = 0; j < 4; j++) tok[i][j] = v_tok(i, j), img[i][0][j / 2][j % 2] = (uint8_t)i;
        for (int j = 0; j < 2; j++) u[i][j] = v_u(i, j);
        id[i] = i;
        h[i] = u8_to_half((uint8_t)i);
    }
    hid_t f = H5Fcreate(p, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hid_t g = H5Gcreate2(f, "/train", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    const hsize_t d1[1] = {ID_N}, d2[2] = {ID_N, 3}, d4[2] = {ID_N, 4}, du[2] = {ID_N, 2}, di[4] = {ID_N, 1, 2, 2};
    put(g, "x", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, 2, d2, x);
    put(g, "id", H5T_STD_I32LE, H5T_NATIVE_INT32, 1, d1, id);
    put(g, "tok", H5T_STD_I64LE, H5T_NATIVE_INT64, 2, d4, tok);
    put(g, "u", H5T_STD_U8LE, H5T_NATIVE_UINT8, 2, du, u);
    hid_t t16 = f16_type();
    put(g, "h", t16, t16, 1, d1, h);
    H5Tclose(t16);
    put(g, "img", H5T_STD_U8LE, H5T_NATIVE_UINT8, 4, di, img);
    H5Gclose(g);
    H5Fclose(f);
    return p;
}

static gr_source *open_table(const char *path, gr_cache_mode cache) {
    gr_error err = {0};
    gr_source *s = gr_source_table(path, "/train", cache, &err);
    CHECK_MSG(s != NULL, "%s", err.msg);
    return s;
}

static gr_loader *open_src(gr_source *src, const gr_loader_config *c) {
    gr_loader *ld = NULL;
    gr_error err = {0};
    gr_status st = gr_loader_open_source(src, c, &ld, &err);
    CHECK_MSG(st == GR_OK, "gr_loader_open_source: %s", err.msg);
    return ld;
}

/* All the bytes of nb batches' fields, back to back, with each batch's n. */
typedef struct fstream {
    uint8_t *bytes;
    size_t len;
} fstream;

static bool fstream_take(gr_loader *ld, int64_t nb, fstream *s) {
    memset(s, 0, sizeof *s);
    for (int64_t k = 0; k < nb; k++) {
        gr_batch *b = NULL;
        gr_error err = {0};
        if (gr_loader_next(ld, &b, &err) != GR_OK) {
            CHECK_MSG(false, "gr_loader_next %lld: %s", (long long)k, err.msg);
            return false;
        }
        size_t add = sizeof b->n + sizeof b->epoch + sizeof b->index;
        for (int f = 0; f < b->nfields; f++) add += (size_t)b->n * b->fields[f].bytes;
        s->bytes = gr_xrealloc(s->bytes, s->len + add);
        uint8_t *p = s->bytes + s->len;
        memcpy(p, &b->n, sizeof b->n), p += sizeof b->n;
        memcpy(p, &b->epoch, sizeof b->epoch), p += sizeof b->epoch;
        memcpy(p, &b->index, sizeof b->index), p += sizeof b->index;
        for (int f = 0; f < b->nfields; f++) {
            memcpy(p, b->fields[f].data, (size_t)b->n * b->fields[f].bytes);
            p += (size_t)b->n * b->fields[f].bytes;
        }
        s->len += add;
        gr_loader_release(ld, b);
    }
    return true;
}

/* ---- 1. image and label as fields ---- */

static void test_image_label(void) {
    const char *path = write_random("r.h5", GR_DT_UINT8, false, STORE_CONTIG, 0);
    gr_dataset *ds = open_ds(path, GR_CACHE_MEMORY);
    if (!ds) return;
    gr_source *src = gr_source_dataset(ds);
    gr_loader_config a = aug_cfg(8, GR_CROP_RANDOM, 5);
    a.workers = 2;
    gr_loader_config b = a;
    const gr_loader_field fl[2] = {{.name = "image", .as = GR_DELIVER_IMAGE}, {.name = "label", .as = GR_DELIVER_INT32}};
    b.fields = fl, b.nfields = 2, b.workers = 0;
    gr_loader *la = open_loader(ds, &a), *lb = open_src(src, &b);
    if (la && lb) {
        int64_t ca[3], cb[3];
        gr_loader_sample_shape(la, ca);
        gr_loader_sample_shape(lb, cb);
        CHECK(ca[0] == cb[0] && ca[1] == cb[1] && ca[2] == cb[2] && ca[1] == 7);
        bool same = true, shapes = true;
        for (int k = 0; k < 16; k++) { /* two epochs: ceil(60 / 8) = 8 batches each */
            gr_batch *x = NULL, *y = NULL;
            gr_error err = {0};
            CHECK(gr_loader_next(la, &x, &err) == GR_OK && gr_loader_next(lb, &y, &err) == GR_OK);
            if (!x || !y) break;
            const size_t xb = (size_t)(x->n * ca[0] * ca[1] * ca[2]) * sizeof(float);
            shapes = shapes && y->x == NULL && y->y == NULL && y->nfields == 2 && y->fields[0].rank == 3 &&
                     y->fields[0].shape[0] == RC && y->fields[0].shape[1] == 7 && y->fields[0].shape[2] == 7 &&
                     y->fields[0].type == GR_FT_FLOAT32 && y->fields[1].rank == 0 && y->fields[1].bytes == 4 &&
                     y->fields[1].type == GR_FT_INT32 && strcmp(y->fields[1].name, "label") == 0;
            same = same && x->n == y->n && x->epoch == y->epoch && x->index == y->index &&
                   memcmp(x->x, y->fields[0].data, xb) == 0 &&
                   memcmp(x->y, y->fields[1].data, (size_t)x->n * sizeof(int32_t)) == 0;
            gr_loader_release(la, x);
            gr_loader_release(lb, y);
        }
        CHECK_MSG(shapes, "field descriptions");
        CHECK_MSG(same, "image/label fields differ from x/y");
    }
    gr_loader_close(la);
    gr_loader_close(lb);
    gr_source_close(src);
    gr_dataset_close(ds);
}

/* ---- 2. values and order over a table ---- */

static const gr_loader_field g_all[6] = {
    {.name = "x", .as = GR_DELIVER_FLOAT32},  {.name = "id", .as = GR_DELIVER_INT32},
    {.name = "tok", .as = GR_DELIVER_INT32},  {.name = "u", .as = GR_DELIVER_FLOAT32},
    {.name = "h", .as = GR_DELIVER_FLOAT32},  {.name = "img", .as = GR_DELIVER_IMAGE},
};

/* Sample i of batch b (fields g_all) holds the values of its id. */
static bool batch_sample_ok(const gr_batch *b, int64_t i, int64_t *id_out) {
    const int64_t id = ((const int32_t *)b->fields[1].data)[i];
    *id_out = id;
    bool ok = id >= 0 && id < ID_N;
    const float *x = (const float *)b->fields[0].data + i * 3;
    const int32_t *tok = (const int32_t *)b->fields[2].data + i * 4;
    const float *u = (const float *)b->fields[3].data + i * 2;
    const float *h = (const float *)b->fields[4].data + i;
    const float *img = (const float *)b->fields[5].data + i * 4;
    for (int j = 0; j < 3; j++) ok = ok && x[j] == v_x(id, j);
    for (int j = 0; j < 4; j++) ok = ok && tok[j] == v_tok(id, j) && img[j] == (float)id;
    for (int j = 0; j < 2; j++) ok = ok && u[j] == (float)v_u(id, j);
    return ok && *h == (float)id;
}

static void test_values_order(const char *table) {
    gr_source *src = open_table(table, GR_CACHE_NONE);
    gr_dataset *ids = open_ds(make_id_file(), GR_CACHE_MEMORY);
    if (!src || !ids) goto done;
    gr_loader_config c = base_cfg(8, true, false, 11), d = c;
    c.fields = g_all, c.nfields = 6;
    gr_loader *lt = open_src(src, &c), *li = open_loader(ids, &d);
    if (lt && li) {
        bool values = true, order = true, desc = true;
        for (int k = 0; k < 26; k++) { /* two epochs of ceil(103 / 8) = 13 */
            gr_batch *t = NULL, *r = NULL;
            gr_error err = {0};
            CHECK(gr_loader_next(lt, &t, &err) == GR_OK && gr_loader_next(li, &r, &err) == GR_OK);
            if (!t || !r) break;
            desc = desc && t->nfields == 6 && t->x == NULL && t->y == NULL && t->n == r->n;
            for (int f = 0; f < 6 && desc; f++) desc = strcmp(t->fields[f].name, g_all[f].name) == 0;
            desc = desc && t->fields[0].rank == 1 && t->fields[0].shape[0] == 3 && t->fields[0].bytes == 12 &&
                   t->fields[2].type == GR_FT_INT32 && t->fields[2].bytes == 16 && t->fields[4].rank == 0 &&
                   t->fields[5].rank == 3 && t->fields[5].shape[0] == 1 && t->fields[5].shape[2] == 2;
            for (int64_t i = 0; i < t->n && desc; i++) {
                int64_t id = -1;
                const bool ok = batch_sample_ok(t, i, &id);
                values = values && ok;
                order = order && r->y[i] == 3 * id + 1;
            }
            gr_loader_release(lt, t);
            gr_loader_release(li, r);
        }
        CHECK_MSG(desc, "batch fields described");
        CHECK_MSG(values, "a sample's fields hold its values");
        CHECK_MSG(order, "the samples come in the image loader's order");
    }
    gr_loader_close(lt);
    gr_loader_close(li);
done:
    gr_dataset_close(ids);
    gr_source_close(src);
}

/* ---- 3. workers and seek ---- */

static void test_workers_seek(const char *table) {
    gr_source *src = open_table(table, GR_CACHE_MEMORY);
    if (!src) return;
    gr_loader_config c0 = base_cfg(8, true, true, 3), c2;
    c0.fields = g_all, c0.nfields = 5; /* without the image */
    c2 = c0;
    c2.workers = 2, c2.prefetch = 3;
    gr_loader *l0 = open_src(src, &c0), *l2 = open_src(src, &c2);
    fstream s0, s2, sk;
    if (l0 && l2 && fstream_take(l0, 30, &s0) && fstream_take(l2, 30, &s2)) {
        CHECK_MSG(s0.len == s2.len && memcmp(s0.bytes, s2.bytes, s0.len) == 0, "0 and 2 workers differ");
        /* 12 full batches per epoch (drop_last): epoch 1 sample 16 is batch 14 of the stream */
        gr_error err = {0};
        CHECK(gr_loader_seek(l2, 1, 16, &err) == GR_OK);
        if (fstream_take(l2, 5, &sk)) {
            const size_t per = s0.len / 30;
            CHECK_MSG(sk.len == 5 * per && memcmp(sk.bytes, s0.bytes + 14 * per, sk.len) == 0, "after the seek");
            free(sk.bytes);
        }
        free(s0.bytes);
        free(s2.bytes);
    }
    gr_loader_close(l0);
    gr_loader_close(l2);
    gr_source_close(src);
}

/* ---- 4. normalization ---- */

static void test_norm(const char *table) {
    gr_source *src = open_table(table, GR_CACHE_AUTO);
    if (!src) return;
    const double mx[3] = {1, 2, 3}, sx[3] = {2, 4, 8}, mu = 10, su = 5;
    const gr_loader_field fl[3] = {{.name = "x", .as = GR_DELIVER_FLOAT32, .n_norm = 3, .mean = mx, .std = sx},
                                   {.name = "u", .as = GR_DELIVER_FLOAT32, .n_norm = 1, .mean = &mu, .std = &su},
                                   {.name = "id", .as = GR_DELIVER_INT32}};
    gr_loader_config c = base_cfg(16, false, false, 0);
    c.fields = fl, c.nfields = 3;
    gr_loader *ld = open_src(src, &c);
    gr_batch *b = NULL;
    gr_error err = {0};
    if (ld && gr_loader_next(ld, &b, &err) == GR_OK) {
        bool ok = b->n == 16;
        for (int64_t i = 0; i < b->n; i++) {
            const float *x = (const float *)b->fields[0].data + i * 3, *u = (const float *)b->fields[1].data + i * 2;
            ok = ok && ((const int32_t *)b->fields[2].data)[i] == i;
            for (int j = 0; j < 3; j++) ok = ok && x[j] == (float)(((double)v_x(i, j) - mx[j]) / sx[j]);
            for (int j = 0; j < 2; j++) ok = ok && u[j] == (float)(((double)v_u(i, j) - mu) / su);
        }
        CHECK_MSG(ok, "normalized values");
        gr_loader_release(ld, b);
    }
    gr_loader_close(ld);
    gr_source_close(src);
}

/* ---- 5. errors ---- */

static const double g_two[2] = {0, 1};

static void expect_open(gr_source *src, const gr_loader_field *fl, int n, gr_augment aug, gr_status want,
                        const char *msg) {
    gr_loader_config c = base_cfg(4, false, false, 0);
    c.fields = fl, c.nfields = n, c.aug = aug;
    gr_loader *ld = NULL;
    gr_error err = {0};
    gr_status st = gr_loader_open_source(src, &c, &ld, &err);
    CHECK_MSG(st == want && !ld, "%s: status %d (%s)", msg, (int)st, err.msg);
    CHECK_STR_CONTAINS(err.msg, msg);
    gr_loader_close(ld);
}

static void test_errors(const char *table) {
    gr_source *src = open_table(table, GR_CACHE_AUTO);
    if (!src) return;
    char m[512];
    const gr_augment none = {0}, flip = {.flip = true};
    const double one = 1;
    snprintf(m, sizeof m, "loader: %s has no field 'nope' (its fields: h, id, img, tok, u, x)", table);
    expect_open(src, (gr_loader_field[]){{.name = "nope"}}, 1, none, GR_ERR_DATA, m);
    snprintf(m, sizeof m, "%s: /train/x: field 'x' is float32; it cannot be delivered as int32", table);
    expect_open(src, (gr_loader_field[]){{.name = "x", .as = GR_DELIVER_INT32}}, 1, none, GR_ERR_DATA, m);
    snprintf(m, sizeof m, "%s: /train/x: field 'x' is float32 of rank 1, layout ''", table);
    expect_open(src, (gr_loader_field[]){{.name = "x", .as = GR_DELIVER_IMAGE}}, 1, none, GR_ERR_DATA, m);
    expect_open(src, (gr_loader_field[]){{.name = "x", .n_norm = 2, .mean = g_two, .std = g_two}}, 1,
                none, GR_ERR_USAGE, "2 normalization values; expected 1 or 3");
    expect_open(src, (gr_loader_field[]){{.name = "id", .as = GR_DELIVER_INT32, .n_norm = 1, .mean = &one,
                                          .std = &one}}, 1, none, GR_ERR_USAGE, "it takes no normalization");
    expect_open(src, (gr_loader_field[]){{.name = "img", .as = GR_DELIVER_IMAGE}, {.name = "img", .as = GR_DELIVER_IMAGE}},
                2, none, GR_ERR_USAGE, "both delivered as images");
    expect_open(src, (gr_loader_field[]){{.name = "x"}}, 1, flip, GR_ERR_USAGE, "no field is delivered as one");
    snprintf(m, sizeof m, "loader: %s has no field 'image'", table);
    expect_open(src, NULL, 0, none, GR_ERR_DATA, m);

    gr_batch_field d[2];
    gr_loader_config c = base_cfg(4, false, false, 0);
    c.fields = (gr_loader_field[]){{.name = "tok", .as = GR_DELIVER_INT32}, {.name = "h"}};
    c.nfields = 2;
    gr_error err = {0};
    CHECK(gr_loader_fields_describe(src, &c, d, &err) == GR_OK);
    CHECK(strcmp(d[0].name, "tok") == 0 && d[0].type == GR_FT_INT32 && d[0].rank == 1 && d[0].shape[0] == 4 &&
          d[0].bytes == 16 && !d[0].data && d[1].type == GR_FT_FLOAT32 && d[1].rank == 0 && d[1].bytes == 4);
    gr_source_close(src);

    /* an int64 value past int32: the batch that holds it fails, naming it */
    const char *p = tmp_path("big.h5");
    const int64_t big[4] = {1, 2, (int64_t)1 << 40, 3};
    const hsize_t d1[1] = {4};
    hid_t f = H5Fcreate(p, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hid_t g = H5Gcreate2(f, "/train", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    put(g, "big", H5T_STD_I64LE, H5T_NATIVE_INT64, 1, d1, big);
    H5Gclose(g);
    H5Fclose(f);
    if (!(src = open_table(p, GR_CACHE_AUTO))) return;
    gr_loader_config cb = base_cfg(2, false, false, 0);
    cb.fields = (gr_loader_field[]){{.name = "big", .as = GR_DELIVER_INT32}};
    cb.nfields = 1;
    gr_loader *ld = open_src(src, &cb);
    gr_batch *b = NULL;
    if (ld) {
        CHECK(gr_loader_next(ld, &b, &err) == GR_OK && ((int32_t *)b->fields[0].data)[1] == 2);
        gr_loader_release(ld, b);
        CHECK(gr_loader_next(ld, &b, &err) == GR_ERR_DATA);
        snprintf(m, sizeof m, "%s: /train/big: sample 2 element 0: value 1099511627776 does not fit int32", p);
        CHECK_STR_CONTAINS(err.msg, m);
    }
    gr_loader_close(ld);
    gr_source_close(src);
}

/* ---- 6. host memory ---- */

typedef struct counter {
    size_t bytes;
    int live;
} counter;

static void *count_alloc(size_t bytes, void *ctx) {
    counter *c = ctx;
    c->bytes += bytes;
    c->live++;
    return gr_aligned_alloc(bytes);
}

static void count_free(void *p, void *ctx) {
    ((counter *)ctx)->live--;
    gr_aligned_free(p);
}

static void test_host(const char *table) {
    gr_source *src = open_table(table, GR_CACHE_MEMORY);
    if (!src) return;
    counter cnt = {0};
    gr_loader_config c = base_cfg(8, true, false, 0);
    c.fields = g_all, c.nfields = 2; /* x [3] float, id int32 */
    c.host_alloc = count_alloc, c.host_free = count_free, c.alloc_ctx = &cnt;
    const size_t slots = 2 * 8 * (12 + 4);
    const size_t want = slots + 8 * sizeof(int64_t) + 2 * ID_N * sizeof(int64_t);
    CHECK_MSG(gr_loader_host_bytes_source(src, &c) == want, "host bytes %zu, expected %zu",
              gr_loader_host_bytes_source(src, &c), want);
    gr_loader *ld = open_src(src, &c);
    CHECK_MSG(cnt.bytes == slots && cnt.live == 4, "host_alloc gave %zu bytes in %d buffers", cnt.bytes, cnt.live);
    gr_loader_close(ld);
    CHECK(cnt.live == 0);
    gr_source_close(src);
}

int main(void) {
    make_random_pixels();
    const char *table = write_table();
    test_image_label();
    test_values_order(table);
    test_workers_seek(table);
    test_norm(table);
    test_errors(table);
    test_host(table);
    return gr_test_report();
}
