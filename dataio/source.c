/* source.c — what every sample source shares (source.h): element types,
 * field look-up and sizes, readers, and copies of a sample's field into a
 * caller's buffer or blob through the source's fetch and view. */
#include "source.h"

#include <stdlib.h>
#include <string.h>

static const struct {
    const char *name;
    size_t size;
} ftype_info[] = {
    [GR_FT_UINT8] = {"uint8", 1}, [GR_FT_UINT16] = {"uint16", 2},   [GR_FT_INT32] = {"int32", 4},
    [GR_FT_INT64] = {"int64", 8}, [GR_FT_FLOAT16] = {"float16", 2}, [GR_FT_FLOAT32] = {"float32", 4},
};
_Static_assert(sizeof ftype_info / sizeof ftype_info[0] == GR_FT_COUNT, "one ftype_info row per gr_ftype");

size_t gr_ftype_size(gr_ftype t) {
    GR_ASSERT((unsigned)t < GR_FT_COUNT);
    return ftype_info[t].size;
}

const char *gr_ftype_name(gr_ftype t) {
    GR_ASSERT((unsigned)t < GR_FT_COUNT);
    return ftype_info[t].name;
}

size_t gr_field_bytes(const gr_field *f) {
    if (f->variable) return 0;
    size_t n = gr_ftype_size(f->type);
    for (int k = 0; k < f->rank; k++) n *= (size_t)f->shape[k];
    return n;
}

int gr_source_find(const gr_source *s, const char *name) {
    for (int k = 0; k < s->nfields; k++)
        if (strcmp(s->fields[k].name, name) == 0) return k;
    return -1;
}

void gr_source_close(gr_source *s) {
    if (s) s->ops->close(s);
}

void gr_source_reader_init(gr_source_reader *r, gr_source *src) {
    r->src = src;
    r->state = src->ops->reader_new ? src->ops->reader_new(src) : NULL;
}

void gr_source_reader_free(gr_source_reader *r) {
    if (r->src && r->src->ops->reader_free) r->src->ops->reader_free(r->state);
    r->src = NULL;
    r->state = NULL;
}

gr_status gr_source_fetch(gr_source_reader *r, const int64_t *idx, int64_t n, gr_error *err) {
    return r->src->ops->fetch(r->src, r->state, idx, n, err);
}

const void *gr_source_view(const gr_source_reader *r, int64_t idx, int field, size_t *bytes) {
    GR_ASSERT(field >= 0 && field < r->src->nfields);
    return r->src->ops->view(r->src, r->state, idx, field, bytes);
}

gr_status gr_source_read(gr_source_reader *r, int64_t idx, int field, void *dst, gr_error *err) {
    GR_ASSERT(field >= 0 && field < r->src->nfields);
    const gr_field *f = &r->src->fields[field];
    if (f->variable)
        return gr_error_set(err, GR_ERR_INTERNAL, "%s: field %s (%s) varies in size per sample: read it as a blob",
                            r->src->path, f->name, f->origin);
    gr_status st = gr_source_fetch(r, &idx, 1, err);
    if (st != GR_OK) return st;
    size_t bytes = 0;
    const void *p = gr_source_view(r, idx, field, &bytes);
    GR_ASSERT(bytes == gr_field_bytes(f));
    memcpy(dst, p, bytes);
    return GR_OK;
}

void gr_blob_free(gr_blob *b) {
    free(b->data);
    memset(b, 0, sizeof *b);
}

gr_status gr_source_read_blob(gr_source_reader *r, int64_t idx, int field, gr_blob *b, gr_error *err) {
    gr_status st = gr_source_fetch(r, &idx, 1, err);
    if (st != GR_OK) return st;
    size_t bytes = 0;
    const void *p = gr_source_view(r, idx, field, &bytes);
    if (bytes > b->cap) {
        b->data = gr_xrealloc(b->data, bytes);
        b->cap = bytes;
    }
    if (bytes) memcpy(b->data, p, bytes);
    b->n = bytes;
    return GR_OK;
}
