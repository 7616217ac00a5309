/* source_dataset.c — an HDF5 split (gr_dataset: dataset.c reads a file's,
 * dataset_mem.c wraps images in memory) as a sample source of two fields,
 * `image` and `label` (source.h's gr_source_dataset). A reader's state is a
 * gr_rows: the rows of one fetch when they come from the file; the images
 * held in memory and the labels (always in memory) are viewed in place. */
#include "source.h"
#include "dataio.h"
#include "dataset_priv.h"

#include <stdio.h>
#include <stdlib.h>

enum { FIELD_IMAGE, FIELD_LABEL };

static void *source_dataset_reader_new(gr_source *s) {
    (void)s;
    return gr_xcalloc(1, sizeof(gr_rows));
}

static void source_dataset_reader_free(void *state) {
    if (!state) return;
    gr_rows_free(state);
    free(state);
}

static gr_status source_dataset_fetch(gr_source *s, void *state, const int64_t *idx, int64_t n, gr_error *err) {
    return gr_dataset_fetch(s->impl, idx, n, state, err);
}

static const void *source_dataset_view(const gr_source *s, const void *state, int64_t idx, int f, size_t *bytes) {
    const gr_dataset *ds = s->impl;
    if (f == FIELD_LABEL) {
        *bytes = sizeof *ds->labels;
        return ds->labels + idx;
    }
    GR_ASSERT(f == FIELD_IMAGE);
    *bytes = gr_dataset_sample_bytes(ds);
    return gr_rows_sample(ds, state, idx);
}

static size_t source_dataset_reader_bytes(const gr_source *s, int64_t batch) {
    const gr_dataset *ds = s->impl;
    if (gr_dataset_in_memory(ds)) return 0;
    return (size_t)batch * (gr_dataset_sample_bytes(ds) + sizeof(int64_t)); /* rows, sorted */
}

static void source_dataset_close(gr_source *s) { free(s); }

static const gr_source_ops source_dataset_ops = {
    .reader_new = source_dataset_reader_new,
    .reader_free = source_dataset_reader_free,
    .fetch = source_dataset_fetch,
    .view = source_dataset_view,
    .reader_bytes = source_dataset_reader_bytes,
    .close = source_dataset_close,
};

static gr_ftype source_dataset_type(gr_dtype dt) {
    switch (dt) {
    case GR_DT_UINT8: return GR_FT_UINT8;
    case GR_DT_FLOAT16: return GR_FT_FLOAT16;
    case GR_DT_FLOAT32: return GR_FT_FLOAT32;
    }
    GR_ASSERT(!"unknown image dtype");
    return GR_FT_UINT8;
}

/* An encoded split's source, borrowed: its ops but for close, which frees
 * the shell only (the dataset closes the source). */
typedef struct borrowed_source {
    gr_source s; /* first: gr_source_close frees it as the whole */
    gr_source_ops ops;
} borrowed_source;

static void borrowed_close(gr_source *s) { free(s); }

gr_source *gr_source_dataset(gr_dataset *ds) {
    if (ds->enc) {
        borrowed_source *b = gr_xcalloc(1, sizeof *b);
        b->s = *ds->enc;
        b->ops = *ds->enc->ops;
        b->ops.close = borrowed_close;
        b->s.ops = &b->ops;
        return &b->s;
    }
    gr_source *s = gr_xcalloc(1, sizeof *s);
    s->ops = &source_dataset_ops;
    s->impl = ds;
    s->path = ds->path;
    s->n = ds->n;
    s->nfields = 2;
    gr_field *im = &s->fields[FIELD_IMAGE];
    im->name = "image";
    im->origin = ds->images_name;
    im->type = source_dataset_type(ds->dtype);
    im->rank = 3;
    const int64_t chw[3] = {ds->c, ds->h, ds->w}, hwc[3] = {ds->h, ds->w, ds->c};
    for (int k = 0; k < 3; k++) im->shape[k] = ds->nhwc ? hwc[k] : chw[k];
    snprintf(im->layout, sizeof im->layout, "%s", ds->nhwc ? "HWC" : "CHW");
    gr_field *lab = &s->fields[FIELD_LABEL];
    lab->name = "label";
    lab->origin = ds->labels_name;
    lab->type = GR_FT_INT32;
    lab->rank = 0;
    return s;
}
