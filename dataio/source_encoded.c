/* source_encoded.c — an encoded image split (DESIGN 1.5, `data imagefolder
 * --store jpeg`) as a sample source (source.h's gr_source_encoded): fields
 * `encoded` (a file's bytes, variable), `shape`, `format` and `label`. The
 * small datasets are held in memory and checked at open; a fetch reads each
 * sample's bytes with one pread at the contiguous `encoded` dataset's file
 * offset. No decoding: that is the loader's, to come. */
#include "source.h"
#include "h5util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { FIELD_ENCODED, FIELD_SHAPE, FIELD_FORMAT, FIELD_LABEL };

typedef struct enc_src {
    char *path, *group, *names[5]; /* the datasets' paths, for messages: encoded, offsets, formats, labels, shapes */
    int fd;
    uint64_t base, total;  /* `encoded`'s file offset and size */
    uint64_t *offsets;     /* n + 1 */
    uint16_t *shapes;      /* n * 3 */
    uint8_t *formats;
    int32_t *labels;
} enc_src;

/* A reader: the bytes of the last fetch, sample k's at pos[k]. */
typedef struct enc_reader {
    uint8_t *buf;
    size_t cap;
    int64_t n;
    int64_t *ids;
    size_t *pos;
    int64_t idcap;
} enc_reader;

static void *enc_reader_new(gr_source *s) {
    (void)s;
    return gr_xcalloc(1, sizeof(enc_reader));
}

static void enc_reader_free(void *state) {
    enc_reader *r = state;
    if (!r) return;
    free(r->buf);
    free(r->ids);
    free(r->pos);
    free(r);
}

static gr_status enc_fetch(gr_source *s, void *state, const int64_t *idx, int64_t n, gr_error *err) {
    const enc_src *e = s->impl;
    enc_reader *r = state;
    size_t need = 0;
    for (int64_t k = 0; k < n; k++) {
        if (idx[k] < 0 || idx[k] >= s->n)
            return gr_error_set(err, GR_ERR_DATA, "%s: %s: sample %lld is outside [0, %lld)", e->path, e->group,
                                (long long)idx[k], (long long)s->n);
        need += e->offsets[idx[k] + 1] - e->offsets[idx[k]];
    }
    if (need > r->cap) r->buf = gr_xrealloc(r->buf, r->cap = need);
    if (n > r->idcap) {
        r->ids = gr_xrealloc(r->ids, (size_t)n * sizeof *r->ids);
        r->pos = gr_xrealloc(r->pos, (size_t)n * sizeof *r->pos);
        r->idcap = n;
    }
    size_t at = 0;
    for (int64_t k = 0; k < n; k++) {
        const uint64_t off = e->offsets[idx[k]], len = e->offsets[idx[k] + 1] - off;
        for (size_t got = 0; got < len;) {
            const ssize_t g = pread(e->fd, r->buf + at + got, len - got, (off_t)(e->base + off + got));
            if (g < 0 && errno == EINTR) continue;
            if (g <= 0)
                return gr_error_set(err, GR_ERR_DATA, "%s: %s: sample %lld: read failed: %s", e->path, e->names[0],
                                    (long long)idx[k], g < 0 ? strerror(errno) : "the file ends early");
            got += (size_t)g;
        }
        r->ids[k] = idx[k];
        r->pos[k] = at;
        at += len;
    }
    r->n = n;
    return GR_OK;
}

static const void *enc_view(const gr_source *s, const void *state, int64_t idx, int f, size_t *bytes) {
    const enc_src *e = s->impl;
    const enc_reader *r = state;
    switch (f) {
    case FIELD_SHAPE: *bytes = 3 * sizeof *e->shapes; return e->shapes + 3 * idx;
    case FIELD_FORMAT: *bytes = 1; return e->formats + idx;
    case FIELD_LABEL: *bytes = sizeof *e->labels; return e->labels + idx;
    default: break;
    }
    for (int64_t k = 0; k < r->n; k++)
        if (r->ids[k] == idx) {
            *bytes = e->offsets[idx + 1] - e->offsets[idx];
            return r->buf + r->pos[k];
        }
    GR_ASSERT(!"sample not in the last fetch");
    return NULL;
}

static size_t enc_reader_bytes(const gr_source *s, int64_t batch) {
    const enc_src *e = s->impl;
    return (size_t)batch * (size_t)(e->total / (uint64_t)GR_MAX(s->n, 1) + 2 * sizeof(int64_t));
}

static void enc_free(enc_src *e) {
    if (e->fd >= 0) close(e->fd);
    for (int k = 0; k < 5; k++) free(e->names[k]);
    free(e->path);
    free(e->group);
    free(e->offsets);
    free(e->shapes);
    free(e->formats);
    free(e->labels);
    free(e);
}

static void enc_close(gr_source *s) {
    enc_free(s->impl);
    free(s);
}

static const gr_source_ops enc_ops = {
    .reader_new = enc_reader_new,
    .reader_free = enc_reader_free,
    .fetch = enc_fetch,
    .view = enc_view,
    .reader_bytes = enc_reader_bytes,
    .close = enc_close,
};

/* Reads dataset `name` of grp, of rank `rank` and leading size n (second
 * size 3 for rank 2), converted to mtype, into a new buffer. */
static gr_status enc_read(const enc_src *e, hid_t grp, int which, const char *name, int rank, int64_t *n,
                          hid_t mtype, size_t esz, void **out, gr_error *err) {
    gr_status st = GR_OK;
    hid_t d = -1, sp = -1;
    hsize_t dims[2] = {0, 0};
    *out = NULL;
    GR_H5_CHECK(d = H5Dopen2(grp, name, H5P_DEFAULT), err, "%s: %s: no such dataset (an encoded split holds "
                "encoded, offsets, shapes, formats and labels)", e->path, e->names[which]);
    GR_H5_CHECK(sp = H5Dget_space(d), err, "%s: %s: cannot read shape", e->path, e->names[which]);
    if (H5Sget_simple_extent_ndims(sp) != rank || H5Sget_simple_extent_dims(sp, dims, NULL) < 0 ||
        (*n >= 0 && (int64_t)dims[0] != *n) || (rank == 2 && dims[1] != 3) || dims[0] < 1) {
        st = gr_error_set(err, GR_ERR_DATA, "%s: %s: expected [%s%s], got rank %d [%llu...]", e->path,
                          e->names[which], *n >= 0 ? "the sample count" : "N", rank == 2 ? ", 3" : "",
                          H5Sget_simple_extent_ndims(sp), (unsigned long long)dims[0]);
        goto fail;
    }
    *n = (int64_t)dims[0];
    *out = gr_xmalloc((size_t)dims[0] * (rank == 2 ? 3 : 1) * esz);
    GR_H5_CHECK(H5Dread(d, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, *out), err, "%s: %s: read failed", e->path,
                e->names[which]);
fail:
    if (sp >= 0) H5Sclose(sp);
    if (d >= 0) H5Dclose(d);
    return st;
}

/* Where `encoded` is in the file: contiguous, unfiltered, inside the file. */
static gr_status enc_locate(enc_src *e, hid_t grp, gr_error *err) {
    gr_status st = GR_OK;
    hid_t d = -1, dcpl = -1;
    GR_H5_CHECK(d = H5Dopen2(grp, "encoded", H5P_DEFAULT), err, "%s: %s: no such dataset", e->path, e->names[0]);
    GR_H5_CHECK(dcpl = H5Dget_create_plist(d), err, "%s: %s: cannot read its layout", e->path, e->names[0]);
    const haddr_t a = H5Dget_offset(d);
    const hsize_t bytes = H5Dget_storage_size(d);
    if (H5Pget_layout(dcpl) != H5D_CONTIGUOUS || H5Pget_nfilters(dcpl) != 0 || H5Pget_external_count(dcpl) != 0 ||
        a == HADDR_UNDEF || bytes != e->total) {
        st = gr_error_set(err, GR_ERR_DATA, "%s: %s: expected a contiguous, unfiltered dataset of offsets[N] = %llu "
                          "bytes written in the file", e->path, e->names[0], (unsigned long long)e->total);
        goto fail;
    }
    e->base = a;
fail:
    if (dcpl >= 0) H5Pclose(dcpl);
    if (d >= 0) H5Dclose(d);
    return st;
}

/* Offsets from 0, never decreasing; formats 0 or 1; labels >= 0. */
static gr_status enc_check(const enc_src *e, int64_t n, gr_error *err) {
    if (e->offsets[0] != 0)
        return gr_error_set(err, GR_ERR_DATA, "%s: %s: offsets[0] is %llu, not 0", e->path, e->names[1],
                            (unsigned long long)e->offsets[0]);
    for (int64_t i = 0; i < n; i++) {
        if (e->offsets[i + 1] <= e->offsets[i])
            return gr_error_set(err, GR_ERR_DATA, "%s: %s: sample %lld is empty or offsets decrease there", e->path,
                                e->names[1], (long long)i);
        if (e->formats[i] > 1)
            return gr_error_set(err, GR_ERR_DATA, "%s: %s/formats: sample %lld has format %d (0 JPEG, 1 PNG)",
                                e->path, e->group, (long long)i, e->formats[i]);
        if (e->labels[i] < 0)
            return gr_error_set(err, GR_ERR_DATA, "%s: %s: sample %lld has label %d", e->path, e->names[3],
                                (long long)i, e->labels[i]);
    }
    return GR_OK;
}

static gr_status enc_open(enc_src *e, gr_source *s, gr_error *err) {
    gr_status st = GR_OK;
    hid_t file = -1, grp = -1;
    char storage[32];
    int64_t n = -1, n1 = -1;
    GR_H5_CHECK(file = H5Fopen(e->path, H5F_ACC_RDONLY, H5P_DEFAULT), err, "%s: not an HDF5 file or corrupt",
                e->path);
    GR_H5_CHECK(grp = H5Gopen2(file, e->group, H5P_DEFAULT), err, "%s: group %s: cannot open", e->path, e->group);
    if (gr_h5_read_string_attr(grp, "storage", storage, sizeof storage) != 1 || strcmp(storage, "encoded") != 0) {
        st = gr_error_set(err, GR_ERR_DATA, "%s: group %s: not an encoded image split (no attribute storage = "
                          "\"encoded\")", e->path, e->group);
        goto fail;
    }
    if ((st = enc_read(e, grp, 2, "formats", 1, &n, H5T_NATIVE_UINT8, 1, (void **)&e->formats, err)) ||
        (st = enc_read(e, grp, 3, "labels", 1, &n, H5T_NATIVE_INT32, 4, (void **)&e->labels, err)) ||
        (st = enc_read(e, grp, 4, "shapes", 2, &n, H5T_NATIVE_UINT16, 2, (void **)&e->shapes, err)))
        goto fail;
    n1 = n + 1;
    if ((st = enc_read(e, grp, 1, "offsets", 1, &n1, H5T_NATIVE_UINT64, 8, (void **)&e->offsets, err)) ||
        (st = enc_check(e, n, err)))
        goto fail;
    e->total = e->offsets[n];
    if ((st = enc_locate(e, grp, err))) goto fail;
    s->n = n;
fail:
    if (grp >= 0) H5Gclose(grp);
    if (file >= 0) H5Fclose(file);
    return st;
}

gr_source *gr_source_encoded(const char *path, const char *group, gr_error *err) {
    gr_h5_init();
    struct stat sb;
    if (gr_h5_check_input(path, &sb, err) != GR_OK) return NULL;
    enc_src *e = gr_xcalloc(1, sizeof *e);
    e->fd = -1;
    e->path = gr_xstrdup(path);
    e->group = gr_h5_normalize_group(group);
    static const char *const names[5] = {"encoded", "offsets", "formats", "labels", "shapes"};
    for (int k = 0; k < 5; k++) e->names[k] = gr_h5_join(e->group, names[k]);
    gr_source *s = gr_xcalloc(1, sizeof *s);
    if (enc_open(e, s, err) != GR_OK) goto fail;
    if ((e->fd = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
        gr_error_set(err, GR_ERR_DATA, "%s: cannot open: %s", path, strerror(errno));
        goto fail;
    }
    s->ops = &enc_ops;
    s->impl = e;
    s->path = e->path;
    s->nfields = 4;
    s->fields[FIELD_ENCODED] = (gr_field){.name = "encoded", .origin = e->names[0], .type = GR_FT_UINT8,
                                          .variable = true, .rank = 1, .shape = {GR_FIELD_VARIABLE}};
    s->fields[FIELD_SHAPE] = (gr_field){.name = "shape", .origin = e->names[4], .type = GR_FT_UINT16, .rank = 1,
                                        .shape = {3}};
    s->fields[FIELD_FORMAT] = (gr_field){.name = "format", .origin = e->names[2], .type = GR_FT_UINT8};
    s->fields[FIELD_LABEL] = (gr_field){.name = "label", .origin = e->names[3], .type = GR_FT_INT32};
    return s;
fail:
    enc_free(e);
    free(s);
    return NULL;
}
