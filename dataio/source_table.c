/* source_table.c — an HDF5 split of any datasets [N, ...] as a sample source
 * (source.h's gr_source_table): one field per dataset of the group, named as
 * it. The datasets are held in memory whole when they fit (the policy of the
 * images of dataset.c: gr_dataset_memory_limit, data.cache), else a reader's
 * fetch reads the distinct rows of a batch from each dataset, one hyperslab
 * per run of consecutive rows, into its own buffers (HDF5 is built
 * thread-safe and serializes the reads of concurrent readers). Float fields
 * are checked finite (nonfinite.h) at open or as their rows are read. */
#include "source.h"
#include "dataio.h"
#include "h5util.h"
#include "nonfinite.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TABLE_CHUNK_CACHE_BYTES ((size_t)1 << 20) /* HDF5's default per dataset */

/* One dataset of the table. */
typedef struct table_field {
    char *name, *origin;   /* "features", "/train/features" */
    hid_t dset, memtype;   /* memtype: the native type read (float16: built, closed with the field) */
    bool own_memtype;
    int rank;              /* of the dataset: the field's rank + 1 */
    hsize_t dims[GR_FIELD_MAX_RANK + 1];
    size_t sample_bytes;
    uint8_t *mem;          /* all N samples, or NULL (read per fetch) */
} table_field;

typedef struct table {
    char *path, *group;
    hid_t file, grp;
    int nf;
    table_field f[GR_SOURCE_MAX_FIELDS];
} table;

/* A reader's rows of its last fetch (on-disk tables). */
typedef struct table_rows {
    int64_t *sorted;       /* distinct sample indices, ascending */
    int64_t n, cap;
    uint8_t *raw[GR_SOURCE_MAX_FIELDS]; /* per field, the rows of sorted, in that order */
    size_t raw_cap[GR_SOURCE_MAX_FIELDS];
} table_rows;

static const gr_source_ops table_ops;

static gr_images table_images_of(const table *t, const table_field *tf, gr_ftype type) {
    gr_images im = {t->path, tf->origin, type == GR_FT_FLOAT16 ? GR_DT_FLOAT16 : GR_DT_FLOAT32,
                    (int64_t)(tf->sample_bytes / gr_ftype_size(type)), gr_ftype_size(type), "fields"};
    return im;
}

static void table_free(table *t) {
    if (!t) return;
    for (int k = 0; k < t->nf; k++) {
        table_field *tf = &t->f[k];
        if (tf->own_memtype && tf->memtype >= 0) H5Tclose(tf->memtype);
        if (tf->dset >= 0) H5Dclose(tf->dset);
        gr_aligned_free(tf->mem);
        free(tf->name);
        free(tf->origin);
    }
    if (t->grp >= 0) H5Gclose(t->grp);
    if (t->file >= 0) H5Fclose(t->file);
    free(t->path);
    free(t->group);
    free(t);
}

/* The field type of a stored type, and the native type it is read as; a
 * type the source does not take is GR_ERR_DATA naming the dataset. */
static gr_status table_type(const table *t, table_field *tf, hid_t type, gr_ftype *ft, gr_error *err) {
    const H5T_class_t cls = H5Tget_class(type);
    const size_t sz = H5Tget_size(type);
    const bool uns = cls == H5T_INTEGER && H5Tget_sign(type) == H5T_SGN_NONE;
    tf->memtype = -1;
    if (cls == H5T_INTEGER) {
        if (uns && sz == 1) *ft = GR_FT_UINT8, tf->memtype = H5T_NATIVE_UINT8;
        else if (uns && sz == 2) *ft = GR_FT_UINT16, tf->memtype = H5T_NATIVE_UINT16;
        else if (!uns && sz <= 4) *ft = GR_FT_INT32, tf->memtype = H5T_NATIVE_INT32; /* int8, int16: widened */
        else if (!uns && sz == 8) *ft = GR_FT_INT64, tf->memtype = H5T_NATIVE_INT64;
        else if (uns && sz == 4) *ft = GR_FT_INT64, tf->memtype = H5T_NATIVE_INT64;  /* uint32: widened */
    } else if (cls == H5T_FLOAT && sz == 4) {
        *ft = GR_FT_FLOAT32, tf->memtype = H5T_NATIVE_FLOAT;
    } else if (cls == H5T_FLOAT && sz == 2 && gr_h5_is_ieee_half(type)) {
        *ft = GR_FT_FLOAT16;
        if ((tf->memtype = gr_h5_float16_type()) < 0)
            return gr_h5_fail(err, GR_ERR_DATA, "%s: cannot build the float16 type", t->path);
        tf->own_memtype = true;
    }
    if (tf->memtype >= 0) return GR_OK;
    char tname[64];
    gr_h5_describe_type(type, tname, sizeof tname);
    return gr_error_set(err, GR_ERR_DATA, "%s: %s: unsupported dtype (%s); a field is uint8, uint16, int32, int64 "
                        "(int8 and int16 are read as int32, uint32 as int64), float16 or float32%s", t->path,
                        tf->origin, tname, cls == H5T_FLOAT && sz == 8 ? " (numpy: .astype('float32'))" : "");
}

/* Opens dataset `name` of the group as field k: type and shape checked. */
static gr_status table_add(table *t, gr_source *s, const char *name, gr_error *err) {
    if (t->nf == GR_SOURCE_MAX_FIELDS)
        return gr_error_set(err, GR_ERR_DATA, "%s: group %s holds more than %d datasets; a table source takes at "
                            "most %d fields", t->path, t->group, GR_SOURCE_MAX_FIELDS, GR_SOURCE_MAX_FIELDS);
    table_field *tf = &t->f[t->nf++];
    tf->dset = tf->memtype = -1;
    tf->name = gr_xstrdup(name);
    tf->origin = gr_h5_join(t->group, name);
    gr_status st = GR_OK;
    hid_t type = -1, sp = -1;
    GR_H5_CHECK(tf->dset = H5Dopen2(t->grp, name, H5P_DEFAULT), err, "%s: %s: cannot open as a dataset", t->path,
                tf->origin);
    GR_H5_CHECK(type = H5Dget_type(tf->dset), err, "%s: %s: cannot read type", t->path, tf->origin);
    gr_field *f = &s->fields[s->nfields];
    if ((st = table_type(t, tf, type, &f->type, err)) != GR_OK) goto fail;
    GR_H5_CHECK(sp = H5Dget_space(tf->dset), err, "%s: %s: cannot read shape", t->path, tf->origin);
    tf->rank = H5Sget_simple_extent_ndims(sp);
    GR_H5_CHECK(tf->rank, err, "%s: %s: cannot read shape", t->path, tf->origin);
    if (tf->rank < 1 || tf->rank > GR_FIELD_MAX_RANK + 1) {
        st = gr_error_set(err, GR_ERR_DATA, "%s: %s: rank %d; a field is a dataset [N, ...] of rank 1 to %d", t->path,
                          tf->origin, tf->rank, GR_FIELD_MAX_RANK + 1);
        goto fail;
    }
    GR_H5_CHECK(H5Sget_simple_extent_dims(sp, tf->dims, NULL), err, "%s: %s: cannot read shape", t->path,
                tf->origin);
    const table_field *first = &t->f[0];
    if (tf != first && tf->dims[0] != first->dims[0]) {
        st = gr_error_set(err, GR_ERR_DATA, "%s: %s: N=%llu, but %s has N=%llu (every dataset of a table holds one "
                          "row per sample)", t->path, tf->origin, (unsigned long long)tf->dims[0], first->origin,
                          (unsigned long long)first->dims[0]);
        goto fail;
    }
    uint64_t elems = 1;
    for (int d = 1; d < tf->rank; d++) {
        if (tf->dims[d] < 1 || tf->dims[d] > ((hsize_t)1 << 32) || (elems *= tf->dims[d]) > ((uint64_t)1 << 32)) {
            st = gr_error_set(err, GR_ERR_DATA, "%s: %s: a sample's side %d is %llu; each must be >= 1 and a sample "
                              "at most 2^32 elements", t->path, tf->origin, d, (unsigned long long)tf->dims[d]);
            goto fail;
        }
        f->shape[d - 1] = (int64_t)tf->dims[d];
    }
    if (tf->dims[0] < 1 || tf->dims[0] > (hsize_t)INT64_MAX / 2) {
        st = gr_error_set(err, GR_ERR_DATA, "%s: %s: N=%llu; a table needs at least one sample", t->path, tf->origin,
                          (unsigned long long)tf->dims[0]);
        goto fail;
    }
    if (tf->rank == 4) { /* [N,C,H,W] images, or [N,H,W,C] when its layout attribute says NHWC */
        char layout[64] = "";
        const int lr = gr_h5_read_string_attr(tf->dset, "layout", layout, sizeof layout);
        snprintf(f->layout, sizeof f->layout, "%s", lr == 1 && strcmp(layout, "NHWC") == 0 ? "HWC" : "CHW");
    }
    f->name = tf->name;
    f->origin = tf->origin;
    f->rank = tf->rank - 1;
    tf->sample_bytes = (size_t)elems * gr_ftype_size(f->type);
    s->nfields++;
    s->n = (int64_t)tf->dims[0];
fail:
    if (sp >= 0) H5Sclose(sp);
    if (type >= 0) H5Tclose(type);
    return st;
}

/* Every dataset linked in the group, in name order. */
static gr_status table_scan(table *t, gr_source *s, gr_error *err) {
    H5G_info_t gi;
    gr_status st = GR_OK;
    if (H5Gget_info(t->grp, &gi) < 0) return gr_h5_fail(err, GR_ERR_DATA, "%s: group %s: cannot list", t->path, t->group);
    for (hsize_t i = 0; i < gi.nlinks && st == GR_OK; i++) {
        ssize_t len = H5Lget_name_by_idx(t->grp, ".", H5_INDEX_NAME, H5_ITER_INC, i, NULL, 0, H5P_DEFAULT);
        if (len < 0) return gr_h5_fail(err, GR_ERR_DATA, "%s: group %s: cannot list", t->path, t->group);
        char *name = gr_xmalloc((size_t)len + 1);
        H5Lget_name_by_idx(t->grp, ".", H5_INDEX_NAME, H5_ITER_INC, i, name, (size_t)len + 1, H5P_DEFAULT);
        hid_t obj = H5Oopen(t->grp, name, H5P_DEFAULT);
        if (obj < 0) {
            char *full = gr_h5_join(t->group, name);
            st = gr_h5_fail(err, GR_ERR_DATA, "%s: %s: cannot open (a dangling link?)", t->path, full);
            free(full);
        } else {
            const bool is_dataset = H5Iget_type(obj) == H5I_DATASET;
            H5Oclose(obj);
            if (is_dataset) st = table_add(t, s, name, err);
        }
        free(name);
    }
    if (st == GR_OK && t->nf == 0)
        st = gr_error_set(err, GR_ERR_DATA, "%s: group %s holds no datasets (a table is a group of datasets [N, ...])",
                          t->path, t->group);
    return st;
}

/* Reads every field whole into memory (data.cache) and checks the floats. */
static gr_status table_load(table *t, const gr_source *s, gr_cache_mode cache, gr_error *err) {
    const int64_t limit = gr_dataset_memory_limit();
    size_t row = 0;
    for (int k = 0; k < t->nf; k++) row += t->f[k].sample_bytes;
    const bool fits = s->n <= limit / (int64_t)GR_MAX(row, 1);
    if (cache == GR_CACHE_NONE || (cache == GR_CACHE_AUTO && !fits)) return GR_OK;
    for (int k = 0; k < t->nf; k++) {
        table_field *tf = &t->f[k];
        if ((size_t)s->n > (SIZE_MAX / 2) / tf->sample_bytes)
            return gr_error_set(err, GR_ERR_OOM, "%s: %s: %lld samples of %zu bytes do not fit in memory", t->path,
                                tf->origin, (long long)s->n, tf->sample_bytes);
        const size_t bytes = (size_t)s->n * tf->sample_bytes;
        if (!(tf->mem = gr_aligned_alloc(bytes)))
            return gr_error_set(err, GR_ERR_OOM, "%s: %s: out of memory: %zu bytes to hold the dataset%s", t->path,
                                tf->origin, bytes,
                                cache == GR_CACHE_MEMORY ? " (data.cache: memory; set none to read from the file)" : "");
        gr_status st = GR_OK;
        GR_H5_CHECK(H5Dread(tf->dset, tf->memtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, tf->mem), err,
                    "%s: %s: read failed (corrupt file?)", t->path, tf->origin);
        const gr_ftype ft = s->fields[k].type;
        if (ft == GR_FT_FLOAT16 || ft == GR_FT_FLOAT32)
            st = gr_images_check_finite(table_images_of(t, tf, ft), tf->mem, s->n, NULL, err);
    fail:
        if (st != GR_OK) return st;
    }
    return GR_OK;
}

gr_source *gr_source_table(const char *path, const char *group, gr_cache_mode cache, gr_error *err) {
    gr_h5_init();
    struct stat sb;
    if (gr_h5_check_input(path, &sb, err) != GR_OK) return NULL;
    table *t = gr_xcalloc(1, sizeof *t);
    gr_source *s = gr_xcalloc(1, sizeof *s);
    t->file = t->grp = -1;
    t->path = gr_xstrdup(path);
    t->group = gr_h5_normalize_group(group);
    s->ops = &table_ops;
    s->impl = t;
    s->path = t->path;
    gr_status st = GR_OK;
    if ((t->file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT)) < 0) {
        st = gr_h5_fail(err, GR_ERR_DATA, "%s: not an HDF5 file or corrupt", path);
        goto fail;
    }
    htri_t ex = gr_h5_path_exists(t->file, t->group);
    if (ex <= 0) {
        st = ex < 0 ? gr_h5_fail(err, GR_ERR_DATA, "%s: group %s: cannot look up (corrupt file?)", path, t->group)
                    : gr_error_set(err, GR_ERR_DATA, "%s: group %s: no such group", path, t->group);
        goto fail;
    }
    if ((t->grp = H5Gopen2(t->file, t->group, H5P_DEFAULT)) < 0) {
        st = gr_h5_fail(err, GR_ERR_DATA, "%s: group %s: cannot open as a group", path, t->group);
        goto fail;
    }
    if ((st = gr_h5_refuse_encoded(t->grp, path, t->group, err)) != GR_OK) goto fail;
    if ((st = table_scan(t, s, err)) != GR_OK || (st = table_load(t, s, cache, err)) != GR_OK) goto fail;
    return s;
fail:
    table_free(t);
    free(s);
    return NULL;
}

static void *table_reader_new(gr_source *s) {
    (void)s;
    return gr_xcalloc(1, sizeof(table_rows));
}

static void table_reader_free(void *state) {
    table_rows *r = state;
    if (!r) return;
    free(r->sorted);
    for (int k = 0; k < GR_SOURCE_MAX_FIELDS; k++) gr_aligned_free(r->raw[k]);
    free(r);
}


/* The rows r->sorted[0..r->n) of field tf into r->raw[k]: one hyperslab per
 * run of consecutive rows. */
static gr_status table_read_rows(const table *t, const table_field *tf, int k, table_rows *r, gr_error *err) {
    gr_status st = GR_OK;
    hid_t fsp = -1, msp = -1;
    hsize_t start[GR_FIELD_MAX_RANK + 1] = {0}, count[GR_FIELD_MAX_RANK + 1];
    memcpy(count, tf->dims, sizeof count);
    GR_H5_CHECK(fsp = H5Dget_space(tf->dset), err, "%s: %s: cannot read shape", t->path, tf->origin);
    for (int64_t i = 0; i < r->n;) {
        int64_t j = i;
        while (j + 1 < r->n && r->sorted[j + 1] == r->sorted[j] + 1) j++;
        start[0] = (hsize_t)r->sorted[i];
        count[0] = (hsize_t)(j - i + 1);
        GR_H5_CHECK(H5Sselect_hyperslab(fsp, H5S_SELECT_SET, start, NULL, count, NULL), err,
                    "%s: %s: selection failed", t->path, tf->origin);
        GR_H5_CHECK(msp = H5Screate_simple(tf->rank, count, NULL), err, "%s: %s: selection failed", t->path,
                    tf->origin);
        GR_H5_CHECK(H5Dread(tf->dset, tf->memtype, msp, fsp, H5P_DEFAULT, r->raw[k] + (size_t)i * tf->sample_bytes),
                    err, "%s: %s: reading samples %lld-%lld failed (truncated or corrupt file?)", t->path, tf->origin,
                    (long long)r->sorted[i], (long long)r->sorted[j]);
        H5Sclose(msp);
        msp = -1;
        i = j + 1;
    }
fail:
    if (msp >= 0) H5Sclose(msp);
    if (fsp >= 0) H5Sclose(fsp);
    return st;
}

static gr_status table_fetch(gr_source *s, void *state, const int64_t *idx, int64_t n, gr_error *err) {
    table *t = s->impl;
    table_rows *r = state;
    for (int64_t i = 0; i < n; i++)
        if (idx[i] < 0 || idx[i] >= s->n)
            return gr_error_set(err, GR_ERR_INTERNAL, "%s: group %s: sample index %lld is outside [0, %lld)", t->path,
                                t->group, (long long)idx[i], (long long)s->n);
    if (t->f[0].mem || n == 0) return GR_OK; /* all in memory: checked at open */
    gr_h5_init();
    const int64_t m = r->n = gr_rows_sorted_distinct(idx, n, &r->sorted, &r->cap);
    for (int k = 0; k < t->nf; k++) {
        const table_field *tf = &t->f[k];
        const size_t need = (size_t)m * tf->sample_bytes;
        if (need > r->raw_cap[k]) {
            gr_aligned_free(r->raw[k]);
            r->raw[k] = gr_aligned_alloc(need);
            r->raw_cap[k] = r->raw[k] ? need : 0;
            if (!r->raw[k])
                return gr_error_set(err, GR_ERR_OOM, "%s: %s: out of memory: %zu bytes for a batch", t->path,
                                    tf->origin, need);
        }
        gr_status st = table_read_rows(t, tf, k, r, err);
        const gr_ftype ft = s->fields[k].type;
        if (st == GR_OK && (ft == GR_FT_FLOAT16 || ft == GR_FT_FLOAT32))
            st = gr_images_check_finite(table_images_of(t, tf, ft), r->raw[k], m, r->sorted, err);
        if (st != GR_OK) return st;
    }
    return GR_OK;
}

static const void *table_view(const gr_source *s, const void *state, int64_t idx, int f, size_t *bytes) {
    const table *t = s->impl;
    const table_field *tf = &t->f[f];
    *bytes = tf->sample_bytes;
    if (tf->mem) return tf->mem + (size_t)idx * tf->sample_bytes;
    const table_rows *r = state;
    int64_t lo = 0, hi = r->n - 1;
    while (lo < hi) {
        const int64_t mid = lo + (hi - lo) / 2;
        if (r->sorted[mid] < idx) lo = mid + 1;
        else hi = mid;
    }
    GR_ASSERT(r->n > 0 && r->sorted[lo] == idx);
    return r->raw[f] + (size_t)lo * tf->sample_bytes;
}

static size_t table_reader_bytes(const gr_source *s, int64_t batch) {
    const table *t = s->impl;
    if (t->f[0].mem) return 0;
    size_t row = sizeof(int64_t);
    for (int k = 0; k < t->nf; k++) row += t->f[k].sample_bytes;
    return (size_t)batch * row;
}

static void table_close(gr_source *s) {
    table_free(s->impl);
    free(s);
}

static const gr_source_ops table_ops = {
    .reader_new = table_reader_new,
    .reader_free = table_reader_free,
    .fetch = table_fetch,
    .view = table_view,
    .reader_bytes = table_reader_bytes,
    .close = table_close,
};

size_t gr_source_table_host_bytes(const gr_source *s) {
    if (!s || s->ops != &table_ops) return 0;
    const table *t = s->impl;
    size_t bytes = 0;
    for (int k = 0; k < t->nf; k++) {
        const size_t all = (size_t)s->n * t->f[k].sample_bytes;
        bytes += t->f[k].mem ? all : GR_MIN(all, TABLE_CHUNK_CACHE_BYTES);
    }
    return bytes;
}

int gr_source_table_attr_floats(const gr_source *s, const char *field, const char *name, double *out, int max) {
    if (!s || s->ops != &table_ops) return -1;
    const table *t = s->impl;
    hid_t obj = t->grp;
    if (field) {
        const int k = gr_source_find(s, field);
        if (k < 0) return -1;
        obj = t->f[k].dset;
    }
    gr_h5_init();
    htri_t ex = H5Aexists(obj, name);
    if (ex <= 0) return ex < 0 ? -1 : 0;
    int rc = -1;
    double *tmp = NULL;
    hid_t a = H5Aopen(obj, name, H5P_DEFAULT), type = -1, sp = -1;
    if (a < 0 || (type = H5Aget_type(a)) < 0 || (sp = H5Aget_space(a)) < 0) goto done;
    const H5T_class_t cls = H5Tget_class(type);
    const hssize_t np = H5Sget_simple_extent_npoints(sp);
    if ((cls != H5T_INTEGER && cls != H5T_FLOAT) || np < 0 || np > (1 << 24)) goto done;
    tmp = gr_xmalloc((size_t)(np ? np : 1) * sizeof *tmp);
    if (H5Aread(a, H5T_NATIVE_DOUBLE, tmp) < 0) goto done;
    rc = (int)GR_MIN((hssize_t)GR_MAX(max, 0), np);
    memcpy(out, tmp, (size_t)rc * sizeof *out);
done:
    free(tmp);
    if (sp >= 0) H5Sclose(sp);
    if (type >= 0) H5Tclose(type);
    if (a >= 0) H5Aclose(a);
    return rc;
}
