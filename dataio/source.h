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
 *   gr_source_table, gr_cache_mode,       an HDF5 split of any datasets
 *   gr_source_table_host_bytes,           [N, ...] (a table: features,
 *   gr_source_table_attr_floats           targets, token ids), one field
 *                                         per dataset, named as it.
 *   gr_source_tokens, _vocab, _host_bytes, a token split (a 1-D `tokens`
 *   gr_source_tokens_probe                dataset) as fixed windows of
 *                                         T + 1 tokens: fields `tokens`
 *                                         and `targets` [T], the second
 *                                         the first shifted by one.
 *
 *   gr_source_encoded                     an encoded image split (`data
 *                                         imagefolder --store jpeg`): each
 *                                         sample's file bytes as a variable
 *                                         field `encoded`, with `shape`,
 *                                         `format` and `label`.
 *
 * Other sources plug in by filling a gr_source and its ops (source_dataset.c
 * is the model), with no change to the reader API. The loader takes
 * gr_source_encoded (gr_source_dataset of an encoded split is it): its
 * workers turn the `encoded` blob into pixels with gr_image_decode_mem
 * (image.h), then crop and normalize them as augment.h does
 * (loader_encoded.c).
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
#define GR_SOURCE_MAX_FIELDS 16
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
/* (For an encoded split, gr_dataset_encoded, the split's gr_source_encoded
 * instead, borrowed: its fields, closed with the dataset.) */

/* ---- an HDF5 split of any datasets as a source (source_table.c) ---- */

/* data.cache: where a split's samples are read from. AUTO holds them in
 * memory when they fit under gr_dataset_memory_limit() (dataio.h:
 * GPURUN_DATA_MEM_LIMIT, default 2 GiB or a quarter of the available
 * memory), MEMORY always (exit 4 when the allocation fails), NONE never:
 * every batch is read from the file. */
typedef enum gr_cache_mode { GR_CACHE_AUTO, GR_CACHE_MEMORY, GR_CACHE_NONE } gr_cache_mode;

/* Opens group `group` ("/", "/train", ...; normalized as gr_dataset_open
 * does) of the HDF5 file at path as a table: every dataset directly in the
 * group (links in name order; sub-groups and named types are skipped) is one
 * field, named as the dataset ("features", "targets", "tokens"), origin its
 * path ("/train/features"). Each must have rank >= 1 and the same leading
 * dimension N >= 1 as the others; the per-sample shape is the rest (rank 0
 * for a dataset [N]; every side >= 1, at most GR_FIELD_MAX_RANK of them).
 * A dataset of rank 4 has layout "CHW" ([N,C,H,W]), or "HWC" when its
 * attribute `layout` says "NHWC", so the loader can take it as an image
 * (GR_DELIVER_IMAGE); other fields have layout "".
 * Element types: uint8, uint16, int32, int64, IEEE float16, float32 (any
 * byte order), and, converted as read, int8 and int16 as int32 and uint32
 * as int64. Float fields must be finite: checked at open when held in
 * memory, else as each batch's rows are read (exit 3 naming the file, the
 * dataset and the sample). The fields of all datasets together are held in
 * memory per `cache`, as a dataset's images are (the sum of the datasets'
 * bytes against the limit); else a fetch reads the distinct rows of a batch
 * from each dataset, one hyperslab per run of consecutive rows.
 *
 * Which source a caller opens: gr_source_dataset over gr_dataset_open for
 * the image layout of DESIGN 1.5 (fields `image`, `label`: the default, and
 * what every job without declared inputs reads), gr_source_table when the
 * job declares its inputs and targets by name (fields named as the
 * datasets, as `gpurun data csv` writes them: `features`, `targets`). A
 * group holding `images` and `labels` opens as a table too, with fields
 * `images` and `labels` as stored.
 *
 * Returns the source (close it with gr_source_close), or NULL with *err
 * set (GR_ERR_DATA, exit 3; GR_ERR_OOM for memory):
 *   "data/f.h5: group /val: no such group"
 *   "data/f.h5: group /train holds no datasets (a table is a group of datasets [N, ...])"
 *   "data/f.h5: /train/w: unsupported dtype (float64); ..."
 *   "data/f.h5: /train/targets: N=99, but /train/features has N=100"
 *   "data/f.h5: /train/x: sample 7 holds NaN at element 2 of 4; float fields must be finite..." */
gr_source *gr_source_table(const char *path, const char *group, gr_cache_mode cache, gr_error *err);
/* The host memory a table source holds open: its fields held in memory, or
 * reading from the file, HDF5's chunk cache of each dataset at its fullest
 * (1 MiB or the dataset, whichever is less). 0 for another kind of source. */
size_t gr_source_table_host_bytes(const gr_source *s);
/* Numeric attribute `name` of field `field`'s dataset (field NULL: of the
 * split's group) into out: the count read, at most max; 0 when absent, -1
 * when present but not numeric or unreadable, or s is not a table source.
 * `gpurun data csv` writes `mean` and `std` (the train split's, per column)
 * on `features` and `targets`. */
int gr_source_table_attr_floats(const gr_source *s, const char *field, const char *name, double *out, int max);

/* ---- an encoded image split (source_encoded.c) ---- */

/* Opens group `group` of the HDF5 file at path, an encoded image split
 * (DESIGN 1.5: attribute storage = "encoded"; `encoded`, `offsets`,
 * `shapes`, `formats`, `labels`), as four fields: `encoded` (uint8,
 * variable: sample i's bytes, JPEG or PNG, exactly as stored), `shape`
 * (uint16 [3]: H, W, C of the stored image), `format` (uint8: 0 JPEG, 1 PNG)
 * and `label` (int32). The small datasets are read and checked at open
 * (shapes agree, offsets start at 0 and rise, formats 0 or 1, labels >= 0,
 * `encoded` contiguous and unfiltered); a fetch reads each sample with one
 * pread. NULL with *err (GR_ERR_DATA, naming the file and dataset) on a
 * file that is not so. Nothing is decoded. */
gr_source *gr_source_encoded(const char *path, const char *group, gr_error *err);

/* ---- a token split as windows for language models (source_tokens.c) ---- */

#define GR_SOURCE_TOKENS_MAX_T ((int64_t)1 << 24) /* data.seq_len's bound */

/* Opens the 1-D dataset `tokens` of group `group` (DESIGN 1.5, token
 * splits: what `gpurun data text` and `data tokens` write) as N = floor((n -
 * 1) / seq_len) samples of n tokens: sample i is the window tokens[i T, i T +
 * T + 1) (T = seq_len; windows do not overlap but for the one token that ends
 * one and starts the next, as llm.c walks its files; the last n - 1 - N T
 * tokens are in none). Two fields, both origin the dataset ("/train/tokens"),
 * shape [T]: `tokens`, the window's first T, and `targets`, its last T (the
 * next token of each). Element type: GR_FT_UINT16 when stored as uint8 or
 * uint16, else GR_FT_INT32 (any integer type, read through int64). The
 * dataset's integer attribute `vocab_size` (1..2^31) bounds the ids: every
 * token is checked in [0, vocab_size), at open when the stream is held in
 * memory (data.cache as gr_source_table: cache AUTO when n times the element
 * size fits gr_dataset_memory_limit), else as each batch's windows are read
 * (one hyperslab per run of consecutive windows). Which windows a batch
 * holds is the loader's: its shuffled order of (seed, epoch, rank, world), or
 * the windows in order without shuffle. Returns the source, or NULL with
 * *err set: GR_ERR_DATA (exit 3) naming the file and the dataset,
 *   "data/t.h5: /train/tokens: no such dataset"
 *   "data/t.h5: /train/tokens: no attribute vocab_size (...)"
 *   "data/t.h5: /train/tokens: token 301 at position 12345 is >= vocab_size 256"
 *   "data/t.h5: /train/tokens: 9 tokens, fewer than seq_len + 1 = 17: not one window (data.seq_len)"
 * GR_ERR_USAGE for seq_len outside 1..GR_SOURCE_TOKENS_MAX_T, GR_ERR_OOM for
 * memory. */
gr_source *gr_source_tokens(const char *path, const char *group, int64_t seq_len, gr_cache_mode cache,
                            gr_error *err);
/* The vocab_size of a token source (ids are below it: what a model's
 * embedding must cover); 0 for another kind of source. */
int64_t gr_source_tokens_vocab(const gr_source *s);
/* The host memory a token source holds open: the stream held in memory, or
 * HDF5's chunk cache at its fullest (1 MiB or the dataset); 0 for another
 * kind of source. */
size_t gr_source_tokens_host_bytes(const gr_source *s);
/* Whether group `group` of the file at path is a token split (holds a 1-D
 * dataset `tokens`): 1 yes, 0 no, -1 cannot tell (no such regular file or
 * group, not HDF5: opening it says why). */
int gr_source_tokens_probe(const char *path, const char *group);

#endif
