/* test_convert_csv.c — unit tests for the CSV converter (dataio/convert.h,
 * gr_data_convert_csv), read back through the table source:
 *   1. a table made from a known linear function plus noise (values exact in
 *      float32) round-trips: features in file order without the targets,
 *      targets in the order given, the column names as group attributes, the
 *      per-column mean and std of /train on each dataset; a byte order mark,
 *      CRLF line ends, quoted names, spaces and blank lines are taken;
 *   2. --val-fraction: split sizes, every row in exactly one split, each in
 *      file order, the same files for the same seed and another split for
 *      another seed;
 *   3. errors with positions (FILE:LINE:COLUMN and the text, a ragged row),
 *      bad --target names, an existing OUT, and a failed conversion leaving
 *      no OUT. */
#include "../dataio/convert.h"
#include "../dataio/dataio.h"
#include "gr_test.h"

#include <hdf5.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *tmp_path(const char *name) {
    static char buf[8][512];
    static int k;
    char *p = buf[k++ % 8];
    snprintf(p, 512, "%s/csv_%s", GR_TEST_TMP, name);
    return p;
}

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    GR_ASSERT(f);
    fputs(text, f);
    fclose(f);
}

/* Row i of the linear table: a, b (features), y = 2a - b/2 + 1 + noise, id. */
enum { ROWS = 100 };
static double v_a(int i) { return (double)(i % 13) / 8.0; }
static double v_b(int i) { return (double)(i * 3 % 17) - 4.0; }
static double v_noise(int i) { return (double)((i * 7919) % 9 - 4) / 64.0; }
static double v_y(int i) { return 2 * v_a(i) - v_b(i) / 2 + 1 + v_noise(i); }

static const char *write_linear(void) {
    const char *p = tmp_path("linear.csv");
    FILE *f = fopen(p, "wb");
    GR_ASSERT(f);
    fputs("\xEF\xBB\xBF" "id, \"a\" ,y,b\r\n", f); /* BOM, quoted and spaced names, CRLF */
    for (int i = 0; i < ROWS; i++) {
        fprintf(f, "%d,%.17g, %.17g ,%.17g\r\n", i, v_a(i), v_y(i), v_b(i));
        if (i == 50) fputs("\r\n  \n", f); /* blank lines */
    }
    fclose(f);
    static char kept[512]; /* tmp_path's buffers rotate */
    snprintf(kept, sizeof kept, "%s", p);
    return kept;
}

static gr_status convert(const char *from, const char *const *targets, int nt, double vf, uint64_t seed,
                         const char *out, bool force, gr_csv_report *rep, gr_error *err) {
    gr_csv_config c = {.from = from, .targets = targets, .ntargets = nt, .val_fraction = vf, .seed = seed};
    return gr_data_convert_csv(&c, out, force, false, rep, err);
}

/* The string list attribute name of group g of file path, joined by ','. */
static void names_attr(const char *path, const char *g, const char *name, char *buf, size_t n) {
    buf[0] = '\0';
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    hid_t grp = H5Gopen2(f, g, H5P_DEFAULT), a = H5Aopen(grp, name, H5P_DEFAULT);
    hid_t sp = H5Aget_space(a), t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, H5T_VARIABLE);
    H5Tset_cset(t, H5T_CSET_UTF8);
    hssize_t k = H5Sget_simple_extent_npoints(sp);
    char **v = calloc((size_t)k, sizeof *v);
    if (H5Aread(a, t, v) >= 0)
        for (hssize_t i = 0; i < k; i++) {
            size_t len = strlen(buf);
            snprintf(buf + len, n - len, "%s%s", i ? "," : "", v[i]);
            H5free_memory(v[i]);
        }
    free(v);
    H5Tclose(t);
    H5Sclose(sp);
    H5Aclose(a);
    H5Gclose(grp);
    H5Fclose(f);
}

/* Rows of split g: features [n,3] (id, a, b) and targets [n,1] (y) into
 * the caller's arrays (at most max rows); returns n. */
static int64_t read_split(const char *path, const char *g, float *feat, float *targ, int64_t max) {
    gr_error err = {0};
    gr_source *s = gr_source_table(path, g, GR_CACHE_AUTO, &err);
    CHECK_MSG(s != NULL, "%s", err.msg);
    if (!s) return 0;
    const int fi = gr_source_find(s, "features"), ti = gr_source_find(s, "targets");
    CHECK(s->nfields == 2 && fi >= 0 && ti >= 0);
    CHECK(s->fields[fi].type == GR_FT_FLOAT32 && s->fields[fi].rank == 1 && s->fields[fi].shape[0] == 3);
    CHECK(s->fields[ti].type == GR_FT_FLOAT32 && s->fields[ti].rank == 1 && s->fields[ti].shape[0] == 1);
    const int64_t n = GR_MIN(s->n, max);
    gr_source_reader r;
    gr_source_reader_init(&r, s);
    for (int64_t i = 0; i < n && fi >= 0 && ti >= 0; i++) {
        CHECK(gr_source_read(&r, i, fi, feat + 3 * i, &err) == GR_OK);
        CHECK(gr_source_read(&r, i, ti, targ + i, &err) == GR_OK);
    }
    gr_source_reader_free(&r);
    gr_source_close(s);
    return n;
}

/* ---- 1. round trip ---- */

static void test_round_trip(const char *csv) {
    const char *out = tmp_path("linear.h5");
    const char *t[1] = {"y"};
    gr_csv_report rep;
    gr_error err = {0};
    CHECK_MSG(convert(csv, t, 1, 0, 0, out, true, &rep, &err) == GR_OK, "%s", err.msg);
    CHECK(rep.train == ROWS && rep.val == 0 && rep.features == 3 && rep.targets == 1);
    static float feat[ROWS * 3], targ[ROWS];
    CHECK(read_split(out, "/train", feat, targ, ROWS) == ROWS);
    bool ok = true;
    double mean_a = 0;
    for (int i = 0; i < ROWS; i++) {
        ok = ok && feat[3 * i] == (float)i && feat[3 * i + 1] == (float)v_a(i) && feat[3 * i + 2] == (float)v_b(i) &&
             targ[i] == (float)v_y(i);
        mean_a += (double)(float)v_a(i) / ROWS;
    }
    CHECK_MSG(ok, "values round-trip");
    char names[256];
    names_attr(out, "/train", "feature_names", names, sizeof names);
    CHECK_STR_CONTAINS(names, "id,a,b");
    names_attr(out, "/train", "target_names", names, sizeof names);
    CHECK(strcmp(names, "y") == 0);
    gr_source *s = gr_source_table(out, "/train", GR_CACHE_AUTO, &err);
    if (s) {
        double m[4] = {0}, sd[4] = {0};
        CHECK(gr_source_table_attr_floats(s, "features", "mean", m, 4) == 3);
        CHECK(gr_source_table_attr_floats(s, "features", "std", sd, 4) == 3);
        CHECK_CLOSE(m[0], (ROWS - 1) / 2.0, 1e-12, 1e-12);
        CHECK_CLOSE(m[1], mean_a, 1e-9, 1e-12);
        CHECK_CLOSE(sd[0], sqrt((ROWS * (double)ROWS - 1) / 12.0), 1e-9, 1e-12); /* 0..N-1 */
        CHECK(gr_source_table_attr_floats(s, "targets", "mean", m, 4) == 1);
        gr_source_close(s);
    }
    /* two targets, in the order given; the features keep file order */
    const char *t2[2] = {"b", "id"};
    CHECK_MSG(convert(csv, t2, 2, 0, 0, out, true, &rep, &err) == GR_OK, "%s", err.msg);
    names_attr(out, "/train", "feature_names", names, sizeof names);
    CHECK(strcmp(names, "a,y") == 0);
    names_attr(out, "/train", "target_names", names, sizeof names);
    CHECK(strcmp(names, "b,id") == 0);
    if ((s = gr_source_table(out, "/train", GR_CACHE_AUTO, &err))) {
        gr_source_reader r;
        gr_source_reader_init(&r, s);
        float tg[2] = {0};
        CHECK(gr_source_read(&r, 7, gr_source_find(s, "targets"), tg, &err) == GR_OK && tg[0] == (float)v_b(7) &&
              tg[1] == 7.0f);
        gr_source_reader_free(&r);
        gr_source_close(s);
    }
}

/* ---- 2. --val-fraction ---- */

static void test_split(const char *csv) {
    const char *t[1] = {"y"}, *o1 = tmp_path("s1.h5"), *o2 = tmp_path("s2.h5"), *o3 = tmp_path("s3.h5");
    gr_csv_report rep;
    gr_error err = {0};
    CHECK_MSG(convert(csv, t, 1, 0.25, 9, o1, true, &rep, &err) == GR_OK, "%s", err.msg);
    CHECK(rep.train == 75 && rep.val == 25);
    CHECK(convert(csv, t, 1, 0.25, 9, o2, true, NULL, &err) == GR_OK);
    CHECK(convert(csv, t, 1, 0.25, 10, o3, true, NULL, &err) == GR_OK);
    static float f1[ROWS * 3], y1[ROWS], f2[ROWS * 3], y2[ROWS], f3[ROWS * 3], y3[ROWS];
    const int64_t n1 = read_split(o1, "/val", f1, y1, ROWS), n2 = read_split(o2, "/val", f2, y2, ROWS);
    const int64_t n3 = read_split(o3, "/val", f3, y3, ROWS);
    CHECK(n1 == 25 && n2 == 25 && n3 == 25);
    CHECK_MSG(memcmp(f1, f2, sizeof(float) * 3 * 25) == 0, "same seed, same /val");
    CHECK_MSG(memcmp(f1, f3, sizeof(float) * 3 * 25) != 0, "another seed, another /val");
    int seen[ROWS] = {0};
    bool order = true;
    for (int64_t i = 0; i < n1; i++) {
        seen[(int)f1[3 * i]]++;
        order = order && (i == 0 || f1[3 * i] > f1[3 * (i - 1)]) && y1[i] == (float)v_y((int)f1[3 * i]);
    }
    const int64_t nt = read_split(o1, "/train", f2, y2, ROWS);
    CHECK(nt == 75);
    for (int64_t i = 0; i < nt; i++) {
        seen[(int)f2[3 * i]]++;
        order = order && (i == 0 || f2[3 * i] > f2[3 * (i - 1)]);
    }
    bool once = true;
    for (int i = 0; i < ROWS; i++) once = once && seen[i] == 1;
    CHECK_MSG(once, "every row in exactly one split");
    CHECK_MSG(order, "each split in file order");
    char names[128];
    names_attr(o1, "/val", "feature_names", names, sizeof names);
    CHECK(strcmp(names, "id,a,b") == 0);
}

/* ---- 3. errors ---- */

static void expect(const char *name, const char *text, const char *target, gr_status want, const char *msg) {
    const char *csv = tmp_path(name), *out = tmp_path("err.h5");
    write_text(csv, text);
    unlink(out);
    const char *t[1] = {target};
    gr_error err = {0};
    gr_status st = convert(csv, t, 1, 0, 0, out, false, NULL, &err);
    CHECK_MSG(st == want, "%s: status %d: %s", name, (int)st, err.msg);
    char full[512];
    snprintf(full, sizeof full, msg, csv);
    CHECK_STR_CONTAINS(err.msg, full);
    CHECK_MSG(access(out, F_OK) != 0, "%s: OUT written after a failure", name);
}

static void test_errors(const char *csv) {
    expect("word.csv", "a,b,c\n1,2,3\n4, 5,abc\n", "c", GR_ERR_DATA, "%s:3:6: 'abc' in column 3 (c) is not a number");
    expect("empty.csv", "a,b,c\n1,,3\n", "c", GR_ERR_DATA, "%s:2:3: an empty cell in column 2 (b) is not a number");
    expect("partial.csv", "a,b\n1,2x\n", "a", GR_ERR_DATA, "%s:2:3: '2x' in column 2 (b) is not a number");
    expect("ragged.csv", "a,b,c\n1,2,3\n\n4,5\n", "c", GR_ERR_DATA,
           "%s:4: 2 cells, but the header has 3 columns");
    expect("nan.csv", "a,b\n1,nan\n", "a", GR_ERR_DATA, "%s:2:3: 'nan' in column 2 (b) is not a finite float32");
    expect("huge.csv", "a,b\n1,1e39\n", "a", GR_ERR_DATA, "%s:2:3: '1e39' in column 2 (b) is not a finite float32");
    expect("dup.csv", "a,b,a\n1,2,3\n", "b", GR_ERR_DATA, "%s:1:5: column name 'a' repeats column 1");
    expect("noname.csv", "a,,c\n1,2,3\n", "a", GR_ERR_DATA, "%s:1:3: column 2 has no name");
    expect("nodata.csv", "a,b\n\n", "a", GR_ERR_DATA, "%s: a header but no rows of data");
    expect("nothing.csv", "", "a", GR_ERR_DATA, "%s: empty");
    expect("target.csv", "a,b\n1,2\n", "z", GR_ERR_USAGE, "--target z: %s has no such column (its columns: a, b)");
    expect("alltarget.csv", "a\n1\n", "a", GR_ERR_USAGE, "every column of %s is a --target");
    const char *t[2] = {"y", "y"}, *out = tmp_path("e.h5");
    gr_error err = {0};
    CHECK(convert(csv, t, 2, 0, 0, out, true, NULL, &err) == GR_ERR_USAGE);
    CHECK_STR_CONTAINS(err.msg, "--target names column y twice");
    CHECK(convert(tmp_path("missing.csv"), t, 1, 0, 0, out, true, NULL, &err) == GR_ERR_DATA);
    CHECK_STR_CONTAINS(err.msg, "csv_missing.csv: no such file");
    CHECK(convert(csv, t, 1, 1.5, 0, out, true, NULL, &err) == GR_ERR_USAGE);
    write_text(tmp_path("one.csv"), "a,y\n1,2\n");
    CHECK(convert(tmp_path("one.csv"), t, 1, 0.5, 0, out, true, NULL, &err) == GR_ERR_DATA);
    CHECK_STR_CONTAINS(err.msg, "--val-fraction needs at least 2");
    /* an existing OUT needs force, and stays as it was */
    CHECK(convert(csv, t, 1, 0, 0, out, true, NULL, &err) == GR_OK);
    struct stat before, after;
    stat(out, &before);
    CHECK(convert(csv, t, 1, 0, 0, out, false, NULL, &err) == GR_ERR_USAGE);
    CHECK_STR_CONTAINS(err.msg, "already exists (pass --force to overwrite)");
    stat(out, &after);
    CHECK(before.st_ino == after.st_ino && before.st_size == after.st_size);
}

int main(void) {
    const char *csv = write_linear();
    test_round_trip(csv);
    test_split(csv);
    test_errors(csv);
    return gr_test_report();
}
