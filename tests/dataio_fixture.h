/* dataio_fixture.h — what the dataio/ tests (test_dataio*.c) share: paths
 * under GR_TEST_TMP (named dataio_*, which the expected messages quote), HDF5
 * files written to a spec with the HDF5 C API (h5spec: group, dtypes incl. a
 * hand-built float16, layout attribute, chunks, unwritten holes, labels,
 * mean/std), opening one for its status only, truncated copies, and a loader
 * configuration. Each test executable includes it once. */
#ifndef DATAIO_FIXTURE_H
#define DATAIO_FIXTURE_H

#include "../dataio/dataio.h"
#include "gr_test.h"

#include <hdf5.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static inline const char *tmp_path(const char *name) {
    static char buf[8][512];
    static int k;
    char *p = buf[k++ % 8];
    snprintf(p, 512, "%s/dataio_%s", GR_TEST_TMP, name);
    return p;
}

static inline bool file_exists(const char *p) {
    struct stat sb;
    return stat(p, &sb) == 0;
}

/* IEEE binary16, little-endian, built by hand (HDF5 1.10 has none). */
static inline hid_t f16_type(H5T_order_t order) {
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

static inline void write_h5(const char *path, const h5spec *s) {
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
static inline h5spec simple_spec(const uint8_t *img, const int64_t *lab, hsize_t n) {
    h5spec s = {.group = "/train", .img_ftype = H5T_STD_U8LE, .img_mtype = H5T_NATIVE_UINT8, .rank = 4,
                .dims = {n, 1, 2, 3}, .img = img, .lab_ftype = H5T_STD_I32LE, .nlab = n, .labels = lab};
    return s;
}

static inline gr_status try_open(const char *path, const char *group, gr_error *err) {
    gr_dataset *ds = NULL;
    memset(err, 0, sizeof *err);
    gr_status st = gr_dataset_open(path, group, &ds, err);
    CHECK(st == GR_OK || ds == NULL);
    gr_dataset_close(ds);
    return st;
}

static inline void copy_prefix(const char *src, const char *dst, double frac) {
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

static inline gr_loader_config loader_cfg(int64_t batch, bool shuffle, bool drop_last, uint64_t seed) {
    gr_loader_config c = {.batch = batch, .shuffle = shuffle, .drop_last = drop_last, .seed = seed,
                          .rank = 0, .world = 1, .n_norm = 0, .prefetch = 2};
    return c;
}

#endif
