/* loader.c — the batch stream: worker threads filling a ring of batch
 * buffers, delivered strictly in order.
 *
 * Order. Epoch e's order is a Fisher–Yates shuffle of [0, N) whose draws are
 * gr_hash64(seed ^ GR_LOADER_SHUFFLE_KEY, e * N + i): a pure function of
 * (seed, e), so any position of any epoch can be recomputed after a seek or a
 * resume. Rank r of w takes permutation positions r, r+w, ... (N/w of them
 * when w > 1) and cuts them into batches. A sample's crop and flip are drawn
 * from (seed, epoch, sample index) (augment.c).
 *
 * Samples. The loader reads a sample source (source.h): its `image` field
 * through the per-sample decoder/augmenter of augment.h, its `label` field
 * into the batch's labels. A dataset is the source gr_source_dataset. A
 * config that lists fields gets those instead, each into its own buffer of
 * the batch (loader_fields.c): through the same decoder for the one
 * delivered as an image, else converted to float32 or int32.
 *
 * Pipeline. Batches are numbered through the epochs, seq = epoch * batches +
 * index. A worker claims the next seq to issue as soon as any of the
 * `prefetch` slots is free (the training loop may return batches in any
 * order), copies the batch's sample
 * indices (under the lock: the permutation of an epoch is computed once and
 * kept for the two most recent epochs), then, unlocked: fetches the samples
 * through its own source reader (a dataset in memory: nothing to do; on
 * disk: one HDF5 selection per batch, which HDF5 serves chunk by chunk and
 * serializes across threads), decodes each sample's image through its
 * transform into the slot's buffers, calls the ready hook, and marks the
 * slot full. gr_loader_next hands out slots in
 * seq order only, so the stream is the same for any number of workers; with
 * no workers it fills the slot itself.
 *
 * Seek. Moving anywhere but the current position bumps a generation number:
 * full slots of the old generation are freed at once, and batches being
 * made for it are dropped by their worker when it finishes them. */
#include "../common/env.h"
#include "dataio.h"
#include "loader_fields.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define GR_LOADER_SHUFFLE_KEY 0x53485546464c4531ull /* "SHUFFLE1" */

typedef enum slot_state { SLOT_FREE, SLOT_FILLING, SLOT_FULL, SLOT_HELD } slot_state;

typedef struct loader_slot {
    gr_batch b;
    slot_state state;
    int64_t seq;
    uint64_t gen;
    gr_status st;        /* of the fill */
    gr_error err;
} loader_slot;

/* What one thread needs to make batches. */
typedef struct loader_worker {
    struct gr_loader *ld;
    pthread_t thread;
    bool started;
    int64_t *idx;        /* one batch of sample indices */
    gr_source_reader rd; /* this thread's reads from the source */
    gr_source_reader sub; /* the stand-ins of damaged samples (data.on_error skip) */
    void *scratch;       /* gr_decode_sample */
    gr_enc_scratch enc;  /* an encoded split's decodes */
} loader_worker;

typedef struct epoch_perm {
    int64_t epoch;       /* -1: empty */
    int64_t *perm;
} epoch_perm;

/* What the loader takes of a source: its image field (shape in C,H,W
 * meaning, stored type, layout; -1 when none is decoded) and its label field
 * (-1 when the config lists fields). */
typedef struct loader_fields {
    int image, label;          /* field indices */
    int shape;                 /* an encoded split: its `shape` field (image: `encoded`); else -1 */
    int64_t chw[3];
    gr_dtype dtype;
    bool nhwc;
} loader_fields;

struct gr_loader {
    gr_source *src;
    bool own_src;              /* made by gr_loader_open, closed with the loader */
    loader_fields f;
    gr_loader_out *outs;       /* the fields delivered (cfg.nfields; none: x and y) */
    gr_loader_config cfg;
    int64_t n;                 /* source samples */
    int64_t in_chw[3], out_elems;
    int64_t shard;             /* this rank's samples per epoch before batching */
    int64_t batches;           /* per epoch */
    double mean[16], std[16];  /* per image channel */
    gr_decoder dec;

    pthread_mutex_t mu;
    pthread_cond_t work;       /* workers: a slot was freed, or stop */
    pthread_cond_t ready;      /* the consumer: a slot was filled */
    epoch_perm perms[2];
    loader_slot *slots;
    int nslots;
    int64_t issue, deliver;    /* next seq to give a worker / to the consumer */
    uint64_t gen;
    bool stop;
    int64_t delay_ms;          /* GPURUN_LOADER_DELAY_MS (tests): a pause before each batch */
    loader_worker *workers;    /* cfg.workers of them, or one for the consumer */
    int nworkers;
    double wait_s;
    gr_payload *pay;           /* cfg.encoded_payload over an encoded split: batches as bytes (loader_payload.c) */
};

/* Fisher–Yates over [0, n) with counter-based draws: a pure function of
 * (seed, epoch). The modulo bias is below 2^-32 for n < 2^32. */
static void loader_permute(int64_t *perm, int64_t n, uint64_t seed, int64_t epoch) {
    const uint64_t key = seed ^ GR_LOADER_SHUFFLE_KEY;
    const uint64_t base = (uint64_t)epoch * (uint64_t)n;
    for (int64_t i = 0; i < n; i++) perm[i] = i;
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)(gr_hash64(key, base + (uint64_t)i) % (uint64_t)(i + 1));
        int64_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
}

/* Under the lock: the permutation of epoch, computed if it is not one of
 * the two kept (replacing the older). */
static const int64_t *loader_perm(gr_loader *ld, int64_t epoch) {
    for (int k = 0; k < 2; k++)
        if (ld->perms[k].epoch == epoch) return ld->perms[k].perm;
    epoch_perm *p = ld->perms[0].epoch < ld->perms[1].epoch ? &ld->perms[0] : &ld->perms[1];
    if (!p->perm) p->perm = gr_xmalloc((size_t)ld->n * sizeof *p->perm);
    loader_permute(p->perm, ld->n, ld->cfg.seed, epoch);
    p->epoch = epoch;
    return p->perm;
}

/* Under the lock: the dataset indices of batch seq into idx; returns the
 * count and fills the batch's position fields. */
static int64_t loader_indices(gr_loader *ld, int64_t seq, int64_t *idx, gr_batch *b) {
    const int64_t epoch = seq / ld->batches, index = seq % ld->batches;
    const int64_t B = ld->cfg.batch, first = index * B;
    const int64_t count = GR_MIN(B, ld->shard - first);
    const int64_t w = ld->cfg.world, r = ld->cfg.rank;
    const int64_t *perm = ld->cfg.shuffle ? loader_perm(ld, epoch) : NULL;
    for (int64_t k = 0; k < count; k++) {
        int64_t pos = r + (first + k) * w;
        idx[k] = perm ? perm[pos] : pos;
    }
    b->n = count;
    b->epoch = epoch;
    b->index = index;
    b->sample_in_epoch = first;
    b->last_in_epoch = index == ld->batches - 1;
    return count;
}

/* Unlocked: sample i (index s) of batch b into its fields. */
static gr_status loader_fill_fields(gr_loader *ld, loader_worker *w, gr_batch *b, int64_t i, int64_t s,
                                    gr_error *err) {
    for (int k = 0; k < b->nfields; k++) {
        const gr_loader_out *o = &ld->outs[k];
        uint8_t *dst = (uint8_t *)b->fields[k].data + (size_t)i * b->fields[k].bytes;
        size_t bytes;
        const void *p = gr_source_view(&w->rd, s, o->src, &bytes);
        if (o->as == GR_DELIVER_IMAGE) {
            gr_xform t;
            gr_augment_draw(&ld->cfg.aug, ld->in_chw[1], ld->in_chw[2], ld->cfg.seed, b->epoch, s, &t);
            gr_decode_sample(&ld->dec, p, &t, (float *)(void *)dst, w->scratch);
            continue;
        }
        gr_status st = gr_loader_out_convert(o, ld->src, p, s, dst, err);
        if (st != GR_OK) return st;
    }
    return GR_OK;
}

/* Unlocked: sample s of an encoded split into slot i of b, image and label;
 * one that does not decode fails the batch, or under skip_damaged gives its
 * place to a stand-in (gr_loader_stand_in). */
static gr_status loader_encoded_sample(gr_loader *ld, loader_worker *w, gr_batch *b, int64_t i, int64_t s,
                                       gr_error *err) {
    size_t bytes, sb;
    const void *p = gr_source_view(&w->rd, s, ld->f.image, &bytes);
    const uint16_t *hwc = gr_source_view(&w->rd, s, ld->f.shape, &sb);
    float *dst = b->x + i * ld->out_elems;
    gr_error e;
    gr_status st = gr_loader_decode_encoded(&ld->dec, &ld->cfg.aug, ld->src, ld->f.image, p, bytes, hwc,
                                            ld->cfg.seed, b->epoch, s, dst, &w->enc, &e);
    if (st == GR_OK) {
        memcpy(&b->y[i], gr_source_view(&w->rd, s, ld->f.label, &bytes), sizeof b->y[i]);
        return GR_OK;
    }
    if (st != GR_ERR_DATA || !ld->cfg.skip_damaged) {
        *err = e;
        return st;
    }
    const gr_enc_fields f = {ld->f.image, ld->f.shape, ld->f.label};
    return gr_loader_stand_in(&ld->dec, &ld->cfg.aug, ld->src, &f, &w->sub, ld->cfg.seed, b, s, &e, dst, &b->y[i],
                              &w->enc, err);
}

/* A split held in memory is read in shuffled order, and a small sample's
 * few cache lines (Fashion-MNIST's 784 bytes: 13) are too short a run for
 * the hardware prefetcher: each line waited on memory in turn, most of the
 * decode's time. The sample LOADER_AHEAD places on is asked for while this
 * one is decoded (a Fashion-MNIST sample 0.6 -> 0.24 us alone, here); a
 * larger sample streams by itself. */
enum { LOADER_AHEAD = 2, LOADER_PREFETCH_MAX = 16384 };

static void loader_prefetch(const gr_loader *ld, loader_worker *w, int64_t s) {
    size_t bytes;
    const char *p = gr_source_view(&w->rd, s, ld->f.image, &bytes);
    if (bytes > LOADER_PREFETCH_MAX) return;
    for (size_t o = 0; o < bytes; o += 64) __builtin_prefetch(p + o);
    if (bytes) __builtin_prefetch(p + bytes - 1);
}

/* Unlocked: makes the batch whose indices are in w->idx. */
static gr_status loader_fill(gr_loader *ld, loader_worker *w, gr_batch *b, gr_error *err) {
    b->skipped = 0;
    if (ld->delay_ms > 0) {
        struct timespec ts = {(time_t)(ld->delay_ms / 1000), (long)(ld->delay_ms % 1000) * 1000000};
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
    }
    gr_status st = gr_source_fetch(&w->rd, w->idx, b->n, err);
    if (st != GR_OK) return st;
    if (b->enc && (st = gr_payload_fill(ld->pay, &w->rd, &w->sub, w->idx, b, &w->enc, err)) != GR_OK) return st;
    if (b->enc) return ld->cfg.ready ? ld->cfg.ready(b, ld->cfg.ready_ctx, err) : GR_OK;
    for (int64_t i = 0; i < b->n && b->nfields; i++)
        if ((st = loader_fill_fields(ld, w, b, i, w->idx[i], err)) != GR_OK) return st;
    for (int64_t i = 0; i < b->n && !b->nfields; i++) {
        const int64_t s = w->idx[i];
        if (ld->f.shape >= 0) { /* an encoded split: image and label */
            if ((st = loader_encoded_sample(ld, w, b, i, s, err)) != GR_OK) return st;
            continue;
        }
        gr_xform t;
        size_t bytes;
        if (i + LOADER_AHEAD < b->n) loader_prefetch(ld, w, w->idx[i + LOADER_AHEAD]);
        gr_augment_draw(&ld->cfg.aug, ld->in_chw[1], ld->in_chw[2], ld->cfg.seed, b->epoch, s, &t);
        gr_decode_sample(&ld->dec, gr_source_view(&w->rd, s, ld->f.image, &bytes), &t, b->x + i * ld->out_elems,
                         w->scratch);
        memcpy(&b->y[i], gr_source_view(&w->rd, s, ld->f.label, &bytes), sizeof b->y[i]);
    }
    if (ld->cfg.ready) return ld->cfg.ready(b, ld->cfg.ready_ctx, err);
    return GR_OK;
}

/* Under the lock: a free slot, or NULL. */
static loader_slot *loader_free_slot(gr_loader *ld) {
    for (int k = 0; k < ld->nslots; k++)
        if (ld->slots[k].state == SLOT_FREE) return &ld->slots[k];
    return NULL;
}

static void *loader_worker_main(void *arg) {
    loader_worker *w = arg;
    gr_loader *ld = w->ld;
    pthread_mutex_lock(&ld->mu);
    for (;;) {
        loader_slot *s = NULL;
        while (!ld->stop && !(s = loader_free_slot(ld))) pthread_cond_wait(&ld->work, &ld->mu);
        if (ld->stop) break;
        const int64_t seq = ld->issue++;
        s->state = SLOT_FILLING;
        s->seq = seq;
        s->gen = ld->gen;
        loader_indices(ld, seq, w->idx, &s->b);
        pthread_mutex_unlock(&ld->mu);

        gr_error e;
        gr_status st = loader_fill(ld, w, &s->b, &e);

        pthread_mutex_lock(&ld->mu);
        if (s->gen == ld->gen) {
            s->st = st;
            if (st != GR_OK) s->err = e;
            s->state = SLOT_FULL;
            pthread_cond_broadcast(&ld->ready);
        } else { /* a seek went elsewhere meanwhile */
            s->state = SLOT_FREE;
            pthread_cond_broadcast(&ld->work);
        }
    }
    pthread_mutex_unlock(&ld->mu);
    return NULL;
}

static void worker_free(loader_worker *w) {
    free(w->idx);
    gr_source_reader_free(&w->rd);
    gr_source_reader_free(&w->sub);
    free(w->scratch);
    gr_enc_scratch_free(&w->enc);
}

static void *batch_alloc(const gr_loader_config *cfg, size_t bytes) {
    return cfg->host_alloc ? cfg->host_alloc(bytes, cfg->alloc_ctx) : gr_aligned_alloc(bytes);
}

static void batch_free(const gr_loader_config *cfg, void *p) {
    if (!p) return;
    if (cfg->host_free) cfg->host_free(p, cfg->alloc_ctx);
    else gr_aligned_free(p);
}

/* An encoded image split (fields `encoded`, `shape`, `label`): decoded
 * per sample to 3 x S x S, S the crop size, which it needs (its images vary
 * in size), and a crop it can take of any image (resized for training,
 * center for evaluation). */
static gr_status loader_encoded_fields(const gr_source *src, const gr_loader_config *cfg, loader_fields *f,
                                       gr_error *err) {
    f->image = gr_source_find(src, "encoded");
    f->shape = gr_source_find(src, "shape");
    f->label = gr_source_find(src, "label");
    if (f->shape < 0 || f->label < 0)
        return gr_error_set(err, GR_ERR_DATA, "loader: %s has no field '%s' (an encoded split has 'encoded', "
                            "'shape' and 'label')", src->path, f->shape < 0 ? "shape" : "label");
    if ((cfg->aug.crop != GR_CROP_RESIZED && cfg->aug.crop != GR_CROP_CENTER) || cfg->aug.size < 1)
        return gr_error_set(err, GR_ERR_USAGE, "loader: %s: %s: an encoded split's images vary in size: it is "
                            "read through a crop of a set size (data.augment.crop.size, type resized)", src->path,
                            src->fields[f->image].origin);
    f->chw[0] = 3; /* grayscale decodes to RGB */
    f->chw[1] = f->chw[2] = cfg->aug.size;
    f->dtype = GR_DT_UINT8;
    f->nhwc = true;
    return GR_OK;
}

/* The fields the loader takes of src into *f (and, when cfg lists fields,
 * those resolved into *outs, else NULL); GR_ERR_DATA naming the source and
 * the field when one is missing or not what the decoder reads. */
static gr_status loader_fields_of(const gr_source *src, const gr_loader_config *cfg, loader_fields *f,
                                  gr_loader_out **outs, gr_error *err) {
    gr_loader_image im;
    *outs = NULL;
    f->shape = -1;
    if (!cfg->nfields && gr_source_find(src, "image") < 0 && gr_source_find(src, "encoded") >= 0)
        return loader_encoded_fields(src, cfg, f, err);
    if (cfg->nfields) {
        gr_status st = gr_loader_outs_make(src, cfg, outs, &im, err);
        if (st != GR_OK) return st;
        f->image = im.field;
        f->label = -1;
    } else {
        f->image = gr_source_find(src, "image");
        f->label = gr_source_find(src, "label");
        if (f->image < 0 || f->label < 0)
            return gr_error_set(err, GR_ERR_DATA, "loader: %s has no field '%s' (the loader reads an 'image' and a "
                                "'label' field)", src->path, f->image < 0 ? "image" : "label");
        gr_status st = gr_loader_image_check(src, f->image, &im, err);
        if (st != GR_OK) return st;
        const gr_field *lab = &src->fields[f->label];
        if (lab->variable || lab->rank != 0 || lab->type != GR_FT_INT32)
            return gr_error_set(err, GR_ERR_DATA, "loader: %s: %s: field 'label' is %s%s of rank %d; the loader "
                                "reads one int32 per sample", src->path, lab->origin,
                                lab->variable ? "variable-size " : "", gr_ftype_name(lab->type), lab->rank);
    }
    f->nhwc = im.nhwc;
    memcpy(f->chw, im.chw, sizeof f->chw);
    f->dtype = im.dtype;
    return GR_OK;
}

size_t gr_loader_host_bytes_source(gr_source *src, const gr_loader_config *cfg) {
    loader_fields f;
    gr_loader_out *outs;
    if (loader_fields_of(src, cfg, &f, &outs, NULL) != GR_OK) return 0;
    int64_t oh = 0, ow = 0;
    const int64_t *chw = f.chw;
    if (f.image >= 0) gr_augment_out_shape(&cfg->aug, chw[1], chw[2], &oh, &ow);
    const size_t b = (size_t)cfg->batch, slots = (size_t)GR_MAX(cfg->prefetch, 1);
    const size_t workers = (size_t)GR_MAX(cfg->workers, 1);
    size_t worker = b * sizeof(int64_t) + (f.image >= 0 ? gr_decoder_scratch_bytes_for(chw[2], ow) : 0);
    if (f.shape >= 0) worker += gr_enc_scratch_estimate(ow);
    if (src->ops->reader_bytes) worker += src->ops->reader_bytes(src, cfg->batch);
    size_t sample = (size_t)(chw[0] * oh * ow) * sizeof(float) + sizeof(int32_t); /* x and y */
    if (outs) {
        sample = 0;
        for (int k = 0; k < cfg->nfields; k++) sample += outs[k].desc.bytes;
        gr_loader_outs_free(outs, cfg->nfields);
    }
    size_t bytes = slots * b * sample + workers * worker;
    if (cfg->shuffle) bytes += 2 * (size_t)src->n * sizeof(int64_t);
    return bytes;
}

size_t gr_loader_host_bytes(gr_dataset *ds, const gr_loader_config *cfg) {
    gr_source *src = gr_source_dataset(ds);
    size_t bytes = gr_loader_host_bytes_source(src, cfg);
    gr_source_close(src);
    return bytes;
}

gr_status gr_loader_open(gr_dataset *ds, const gr_loader_config *cfg, gr_loader **out, gr_error *err) {
    gr_source *src = gr_source_dataset(ds);
    gr_status st = gr_loader_open_source(src, cfg, out, err);
    if (st != GR_OK) gr_source_close(src);
    else (*out)->own_src = true;
    return st;
}

/* The listed fields' buffers of every slot (host_alloc, as x and y),
 * their pages touched. */
static gr_status loader_field_buffers(gr_loader *ld, gr_error *err) {
    const gr_loader_config *cfg = &ld->cfg;
    for (int s = 0; s < ld->nslots; s++) {
        gr_batch *b = &ld->slots[s].b;
        b->nfields = cfg->nfields;
        b->fields = gr_xcalloc((size_t)cfg->nfields, sizeof *b->fields);
        for (int k = 0; k < cfg->nfields; k++) {
            const size_t bytes = (size_t)cfg->batch * ld->outs[k].desc.bytes;
            b->fields[k] = ld->outs[k].desc;
            if (!(b->fields[k].data = batch_alloc(cfg, bytes)))
                return gr_error_set(err, GR_ERR_OOM, "loader: out of memory: %d batch buffers of %zu bytes for field "
                                    "'%s'", ld->nslots, bytes, ld->outs[k].desc.name);
            memset(b->fields[k].data, 0, bytes);
        }
    }
    return GR_OK;
}

/* The configuration against the source's fields f (and outs, the listed
 * ones): GR_ERR_USAGE for bad settings, GR_ERR_DATA when the data cannot
 * make a batch, GR_ERR_OOM for a batch too large to address. */
static gr_status loader_check(const gr_source *src, const gr_loader_config *cfg, const loader_fields *f,
                              const gr_loader_out *outs, gr_error *err) {
    const int64_t n = src->n, C = f->chw[0];
    int64_t oh = 0, ow = 0;
    if (cfg->batch < 1)
        return gr_error_set(err, GR_ERR_USAGE, "loader: batch %lld must be at least 1", (long long)cfg->batch);
    if (cfg->world < 1 || cfg->rank < 0 || cfg->rank >= cfg->world)
        return gr_error_set(err, GR_ERR_USAGE, "loader: rank %d of world %d is invalid", cfg->rank, cfg->world);
    if (cfg->workers < 0 || cfg->workers > 256 || cfg->prefetch < 0 || cfg->prefetch > 256)
        return gr_error_set(err, GR_ERR_USAGE, "loader: %d workers and %d prefetch buffers are out of range",
                            cfg->workers, cfg->prefetch);
    if (f->image >= 0) { /* x, or the field delivered as an image */
        if (cfg->n_norm < 0 || cfg->n_norm > (int)GR_ARRAY_LEN(cfg->mean) || (cfg->n_norm > 1 && cfg->n_norm != C))
            return gr_error_set(err, GR_ERR_USAGE,
                                "loader: normalize has %d values per statistic but the images have %lld channels",
                                cfg->n_norm, (long long)C);
        if (C > (int64_t)GR_ARRAY_LEN(cfg->mean) && cfg->n_norm > 1)
            return gr_error_set(err, GR_ERR_DATA, "loader: %lld channels; at most %d are supported", (long long)C,
                                (int)GR_ARRAY_LEN(cfg->mean));
        for (int c = 0; c < cfg->n_norm; c++)
            if (!isfinite(cfg->mean[c]) || !isfinite(cfg->std[c]) || cfg->std[c] == 0.0)
                return gr_error_set(err, GR_ERR_USAGE, "loader: normalize channel %d: mean %g / std %g is unusable",
                                    c, cfg->mean[c], cfg->std[c]);
        if (cfg->aug.crop != GR_CROP_NONE && (cfg->aug.size < 1 || cfg->aug.size > ((int64_t)1 << 16)))
            return gr_error_set(err, GR_ERR_USAGE, "loader: crop size %lld is out of range",
                                (long long)cfg->aug.size);
        gr_status st = gr_augment_check(&cfg->aug, f->chw[1], f->chw[2], src->path, src->fields[f->image].origin,
                                        err);
        if (st != GR_OK) return st;
        gr_augment_out_shape(&cfg->aug, f->chw[1], f->chw[2], &oh, &ow);
        if (cfg->batch > INT64_MAX / 4 / (C * oh * ow))
            return gr_error_set(err, GR_ERR_OOM, "loader: a batch of %lld samples of %lldx%lldx%lld floats is too "
                                "large", (long long)cfg->batch, (long long)C, (long long)oh, (long long)ow);
    }
    for (int k = 0; outs && k < cfg->nfields; k++)
        if ((size_t)cfg->batch > (SIZE_MAX / 4) / GR_MAX(outs[k].desc.bytes, 1))
            return gr_error_set(err, GR_ERR_OOM, "loader: a batch of %lld samples of field '%s' (%zu bytes each) is "
                                "too large", (long long)cfg->batch, outs[k].desc.name, outs[k].desc.bytes);
    const int64_t shard = cfg->world > 1 ? n / cfg->world : n;
    if (shard < 1)
        return gr_error_set(err, GR_ERR_DATA, "loader: the dataset has %lld samples, fewer than the %d ranks",
                            (long long)n, cfg->world);
    const int64_t batches = cfg->drop_last ? shard / cfg->batch : (shard + cfg->batch - 1) / cfg->batch;
    if (batches < 1)
        return gr_error_set(err, GR_ERR_DATA,
                            "loader: %lld samples per rank make no full batch of %lld (drop_last is on)",
                            (long long)shard, (long long)cfg->batch);
    return GR_OK;
}

gr_status gr_loader_open_source(gr_source *src, const gr_loader_config *cfg, gr_loader **out, gr_error *err) {
    *out = NULL;
    loader_fields f;
    gr_loader_out *outs;
    gr_status st = loader_fields_of(src, cfg, &f, &outs, err);
    if (st == GR_OK) st = loader_check(src, cfg, &f, outs, err);
    if (st != GR_OK) {
        gr_loader_outs_free(outs, cfg->nfields);
        return st;
    }
    int64_t chw[3], oh = 0, ow = 0;
    memcpy(chw, f.chw, sizeof chw);
    const int64_t n = src->n, C = chw[0];
    if (f.image >= 0) gr_augment_out_shape(&cfg->aug, chw[1], chw[2], &oh, &ow);
    const int64_t out_elems = C * oh * ow;
    const int64_t shard = cfg->world > 1 ? n / cfg->world : n;
    const int64_t batches = cfg->drop_last ? shard / cfg->batch : (shard + cfg->batch - 1) / cfg->batch;
    gr_loader *ld = gr_xcalloc(1, sizeof *ld);
    ld->src = src;
    ld->f = f;
    ld->outs = outs;
    ld->cfg = *cfg;
    ld->cfg.fields = NULL; /* read at open only: outs holds what was taken of them */
    ld->delay_ms = gr_env_int(GR_ENV_LOADER_DELAY_MS, 0);
    ld->n = n;
    memcpy(ld->in_chw, chw, sizeof chw);
    ld->out_elems = out_elems;
    ld->shard = shard;
    ld->batches = batches;
    for (int64_t c = 0; c < C && c < (int64_t)GR_ARRAY_LEN(ld->mean); c++) {
        int k = cfg->n_norm == 1 ? 0 : (int)c;
        ld->mean[c] = cfg->n_norm ? cfg->mean[k] : 0.0;
        ld->std[c] = cfg->n_norm ? cfg->std[k] : 1.0;
    }
    /* more channels than mean[] holds only happens with n_norm <= 1 */
    double *mean = ld->mean, *std = ld->std;
    double *big = NULL;
    if (C > (int64_t)GR_ARRAY_LEN(ld->mean)) {
        big = gr_xmalloc(2 * (size_t)C * sizeof *big);
        for (int64_t c = 0; c < C; c++) big[c] = ld->mean[0], big[C + c] = ld->std[0];
        mean = big, std = big + C;
    }
    if (f.image >= 0) gr_decoder_init(&ld->dec, f.dtype, chw, f.nhwc, oh, ow, mean, std);
    free(big);
    ld->perms[0].epoch = ld->perms[1].epoch = -1;
    pthread_mutex_init(&ld->mu, NULL);
    pthread_cond_init(&ld->work, NULL);
    pthread_cond_init(&ld->ready, NULL);

    ld->nslots = GR_MAX(cfg->prefetch, 1);
    ld->slots = gr_xcalloc((size_t)ld->nslots, sizeof *ld->slots);
    const size_t xbytes = (size_t)cfg->batch * (size_t)out_elems * sizeof(float);
    const size_t ybytes = (size_t)cfg->batch * sizeof(int32_t);
    if (cfg->nfields) {
        if ((st = loader_field_buffers(ld, err)) != GR_OK) {
            gr_loader_close(ld);
            return st;
        }
    }
    for (int s = 0; s < ld->nslots && !cfg->nfields; s++) {
        ld->slots[s].b.x = batch_alloc(cfg, xbytes);
        ld->slots[s].b.y = batch_alloc(cfg, ybytes);
        if (!ld->slots[s].b.x || !ld->slots[s].b.y) {
            gr_loader_close(ld);
            return gr_error_set(err, GR_ERR_OOM, "loader: out of memory: %d batch buffers of %zu bytes",
                                GR_MAX(cfg->prefetch, 1), xbytes + ybytes);
        }
        /* touch every page now: first-touch faults would otherwise land in
         * the first `prefetch` batches (they are slow in VMs) */
        memset(ld->slots[s].b.x, 0, xbytes);
        memset(ld->slots[s].b.y, 0, ybytes);
    }
    if (cfg->encoded_payload && f.shape >= 0) { /* the samples' bytes instead of their pixels */
        if ((st = gr_payload_open(src, f.image, f.shape, f.label, cfg, &ld->dec, ld->mean, ld->std, &ld->pay, err))) {
            gr_loader_close(ld);
            return st;
        }
        for (int s = 0; s < ld->nslots; s++) ld->slots[s].b.enc = gr_payload_batch_new(ld->pay);
    }
    ld->nworkers = GR_MAX(cfg->workers, 1);
    ld->workers = gr_xcalloc((size_t)ld->nworkers, sizeof *ld->workers);
    for (int i = 0; i < ld->nworkers; i++) {
        loader_worker *w = &ld->workers[i];
        w->ld = ld;
        w->idx = gr_xmalloc((size_t)cfg->batch * sizeof *w->idx);
        gr_source_reader_init(&w->rd, src);
        if (f.shape >= 0) gr_source_reader_init(&w->sub, src);
        if (f.image >= 0) w->scratch = gr_xmalloc(gr_decoder_scratch_bytes(&ld->dec));
    }
    /* workers start with every signal blocked, so SIGTERM/SIGINT reach the
     * training loop's thread, not a decode thread */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    for (int i = 0; i < cfg->workers; i++) {
        int rc = pthread_create(&ld->workers[i].thread, NULL, loader_worker_main, &ld->workers[i]);
        if (rc != 0) {
            pthread_sigmask(SIG_SETMASK, &old, NULL);
            gr_loader_close(ld);
            return gr_error_set(err, GR_ERR_INTERNAL, "loader: cannot start worker thread %d of %d: %s", i + 1,
                                cfg->workers, strerror(rc));
        }
        ld->workers[i].started = true;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    *out = ld;
    return GR_OK;
}

void gr_loader_close(gr_loader *ld) {
    if (!ld) return;
    pthread_mutex_lock(&ld->mu);
    ld->stop = true;
    pthread_cond_broadcast(&ld->work);
    pthread_mutex_unlock(&ld->mu);
    for (int i = 0; i < ld->nworkers; i++) {
        if (ld->workers[i].started) pthread_join(ld->workers[i].thread, NULL);
        worker_free(&ld->workers[i]);
    }
    free(ld->workers);
    for (int s = 0; s < ld->nslots; s++) {
        batch_free(&ld->cfg, ld->slots[s].b.x);
        batch_free(&ld->cfg, ld->slots[s].b.y);
        for (int k = 0; ld->slots[s].b.fields && k < ld->cfg.nfields; k++)
            batch_free(&ld->cfg, ld->slots[s].b.fields[k].data);
        free(ld->slots[s].b.fields);
        gr_payload_batch_free(ld->pay, ld->slots[s].b.enc);
    }
    free(ld->slots);
    gr_payload_close(ld->pay);
    gr_loader_outs_free(ld->outs, ld->cfg.nfields);
    free(ld->perms[0].perm);
    free(ld->perms[1].perm);
    gr_decoder_free(&ld->dec);
    if (ld->own_src) gr_source_close(ld->src);
    pthread_cond_destroy(&ld->work);
    pthread_cond_destroy(&ld->ready);
    pthread_mutex_destroy(&ld->mu);
    free(ld);
}

void gr_loader_sample_shape(const gr_loader *ld, int64_t chw[3]) {
    chw[0] = ld->dec.c, chw[1] = ld->dec.oh, chw[2] = ld->dec.ow;
}

int64_t gr_loader_batches_per_epoch(const gr_loader *ld) { return ld->batches; }

int64_t gr_loader_samples_per_epoch(const gr_loader *ld) {
    return ld->cfg.drop_last ? ld->batches * ld->cfg.batch : ld->shard;
}

gr_status gr_loader_seek(gr_loader *ld, int64_t epoch, int64_t sample_in_epoch, gr_error *err) {
    const int64_t b = ld->cfg.batch;
    if (epoch < 0 || sample_in_epoch < 0 || sample_in_epoch % b != 0 || sample_in_epoch / b >= ld->batches ||
        epoch > INT64_MAX / ld->batches - 1)
        return gr_error_set(err, GR_ERR_DATA,
                            "loader: cannot seek to epoch %lld sample %lld: the position must be a multiple of "
                            "the batch (%lld) below %lld",
                            (long long)epoch, (long long)sample_in_epoch, (long long)b,
                            (long long)(ld->batches * b));
    const int64_t seq = epoch * ld->batches + sample_in_epoch / b;
    pthread_mutex_lock(&ld->mu);
    if (seq != ld->deliver) {
        ld->gen++;
        for (int s = 0; s < ld->nslots; s++)
            if (ld->slots[s].state == SLOT_FULL) ld->slots[s].state = SLOT_FREE;
        ld->issue = ld->deliver = seq;
        pthread_cond_broadcast(&ld->work);
    }
    pthread_mutex_unlock(&ld->mu);
    return GR_OK;
}

gr_status gr_loader_next(gr_loader *ld, gr_batch **out, gr_error *err) {
    const double t0 = gr_now();
    *out = NULL;
    pthread_mutex_lock(&ld->mu);
    const int64_t seq = ld->deliver;
    int held = 0;
    for (int k = 0; k < ld->nslots; k++) held += ld->slots[k].state == SLOT_HELD;
    if (held == ld->nslots) {
        pthread_mutex_unlock(&ld->mu);
        return gr_error_set(err, GR_ERR_INTERNAL, "loader: all %d batch buffers are held (release one first)",
                            ld->nslots);
    }
    gr_status st = GR_OK;
    loader_slot *s = NULL;
    if (ld->cfg.workers == 0) {
        /* no threads: make the batch here (no fill of another generation
         * can be pending, so a slot that is not held is free) */
        s = loader_free_slot(ld);
        GR_ASSERT(s);
        s->seq = seq;
        s->gen = ld->gen;
        loader_indices(ld, seq, ld->workers[0].idx, &s->b);
        ld->issue = ld->deliver + 1;
        pthread_mutex_unlock(&ld->mu);
        st = loader_fill(ld, &ld->workers[0], &s->b, err);
        pthread_mutex_lock(&ld->mu);
    } else {
        /* the slot of seq was claimed before any later one, so it is being
         * filled or full unless a seek or failure reset the stream, after
         * which a free slot exists and a worker claims seq next */
        for (;;) {
            for (int k = 0; k < ld->nslots && !s; k++) {
                loader_slot *c = &ld->slots[k];
                if (c->state == SLOT_FULL && c->seq == seq && c->gen == ld->gen) s = c;
            }
            if (s) break;
            pthread_cond_wait(&ld->ready, &ld->mu);
        }
        st = s->st;
        if (st != GR_OK) *err = s->err;
    }
    if (st == GR_OK) {
        s->state = SLOT_HELD;
        ld->deliver++;
        *out = &s->b;
    } else {
        /* the failed batch stays current: the next call tries it again */
        s->state = SLOT_FREE;
        ld->issue = ld->deliver;
        ld->gen++;
        for (int k = 0; k < ld->nslots; k++)
            if (ld->slots[k].state == SLOT_FULL) ld->slots[k].state = SLOT_FREE;
        pthread_cond_broadcast(&ld->work);
    }
    ld->wait_s += gr_now() - t0;
    pthread_mutex_unlock(&ld->mu);
    return st;
}

void gr_loader_release(gr_loader *ld, gr_batch *b) {
    if (!b) return;
    pthread_mutex_lock(&ld->mu);
    for (int s = 0; s < ld->nslots; s++) {
        if (&ld->slots[s].b == b) {
            GR_ASSERT(ld->slots[s].state == SLOT_HELD);
            ld->slots[s].state = SLOT_FREE;
            pthread_cond_broadcast(&ld->work);
            pthread_mutex_unlock(&ld->mu);
            return;
        }
    }
    pthread_mutex_unlock(&ld->mu);
    GR_ASSERT(!"gr_loader_release: batch does not belong to this loader");
}

bool gr_loader_encoded(const gr_loader *ld) { return ld->f.shape >= 0; }

double gr_loader_wait_s(const gr_loader *ld) {
    pthread_mutex_lock((pthread_mutex_t *)&ld->mu);
    double w = ld->wait_s;
    pthread_mutex_unlock((pthread_mutex_t *)&ld->mu);
    return w;
}

gr_status gr_loader_decode_host(gr_loader *ld, gr_batch *b, int64_t i, gr_error *err) {
    GR_ASSERT(ld->pay && b->enc);
    return gr_payload_decode_host(ld->pay, b, i, err);
}
