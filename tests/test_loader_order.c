/* test_loader.c — unit tests for the batch stream of dataio/loader.c and the
 * per-sample transforms of dataio/augment.c:
 *   1. order: the stream is a pure function of (seed, epoch, batch index),
 *      whatever the worker and prefetch counts; each epoch a permutation;
 *   2. sharding: ranks take disjoint strided slices of that permutation;
 *   3. seek/resume: a seeked loader continues exactly like an uninterrupted one;
 *   4. augmentation against hand computation (crops, padding, flips, the
 *      draws' ranges, RandomResizedCrop's bounds and fallback, bilinear resize
 *      against a double-precision reference);
 *   5. storage: memory vs file (pread and HDF5-selection paths), uint8 vs
 *      float32 vs float16, NCHW vs NHWC all give the same batches;
 *   6. bad input: truncated and corrupted files, crops that do not fit, a
 *      failing ready hook, too many batches held — errors, never hangs;
 *   7. threads: the ready hook and the host allocator are used as documented,
 *      and closing with work in flight neither hangs nor leaks;
 *   8. gr_loader_wait_s with and without workers.
 * Fixtures are small HDF5 files written with the HDF5 C API into GR_TEST_TMP. */
#include "../dataio/dataio.h"
#include "gr_test.h"

#include <hdf5.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static const char *tmp_path(const char *name) {
    static char buf[8][512];
    static int k;
    char *p = buf[k++ % 8];
    snprintf(p, 512, "%s/loader_%s", GR_TEST_TMP, name);
    return p;
}

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static uint64_t rng_next(uint64_t *s) { /* xorshift64* */
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
static hid_t f16_type(void) {
    hid_t t = H5Tcopy(H5T_IEEE_F32LE);
    H5Tset_fields(t, 15, 10, 5, 0, 10);
    H5Tset_precision(t, 16);
    H5Tset_size(t, 2);
    H5Tset_ebias(t, 15);
    H5Tset_order(t, H5T_ORDER_LE);
    return t;
}

static uint16_t u8_to_half(uint8_t v) { /* exact: integers below 2048 */
    if (v == 0) return 0;
    int e = 0;
    while ((v >> (e + 1)) != 0) e++;
    return (uint16_t)(((e + 15) << 10) | (((unsigned)v << (10 - e)) & 0x3ffu));
}

static void write_fixture(const char *path, const fixture *fx) {
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

/* File offset and size of the images' bytes (contiguous layout). */
static void images_extent(const char *path, int64_t *off, int64_t *bytes) {
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    hid_t d = H5Dopen2(f, "/train/images", H5P_DEFAULT);
    *off = (int64_t)H5Dget_offset(d);
    *bytes = (int64_t)H5Dget_storage_size(d);
    H5Dclose(d);
    H5Fclose(f);
}

static int64_t file_size(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 ? (int64_t)sb.st_size : -1;
}

static void copy_file(const char *src, const char *dst) {
    FILE *in = fopen(src, "rb"), *out = fopen(dst, "wb");
    GR_ASSERT(in && out);
    char buf[65536];
    size_t k;
    while ((k = fread(buf, 1, sizeof buf, in)) > 0) GR_ASSERT(fwrite(buf, 1, k, out) == k);
    fclose(in);
    fclose(out);
}

static gr_dataset *open_ds(const char *path, gr_cache_mode cache) {
    gr_dataset *ds = NULL;
    gr_error err = {0};
    gr_status st = gr_dataset_open_cache(path, "/train", cache, &ds, &err);
    CHECK_MSG(st == GR_OK, "%s: %s", path, err.msg);
    return ds;
}

/* The id dataset: N samples of 1x2x2 whose four pixels all equal the sample
 * index, label 3*id + 1; with mean 0 / std 1 a sample's floats name it. */
enum { ID_N = 103 };

static const char *make_id_file(void) {
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

static gr_loader_config base_cfg(int64_t batch, bool shuffle, bool drop_last, uint64_t seed) {
    gr_loader_config c = {.batch = batch, .shuffle = shuffle, .drop_last = drop_last, .seed = seed, .rank = 0,
                          .world = 1, .prefetch = 2, .workers = 0};
    return c;
}

static gr_loader *open_loader(gr_dataset *ds, const gr_loader_config *c) {
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

static void stream_free(stream *s) {
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
static bool stream_take(gr_loader *ld, int64_t batch, int64_t nb, stream *s) {
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
static bool stream_same(const stream *a, int64_t ka, const stream *b, int64_t kb, int64_t nb, double tol) {
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
static int64_t *stream_ids(const stream *s) {
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

static bool ids_valid(const int64_t *ids, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        if (ids[i] < 0) return false;
    return true;
}

/* ids[0..n) are distinct */
static bool ids_distinct(const int64_t *ids, int64_t n) {
    bool seen[ID_N] = {false};
    for (int64_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= ID_N || seen[ids[i]]) return false;
        seen[ids[i]] = true;
    }
    return true;
}

/* ---- 1. order determinism ---- */

static void test_order(const char *idf) {
    gr_dataset *ds = open_ds(idf, GR_CACHE_MEMORY);
    if (!ds) return;
    enum { B = 8, EPOCHS = 3 };
    const int64_t bpe = (ID_N + B - 1) / B; /* 13, the last of 7 samples */

    /* the reference: synchronous, one buffer */
    gr_loader_config c = base_cfg(B, true, false, 42);
    c.prefetch = 1;
    gr_loader *ld = open_loader(ds, &c);
    if (!ld) goto out;
    CHECK(gr_loader_batches_per_epoch(ld) == bpe);
    CHECK(gr_loader_samples_per_epoch(ld) == ID_N);
    stream ref;
    CHECK(stream_take(ld, B, EPOCHS * bpe, &ref));
    gr_loader_close(ld);
    int64_t *rid = stream_ids(&ref);
    CHECK(ref.ns == EPOCHS * ID_N && ids_valid(rid, ref.ns)); /* labels match the ids */
    for (int64_t e = 0; e < EPOCHS; e++) {
        CHECK_MSG(ids_distinct(rid + e * ID_N, ID_N), "epoch %lld is not a permutation", (long long)e);
        for (int64_t k = 0; k < bpe; k++) {
            const int64_t i = e * bpe + k;
            CHECK(ref.bepoch[i] == e && ref.bindex[i] == k && ref.bfirst[i] == k * B &&
                  ref.blast[i] == (k == bpe - 1) && ref.bn[i] == (k == bpe - 1 ? ID_N - k * B : B));
        }
    }
    /* the epochs are shuffled differently, and not in file order */
    CHECK(memcmp(rid, rid + ID_N, ID_N * sizeof *rid) != 0);
    CHECK(memcmp(rid + ID_N, rid + 2 * ID_N, ID_N * sizeof *rid) != 0);
    int64_t in_place = 0;
    for (int64_t i = 0; i < ID_N; i++) in_place += rid[i] == i;
    CHECK_MSG(in_place < ID_N / 4, "%lld of %d samples of epoch 0 at their file position", (long long)in_place, ID_N);

    /* the same stream for every worker / prefetch count */
    const int workers[] = {0, 1, 2, 4}, prefetch[] = {1, 2, 5};
    for (size_t wi = 0; wi < GR_ARRAY_LEN(workers); wi++)
        for (size_t pi = 0; pi < GR_ARRAY_LEN(prefetch); pi++) {
            gr_loader_config cw = c;
            cw.workers = workers[wi], cw.prefetch = prefetch[pi];
            gr_loader *l2 = open_loader(ds, &cw);
            if (!l2) continue;
            stream s;
            CHECK(stream_take(l2, B, EPOCHS * bpe, &s));
            CHECK_MSG(stream_same(&ref, 0, &s, 0, EPOCHS * bpe, 0), "workers %d prefetch %d: another stream",
                      workers[wi], prefetch[pi]);
            stream_free(&s);
            gr_loader_close(l2);
        }

    /* same seed, same stream from a new loader; another seed, another order */
    {
        gr_loader *l2 = open_loader(ds, &c);
        stream s;
        if (l2 && stream_take(l2, B, bpe, &s)) {
            CHECK(stream_same(&ref, 0, &s, 0, bpe, 0));
            stream_free(&s);
        }
        gr_loader_close(l2);
        gr_loader_config c2 = c;
        c2.seed = 43;
        l2 = open_loader(ds, &c2);
        if (l2 && stream_take(l2, B, bpe, &s)) {
            int64_t *ids = stream_ids(&s);
            CHECK(ids_distinct(ids, ID_N));
            CHECK(memcmp(ids, rid, ID_N * sizeof *ids) != 0);
            free(ids);
            stream_free(&s);
        }
        gr_loader_close(l2);
    }

    /* drop_last: 12 full batches, 96 distinct samples, which are the first 96
     * positions of the same permutation */
    {
        gr_loader_config cd = c;
        cd.drop_last = true;
        cd.workers = 2;
        gr_loader *l2 = open_loader(ds, &cd);
        stream s;
        if (l2 && stream_take(l2, B, 2 * (ID_N / B), &s)) {
            CHECK(gr_loader_batches_per_epoch(l2) == ID_N / B);
            CHECK(gr_loader_samples_per_epoch(l2) == ID_N / B * B);
            int64_t *ids = stream_ids(&s);
            const int64_t per = ID_N / B * B;
            CHECK(s.ns == 2 * per && ids_valid(ids, s.ns));
            bool full = true;
            for (int64_t k = 0; k < s.nb; k++) full = full && s.bn[k] == B;
            CHECK(full);
            CHECK(s.bepoch[ID_N / B] == 1 && s.bindex[ID_N / B] == 0 && s.blast[ID_N / B - 1]);
            for (int e = 0; e < 2; e++) {
                CHECK(ids_distinct(ids + e * per, per));
                CHECK(memcmp(ids + e * per, rid + e * ID_N, (size_t)per * sizeof *ids) == 0);
            }
            free(ids);
            stream_free(&s);
        }
        gr_loader_close(l2);
    }

    /* no shuffle: file order, every epoch */
    {
        gr_loader_config cn = base_cfg(B, false, false, 42);
        cn.workers = 2;
        gr_loader *l2 = open_loader(ds, &cn);
        stream s;
        if (l2 && stream_take(l2, B, 2 * bpe, &s)) {
            int64_t *ids = stream_ids(&s);
            bool inorder = s.ns == 2 * ID_N;
            for (int64_t i = 0; inorder && i < s.ns; i++) inorder = ids[i] == i % ID_N;
            CHECK(inorder);
            free(ids);
            stream_free(&s);
        }
        gr_loader_close(l2);
    }
    free(rid);
    stream_free(&ref);
out:
    gr_dataset_close(ds);
}

/* ---- 2. sharding ---- */

static void test_sharding(const char *idf) {
    gr_dataset *ds = open_ds(idf, GR_CACHE_MEMORY);
    if (!ds) return;
    enum { B = 5, W = 3, EPOCHS = 2 };
    const int64_t shard = ID_N / W, bpe = (shard + B - 1) / B; /* 34 in 7 batches */
    /* the permutations: world 1, same seed */
    gr_loader_config c = base_cfg(B, true, false, 7);
    gr_loader *ld = open_loader(ds, &c);
    stream full;
    int64_t *perm = NULL;
    if (ld && stream_take(ld, B, EPOCHS * ((ID_N + B - 1) / B), &full)) {
        perm = stream_ids(&full);
        stream_free(&full);
    }
    gr_loader_close(ld);
    if (!perm) goto out;

    for (int64_t e = 0; e < EPOCHS; e++) {
        int owner[ID_N];
        for (int i = 0; i < ID_N; i++) owner[i] = -1;
        for (int r = 0; r < W; r++) {
            gr_loader_config cr = c;
            cr.rank = r, cr.world = W, cr.workers = r; /* thread counts vary too */
            gr_loader *lr = open_loader(ds, &cr);
            if (!lr) continue;
            CHECK(gr_loader_samples_per_epoch(lr) == shard && gr_loader_batches_per_epoch(lr) == bpe);
            gr_error err = {0};
            CHECK(gr_loader_seek(lr, e, 0, &err) == GR_OK);
            stream s;
            if (stream_take(lr, B, bpe, &s)) {
                int64_t *ids = stream_ids(&s);
                CHECK(s.ns == shard && ids_valid(ids, s.ns));
                bool strided = true;
                for (int64_t k = 0; k < s.ns; k++) strided = strided && ids[k] == perm[e * ID_N + r + k * W];
                CHECK_MSG(strided, "epoch %lld rank %d: not positions r, r+w, ...", (long long)e, r);
                bool disjoint = true;
                for (int64_t k = 0; k < s.ns; k++) {
                    if (ids[k] < 0) continue;
                    disjoint = disjoint && owner[ids[k]] < 0;
                    owner[ids[k]] = r;
                }
                CHECK(disjoint);
                CHECK(s.bepoch[0] == e && s.bn[bpe - 1] == shard - (bpe - 1) * B && s.blast[bpe - 1]);
                free(ids);
                stream_free(&s);
            }
            gr_loader_close(lr);
        }
        /* union = the first W*shard permutation positions; the rest unused */
        bool uni = true;
        for (int64_t p = 0; p < ID_N; p++) {
            int64_t id = perm[e * ID_N + p];
            uni = uni && (p < W * shard ? owner[id] == (int)(p % W) : owner[id] == -1);
        }
        CHECK_MSG(uni, "epoch %lld: the shards' union is not the first %lld positions", (long long)e,
                  (long long)(W * shard));
    }
    free(perm);
out:
    gr_dataset_close(ds);
}

/* ---- shared: a random image dataset ---- */

enum { RN = 60, RC = 3, RH = 9, RW = 11 };
static uint8_t g_rpix[RN * RC * RH * RW];
static int64_t g_rlab[RN];

static void make_random_pixels(void) {
    uint64_t s = 0x9E3779B97F4A7C15ull;
    for (size_t i = 0; i < sizeof g_rpix; i++) g_rpix[i] = (uint8_t)(rng_next(&s) >> 56);
    for (int i = 0; i < RN; i++) g_rlab[i] = i % 10;
}

static const char *write_random(const char *name, gr_dtype dt, bool nhwc, store_kind store, hsize_t chunk_n) {
    const char *p = tmp_path(name);
    fixture fx = {.dtype = dt, .nhwc = nhwc, .store = store, .chunk_n = chunk_n, .n = RN, .c = RC, .h = RH,
                  .w = RW, .pix = g_rpix, .labels = g_rlab};
    write_fixture(p, &fx);
    return p;
}

static gr_loader_config aug_cfg(int64_t batch, gr_crop_kind crop, uint64_t seed) {
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

/* ---- 3. seek / resume ---- */

static void test_seek(const char *rndf) {
    gr_dataset *ds = open_ds(rndf, GR_CACHE_MEMORY);
    if (!ds) return;
    enum { B = 7 };
    const int64_t bpe = (RN + B - 1) / B; /* 9, the last of 4 */
    gr_loader_config c = aug_cfg(B, GR_CROP_RANDOM, 11);
    gr_loader *ld = open_loader(ds, &c);
    stream ref;
    bool have = ld && stream_take(ld, B, 3 * bpe, &ref);
    gr_loader_close(ld);
    if (!have) goto out;
    /* the augmentation makes epochs differ in content, not only in order */
    CHECK(!stream_same(&ref, 0, &ref, bpe, 1, 0));

    const int64_t pos[][2] = {{0, 3 * B}, {1, 0}, {1, 5 * B}, {2, (bpe - 1) * B}, {0, 0}};
    for (int workers = 0; workers <= 2; workers += 2)
        for (size_t p = 0; p < GR_ARRAY_LEN(pos); p++) {
            gr_loader_config cw = c;
            cw.workers = workers, cw.prefetch = 3;
            gr_loader *l2 = open_loader(ds, &cw);
            if (!l2) continue;
            gr_error err = {0};
            CHECK(gr_loader_seek(l2, pos[p][0], pos[p][1], &err) == GR_OK);
            const int64_t from = pos[p][0] * bpe + pos[p][1] / B, nb = GR_MIN(3 * bpe - from, bpe + 2);
            stream s;
            if (stream_take(l2, B, nb, &s)) {
                CHECK_MSG(stream_same(&ref, from, &s, 0, nb, 0), "workers %d: seek to epoch %lld sample %lld",
                          workers, (long long)pos[p][0], (long long)pos[p][1]);
                stream_free(&s);
            }
            gr_loader_close(l2);
        }

    /* in one loader: to the current position (kept), backwards, forwards;
     * bad positions are refused and leave the stream where it was */
    for (int workers = 0; workers <= 2; workers += 2) {
        gr_loader_config cw = c;
        cw.workers = workers, cw.prefetch = 4;
        gr_loader *l2 = open_loader(ds, &cw);
        if (!l2) continue;
        gr_error err = {0};
        stream s;
        if (stream_take(l2, B, 4, &s)) stream_free(&s);
        CHECK(gr_loader_seek(l2, 0, 4 * B, &err) == GR_OK);
        if (stream_take(l2, B, 3, &s)) {
            CHECK_MSG(stream_same(&ref, 4, &s, 0, 3, 0), "workers %d: seek to the current position", workers);
            stream_free(&s);
        }
        CHECK(gr_loader_seek(l2, 0, 2 * B, &err) == GR_OK);
        if (stream_take(l2, B, 2, &s)) {
            CHECK_MSG(stream_same(&ref, 2, &s, 0, 2, 0), "workers %d: seek backwards", workers);
            stream_free(&s);
        }
        CHECK(gr_loader_seek(l2, 2, 3 * B, &err) == GR_OK);
        if (stream_take(l2, B, 2, &s)) {
            CHECK_MSG(stream_same(&ref, 2 * bpe + 3, &s, 0, 2, 0), "workers %d: seek forwards", workers);
            stream_free(&s);
        }
        /* bad positions: not a multiple of the batch, past the epoch, negative */
        memset(&err, 0, sizeof err);
        CHECK(gr_loader_seek(l2, 1, B + 1, &err) == GR_ERR_DATA);
        CHECK_STR_CONTAINS(err.msg, "multiple of the batch");
        CHECK(gr_loader_seek(l2, 1, bpe * B, &err) == GR_ERR_DATA);
        CHECK(gr_loader_seek(l2, 1, RN, &err) == GR_ERR_DATA);
        CHECK(gr_loader_seek(l2, -1, 0, &err) == GR_ERR_DATA);
        CHECK(gr_loader_seek(l2, 0, -B, &err) == GR_ERR_DATA);
        if (stream_take(l2, B, 2, &s)) {
            CHECK_MSG(stream_same(&ref, 2 * bpe + 5, &s, 0, 2, 0), "workers %d: a refused seek moved the stream",
                      workers);
            stream_free(&s);
        }
        gr_loader_close(l2);
    }
    stream_free(&ref);
out:
    gr_dataset_close(ds);
}

/* Counts ready-hook calls (thread-safe). */
typedef struct hook_count {
    pthread_mutex_t mu;
    int64_t calls;
} hook_count;

static gr_status count_ready(gr_batch *b, void *ctx, gr_error *err) {
    (void)b, (void)err;
    hook_count *h = ctx;
    pthread_mutex_lock(&h->mu);
    h->calls++;
    pthread_mutex_unlock(&h->mu);
    return GR_OK;
}

static int64_t hook_calls(hook_count *h) {
    pthread_mutex_lock(&h->mu);
    int64_t v = h->calls;
    pthread_mutex_unlock(&h->mu);
    return v;
}

/* Waits up to 5 s for the count to reach want, then 30 ms more for any
 * extra call; returns the count. */
static int64_t hook_settle(hook_count *h, int64_t want) {
    for (int i = 0; i < 1000 && hook_calls(h) < want; i++) sleep_ms(5);
    sleep_ms(30);
    return hook_calls(h);
}

/* Seeking to the current position keeps the prefetched batches (no batch is
 * made twice); seeking elsewhere makes new ones. Counted through the ready
 * hook once the ring is full and the workers idle. */
static void test_seek_keeps_prefetch(const char *rndf) {
    gr_dataset *ds = open_ds(rndf, GR_CACHE_MEMORY);
    if (!ds) return;
    enum { B = 7, P = 4 };
    hook_count hc = {.calls = 0};
    pthread_mutex_init(&hc.mu, NULL);
    gr_loader_config c = aug_cfg(B, GR_CROP_RANDOM, 11);
    c.workers = 2, c.prefetch = P, c.ready = count_ready, c.ready_ctx = &hc;
    gr_loader *ld = open_loader(ds, &c);
    if (ld) {
        stream s;
        if (stream_take(ld, B, 3, &s)) stream_free(&s);
        CHECK(hook_settle(&hc, 3 + P) == 3 + P);
        gr_error err = {0};
        CHECK(gr_loader_seek(ld, 0, 3 * B, &err) == GR_OK); /* where it is */
        if (stream_take(ld, B, P, &s)) stream_free(&s);
        CHECK_MSG(hook_settle(&hc, 3 + 2 * P) == 3 + 2 * P, "seeking to the current position remade batches");
        CHECK(gr_loader_seek(ld, 1, 0, &err) == GR_OK); /* elsewhere: the ring is refilled */
        CHECK(hook_settle(&hc, 3 + 3 * P) == 3 + 3 * P);
        gr_loader_close(ld);
    }
    pthread_mutex_destroy(&hc.mu);
    gr_dataset_close(ds);
}

/* ---- 4. augmentation against hand computation ---- */

/* The tiny dataset: 2x5x6 images, pixel (c, y, x) of sample i is
 * 10*y + x + 60*(i%3) + 50*c; label i. */
enum { TN = 40, TC = 2, TH = 5, TW = 6 };

static uint8_t tiny_pix(int64_t i, int64_t c, int64_t y, int64_t x) {
    return (uint8_t)(10 * y + x + 60 * (i % 3) + 50 * c);
}

static const double g_tmean[TC] = {10, 20}, g_tstd[TC] = {2, 4};

static const char *make_tiny_file(void) {
    static uint8_t pix[TN * TC * TH * TW];
    static int64_t lab[TN];
    for (int64_t i = 0; i < TN; i++) {
        lab[i] = i;
        for (int64_t c = 0; c < TC; c++)
            for (int64_t y = 0; y < TH; y++)
                for (int64_t x = 0; x < TW; x++) pix[((i * TC + c) * TH + y) * TW + x] = tiny_pix(i, c, y, x);
    }
    const char *p = tmp_path("tiny.h5");
    fixture fx = {.dtype = GR_DT_UINT8, .store = STORE_CONTIG, .n = TN, .c = TC, .h = TH, .w = TW, .pix = pix,
                  .labels = lab};
    write_fixture(p, &fx);
    return p;
}

/* torch's bilinear (align_corners=False, antialias=False) of a box of
 * planes of src (stride sh per row), flipped after resizing, in double. */
static void ref_bilinear(const double *src, int64_t sw, int64_t y0, int64_t x0, int64_t h, int64_t w, int64_t oh,
                         int64_t ow, bool flip, double *out) {
    for (int64_t y = 0; y < oh; y++) {
        double sy = ((double)y + 0.5) * (double)h / (double)oh - 0.5;
        if (sy < 0) sy = 0;
        int64_t i0 = (int64_t)floor(sy), i1 = GR_MIN(i0 + 1, h - 1);
        double ly = sy - (double)i0;
        for (int64_t x = 0; x < ow; x++) {
            int64_t xs = flip ? ow - 1 - x : x;
            double sx = ((double)xs + 0.5) * (double)w / (double)ow - 0.5;
            if (sx < 0) sx = 0;
            int64_t j0 = (int64_t)floor(sx), j1 = GR_MIN(j0 + 1, w - 1);
            double lx = sx - (double)j0;
            const double *r0 = src + (y0 + i0) * sw + x0, *r1 = src + (y0 + i1) * sw + x0;
            out[y * ow + x] = (1 - ly) * ((1 - lx) * r0[j0] + lx * r0[j1]) + ly * ((1 - lx) * r1[j0] + lx * r1[j1]);
        }
    }
}

/* What the loader must deliver for tiny sample i through t (out S x S). */
static void tiny_expected(int64_t i, const gr_xform *t, int64_t oh, int64_t ow, double *out) {
    for (int64_t c = 0; c < TC; c++) {
        double *o = out + c * oh * ow;
        if (t->h == oh && t->w == ow) { /* a window, zeros outside */
            for (int64_t y = 0; y < oh; y++)
                for (int64_t x = 0; x < ow; x++) {
                    int64_t sy = t->y0 + y, sx = t->flip ? t->x0 + ow - 1 - x : t->x0 + x;
                    double v = sy >= 0 && sy < TH && sx >= 0 && sx < TW ? tiny_pix(i, c, sy, sx) : 0.0;
                    o[y * ow + x] = (double)(float)((v - g_tmean[c]) / g_tstd[c]);
                }
        } else {
            double plane[TH * TW];
            for (int64_t y = 0; y < TH; y++)
                for (int64_t x = 0; x < TW; x++) plane[y * TW + x] = tiny_pix(i, c, y, x);
            ref_bilinear(plane, TW, t->y0, t->x0, t->h, t->w, oh, ow, t->flip, o);
            for (int64_t q = 0; q < oh * ow; q++) o[q] = (o[q] - g_tmean[c]) / g_tstd[c];
        }
    }
}

/* Python's round() of a half-integer-or-integer, for the CenterCrop offsets. */
static int64_t py_round_half(int64_t twice) { /* round(twice / 2) */
    if (twice % 2 == 0) return twice / 2;
    int64_t lo = (twice - 1) / 2; /* twice >= 0 here */
    return lo % 2 == 0 ? lo : lo + 1;
}

static void test_augment_loader(const char *tinyf) {
    gr_dataset *ds = open_ds(tinyf, GR_CACHE_MEMORY);
    if (!ds) return;
    typedef struct acase { const char *name; gr_augment aug; double tol; } acase;
    const acase cases[] = {
        {"random 4 pad 2 flip", {.crop = GR_CROP_RANDOM, .size = 4, .padding = 2, .flip = true}, 0},
        {"random 5 pad 0", {.crop = GR_CROP_RANDOM, .size = 5, .padding = 0}, 0},
        {"random 10 pad 3 flip", {.crop = GR_CROP_RANDOM, .size = 10, .padding = 3, .flip = true}, 0},
        {"center 3 flip", {.crop = GR_CROP_CENTER, .size = 3, .flip = true}, 0},
        {"center 4", {.crop = GR_CROP_CENTER, .size = 4}, 0},
        {"center 2 flip", {.crop = GR_CROP_CENTER, .size = 2, .flip = true}, 0},
        {"center 8 (padded)", {.crop = GR_CROP_CENTER, .size = 8, .flip = true}, 0},
        {"none flip", {.crop = GR_CROP_NONE, .flip = true}, 0},
        {"resized 7 flip", {.crop = GR_CROP_RESIZED, .size = 7, .scale = {0.2, 1.0}, .ratio = {0.5, 2.0},
                            .flip = true}, 1e-4},
        {"resized 3", {.crop = GR_CROP_RESIZED, .size = 3, .scale = {0.3, 0.9}, .ratio = {0.75, 1.33}}, 1e-4},
    };
    enum { B = 7 };
    for (size_t k = 0; k < GR_ARRAY_LEN(cases); k++) {
        const gr_augment *a = &cases[k].aug;
        gr_loader_config c = base_cfg(B, true, false, 5 + k);
        c.n_norm = 2;
        memcpy(c.mean, g_tmean, sizeof g_tmean);
        memcpy(c.std, g_tstd, sizeof g_tstd);
        c.aug = *a;
        c.workers = 2;
        gr_loader *ld = open_loader(ds, &c);
        if (!ld) continue;
        int64_t chw[3];
        gr_loader_sample_shape(ld, chw);
        const int64_t oh = a->crop == GR_CROP_NONE ? TH : a->size, ow = a->crop == GR_CROP_NONE ? TW : a->size;
        CHECK(chw[0] == TC && chw[1] == oh && chw[2] == ow);
        stream s;
        const int64_t bpe = (TN + B - 1) / B;
        if (!stream_take(ld, B, 2 * bpe, &s)) {
            gr_loader_close(ld);
            continue;
        }
        double *want = gr_xmalloc((size_t)(TC * oh * ow) * sizeof *want);
        int64_t bad = 0, flips = 0, first_bad = -1;
        double worst = 0;
        for (int64_t b = 0; b < s.nb; b++)
            for (int64_t j = 0; j < s.bn[b]; j++) {
                const int64_t q = s.bstart[b] + j, id = s.y[q];
                gr_xform t;
                gr_augment_draw(a, TH, TW, c.seed, s.bepoch[b], id, &t);
                flips += t.flip;
                if (a->crop == GR_CROP_CENTER) { /* the offsets, independently */
                    const int64_t S = a->size;
                    int64_t y0 = S > TH ? -((S - TH) / 2) : py_round_half(TH - S);
                    int64_t x0 = S > TW ? -((S - TW) / 2) : py_round_half(TW - S);
                    CHECK(t.y0 == y0 && t.x0 == x0 && t.h == S && t.w == S);
                }
                tiny_expected(id, &t, oh, ow, want);
                for (int64_t e = 0; e < TC * oh * ow; e++) {
                    double d = fabs((double)s.x[q * s.elems + e] - want[e]);
                    worst = GR_MAX(worst, d);
                    if (!(d <= cases[k].tol)) {
                        if (first_bad < 0) first_bad = q;
                        bad++;
                    }
                }
            }
        CHECK_MSG(bad == 0, "%s: %lld floats differ from the hand computation (worst %g, first at sample %lld)",
                  cases[k].name, (long long)bad, worst, (long long)first_bad);
        if (a->flip) CHECK_MSG(flips > 0 && flips < s.ns, "%s: %lld of %lld flipped", cases[k].name,
                               (long long)flips, (long long)s.ns);
        else CHECK(flips == 0);
        free(want);
        stream_free(&s);
        gr_loader_close(ld);
    }
    /* explicit CenterCrop offsets on 5x6 (round half to even) */
    gr_xform t;
    gr_augment ca = {.crop = GR_CROP_CENTER, .size = 3};
    gr_augment_draw(&ca, TH, TW, 0, 0, 0, &t);
    CHECK(t.y0 == 1 && t.x0 == 2); /* round(1.0), round(1.5) */
    ca.size = 4;
    gr_augment_draw(&ca, TH, TW, 0, 0, 0, &t);
    CHECK(t.y0 == 0 && t.x0 == 1); /* round(0.5) = 0, round(1.0) */
    ca.size = 8;
    gr_augment_draw(&ca, TH, TW, 0, 0, 0, &t);
    CHECK(t.y0 == -1 && t.x0 == -1 && t.h == 8 && t.w == 8); /* pad (1, 2) and (1, 1) */
    gr_augment_draw(&ca, 10, 5, 0, 0, 0, &t);
    CHECK(t.y0 == 1 && t.x0 == -1);
    ca.size = 7;
    gr_augment_draw(&ca, 10, 12, 0, 0, 0, &t);
    CHECK(t.y0 == 2 && t.x0 == 2); /* round(1.5) = 2, round(2.5) = 2 */
    gr_augment_draw(&ca, 14, 16, 0, 0, 0, &t);
    CHECK(t.y0 == 4 && t.x0 == 4); /* round(3.5) = 4, round(4.5) = 4 */
    gr_dataset_close(ds);
}

/* The draws themselves, over many samples. */
static void test_augment_draws(void) {
    enum { NDRAW = 4000 };
    /* RandomCrop(28, padding 4) on 28x28: offsets -4..4, each occurring;
     * flips about half */
    gr_augment a = {.crop = GR_CROP_RANDOM, .size = 28, .padding = 4, .flip = true};
    int64_t hist_y[9] = {0}, hist_x[9] = {0}, flips = 0, out_of_range = 0;
    for (int64_t i = 0; i < NDRAW; i++) {
        gr_xform t;
        gr_augment_draw(&a, 28, 28, 1, 0, i, &t);
        if (t.y0 < -4 || t.y0 > 4 || t.x0 < -4 || t.x0 > 4 || t.h != 28 || t.w != 28) {
            out_of_range++;
            continue;
        }
        hist_y[t.y0 + 4]++, hist_x[t.x0 + 4]++;
        flips += t.flip;
    }
    CHECK(out_of_range == 0);
    bool all = true;
    for (int k = 0; k < 9; k++) all = all && hist_y[k] > NDRAW / 9 / 2 && hist_x[k] > NDRAW / 9 / 2;
    CHECK_MSG(all, "some RandomCrop offsets are (nearly) never drawn");
    CHECK_MSG(flips > NDRAW * 45 / 100 && flips < NDRAW * 55 / 100, "%lld of %d flipped", (long long)flips, NDRAW);
    /* a non-square image, 20x13 with crop 8 padding 1: y0 in [-1, 13], x0 in [-1, 6] */
    gr_augment a2 = {.crop = GR_CROP_RANDOM, .size = 8, .padding = 1};
    int64_t ymin = 99, ymax = -99, xmin = 99, xmax = -99, nflip = 0;
    for (int64_t i = 0; i < NDRAW; i++) {
        gr_xform t;
        gr_augment_draw(&a2, 20, 13, 3, 2, i, &t);
        ymin = GR_MIN(ymin, t.y0), ymax = GR_MAX(ymax, t.y0);
        xmin = GR_MIN(xmin, t.x0), xmax = GR_MAX(xmax, t.x0);
        nflip += t.flip;
    }
    CHECK(ymin == -1 && ymax == 13 && xmin == -1 && xmax == 6 && nflip == 0);

    /* pure function of (seed, epoch, sample) */
    gr_xform t1, t2;
    int64_t differ_epoch = 0, differ_seed = 0, same = 0;
    for (int64_t i = 0; i < 200; i++) {
        gr_augment_draw(&a, 28, 28, 1, 3, i, &t1);
        gr_augment_draw(&a, 28, 28, 1, 3, i, &t2);
        same += t1.y0 == t2.y0 && t1.x0 == t2.x0 && t1.h == t2.h && t1.w == t2.w && t1.flip == t2.flip;
        gr_augment_draw(&a, 28, 28, 1, 4, i, &t2);
        differ_epoch += t1.y0 != t2.y0 || t1.x0 != t2.x0 || t1.flip != t2.flip;
        gr_augment_draw(&a, 28, 28, 2, 3, i, &t2);
        differ_seed += t1.y0 != t2.y0 || t1.x0 != t2.x0 || t1.flip != t2.flip;
    }
    CHECK(same == 200 && differ_epoch > 150 && differ_seed > 150);

    /* RandomResizedCrop(scale 0.08..1, ratio 3/4..4/3) on 64x80: the box is
     * inside the image, its area fraction and aspect are within the ranges
     * up to the rounding of w and h to integers, and the ranges are used */
    const int64_t H = 64, W = 80;
    gr_augment r = {.crop = GR_CROP_RESIZED, .size = 24, .scale = {0.08, 1.0}, .ratio = {3.0 / 4.0, 4.0 / 3.0},
                    .flip = true};
    int64_t outside = 0, bad_area = 0, bad_ratio = 0, rflips = 0;
    double amin = 1e9, amax = 0, rmin = 1e9, rmax = 0;
    for (int64_t i = 0; i < NDRAW; i++) {
        gr_xform t;
        gr_augment_draw(&r, H, W, 9, 1, i, &t);
        rflips += t.flip;
        if (t.y0 < 0 || t.x0 < 0 || t.h < 1 || t.w < 1 || t.y0 + t.h > H || t.x0 + t.w > W) outside++;
        const double h = (double)t.h, w = (double)t.w, slack = 0.5 * (h + w) + 0.25;
        const double area = h * w;
        if (area < r.scale[0] * H * W - slack || area > r.scale[1] * H * W + slack) bad_area++;
        if (w + 0.5 < r.ratio[0] * (h - 0.5) || w - 0.5 > r.ratio[1] * (h + 0.5)) bad_ratio++;
        amin = GR_MIN(amin, area / (H * W)), amax = GR_MAX(amax, area / (H * W));
        rmin = GR_MIN(rmin, w / h), rmax = GR_MAX(rmax, w / h);
    }
    CHECK(outside == 0);
    CHECK_MSG(bad_area == 0 && bad_ratio == 0, "%lld boxes outside the scale range, %lld outside the ratio range",
              (long long)bad_area, (long long)bad_ratio);
    CHECK_MSG(amin < 0.12 && amax > 0.9 && rmin < 0.8 && rmax > 1.25,
              "the ranges are not covered: area %g..%g, aspect %g..%g", amin, amax, rmin, rmax);
    CHECK(rflips > NDRAW * 45 / 100 && rflips < NDRAW * 55 / 100);

    /* the fallback (no try fits): torchvision's centre box, ratio clamped */
    gr_xform t;
    gr_augment f1 = {.crop = GR_CROP_RESIZED, .size = 8, .scale = {0.9, 1.0}, .ratio = {3.0, 4.0}};
    gr_augment_draw(&f1, H, W, 1, 0, 5, &t); /* too wide: w = 80, h = round(80/3) = 27 */
    CHECK_MSG(t.h == 27 && t.w == 80 && t.y0 == 18 && t.x0 == 0, "fallback (%lld,%lld,%lld,%lld)", (long long)t.y0,
              (long long)t.x0, (long long)t.h, (long long)t.w);
    gr_augment f2 = {.crop = GR_CROP_RESIZED, .size = 8, .scale = {0.9, 1.0}, .ratio = {0.2, 0.25}};
    gr_augment_draw(&f2, H, W, 1, 0, 5, &t); /* too tall: h = 64, w = round(64/4) = 16 */
    CHECK(t.h == 64 && t.w == 16 && t.y0 == 0 && t.x0 == 32);
    gr_augment f3 = {.crop = GR_CROP_RESIZED, .size = 8, .scale = {1.5, 2.0}, .ratio = {3.0 / 4.0, 4.0 / 3.0}};
    gr_augment_draw(&f3, H, W, 1, 0, 5, &t); /* area too large, ratio fits: the whole image */
    CHECK(t.h == 64 && t.w == 80 && t.y0 == 0 && t.x0 == 0);
    gr_augment_draw(&f1, 30, 30, 4, 2, 11, &t); /* square, too wide: 30 x round(10) */
    CHECK(t.h == 10 && t.w == 30 && t.y0 == 10 && t.x0 == 0);
}

/* gr_decode_sample's bilinear resize against ref_bilinear on a random uint8
 * 3x64x80 image, NCHW and NHWC, uint8 and float32, normalized by mean 127.5
 * and std 64 (so 1e-4 is in normalized units). */
static void test_bilinear(void) {
    enum { C = 3, H = 64, W = 80 };
    static uint8_t img[C * H * W], img_hwc[C * H * W];
    static float imgf[C * H * W];
    static double plane[H * W];
    uint64_t s = 12345;
    for (int i = 0; i < C * H * W; i++) img[i] = (uint8_t)(rng_next(&s) >> 56), imgf[i] = img[i];
    for (int c = 0; c < C; c++)
        for (int y = 0; y < H; y++)
            for (int x = 0; x < W; x++) img_hwc[(y * W + x) * C + c] = img[(c * H + y) * W + x];
    const double mean[C] = {127.5, 127.5, 127.5}, std[C] = {64, 64, 64};
    const int64_t chw[3] = {C, H, W};
    const int64_t sizes[] = {24, 7, 100};
    double worst = 0;
    int64_t nbox = 0, mism_layout = 0, mism_float = 0;
    for (size_t si = 0; si < GR_ARRAY_LEN(sizes); si++) {
        const int64_t S = sizes[si];
        gr_decoder d8, dh, df;
        gr_decoder_init(&d8, GR_DT_UINT8, chw, false, S, S, mean, std);
        gr_decoder_init(&dh, GR_DT_UINT8, chw, true, S, S, mean, std);
        gr_decoder_init(&df, GR_DT_FLOAT32, chw, false, S, S, mean, std);
        void *scratch = gr_xmalloc(gr_decoder_scratch_bytes(&d8));
        float *o8 = gr_xmalloc((size_t)(C * S * S) * sizeof(float)), *oh = gr_xmalloc((size_t)(C * S * S) * sizeof(float));
        float *of = gr_xmalloc((size_t)(C * S * S) * sizeof(float));
        double *want = gr_xmalloc((size_t)(S * S) * sizeof(double));
        /* drawn boxes, then hand-picked ones: tiny (upscale), whole image
         * (downscale), touching the bottom-right edge, one row, one column */
        gr_augment r = {.crop = GR_CROP_RESIZED, .size = S, .scale = {0.02, 1.0}, .ratio = {0.5, 2.0}, .flip = true};
        const gr_xform fixed[] = {{0, 0, 64, 80, false}, {10, 20, 7, 9, true}, {57, 70, 7, 10, false},
                                  {5, 5, 1, 1, false}, {30, 0, 1, 80, true}, {0, 40, 64, 1, false},
                                  {3, 4, 50, 3, true}, {0, 0, 24, 24, false}};
        for (int k = 0; k < 40 + (int)GR_ARRAY_LEN(fixed); k++) {
            gr_xform t;
            if (k < 40) gr_augment_draw(&r, H, W, 77, 0, k, &t);
            else t = fixed[k - 40];
            if (t.h == S && t.w == S) continue; /* a window, not a resize */
            nbox++;
            gr_decode_sample(&d8, img, &t, o8, scratch);
            gr_decode_sample(&dh, img_hwc, &t, oh, scratch);
            gr_decode_sample(&df, imgf, &t, of, scratch);
            mism_layout += memcmp(o8, oh, (size_t)(C * S * S) * sizeof(float)) != 0;
            for (int c = 0; c < C; c++) {
                for (int q = 0; q < H * W; q++) plane[q] = img[c * H * W + q];
                ref_bilinear(plane, W, t.y0, t.x0, t.h, t.w, S, S, t.flip, want);
                for (int64_t q = 0; q < S * S; q++) {
                    double v = (want[q] - mean[c]) / std[c];
                    worst = GR_MAX(worst, fabs(o8[c * S * S + q] - v));
                    if (fabs(of[c * S * S + q] - o8[c * S * S + q]) > 1e-6) mism_float++;
                }
            }
        }
        free(want);
        free(o8);
        free(oh);
        free(of);
        free(scratch);
        gr_decoder_free(&d8);
        gr_decoder_free(&dh);
        gr_decoder_free(&df);
    }
    CHECK(nbox > 100);
    CHECK_MSG(worst < 1e-4, "bilinear: max |diff| %g against the double reference", worst);
    CHECK_MSG(mism_layout == 0, "%lld boxes differ between NCHW and NHWC", (long long)mism_layout);
    CHECK_MSG(mism_float == 0, "%lld floats differ between uint8 and float32 images", (long long)mism_float);
}

/* ---- 5. storage variants ---- */

static void test_storage(void) {
    enum { B = 6 };
    const int64_t bpe = (RN + B - 1) / B;
    const char *ref_path = write_random("u8.h5", GR_DT_UINT8, false, STORE_CONTIG, 0);
    typedef struct variant {
        const char *name, *file;
        gr_dtype dt;
        bool nhwc;
        store_kind store;
        hsize_t chunk_n;
        gr_cache_mode cache;
        double tol;
    } variant;
    const variant vs[] = {
        {"uint8 contiguous, none (pread)", "u8.h5", GR_DT_UINT8, false, STORE_CONTIG, 0, GR_CACHE_NONE, 0},
        {"uint8 chunks of 4, none (pread)", "u8c.h5", GR_DT_UINT8, false, STORE_CHUNKED, 4, GR_CACHE_NONE, 0},
        {"uint8 deflate, none (HDF5)", "u8z.h5", GR_DT_UINT8, false, STORE_DEFLATE, 4, GR_CACHE_NONE, 0},
        {"uint8 deflate, memory", "u8z.h5", GR_DT_UINT8, false, STORE_DEFLATE, 4, GR_CACHE_MEMORY, 0},
        {"uint8 NHWC, memory", "u8n.h5", GR_DT_UINT8, true, STORE_CONTIG, 0, GR_CACHE_MEMORY, 0},
        {"uint8 NHWC chunks of 7, none", "u8nc.h5", GR_DT_UINT8, true, STORE_CHUNKED, 7, GR_CACHE_NONE, 0},
        {"float32, memory", "f32.h5", GR_DT_FLOAT32, false, STORE_CONTIG, 0, GR_CACHE_MEMORY, 1e-6},
        {"float32, none (pread)", "f32.h5", GR_DT_FLOAT32, false, STORE_CONTIG, 0, GR_CACHE_NONE, 1e-6},
        {"float16 chunks of 5, none", "f16.h5", GR_DT_FLOAT16, false, STORE_CHUNKED, 5, GR_CACHE_NONE, 1e-6},
        {"float16 deflate NHWC, none", "f16zn.h5", GR_DT_FLOAT16, true, STORE_DEFLATE, 8, GR_CACHE_NONE, 1e-6},
    };
    for (size_t k = 0; k < GR_ARRAY_LEN(vs); k++)
        if (k == 0 || strcmp(vs[k].file, vs[k - 1].file) != 0)
            write_random(vs[k].file, vs[k].dt, vs[k].nhwc, vs[k].store, vs[k].chunk_n);

    gr_dataset *ref_ds = open_ds(ref_path, GR_CACHE_MEMORY);
    if (!ref_ds) return;
    CHECK(gr_dataset_in_memory(ref_ds));
    const gr_crop_kind crops[] = {GR_CROP_RANDOM, GR_CROP_RESIZED, GR_CROP_NONE};
    for (size_t ci = 0; ci < GR_ARRAY_LEN(crops); ci++) {
        gr_loader_config c = aug_cfg(B, crops[ci], 3);
        gr_loader *ld = open_loader(ref_ds, &c);
        stream ref;
        bool have = ld && stream_take(ld, B, 2 * bpe, &ref);
        gr_loader_close(ld);
        if (!have) continue;
        if (crops[ci] == GR_CROP_NONE) { /* the reference itself against the pixels */
            int64_t bad = 0;
            int64_t *seen = gr_xcalloc(RN, sizeof *seen);
            for (int64_t b = 0; b < ref.nb; b++) {
                /* no crop, flip: identify by label is ambiguous, so check per sample
                 * against every candidate with that label */
                for (int64_t j = 0; j < ref.bn[b]; j++) {
                    const int64_t q = ref.bstart[b] + j;
                    bool found = false;
                    for (int64_t id = ref.y[q]; id < RN && !found; id += 10) {
                        gr_xform t;
                        gr_augment_draw(&c.aug, RH, RW, c.seed, ref.bepoch[b], id, &t);
                        bool ok = true;
                        for (int64_t ch = 0; ch < RC && ok; ch++)
                            for (int64_t y = 0; y < RH && ok; y++)
                                for (int64_t x = 0; x < RW && ok; x++) {
                                    int64_t sx = t.flip ? RW - 1 - x : x;
                                    double v = g_rpix[((id * RC + ch) * RH + y) * RW + sx];
                                    ok = ref.x[q * ref.elems + (ch * RH + y) * RW + x] ==
                                         (float)((v - c.mean[ch]) / c.std[ch]);
                                }
                        if (ok) found = true, seen[id]++;
                    }
                    bad += !found;
                }
            }
            bool once = true;
            for (int64_t i = 0; i < RN; i++) once = once && seen[i] == 2;
            CHECK_MSG(bad == 0 && once, "no crop: %lld samples are not their pixels", (long long)bad);
            free(seen);
        }
        for (size_t k = 0; k < GR_ARRAY_LEN(vs); k++) {
            gr_dataset *ds = open_ds(tmp_path(vs[k].file), vs[k].cache);
            if (!ds) continue;
            CHECK(gr_dataset_in_memory(ds) == (vs[k].cache == GR_CACHE_MEMORY));
            CHECK(gr_dataset_dtype(ds) == vs[k].dt && gr_dataset_nhwc(ds) == vs[k].nhwc);
            gr_loader_config cw = c;
            cw.workers = (int)(k % 3), cw.prefetch = 3;
            gr_loader *l2 = open_loader(ds, &cw);
            stream s;
            if (l2 && stream_take(l2, B, 2 * bpe, &s)) {
                CHECK_MSG(stream_same(&ref, 0, &s, 0, 2 * bpe, vs[k].tol), "crop %d: %s differs from uint8 in memory",
                          (int)crops[ci], vs[k].name);
                stream_free(&s);
            }
            gr_loader_close(l2);
            gr_dataset_close(ds);
        }
        stream_free(&ref);
    }
    gr_dataset_close(ref_ds);
}

/* ---- 6. bad input ---- */

/* Takes batches until one fails (at most limit); returns how many were
 * delivered, the failure in *st / *err. */
static int64_t take_until_error(gr_loader *ld, int64_t limit, gr_status *st, gr_error *err) {
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

static void test_truncated(void) {
    /* 64 samples of 3x16x16 uint8, contiguous, the images' bytes last */
    enum { N = 64, C = 3, H = 16, W = 16, S = C * H * W, B = 8 };
    static uint8_t pix[N * S];
    static int64_t lab[N];
    uint64_t s = 99;
    for (int i = 0; i < N * S; i++) pix[i] = (uint8_t)(rng_next(&s) >> 56);
    for (int i = 0; i < N; i++) lab[i] = i % 10;
    const char *good = tmp_path("trunc_src.h5");
    fixture fx = {.dtype = GR_DT_UINT8, .store = STORE_CONTIG, .n = N, .c = C, .h = H, .w = W, .pix = pix,
                  .labels = lab};
    write_fixture(good, &fx);
    int64_t off = 0, bytes = 0;
    images_extent(good, &off, &bytes);
    CHECK_MSG(bytes == N * S && off + bytes == file_size(good),
              "the images' bytes [%lld, +%lld) do not end the file (%lld bytes)", (long long)off, (long long)bytes,
              (long long)file_size(good));
    const int64_t cut = off + (N - 3) * S + S / 2; /* the last 3 samples lose their bytes (the 62nd in part) */

    /* truncated before opening: the open fails, or the first batch touching
     * the lost samples does */
    const char *p = tmp_path("trunc.h5");
    for (int workers = 0; workers <= 2; workers += 2) {
        copy_file(good, p);
        GR_ASSERT(truncate(p, cut) == 0);
        gr_dataset *ds = NULL;
        gr_error err = {0};
        gr_status st = gr_dataset_open_cache(p, "/train", GR_CACHE_NONE, &ds, &err);
        if (st != GR_OK) {
            CHECK(st == GR_ERR_DATA && ds == NULL);
            CHECK_STR_CONTAINS(err.msg, p);
            continue;
        }
        gr_loader_config c = base_cfg(B, false, false, 0);
        c.workers = workers, c.prefetch = 3;
        gr_loader *ld = open_loader(ds, &c);
        if (ld) {
            int64_t got = take_until_error(ld, 2 * N / B, &st, &err);
            CHECK_MSG(got == N / B - 1 && st == GR_ERR_DATA, "workers %d: %lld batches, then status %d (%s)", workers,
                      (long long)got, (int)st, err.msg);
            CHECK_STR_CONTAINS(err.msg, p);
            CHECK_STR_CONTAINS(err.msg, "/train/images");
            gr_loader_close(ld);
        }
        gr_dataset_close(ds);
    }

    /* truncated under an open dataset: the pread path (uncompressed) and the
     * HDF5 path (deflated) report it from gr_loader_next, again on a retry,
     * and the batches before it are intact */
    for (int z = 0; z < 2; z++)
        for (int workers = 0; workers <= 2; workers += 2) {
            const char *src = good;
            if (z) {
                fixture fz = fx;
                fz.store = STORE_DEFLATE, fz.chunk_n = 8;
                src = tmp_path("trunc_srcz.h5");
                write_fixture(src, &fz);
            }
            copy_file(src, p);
            gr_dataset *ds = open_ds(p, GR_CACHE_NONE);
            if (!ds) continue;
            int64_t cut2 = cut;
            if (z) { /* the start of the last chunk's bytes */
                hid_t f = H5Fopen(p, H5F_ACC_RDONLY, H5P_DEFAULT);
                hid_t d = H5Dopen2(f, "/train/images", H5P_DEFAULT);
                hsize_t coord[4] = {N - B, 0, 0, 0}, size = 0;
                haddr_t a = HADDR_UNDEF;
                unsigned mask = 0;
                GR_ASSERT(H5Dget_chunk_info_by_coord(d, coord, &mask, &a, &size) >= 0);
                H5Dclose(d);
                H5Fclose(f);
                cut2 = (int64_t)a + (int64_t)size / 2;
                CHECK((int64_t)(a + size) == file_size(p));
            }
            GR_ASSERT(truncate(p, cut2) == 0);
            gr_loader_config c = base_cfg(B, false, false, 0);
            c.workers = workers, c.prefetch = 3;
            gr_loader *ld = open_loader(ds, &c);
            if (ld) {
                gr_status st;
                gr_error err;
                int64_t got = take_until_error(ld, 2 * N / B, &st, &err);
                CHECK_MSG(got == N / B - 1 && st == GR_ERR_DATA, "%s workers %d: %lld batches, then status %d (%s)",
                          z ? "deflate" : "raw", workers, (long long)got, (int)st, err.msg);
                CHECK_STR_CONTAINS(err.msg, p);
                CHECK_STR_CONTAINS(err.msg, "/train/images");
                gr_batch *b = NULL;
                CHECK(gr_loader_next(ld, &b, &err) == GR_ERR_DATA && b == NULL); /* the retry fails too */
                /* a seek back to the start works again */
                CHECK(gr_loader_seek(ld, 0, 0, &err) == GR_OK);
                CHECK(take_until_error(ld, 2, &st, &err) == 2);
                gr_loader_close(ld);
            }
            gr_dataset_close(ds);
        }
}

/* Random bytes over the middle of a deflated chunk: an error from the loader
 * (or from a memory-cached open), never a crash or wrong success; random
 * bytes anywhere in the file: an error or data, never a crash. */
static void test_corrupt(void) {
    enum { N = 40, C = 3, H = 16, W = 16, S = C * H * W, B = 8 };
    static uint8_t pix[N * S];
    static int64_t lab[N];
    uint64_t s = 5;
    for (int i = 0; i < N * S; i++) pix[i] = (uint8_t)((rng_next(&s) >> 60) + 4 * (i % 7)); /* compressible */
    for (int i = 0; i < N; i++) lab[i] = i % 10;
    const char *good = tmp_path("corrupt_src.h5"), *p = tmp_path("corrupt.h5");
    fixture fx = {.dtype = GR_DT_UINT8, .store = STORE_DEFLATE, .chunk_n = 8, .n = N, .c = C, .h = H, .w = W,
                  .pix = pix, .labels = lab};
    write_fixture(good, &fx);

    hid_t f = H5Fopen(good, H5F_ACC_RDONLY, H5P_DEFAULT);
    hid_t d = H5Dopen2(f, "/train/images", H5P_DEFAULT);
    hsize_t coord[4] = {16, 0, 0, 0}, size = 0; /* the third chunk: samples 16..23 */
    haddr_t a = HADDR_UNDEF;
    unsigned mask = 0;
    GR_ASSERT(H5Dget_chunk_info_by_coord(d, coord, &mask, &a, &size) >= 0);
    H5Dclose(d);
    H5Fclose(f);

    for (int workers = 0; workers <= 2; workers += 2) {
        copy_file(good, p);
        FILE *fp = fopen(p, "r+b");
        GR_ASSERT(fp && fseek(fp, (long)(a + size / 2 - 32), SEEK_SET) == 0);
        uint64_t r = 17;
        for (int i = 0; i < 64; i++) fputc((int)(rng_next(&r) >> 56), fp);
        fclose(fp);
        gr_dataset *ds = open_ds(p, GR_CACHE_NONE);
        if (!ds) continue;
        gr_loader_config c = base_cfg(B, false, false, 0);
        c.workers = workers, c.prefetch = 2;
        gr_loader *ld = open_loader(ds, &c);
        if (ld) {
            gr_status st;
            gr_error err;
            int64_t got = take_until_error(ld, N / B, &st, &err);
            CHECK_MSG(got == 2 && st == GR_ERR_DATA, "workers %d: %lld batches, then status %d (%s)", workers,
                      (long long)got, (int)st, err.msg);
            CHECK_STR_CONTAINS(err.msg, p);
            CHECK_STR_CONTAINS(err.msg, "/train/images");
            gr_loader_close(ld);
        }
        gr_dataset_close(ds);
        /* the memory cache reads everything at open: the open fails */
        gr_error err = {0};
        CHECK(gr_dataset_open_cache(p, "/train", GR_CACHE_MEMORY, &ds, &err) == GR_ERR_DATA && ds == NULL);
        CHECK_STR_CONTAINS(err.msg, p);
        CHECK_STR_CONTAINS(err.msg, "/train/images");
    }

    /* 16 bytes of noise at 24 places over the file */
    const int64_t fsz = file_size(good);
    int64_t failures = 0, fine = 0, unnamed = 0;
    for (int k = 0; k < 24; k++) {
        copy_file(good, p);
        FILE *fp = fopen(p, "r+b");
        GR_ASSERT(fp && fseek(fp, (long)(fsz * (k + 1) / 26), SEEK_SET) == 0);
        uint64_t r = 1000 + (uint64_t)k;
        for (int i = 0; i < 16; i++) fputc((int)(rng_next(&r) >> 56), fp);
        fclose(fp);
        gr_dataset *ds = NULL;
        gr_error err = {0};
        gr_status st = gr_dataset_open_cache(p, "/train", GR_CACHE_NONE, &ds, &err);
        if (st == GR_OK) {
            gr_loader_config c = base_cfg(B, true, false, 1);
            c.workers = 2, c.prefetch = 2;
            gr_loader *ld = NULL;
            st = gr_loader_open(ds, &c, &ld, &err);
            if (st == GR_OK) take_until_error(ld, N / B, &st, &err);
            gr_loader_close(ld);
            gr_dataset_close(ds);
        }
        if (st == GR_OK) fine++;
        else {
            failures++;
            unnamed += st != GR_ERR_DATA || !strstr(err.msg, p);
            if (st != GR_ERR_DATA || !strstr(err.msg, p)) fprintf(stderr, "corrupt at %lld: %d %s\n",
                                                                  (long long)(fsz * (k + 1) / 26), (int)st, err.msg);
        }
    }
    CHECK_MSG(unnamed == 0, "%lld of %lld failures are not exit 3 naming the file", (long long)unnamed,
              (long long)failures);
    CHECK(failures > 0);
}

static void test_crop_too_large(const char *tinyf) {
    gr_dataset *ds = open_ds(tinyf, GR_CACHE_MEMORY);
    if (!ds) return;
    gr_loader_config c = base_cfg(4, false, false, 0);
    gr_loader *ld = NULL;
    gr_error err = {0};
    /* 5x6 padded by 2 is 9x10: crop 9 fits, crop 10 does not (the height) */
    c.aug = (gr_augment){.crop = GR_CROP_RANDOM, .size = 9, .padding = 2};
    CHECK(gr_loader_open(ds, &c, &ld, &err) == GR_OK);
    gr_loader_close(ld);
    ld = NULL;
    c.aug.size = 10;
    CHECK(gr_loader_open(ds, &c, &ld, &err) == GR_ERR_DATA && ld == NULL);
    CHECK_STR_CONTAINS(err.msg, tinyf);
    CHECK_STR_CONTAINS(err.msg, "/train/images");
    CHECK_STR_CONTAINS(err.msg, "crop 10");
    CHECK_STR_CONTAINS(err.msg, "9x10");
    c.aug = (gr_augment){.crop = GR_CROP_RANDOM, .size = 7};
    CHECK(gr_loader_open(ds, &c, &ld, &err) == GR_ERR_DATA && ld == NULL);
    CHECK_STR_CONTAINS(err.msg, "crop 7");
    CHECK_STR_CONTAINS(err.msg, "5x6");
    gr_dataset_close(ds);
}

/* The ready hook fails once, on batch 3 of epoch 0. */
typedef struct fail_hook {
    pthread_mutex_t mu;
    int failures_left;
} fail_hook;

static gr_status failing_ready(gr_batch *b, void *ctx, gr_error *err) {
    fail_hook *h = ctx;
    pthread_mutex_lock(&h->mu);
    bool fail = b->epoch == 0 && b->index == 3 && h->failures_left > 0;
    if (fail) h->failures_left--;
    pthread_mutex_unlock(&h->mu);
    if (fail) return gr_error_set(err, GR_ERR_DEVICE, "ready: copy of batch %lld failed", (long long)b->index);
    return GR_OK;
}

static void test_ready_error(const char *idf) {
    gr_dataset *ds = open_ds(idf, GR_CACHE_MEMORY);
    if (!ds) return;
    enum { B = 8 };
    gr_loader_config c = base_cfg(B, true, false, 42);
    gr_loader *ld = open_loader(ds, &c);
    stream ref;
    bool have = ld && stream_take(ld, B, 8, &ref);
    gr_loader_close(ld);
    if (!have) goto out;
    for (int workers = 0; workers <= 2; workers += 2) {
        fail_hook h = {.failures_left = 1};
        pthread_mutex_init(&h.mu, NULL);
        gr_loader_config cw = c;
        cw.workers = workers, cw.prefetch = 4, cw.ready = failing_ready, cw.ready_ctx = &h;
        gr_loader *l2 = open_loader(ds, &cw);
        if (l2) {
            gr_status st;
            gr_error err;
            int64_t got = take_until_error(l2, 8, &st, &err);
            CHECK_MSG(got == 3 && st == GR_ERR_DEVICE, "workers %d: %lld batches, then %d", workers, (long long)got,
                      (int)st);
            CHECK_STR_CONTAINS(err.msg, "ready: copy of batch 3 failed");
            /* the failed batch stays current: the next call makes it again */
            stream s;
            if (stream_take(l2, B, 5, &s)) {
                CHECK_MSG(stream_same(&ref, 3, &s, 0, 5, 0), "workers %d: the stream after the hook's failure", workers);
                stream_free(&s);
            }
            gr_loader_close(l2);
        }
        pthread_mutex_destroy(&h.mu);
    }
    stream_free(&ref);
out:
    gr_dataset_close(ds);
}

/* Holding all `prefetch` batches, gr_loader_next is an error, not a wait. */
static void test_hold_too_many(const char *idf) {
    gr_dataset *ds = open_ds(idf, GR_CACHE_MEMORY);
    if (!ds) return;
    for (int workers = 0; workers <= 2; workers += 2) {
        gr_loader_config c = base_cfg(8, false, false, 0);
        c.workers = workers, c.prefetch = 3;
        gr_loader *ld = open_loader(ds, &c);
        if (!ld) continue;
        gr_batch *held[3] = {NULL};
        gr_error err = {0};
        for (int k = 0; k < 3; k++) CHECK(gr_loader_next(ld, &held[k], &err) == GR_OK && held[k]);
        for (int k = 0; k < 3; k++) CHECK(held[k] && held[k]->index == k && held[k]->x[0] == (float)(8 * k));
        gr_batch *extra = NULL;
        const double t0 = gr_now();
        gr_status st = gr_loader_next(ld, &extra, &err);
        CHECK(st != GR_OK && extra == NULL && gr_now() - t0 < 1.0);
        CHECK_STR_CONTAINS(err.msg, "held");
        /* the held batches are intact; releasing the oldest lets the stream go on */
        for (int k = 0; k < 3; k++) CHECK(held[k] && held[k]->x[0] == (float)(8 * k) && held[k]->y[0] == 24 * k + 1);
        gr_loader_release(ld, held[0]);
        CHECK(gr_loader_next(ld, &extra, &err) == GR_OK && extra && extra->index == 3 && extra->x[0] == 24.0f);
        gr_loader_release(ld, extra);
        gr_loader_release(ld, held[1]);
        gr_loader_release(ld, held[2]);
        gr_loader_close(ld);

        /* batches may come back in any order: with prefetch 2, holding the
         * first and returning the second leaves room for the third */
        c.prefetch = 2;
        ld = open_loader(ds, &c);
        if (!ld) continue;
        gr_batch *b0 = NULL, *b1 = NULL, *b2 = NULL;
        CHECK(gr_loader_next(ld, &b0, &err) == GR_OK && gr_loader_next(ld, &b1, &err) == GR_OK);
        gr_loader_release(ld, b1);
        CHECK_MSG(gr_loader_next(ld, &b2, &err) == GR_OK && b2 && b2->index == 2 && b2->x[0] == 16.0f,
                  "workers %d: %s", workers, err.msg);
        CHECK(b0 && b0->index == 0 && b0->x[0] == 0.0f); /* still intact */
        gr_loader_release(ld, b2);
        /* a seek with a batch held, then the next batch */
        CHECK(gr_loader_seek(ld, 0, 16, &err) == GR_OK);
        CHECK(gr_loader_next(ld, &b2, &err) == GR_OK && b2 && b2->index == 2 && b2->x[0] == 16.0f);
        gr_loader_release(ld, b2);
        gr_loader_release(ld, b0);
        gr_loader_close(ld);
    }
    gr_dataset_close(ds);
}

/* ---- 7. threads: the hook, the allocator, closing with work in flight ---- */

typedef struct alloc_track {
    pthread_mutex_t mu;
    int64_t allocs, frees, bad_frees;
    void *live[64];
    int nlive;
} alloc_track;

static void *track_alloc(size_t bytes, void *ctx) {
    alloc_track *t = ctx;
    void *p = malloc(bytes);
    pthread_mutex_lock(&t->mu);
    t->allocs++;
    GR_ASSERT(t->nlive < 64);
    t->live[t->nlive++] = p;
    pthread_mutex_unlock(&t->mu);
    return p;
}

static void track_free(void *p, void *ctx) {
    alloc_track *t = ctx;
    pthread_mutex_lock(&t->mu);
    t->frees++;
    int k = 0;
    while (k < t->nlive && t->live[k] != p) k++;
    const bool found = k < t->nlive;
    if (found) t->live[k] = t->live[--t->nlive];
    else t->bad_frees++;
    pthread_mutex_unlock(&t->mu);
    if (found) free(p);
}

static bool track_owns(alloc_track *t, const void *p) {
    pthread_mutex_lock(&t->mu);
    bool found = false;
    for (int k = 0; k < t->nlive && !found; k++) found = t->live[k] == p;
    pthread_mutex_unlock(&t->mu);
    return found;
}

/* Per (epoch, index): hook calls, and the hook marks the batch (b->device). */
typedef struct mark_hook {
    pthread_mutex_t mu;
    int64_t bpe, calls;
    int64_t per_batch[256];
    int sleep_ms;
} mark_hook;

static gr_status marking_ready(gr_batch *b, void *ctx, gr_error *err) {
    (void)err;
    mark_hook *h = ctx;
    if (h->sleep_ms) sleep_ms(h->sleep_ms);
    const int64_t seq = b->epoch * h->bpe + b->index;
    pthread_mutex_lock(&h->mu);
    h->calls++;
    if (seq >= 0 && seq < 256) h->per_batch[seq]++;
    pthread_mutex_unlock(&h->mu);
    b->device = (void *)(uintptr_t)(seq + 1);
    return GR_OK;
}

static void test_hook_and_alloc(const char *idf) {
    gr_dataset *ds = open_ds(idf, GR_CACHE_MEMORY);
    if (!ds) return;
    enum { B = 8, NB = 30 };
    for (int workers = 0; workers <= 3; workers += 3) {
        alloc_track at = {.allocs = 0};
        mark_hook mh = {.bpe = (ID_N + B - 1) / B};
        pthread_mutex_init(&at.mu, NULL);
        pthread_mutex_init(&mh.mu, NULL);
        gr_loader_config c = base_cfg(B, true, false, 8);
        c.workers = workers, c.prefetch = 3;
        c.host_alloc = track_alloc, c.host_free = track_free, c.alloc_ctx = &at;
        c.ready = marking_ready, c.ready_ctx = &mh;
        gr_loader *ld = open_loader(ds, &c);
        if (!ld) continue;
        CHECK(at.allocs >= 2);
        int64_t unmarked = 0, foreign = 0, twice = 0;
        for (int64_t k = 0; k < NB; k++) {
            gr_batch *b = NULL;
            gr_error err = {0};
            if (gr_loader_next(ld, &b, &err) != GR_OK) {
                CHECK_MSG(false, "%s", err.msg);
                break;
            }
            const int64_t seq = b->epoch * mh.bpe + b->index;
            unmarked += seq != k || b->device != (void *)(uintptr_t)(k + 1);
            foreign += !track_owns(&at, b->x) || !track_owns(&at, b->y);
            pthread_mutex_lock(&mh.mu);
            twice += mh.per_batch[k] != 1;
            pthread_mutex_unlock(&mh.mu);
            b->device = NULL;
            gr_loader_release(ld, b);
        }
        CHECK_MSG(unmarked == 0 && twice == 0, "workers %d: %lld batches delivered before their hook, %lld hooked "
                  "other than once", workers, (long long)unmarked, (long long)twice);
        CHECK_MSG(foreign == 0, "workers %d: %lld batches not in host_alloc memory", workers, (long long)foreign);
        const int64_t allocs_open = at.allocs;
        gr_loader_close(ld);
        /* made ahead at most the ring's worth; every buffer from host_alloc freed by host_free */
        if (workers == 0) CHECK(mh.calls == NB);
        else CHECK(mh.calls >= NB && mh.calls <= NB + 3);
        CHECK(at.allocs == allocs_open && at.frees == at.allocs && at.bad_frees == 0 && at.nlive == 0);
        pthread_mutex_destroy(&at.mu);
        pthread_mutex_destroy(&mh.mu);
    }
    gr_dataset_close(ds);
}

/* Closing while workers are inside a slow hook, with a batch held, right
 * after a seek, or before any batch: returns promptly, frees everything. */
static void test_close_busy(const char *rndf) {
    gr_dataset *ds = open_ds(rndf, GR_CACHE_NONE);
    if (!ds) return;
    for (int mode = 0; mode < 4; mode++) {
        alloc_track at = {.allocs = 0};
        mark_hook mh = {.bpe = 1000, .sleep_ms = 20};
        pthread_mutex_init(&at.mu, NULL);
        pthread_mutex_init(&mh.mu, NULL);
        gr_loader_config c = aug_cfg(5, GR_CROP_RESIZED, 1);
        c.workers = 4, c.prefetch = 4;
        c.host_alloc = track_alloc, c.host_free = track_free, c.alloc_ctx = &at;
        c.ready = marking_ready, c.ready_ctx = &mh;
        gr_loader *ld = open_loader(ds, &c);
        if (!ld) continue;
        gr_batch *b = NULL;
        gr_error err = {0};
        if (mode >= 1) CHECK(gr_loader_next(ld, &b, &err) == GR_OK);
        if (mode == 2) { /* release, then seek away while the workers fill */
            gr_loader_release(ld, b);
            CHECK(gr_loader_seek(ld, 3, 10, &err) == GR_OK);
        }
        if (mode == 3) gr_loader_release(ld, b);
        const double t0 = gr_now();
        gr_loader_close(ld); /* mode 1 closes with the batch still held */
        CHECK_MSG(gr_now() - t0 < 2.0, "mode %d: close took %.2f s", mode, gr_now() - t0);
        CHECK(at.frees == at.allocs && at.bad_frees == 0 && at.nlive == 0);
        pthread_mutex_destroy(&at.mu);
        pthread_mutex_destroy(&mh.mu);
    }
    gr_dataset_close(ds);
}

/* ---- 8. wait time ---- */

static gr_status slow_ready(gr_batch *b, void *ctx, gr_error *err) {
    (void)b, (void)err;
    sleep_ms(*(int *)ctx);
    return GR_OK;
}

static void test_wait(const char *idf) {
    gr_dataset *ds = open_ds(idf, GR_CACHE_MEMORY);
    if (!ds) return;
    int hook_ms = 5;
    enum { NB = 10, CONSUMER_MS = 50 };
    /* no workers: every batch is made inside next, so the wait grows by at
     * least the hook's sleep each time */
    gr_loader_config c = base_cfg(8, true, false, 1);
    c.ready = slow_ready, c.ready_ctx = &hook_ms;
    gr_loader *ld = open_loader(ds, &c);
    if (ld) {
        CHECK(gr_loader_wait_s(ld) == 0);
        double prev = 0;
        int64_t grew = 0;
        for (int k = 0; k < NB; k++) {
            gr_batch *b = NULL;
            gr_error err = {0};
            CHECK(gr_loader_next(ld, &b, &err) == GR_OK);
            gr_loader_release(ld, b);
            double w = gr_loader_wait_s(ld);
            grew += w >= prev + hook_ms * 1e-3 * 0.9;
            prev = w;
        }
        CHECK_MSG(grew == NB && prev >= NB * hook_ms * 1e-3 * 0.9, "workers 0: wait %.4f s over %d batches", prev, NB);
        gr_loader_close(ld);
    }
    /* two workers and a consumer slower than they are: after the first
     * batch, next hardly waits */
    c.workers = 2, c.prefetch = 3;
    ld = open_loader(ds, &c);
    if (ld) {
        double after_first = 0;
        for (int k = 0; k < NB; k++) {
            gr_batch *b = NULL;
            gr_error err = {0};
            CHECK(gr_loader_next(ld, &b, &err) == GR_OK);
            if (k == 0) after_first = gr_loader_wait_s(ld);
            sleep_ms(CONSUMER_MS);
            gr_loader_release(ld, b);
        }
        double w = gr_loader_wait_s(ld) - after_first;
        CHECK_MSG(w < CONSUMER_MS * 1e-3, "workers 2: waited %.4f s over %d batches after the first", w, NB - 1);
        gr_loader_close(ld);
    }
    gr_dataset_close(ds);
}

int main(void) {
    mkdir(GR_TEST_TMP, 0755);
    make_random_pixels();
    /* tmp_path's buffers are reused: keep copies */
    char *idf = gr_xstrdup(make_id_file());
    char *rndf = gr_xstrdup(write_random("rnd.h5", GR_DT_UINT8, false, STORE_CONTIG, 0));
    char *tinyf = gr_xstrdup(make_tiny_file());
    test_order(idf);
    test_sharding(idf);
    test_seek(rndf);
    test_seek_keeps_prefetch(rndf);
    test_augment_loader(tinyf);
    test_augment_draws();
    test_bilinear();
    test_storage();
    test_truncated();
    test_corrupt();
    test_crop_too_large(tinyf);
    test_ready_error(idf);
    test_hold_too_many(idf);
    test_hook_and_alloc(idf);
    test_close_busy(rndf);
    test_wait(idf);
    free(idf);
    free(rndf);
    free(tinyf);
    return gr_test_report();
}
