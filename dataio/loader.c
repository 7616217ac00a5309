/* loader.c — the batch stream over a dataset (synchronous implementation).
 *
 * Epoch e's order is a Fisher–Yates shuffle of [0, N) whose draws are
 * gr_hash64(seed ^ GR_LOADER_SHUFFLE_KEY, e * N + i): a pure function of
 * (seed, e), so any position of any epoch can be recomputed after a seek or a
 * resume. Rank r of w takes permutation positions r, r+w, ... (N/w of them
 * when w > 1) and cuts them into batches.
 *
 * Batch buffers are a ring of max(prefetch, 1) slots allocated once at open;
 * gr_loader_next fills a free slot and gr_loader_release returns it. The
 * asynchronous loader keeps this layout and fills slots from worker threads. */
#include "dataio.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define GR_LOADER_SHUFFLE_KEY 0x53485546464c4531ull /* "SHUFFLE1" */

typedef struct loader_slot {
    gr_batch b;
    bool held;
} loader_slot;

struct gr_loader {
    gr_dataset *ds;
    gr_loader_config cfg;
    int64_t n;                 /* dataset samples */
    int64_t sample_elems;
    int64_t shard;             /* this rank's samples per epoch before batching */
    int64_t batches;           /* per epoch */
    double *mean, *std;        /* one per image channel */
    int64_t *perm;             /* order of perm_epoch (shuffle only) */
    int64_t perm_epoch;
    int64_t *idx;              /* one batch of dataset indices */
    loader_slot *slots;
    int nslots;
    int64_t epoch, next_batch; /* position of the next batch to produce */
    double wait_s;
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

gr_status gr_loader_open(gr_dataset *ds, const gr_loader_config *cfg, gr_loader **out, gr_error *err) {
    *out = NULL;
    int64_t chw[3];
    gr_dataset_sample_shape(ds, chw);
    const int64_t n = gr_dataset_len(ds), C = chw[0];
    if (cfg->batch < 1)
        return gr_error_set(err, GR_ERR_USAGE, "loader: batch %lld must be at least 1", (long long)cfg->batch);
    if (cfg->world < 1 || cfg->rank < 0 || cfg->rank >= cfg->world)
        return gr_error_set(err, GR_ERR_USAGE, "loader: rank %d of world %d is invalid", cfg->rank, cfg->world);
    if (cfg->n_norm < 0 || cfg->n_norm > (int)GR_ARRAY_LEN(cfg->mean) ||
        (cfg->n_norm > 1 && cfg->n_norm != C))
        return gr_error_set(err, GR_ERR_USAGE,
                            "loader: normalize has %d values per statistic but the images have %lld channels",
                            cfg->n_norm, (long long)C);
    for (int c = 0; c < cfg->n_norm; c++)
        if (!isfinite(cfg->mean[c]) || !isfinite(cfg->std[c]) || cfg->std[c] == 0.0)
            return gr_error_set(err, GR_ERR_USAGE, "loader: normalize channel %d: mean %g / std %g is unusable", c,
                                cfg->mean[c], cfg->std[c]);
    if (cfg->batch > INT64_MAX / 4 / (chw[0] * chw[1] * chw[2]))
        return gr_error_set(err, GR_ERR_OOM, "loader: a batch of %lld samples of %lldx%lldx%lld floats is too large",
                            (long long)cfg->batch, (long long)chw[0], (long long)chw[1], (long long)chw[2]);
    const int64_t shard = cfg->world > 1 ? n / cfg->world : n;
    if (shard < 1)
        return gr_error_set(err, GR_ERR_DATA, "loader: the dataset has %lld samples, fewer than the %d ranks",
                            (long long)n, cfg->world);
    const int64_t batches = cfg->drop_last ? shard / cfg->batch : (shard + cfg->batch - 1) / cfg->batch;
    if (batches < 1)
        return gr_error_set(err, GR_ERR_DATA,
                            "loader: %lld samples per rank make no full batch of %lld (drop_last is on)",
                            (long long)shard, (long long)cfg->batch);

    gr_loader *ld = gr_xcalloc(1, sizeof *ld);
    ld->ds = ds;
    ld->cfg = *cfg;
    ld->n = n;
    ld->sample_elems = chw[0] * chw[1] * chw[2];
    ld->shard = shard;
    ld->batches = batches;
    ld->mean = gr_xmalloc((size_t)C * sizeof *ld->mean);
    ld->std = gr_xmalloc((size_t)C * sizeof *ld->std);
    for (int64_t c = 0; c < C; c++) {
        int k = cfg->n_norm == 1 ? 0 : (int)c;
        ld->mean[c] = cfg->n_norm ? cfg->mean[k] : 0.0;
        ld->std[c] = cfg->n_norm ? cfg->std[k] : 1.0;
    }
    ld->perm_epoch = -1;
    if (cfg->shuffle) ld->perm = gr_xmalloc((size_t)n * sizeof *ld->perm);
    ld->idx = gr_xmalloc((size_t)cfg->batch * sizeof *ld->idx);
    ld->nslots = GR_MAX(cfg->prefetch, 1);
    ld->slots = gr_xcalloc((size_t)ld->nslots, sizeof *ld->slots);
    const size_t xbytes = (size_t)cfg->batch * (size_t)ld->sample_elems * sizeof(float);
    const size_t ybytes = (size_t)cfg->batch * sizeof(int32_t);
    for (int s = 0; s < ld->nslots; s++) {
        ld->slots[s].b.x = gr_aligned_alloc(xbytes);
        ld->slots[s].b.y = gr_aligned_alloc(ybytes);
        if (!ld->slots[s].b.x || !ld->slots[s].b.y) {
            gr_loader_close(ld);
            return gr_error_set(err, GR_ERR_OOM, "loader: out of memory: %d batch buffers of %zu bytes",
                                GR_MAX(cfg->prefetch, 1), xbytes + ybytes);
        }
    }
    *out = ld;
    return GR_OK;
}

void gr_loader_close(gr_loader *ld) {
    if (!ld) return;
    for (int s = 0; s < ld->nslots; s++) {
        gr_aligned_free(ld->slots[s].b.x);
        gr_aligned_free(ld->slots[s].b.y);
    }
    free(ld->slots);
    free(ld->idx);
    free(ld->perm);
    free(ld->mean);
    free(ld->std);
    free(ld);
}

int64_t gr_loader_batches_per_epoch(const gr_loader *ld) { return ld->batches; }

int64_t gr_loader_samples_per_epoch(const gr_loader *ld) {
    return ld->cfg.drop_last ? ld->batches * ld->cfg.batch : ld->shard;
}

gr_status gr_loader_seek(gr_loader *ld, int64_t epoch, int64_t sample_in_epoch, gr_error *err) {
    const int64_t b = ld->cfg.batch;
    if (epoch < 0 || sample_in_epoch < 0 || sample_in_epoch % b != 0 || sample_in_epoch / b >= ld->batches)
        return gr_error_set(err, GR_ERR_DATA,
                            "loader: cannot seek to epoch %lld sample %lld: the position must be a multiple of "
                            "the batch (%lld) below %lld",
                            (long long)epoch, (long long)sample_in_epoch, (long long)b,
                            (long long)(ld->batches * b));
    ld->epoch = epoch;
    ld->next_batch = sample_in_epoch / b;
    return GR_OK;
}

gr_status gr_loader_next(gr_loader *ld, gr_batch **out, gr_error *err) {
    const double t0 = gr_now();
    *out = NULL;
    loader_slot *slot = NULL;
    for (int s = 0; s < ld->nslots && !slot; s++)
        if (!ld->slots[s].held) slot = &ld->slots[s];
    if (!slot)
        return gr_error_set(err, GR_ERR_INTERNAL, "loader: all %d batch buffers are held (release one first)",
                            ld->nslots);
    if (ld->cfg.shuffle && ld->perm_epoch != ld->epoch) {
        loader_permute(ld->perm, ld->n, ld->cfg.seed, ld->epoch);
        ld->perm_epoch = ld->epoch;
    }
    const int64_t B = ld->cfg.batch, first = ld->next_batch * B;
    const int64_t count = GR_MIN(B, ld->shard - first);
    const int64_t w = ld->cfg.world, r = ld->cfg.rank;
    for (int64_t k = 0; k < count; k++) {
        int64_t pos = r + (first + k) * w;
        ld->idx[k] = ld->cfg.shuffle ? ld->perm[pos] : pos;
    }
    gr_batch *b = &slot->b;
    gr_status st = gr_dataset_read(ld->ds, ld->idx, count, ld->mean, ld->std, b->x, b->y, err);
    if (st != GR_OK) return st;
    b->n = count;
    b->epoch = ld->epoch;
    b->index = ld->next_batch;
    b->sample_in_epoch = first;
    b->last_in_epoch = ld->next_batch == ld->batches - 1;
    slot->held = true;
    if (++ld->next_batch == ld->batches) {
        ld->next_batch = 0;
        ld->epoch++;
    }
    ld->wait_s += gr_now() - t0;
    *out = b;
    return GR_OK;
}

void gr_loader_release(gr_loader *ld, gr_batch *b) {
    if (!b) return;
    for (int s = 0; s < ld->nslots; s++) {
        if (&ld->slots[s].b == b) {
            GR_ASSERT(ld->slots[s].held);
            ld->slots[s].held = false;
            return;
        }
    }
    GR_ASSERT(!"gr_loader_release: batch does not belong to this loader");
}

double gr_loader_wait_s(const gr_loader *ld) { return ld->wait_s; }
