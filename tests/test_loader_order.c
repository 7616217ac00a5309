/* test_loader_order.c — unit tests for the order of the batch stream of
 * dataio/loader.c:
 *   1. order: the stream is a pure function of (seed, epoch, batch index),
 *      whatever the worker and prefetch counts; each epoch a permutation;
 *      drop_last; no shuffle;
 *   2. sharding: ranks take disjoint strided slices of that permutation;
 *   3. seek/resume: a seeked loader continues exactly like an uninterrupted
 *      one; seeking to the current position keeps the prefetched batches.
 * Augmentation is in test_loader_augment.c, storage variants and bad files in
 * test_loader_storage.c, the hooks, held batches and threads in
 * test_loader_threads.c. Fixtures: loader_fixture.h. */
#define LOADER_TMP_TAG "order"
#include "loader_fixture.h"

#include <pthread.h>

/* ---- 1. order determinism ---- */

static void test_order(const char *idf) {
    gr_dataset *ds = open_ds(idf, GR_CACHE_MEMORY);
    if (!ds) return;
    enum { B = 8, EPOCHS = 3 };
    const int64_t bpe = (ID_N + B - 1) / B; /* 13, the last of 7 samples */

    /* the reference: synchronous, one buffer */
    gr_loader_config c = base_cfg(B, true, false, 42);
    c.prefetch = 1;
    gr_loader *ld = open_loader(ds, &c);
    if (!ld) goto out;
    CHECK(gr_loader_batches_per_epoch(ld) == bpe);
    CHECK(gr_loader_samples_per_epoch(ld) == ID_N);
    stream ref;
    CHECK(stream_take(ld, B, EPOCHS * bpe, &ref));
    gr_loader_close(ld);
    int64_t *rid = stream_ids(&ref);
    CHECK(ref.ns == EPOCHS * ID_N && ids_valid(rid, ref.ns)); /* labels match the ids */
    for (int64_t e = 0; e < EPOCHS; e++) {
        CHECK_MSG(ids_distinct(rid + e * ID_N, ID_N), "epoch %lld is not a permutation", (long long)e);
        for (int64_t k = 0; k < bpe; k++) {
            const int64_t i = e * bpe + k;
            CHECK(ref.bepoch[i] == e && ref.bindex[i] == k && ref.bfirst[i] == k * B &&
                  ref.blast[i] == (k == bpe - 1) && ref.bn[i] == (k == bpe - 1 ? ID_N - k * B : B));
        }
    }
    /* the epochs are shuffled differently, and not in file order */
    CHECK(memcmp(rid, rid + ID_N, ID_N * sizeof *rid) != 0);
    CHECK(memcmp(rid + ID_N, rid + 2 * ID_N, ID_N * sizeof *rid) != 0);
    int64_t in_place = 0;
    for (int64_t i = 0; i < ID_N; i++) in_place += rid[i] == i;
    CHECK_MSG(in_place < ID_N / 4, "%lld of %d samples of epoch 0 at their file position", (long long)in_place, ID_N);

    /* the same stream for every worker / prefetch count */
    const int workers[] = {0, 1, 2, 4}, prefetch[] = {1, 2, 5};
    for (size_t wi = 0; wi < GR_ARRAY_LEN(workers); wi++)
        for (size_t pi = 0; pi < GR_ARRAY_LEN(prefetch); pi++) {
            gr_loader_config cw = c;
            cw.workers = workers[wi], cw.prefetch = prefetch[pi];
            gr_loader *l2 = open_loader(ds, &cw);
            if (!l2) continue;
            stream s;
            CHECK(stream_take(l2, B, EPOCHS * bpe, &s));
            CHECK_MSG(stream_same(&ref, 0, &s, 0, EPOCHS * bpe, 0), "workers %d prefetch %d: another stream",
                      workers[wi], prefetch[pi]);
            stream_free(&s);
            gr_loader_close(l2);
        }

    /* same seed, same stream from a new loader; another seed, another order */
    {
        gr_loader *l2 = open_loader(ds, &c);
        stream s;
        if (l2 && stream_take(l2, B, bpe, &s)) {
            CHECK(stream_same(&ref, 0, &s, 0, bpe, 0));
            stream_free(&s);
        }
        gr_loader_close(l2);
        gr_loader_config c2 = c;
        c2.seed = 43;
        l2 = open_loader(ds, &c2);
        if (l2 && stream_take(l2, B, bpe, &s)) {
            int64_t *ids = stream_ids(&s);
            CHECK(ids_distinct(ids, ID_N));
            CHECK(memcmp(ids, rid, ID_N * sizeof *ids) != 0);
            free(ids);
            stream_free(&s);
        }
        gr_loader_close(l2);
    }

    /* drop_last: 12 full batches, 96 distinct samples, which are the first 96
     * positions of the same permutation */
    {
        gr_loader_config cd = c;
        cd.drop_last = true;
        cd.workers = 2;
        gr_loader *l2 = open_loader(ds, &cd);
        stream s;
        if (l2 && stream_take(l2, B, 2 * (ID_N / B), &s)) {
            CHECK(gr_loader_batches_per_epoch(l2) == ID_N / B);
            CHECK(gr_loader_samples_per_epoch(l2) == ID_N / B * B);
            int64_t *ids = stream_ids(&s);
            const int64_t per = ID_N / B * B;
            CHECK(s.ns == 2 * per && ids_valid(ids, s.ns));
            bool full = true;
            for (int64_t k = 0; k < s.nb; k++) full = full && s.bn[k] == B;
            CHECK(full);
            CHECK(s.bepoch[ID_N / B] == 1 && s.bindex[ID_N / B] == 0 && s.blast[ID_N / B - 1]);
            for (int e = 0; e < 2; e++) {
                CHECK(ids_distinct(ids + e * per, per));
                CHECK(memcmp(ids + e * per, rid + e * ID_N, (size_t)per * sizeof *ids) == 0);
            }
            free(ids);
            stream_free(&s);
        }
        gr_loader_close(l2);
    }

    /* no shuffle: file order, every epoch */
    {
        gr_loader_config cn = base_cfg(B, false, false, 42);
        cn.workers = 2;
        gr_loader *l2 = open_loader(ds, &cn);
        stream s;
        if (l2 && stream_take(l2, B, 2 * bpe, &s)) {
            int64_t *ids = stream_ids(&s);
            bool inorder = s.ns == 2 * ID_N;
            for (int64_t i = 0; inorder && i < s.ns; i++) inorder = ids[i] == i % ID_N;
            CHECK(inorder);
            free(ids);
            stream_free(&s);
        }
        gr_loader_close(l2);
    }
    free(rid);
    stream_free(&ref);
out:
    gr_dataset_close(ds);
}

/* ---- 2. sharding ---- */

static void test_sharding(const char *idf) {
    gr_dataset *ds = open_ds(idf, GR_CACHE_MEMORY);
    if (!ds) return;
    enum { B = 5, W = 3, EPOCHS = 2 };
    const int64_t shard = ID_N / W, bpe = (shard + B - 1) / B; /* 34 in 7 batches */
    /* the permutations: world 1, same seed */
    gr_loader_config c = base_cfg(B, true, false, 7);
    gr_loader *ld = open_loader(ds, &c);
    stream full;
    int64_t *perm = NULL;
    if (ld && stream_take(ld, B, EPOCHS * ((ID_N + B - 1) / B), &full)) {
        perm = stream_ids(&full);
        stream_free(&full);
    }
    gr_loader_close(ld);
    if (!perm) goto out;

    for (int64_t e = 0; e < EPOCHS; e++) {
        int owner[ID_N];
        for (int i = 0; i < ID_N; i++) owner[i] = -1;
        for (int r = 0; r < W; r++) {
            gr_loader_config cr = c;
            cr.rank = r, cr.world = W, cr.workers = r; /* thread counts vary too */
            gr_loader *lr = open_loader(ds, &cr);
            if (!lr) continue;
            CHECK(gr_loader_samples_per_epoch(lr) == shard && gr_loader_batches_per_epoch(lr) == bpe);
            gr_error err = {0};
            CHECK(gr_loader_seek(lr, e, 0, &err) == GR_OK);
            stream s;
            if (stream_take(lr, B, bpe, &s)) {
                int64_t *ids = stream_ids(&s);
                CHECK(s.ns == shard && ids_valid(ids, s.ns));
                bool strided = true;
                for (int64_t k = 0; k < s.ns; k++) strided = strided && ids[k] == perm[e * ID_N + r + k * W];
                CHECK_MSG(strided, "epoch %lld rank %d: not positions r, r+w, ...", (long long)e, r);
                bool disjoint = true;
                for (int64_t k = 0; k < s.ns; k++) {
                    if (ids[k] < 0) continue;
                    disjoint = disjoint && owner[ids[k]] < 0;
                    owner[ids[k]] = r;
                }
                CHECK(disjoint);
                CHECK(s.bepoch[0] == e && s.bn[bpe - 1] == shard - (bpe - 1) * B && s.blast[bpe - 1]);
                free(ids);
                stream_free(&s);
            }
            gr_loader_close(lr);
        }
        /* union = the first W*shard permutation positions; the rest unused */
        bool uni = true;
        for (int64_t p = 0; p < ID_N; p++) {
            int64_t id = perm[e * ID_N + p];
            uni = uni && (p < W * shard ? owner[id] == (int)(p % W) : owner[id] == -1);
        }
        CHECK_MSG(uni, "epoch %lld: the shards' union is not the first %lld positions", (long long)e,
                  (long long)(W * shard));
    }
    free(perm);
out:
    gr_dataset_close(ds);
}

/* ---- 3. seek / resume ---- */

static void test_seek(const char *rndf) {
    gr_dataset *ds = open_ds(rndf, GR_CACHE_MEMORY);
    if (!ds) return;
    enum { B = 7 };
    const int64_t bpe = (RN + B - 1) / B; /* 9, the last of 4 */
    gr_loader_config c = aug_cfg(B, GR_CROP_RANDOM, 11);
    gr_loader *ld = open_loader(ds, &c);
    stream ref;
    bool have = ld && stream_take(ld, B, 3 * bpe, &ref);
    gr_loader_close(ld);
    if (!have) goto out;
    /* the augmentation makes epochs differ in content, not only in order */
    CHECK(!stream_same(&ref, 0, &ref, bpe, 1, 0));

    const int64_t pos[][2] = {{0, 3 * B}, {1, 0}, {1, 5 * B}, {2, (bpe - 1) * B}, {0, 0}};
    for (int workers = 0; workers <= 2; workers += 2)
        for (size_t p = 0; p < GR_ARRAY_LEN(pos); p++) {
            gr_loader_config cw = c;
            cw.workers = workers, cw.prefetch = 3;
            gr_loader *l2 = open_loader(ds, &cw);
            if (!l2) continue;
            gr_error err = {0};
            CHECK(gr_loader_seek(l2, pos[p][0], pos[p][1], &err) == GR_OK);
            const int64_t from = pos[p][0] * bpe + pos[p][1] / B, nb = GR_MIN(3 * bpe - from, bpe + 2);
            stream s;
            if (stream_take(l2, B, nb, &s)) {
                CHECK_MSG(stream_same(&ref, from, &s, 0, nb, 0), "workers %d: seek to epoch %lld sample %lld",
                          workers, (long long)pos[p][0], (long long)pos[p][1]);
                stream_free(&s);
            }
            gr_loader_close(l2);
        }

    /* in one loader: to the current position (kept), backwards, forwards;
     * bad positions are refused and leave the stream where it was */
    for (int workers = 0; workers <= 2; workers += 2) {
        gr_loader_config cw = c;
        cw.workers = workers, cw.prefetch = 4;
        gr_loader *l2 = open_loader(ds, &cw);
        if (!l2) continue;
        gr_error err = {0};
        stream s;
        if (stream_take(l2, B, 4, &s)) stream_free(&s);
        CHECK(gr_loader_seek(l2, 0, 4 * B, &err) == GR_OK);
        if (stream_take(l2, B, 3, &s)) {
            CHECK_MSG(stream_same(&ref, 4, &s, 0, 3, 0), "workers %d: seek to the current position", workers);
            stream_free(&s);
        }
        CHECK(gr_loader_seek(l2, 0, 2 * B, &err) == GR_OK);
        if (stream_take(l2, B, 2, &s)) {
            CHECK_MSG(stream_same(&ref, 2, &s, 0, 2, 0), "workers %d: seek backwards", workers);
            stream_free(&s);
        }
        CHECK(gr_loader_seek(l2, 2, 3 * B, &err) == GR_OK);
        if (stream_take(l2, B, 2, &s)) {
            CHECK_MSG(stream_same(&ref, 2 * bpe + 3, &s, 0, 2, 0), "workers %d: seek forwards", workers);
            stream_free(&s);
        }
        /* bad positions: not a multiple of the batch, past the epoch, negative */
        memset(&err, 0, sizeof err);
        CHECK(gr_loader_seek(l2, 1, B + 1, &err) == GR_ERR_DATA);
        CHECK_STR_CONTAINS(err.msg, "multiple of the batch");
        CHECK(gr_loader_seek(l2, 1, bpe * B, &err) == GR_ERR_DATA);
        CHECK(gr_loader_seek(l2, 1, RN, &err) == GR_ERR_DATA);
        CHECK(gr_loader_seek(l2, -1, 0, &err) == GR_ERR_DATA);
        CHECK(gr_loader_seek(l2, 0, -B, &err) == GR_ERR_DATA);
        if (stream_take(l2, B, 2, &s)) {
            CHECK_MSG(stream_same(&ref, 2 * bpe + 5, &s, 0, 2, 0), "workers %d: a refused seek moved the stream",
                      workers);
            stream_free(&s);
        }
        gr_loader_close(l2);
    }
    stream_free(&ref);
out:
    gr_dataset_close(ds);
}

/* Counts ready-hook calls (thread-safe). */
typedef struct hook_count {
    pthread_mutex_t mu;
    int64_t calls;
} hook_count;

static gr_status count_ready(gr_batch *b, void *ctx, gr_error *err) {
    (void)b, (void)err;
    hook_count *h = ctx;
    pthread_mutex_lock(&h->mu);
    h->calls++;
    pthread_mutex_unlock(&h->mu);
    return GR_OK;
}

static int64_t hook_calls(hook_count *h) {
    pthread_mutex_lock(&h->mu);
    int64_t v = h->calls;
    pthread_mutex_unlock(&h->mu);
    return v;
}

/* Waits up to 5 s for the count to reach want, then 30 ms more for any
 * extra call; returns the count. */
static int64_t hook_settle(hook_count *h, int64_t want) {
    for (int i = 0; i < 1000 && hook_calls(h) < want; i++) sleep_ms(5);
    sleep_ms(30);
    return hook_calls(h);
}

/* Seeking to the current position keeps the prefetched batches (no batch is
 * made twice); seeking elsewhere makes new ones. Counted through the ready
 * hook once the ring is full and the workers idle. */
static void test_seek_keeps_prefetch(const char *rndf) {
    gr_dataset *ds = open_ds(rndf, GR_CACHE_MEMORY);
    if (!ds) return;
    enum { B = 7, P = 4 };
    hook_count hc = {.calls = 0};
    pthread_mutex_init(&hc.mu, NULL);
    gr_loader_config c = aug_cfg(B, GR_CROP_RANDOM, 11);
    c.workers = 2, c.prefetch = P, c.ready = count_ready, c.ready_ctx = &hc;
    gr_loader *ld = open_loader(ds, &c);
    if (ld) {
        stream s;
        if (stream_take(ld, B, 3, &s)) stream_free(&s);
        CHECK(hook_settle(&hc, 3 + P) == 3 + P);
        gr_error err = {0};
        CHECK(gr_loader_seek(ld, 0, 3 * B, &err) == GR_OK); /* where it is */
        if (stream_take(ld, B, P, &s)) stream_free(&s);
        CHECK_MSG(hook_settle(&hc, 3 + 2 * P) == 3 + 2 * P, "seeking to the current position remade batches");
        CHECK(gr_loader_seek(ld, 1, 0, &err) == GR_OK); /* elsewhere: the ring is refilled */
        CHECK(hook_settle(&hc, 3 + 3 * P) == 3 + 3 * P);
        gr_loader_close(ld);
    }
    pthread_mutex_destroy(&hc.mu);
    gr_dataset_close(ds);
}

int main(void) {
    mkdir(GR_TEST_TMP, 0755);
    make_random_pixels();
    /* tmp_path's buffers are reused: keep copies */
    char *idf = gr_xstrdup(make_id_file());
    char *rndf = gr_xstrdup(write_random("rnd.h5", GR_DT_UINT8, false, STORE_CONTIG, 0));
    test_order(idf);
    test_sharding(idf);
    test_seek(rndf);
    test_seek_keeps_prefetch(rndf);
    free(idf);
    free(rndf);
    return gr_test_report();
}
