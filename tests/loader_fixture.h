/* loader_fixture.h — what the loader tests (test_loader_*.c) share: small
 * HDF5 files of a /train split written with the HDF5 C API (uint8, float32 or
 * float16, NCHW or NHWC, contiguous, chunked or deflated, the images' bytes
 * last), the id dataset (a sample's floats and label name it), the random
 * image dataset and its augmenting configuration, loaders opened with a CHECK,
 * and recorded streams of batches compared batch by batch. A test file defines
 * LOADER_TMP_TAG (its files' prefix) and includes it once. */
#ifndef LOADER_FIXTURE_H
#define LOADER_FIXTURE_H

#ifndef LOADER_TMP_TAG
#error "define LOADER_TMP_TAG (the prefix of this test's files under GR_TEST_TMP) before including loader_fixture.h"
#endif

#include "../dataio/dataio.h"
#include "gr_test.h"

#include <hdf5.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* GR_TEST_TMP/loader_<LOADER_TMP_TAG>_name, in one of 8 rotating buffers: each
 * test_loader_*.c defines its own tag, so that the executables, which ctest
 * may run at the same time, never write one another's files. */
static inline const char *tmp_path(const char *name) {
    static char buf[8][512];
    static int k;
    char *p = buf[k++ % 8];
    snprintf(p, 512, "%s/loader_%s_%s", GR_TEST_TMP, LOADER_TMP_TAG, name);
    return p;
}


static inline void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static inline uint64_t rng_next(uint64_t *s) { /* xorshift64* */
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 0x2545F4914F6CDD1Dull;
}

/* ---- fixtures ---- */

typedef enum store_kind { STORE_CONTIG, STORE_CHUNKED, STORE_DEFLATE } store_kind;

/* One /train split: pixel values pix (n*c*h*w, N,C,H,W order, integers
 * 0..255) stored as dtype, in NCHW or NHWC order, contiguous or in chunks of
 * chunk_n samples (deflated or not); labels written before the images so the
 * images' bytes end the file. */
typedef struct fixture {
    gr_dtype dtype;
    bool nhwc;
    store_kind store;
    hsize_t chunk_n;
    int64_t n, c, h, w;
    const uint8_t *pix;
    const int64_t *labels;
} fixture;

/* IEEE binary16 little-endian (HDF5 1.10 has no predefined one). */
static inline hid_t f16_type(void) {
    hid_t t = H5Tcopy(H5T_IEEE_F32LE);
    H5Tset_fields(t, 15, 10, 5, 0, 10);
    H5Tset_precision(t, 16);
    H5Tset_size(t, 2);
    H5Tset_ebias(t, 15);
    H5Tset_order(t, H5T_ORDER_LE);
    return t;
}

static inline uint16_t u8_to_half(uint8_t v) { /* exact: integers below 2048 */
    if (v == 0) return 0;
    int e = 0;
    while ((v >> (e + 1)) != 0) e++;
    return (uint16_t)(((e + 15) << 10) | (((unsigned)v << (10 - e)) & 0x3ffu));
}

static inline void write_fixture(const char *path, const fixture *fx) {
    const int64_t n = fx->n, C = fx->c, H = fx->h, W = fx->w, S = C * H * W;
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    GR_ASSERT(f >= 0);
    hid_t g = H5Gcreate2(f, "train", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    GR_ASSERT(g >= 0);

    hsize_t nl = (hsize_t)n;
    hid_t lsp = H5Screate_simple(1, &nl, NULL);
    hid_t ld = H5Dcreate2(g, "labels", H5T_STD_I32LE, lsp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    GR_ASSERT(ld >= 0 && H5Dwrite(ld, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, fx->labels) >= 0);
    H5Dclose(ld);
    H5Sclose(lsp);

    /* stored order and element type */
    const size_t esz = fx->dtype == GR_DT_UINT8 ? 1 : fx->dtype == GR_DT_FLOAT16 ? 2 : 4;
    uint8_t *buf = gr_xmalloc((size_t)(n * S) * esz);
    for (int64_t i = 0; i < n; i++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t y = 0; y < H; y++)
                for (int64_t x = 0; x < W; x++) {
                    uint8_t v = fx->pix[i * S + (c * H + y) * W + x];
                    int64_t o = i * S + (fx->nhwc ? (y * W + x) * C + c : (c * H + y) * W + x);
                    if (fx->dtype == GR_DT_UINT8) buf[o] = v;
                    else if (fx->dtype == GR_DT_FLOAT16) ((uint16_t *)buf)[o] = u8_to_half(v);
                    else ((float *)buf)[o] = (float)v;
                }
    hsize_t dims[4] = {(hsize_t)n, (hsize_t)C, (hsize_t)H, (hsize_t)W};
    if (fx->nhwc) dims[1] = (hsize_t)H, dims[2] = (hsize_t)W, dims[3] = (hsize_t)C;
    hid_t sp = H5Screate_simple(4, dims, NULL);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    if (fx->store != STORE_CONTIG) {
        hsize_t ch[4] = {fx->chunk_n, dims[1], dims[2], dims[3]};
        H5Pset_chunk(dcpl, 4, ch);
        if (fx->store == STORE_DEFLATE) H5Pset_deflate(dcpl, 6);
    }
    hid_t ft = fx->dtype == GR_DT_UINT8 ? H5Tcopy(H5T_STD_U8LE)
             : fx->dtype == GR_DT_FLOAT16 ? f16_type() : H5Tcopy(H5T_IEEE_F32LE);
    hid_t mt = fx->dtype == GR_DT_UINT8 ? H5Tcopy(H5T_NATIVE_UINT8)
             : fx->dtype == GR_DT_FLOAT16 ? f16_type() : H5Tcopy(H5T_NATIVE_FLOAT);
    hid_t d = H5Dcreate2(g, "images", ft, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    GR_ASSERT(d >= 0 && H5Dwrite(d, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) >= 0);
    if (fx->nhwc) {
        hid_t st = H5Tcopy(H5T_C_S1);
        H5Tset_size(st, 4);
        hid_t asp = H5Screate(H5S_SCALAR);
        hid_t a = H5Acreate2(d, "layout", st, asp, H5P_DEFAULT, H5P_DEFAULT);
        H5Awrite(a, st, "NHWC");
        H5Aclose(a);
        H5Sclose(asp);
        H5Tclose(st);
    }
    H5Dclose(d);
    H5Tclose(ft);
    H5Tclose(mt);
    H5Pclose(dcpl);
    H5Sclose(sp);
    H5Gclose(g);
    H5Fclose(f);
    free(buf);
}



static inline gr_dataset *open_ds(const char *path, gr_cache_mode cache) {
    gr_dataset *ds = NULL;
    gr_error err = {0};
    gr_status st = gr_dataset_open_cache(path, "/train", cache, &ds, &err);
    CHECK_MSG(st == GR_OK, "%s: %s", path, err.msg);
    return ds;
}

/* The id dataset: N samples of 1x2x2 whose four pixels all equal the sample
 * index, label 3*id + 1; with mean 0 / std 1 a sample's floats name it. */
enum { ID_N = 103 };

static inline const char *make_id_file(void) {
    static uint8_t pix[ID_N * 4];
    static int64_t lab[ID_N];
    for (int i = 0; i < ID_N; i++) {
        for (int k = 0; k < 4; k++) pix[i * 4 + k] = (uint8_t)i;
        lab[i] = 3 * i + 1;
    }
    const char *p = tmp_path("ids.h5");
    fixture fx = {.dtype = GR_DT_UINT8, .store = STORE_CONTIG, .n = ID_N, .c = 1, .h = 2, .w = 2, .pix = pix,
                  .labels = lab};
    write_fixture(p, &fx);
    return p;
}

static inline gr_loader_config base_cfg(int64_t batch, bool shuffle, bool drop_last, uint64_t seed) {
    gr_loader_config c = {.batch = batch, .shuffle = shuffle, .drop_last = drop_last, .seed = seed, .rank = 0,
                          .world = 1, .prefetch = 2, .workers = 0};
    return c;
}

static inline gr_loader *open_loader(gr_dataset *ds, const gr_loader_config *c) {
    gr_loader *ld = NULL;
    gr_error err = {0};
    gr_status st = gr_loader_open(ds, c, &ld, &err);
    CHECK_MSG(st == GR_OK, "gr_loader_open: %s", err.msg);
    return ld;
}

/* ---- recorded streams ---- */

/* Everything delivered by nb consecutive gr_loader_next calls. */
typedef struct stream {
    int64_t nb, ns, elems;
    int64_t *bn, *bepoch, *bindex, *bfirst; /* per batch */
    bool *blast;
    int64_t *bstart;                        /* first sample of batch k in x/y */
    float *x;
    int32_t *y;
} stream;

static inline void stream_free(stream *s) {
    free(s->bn);
    free(s->bepoch);
    free(s->bindex);
    free(s->bfirst);
    free(s->blast);
    free(s->bstart);
    free(s->x);
    free(s->y);
    memset(s, 0, sizeof *s);
}

/* Takes nb batches (releasing each); false (with a failed CHECK) when a
 * gr_loader_next fails. */
static inline bool stream_take(gr_loader *ld, int64_t batch, int64_t nb, stream *s) {
    int64_t chw[3];
    gr_loader_sample_shape(ld, chw);
    memset(s, 0, sizeof *s);
    s->elems = chw[0] * chw[1] * chw[2];
    s->bn = gr_xcalloc((size_t)nb, sizeof *s->bn);
    s->bepoch = gr_xcalloc((size_t)nb, sizeof *s->bepoch);
    s->bindex = gr_xcalloc((size_t)nb, sizeof *s->bindex);
    s->bfirst = gr_xcalloc((size_t)nb, sizeof *s->bfirst);
    s->blast = gr_xcalloc((size_t)nb, sizeof *s->blast);
    s->bstart = gr_xcalloc((size_t)nb, sizeof *s->bstart);
    s->x = gr_xcalloc((size_t)(nb * batch * s->elems), sizeof *s->x);
    s->y = gr_xcalloc((size_t)(nb * batch), sizeof *s->y);
    for (int64_t k = 0; k < nb; k++) {
        gr_batch *b = NULL;
        gr_error err = {0};
        gr_status st = gr_loader_next(ld, &b, &err);
        if (st != GR_OK) {
            CHECK_MSG(st == GR_OK, "gr_loader_next %lld: %s", (long long)k, err.msg);
            return false;
        }
        GR_ASSERT(b->n >= 1 && b->n <= batch);
        s->bn[k] = b->n, s->bepoch[k] = b->epoch, s->bindex[k] = b->index;
        s->bfirst[k] = b->sample_in_epoch, s->blast[k] = b->last_in_epoch;
        s->bstart[k] = s->ns;
        memcpy(s->x + s->ns * s->elems, b->x, (size_t)(b->n * s->elems) * sizeof(float));
        memcpy(s->y + s->ns, b->y, (size_t)b->n * sizeof(int32_t));
        s->ns += b->n;
        s->nb++;
        gr_loader_release(ld, b);
    }
    return true;
}

/* Batches a[ka..ka+nb) and b[kb..kb+nb) are identical: positions, labels and
 * floats bit for bit (tol 0), or floats within tol. */
static inline bool stream_same(const stream *a, int64_t ka, const stream *b, int64_t kb, int64_t nb, double tol) {
    if (ka + nb > a->nb || kb + nb > b->nb || a->elems != b->elems) return false;
    for (int64_t k = 0; k < nb; k++) {
        const int64_t i = ka + k, j = kb + k;
        if (a->bn[i] != b->bn[j] || a->bepoch[i] != b->bepoch[j] || a->bindex[i] != b->bindex[j] ||
            a->bfirst[i] != b->bfirst[j] || a->blast[i] != b->blast[j])
            return false;
        const int64_t n = a->bn[i], e = a->elems;
        if (memcmp(a->y + a->bstart[i], b->y + b->bstart[j], (size_t)n * sizeof(int32_t)) != 0) return false;
        const float *xa = a->x + a->bstart[i] * e, *xb = b->x + b->bstart[j] * e;
        if (tol == 0) {
            if (memcmp(xa, xb, (size_t)(n * e) * sizeof(float)) != 0) return false;
        } else {
            for (int64_t q = 0; q < n * e; q++)
                if (!(fabs((double)xa[q] - (double)xb[q]) <= tol)) return false;
        }
    }
    return true;
}

/* Sample ids of an id-dataset stream (-1 where the floats name no sample or
 * the label does not match the id). */
static inline int64_t *stream_ids(const stream *s) {
    int64_t *ids = gr_xmalloc((size_t)(s->ns ? s->ns : 1) * sizeof *ids);
    for (int64_t i = 0; i < s->ns; i++) {
        const float *x = s->x + i * s->elems;
        int64_t id = (int64_t)x[0];
        bool ok = x[0] == (float)id && id >= 0 && id < ID_N && s->y[i] == 3 * id + 1;
        for (int64_t q = 1; q < s->elems; q++) ok = ok && x[q] == x[0];
        ids[i] = ok ? id : -1;
    }
    return ids;
}

static inline bool ids_valid(const int64_t *ids, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        if (ids[i] < 0) return false;
    return true;
}

/* ids[0..n) are distinct */
static inline bool ids_distinct(const int64_t *ids, int64_t n) {
    bool seen[ID_N] = {false};
    for (int64_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= ID_N || seen[ids[i]]) return false;
        seen[ids[i]] = true;
    }
    return true;
}

/* ---- shared: a random image dataset ---- */

enum { RN = 60, RC = 3, RH = 9, RW = 11 };
static uint8_t g_rpix[RN * RC * RH * RW];
static int64_t g_rlab[RN];

static inline void make_random_pixels(void) {
    uint64_t s = 0x9E3779B97F4A7C15ull;
    for (size_t i = 0; i < sizeof g_rpix; i++) g_rpix[i] = (uint8_t)(rng_next(&s) >> 56);
    for (int i = 0; i < RN; i++) g_rlab[i] = i % 10;
}

static inline const char *write_random(const char *name, gr_dtype dt, bool nhwc, store_kind store, hsize_t chunk_n) {
    const char *p = tmp_path(name);
    fixture fx = {.dtype = dt, .nhwc = nhwc, .store = store, .chunk_n = chunk_n, .n = RN, .c = RC, .h = RH,
                  .w = RW, .pix = g_rpix, .labels = g_rlab};
    write_fixture(p, &fx);
    return p;
}

static inline gr_loader_config aug_cfg(int64_t batch, gr_crop_kind crop, uint64_t seed) {
    gr_loader_config c = base_cfg(batch, true, false, seed);
    c.n_norm = 3;
    const double mean[3] = {120, 100, 90}, std[3] = {64, 32, 50};
    memcpy(c.mean, mean, sizeof mean);
    memcpy(c.std, std, sizeof std);
    c.aug.crop = crop;
    c.aug.flip = true;
    if (crop == GR_CROP_RANDOM) c.aug.size = 7, c.aug.padding = 2;
    if (crop == GR_CROP_RESIZED) {
        c.aug.size = 8;
        c.aug.scale[0] = 0.08, c.aug.scale[1] = 1.0;
        c.aug.ratio[0] = 3.0 / 4.0, c.aug.ratio[1] = 4.0 / 3.0;
    }
    return c;
}

/* Takes batches until one fails (at most limit); returns how many were
 * delivered, the failure in *st / *err. */
static inline int64_t take_until_error(gr_loader *ld, int64_t limit, gr_status *st, gr_error *err) {
    *st = GR_OK;
    for (int64_t k = 0; k < limit; k++) {
        gr_batch *b = NULL;
        memset(err, 0, sizeof *err);
        *st = gr_loader_next(ld, &b, err);
        if (*st != GR_OK) return k;
        gr_loader_release(ld, b);
    }
    return limit;
}

#endif
