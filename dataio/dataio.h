/* dataio.h — datasets in the HDF5 layout of DESIGN 1.5, the loader API the
 * training loop consumes (the `gpurun data` converters: dataio/convert.h).
 *
 * Exports:
 *   gr_dataset_*  an opened split (group holding `images` and `labels`);
 *   gr_loader_*   an endless stream of batches over a dataset, epoch after
 *                 epoch, in an order that is a pure function of
 *                 (seed, epoch, rank, world), read ahead by data.workers
 *                 threads into a ring of data.prefetch batch buffers
 *                 (page-locked when a GPU runs the job). The loader reads
 *                 samples through a sample source (source.h): a dataset
 *                 is one (gr_source_dataset), others open with
 *                 gr_loader_open_source.
 * All failures are GR_ERR_DATA (exit 3) with a message naming the file, and
 * the group and dataset when they are involved. HDF5's own error-stack
 * printing is switched off; its failures are translated. */
#ifndef GR_DATAIO_H
#define GR_DATAIO_H

#include "../common/gr_common.h"
#include "../common/gr_encbatch.h"
#include "augment.h"
#include "source.h"

/* ---- datasets ---- */

typedef struct gr_dataset gr_dataset;

/* Opens group `group` ("/" or "/train", ...) of the HDF5 file at path and
 * checks: both datasets exist, images rank 3 ([N,H,W], taken as C=1) or 4
 * ([N,C,H,W]; attribute layout="NHWC" on images means [N,H,W,C]), dtype
 * uint8/float16/float32, labels rank 1 of an integer type, same N, N >= 1,
 * labels >= 0. Reads labels into memory. Example messages:
 *   "data/f.h5: no such file"
 *   "data/f.h5: group /val: no such group"
 *   "data/f.h5: /train/images: no such dataset"
 *   "data/f.h5: /train: images has N=60000 but labels has N=59999"
 *   "data/f.h5: /train/labels[17]: label -1 is negative"
 *   "data/f.h5: /train/images: sample 17 holds NaN at element 5 of 784; float images must be finite..."
 *     (float16/float32 images: checked here when the images are held in
 *     memory, else by gr_dataset_fetch as each batch's samples are read)
 *   "data/f.h5: not an HDF5 file or corrupt (HDF5: <minor message>)" */
gr_status gr_dataset_open(const char *path, const char *group, gr_dataset **out, gr_error *err);
/* data.cache (gr_cache_mode, source.h): AUTO holds the images in memory
 * when they fit under gr_dataset_memory_limit() (gr_dataset_open does this),
 * MEMORY always (exit 4 when the allocation fails), NONE never: every batch
 * is read from the file. */
gr_status gr_dataset_open_cache(const char *path, const char *group, gr_cache_mode cache, gr_dataset **out,
                                gr_error *err);
void gr_dataset_close(gr_dataset *ds);
/* A split of n uint8 images C,H,W already in memory (copied), labelled 0,
 * named `name` in messages: image files on their way to a model. */
gr_dataset *gr_dataset_wrap(const char *name, const uint8_t *images, int64_t n, int64_t c, int64_t h, int64_t w);

int64_t gr_dataset_len(const gr_dataset *ds);
/* Per-sample shape in C,H,W meaning (C=1 for rank-3 images). */
void gr_dataset_sample_shape(const gr_dataset *ds, int64_t chw[3]);
gr_dtype gr_dataset_dtype(const gr_dataset *ds);
const int32_t *gr_dataset_labels(const gr_dataset *ds); /* N labels */
/* Group attributes `mean` / `std` (stored units, one per channel); returns
 * the count read, at most max (0 when absent, -1 when present but not
 * numeric or unreadable). */
int gr_dataset_attr_floats(const gr_dataset *ds, const char *name, double *out, int max);
/* Attribute `classes` (the class names, one string per class): their count,
 * with *names allocated (free with gr_dataset_classes_free); 0 when absent,
 * -1 when it is not a list of strings or cannot be read (*names NULL). */
int gr_dataset_classes(const gr_dataset *ds, char ***names);
void gr_dataset_classes_free(char **names, int n);
const char *gr_dataset_group(const gr_dataset *ds); /* "/train" */
/* Error (exit 3) naming the first label >= classes:
 *   "data/f.h5: /train/labels[123]: label 12 is outside [0, 10) (the model has 10 outputs)" */
gr_status gr_dataset_check_labels(const gr_dataset *ds, int64_t classes, gr_error *err);

/* Images datasets of at most this many bytes are read into memory whole at
 * open; larger ones are read per batch from the file (hyperslab selections),
 * so files bigger than RAM work. The limit is, in order: the last value
 * passed to gr_dataset_set_memory_limit (>= 0; negative restores the
 * default), else the environment variable GPURUN_DATA_MEM_LIMIT (bytes),
 * else 2 GiB or a quarter of the host memory available, whichever is less.
 * It applies to datasets opened afterwards. */
void gr_dataset_set_memory_limit(int64_t bytes);
int64_t gr_dataset_memory_limit(void);
/* Whether the images of ds were read into memory at open. */
bool gr_dataset_in_memory(const gr_dataset *ds);
/* The images are read with pread at known offsets, past HDF5 (uncompressed,
 * little-endian, every chunk written; else through H5Dread). */
bool gr_dataset_reads_direct(const gr_dataset *ds);
/* The host memory ds holds open: its labels, the images held in memory, or
 * for reads from the file HDF5's chunk cache at its fullest (the cache's
 * size or the whole images dataset, whichever is less; direct reads bypass
 * it, which only the two samples their check reads go through). */
size_t gr_dataset_host_bytes(const gr_dataset *ds);

/* Raw access, for the readers of the dataset as a sample source
 * (gr_source_dataset; the loader's worker threads): gr_dataset_fetch makes
 * the stored bytes of samples idx[0..n) reachable through rows (in memory:
 * no copy; on disk: the distinct rows read into rows->raw with one
 * selection, then checked for inf/NaN in float images: exit 3 naming the
 * sample).
 * Concurrent calls are safe when each has its own rows (HDF5 is built
 * thread-safe and serializes its part). gr_rows_sample gives one fetched
 * sample's bytes: C,H,W (or H,W,C when nhwc) elements of the stored dtype. */
typedef struct gr_rows {
    int64_t *sorted;      /* distinct sample indices read, ascending */
    int64_t n, cap;
    uint8_t *raw;         /* their bytes, in that order */
    size_t raw_cap;
} gr_rows;
gr_status gr_dataset_fetch(gr_dataset *ds, const int64_t *idx, int64_t n, gr_rows *rows, gr_error *err);
const void *gr_rows_sample(const gr_dataset *ds, const gr_rows *rows, int64_t idx);
void gr_rows_free(gr_rows *rows);
size_t gr_dataset_sample_bytes(const gr_dataset *ds);
bool gr_dataset_nhwc(const gr_dataset *ds);
const char *gr_dataset_path(const gr_dataset *ds);
const char *gr_dataset_images_name(const gr_dataset *ds); /* "/train/images" */
/* Whether ds is an encoded image split (JPEG/PNG bytes per sample, DESIGN
 * 1.5): its sample shape is [3, 0, 0] (sizes vary), the loader decodes each
 * sample to the crop size (data.augment.crop.size, required). */
bool gr_dataset_encoded(const gr_dataset *ds);

/* Reads samples idx[0..n) into x (n * C*H*W floats, C,H,W order whatever the
 * file layout) as (raw - mean[c]) / std[c], and their labels into y. */
gr_status gr_dataset_read(gr_dataset *ds, const int64_t *idx, int64_t n,
                          const double *mean, const double *std,
                          float *x, int32_t *y, gr_error *err);

/* ---- loader ---- */

/* How the loader delivers a field of the source (gr_loader_field.as). */
typedef enum gr_deliver {
    GR_DELIVER_FLOAT32, /* float32, any element type's stored values converted (uint8 0..255 as 0..255,
                           float16 widened), then normalized when n_norm says so */
    GR_DELIVER_INT32,   /* int32, from an integer field (uint8, uint16, int32; int64 values must fit) */
    GR_DELIVER_IMAGE,   /* float32 [C,oh,ow] through the image path of x: a uint8, float16 or float32 field
                           [C,H,W] (layout "CHW") or [H,W,C] ("HWC"), cropped and flipped by cfg.aug and
                           normalized by cfg's n_norm, mean, std, as x is; at most one field */
} gr_deliver;

/* One field for the loader to deliver (gr_loader_config.fields). */
typedef struct gr_loader_field {
    const char *name;     /* the source's field (gr_source_find) */
    gr_deliver as;
    /* FLOAT32 only: (v - mean[j]) / std[j], computed in double, with j = 0
     * when n_norm is 1 and the index along the field's last axis when n_norm
     * is its size (a feature column); 0: stored values as they are. */
    int n_norm;
    const double *mean, *std;
} gr_loader_field;

/* A delivered field of a batch, in the order of gr_loader_config.fields. */
typedef struct gr_batch_field {
    const char *name;     /* the source's field */
    void *data;           /* n samples of `bytes` each: float (FLOAT32, IMAGE) or int32_t (INT32) */
    gr_ftype type;        /* GR_FT_FLOAT32 or GR_FT_INT32 */
    size_t bytes;         /* per sample */
    int rank;             /* per-sample shape: the field's (IMAGE: [C,oh,ow]) */
    int64_t shape[GR_FIELD_MAX_RANK];
} gr_batch_field;

typedef struct gr_batch {
    float *x;             /* n * C*H*W floats, normalized (after the crop: gr_loader_sample_shape);
                             NULL when the config lists fields */
    int32_t *y;           /* n labels; NULL when the config lists fields */
    int nfields;          /* gr_loader_config.nfields */
    gr_batch_field *fields; /* the listed fields, in their order */
    int64_t n;            /* samples in this batch (< batch only for a kept last batch) */
    int64_t epoch;        /* 0-based epoch this batch belongs to */
    int64_t index;        /* batch index within the epoch */
    int64_t sample_in_epoch; /* position of the first sample within this rank's epoch */
    bool last_in_epoch;
    void *device;         /* free for the ready hook (e.g. the batch's device copy) */
    /* data.on_error skip (gr_loader_config.skip_damaged): samples of this
     * batch that did not decode, each replaced by the next sample in file
     * order that does; the first one's error, naming it and its stand-in */
    int64_t skipped;
    gr_error skip_first;
    /* An encoded split read with encoded_payload: the samples' JPEG bytes
     * and transforms for a device to decode into the input (x holds only
     * the samples decoded on the host: enc->s[i].host); else NULL. */
    gr_enc_batch *enc;
} gr_batch;

typedef struct gr_loader_config {
    int64_t batch;        /* samples per batch (the micro-batch) */
    bool shuffle;         /* false: file order */
    bool drop_last;       /* true: an epoch's last partial batch is skipped (training); false: kept (eval) */
    uint64_t seed;
    int rank, world;      /* this rank's shard of each epoch: 0, 1 for one process */
    int n_norm;           /* channels in mean/std (1 = same for all) */
    double mean[16], std[16];
    gr_augment aug;       /* crop and flip per sample (zeroed: none) */
    int prefetch;         /* batch buffers in the ring (>= 1) */
    int workers;          /* decode threads; 0 = batches are made inside gr_loader_next */
    /* An encoded sample that does not decode: false, the batch fails (exit
     * 3 naming it); true (data.on_error skip), the next sample in file order
     * that decodes takes its place, with its own draws and label, and the
     * batch counts it (gr_batch.skipped). */
    bool skip_damaged;
    /* The fields to deliver, in this order, into the batch's fields[] (read
     * by gr_loader_open*, not kept: names and statistics are copied). None
     * (nfields 0): the batch's x and y from the source's `image` and
     * `label`, as always. Some: those fields only (x and y NULL; the source
     * needs no `image` or `label`), at most GR_SOURCE_MAX_FIELDS; n_norm,
     * mean, std and aug apply to the one delivered as GR_DELIVER_IMAGE. */
    const gr_loader_field *fields;
    int nfields;
    /* Batch buffers come from host_alloc when set (the CUDA backend hands
     * out page-locked memory), else from aligned host memory. */
    void *(*host_alloc)(size_t bytes, void *ctx);
    void (*host_free)(void *p, void *ctx);
    void *alloc_ctx;
    /* Called by the thread that filled a batch, before the training loop
     * can take it: the hook for a device copy on a separate stream. A
     * failure is returned by the gr_loader_next that reaches this batch. */
    gr_status (*ready)(gr_batch *b, void *ctx, gr_error *err);
    void *ready_ctx;
    /* An encoded split (no fields listed): each batch carries its samples'
     * JPEG bytes, stored shapes and transforms in b->enc instead of decoded
     * pixels, the transforms drawn exactly as the host decode draws them
     * (loader_payload.c); a PNG sample is decoded into x as before (host
     * set). Ignored for other sources. data.decode gpu. */
    bool encoded_payload;
} gr_loader_config;

typedef struct gr_loader gr_loader;

/* The host memory a loader over ds with cfg holds (gr_loader_open's
 * allocations, and what its workers' reads and epoch orders grow to): the
 * ring's batch buffers, each worker's indices, decode scratch and, reading
 * from the file, the rows of a batch; two epoch permutations when
 * shuffling. Its figure for `gpurun plan`, with no loader opened. */
size_t gr_loader_host_bytes(gr_dataset *ds, const gr_loader_config *cfg);
/* the same for a loader over a source (gr_loader_open_source); 0 when the
 * source lacks the fields the loader takes */
size_t gr_loader_host_bytes_source(gr_source *src, const gr_loader_config *cfg);

/* What the loader would deliver of src with cfg's fields (cfg->nfields of
 * them) into out[0..nfields): name, type, per-sample bytes and shape (data
 * NULL), with no loader opened (for `gpurun validate` and `plan`). Errors,
 * naming the source and the field: no such field (the message lists the
 * source's), a variable-size one, a float field asked as INT32, an IMAGE
 * field of another shape or type or a second one (GR_ERR_DATA); n_norm that
 * is neither 0, 1 nor the last axis' size, unusable statistics, n_norm on an
 * INT32 or IMAGE field, augmentation with no IMAGE field (GR_ERR_USAGE). */
gr_status gr_loader_fields_describe(const gr_source *src, const gr_loader_config *cfg, gr_batch_field *out,
                                    gr_error *err);

/* Order: epoch e's sample order is a permutation of [0, N) computed from
 * (seed, e) alone (identity when !shuffle); rank r of w takes positions
 * r, r+w, r+2w, ... of it (N/w each, the remainder dropped when w > 1), then
 * cuts them into batches. The batches' contents are a pure function of
 * (seed, epoch, rank, world, batch index): thread counts and timing change
 * when a batch is made, never what is in it. Starts at epoch 0, sample 0.
 * Errors: the crop does not fit the images (exit 3), bad configuration
 * (exit 2), buffers (exit 4), threads (exit 1). */
gr_status gr_loader_open(gr_dataset *ds, const gr_loader_config *cfg, gr_loader **out, gr_error *err);
/* The same over any sample source (borrowed: close the loader first).
 * With no fields listed in cfg it takes two of its fields: `image` (uint8,
 * float16 or float32; shape [C,H,W] with layout "CHW" or [H,W,C] with
 * "HWC"), decoded per sample by augment.h's decoder, and `label` (an int32
 * scalar) into the batch's y; a source without them is GR_ERR_DATA naming
 * it and the field. The order, augmentation and batches are those
 * gr_loader_open makes when the source is gr_source_dataset(ds). A source
 * with `encoded`, `shape` and `label` instead (an encoded split) is decoded
 * per sample to 3 x S x S, S the crop size, which it needs (crop resized or
 * center; GR_ERR_USAGE otherwise): loader_encoded.c. With
 * fields listed, it delivers those (gr_loader_fields_describe says what
 * and refuses what it cannot), in the same order of samples: an INT32 field
 * whose int64 value does not fit is GR_ERR_DATA naming the file, the
 * dataset, the sample and the value, returned by the gr_loader_next that
 * reaches its batch. */
gr_status gr_loader_open_source(gr_source *src, const gr_loader_config *cfg, gr_loader **out, gr_error *err);
void gr_loader_close(gr_loader *ld);
/* Per-sample shape of the batches' images, C,H,W (the crop size when
 * cropping): x's, or the GR_DELIVER_IMAGE field's; zeros when neither. */
void gr_loader_sample_shape(const gr_loader *ld, int64_t chw[3]);
int64_t gr_loader_batches_per_epoch(const gr_loader *ld);
/* This rank's samples per epoch: its shard (N, or N/world), less the
 * skipped partial batch when drop_last. */
int64_t gr_loader_samples_per_epoch(const gr_loader *ld);
/* Moves to (epoch, sample_in_epoch); sample_in_epoch must be a multiple of
 * the batch. The batches that follow are exactly those an uninterrupted run
 * would have produced from that point. Seeking to the position the stream
 * is already at keeps the batches prefetched for it; any other position
 * discards them. Batches still held stay valid until released. */
gr_status gr_loader_seek(gr_loader *ld, int64_t epoch, int64_t sample_in_epoch, gr_error *err);
/* The next batch, crossing into the next epoch after the last one. The batch
 * stays valid until gr_loader_release; at most `prefetch` may be held. */
gr_status gr_loader_next(gr_loader *ld, gr_batch **out, gr_error *err);
void gr_loader_release(gr_loader *ld, gr_batch *b);
/* Sample i of a batch with an encoded payload (b->enc) decoded on the
 * host into its row of b->x, exactly as a loader without the payload
 * decodes it: for the samples a device decoder gives back. Errors as that
 * decode's (exit 3 naming the file, the dataset and the sample). From one
 * thread at a time (the consumer's). */
gr_status gr_loader_decode_host(gr_loader *ld, gr_batch *b, int64_t i, gr_error *err);
/* Seconds gr_loader_next spent waiting for data so far (with workers = 0,
 * all the time spent making batches). */
/* The short side an encoded split's evaluation crop of size x size is taken
 * from: round(size * 256 / 224), ImageNet's Resize(256) + CenterCrop(224)
 * (loader_encoded.c; `gpurun predict` makes image files so). */
int64_t gr_encoded_eval_short_side(int64_t size);
/* Whether the loader decodes an encoded image split (JPEG/PNG bytes). */
bool gr_loader_encoded(const gr_loader *ld);
double gr_loader_wait_s(const gr_loader *ld);

/* ---- token splits (tokens_desc.c) ---- */

/* What a token split's `tokens` dataset says of its tokens. */
typedef struct gr_tokens_desc {
    char tokenizer[32];  /* "bytes", "gpt2", ... */
    int64_t vocab_size;  /* every token is below it */
} gr_tokens_desc;

/* The `tokenizer` and `vocab_size` attributes of group's `tokens` dataset
 * in the HDF5 file at path; GR_ERR_DATA (exit 3) naming the file and the
 * dataset when it or they are missing. */
gr_status gr_tokens_desc_read(const char *path, const char *group, gr_tokens_desc *d, gr_error *err);

#endif
