/* test_source_tokens.c — unit tests for the token-window source
 * (dataio/source.h, gr_source_tokens) and the loader over it:
 *   1. windows: sample i is tokens[i T, i T + T + 1), field `tokens` its
 *      first T and `targets` its last T (shifted by one), N = floor((n - 1) /
 *      T) at the edges; uint16 storage served as uint16, uint32 as int32; the
 *      same bytes held in memory and read from the file, for a batch fetched
 *      with repeats and runs of consecutive windows in any order;
 *   2. the vocab check: a token >= vocab_size (or negative) is GR_ERR_DATA
 *      naming the file, the dataset and the position, at open in memory, at
 *      the fetch of a window holding it from the file (the windows around it
 *      still read); a missing vocab_size attribute, no dataset, a float or
 *      2-D dataset, too few tokens for one window;
 *   3. gr_source_tokens_probe and gr_source_tokens_vocab;
 *   4. the loader: int32 tokens and targets, sequential without shuffle,
 *      with shuffle a pure function of (seed, epoch, rank, world): the same
 *      stream for 0 or 2 workers, in memory or from the file, after a seek,
 *      every window once an epoch, another seed another order, ranks
 *      disjoint;
 *   5. `data text` and `data tokens` (convert.h) read back through the
 *      source: the text's bytes, an llm.c-headered and a headerless .bin. */
#include "../dataio/convert.h"
#include "../dataio/dataio.h"
#include "gr_test.h"

#include <hdf5.h>
#include <stdlib.h>

#define T 16

static const char *tmp_path(const char *name) {
    static char buf[4][512];
    static int k;
    char *p = buf[k++ % 4];
    snprintf(p, 512, "%s/tokens_%s", GR_TEST_TMP, name);
    return p;
}

/* A file whose group /train holds `tokens` [n] of file type ft written from
 * data (memory type mt), with vocab_size unless vocab < 0; also /tab, a table. */
static const char *write_tokens(const char *name, hid_t ft, hid_t mt, int64_t n, const void *data, int64_t vocab) {
    const char *path = tmp_path(name);
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    GR_ASSERT(f >= 0);
    hid_t g = H5Gcreate2(f, "/train", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    hsize_t dims[1] = {(hsize_t)n};
    hid_t sp = H5Screate_simple(1, dims, NULL);
    hid_t d = H5Dcreate2(g, "tokens", ft, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    GR_ASSERT(d >= 0 && H5Dwrite(d, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) >= 0);
    if (vocab >= 0) {
        hid_t asp = H5Screate(H5S_SCALAR);
        hid_t a = H5Acreate2(d, "vocab_size", H5T_STD_I64LE, asp, H5P_DEFAULT, H5P_DEFAULT);
        H5Awrite(a, H5T_NATIVE_INT64, &vocab);
        H5Aclose(a);
        H5Sclose(asp);
    }
    H5Dclose(d);
    H5Sclose(sp);
    H5Gclose(g);
    hid_t tab = H5Gcreate2(f, "/tab", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    const float feat[4][2] = {{0}};
    hsize_t d2[2] = {4, 2};
    sp = H5Screate_simple(2, d2, NULL);
    d = H5Dcreate2(tab, "tokens", H5T_IEEE_F32LE, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, feat);
    H5Dclose(d);
    H5Sclose(sp);
    H5Gclose(tab);
    H5Fclose(f);
    return path;
}

/* tokens[p] = p: window i's first token tells i. */
static const char *write_ramp(const char *name, int64_t n) {
    uint16_t *v = gr_xmalloc((size_t)n * sizeof *v);
    for (int64_t p = 0; p < n; p++) v[p] = (uint16_t)p;
    const char *path = write_tokens(name, H5T_STD_U16LE, H5T_NATIVE_UINT16, n, v, 65536);
    free(v);
    return path;
}

static gr_source *open_tok(const char *path, int64_t seq_len, gr_cache_mode cache) {
    gr_error err = {0};
    gr_source *s = gr_source_tokens(path, "/train", seq_len, cache, &err);
    CHECK_MSG(s != NULL, "gr_source_tokens: %s", err.msg);
    return s;
}

/* The error of opening path's /train as windows of seq_len. */
static void expect_open_error(const char *path, int64_t seq_len, gr_cache_mode cache, gr_status code,
                              const char *want) {
    gr_error err = {0};
    gr_source *s = gr_source_tokens(path, "/train", seq_len, cache, &err);
    CHECK_MSG(s == NULL && err.status == code, "%s: opened, or status %d", want, (int)err.status);
    CHECK_STR_CONTAINS(err.msg, want);
    gr_source_close(s);
}

/* ---- 1. windows ---- */

static void test_windows(void) {
    const int64_t n = 1000; /* N = floor(999 / 16) = 62 windows; tokens 993..999 are in none */
    const char *path = write_ramp("ramp.h5", n);
    gr_source *mem = open_tok(path, T, GR_CACHE_MEMORY), *disk = open_tok(path, T, GR_CACHE_NONE);
    if (!mem || !disk) goto done;
    CHECK(mem->n == 62 && disk->n == 62 && mem->nfields == 2);
    CHECK(strcmp(mem->fields[0].name, "tokens") == 0 && strcmp(mem->fields[1].name, "targets") == 0);
    for (int k = 0; k < 2; k++)
        CHECK(mem->fields[k].type == GR_FT_UINT16 && mem->fields[k].rank == 1 && mem->fields[k].shape[0] == T &&
              strcmp(mem->fields[k].origin, "/train/tokens") == 0 && gr_field_bytes(&mem->fields[k]) == 2 * T);
    CHECK(gr_source_tokens_host_bytes(mem) == 2 * (size_t)n && gr_source_tokens_host_bytes(disk) == 2 * (size_t)n);
    gr_source_reader rm, rd;
    gr_source_reader_init(&rm, mem);
    gr_source_reader_init(&rd, disk);
    const int64_t idx[] = {5, 3, 61, 4, 0, 5, 30}; /* repeats, a run 3..5, the last window */
    gr_error err = {0};
    CHECK(gr_source_fetch(&rm, idx, 7, &err) == GR_OK && gr_source_fetch(&rd, idx, 7, &err) == GR_OK);
    bool ok = true, same = true;
    for (int k = 0; k < 7; k++) {
        const int64_t i = idx[k];
        for (int f = 0; f < 2; f++) {
            size_t bm = 0, bd = 0;
            const uint16_t *vm = gr_source_view(&rm, i, f, &bm), *vd = gr_source_view(&rd, i, f, &bd);
            same = same && bm == 2 * T && bd == bm && memcmp(vm, vd, bm) == 0;
            for (int j = 0; j < T; j++) ok = ok && vm[j] == (uint16_t)(i * T + j + f); /* targets: one later */
        }
    }
    CHECK_MSG(ok, "a window's tokens are tokens[i T .. i T + T), its targets one later");
    CHECK_MSG(same, "in memory and from the file: the same bytes");
    const int64_t out[] = {62};
    CHECK(gr_source_fetch(&rd, out, 1, &err) == GR_ERR_INTERNAL);
    CHECK_STR_CONTAINS(err.msg, "window index 62 is outside [0, 62)");
    gr_source_reader_free(&rm);
    gr_source_reader_free(&rd);
    /* N = floor((n - 1) / T) at its edges */
    static const struct { int64_t n, N; } edge[] = {{17, 1}, {32, 1}, {33, 2}, {48, 2}, {49, 3}};
    for (size_t e = 0; e < GR_ARRAY_LEN(edge); e++) {
        char name[32];
        snprintf(name, sizeof name, "edge%lld.h5", (long long)edge[e].n);
        gr_source *s = open_tok(write_ramp(name, edge[e].n), T, GR_CACHE_AUTO);
        CHECK_MSG(s && s->n == edge[e].N, "n %lld: N %lld", (long long)edge[e].n, s ? (long long)s->n : -1ll);
        gr_source_close(s);
    }
    expect_open_error(write_ramp("r16.h5", 16), T, GR_CACHE_AUTO, GR_ERR_DATA,
                      "/train/tokens: 16 tokens, fewer than seq_len + 1 = 17: not one window");
    expect_open_error(write_ramp("r100.h5", 100), 0, GR_CACHE_AUTO, GR_ERR_USAGE, "seq_len 0; expected 1..16777216");
    gr_source *one = open_tok(write_ramp("r2.h5", 2), 1, GR_CACHE_AUTO); /* the smallest: one window of 2 tokens */
    CHECK(one && one->n == 1);
    gr_source_close(one);
done:
    gr_source_close(mem);
    gr_source_close(disk);
}

/* uint32 tokens above 65536 ids: served as int32. */
static void test_wide(void) {
    const int64_t n = 200;
    uint32_t v[200];
    for (int64_t p = 0; p < n; p++) v[p] = (uint32_t)(p * 500);
    const char *path = write_tokens("wide.h5", H5T_STD_U32LE, H5T_NATIVE_UINT32, n, v, 100000);
    for (int c = 0; c < 2; c++) {
        gr_source *s = open_tok(path, T, c ? GR_CACHE_NONE : GR_CACHE_MEMORY);
        if (!s) continue;
        CHECK(s->fields[0].type == GR_FT_INT32 && s->fields[1].type == GR_FT_INT32 && s->n == 12);
        CHECK(gr_source_tokens_vocab(s) == 100000);
        gr_source_reader r;
        gr_source_reader_init(&r, s);
        int32_t got[T];
        bool ok = true;
        for (int64_t i = 0; i < s->n; i++)
            for (int f = 0; f < 2; f++) {
                gr_error err = {0};
                ok = ok && gr_source_read(&r, i, f, got, &err) == GR_OK;
                for (int j = 0; j < T; j++) ok = ok && got[j] == (int32_t)((i * T + j + f) * 500);
            }
        CHECK_MSG(ok, "uint32 tokens as int32 windows (%s)", c ? "file" : "memory");
        gr_source_reader_free(&r);
        gr_source_close(s);
    }
}

/* ---- 2. the vocab check and other errors ---- */

static void test_errors(void) {
    const int64_t n = 20000;
    uint16_t *v = gr_xmalloc((size_t)n * sizeof *v);
    for (int64_t p = 0; p < n; p++) v[p] = (uint16_t)(p % 256);
    v[12345] = 301;
    const char *path = write_tokens("bad.h5", H5T_STD_U16LE, H5T_NATIVE_UINT16, n, v, 256);
    char want[600];
    snprintf(want, sizeof want, "%s: /train/tokens: token 301 at position 12345 is >= vocab_size 256", path);
    expect_open_error(path, T, GR_CACHE_MEMORY, GR_ERR_DATA, want);
    expect_open_error(path, T, GR_CACHE_AUTO, GR_ERR_DATA, want);
    gr_source *s = open_tok(path, T, GR_CACHE_NONE); /* from the file: found as read */
    if (s) {
        gr_source_reader r;
        gr_source_reader_init(&r, s);
        gr_error err = {0};
        const int64_t fine[] = {770, 0, 773}, holds[] = {771}, run[] = {769, 770, 771};
        CHECK(gr_source_fetch(&r, fine, 3, &err) == GR_OK); /* 770: tokens 12320..12336 */
        CHECK(gr_source_fetch(&r, holds, 1, &err) == GR_ERR_DATA);
        CHECK_STR_CONTAINS(err.msg, want);
        memset(&err, 0, sizeof err);
        CHECK(gr_source_fetch(&r, run, 3, &err) == GR_ERR_DATA);
        CHECK_STR_CONTAINS(err.msg, want);
        gr_source_reader_free(&r);
        gr_source_close(s);
    }
    free(v);
    int32_t neg[40];
    for (int p = 0; p < 40; p++) neg[p] = p == 33 ? -2 : p;
    path = write_tokens("neg.h5", H5T_STD_I32LE, H5T_NATIVE_INT32, 40, neg, 256);
    expect_open_error(path, 4, GR_CACHE_MEMORY, GR_ERR_DATA, "/train/tokens: token -2 at position 33 is negative");
    uint16_t few[40] = {0};
    path = write_tokens("novocab.h5", H5T_STD_U16LE, H5T_NATIVE_UINT16, 40, few, -1);
    snprintf(want, sizeof want, "%s: /train/tokens: no attribute vocab_size", path);
    expect_open_error(path, 4, GR_CACHE_AUTO, GR_ERR_DATA, want);
    float fl[40] = {0};
    path = write_tokens("float.h5", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, 40, fl, 256);
    expect_open_error(path, 4, GR_CACHE_AUTO, GR_ERR_DATA, "/train/tokens: dtype float32; token ids are integers");
    gr_error err = {0};
    s = gr_source_tokens(path, "/tab", 4, GR_CACHE_AUTO, &err);
    CHECK(!s && err.status == GR_ERR_DATA);
    CHECK_STR_CONTAINS(err.msg, "/tab/tokens: rank 2; a token dataset is 1-D [N]");
    s = gr_source_tokens(path, "/nope", 4, GR_CACHE_AUTO, &err);
    CHECK(!s && err.status == GR_ERR_DATA);
    CHECK_STR_CONTAINS(err.msg, "/nope/tokens: no such dataset");
    s = gr_source_tokens(tmp_path("missing.h5"), "/train", 4, GR_CACHE_AUTO, &err);
    CHECK(!s && err.status == GR_ERR_DATA);
    CHECK_STR_CONTAINS(err.msg, "no such file");
}

/* ---- 3. probe and vocab ---- */

static void test_probe(void) {
    const char *path = write_ramp("probe.h5", 100);
    CHECK(gr_source_tokens_probe(path, "/train") == 1);
    CHECK(gr_source_tokens_probe(path, "train/") == 1);
    CHECK(gr_source_tokens_probe(path, "/tab") == 0);   /* tokens [4, 2]: a table's field */
    CHECK(gr_source_tokens_probe(path, "/") == 0);      /* no tokens dataset there */
    CHECK(gr_source_tokens_probe(path, "/nope") == -1);
    CHECK(gr_source_tokens_probe(tmp_path("missing.h5"), "/train") == -1);
    gr_source *s = open_tok(path, 8, GR_CACHE_AUTO);
    CHECK(gr_source_tokens_vocab(s) == 65536);
    gr_source_close(s);
    gr_error err = {0};
    gr_source *tab = gr_source_table(path, "/tab", GR_CACHE_AUTO, &err);
    CHECK(tab && gr_source_tokens_vocab(tab) == 0 && gr_source_tokens_host_bytes(tab) == 0);
    gr_source_close(tab);
}

/* ---- 4. the loader ---- */

static const gr_loader_field tok_fields[2] = {{.name = "tokens", .as = GR_DELIVER_INT32},
                                              {.name = "targets", .as = GR_DELIVER_INT32}};

static gr_loader *open_ld(gr_source *src, bool shuffle, uint64_t seed, int workers, int rank, int world) {
    gr_loader_config c;
    memset(&c, 0, sizeof c);
    c.batch = 4;
    c.shuffle = shuffle;
    c.drop_last = true;
    c.seed = seed;
    c.rank = rank;
    c.world = world;
    c.prefetch = 3;
    c.workers = workers;
    c.fields = tok_fields;
    c.nfields = 2;
    gr_loader *ld = NULL;
    gr_error err = {0};
    CHECK_MSG(gr_loader_open_source(src, &c, &ld, &err) == GR_OK, "gr_loader_open_source: %s", err.msg);
    return ld;
}

/* The window index of each sample of nb batches into w (checking that every
 * sample is a window: tokens i T + j, targets one later, as int32). */
static bool take_windows(gr_loader *ld, int64_t nb, int64_t *w) {
    bool ok = true;
    for (int64_t k = 0; k < nb && ok; k++) {
        gr_batch *b = NULL;
        gr_error err = {0};
        if (gr_loader_next(ld, &b, &err) != GR_OK) {
            CHECK_MSG(false, "gr_loader_next: %s", err.msg);
            return false;
        }
        ok = b->nfields == 2 && b->fields[0].type == GR_FT_INT32 && b->fields[0].rank == 1 &&
             b->fields[0].shape[0] == T && b->fields[1].bytes == 4 * T && b->n == 4;
        for (int64_t s = 0; s < b->n && ok; s++) {
            const int32_t *x = (const int32_t *)b->fields[0].data + s * T, *y = (const int32_t *)b->fields[1].data + s * T;
            w[k * 4 + s] = x[0] / T;
            for (int j = 0; j < T; j++) ok = ok && x[j] == x[0] + j && y[j] == x[j] + 1 && x[0] % T == 0;
        }
        gr_loader_release(ld, b);
    }
    CHECK_MSG(ok, "every sample a window, targets shifted by one");
    return ok;
}

static void test_loader(void) {
    const char *path = write_ramp("loader.h5", 1000); /* 62 windows: 15 batches of 4 an epoch, 2 dropped */
    gr_source *mem = open_tok(path, T, GR_CACHE_MEMORY), *disk = open_tok(path, T, GR_CACHE_NONE);
    if (!mem || !disk) goto done;
    enum { NB = 30 }; /* two epochs */
    int64_t seq[NB * 4], a[NB * 4], b[NB * 4], c[NB * 4], d[NB * 4];
    gr_loader *ls = open_ld(mem, false, 7, 0, 0, 1);
    if (ls && take_windows(ls, NB, seq)) {
        bool ok = true;
        for (int k = 0; k < NB * 4; k++) ok = ok && seq[k] == k % 60;
        CHECK_MSG(ok, "no shuffle: the windows in order, the last partial batch dropped");
    }
    gr_loader_close(ls);
    gr_loader *la = open_ld(mem, true, 7, 0, 0, 1), *lb = open_ld(disk, true, 7, 2, 0, 1);
    gr_loader *lc = open_ld(disk, true, 8, 1, 0, 1);
    if (la && lb && lc && take_windows(la, NB, a) && take_windows(lb, NB, b) && take_windows(lc, NB, c)) {
        CHECK_MSG(memcmp(a, b, sizeof a) == 0, "seed 7: the same windows in memory (0 workers) and from the file (2)");
        CHECK_MSG(memcmp(a, c, sizeof a) != 0, "seed 8: another order");
        CHECK_MSG(memcmp(a, a + 60, 60 * sizeof *a) != 0, "each epoch its own order");
        for (int e = 0; e < 2; e++) {
            int seen[62] = {0};
            bool once = true;
            for (int k = 0; k < 60; k++) once = once && a[e * 60 + k] >= 0 && a[e * 60 + k] < 62 && !seen[a[e * 60 + k]]++;
            CHECK_MSG(once, "epoch %d: no window twice", e);
        }
        gr_error err = {0};
        CHECK(gr_loader_seek(lb, 1, 5 * 4, &err) == GR_OK); /* epoch 1, batch 5: as a resumed run */
        if (take_windows(lb, 10, d)) CHECK_MSG(memcmp(d, a + 60 + 20, 40 * sizeof *d) == 0, "a seek resumes exactly");
    }
    gr_loader_close(la);
    gr_loader_close(lb);
    gr_loader_close(lc);
    gr_loader *r0 = open_ld(mem, true, 7, 0, 0, 2), *r1 = open_ld(disk, true, 7, 1, 1, 2);
    int64_t w0[28], w1[28]; /* 31 windows a rank: 7 batches */
    if (r0 && r1 && take_windows(r0, 7, w0) && take_windows(r1, 7, w1)) {
        bool disjoint = true;
        for (int i = 0; i < 28; i++)
            for (int j = 0; j < 28; j++) disjoint = disjoint && w0[i] != w1[j];
        CHECK_MSG(disjoint, "two ranks: disjoint windows of one epoch");
    }
    gr_loader_close(r0);
    gr_loader_close(r1);
done:
    gr_source_close(mem);
    gr_source_close(disk);
}

/* ---- 5. the converters, read back ---- */

static void test_converters(void) {
    const char *txt = tmp_path("in.txt"), *out = tmp_path("text.h5");
    FILE *f = fopen(txt, "wb");
    uint8_t text[1001];
    for (int i = 0; i < 1001; i++) text[i] = (uint8_t)(i * 37 + 11); /* every byte value, NUL too */
    fwrite(text, 1, sizeof text, f);
    fclose(f);
    const char *from[1] = {txt};
    gr_text_config tc = {.from = from, .nfrom = 1, .val_fraction = 0.1};
    gr_tokens_report rep;
    gr_error err = {0};
    remove(out);
    CHECK_MSG(gr_data_convert_text(&tc, out, false, false, &rep, &err) == GR_OK, "%s", err.msg);
    CHECK(rep.train == 900 && rep.val == 101 && rep.vocab == 256 && strcmp(rep.tokenizer, "bytes") == 0);
    gr_source *s = gr_source_tokens(out, "/val", 10, GR_CACHE_AUTO, &err);
    CHECK_MSG(s && s->n == 10, "%s", err.msg);
    if (s) {
        gr_source_reader r;
        gr_source_reader_init(&r, s);
        uint16_t w[10];
        bool ok = true;
        for (int64_t i = 0; i < s->n; i++)
            for (int f2 = 0; f2 < 2; f2++) {
                ok = ok && gr_source_read(&r, i, f2, w, &err) == GR_OK;
                for (int j = 0; j < 10; j++) ok = ok && w[j] == text[900 + i * 10 + j + f2];
            }
        CHECK_MSG(ok, "/val: the text's last 101 bytes as tokens");
        gr_source_reader_free(&r);
        gr_source_close(s);
    }
    /* an llm.c file and a nanoGPT one */
    const char *bin = tmp_path("llmc.bin"), *raw = tmp_path("raw.bin"), *kout = tmp_path("bin.h5");
    int32_t h[256] = {GR_LLMC_MAGIC, GR_LLMC_VERSION, 50};
    uint16_t tk[50];
    for (int i = 0; i < 50; i++) tk[i] = (uint16_t)(50256 - i * 1000); /* little-endian hosts: the file's order */
    f = fopen(bin, "wb");
    fwrite(h, 4, 256, f);
    fwrite(tk, 2, 50, f);
    fclose(f);
    f = fopen(raw, "wb");
    fwrite(tk, 2, 20, f);
    fclose(f);
    gr_bin_config bc = {.train = bin, .val = raw};
    remove(kout);
    CHECK_MSG(gr_data_convert_tokens(&bc, kout, false, false, &rep, &err) == GR_OK, "%s", err.msg);
    CHECK(rep.train == 50 && rep.val == 20 && rep.vocab == 50257 && strcmp(rep.tokenizer, "gpt2") == 0);
    const char *groups[2] = {"/train", "/val"};
    for (int g = 0; g < 2; g++) {
        s = gr_source_tokens(kout, groups[g], 1, GR_CACHE_AUTO, &err);
        CHECK_MSG(s && s->n == (g ? 19 : 49) && gr_source_tokens_vocab(s) == 50257, "%s", err.msg);
        if (!s) continue;
        gr_source_reader r;
        gr_source_reader_init(&r, s);
        uint16_t x = 0, y = 0;
        bool ok = true;
        for (int64_t i = 0; i < s->n; i++) {
            ok = ok && gr_source_read(&r, i, 0, &x, &err) == GR_OK && gr_source_read(&r, i, 1, &y, &err) == GR_OK;
            ok = ok && x == tk[i] && y == tk[i + 1];
        }
        CHECK_MSG(ok, "%s: the .bin's tokens", groups[g]);
        gr_source_reader_free(&r);
        gr_source_close(s);
    }
}

int main(void) {
    gr_dataset_set_memory_limit(-1);
    test_windows();
    test_wide();
    test_errors();
    test_probe();
    test_loader();
    test_converters();
    return gr_test_report();
}
