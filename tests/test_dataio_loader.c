/* test_dataio_loader.c — unit tests for the batch loader of dataio/ over a
 * small dataset whose labels are the sample indices: file order with the kept
 * last batch, the ring of prefetch buffers, drop_last, shuffle determinism and
 * permutations, seek to mid-epoch, two ranks' shards, configuration errors.
 * (test_loader_*.c test the loader in depth: threads, augmentation, storage.) */
#include "dataio_fixture.h"

enum { LN = 103 };

/* Labels are the sample indices; pixel 0 is index % 256. */
static gr_dataset *loader_dataset(void) {
    static uint8_t img[LN * 4];
    int64_t lab[LN];
    for (int i = 0; i < LN; i++) {
        lab[i] = i;
        for (int k = 0; k < 4; k++) img[i * 4 + k] = (uint8_t)(i + k);
    }
    h5spec s = {.group = "/", .img_ftype = H5T_STD_U8LE, .img_mtype = H5T_NATIVE_UINT8, .rank = 3,
                .dims = {LN, 2, 2}, .img = img, .lab_ftype = H5T_STD_I32LE, .nlab = LN, .labels = lab};
    const char *p = tmp_path("loader.h5");
    write_h5(p, &s);
    gr_dataset *ds = NULL;
    gr_error err = {0};
    GR_ASSERT(gr_dataset_open(p, "/", &ds, &err) == GR_OK);
    return ds;
}

/* Collects the sample indices of the next `batches` batches into out. */
static int64_t take(gr_loader *ld, int64_t batches, int32_t *out, gr_batch *meta) {
    int64_t k = 0;
    gr_error err = {0};
    for (int64_t b = 0; b < batches; b++) {
        gr_batch *bt = NULL;
        if (gr_loader_next(ld, &bt, &err) != GR_OK) {
            fprintf(stderr, "loader: %s\n", err.msg);
            return -1;
        }
        if (meta) meta[b] = *bt;
        memcpy(out + k, bt->y, (size_t)bt->n * sizeof *out);
        k += bt->n;
        gr_loader_release(ld, bt);
    }
    return k;
}

static bool is_permutation(const int32_t *v, int64_t n, int64_t of) {
    if (n != of) return false;
    char *seen = calloc((size_t)of, 1);
    bool ok = true;
    for (int64_t i = 0; i < n && ok; i++) {
        if (v[i] < 0 || v[i] >= of || seen[v[i]]) ok = false;
        else seen[v[i]] = 1;
    }
    free(seen);
    return ok;
}

static void test_loader(void) {
    gr_dataset *ds = loader_dataset();
    gr_error err = {0};
    int32_t a[4 * LN], b[4 * LN];
    gr_batch meta[64];

    /* file order, kept last batch */
    gr_loader_config c = loader_cfg(10, false, false, 0);
    c.n_norm = 1;
    c.mean[0] = 1;
    c.std[0] = 2;
    gr_loader *ld = NULL;
    CHECK(gr_loader_open(ds, &c, &ld, &err) == GR_OK);
    CHECK(gr_loader_batches_per_epoch(ld) == 11);
    CHECK(gr_loader_samples_per_epoch(ld) == LN);
    gr_batch *bt = NULL;
    CHECK(gr_loader_next(ld, &bt, &err) == GR_OK);
    CHECK(bt->n == 10 && bt->epoch == 0 && bt->index == 0 && bt->sample_in_epoch == 0 && !bt->last_in_epoch);
    CHECK(bt->y[0] == 0 && bt->y[9] == 9);
    CHECK(bt->x[4 * 3 + 1] == (4.0f - 1.0f) / 2.0f); /* sample 3, pixel 1 = 4 */
    /* ring of prefetch=2 buffers */
    gr_batch *bt2 = NULL, *bt3 = NULL;
    CHECK(gr_loader_next(ld, &bt2, &err) == GR_OK);
    CHECK(bt2 != bt && bt2->y[0] == 10);
    CHECK(gr_loader_next(ld, &bt3, &err) == GR_ERR_INTERNAL);
    CHECK_STR_CONTAINS(err.msg, "batch buffers are held");
    CHECK(bt->y[0] == 0); /* untouched while held */
    gr_loader_release(ld, bt);
    gr_loader_release(ld, bt2);
    int64_t got = take(ld, 9, a, meta);
    CHECK(got == LN - 20);
    CHECK(meta[8].n == 3 && meta[8].last_in_epoch && meta[8].index == 10 && meta[8].sample_in_epoch == 100);
    bool order = true;
    for (int64_t i = 0; i < got; i++) order = order && a[i] == 20 + i;
    CHECK(order);
    CHECK(take(ld, 1, a, meta) == 10);
    CHECK(meta[0].epoch == 1 && meta[0].index == 0 && a[0] == 0);
    CHECK(gr_loader_wait_s(ld) > 0);
    gr_loader_close(ld);

    /* drop_last */
    c = loader_cfg(10, true, true, 5);
    CHECK(gr_loader_open(ds, &c, &ld, &err) == GR_OK);
    CHECK(gr_loader_batches_per_epoch(ld) == 10);
    CHECK(gr_loader_samples_per_epoch(ld) == 100);
    CHECK(take(ld, 11, a, meta) == 110);
    CHECK(meta[9].last_in_epoch && meta[9].n == 10 && meta[10].epoch == 1 && meta[10].index == 0);
    gr_loader_close(ld);

    /* shuffle: determinism, each sample once per epoch, epochs differ */
    c = loader_cfg(8, true, false, 1234);
    gr_loader *l1 = NULL, *l2 = NULL;
    CHECK(gr_loader_open(ds, &c, &l1, &err) == GR_OK);
    CHECK(gr_loader_open(ds, &c, &l2, &err) == GR_OK);
    const int64_t bpe = gr_loader_batches_per_epoch(l1);
    CHECK(bpe == 13);
    CHECK(take(l1, 3 * bpe, a, NULL) == 3 * LN);
    CHECK(take(l2, 3 * bpe, b, NULL) == 3 * LN);
    CHECK(memcmp(a, b, 3 * LN * sizeof *a) == 0);
    for (int e = 0; e < 3; e++) CHECK_MSG(is_permutation(a + e * LN, LN, LN), "epoch %d", e);
    CHECK(memcmp(a, a + LN, LN * sizeof *a) != 0);
    CHECK(memcmp(a + LN, a + 2 * LN, LN * sizeof *a) != 0);
    bool identity = true;
    for (int i = 0; i < LN; i++) identity = identity && a[i] == i;
    CHECK(!identity);
    gr_loader_close(l2);
    c.seed = 1235;
    CHECK(gr_loader_open(ds, &c, &l2, &err) == GR_OK);
    CHECK(take(l2, bpe, b, NULL) == LN);
    CHECK(memcmp(a, b, LN * sizeof *a) != 0);
    gr_loader_close(l2);

    /* seek to mid-epoch: same remaining batches as the uninterrupted run */
    c.seed = 1234;
    CHECK(gr_loader_open(ds, &c, &l2, &err) == GR_OK);
    CHECK(gr_loader_seek(l2, 1, 40, &err) == GR_OK);
    gr_batch m2[64];
    int64_t rest = take(l2, (bpe - 5) + 3, b, m2);
    CHECK(rest == (LN - 40) + 3 * 8);
    CHECK(m2[bpe - 5].epoch == 2 && m2[bpe - 5].index == 0);
    CHECK(memcmp(b, a + LN + 40, (size_t)rest * sizeof *b) == 0);
    CHECK(m2[0].epoch == 1 && m2[0].index == 5 && m2[0].sample_in_epoch == 40);
    CHECK(gr_loader_seek(l2, 0, 12, &err) == GR_ERR_DATA);
    CHECK_STR_CONTAINS(err.msg, "multiple of the batch (8)");
    CHECK(gr_loader_seek(l2, 0, 104, &err) == GR_ERR_DATA);
    CHECK(gr_loader_seek(l2, -1, 0, &err) == GR_ERR_DATA);
    CHECK(gr_loader_seek(l2, 0, 96, &err) == GR_OK); /* the kept last batch */
    CHECK(take(l2, 1, b, m2) == LN - 96);
    CHECK(m2[0].last_in_epoch);
    CHECK(memcmp(b, a + 96, (LN - 96) * sizeof *b) == 0);
    gr_loader_close(l2);
    gr_loader_close(l1);

    /* two ranks: disjoint, covering all but the remainder, same permutation */
    for (int shuffle = 0; shuffle < 2; shuffle++) {
        int32_t r0[LN], r1[LN];
        gr_loader_config c0 = loader_cfg(5, shuffle, false, 99), c1 = c0;
        c0.world = c1.world = 2;
        c1.rank = 1;
        gr_loader *k0 = NULL, *k1 = NULL;
        CHECK(gr_loader_open(ds, &c0, &k0, &err) == GR_OK);
        CHECK(gr_loader_open(ds, &c1, &k1, &err) == GR_OK);
        CHECK(gr_loader_samples_per_epoch(k0) == LN / 2 && gr_loader_batches_per_epoch(k0) == 11);
        CHECK(take(k0, 11, r0, NULL) == LN / 2);
        CHECK(take(k1, 11, r1, NULL) == LN / 2);
        int32_t both[LN];
        memcpy(both, r0, LN / 2 * sizeof *both);
        memcpy(both + LN / 2, r1, LN / 2 * sizeof *both);
        char seen[LN] = {0};
        int dup = 0;
        for (int i = 0; i < 2 * (LN / 2); i++) dup += seen[both[i]]++ ? 1 : 0;
        CHECK(dup == 0);
        if (!shuffle) CHECK(r0[0] == 0 && r0[1] == 2 && r1[0] == 1 && r1[50] == 101);
        if (shuffle) {
            /* interleaving the shards gives the single-process permutation */
            gr_loader_config cs = loader_cfg(5, true, false, 99);
            gr_loader *ks = NULL;
            int32_t full[LN];
            CHECK(gr_loader_open(ds, &cs, &ks, &err) == GR_OK);
            CHECK(take(ks, 21, full, NULL) == LN);
            bool ok = true;
            for (int i = 0; i < LN / 2; i++) ok = ok && full[2 * i] == r0[i] && full[2 * i + 1] == r1[i];
            CHECK(ok);
            gr_loader_close(ks);
        }
        gr_loader_close(k0);
        gr_loader_close(k1);
    }

    /* configuration errors */
    c = loader_cfg(0, false, false, 0);
    CHECK(gr_loader_open(ds, &c, &ld, &err) == GR_ERR_USAGE && ld == NULL);
    c = loader_cfg(8, false, false, 0);
    c.n_norm = 3;
    CHECK(gr_loader_open(ds, &c, &ld, &err) == GR_ERR_USAGE);
    CHECK_STR_CONTAINS(err.msg, "3 values");
    c = loader_cfg(8, false, false, 0);
    c.world = 200;
    CHECK(gr_loader_open(ds, &c, &ld, &err) == GR_ERR_DATA);
    c = loader_cfg(200, false, true, 0);
    CHECK(gr_loader_open(ds, &c, &ld, &err) == GR_ERR_DATA);
    CHECK_STR_CONTAINS(err.msg, "drop_last");
    gr_dataset_close(ds);
}

int main(void) {
    mkdir(GR_TEST_TMP, 0755);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    test_loader();
    H5close();
    return gr_test_report();
}
