/* test_loader_threads.c — unit tests for the ring and the threads of
 * dataio/loader.c:
 *   - a failing ready hook: an error, and the failed batch made again next;
 *   - too many batches held: an error, not a wait; batches returned in any
 *     order; a seek with a batch held;
 *   - the ready hook and the host allocator used as documented (each batch
 *     hooked once before delivery, in host_alloc memory, all freed);
 *   - closing with work in flight (a slow hook, a held batch, after a seek)
 *     neither hangs nor leaks;
 *   - gr_loader_wait_s with and without workers.
 * Fixtures: loader_fixture.h. */
#define LOADER_TMP_TAG "threads"
#include "loader_fixture.h"

#include <pthread.h>

/* The ready hook fails once, on batch 3 of epoch 0. */
typedef struct fail_hook {
    pthread_mutex_t mu;
    int failures_left;
} fail_hook;

static gr_status failing_ready(gr_batch *b, void *ctx, gr_error *err) {
    fail_hook *h = ctx;
    pthread_mutex_lock(&h->mu);
    bool fail = b->epoch == 0 && b->index == 3 && h->failures_left > 0;
    if (fail) h->failures_left--;
    pthread_mutex_unlock(&h->mu);
    if (fail) return gr_error_set(err, GR_ERR_DEVICE, "ready: copy of batch %lld failed", (long long)b->index);
    return GR_OK;
}

static void test_ready_error(const char *idf) {
    gr_dataset *ds = open_ds(idf, GR_CACHE_MEMORY);
    if (!ds) return;
    enum { B = 8 };
    gr_loader_config c = base_cfg(B, true, false, 42);
    gr_loader *ld = open_loader(ds, &c);
    stream ref;
    bool have = ld && stream_take(ld, B, 8, &ref);
    gr_loader_close(ld);
    if (!have) goto out;
    for (int workers = 0; workers <= 2; workers += 2) {
        fail_hook h = {.failures_left = 1};
        pthread_mutex_init(&h.mu, NULL);
        gr_loader_config cw = c;
        cw.workers = workers, cw.prefetch = 4, cw.ready = failing_ready, cw.ready_ctx = &h;
        gr_loader *l2 = open_loader(ds, &cw);
        if (l2) {
            gr_status st;
            gr_error err;
            int64_t got = take_until_error(l2, 8, &st, &err);
            CHECK_MSG(got == 3 && st == GR_ERR_DEVICE, "workers %d: %lld batches, then %d", workers, (long long)got,
                      (int)st);
            CHECK_STR_CONTAINS(err.msg, "ready: copy of batch 3 failed");
            /* the failed batch stays current: the next call makes it again */
            stream s;
            if (stream_take(l2, B, 5, &s)) {
                CHECK_MSG(stream_same(&ref, 3, &s, 0, 5, 0), "workers %d: the stream after the hook's failure", workers);
                stream_free(&s);
            }
            gr_loader_close(l2);
        }
        pthread_mutex_destroy(&h.mu);
    }
    stream_free(&ref);
out:
    gr_dataset_close(ds);
}

/* Holding all `prefetch` batches, gr_loader_next is an error, not a wait. */
static void test_hold_too_many(const char *idf) {
    gr_dataset *ds = open_ds(idf, GR_CACHE_MEMORY);
    if (!ds) return;
    for (int workers = 0; workers <= 2; workers += 2) {
        gr_loader_config c = base_cfg(8, false, false, 0);
        c.workers = workers, c.prefetch = 3;
        gr_loader *ld = open_loader(ds, &c);
        if (!ld) continue;
        gr_batch *held[3] = {NULL};
        gr_error err = {0};
        for (int k = 0; k < 3; k++) CHECK(gr_loader_next(ld, &held[k], &err) == GR_OK && held[k]);
        for (int k = 0; k < 3; k++) CHECK(held[k] && held[k]->index == k && held[k]->x[0] == (float)(8 * k));
        gr_batch *extra = NULL;
        const double t0 = gr_now();
        gr_status st = gr_loader_next(ld, &extra, &err);
        CHECK(st != GR_OK && extra == NULL && gr_now() - t0 < 1.0);
        CHECK_STR_CONTAINS(err.msg, "held");
        /* the held batches are intact; releasing the oldest lets the stream go on */
        for (int k = 0; k < 3; k++) CHECK(held[k] && held[k]->x[0] == (float)(8 * k) && held[k]->y[0] == 24 * k + 1);
        gr_loader_release(ld, held[0]);
        CHECK(gr_loader_next(ld, &extra, &err) == GR_OK && extra && extra->index == 3 && extra->x[0] == 24.0f);
        gr_loader_release(ld, extra);
        gr_loader_release(ld, held[1]);
        gr_loader_release(ld, held[2]);
        gr_loader_close(ld);

        /* batches may come back in any order: with prefetch 2, holding the
         * first and returning the second leaves room for the third */
        c.prefetch = 2;
        ld = open_loader(ds, &c);
        if (!ld) continue;
        gr_batch *b0 = NULL, *b1 = NULL, *b2 = NULL;
        CHECK(gr_loader_next(ld, &b0, &err) == GR_OK && gr_loader_next(ld, &b1, &err) == GR_OK);
        gr_loader_release(ld, b1);
        CHECK_MSG(gr_loader_next(ld, &b2, &err) == GR_OK && b2 && b2->index == 2 && b2->x[0] == 16.0f,
                  "workers %d: %s", workers, err.msg);
        CHECK(b0 && b0->index == 0 && b0->x[0] == 0.0f); /* still intact */
        gr_loader_release(ld, b2);
        /* a seek with a batch held, then the next batch */
        CHECK(gr_loader_seek(ld, 0, 16, &err) == GR_OK);
        CHECK(gr_loader_next(ld, &b2, &err) == GR_OK && b2 && b2->index == 2 && b2->x[0] == 16.0f);
        gr_loader_release(ld, b2);
        gr_loader_release(ld, b0);
        gr_loader_close(ld);
    }
    gr_dataset_close(ds);
}

/* ---- 7. threads: the hook, the allocator, closing with work in flight ---- */

typedef struct alloc_track {
    pthread_mutex_t mu;
    int64_t allocs, frees, bad_frees;
    void *live[64];
    int nlive;
} alloc_track;

static void *track_alloc(size_t bytes, void *ctx) {
    alloc_track *t = ctx;
    void *p = malloc(bytes);
    pthread_mutex_lock(&t->mu);
    t->allocs++;
    GR_ASSERT(t->nlive < 64);
    t->live[t->nlive++] = p;
    pthread_mutex_unlock(&t->mu);
    return p;
}

static void track_free(void *p, void *ctx) {
    alloc_track *t = ctx;
    pthread_mutex_lock(&t->mu);
    t->frees++;
    int k = 0;
    while (k < t->nlive && t->live[k] != p) k++;
    const bool found = k < t->nlive;
    if (found) t->live[k] = t->live[--t->nlive];
    else t->bad_frees++;
    pthread_mutex_unlock(&t->mu);
    if (found) free(p);
}

static bool track_owns(alloc_track *t, const void *p) {
    pthread_mutex_lock(&t->mu);
    bool found = false;
    for (int k = 0; k < t->nlive && !found; k++) found = t->live[k] == p;
    pthread_mutex_unlock(&t->mu);
    return found;
}

/* Per (epoch, index): hook calls, and the hook marks the batch (b->device). */
typedef struct mark_hook {
    pthread_mutex_t mu;
    int64_t bpe, calls;
    int64_t per_batch[256];
    int sleep_ms;
} mark_hook;

static gr_status marking_ready(gr_batch *b, void *ctx, gr_error *err) {
    (void)err;
    mark_hook *h = ctx;
    if (h->sleep_ms) sleep_ms(h->sleep_ms);
    const int64_t seq = b->epoch * h->bpe + b->index;
    pthread_mutex_lock(&h->mu);
    h->calls++;
    if (seq >= 0 && seq < 256) h->per_batch[seq]++;
    pthread_mutex_unlock(&h->mu);
    b->device = (void *)(uintptr_t)(seq + 1);
    return GR_OK;
}

static void test_hook_and_alloc(const char *idf) {
    gr_dataset *ds = open_ds(idf, GR_CACHE_MEMORY);
    if (!ds) return;
    enum { B = 8, NB = 30 };
    for (int workers = 0; workers <= 3; workers += 3) {
        alloc_track at = {.allocs = 0};
        mark_hook mh = {.bpe = (ID_N + B - 1) / B};
        pthread_mutex_init(&at.mu, NULL);
        pthread_mutex_init(&mh.mu, NULL);
        gr_loader_config c = base_cfg(B, true, false, 8);
        c.workers = workers, c.prefetch = 3;
        c.host_alloc = track_alloc, c.host_free = track_free, c.alloc_ctx = &at;
        c.ready = marking_ready, c.ready_ctx = &mh;
        gr_loader *ld = open_loader(ds, &c);
        if (!ld) continue;
        CHECK(at.allocs >= 2);
        int64_t unmarked = 0, foreign = 0, twice = 0;
        for (int64_t k = 0; k < NB; k++) {
            gr_batch *b = NULL;
            gr_error err = {0};
            if (gr_loader_next(ld, &b, &err) != GR_OK) {
                CHECK_MSG(false, "%s", err.msg);
                break;
            }
            const int64_t seq = b->epoch * mh.bpe + b->index;
            unmarked += seq != k || b->device != (void *)(uintptr_t)(k + 1);
            foreign += !track_owns(&at, b->x) || !track_owns(&at, b->y);
            pthread_mutex_lock(&mh.mu);
            twice += mh.per_batch[k] != 1;
            pthread_mutex_unlock(&mh.mu);
            b->device = NULL;
            gr_loader_release(ld, b);
        }
        CHECK_MSG(unmarked == 0 && twice == 0, "workers %d: %lld batches delivered before their hook, %lld hooked "
                  "other than once", workers, (long long)unmarked, (long long)twice);
        CHECK_MSG(foreign == 0, "workers %d: %lld batches not in host_alloc memory", workers, (long long)foreign);
        const int64_t allocs_open = at.allocs;
        gr_loader_close(ld);
        /* made ahead at most the ring's worth; every buffer from host_alloc freed by host_free */
        if (workers == 0) CHECK(mh.calls == NB);
        else CHECK(mh.calls >= NB && mh.calls <= NB + 3);
        CHECK(at.allocs == allocs_open && at.frees == at.allocs && at.bad_frees == 0 && at.nlive == 0);
        pthread_mutex_destroy(&at.mu);
        pthread_mutex_destroy(&mh.mu);
    }
    gr_dataset_close(ds);
}

/* Closing while workers are inside a slow hook, with a batch held, right
 * after a seek, or before any batch: returns promptly, frees everything. */
static void test_close_busy(const char *rndf) {
    gr_dataset *ds = open_ds(rndf, GR_CACHE_NONE);
    if (!ds) return;
    for (int mode = 0; mode < 4; mode++) {
        alloc_track at = {.allocs = 0};
        mark_hook mh = {.bpe = 1000, .sleep_ms = 20};
        pthread_mutex_init(&at.mu, NULL);
        pthread_mutex_init(&mh.mu, NULL);
        gr_loader_config c = aug_cfg(5, GR_CROP_RESIZED, 1);
        c.workers = 4, c.prefetch = 4;
        c.host_alloc = track_alloc, c.host_free = track_free, c.alloc_ctx = &at;
        c.ready = marking_ready, c.ready_ctx = &mh;
        gr_loader *ld = open_loader(ds, &c);
        if (!ld) continue;
        gr_batch *b = NULL;
        gr_error err = {0};
        if (mode >= 1) CHECK(gr_loader_next(ld, &b, &err) == GR_OK);
        if (mode == 2) { /* release, then seek away while the workers fill */
            gr_loader_release(ld, b);
            CHECK(gr_loader_seek(ld, 3, 10, &err) == GR_OK);
        }
        if (mode == 3) gr_loader_release(ld, b);
        const double t0 = gr_now();
        gr_loader_close(ld); /* mode 1 closes with the batch still held */
        CHECK_MSG(gr_now() - t0 < 2.0, "mode %d: close took %.2f s", mode, gr_now() - t0);
        CHECK(at.frees == at.allocs && at.bad_frees == 0 && at.nlive == 0);
        pthread_mutex_destroy(&at.mu);
        pthread_mutex_destroy(&mh.mu);
    }
    gr_dataset_close(ds);
}

/* ---- 8. wait time ---- */

static gr_status slow_ready(gr_batch *b, void *ctx, gr_error *err) {
    (void)b, (void)err;
    sleep_ms(*(int *)ctx);
    return GR_OK;
}

static void test_wait(const char *idf) {
    gr_dataset *ds = open_ds(idf, GR_CACHE_MEMORY);
    if (!ds) return;
    int hook_ms = 5;
    enum { NB = 10, CONSUMER_MS = 50 };
    /* no workers: every batch is made inside next, so the wait grows by at
     * least the hook's sleep each time */
    gr_loader_config c = base_cfg(8, true, false, 1);
    c.ready = slow_ready, c.ready_ctx = &hook_ms;
    gr_loader *ld = open_loader(ds, &c);
    if (ld) {
        CHECK(gr_loader_wait_s(ld) == 0);
        double prev = 0;
        int64_t grew = 0;
        for (int k = 0; k < NB; k++) {
            gr_batch *b = NULL;
            gr_error err = {0};
            CHECK(gr_loader_next(ld, &b, &err) == GR_OK);
            gr_loader_release(ld, b);
            double w = gr_loader_wait_s(ld);
            grew += w >= prev + hook_ms * 1e-3 * 0.9;
            prev = w;
        }
        CHECK_MSG(grew == NB && prev >= NB * hook_ms * 1e-3 * 0.9, "workers 0: wait %.4f s over %d batches", prev, NB);
        gr_loader_close(ld);
    }
    /* two workers and a consumer slower than they are: after the first
     * batch, next hardly waits */
    c.workers = 2, c.prefetch = 3;
    ld = open_loader(ds, &c);
    if (ld) {
        double after_first = 0;
        for (int k = 0; k < NB; k++) {
            gr_batch *b = NULL;
            gr_error err = {0};
            CHECK(gr_loader_next(ld, &b, &err) == GR_OK);
            if (k == 0) after_first = gr_loader_wait_s(ld);
            sleep_ms(CONSUMER_MS);
            gr_loader_release(ld, b);
        }
        double w = gr_loader_wait_s(ld) - after_first;
        CHECK_MSG(w < CONSUMER_MS * 1e-3, "workers 2: waited %.4f s over %d batches after the first", w, NB - 1);
        gr_loader_close(ld);
    }
    gr_dataset_close(ds);
}

int main(void) {
    mkdir(GR_TEST_TMP, 0755);
    make_random_pixels();
    /* tmp_path's buffers are reused: keep copies */
    char *idf = gr_xstrdup(make_id_file());
    char *rndf = gr_xstrdup(write_random("rnd.h5", GR_DT_UINT8, false, STORE_CONTIG, 0));
    test_ready_error(idf);
    test_hold_too_many(idf);
    test_hook_and_alloc(idf);
    test_close_busy(rndf);
    test_wait(idf);
    free(idf);
    free(rndf);
    return gr_test_report();
}
