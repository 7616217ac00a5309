/* test_convert.c — unit tests for the `gpurun data` converters of
 * dataio/convert.h other than IDX (test_dataio.c has those): CIFAR-10 from
 * hand-made batch files, synthetic (shapes, chunking, determinism across
 * seeds and thread counts, learnability), imagefolder from PNG and JPEG files
 * written here with libpng / libjpeg (decoding variants, resize and crop
 * arithmetic, corrupt files), and every error path with its exit code, a
 * message naming the file, and nothing left behind. */
#include "../dataio/dataio.h"
#include "../dataio/convert.h"
#include "../dataio/convert_out.h" /* gr_conv_block_samples */
#include "gr_test.h"

#include <dirent.h>
#include <errno.h>
#include <hdf5.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jpeglib.h>
#include <png.h>

/* ---------------------------------------------------------------- helpers */
/* dir/name, in one of 16 rotating buffers. */
static const char *join(const char *dir, const char *name) {
    static char buf[16][1024];
    static int k;
    char *p = buf[k++ % 16];
    int n = snprintf(p, 1024, "%s/%s", dir, name);
    GR_ASSERT(n > 0 && n < 1024);
    return p;
}

/* GR_TEST_TMP/convert_name, in a slot of its own (never reused: the tests
 * keep these for their whole run). */
static const char *tmp_path(const char *name) {
    static char slots[32][512];
    static int used;
    GR_ASSERT(used < 32);
    int n = snprintf(slots[used], sizeof slots[used], "%s/convert_%s", GR_TEST_TMP, name);
    GR_ASSERT(n > 0 && n < 512);
    return slots[used++];
}

static bool file_exists(const char *p) {
    struct stat sb;
    return stat(p, &sb) == 0;
}

static bool tmp_exists(const char *out) {
    char t[600];
    snprintf(t, sizeof t, "%s.tmp", out);
    return file_exists(t);
}

static void rm_rf(const char *path) {
    struct stat sb;
    if (lstat(path, &sb) != 0) return;
    if (S_ISDIR(sb.st_mode)) {
        DIR *d = opendir(path);
        struct dirent *e;
        while (d && (e = readdir(d))) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
            char sub[1024];
            snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
            rm_rf(sub);
        }
        if (d) closedir(d);
        rmdir(path);
    } else {
        remove(path);
    }
}

static void write_bytes(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    GR_ASSERT(f);
    GR_ASSERT(fwrite(data, 1, n, f) == n);
    fclose(f);
}

static size_t read_bytes(const char *path, uint8_t *buf, size_t cap) {
    FILE *f = fopen(path, "rb");
    GR_ASSERT(f);
    size_t n = fread(buf, 1, cap, f);
    fclose(f);
    return n;
}

/* Expects a failed conversion: status, message naming `needle`, and neither
 * OUT nor OUT.tmp left behind. */
#define CHECK_FAILED(call, status, needle, out) do { \
    gr_status s_ = (call); \
    CHECK_MSG(s_ == (status), "status %d, expected %d (%s)", (int)s_, (int)(status), err.msg); \
    CHECK_STR_CONTAINS(err.msg, needle); \
    CHECK_MSG(!file_exists(out) && !tmp_exists(out), "%s or its .tmp left behind", out); \
} while (0)

/* All images of a split as raw values (mean 0, std 1), and its labels. */
typedef struct split_data {
    int64_t n, chw[3];
    float *x;
    int32_t *y;
} split_data;

static bool read_split(const char *path, const char *group, split_data *d) {
    memset(d, 0, sizeof *d);
    gr_error err = {0};
    gr_dataset *ds = NULL;
    if (gr_dataset_open(path, group, &ds, &err) != GR_OK) {
        fprintf(stderr, "read_split: %s\n", err.msg);
        return false;
    }
    d->n = gr_dataset_len(ds);
    gr_dataset_sample_shape(ds, d->chw);
    const int64_t per = d->chw[0] * d->chw[1] * d->chw[2];
    int64_t *idx = malloc((size_t)d->n * sizeof *idx);
    for (int64_t i = 0; i < d->n; i++) idx[i] = i;
    double mean[64], std[64];
    for (int c = 0; c < 64; c++) mean[c] = 0, std[c] = 1;
    d->x = malloc((size_t)(d->n * per) * sizeof *d->x);
    d->y = malloc((size_t)d->n * sizeof *d->y);
    bool ok = d->chw[0] <= 64 && gr_dataset_read(ds, idx, d->n, mean, std, d->x, d->y, &err) == GR_OK;
    if (!ok) fprintf(stderr, "read_split: %s\n", err.msg);
    free(idx);
    gr_dataset_close(ds);
    return ok;
}

static void split_free(split_data *d) {
    free(d->x);
    free(d->y);
}

static int read_attr(const char *path, const char *group, const char *name, double *v, int max) {
    gr_error err = {0};
    gr_dataset *ds = NULL;
    if (gr_dataset_open(path, group, &ds, &err) != GR_OK) return -2;
    int n = gr_dataset_attr_floats(ds, name, v, max);
    gr_dataset_close(ds);
    return n;
}

/* The `classes` attribute, up to max names, each into out[i]; the count. */
static int read_classes(const char *path, const char *group, char out[][32], int max) {
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    hid_t a = H5Aopen_by_name(f, group, "classes", H5P_DEFAULT, H5P_DEFAULT);
    int n = -1;
    if (a >= 0) {
        hid_t sp = H5Aget_space(a), t = H5Tcopy(H5T_C_S1);
        H5Tset_size(t, H5T_VARIABLE);
        H5Tset_cset(t, H5T_CSET_UTF8);
        n = (int)H5Sget_simple_extent_npoints(sp);
        char **v = calloc((size_t)n, sizeof *v);
        if (H5Aread(a, t, v) >= 0)
            for (int i = 0; i < n; i++) {
                if (i < max) snprintf(out[i], 32, "%s", v[i] ? v[i] : "");
                H5free_memory(v[i]);
            }
        free(v);
        H5Tclose(t);
        H5Sclose(sp);
        H5Aclose(a);
    }
    H5Fclose(f);
    return n;
}

/* Chunk samples of group/images (0 when not chunked), its filter count and
 * the size of a label in the file. */
static int64_t read_chunk(const char *path, const char *group, int *nfilters, size_t *label_size) {
    char name[128];
    snprintf(name, sizeof name, "%s/images", group);
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    hid_t d = H5Dopen2(f, name, H5P_DEFAULT), p = H5Dget_create_plist(d);
    hsize_t ch[4] = {0};
    int64_t chunk = H5Pget_layout(p) == H5D_CHUNKED && H5Pget_chunk(p, 4, ch) == 4 ? (int64_t)ch[0] : 0;
    *nfilters = H5Pget_nfilters(p);
    H5Pclose(p);
    H5Dclose(d);
    snprintf(name, sizeof name, "%s/labels", group);
    d = H5Dopen2(f, name, H5P_DEFAULT);
    hid_t t = H5Dget_type(d);
    *label_size = H5Tget_size(t);
    H5Tclose(t);
    H5Dclose(d);
    H5Fclose(f);
    return chunk;
}

/* Per-channel mean / population std of a split's raw values. */
static void stats_of(const split_data *d, double *mean, double *std) {
    const int64_t hw = d->chw[1] * d->chw[2];
    for (int64_t c = 0; c < d->chw[0]; c++) {
        double s = 0, s2 = 0;
        for (int64_t i = 0; i < d->n; i++)
            for (int64_t j = 0; j < hw; j++) {
                double v = d->x[(i * d->chw[0] + c) * hw + j];
                s += v, s2 += v * v;
            }
        const double cnt = (double)(d->n * hw);
        mean[c] = s / cnt;
        std[c] = sqrt(s2 / cnt - mean[c] * mean[c]);
    }
}

/* ---------------------------------------------------------------- CIFAR-10 */
#define CIF_R 4 /* records per fake batch file */

static uint8_t cif_pixel(int file, int r, int c, int y, int x) {
    return (uint8_t)(file * 31 + r * 13 + c * 5 + y * 3 + x * 7);
}

static int cif_label(int file, int r) {
    return (file * 3 + r * 7) % 10;
}

static const char *const cif_names[6] = {"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin",
                                         "data_batch_4.bin", "data_batch_5.bin", "test_batch.bin"};

/* File k of a fake CIFAR-10 directory with `records` records. */
static void cif_write(const char *dir, int k, int records) {
    size_t n = (size_t)records * 3073;
    uint8_t *b = malloc(n);
    for (int r = 0; r < records; r++) {
        uint8_t *rec = b + (size_t)r * 3073;
        rec[0] = (uint8_t)cif_label(k, r);
        for (int c = 0; c < 3; c++)
            for (int y = 0; y < 32; y++)
                for (int x = 0; x < 32; x++) rec[1 + c * 1024 + y * 32 + x] = cif_pixel(k, r, c, y, x);
    }
    write_bytes(join(dir, cif_names[k]), b, n);
    free(b);
}

static void cif_make(const char *dir) {
    rm_rf(dir);
    mkdir(dir, 0755);
    for (int k = 0; k < 6; k++) cif_write(dir, k, CIF_R);
}

static void test_cifar10(void) {
    const char *dir = tmp_path("cifar"), *out = tmp_path("cifar.h5");
    gr_error err = {0};
    cif_make(dir);
    remove(out);
    CHECK(gr_data_convert_cifar10(dir, CIF_R, out, false, false, &err) == GR_OK);
    CHECK(file_exists(out) && !tmp_exists(out));
    split_data tr, te;
    if (read_split(out, "/train", &tr) && read_split(out, "/test", &te)) {
        CHECK(tr.n == 5 * CIF_R && te.n == CIF_R);
        CHECK(tr.chw[0] == 3 && tr.chw[1] == 32 && tr.chw[2] == 32);
        int bad = 0, badl = 0;
        for (int k = 0; k < 6; k++)
            for (int r = 0; r < CIF_R; r++) {
                const split_data *d = k < 5 ? &tr : &te;
                const int64_t i = k < 5 ? k * CIF_R + r : r;
                badl += d->y[i] != cif_label(k, r);
                for (int c = 0; c < 3; c++)
                    for (int y = 0; y < 32; y++)
                        for (int x = 0; x < 32; x++)
                            bad += d->x[((i * 3 + c) * 32 + y) * 32 + x] != (float)cif_pixel(k, r, c, y, x);
            }
        CHECK_MSG(bad == 0 && badl == 0, "%d pixels, %d labels differ", bad, badl);
        double want_m[3], want_s[3], m[4], s[4];
        stats_of(&tr, want_m, want_s);
        CHECK(read_attr(out, "/train", "mean", m, 4) == 3 && read_attr(out, "/train", "std", s, 4) == 3);
        for (int c = 0; c < 3; c++) CHECK_CLOSE(m[c], want_m[c], 1e-9, 1e-9);
        for (int c = 0; c < 3; c++) CHECK_CLOSE(s[c], want_s[c], 1e-6, 1e-6);
        /* the test split carries the train statistics */
        CHECK(read_attr(out, "/test", "mean", m, 4) == 3);
        CHECK_CLOSE(m[2], want_m[2], 1e-9, 1e-9);
    }
    split_free(&tr);
    split_free(&te);
    char cls[12][32] = {{0}};
    CHECK(read_classes(out, "/train", cls, 12) == 10);
    CHECK(strcmp(cls[0], "airplane") == 0 && strcmp(cls[9], "truck") == 0);
    int nf;
    size_t lsize;
    CHECK(read_chunk(out, "/train", &nf, &lsize) == 5 * CIF_R && nf == 0 && lsize == 1);

    /* class names from batches.meta.txt (CRLF, trailing blank lines) */
    const char meta[] = "c0\r\nc1\nc2\nc3\nc4\nc5\nc6\nc7\nc8\nlast one \n\n\n";
    write_bytes(join(dir, "batches.meta.txt"), meta, sizeof meta - 1);
    CHECK(gr_data_convert_cifar10(dir, CIF_R, out, false, false, &err) == GR_ERR_USAGE);
    CHECK_STR_CONTAINS(err.msg, "already exists (pass --force to overwrite)");
    CHECK(gr_data_convert_cifar10(dir, CIF_R, out, true, false, &err) == GR_OK);
    CHECK(read_classes(out, "/test", cls, 12) == 10);
    CHECK(strcmp(cls[0], "c0") == 0 && strcmp(cls[9], "last one") == 0);
    remove(out);

    /* bad inputs: exit 3 naming the file, nothing written */
    write_bytes(join(dir, "batches.meta.txt"), "a\nb\nc\n", 6);
    CHECK_FAILED(gr_data_convert_cifar10(dir, CIF_R, out, false, false, &err), GR_ERR_DATA,
                 "batches.meta.txt: 3 class names; expected 10", out);
    remove(join(dir, "batches.meta.txt"));
    CHECK_FAILED(gr_data_convert_cifar10(dir, GR_CIFAR10_BATCH_RECORDS, out, false, false, &err), GR_ERR_DATA,
                 "data_batch_1.bin: holds 4 records; expected 10000", out);
    remove(join(dir, "data_batch_3.bin"));
    CHECK_FAILED(gr_data_convert_cifar10(dir, CIF_R, out, false, false, &err), GR_ERR_DATA,
                 "data_batch_3.bin: no such file", out);
    cif_write(dir, 2, CIF_R + 1);
    CHECK_FAILED(gr_data_convert_cifar10(dir, CIF_R, out, false, false, &err), GR_ERR_DATA,
                 "data_batch_3.bin: holds 5 records; expected 4", out);
    cif_write(dir, 2, CIF_R);
    {   /* a byte short */
        uint8_t *b = malloc(CIF_R * 3073);
        size_t n = read_bytes(join(dir, "test_batch.bin"), b, CIF_R * 3073);
        write_bytes(join(dir, "test_batch.bin"), b, n - 1);
        CHECK_FAILED(gr_data_convert_cifar10(dir, CIF_R, out, false, false, &err), GR_ERR_DATA,
                     "test_batch.bin: size 12291 is not a multiple of 3073 bytes", out);
        b[2 * 3073] = 10; /* label of record 2 */
        write_bytes(join(dir, "test_batch.bin"), b, n);
        CHECK_FAILED(gr_data_convert_cifar10(dir, CIF_R, out, false, false, &err), GR_ERR_DATA,
                     "test_batch.bin: record 2: label 10 is outside [0, 10)", out);
        free(b);
    }
    write_bytes(join(dir, "data_batch_5.bin"), "", 0);
    CHECK_FAILED(gr_data_convert_cifar10(dir, CIF_R, out, false, false, &err), GR_ERR_DATA,
                 "data_batch_5.bin: size 0 is not a multiple", out);
    CHECK_FAILED(gr_data_convert_cifar10(tmp_path("no_such_dir"), CIF_R, out, false, false, &err), GR_ERR_DATA,
                 "convert_no_such_dir: no such directory", out);
    rm_rf(dir);
}

/* ---------------------------------------------------------------- synthetic */
static void test_synthetic(void) {
    const char *out = tmp_path("syn.h5"), *out2 = tmp_path("syn2.h5"), *out3 = tmp_path("syn3.h5");
    gr_error err = {0};
    remove(out), remove(out2), remove(out3);
    gr_synthetic_config cfg = {.n = 600, .test = -1, .c = 3, .h = 8, .w = 8, .classes = 10, .seed = 5};
    CHECK(gr_data_convert_synthetic(&cfg, out, false, false, &err) == GR_OK);
    CHECK(file_exists(out) && !tmp_exists(out));
    split_data tr, te;
    bool ok = read_split(out, "/train", &tr) & read_split(out, "/test", &te);
    CHECK(ok);
    if (ok) {
        CHECK(tr.n == 600 && te.n == 60); /* default test = ceil(n / 10) */
        CHECK(tr.chw[0] == 3 && tr.chw[1] == 8 && tr.chw[2] == 8);
        int seen[10] = {0}, out_of_range = 0;
        for (int64_t i = 0; i < tr.n; i++) {
            if (tr.y[i] < 0 || tr.y[i] >= 10) out_of_range++;
            else seen[tr.y[i]]++;
        }
        CHECK(out_of_range == 0);
        for (int k = 0; k < 10; k++) CHECK_MSG(seen[k] >= 30, "class %d: %d samples of 600", k, seen[k]);
        /* learnable: nearest class mean (fit on train) on the test split */
        enum { D = 192 };
        static double cm[10][D];
        memset(cm, 0, sizeof cm);
        for (int64_t i = 0; i < tr.n; i++)
            for (int j = 0; j < D; j++) cm[tr.y[i]][j] += tr.x[i * D + j] / seen[tr.y[i]];
        int right = 0;
        for (int64_t i = 0; i < te.n; i++) {
            int best = 0;
            double bd = 1e300;
            for (int k = 0; k < 10; k++) {
                double dist = 0;
                for (int j = 0; j < D; j++) dist += (te.x[i * D + j] - cm[k][j]) * (te.x[i * D + j] - cm[k][j]);
                if (dist < bd) bd = dist, best = k;
            }
            right += best == te.y[i];
        }
        CHECK_MSG(right > 0.9 * (double)te.n, "nearest class mean: %d of %lld right", right, (long long)te.n);
        /* not trivially separable by a constant: pixels vary within a class */
        double lo = 255, hi = 0;
        for (int j = 0; j < D; j++) lo = fmin(lo, tr.x[j]), hi = fmax(hi, tr.x[j]);
        CHECK(hi - lo > 20);
        double want_m[3], want_s[3], m[3], s[3];
        stats_of(&tr, want_m, want_s);
        CHECK(read_attr(out, "/train", "mean", m, 3) == 3 && read_attr(out, "/train", "std", s, 3) == 3);
        for (int c = 0; c < 3; c++) CHECK_CLOSE(m[c], want_m[c], 1e-9, 1e-9);
        for (int c = 0; c < 3; c++) CHECK_CLOSE(s[c], want_s[c], 1e-6, 1e-6);
    }
    int nf;
    size_t lsize;
    CHECK(read_chunk(out, "/train", &nf, &lsize) == 600 && nf == 0 && lsize == 1); /* 600 * 192 B < 1 MiB */

    /* same seed, one thread, another n: the same test split and train prefix */
    const int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    cfg.n = 300;
    cfg.test = 60;
    CHECK(gr_data_convert_synthetic(&cfg, out2, false, false, &err) == GR_OK);
    omp_set_num_threads(threads);
    split_data tr2, te2;
    if (ok && read_split(out2, "/train", &tr2) && read_split(out2, "/test", &te2)) {
        CHECK(tr2.n == 300 && te2.n == 60);
        CHECK(memcmp(te2.x, te.x, 60 * 192 * sizeof(float)) == 0 && memcmp(te2.y, te.y, 60 * sizeof(int32_t)) == 0);
        CHECK(memcmp(tr2.x, tr.x, 300 * 192 * sizeof(float)) == 0 && memcmp(tr2.y, tr.y, 300 * sizeof(int32_t)) == 0);
        split_free(&tr2);
        split_free(&te2);
    }
    /* another seed: other data */
    cfg.seed = 6;
    CHECK(gr_data_convert_synthetic(&cfg, out3, false, false, &err) == GR_OK);
    if (ok && read_split(out3, "/train", &tr2)) {
        int same = 0;
        for (int64_t i = 0; i < 300 * 192; i++) same += tr2.x[i] == tr.x[i];
        CHECK_MSG(same < 300 * 192 / 4, "%d of %d values equal across seeds", same, 300 * 192);
        split_free(&tr2);
    }
    split_free(&tr);
    split_free(&te);
    CHECK(gr_data_convert_synthetic(&cfg, out3, false, false, &err) == GR_ERR_USAGE);
    CHECK_STR_CONTAINS(err.msg, "already exists (pass --force to overwrite)");

    /* big samples: one per chunk; > 256 classes: uint16 labels */
    gr_synthetic_config big = {.n = 5, .test = 2, .c = 1, .h = 256, .w = 256, .classes = 300, .seed = 1};
    CHECK(gr_data_convert_synthetic(&big, out3, true, false, &err) == GR_OK);
    CHECK(read_chunk(out3, "/train", &nf, &lsize) == 1 && lsize == 2);
    {
        gr_dataset *ds = NULL;
        CHECK(gr_dataset_open(out3, "/test", &ds, &err) == GR_OK);
        if (ds) {
            CHECK(gr_dataset_len(ds) == 2 && gr_dataset_check_labels(ds, 300, &err) == GR_OK);
            gr_dataset_close(ds);
        }
    }
    remove(out), remove(out2), remove(out3);

    /* usage errors (exit 2), nothing written */
    const gr_synthetic_config good = {.n = 10, .test = -1, .c = 1, .h = 2, .w = 2, .classes = 2};
    gr_synthetic_config b;
    b = good, b.n = 0;
    CHECK_FAILED(gr_data_convert_synthetic(&b, out, false, false, &err), GR_ERR_USAGE, "--n must be in [1, ", out);
    b = good, b.test = 0;
    CHECK_FAILED(gr_data_convert_synthetic(&b, out, false, false, &err), GR_ERR_USAGE, "--test must be in", out);
    b = good, b.h = 0;
    CHECK_FAILED(gr_data_convert_synthetic(&b, out, false, false, &err), GR_ERR_USAGE,
                 "--shape 1,0,2: each of C,H,W must be in [1, 65536]", out);
    b = good, b.w = 65537;
    CHECK_FAILED(gr_data_convert_synthetic(&b, out, false, false, &err), GR_ERR_USAGE, "--shape 1,2,65537", out);
    b = good, b.c = 65536, b.h = 65536, b.w = 1;
    CHECK_FAILED(gr_data_convert_synthetic(&b, out, false, false, &err), GR_ERR_USAGE, "more than 1 GiB", out);
    b = good, b.classes = 1;
    CHECK_FAILED(gr_data_convert_synthetic(&b, out, false, false, &err), GR_ERR_USAGE, "--classes must be in [2, 65536]",
                 out);
    b = good, b.classes = 65537;
    CHECK_FAILED(gr_data_convert_synthetic(&b, out, false, false, &err), GR_ERR_USAGE, "got 65537", out);
    CHECK(gr_data_convert_synthetic(&good, tmp_path("no_dir/x.h5"), false, false, &err) == GR_ERR_DATA);
    CHECK_STR_CONTAINS(err.msg, "x.h5.tmp: cannot create (HDF5: ");
}

/* ---------------------------------------------------------------- imagefolder */
typedef uint8_t (*pixel_fn)(int x, int y, int c); /* c: 0..3 (3 = alpha / gray) */

/* An 8-bit RGB / RGBA / gray / palette or a 16-bit RGB PNG. */
static void write_png(const char *path, int w, int h, int color, int depth, pixel_fn px) {
    FILE *f = fopen(path, "wb");
    GR_ASSERT(f);
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png_create_info_struct(png);
    png_init_io(png, f);
    png_set_IHDR(png, info, (png_uint_32)w, (png_uint_32)h, depth, color, PNG_INTERLACE_NONE,
                 PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    if (color == PNG_COLOR_TYPE_PALETTE) {
        png_color pal[2] = {{px(0, 0, 0), px(0, 0, 1), px(0, 0, 2)}, {0, 0, 0}};
        png_set_PLTE(png, info, pal, 2);
    }
    png_write_info(png, info);
    const int ch = color == PNG_COLOR_TYPE_RGB ? 3 : color == PNG_COLOR_TYPE_RGBA ? 4 : 1;
    const int bps = depth / 8;
    uint8_t *row = malloc((size_t)(w * ch * bps));
    for (int y = 0; y < h; y++) {
        for (int x = 0; x < w; x++)
            for (int c = 0; c < ch; c++) {
                uint8_t v = color == PNG_COLOR_TYPE_PALETTE ? 0 : px(x, y, color == PNG_COLOR_TYPE_GRAY ? 3 : c);
                for (int b = 0; b < bps; b++) row[(x * ch + c) * bps + b] = b == 0 ? v : (uint8_t)(255 - v);
            }
        png_write_row(png, row);
    }
    png_write_end(png, NULL);
    png_destroy_write_struct(&png, &info);
    free(row);
    fclose(f);
}

static void write_jpeg(const char *path, int w, int h, int components, pixel_fn px) {
    FILE *f = fopen(path, "wb");
    GR_ASSERT(f);
    struct jpeg_compress_struct ci;
    struct jpeg_error_mgr jerr;
    ci.err = jpeg_std_error(&jerr);
    jpeg_create_compress(&ci);
    jpeg_stdio_dest(&ci, f);
    ci.image_width = (JDIMENSION)w;
    ci.image_height = (JDIMENSION)h;
    ci.input_components = components;
    ci.in_color_space = components == 3 ? JCS_RGB : JCS_GRAYSCALE;
    jpeg_set_defaults(&ci);
    jpeg_set_quality(&ci, 98, TRUE);
    jpeg_start_compress(&ci, TRUE);
    uint8_t *row = malloc((size_t)(w * components));
    while (ci.next_scanline < ci.image_height) {
        for (int x = 0; x < w; x++)
            for (int c = 0; c < components; c++)
                row[x * components + c] = px(x, (int)ci.next_scanline, components == 3 ? c : 3);
        JSAMPROW r = row;
        jpeg_write_scanlines(&ci, &r, 1);
    }
    jpeg_finish_compress(&ci);
    jpeg_destroy_compress(&ci);
    free(row);
    fclose(f);
}

/* A solid 4-component JPEG: every pixel stores cmyk[0..3]. mode 0: CMYK with
 * libjpeg's default Adobe marker (which, as Photoshop's files, means the
 * values are stored inverted); 1: CMYK without an Adobe marker (plain CMYK);
 * 2: YCCK (always with an Adobe marker). */
static void write_jpeg_cmyk(const char *path, int w, int h, const uint8_t cmyk[4], int mode) {
    FILE *f = fopen(path, "wb");
    GR_ASSERT(f);
    struct jpeg_compress_struct ci;
    struct jpeg_error_mgr jerr;
    ci.err = jpeg_std_error(&jerr);
    jpeg_create_compress(&ci);
    jpeg_stdio_dest(&ci, f);
    ci.image_width = (JDIMENSION)w;
    ci.image_height = (JDIMENSION)h;
    ci.input_components = 4;
    ci.in_color_space = JCS_CMYK;
    jpeg_set_defaults(&ci);
    if (mode == 2) jpeg_set_colorspace(&ci, JCS_YCCK);
    if (mode == 1) ci.write_Adobe_marker = FALSE;
    jpeg_set_quality(&ci, 98, TRUE);
    jpeg_start_compress(&ci, TRUE);
    uint8_t *row = malloc((size_t)(w * 4));
    for (int x = 0; x < w; x++) memcpy(row + 4 * x, cmyk, 4);
    while (ci.next_scanline < ci.image_height) {
        JSAMPROW r = row;
        jpeg_write_scanlines(&ci, &r, 1);
    }
    jpeg_finish_compress(&ci);
    jpeg_destroy_compress(&ci);
    free(row);
    fclose(f);
}

/* Rewrites the baseline SOF of the JPEG in buf[0, n) to claim w x h. */
static void jpeg_claim_size(uint8_t *buf, size_t n, int w, int h) {
    for (size_t i = 0; i + 9 < n; i++)
        if (buf[i] == 0xFF && buf[i + 1] == 0xC0) {
            buf[i + 5] = (uint8_t)(h >> 8), buf[i + 6] = (uint8_t)h;
            buf[i + 7] = (uint8_t)(w >> 8), buf[i + 8] = (uint8_t)w;
            return;
        }
    GR_ASSERT(!"no SOF0 marker");
}

static uint8_t px_grad64(int x, int y, int c) { /* 64x32: R = 4x, G = 255 - 4x, B = 8y */
    return (uint8_t)(c == 0 ? 4 * x : c == 1 ? 255 - 4 * x : 8 * y);
}
static uint8_t px_grad8(int x, int y, int c) { /* 8x8: R = 16x + 8, G = B = 16y + 8 */
    return (uint8_t)(c == 0 ? 16 * x + 8 : 16 * y + 8);
}
static uint8_t px_solid(int x, int y, int c) {
    (void)x, (void)y;
    static const uint8_t v[4] = {200, 30, 90, 77};
    return v[c];
}
static uint8_t px_rgba(int x, int y, int c) {
    (void)x, (void)y;
    static const uint8_t v[4] = {10, 20, 30, 0}; /* fully transparent: alpha is dropped, not composited */
    return v[c];
}
static uint8_t px_pal(int x, int y, int c) {
    (void)x, (void)y;
    return (uint8_t)(c + 1);
}
static uint8_t px_busy(int x, int y, int c) { /* detail everywhere: a JPEG mostly of scan data */
    return (uint8_t)(x * 37 + y * 91 + c * 53 + x * y * 7);
}
static uint8_t px_deep(int x, int y, int c) { /* 16-bit samples 0xAB54 (the low byte is 255 - high) */
    (void)x, (void)y, (void)c;
    return 0xAB;
}

/* Max |got - want(c, y, x)| over sample i of d ([3,S,S]) for y,x in [lo, hi). */
static double max_err(const split_data *d, int64_t i, int lo, int hi, double (*want)(int c, int y, int x)) {
    const int64_t S = d->chw[1];
    double e = 0;
    for (int c = 0; c < 3; c++)
        for (int y = lo; y < hi; y++)
            for (int x = lo; x < hi; x++) e = fmax(e, fabs(d->x[((i * 3 + c) * S + y) * S + x] - want(c, y, x)));
    return e;
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
static double want_solid(int c, int y, int x) {
    (void)y, (void)x;
    return px_solid(0, 0, c);
}
static double want_77(int c, int y, int x) {
    (void)c, (void)y, (void)x;
    return 77;
}
static double want_rgba(int c, int y, int x) {
    (void)y, (void)x;
    return px_rgba(0, 0, c);
}
static double want_pal(int c, int y, int x) {
    (void)y, (void)x;
    return c + 1;
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

    /* short side 16 cropped to 8, into another group; --force */
    cfg.size = 8, cfg.short_side = 16, cfg.group = "/val";
    CHECK(gr_data_convert_imagefolder(&cfg, out, false, false, &rep, &err) == GR_ERR_USAGE);
    CHECK(gr_data_convert_imagefolder(&cfg, out, true, false, &rep, &err) == GR_OK);
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
    rm_rf(bdir);
    rm_rf(dir);
}

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
    test_cifar10();
    test_synthetic();
    test_imagefolder();
    test_imagefolder_sources();
    test_imagefolder_skip_blocks();
    return gr_test_report();
}
