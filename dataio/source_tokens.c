/* source_tokens.c — a token split as a source of fixed windows (source.h's
 * gr_source_tokens): the 1-D dataset `tokens` of a group, cut into
 * non-overlapping windows of T + 1 tokens, consecutive windows sharing one
 * token, as llm.c walks its token files. Sample i is tokens[i T, i T + T + 1),
 * served as two views of it: `tokens` its first T, `targets` its last T.
 *
 * The stream is held in memory whole when it fits (the policy of the other
 * sources: gr_dataset_memory_limit, data.cache), checked token by token
 * against the dataset's `vocab_size` at open; else a reader's fetch reads
 * the distinct windows of a batch, one hyperslab per run of consecutive
 * windows, and checks what it read. Tokens stored as uint8 or uint16 are
 * served as uint16; any other integer type is read through int64, checked,
 * and served as int32 (vocab_size is at most 2^31, so every valid id fits). */
#include "source.h"
#include "dataio.h"
#include "h5util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOK_CHUNK_CACHE_BYTES ((size_t)1 << 20) /* HDF5's default per dataset */
#define TOK_LOAD_PIECE ((int64_t)1 << 20)       /* tokens per read at open (wide types) */
#define TOK_VOCAB_MAX ((int64_t)1 << 31)

typedef struct toks {
    char *path, *group, *origin;  /* "data/t.h5", "/train", "/train/tokens" */
    hid_t file, dset;
    int64_t ntok, T, vocab;
    bool wide;                    /* stored other than uint8/uint16: read as int64, served as int32 */
    int esz;                      /* bytes a served token: 2 (uint16) or 4 (int32) */
    uint8_t *mem;                 /* the whole stream (esz each), or NULL: read per fetch */
} toks;

/* A reader's windows of its last fetch (on-disk streams). */
typedef struct toks_rows {
    int64_t *sorted;              /* distinct window indices, ascending */
    int64_t n, cap;
    int64_t *off;                 /* per sorted window: its first token's element offset in raw */
    int64_t off_cap;
    uint8_t *raw;                 /* the runs of windows read, back to back */
    size_t raw_cap;
    int64_t *wide;                /* int64 scratch of a run (wide types) */
    size_t wide_cap;
} toks_rows;

static const gr_source_ops toks_ops;

static void toks_free(toks *t) {
    if (!t) return;
    if (t->dset >= 0) H5Dclose(t->dset);
    if (t->file >= 0) H5Fclose(t->file);
    gr_aligned_free(t->mem);
    free(t->path);
    free(t->group);
    free(t->origin);
    free(t);
}

/* Checks n tokens (int64 when wide, else uint16) stored from position
 * `first`: each in [0, vocab). */
static gr_status toks_check(const toks *t, const void *v, int64_t first, int64_t n, gr_error *err) {
    for (int64_t i = 0; i < n; i++) {
        const int64_t x = t->wide ? ((const int64_t *)v)[i] : (int64_t)((const uint16_t *)v)[i];
        if (x < 0 || x >= t->vocab)
            return gr_error_set(err, GR_ERR_DATA, "%s: %s: token %lld at position %lld is %s %lld", t->path, t->origin,
                                (long long)x, (long long)(first + i), x < 0 ? "negative; ids are in [0, vocab_size)," :
                                ">= vocab_size", (long long)t->vocab);
    }
    return GR_OK;
}

/* Reads tokens [first, first + n) into dst: esz-byte served tokens, checked;
 * wide types through *scratch (grown to n int64). */
static gr_status toks_read(const toks *t, int64_t first, int64_t n, uint8_t *dst, int64_t **scratch, size_t *cap,
                           gr_error *err) {
    gr_status st = GR_OK;
    hid_t fsp = -1, msp = -1;
    const hsize_t start[1] = {(hsize_t)first}, count[1] = {(hsize_t)n};
    void *buf = dst;
    if (t->wide) {
        if ((size_t)n > *cap) {
            *scratch = gr_xrealloc(*scratch, (size_t)n * sizeof **scratch);
            *cap = (size_t)n;
        }
        buf = *scratch;
    }
    GR_H5_CHECK(fsp = H5Dget_space(t->dset), err, "%s: %s: cannot read shape", t->path, t->origin);
    GR_H5_CHECK(H5Sselect_hyperslab(fsp, H5S_SELECT_SET, start, NULL, count, NULL), err, "%s: %s: selection failed",
                t->path, t->origin);
    GR_H5_CHECK(msp = H5Screate_simple(1, count, NULL), err, "%s: %s: selection failed", t->path, t->origin);
    GR_H5_CHECK(H5Dread(t->dset, t->wide ? H5T_NATIVE_INT64 : H5T_NATIVE_UINT16, msp, fsp, H5P_DEFAULT, buf), err,
                "%s: %s: reading tokens %lld-%lld failed (truncated or corrupt file?)", t->path, t->origin,
                (long long)first, (long long)(first + n - 1));
    if ((st = toks_check(t, buf, first, n, err)) != GR_OK) goto fail;
    if (t->wide)
        for (int64_t i = 0; i < n; i++) ((int32_t *)(void *)dst)[i] = (int32_t)(*scratch)[i];
fail:
    if (msp >= 0) H5Sclose(msp);
    if (fsp >= 0) H5Sclose(fsp);
    return st;
}

/* The dataset's type, shape and vocab_size attribute into t. */
static gr_status toks_describe(toks *t, gr_error *err) {
    gr_status st = GR_OK;
    hid_t type = -1, sp = -1, a = -1, asp = -1, atype = -1;
    GR_H5_CHECK(sp = H5Dget_space(t->dset), err, "%s: %s: cannot read shape", t->path, t->origin);
    hsize_t dims[1];
    if (H5Sget_simple_extent_ndims(sp) != 1) {
        st = gr_error_set(err, GR_ERR_DATA, "%s: %s: rank %d; a token dataset is 1-D [N]", t->path, t->origin,
                          H5Sget_simple_extent_ndims(sp));
        goto fail;
    }
    GR_H5_CHECK(H5Sget_simple_extent_dims(sp, dims, NULL), err, "%s: %s: cannot read shape", t->path, t->origin);
    GR_H5_CHECK(type = H5Dget_type(t->dset), err, "%s: %s: cannot read type", t->path, t->origin);
    if (H5Tget_class(type) != H5T_INTEGER) {
        char tname[64];
        gr_h5_describe_type(type, tname, sizeof tname);
        st = gr_error_set(err, GR_ERR_DATA, "%s: %s: dtype %s; token ids are integers (uint16, or uint32 above "
                          "65536 ids)", t->path, t->origin, tname);
        goto fail;
    }
    t->wide = !(H5Tget_sign(type) == H5T_SGN_NONE && H5Tget_size(type) <= 2);
    t->esz = t->wide ? 4 : 2;
    t->ntok = (int64_t)GR_MIN(dims[0], (hsize_t)INT64_MAX / 8);
    const htri_t ex = H5Aexists(t->dset, "vocab_size");
    GR_H5_CHECK(ex, err, "%s: %s: cannot read its attributes", t->path, t->origin);
    if (!ex) {
        st = gr_error_set(err, GR_ERR_DATA, "%s: %s: no attribute vocab_size (a token dataset carries its "
                          "vocabulary's size, as `gpurun data text` and `data tokens` write it)", t->path, t->origin);
        goto fail;
    }
    GR_H5_CHECK(a = H5Aopen(t->dset, "vocab_size", H5P_DEFAULT), err, "%s: %s: attribute vocab_size: cannot open",
                t->path, t->origin);
    GR_H5_CHECK(asp = H5Aget_space(a), err, "%s: %s: attribute vocab_size: cannot read", t->path, t->origin);
    GR_H5_CHECK(atype = H5Aget_type(a), err, "%s: %s: attribute vocab_size: cannot read", t->path, t->origin);
    if (H5Tget_class(atype) != H5T_INTEGER || H5Sget_simple_extent_npoints(asp) != 1) {
        st = gr_error_set(err, GR_ERR_DATA, "%s: %s: attribute vocab_size: expected one integer", t->path, t->origin);
        goto fail;
    }
    GR_H5_CHECK(H5Aread(a, H5T_NATIVE_INT64, &t->vocab), err, "%s: %s: attribute vocab_size: cannot read", t->path,
                t->origin);
    if (t->vocab < 1 || t->vocab > TOK_VOCAB_MAX)
        st = gr_error_set(err, GR_ERR_DATA, "%s: %s: vocab_size %lld; expected 1..2^31 (ids are int32)", t->path,
                          t->origin, (long long)t->vocab);
fail:
    if (atype >= 0) H5Tclose(atype);
    if (asp >= 0) H5Sclose(asp);
    if (a >= 0) H5Aclose(a);
    if (sp >= 0) H5Sclose(sp);
    if (type >= 0) H5Tclose(type);
    return st;
}

/* The whole stream into memory (data.cache), checked. */
static gr_status toks_load(toks *t, gr_cache_mode cache, gr_error *err) {
    const bool fits = t->ntok <= gr_dataset_memory_limit() / t->esz;
    if (cache == GR_CACHE_NONE || (cache == GR_CACHE_AUTO && !fits)) return GR_OK;
    const size_t bytes = (size_t)t->ntok * (size_t)t->esz;
    if ((size_t)t->ntok > (SIZE_MAX / 2) / (size_t)t->esz || !(t->mem = gr_aligned_alloc(bytes)))
        return gr_error_set(err, GR_ERR_OOM, "%s: %s: out of memory: %zu bytes to hold the tokens%s", t->path,
                            t->origin, bytes,
                            cache == GR_CACHE_MEMORY ? " (data.cache: memory; set none to read from the file)" : "");
    int64_t *scratch = NULL;
    size_t cap = 0;
    gr_status st = GR_OK;
    const int64_t piece = t->wide ? TOK_LOAD_PIECE : t->ntok;
    for (int64_t first = 0; first < t->ntok && st == GR_OK; first += piece)
        st = toks_read(t, first, GR_MIN(piece, t->ntok - first), t->mem + (size_t)first * (size_t)t->esz, &scratch,
                       &cap, err);
    free(scratch);
    return st;
}

gr_source *gr_source_tokens(const char *path, const char *group, int64_t seq_len, gr_cache_mode cache,
                            gr_error *err) {
    gr_h5_init();
    struct stat sb;
    if (gr_h5_check_input(path, &sb, err) != GR_OK) return NULL;
    toks *t = gr_xcalloc(1, sizeof *t);
    gr_source *s = gr_xcalloc(1, sizeof *s);
    t->file = t->dset = -1;
    t->path = gr_xstrdup(path);
    t->group = gr_h5_normalize_group(group);
    t->origin = gr_h5_join(t->group, "tokens");
    t->T = seq_len;
    s->ops = &toks_ops;
    s->impl = t;
    s->path = t->path;
    gr_status st = GR_OK;
    if (seq_len < 1 || seq_len > GR_SOURCE_TOKENS_MAX_T) {
        st = gr_error_set(err, GR_ERR_USAGE, "%s: %s: seq_len %lld; expected 1..%lld", path, t->origin,
                          (long long)seq_len, (long long)GR_SOURCE_TOKENS_MAX_T);
        goto fail;
    }
    if ((t->file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT)) < 0) {
        st = gr_h5_fail(err, GR_ERR_DATA, "%s: not an HDF5 file or corrupt", path);
        goto fail;
    }
    const htri_t ex = gr_h5_path_exists(t->file, t->origin);
    if (ex <= 0) {
        st = ex < 0 ? gr_h5_fail(err, GR_ERR_DATA, "%s: %s: cannot look up (corrupt file?)", path, t->origin)
                    : gr_error_set(err, GR_ERR_DATA, "%s: %s: no such dataset", path, t->origin);
        goto fail;
    }
    if ((t->dset = H5Dopen2(t->file, t->origin, H5P_DEFAULT)) < 0) {
        st = gr_h5_fail(err, GR_ERR_DATA, "%s: %s: cannot open as a dataset", path, t->origin);
        goto fail;
    }
    if ((st = toks_describe(t, err)) != GR_OK) goto fail;
    s->n = t->ntok >= 1 ? (t->ntok - 1) / t->T : 0;
    if (s->n < 1) {
        st = gr_error_set(err, GR_ERR_DATA, "%s: %s: %lld tokens, fewer than seq_len + 1 = %lld: not one window "
                          "(data.seq_len)", path, t->origin, (long long)t->ntok, (long long)t->T + 1);
        goto fail;
    }
    static const char *const names[2] = {"tokens", "targets"};
    for (int k = 0; k < 2; k++) {
        gr_field *f = &s->fields[k];
        f->name = names[k];
        f->origin = t->origin;
        f->type = t->wide ? GR_FT_INT32 : GR_FT_UINT16;
        f->rank = 1;
        f->shape[0] = t->T;
    }
    s->nfields = 2;
    if ((st = toks_load(t, cache, err)) != GR_OK) goto fail;
    return s;
fail:
    toks_free(t);
    free(s);
    return NULL;
}

static void *toks_reader_new(gr_source *s) {
    (void)s;
    return gr_xcalloc(1, sizeof(toks_rows));
}

static void toks_reader_free(void *state) {
    toks_rows *r = state;
    if (!r) return;
    free(r->sorted);
    free(r->off);
    free(r->wide);
    gr_aligned_free(r->raw);
    free(r);
}

static gr_status toks_fetch(gr_source *s, void *state, const int64_t *idx, int64_t n, gr_error *err) {
    const toks *t = s->impl;
    toks_rows *r = state;
    for (int64_t i = 0; i < n; i++)
        if (idx[i] < 0 || idx[i] >= s->n)
            return gr_error_set(err, GR_ERR_INTERNAL, "%s: %s: window index %lld is outside [0, %lld)", t->path,
                                t->origin, (long long)idx[i], (long long)s->n);
    if (t->mem || n == 0) return GR_OK; /* all in memory: checked at open */
    gr_h5_init();
    const int64_t m = r->n = gr_rows_sorted_distinct(idx, n, &r->sorted, &r->cap);
    if (m > r->off_cap) {
        r->off = gr_xrealloc(r->off, (size_t)m * sizeof *r->off);
        r->off_cap = m;
    }
    const size_t need = (size_t)m * (size_t)(t->T + 1) * (size_t)t->esz;
    if (need > r->raw_cap) {
        gr_aligned_free(r->raw);
        r->raw = gr_aligned_alloc(need);
        r->raw_cap = r->raw ? need : 0;
        if (!r->raw)
            return gr_error_set(err, GR_ERR_OOM, "%s: %s: out of memory: %zu bytes for a batch", t->path, t->origin,
                                need);
    }
    int64_t used = 0; /* elements of raw filled */
    for (int64_t i = 0; i < m;) {
        int64_t j = i;
        while (j + 1 < m && r->sorted[j + 1] == r->sorted[j] + 1) j++;
        const int64_t first = r->sorted[i] * t->T, count = (j - i + 1) * t->T + 1;
        gr_status st = toks_read(t, first, count, r->raw + (size_t)used * (size_t)t->esz, &r->wide, &r->wide_cap, err);
        if (st != GR_OK) return st;
        for (int64_t k = i; k <= j; k++) r->off[k] = used + (k - i) * t->T;
        used += count;
        i = j + 1;
    }
    return GR_OK;
}

static const void *toks_view(const gr_source *s, const void *state, int64_t idx, int f, size_t *bytes) {
    const toks *t = s->impl;
    *bytes = (size_t)t->T * (size_t)t->esz;
    const int64_t shift = f; /* targets: the window's tokens from its second */
    if (t->mem) return t->mem + (size_t)(idx * t->T + shift) * (size_t)t->esz;
    const toks_rows *r = state;
    int64_t lo = 0, hi = r->n - 1;
    while (lo < hi) {
        const int64_t mid = lo + (hi - lo) / 2;
        if (r->sorted[mid] < idx) lo = mid + 1;
        else hi = mid;
    }
    GR_ASSERT(r->n > 0 && r->sorted[lo] == idx);
    return r->raw + (size_t)(r->off[lo] + shift) * (size_t)t->esz;
}

static size_t toks_reader_bytes(const gr_source *s, int64_t batch) {
    const toks *t = s->impl;
    if (t->mem) return 0;
    const size_t window = (size_t)(t->T + 1);
    return (size_t)batch * (window * (size_t)t->esz + 2 * sizeof(int64_t) + (t->wide ? window * sizeof(int64_t) : 0));
}

static void toks_close(gr_source *s) {
    toks_free(s->impl);
    free(s);
}

static const gr_source_ops toks_ops = {
    .reader_new = toks_reader_new,
    .reader_free = toks_reader_free,
    .fetch = toks_fetch,
    .view = toks_view,
    .reader_bytes = toks_reader_bytes,
    .close = toks_close,
};

int64_t gr_source_tokens_vocab(const gr_source *s) {
    return s && s->ops == &toks_ops ? ((const toks *)s->impl)->vocab : 0;
}

size_t gr_source_tokens_host_bytes(const gr_source *s) {
    if (!s || s->ops != &toks_ops) return 0;
    const toks *t = s->impl;
    const size_t all = (size_t)t->ntok * (size_t)t->esz;
    return t->mem ? all : GR_MIN(all, TOK_CHUNK_CACHE_BYTES);
}

int gr_source_tokens_probe(const char *path, const char *group) {
    struct stat sb;
    if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode)) return -1;
    gr_h5_init();
    int rc = -1;
    char *g = gr_h5_normalize_group(group), *name = gr_h5_join(g, "tokens");
    hid_t file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT), d = -1, sp = -1, obj = -1;
    htri_t ex = file >= 0 ? gr_h5_path_exists(file, g) : -1;
    if (ex <= 0) goto done; /* no file or no group: the opener says so */
    rc = 0;
    if (gr_h5_path_exists(file, name) <= 0) goto done;
    obj = H5Oopen(file, name, H5P_DEFAULT);
    if (obj >= 0 && H5Iget_type(obj) == H5I_DATASET && (d = H5Dopen2(file, name, H5P_DEFAULT)) >= 0 && (sp = H5Dget_space(d)) >= 0)
        rc = H5Sget_simple_extent_ndims(sp) == 1;
done:
    if (sp >= 0) H5Sclose(sp);
    if (d >= 0) H5Dclose(d);
    if (obj >= 0) H5Oclose(obj);
    if (file >= 0) H5Fclose(file);
    free(name);
    free(g);
    return rc;
}
