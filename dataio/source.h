/* source.h — a sample source: what the loader reads samples from, field by
 * field, without knowing where they are stored.
 *
 * A source holds N samples, each the same set of named fields. A field is
 * described once for the whole source (gr_field): its element type and
 * either a per-sample shape of any rank, the same for every sample (an
 * image [C,H,W], a scalar label [], a window of T tokens [T]), or a variable
 * size (an encoded JPEG or PNG: a blob whose length differs per sample).
 * Sample i's fields are served through a reader (one per thread): fetch a
 * batch of indices once, then view each sample's field bytes in place, or
 * copy them into a caller buffer (fixed fields) or a blob (variable ones).
 * What turns the fields into tensors is the consumer's: the loader takes an
 * `image` field through its per-sample decoder/augmenter (augment.h) and an
 * `label` field as the batch's labels.
 *
 * Exports:
 *   gr_ftype, gr_ftype_size, gr_ftype_name   element types of fields;
 *   gr_field, gr_field_bytes              a field's description;
 *   gr_source, gr_source_ops              a source: its fields and the table
 *                                         of functions an implementation fills;
 *   gr_source_find, gr_source_close       look-up by name, release;
 *   gr_source_reader_*, gr_source_fetch,  per-thread reads: a batch fetched,
 *   gr_source_view, gr_source_read,       then each sample's fields viewed
 *   gr_source_read_blob, gr_blob          or copied;
 *   gr_source_dataset                     the first implementation: an HDF5
 *                                         split (dataio.h's gr_dataset,
 *                                         in memory or read from the file)
 *                                         as fields `image` and `label`.
 *
 * Other sources plug in by filling a gr_source and its ops (source_dataset.c
 * is the model), with no change to the reader API:
 *   token windows  one field `tokens`, GR_FT_UINT16 or GR_FT_INT32, shape
 *                  [T+1] (inputs and next-token targets overlap by one):
 *                  sample i is the window at offset i * stride of a flat
 *                  token file; fetch preads the windows of a batch, view
 *                  points into them; no label field.
 *   encoded images field `jpeg` (variable, GR_FT_UINT8) holding a file's
 *                  bytes as stored (an HDF5 vlen dataset, or an offsets
 *                  table into one blob), plus `label`; its decoder turns the
 *                  blob into pixels with gr_image_decode_mem (image.h),
 *                  then crops and normalizes them as augment.h does.
 * A consumer checks the fields it needs (gr_source_find, then the element
 * type and shape) and refuses a source without them, naming the source. */
#ifndef GR_SOURCE_H
#define GR_SOURCE_H

#include "../common/gr_common.h"

/* Element types of a field. */
typedef enum gr_ftype {
    GR_FT_UINT8,
    GR_FT_UINT16,
    GR_FT_INT32,
    GR_FT_INT64,
    GR_FT_FLOAT16,
    GR_FT_FLOAT32,
    GR_FT_COUNT
} gr_ftype;

size_t gr_ftype_size(gr_ftype t);      /* bytes per element */
const char *gr_ftype_name(gr_ftype t); /* "uint8", "float16", ... */

#define GR_FIELD_MAX_RANK 8
#define GR_SOURCE_MAX_FIELDS 8
#define GR_FIELD_VARIABLE (-1) /* shape[0] of a variable field */

typedef struct gr_field {
    const char *name;     /* "image", "label", "tokens"; unique within the source */
    const char *origin;   /* where it is stored, for messages: "/train/images" */
    gr_ftype type;
    bool variable;        /* size differs per sample: rank 1, shape[0] = GR_FIELD_VARIABLE */
    int rank;             /* 0: a scalar */
    int64_t shape[GR_FIELD_MAX_RANK];
    /* The meaning of each axis of an image field, one letter per axis:
     * "CHW" or "HWC" (stored channels last); "" for other fields. */
    char layout[GR_FIELD_MAX_RANK + 1];
} gr_field;

/* Bytes of one sample's field: the product of its shape times the element
 * size; 0 for a variable field. */
size_t gr_field_bytes(const gr_field *f);

typedef struct gr_source gr_source;

/* What an implementation provides. The reader functions run on the
 * loader's worker threads, each with its own reader state: calls with
 * distinct states must be safe to make concurrently. */
typedef struct gr_source_ops {
    /* A reader's state (NULL allowed when fetch needs none), and its release. */
    void *(*reader_new)(gr_source *s);
    void (*reader_free)(void *state);
    /* Makes samples idx[0..n) (any order, repeats allowed) viewable through
     * view until the next fetch with the same state. Indices outside [0, N)
     * are an error naming the source; so is stored data found unusable. */
    gr_status (*fetch)(gr_source *s, void *state, const int64_t *idx, int64_t n, gr_error *err);
    /* Field f of sample idx, which the last fetch with state included: its
     * stored bytes (elements in shape order, native byte order) and their
     * count in *bytes. */
    const void *(*view)(const gr_source *s, const void *state, int64_t idx, int f, size_t *bytes);
    /* Host memory one reader grows to fetching `batch` samples at a time. */
    size_t (*reader_bytes)(const gr_source *s, int64_t batch);
    /* Releases impl (not what the source borrows). */
    void (*close)(gr_source *s);
} gr_source_ops;

struct gr_source {
    const gr_source_ops *ops;
    void *impl;           /* the implementation's own state */
    const char *path;     /* the file (or what stands for it) for messages */
    int64_t n;            /* samples */
    int nfields;
    gr_field fields[GR_SOURCE_MAX_FIELDS];
};

/* Index of the field named name, or -1. */
int gr_source_find(const gr_source *s, const char *name);
/* Releases s through its ops (NULL: nothing). */
void gr_source_close(gr_source *s);

/* One thread's reads from a source. */
typedef struct gr_source_reader {
    gr_source *src;
    void *state;
} gr_source_reader;

void gr_source_reader_init(gr_source_reader *r, gr_source *src);
void gr_source_reader_free(gr_source_reader *r);
/* Fetches samples idx[0..n) for gr_source_view (the source's fetch). */
gr_status gr_source_fetch(gr_source_reader *r, const int64_t *idx, int64_t n, gr_error *err);
/* Field `field` of sample idx, included in the last fetch: no copy; valid
 * until the reader's next fetch. */
const void *gr_source_view(const gr_source_reader *r, int64_t idx, int field, size_t *bytes);

/* Sample idx's fixed-size field `field` copied into dst (gr_field_bytes of
 * it): fetches idx alone, so it replaces the reader's last fetch. A variable
 * field is GR_ERR_INTERNAL here (gr_source_read_blob reads those). */
gr_status gr_source_read(gr_source_reader *r, int64_t idx, int field, void *dst, gr_error *err);

/* A growable byte buffer for variable fields. */
typedef struct gr_blob {
    uint8_t *data;
    size_t n, cap;
} gr_blob;
void gr_blob_free(gr_blob *b);
/* Sample idx's field `field`, fixed or variable, copied into b (grown as
 * needed; b->n its byte count). Replaces the reader's last fetch. */
gr_status gr_source_read_blob(gr_source_reader *r, int64_t idx, int field, gr_blob *b, gr_error *err);

/* ---- the HDF5 datasets of dataio.h as a source ---- */

typedef struct gr_dataset gr_dataset;

/* ds as a source of two fields, borrowing ds (close the source first):
 *   image  its stored element type (uint8, float16, float32), shape [C,H,W]
 *          with layout "CHW" (C = 1 for rank-3 images), or [H,W,C] with
 *          "HWC" for files whose layout attribute says NHWC; origin the
 *          images dataset ("/train/images");
 *   label  int32, a scalar; origin the labels dataset.
 * Reads as gr_dataset_fetch does: in place when the images are held in
 * memory, else one read per fetch from the file, float images checked for
 * inf/NaN as they are read. */
gr_source *gr_source_dataset(gr_dataset *ds);

#endif
