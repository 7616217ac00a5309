/* convert_fixture.h — what the converter tests (test_convert_*.c) share:
 * paths under GR_TEST_TMP, small file helpers, CHECK_FAILED (a failed
 * conversion's status and message, and nothing left behind), and readers of a
 * converted split: its values, mean/std attributes, class names, chunking.
 * Each test executable includes it once. */
#ifndef CONVERT_FIXTURE_H
#define CONVERT_FIXTURE_H

#include "../dataio/dataio.h"
#include "../dataio/convert.h"
#include "tmp_left.h"
#include "gr_test.h"

#include <dirent.h>
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* dir/name, in one of 16 rotating buffers. */
static inline const char *join(const char *dir, const char *name) {
    static char buf[16][1024];
    static int k;
    char *p = buf[k++ % 16];
    int n = snprintf(p, 1024, "%s/%s", dir, name);
    GR_ASSERT(n > 0 && n < 1024);
    return p;
}

/* GR_TEST_TMP/convert_name, in a slot of its own (never reused: the tests
 * keep these for their whole run). */
static inline const char *tmp_path(const char *name) {
    static char slots[32][512];
    static int used;
    GR_ASSERT(used < 32);
    int n = snprintf(slots[used], sizeof slots[used], "%s/convert_%s", GR_TEST_TMP, name);
    GR_ASSERT(n > 0 && n < 512);
    return slots[used++];
}

static inline bool file_exists(const char *p) {
    struct stat sb;
    return stat(p, &sb) == 0;
}

/* Whether a temporary of out is left in its directory. */
static inline bool tmp_exists(const char *out) { return gr_tmp_left(out); }

static inline void rm_rf(const char *path) {
    struct stat sb;
    if (lstat(path, &sb) != 0) return;
    if (S_ISDIR(sb.st_mode)) {
        DIR *d = opendir(path);
        struct dirent *e;
        while (d && (e = readdir(d))) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
            char sub[1024];
            int n = snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
            GR_ASSERT(n > 0 && n < (int)sizeof sub);
            rm_rf(sub);
        }
        if (d) closedir(d);
        rmdir(path);
    } else {
        remove(path);
    }
}

static inline void write_bytes(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    GR_ASSERT(f);
    GR_ASSERT(fwrite(data, 1, n, f) == n);
    fclose(f);
}

static inline size_t read_bytes(const char *path, uint8_t *buf, size_t cap) {
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

static inline bool read_split(const char *path, const char *group, split_data *d) {
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

static inline void split_free(split_data *d) {
    free(d->x);
    free(d->y);
}

static inline int read_attr(const char *path, const char *group, const char *name, double *v, int max) {
    gr_error err = {0};
    gr_dataset *ds = NULL;
    if (gr_dataset_open(path, group, &ds, &err) != GR_OK) return -2;
    int n = gr_dataset_attr_floats(ds, name, v, max);
    gr_dataset_close(ds);
    return n;
}

/* The `classes` attribute, up to max names, each into out[i]; the count. */
static inline int read_classes(const char *path, const char *group, char out[][32], int max) {
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
static inline int64_t read_chunk(const char *path, const char *group, int *nfilters, size_t *label_size) {
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
static inline void stats_of(const split_data *d, double *mean, double *std) {
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

#endif
