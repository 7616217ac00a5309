/* test_convert_imagefolder_groups.c — unit tests for the groups `gpurun data
 * imagefolder` writes into a file: gr_split_stratified (the --val-fraction
 * split: its counts, its clamps, a pure function of the labels and the seed,
 * uniform over each class), a group added to an existing file (the others
 * kept as they were, --force only to replace a group, a failed conversion
 * leaving the file as it was, a file that is not HDF5 refused, nested groups,
 * links and root attributes kept, different `classes` warned about), and
 * --val-fraction end to end (/train and /val, their statistics). */
#include "convert_images.h"

static uint8_t g_rgb[3]; /* the colour px_g draws */

static uint8_t px_g(int x, int y, int c) {
    (void)x, (void)y;
    return g_rgb[c < 3 ? c : 0];
}

/* dir/<class>/<i>.png for each class of names (counts[k] files of class k):
 * solid 6x6 images, R = 50 * class, G = 10 * (file number over all), B = 99. */
static void make_folder(const char *dir, const char *const *names, const int *counts, int nclasses) {
    rm_rf(dir);
    mkdir(dir, 0755);
    int k = 0;
    for (int c = 0; c < nclasses; c++) {
        char cdir[600], file[32];
        snprintf(cdir, sizeof cdir, "%s/%s", dir, names[c]);
        mkdir(cdir, 0755);
        for (int i = 0; i < counts[c]; i++, k++) {
            g_rgb[0] = (uint8_t)(50 * c), g_rgb[1] = (uint8_t)(10 * k), g_rgb[2] = 99;
            snprintf(file, sizeof file, "%02d.png", i);
            write_png(join(cdir, file), 6, 6, PNG_COLOR_TYPE_RGB, 8, px_g);
        }
    }
}

/* The bytes of path (malloc'd), their count in *n. */
static uint8_t *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    GR_ASSERT(f);
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    rewind(f);
    uint8_t *b = malloc(*n + 1);
    GR_ASSERT(fread(b, 1, *n, f) == *n);
    fclose(f);
    return b;
}

static bool same_bytes(const uint8_t *a, size_t na, const char *path) {
    size_t nb;
    uint8_t *b = slurp(path, &nb);
    bool same = na == nb && memcmp(a, b, na) == 0;
    free(b);
    return same;
}

static bool same_split(const char *pa, const char *pb, const char *group) {
    split_data a, b;
    if (!read_split(pa, group, &a)) return false;
    if (!read_split(pb, group, &b)) {
        split_free(&a);
        return false;
    }
    const int64_t per = a.chw[0] * a.chw[1] * a.chw[2];
    bool same = a.n == b.n && memcmp(a.chw, b.chw, sizeof a.chw) == 0 &&
                memcmp(a.x, b.x, (size_t)(a.n * per) * sizeof *a.x) == 0 &&
                memcmp(a.y, b.y, (size_t)a.n * sizeof *a.y) == 0;
    double ma[3], mb[3];
    same = same && read_attr(pa, group, "mean", ma, 3) == 3 && read_attr(pb, group, "mean", mb, 3) == 3 &&
           memcmp(ma, mb, sizeof ma) == 0;
    split_free(&a);
    split_free(&b);
    return same;
}

static void test_split_stratified(void) {
    /* classes of 10, 1, 2, 3, 5 files, interleaved */
    enum { N = 21 };
    int32_t labels[N];
    const int counts[5] = {10, 1, 2, 3, 5};
    int n = 0;
    for (int round = 0; n < N; round++)
        for (int c = 0; c < 5; c++)
            if (round < counts[c]) labels[n++] = c;
    uint8_t val[N], again[N], other[N];
    /* k = floor(F m + 0.5), at least 1 when m >= 2, at most m - 1 */
    const double fr[3] = {0.25, 0.01, 0.99};
    const int want[3][5] = {{3, 0, 1, 1, 1}, {1, 0, 1, 1, 1}, {9, 0, 1, 2, 4}};
    for (int f = 0; f < 3; f++) {
        int64_t nval = gr_split_stratified(labels, N, 5, fr[f], 7, val);
        int got[5] = {0}, total = 0;
        for (int i = 0; i < N; i++) got[labels[i]] += val[i], total += val[i];
        CHECK(nval == total);
        for (int c = 0; c < 5; c++) CHECK_MSG(got[c] == want[f][c], "F %g class %d: %d to val, expected %d", fr[f], c,
                                              got[c], want[f][c]);
    }
    /* a pure function of (labels, fraction, seed); another seed, another split */
    gr_split_stratified(labels, N, 5, 0.3, 1, val);
    gr_split_stratified(labels, N, 5, 0.3, 1, again);
    gr_split_stratified(labels, N, 5, 0.3, 2, other);
    CHECK(memcmp(val, again, N) == 0);
    CHECK(memcmp(val, other, N) != 0);
    /* a class's split depends on its own files' order only: grouped by class, the same */
    int32_t grouped[N];
    uint8_t gval[N];
    int pos[5] = {0, 10, 11, 13, 16}, seen[5] = {0};
    for (int c = 0, i = 0; c < 5; c++)
        for (int t = 0; t < counts[c]; t++) grouped[i++] = c;
    gr_split_stratified(grouped, N, 5, 0.3, 1, gval);
    for (int i = 0; i < N; i++) {
        const int c = labels[i];
        CHECK(val[i] == gval[pos[c] + seen[c]++]);
    }
    /* uniform: over 4000 seeds, each of 4 files of a class goes to /val about 1000 times */
    const int32_t four[4] = {0, 0, 0, 0};
    int hits[4] = {0};
    for (uint64_t seed = 0; seed < 4000; seed++) {
        uint8_t v[4];
        CHECK(gr_split_stratified(four, 4, 1, 0.25, seed, v) == 1);
        for (int i = 0; i < 4; i++) hits[i] += v[i];
    }
    for (int i = 0; i < 4; i++) CHECK_MSG(hits[i] > 850 && hits[i] < 1150, "file %d: %d of 4000", i, hits[i]);
}

/* A file made with HDF5 alone: a root attribute, /a with an attribute and a
 * dataset x, a soft link /lnk to /a/x. */
static void make_h5(const char *path) {
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hsize_t three = 3;
    const int v[3] = {5, 6, 7};
    hid_t sp = H5Screate_simple(1, &three, NULL);
    hid_t a = H5Acreate2(f, "note", H5T_STD_I32LE, sp, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(a, H5T_NATIVE_INT, v);
    H5Aclose(a);
    hid_t g = H5Gcreate2(f, "/a", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    a = H5Acreate2(g, "note_a", H5T_STD_I32LE, sp, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(a, H5T_NATIVE_INT, v);
    H5Aclose(a);
    hid_t d = H5Dcreate2(g, "x", H5T_STD_I32LE, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Dwrite(d, H5T_NATIVE_INT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v);
    H5Dclose(d);
    H5Gclose(g);
    H5Lcreate_soft("/a/x", f, "/lnk", H5P_DEFAULT, H5P_DEFAULT);
    H5Sclose(sp);
    H5Fclose(f);
}

/* Attribute `name` of obj (3 ints) or dataset obj's values: equal to 5 6 7. */
static bool h5_is_567(const char *path, const char *obj, const char *name) {
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    int v[3] = {0};
    bool ok = false;
    if (f >= 0 && name) {
        hid_t a = H5Aopen_by_name(f, obj, name, H5P_DEFAULT, H5P_DEFAULT);
        ok = a >= 0 && H5Aread(a, H5T_NATIVE_INT, v) >= 0;
        if (a >= 0) H5Aclose(a);
    } else if (f >= 0) {
        hid_t d = H5Dopen2(f, obj, H5P_DEFAULT);
        ok = d >= 0 && H5Dread(d, H5T_NATIVE_INT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) >= 0;
        if (d >= 0) H5Dclose(d);
    }
    if (f >= 0) H5Fclose(f);
    return ok && v[0] == 5 && v[1] == 6 && v[2] == 7;
}

static void test_existing_file(void) {
    const char *dir = tmp_path("grp"), *dir2 = tmp_path("grp_other"), *out = tmp_path("grp.h5"),
               *ref = tmp_path("grp_ref.h5");
    const char *const names[3] = {"a_cls", "b_cls", "c_cls"};
    const int counts[3] = {2, 3, 1};
    make_folder(dir, names, counts, 2);
    remove(out);
    gr_error err = {0};
    gr_imagefolder_report rep = {0};
    gr_imagefolder_config cfg = {.dir = dir, .size = 4};
    CHECK(gr_data_convert_imagefolder(&cfg, out, false, false, &rep, &err) == GR_OK);
    CHECK(gr_data_convert_imagefolder(&cfg, ref, true, false, &rep, &err) == GR_OK); /* /train alone */
    /* a group added: the file's /train kept as it was */
    cfg.group = "/val", cfg.size = 3;
    CHECK_MSG(gr_data_convert_imagefolder(&cfg, out, false, false, &rep, &err) == GR_OK, "%s", err.msg);
    CHECK(rep.nwarnings == 0);
    CHECK(same_split(out, ref, "/train"));
    /* the copy still raw, every chunk written: read with pread as the original */
    gr_dataset *ds = NULL;
    if (gr_dataset_open_cache(out, "/train", GR_CACHE_NONE, &ds, &err) == GR_OK) {
        CHECK(gr_dataset_reads_direct(ds));
        gr_dataset_close(ds);
    } else {
        CHECK_MSG(false, "%s", err.msg);
    }
    split_data d;
    if (read_split(out, "/val", &d)) {
        CHECK(d.n == 5 && d.chw[1] == 3);
        split_free(&d);
    }
    /* again: refused without --force, the file as it was */
    size_t nbytes;
    uint8_t *before = slurp(out, &nbytes);
    CHECK(gr_data_convert_imagefolder(&cfg, out, false, false, &rep, &err) == GR_ERR_USAGE);
    CHECK_STR_CONTAINS(err.msg, "convert_grp.h5: already has group /val; --force replaces it");
    CHECK(same_bytes(before, nbytes, out) && !tmp_exists(out));
    /* a conversion that fails: the file as it was, no OUT.tmp */
    write_bytes(join(dir, "b_cls/zz.jpg"), "garbage", 7);
    CHECK(gr_data_convert_imagefolder(&cfg, out, true, false, &rep, &err) == GR_ERR_DATA);
    CHECK_STR_CONTAINS(err.msg, "b_cls/zz.jpg: cannot decode");
    CHECK(same_bytes(before, nbytes, out) && !tmp_exists(out));
    remove(join(dir, "b_cls/zz.jpg"));
    free(before);
    /* --force: /val replaced, /train kept */
    cfg.size = 2;
    CHECK(gr_data_convert_imagefolder(&cfg, out, true, false, &rep, &err) == GR_OK);
    CHECK(same_split(out, ref, "/train"));
    if (read_split(out, "/val", &d)) {
        CHECK(d.n == 5 && d.chw[1] == 2);
        split_free(&d);
    }
    /* other classes: a warning naming both groups and the first difference */
    const char *const names2[3] = {"a_cls", "c_cls"};
    make_folder(dir2, names2, counts, 2);
    cfg.dir = dir2, cfg.group = "/other";
    CHECK(gr_data_convert_imagefolder(&cfg, out, false, false, &rep, &err) == GR_OK);
    CHECK_MSG(rep.nwarnings == 2, "%lld warnings", (long long)rep.nwarnings); /* /train and /val */
    if (rep.nwarnings == 2) {
        CHECK_STR_CONTAINS(rep.warnings[0], "the classes of /other (written now) and of /train (kept) differ: class 1 "
                                            "is 'c_cls' in the one, 'b_cls' in the other");
        CHECK_STR_CONTAINS(rep.warnings[1], "/val (kept)");
    }
    gr_imagefolder_report_free(&rep);
    /* the whole file ("/"): --force, as the other converters */
    cfg.group = "/";
    CHECK(gr_data_convert_imagefolder(&cfg, out, false, false, &rep, &err) == GR_ERR_USAGE);
    CHECK_STR_CONTAINS(err.msg, "already exists (pass --force to overwrite)");
    /* not an HDF5 file: refused whatever --force says, untouched */
    write_bytes(out, "notes", 5);
    cfg.group = "/val";
    CHECK(gr_data_convert_imagefolder(&cfg, out, true, false, &rep, &err) == GR_ERR_DATA);
    CHECK_STR_CONTAINS(err.msg, "convert_grp.h5: exists and is not an HDF5 file");
    CHECK(same_bytes((const uint8_t *)"notes", 5, out) && !tmp_exists(out));
    /* nested: /a/b into a file with /a/x, its attributes, a root attribute and a soft link */
    make_h5(out);
    cfg.group = "/a/b";
    CHECK_MSG(gr_data_convert_imagefolder(&cfg, out, false, false, &rep, &err) == GR_OK, "%s", err.msg);
    CHECK(h5_is_567(out, "/", "note") && h5_is_567(out, "/a", "note_a") && h5_is_567(out, "/a/x", NULL));
    CHECK(h5_is_567(out, "/lnk", NULL));
    if (read_split(out, "/a/b", &d)) {
        CHECK(d.n == 5);
        split_free(&d);
    }
    cfg.group = "/a/x/c"; /* under a dataset */
    CHECK(gr_data_convert_imagefolder(&cfg, out, false, false, &rep, &err) == GR_ERR_USAGE);
    CHECK_STR_CONTAINS(err.msg, "/a/x is not a group, so it cannot hold group /a/x/c");
    /* group names */
    const char *const bad[] = {"/a//b", "/a/", "/./a", "/a/.."};
    for (size_t i = 0; i < GR_ARRAY_LEN(bad); i++) {
        cfg.group = bad[i];
        CHECK(gr_data_convert_imagefolder(&cfg, out, false, false, &rep, &err) == GR_ERR_USAGE);
        CHECK_STR_CONTAINS(err.msg, "--group must be an absolute HDF5 path");
    }
    remove(out);
    remove(ref);
    rm_rf(dir);
    rm_rf(dir2);
}

static void test_val_fraction(void) {
    const char *dir = tmp_path("vf"), *out = tmp_path("vf.h5");
    const char *const names[3] = {"a", "b", "c"};
    const int counts[3] = {4, 8, 1};
    make_folder(dir, names, counts, 3);
    remove(out);
    gr_error err = {0};
    gr_imagefolder_report rep = {0};
    gr_imagefolder_config cfg = {.dir = dir, .size = 4, .val_fraction = 0.25, .seed = 3};
    CHECK_MSG(gr_data_convert_imagefolder(&cfg, out, false, false, &rep, &err) == GR_OK, "%s", err.msg);
    CHECK(rep.samples == 13 && rep.val_samples == 3);
    split_data tr, va;
    if (read_split(out, "/train", &tr) && read_split(out, "/val", &va)) {
        CHECK(tr.n == 10 && va.n == 3);
        int per[2][3] = {{0}}, seen[13] = {0};
        for (int64_t i = 0; i < tr.n; i++) per[0][tr.y[i]]++, seen[(int)tr.x[(i * 3 + 1) * 16] / 10]++;
        for (int64_t i = 0; i < va.n; i++) per[1][va.y[i]]++, seen[(int)va.x[(i * 3 + 1) * 16] / 10]++;
        CHECK(per[1][0] == 1 && per[1][1] == 2 && per[1][2] == 0);
        CHECK(per[0][0] == 3 && per[0][1] == 6 && per[0][2] == 1);
        for (int k = 0; k < 13; k++) CHECK_MSG(seen[k] == 1, "file %d seen %d times", k, seen[k]);
        /* mean / std over /train, written to both */
        double want_m[3], want_s[3], m[3], s[3], vm[3], vs[3];
        stats_of(&tr, want_m, want_s);
        CHECK(read_attr(out, "/train", "mean", m, 3) == 3 && read_attr(out, "/train", "std", s, 3) == 3);
        CHECK(read_attr(out, "/val", "mean", vm, 3) == 3 && read_attr(out, "/val", "std", vs, 3) == 3);
        for (int c = 0; c < 3; c++) {
            CHECK_CLOSE(m[c], want_m[c], 1e-9, 1e-9);
            CHECK_CLOSE(s[c], want_s[c] > 0 ? want_s[c] : 1, 1e-6, 1e-6);
            CHECK(vm[c] == m[c] && vs[c] == s[c]);
        }
        char cls[3][32];
        CHECK(read_classes(out, "/val", cls, 3) == 3 && strcmp(cls[2], "c") == 0);
        split_free(&tr);
        split_free(&va);
    }
    /* both groups there: --force for either */
    CHECK(gr_data_convert_imagefolder(&cfg, out, false, false, &rep, &err) == GR_ERR_USAGE);
    CHECK_STR_CONTAINS(err.msg, "already has groups /train and /val; --force replaces them");
    remove(out);
    /* usage */
    cfg.group = "/x";
    CHECK_FAILED(gr_data_convert_imagefolder(&cfg, out, false, false, &rep, &err), GR_ERR_USAGE,
                 "--group does not apply with --val-fraction", out);
    cfg.group = NULL, cfg.val_fraction = 1;
    CHECK_FAILED(gr_data_convert_imagefolder(&cfg, out, false, false, &rep, &err), GR_ERR_USAGE,
                 "--val-fraction must be in (0, 1), got 1", out);
    /* every class of one image: /val would be empty */
    const int ones[3] = {1, 1, 1};
    make_folder(dir, names, ones, 3);
    cfg.val_fraction = 0.5;
    CHECK_FAILED(gr_data_convert_imagefolder(&cfg, out, false, false, &rep, &err), GR_ERR_DATA,
                 "convert_vf: --val-fraction 0.5 leaves /val empty", out);
    gr_imagefolder_report_free(&rep);
    rm_rf(dir);
}

int main(void) {
    mkdir(GR_TEST_TMP, 0755);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    test_split_stratified();
    test_existing_file();
    test_val_fraction();
    return gr_test_report();
}
