/* test_source_table.c — unit tests for the table source (dataio/source.h,
 * gr_source_table):
 *   1. every dataset of the group is a field named as it, in name order:
 *      element type (int8/int16 read as int32, uint32 as int64), per-sample
 *      shape (rank 0 for [N]), origin, layout of a rank-4 dataset; sub-groups
 *      are skipped;
 *   2. values read through the source equal what was written, held in memory
 *      (data.cache memory, auto under the limit) and read from the file
 *      (none, auto over the limit), for single reads and a batch fetch with
 *      repeats in any order; host-memory figures; an index out of range;
 *   3. errors naming the file and dataset: no file, no group, no datasets,
 *      N that differs, float64 and string datasets, a scalar dataset, NaN in
 *      a float field (at open in memory, at the fetch of its batch from the
 *      file, naming the sample);
 *   4. numeric attributes of a field's dataset and of the group. */
#include "../dataio/dataio.h"
#include "gr_test.h"

#include <hdf5.h>
#include <stdlib.h>

#define N 10

static const char *tmp_path(const char *name) {
    static char buf[4][512];
    static int k;
    char *p = buf[k++ % 4];
    snprintf(p, 512, "%s/table_%s", GR_TEST_TMP, name);
    return p;
}

/* Dataset name [dims] of file type ft in g, written from data (memory type mt). */
static hid_t put(hid_t g, const char *name, hid_t ft, hid_t mt, int rank, const hsize_t *dims, const void *data) {
    hid_t sp = rank ? H5Screate_simple(rank, dims, NULL) : H5Screate(H5S_SCALAR);
    hid_t d = H5Dcreate2(g, name, ft, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    GR_ASSERT(d >= 0);
    GR_ASSERT(H5Dwrite(d, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) >= 0);
    H5Sclose(sp);
    return d;
}

static void put_close(hid_t g, const char *name, hid_t ft, hid_t mt, int rank, const hsize_t *dims, const void *data) {
    H5Dclose(put(g, name, ft, mt, rank, dims, data));
}

static hid_t f16_type(void) { /* IEEE binary16, little-endian */
    hid_t t = H5Tcopy(H5T_IEEE_F32LE);
    H5Tset_fields(t, 15, 10, 5, 0, 10);
    H5Tset_precision(t, 16);
    H5Tset_size(t, 2);
    H5Tset_ebias(t, 15);
    return t;
}

static hid_t new_file(const char *path, const char *group, hid_t *g) {
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    GR_ASSERT(f >= 0);
    *g = strcmp(group, "/") ? H5Gcreate2(f, group, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT) : H5Gopen2(f, "/", H5P_DEFAULT);
    GR_ASSERT(*g >= 0);
    return f;
}

/* The values of the good file: sample i's element j of each field. */
static float v_a(int i, int j) { return (float)i * 10.0f + (float)j * 0.25f; }       /* a_f32 [N,3] */
static int64_t v_b(int i) { return (int64_t)i * 3000000000ll - 7; }                   /* b_i64 [N] */
static uint8_t v_c(int i, int j) { return (uint8_t)(i * 4 + j); }                     /* c_u8 [N,2,2] */
static uint16_t v_d(int i, int j) { return (uint16_t)(j ? 0x3C00 + i : 0xB800); }     /* d_f16 [N,2] bits */
static uint16_t v_e(int i) { return (uint16_t)(60000 + i); }                          /* e_u16 [N] */
static int16_t v_f(int i) { return (int16_t)(-300 * i); }                             /* f_i16 [N] -> int32 */
static uint32_t v_g(int i) { return 4000000000u + (uint32_t)i; }                      /* g_u32 [N] -> int64 */
static uint8_t v_h(int i, int j) { return (uint8_t)(i + 16 * j); }                    /* h_img [N,1,2,2] */

static const char *write_good(void) {
    const char *path = tmp_path("good.h5");
    hid_t g, f = new_file(path, "/train", &g);
    float a[N][3];
    int64_t b[N];
    uint8_t c[N][2][2], h[N][1][2][2];
    uint16_t d[N][2], e[N];
    int16_t fi[N];
    uint32_t gu[N];
    for (int i = 0; i < N; i++) {
        for (int j = 0; j < 3; j++) a[i][j] = v_a(i, j);
        b[i] = v_b(i);
        for (int j = 0; j < 4; j++) c[i][j / 2][j % 2] = v_c(i, j), h[i][0][j / 2][j % 2] = v_h(i, j);
        for (int j = 0; j < 2; j++) d[i][j] = v_d(i, j);
        e[i] = v_e(i), fi[i] = v_f(i), gu[i] = v_g(i);
    }
    const hsize_t d1[1] = {N}, d2[2] = {N, 3}, d3[3] = {N, 2, 2}, d2b[2] = {N, 2}, d4[4] = {N, 1, 2, 2};
    put_close(g, "a_f32", H5T_IEEE_F32BE, H5T_NATIVE_FLOAT, 2, d2, a); /* big-endian: converted as read */
    hid_t ds = put(g, "b_i64", H5T_STD_I64LE, H5T_NATIVE_INT64, 1, d1, b);
    const double m[2] = {1.5, -2};
    hsize_t two = 2;
    hid_t sp = H5Screate_simple(1, &two, NULL);
    hid_t at = H5Acreate2(ds, "mean", H5T_IEEE_F64LE, sp, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(at, H5T_NATIVE_DOUBLE, m);
    H5Aclose(at);
    at = H5Acreate2(g, "scale", H5T_IEEE_F64LE, sp, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(at, H5T_NATIVE_DOUBLE, m);
    H5Aclose(at);
    H5Sclose(sp);
    H5Dclose(ds);
    put_close(g, "c_u8", H5T_STD_U8LE, H5T_NATIVE_UINT8, 3, d3, c);
    hid_t t16 = f16_type();
    put_close(g, "d_f16", t16, t16, 2, d2b, d);
    H5Tclose(t16);
    put_close(g, "e_u16", H5T_STD_U16LE, H5T_NATIVE_UINT16, 1, d1, e);
    put_close(g, "f_i16", H5T_STD_I16LE, H5T_NATIVE_INT16, 1, d1, fi);
    put_close(g, "g_u32", H5T_STD_U32LE, H5T_NATIVE_UINT32, 1, d1, gu);
    put_close(g, "h_img", H5T_STD_U8LE, H5T_NATIVE_UINT8, 4, d4, h);
    hid_t sub = H5Gcreate2(g, "sub", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT); /* skipped */
    put_close(sub, "z", H5T_STD_U8LE, H5T_NATIVE_UINT8, 1, d1, c);
    H5Gclose(sub);
    H5Gclose(g);
    H5Fclose(f);
    return path;
}

/* ---- 1. fields ---- */

static void test_fields(const char *path) {
    gr_error err = {0};
    gr_source *s = gr_source_table(path, "train/", GR_CACHE_AUTO, &err);
    CHECK_MSG(s != NULL, "%s", err.msg);
    if (!s) return;
    static const struct {
        const char *name;
        gr_ftype type;
        int rank;
        int64_t shape[3];
        const char *layout;
    } want[] = {
        {"a_f32", GR_FT_FLOAT32, 1, {3}, ""},      {"b_i64", GR_FT_INT64, 0, {0}, ""},
        {"c_u8", GR_FT_UINT8, 2, {2, 2}, ""},      {"d_f16", GR_FT_FLOAT16, 1, {2}, ""},
        {"e_u16", GR_FT_UINT16, 0, {0}, ""},       {"f_i16", GR_FT_INT32, 0, {0}, ""},
        {"g_u32", GR_FT_INT64, 0, {0}, ""},        {"h_img", GR_FT_UINT8, 3, {1, 2, 2}, "CHW"},
    };
    CHECK_MSG(s->nfields == 8 && s->n == N && strcmp(s->path, path) == 0, "%d fields, n %lld", s->nfields,
              (long long)s->n);
    for (int k = 0; k < 8 && k < s->nfields; k++) {
        const gr_field *f = &s->fields[k];
        char origin[64];
        snprintf(origin, sizeof origin, "/train/%s", want[k].name);
        bool shape_ok = f->rank == want[k].rank;
        for (int d = 0; shape_ok && d < f->rank; d++) shape_ok = f->shape[d] == want[k].shape[d];
        CHECK_MSG(strcmp(f->name, want[k].name) == 0 && f->type == want[k].type && shape_ok && !f->variable &&
                  strcmp(f->origin, origin) == 0 && strcmp(f->layout, want[k].layout) == 0,
                  "field %d: %s %s rank %d origin %s layout '%s'", k, f->name, gr_ftype_name(f->type), f->rank,
                  f->origin, f->layout);
        CHECK(gr_source_find(s, want[k].name) == k);
    }
    CHECK(gr_source_find(s, "sub") < 0 && gr_source_find(s, "z") < 0);
    CHECK(gr_field_bytes(&s->fields[0]) == 12 && gr_field_bytes(&s->fields[1]) == 8);
    gr_source_close(s);
}

/* ---- 2. values ---- */

/* Sample i's fields as viewed by r equal what was written. */
static bool sample_ok(gr_source_reader *r, int64_t i) {
    size_t n;
    bool ok = true;
    const float *a = gr_source_view(r, i, 0, &n);
    for (int j = 0; j < 3; j++) ok = ok && a[j] == v_a((int)i, j);
    const int64_t *b = gr_source_view(r, i, 1, &n);
    ok = ok && n == 8 && *b == v_b((int)i);
    const uint8_t *c = gr_source_view(r, i, 2, &n);
    for (int j = 0; j < 4; j++) ok = ok && c[j] == v_c((int)i, j);
    const uint16_t *d = gr_source_view(r, i, 3, &n);
    ok = ok && n == 4 && d[0] == v_d((int)i, 0) && d[1] == v_d((int)i, 1);
    const uint16_t *e = gr_source_view(r, i, 4, &n);
    ok = ok && *e == v_e((int)i);
    const int32_t *fi = gr_source_view(r, i, 5, &n);
    ok = ok && n == 4 && *fi == v_f((int)i);
    const int64_t *gu = gr_source_view(r, i, 6, &n);
    ok = ok && n == 8 && *gu == (int64_t)v_g((int)i);
    const uint8_t *h = gr_source_view(r, i, 7, &n);
    for (int j = 0; j < 4; j++) ok = ok && h[j] == v_h((int)i, j);
    return ok;
}

static void test_values(const char *path) {
    static const struct {
        const char *name;
        gr_cache_mode cache;
        int64_t limit; /* -1: the default */
        bool in_memory;
    } modes[] = {
        {"memory", GR_CACHE_MEMORY, 0, true},
        {"auto under the limit", GR_CACHE_AUTO, -1, true},
        {"auto over the limit", GR_CACHE_AUTO, 100, false},
        {"none", GR_CACHE_NONE, -1, false},
    };
    for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
        gr_dataset_set_memory_limit(modes[m].limit);
        gr_error err = {0};
        gr_source *s = gr_source_table(path, "/train", modes[m].cache, &err);
        gr_dataset_set_memory_limit(-1);
        CHECK_MSG(s != NULL, "%s: %s", modes[m].name, err.msg);
        if (!s) continue;
        const size_t row = 12 + 8 + 4 + 4 + 2 + 4 + 8 + 4;
        const size_t host = gr_source_table_host_bytes(s), rb = s->ops->reader_bytes(s, 5);
        CHECK_MSG(modes[m].in_memory ? host == N * row && rb == 0 : host == N * row && rb == 5 * (row + 8),
                  "%s: host %zu, reader %zu", modes[m].name, host, rb);
        gr_source_reader r;
        gr_source_reader_init(&r, s);
        for (int64_t i = 0; i < N; i++) {
            float a[3] = {0};
            CHECK(gr_source_read(&r, i, 0, a, &err) == GR_OK && a[2] == v_a((int)i, 2));
            CHECK_MSG(sample_ok(&r, i), "%s: sample %lld", modes[m].name, (long long)i);
        }
        const int64_t idx[7] = {9, 2, 2, 5, 0, 9, 3};
        CHECK_MSG(gr_source_fetch(&r, idx, 7, &err) == GR_OK, "%s", err.msg);
        bool ok = true;
        for (int k = 0; k < 7; k++) ok = ok && sample_ok(&r, idx[k]);
        CHECK_MSG(ok, "%s: a batch with repeats", modes[m].name);
        const int64_t bad[2] = {1, N};
        CHECK(gr_source_fetch(&r, bad, 2, &err) == GR_ERR_INTERNAL);
        CHECK_STR_CONTAINS(err.msg, "sample index 10 is outside [0, 10)");
        gr_source_reader_free(&r);
        gr_source_close(s);
    }
}

/* ---- 3. errors ---- */

static gr_status open_status(const char *path, const char *group, gr_cache_mode cache, gr_error *err) {
    gr_source *s = gr_source_table(path, group, cache, err);
    if (!s) return err->status;
    gr_source_close(s);
    return GR_OK;
}

static void expect(const char *what, const char *path, const char *group, gr_cache_mode cache, const char *msg) {
    gr_error err = {0};
    gr_status st = open_status(path, group, cache, &err);
    CHECK_MSG(st == GR_ERR_DATA, "%s: status %d", what, (int)st);
    CHECK_STR_CONTAINS(err.msg, msg);
}

static void test_errors(const char *good) {
    char m[512];
    expect("no file", tmp_path("absent.h5"), "/", GR_CACHE_AUTO, "table_absent.h5: no such file");
    snprintf(m, sizeof m, "%s: group /val: no such group", good);
    expect("no group", good, "/val", GR_CACHE_AUTO, m);

    const hsize_t d1[1] = {N}, d9[1] = {N - 1}, d2[2] = {N, 2};
    double f64[N] = {0};
    float f32[N][2] = {{0}};
    int32_t i32[N] = {0};
    const char *p = tmp_path("bad.h5");
    hid_t g, f = new_file(p, "/t", &g);
    hid_t e1 = H5Gcreate2(g, "empty", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Gclose(e1);
    hid_t gn = H5Gcreate2(g, "n", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    put_close(gn, "a", H5T_STD_I32LE, H5T_NATIVE_INT32, 1, d1, i32);
    put_close(gn, "b", H5T_STD_I32LE, H5T_NATIVE_INT32, 1, d9, i32);
    H5Gclose(gn);
    hid_t gd = H5Gcreate2(g, "f64", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    put_close(gd, "w", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, 1, d1, f64);
    H5Gclose(gd);
    hid_t gs = H5Gcreate2(g, "scalar", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    put_close(gs, "s", H5T_STD_I32LE, H5T_NATIVE_INT32, 0, NULL, i32);
    H5Gclose(gs);
    hid_t gt = H5Gcreate2(g, "str", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    hid_t st = H5Tcopy(H5T_C_S1);
    H5Tset_size(st, 4);
    char strs[N][4] = {{0}};
    put_close(gt, "s", st, st, 1, d1, strs);
    H5Tclose(st);
    H5Gclose(gt);
    hid_t gnan = H5Gcreate2(g, "nan", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    f32[7][1] = NAN;
    put_close(gnan, "x", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, 2, d2, f32);
    H5Gclose(gnan);
    H5Gclose(g);
    H5Fclose(f);

    snprintf(m, sizeof m, "%s: group /t/empty holds no datasets", p);
    expect("no datasets", p, "/t/empty", GR_CACHE_AUTO, m);
    snprintf(m, sizeof m, "%s: /t/n/b: N=9, but /t/n/a has N=10", p);
    expect("N differs", p, "/t/n", GR_CACHE_AUTO, m);
    snprintf(m, sizeof m, "%s: /t/f64/w: unsupported dtype (float64)", p);
    expect("float64", p, "/t/f64", GR_CACHE_AUTO, m);
    expect("float64 hint", p, "/t/f64", GR_CACHE_AUTO, ".astype('float32')");
    snprintf(m, sizeof m, "%s: /t/str/s: unsupported dtype (string)", p);
    expect("string", p, "/t/str", GR_CACHE_AUTO, m);
    snprintf(m, sizeof m, "%s: /t/scalar/s: rank 0", p);
    expect("scalar", p, "/t/scalar", GR_CACHE_AUTO, m);
    snprintf(m, sizeof m, "%s: /t/nan/x: sample 7 holds NaN at element 1 of 2; float fields must be finite", p);
    expect("NaN in memory", p, "/t/nan", GR_CACHE_MEMORY, m);

    /* read from the file: the open passes, the batch holding sample 7 fails */
    gr_error err = {0};
    gr_source *s = gr_source_table(p, "/t/nan", GR_CACHE_NONE, &err);
    CHECK_MSG(s != NULL, "%s", err.msg);
    if (s) {
        gr_source_reader r;
        gr_source_reader_init(&r, s);
        const int64_t ok_idx[3] = {0, 6, 8}, bad_idx[3] = {1, 7, 9};
        CHECK(gr_source_fetch(&r, ok_idx, 3, &err) == GR_OK);
        CHECK(gr_source_fetch(&r, bad_idx, 3, &err) == GR_ERR_DATA);
        CHECK_STR_CONTAINS(err.msg, m);
        gr_source_reader_free(&r);
        gr_source_close(s);
    }
}

/* ---- 4. attributes ---- */

static void test_attrs(const char *path) {
    gr_error err = {0};
    gr_source *s = gr_source_table(path, "/train", GR_CACHE_AUTO, &err);
    CHECK_MSG(s != NULL, "%s", err.msg);
    if (!s) return;
    double v[4] = {0};
    CHECK(gr_source_table_attr_floats(s, "b_i64", "mean", v, 4) == 2 && v[0] == 1.5 && v[1] == -2);
    CHECK(gr_source_table_attr_floats(s, "b_i64", "mean", v, 1) == 1);
    CHECK(gr_source_table_attr_floats(s, NULL, "scale", v, 4) == 2 && v[1] == -2);
    CHECK(gr_source_table_attr_floats(s, "a_f32", "mean", v, 4) == 0);
    CHECK(gr_source_table_attr_floats(s, "nope", "mean", v, 4) == -1);
    gr_source_close(s);
}

int main(void) {
    const char *good = write_good();
    test_fields(good);
    test_values(good);
    test_errors(good);
    test_attrs(good);
    return gr_test_report();
}
