/* test_dataio_ondisk.c — unit tests for the on-disk read path of dataio/
 * (memory limit 0): the same values as in memory (chunked, contiguous, NHWC
 * uint8, float16; direct preads), the memory limit from the function, the
 * environment and the default; chunks never written reading as 0; and float
 * images holding inf/NaN refused at open in memory, at the read (and in the
 * loader's workers) from the file. */
#include "dataio_fixture.h"

/* The on-disk path (memory limit 0) gives the same values as in-memory. */
static void test_disk_path(void) {
    enum { N = 37, C = 3, H = 5, W = 4, S = C * H * W };
    float *imgf = malloc(N * S * sizeof *imgf);
    uint8_t *img8 = malloc(N * S);
    uint16_t *img16 = malloc(N * S * sizeof *img16);
    int64_t lab[N];
    for (int i = 0; i < N * S; i++) {
        imgf[i] = (float)(gr_hash64(1, (uint64_t)i) % 1000) * 0.25f;
        img8[i] = (uint8_t)gr_hash64(2, (uint64_t)i);
        img16[i] = (uint16_t)(0x3C00 + gr_hash64(3, (uint64_t)i) % 2000);
    }
    for (int i = 0; i < N; i++) lab[i] = i;
    hid_t f16 = f16_type(H5T_ORDER_LE);
    for (int variant = 0; variant < 4; variant++) {
        h5spec s = {.group = "/d", .img_ftype = H5T_IEEE_F32LE, .img_mtype = H5T_NATIVE_FLOAT, .rank = 4,
                    .dims = {N, C, H, W}, .img = imgf, .lab_ftype = H5T_STD_I32LE, .nlab = N, .labels = lab,
                    .chunked = variant != 1};
        if (variant == 2) s.img_ftype = s.img_mtype = H5T_NATIVE_UINT8, s.img = img8, s.layout = "NHWC",
                          s.dims[1] = H, s.dims[2] = W, s.dims[3] = C;
        if (variant == 3) s.img_ftype = s.img_mtype = f16, s.img = img16;
        const char *p = tmp_path("disk.h5");
        write_h5(p, &s);
        gr_error err = {0};
        gr_dataset *mem = NULL, *disk = NULL;
        gr_dataset_set_memory_limit(-1);
        CHECK(gr_dataset_open(p, "/d", &mem, &err) == GR_OK);
        gr_dataset_set_memory_limit(0);
        CHECK(gr_dataset_open(p, "/d", &disk, &err) == GR_OK);
        gr_dataset_set_memory_limit(-1);
        if (!mem || !disk) {
            gr_dataset_close(mem);
            gr_dataset_close(disk);
            continue;
        }
        CHECK(gr_dataset_in_memory(mem) && !gr_dataset_in_memory(disk));
        /* every chunk written, uncompressed, little-endian: pread past HDF5 (chunks of 2 with an
         * edge chunk, contiguous, NHWC uint8, float16) */
        CHECK_MSG(gr_dataset_reads_direct(disk), "variant %d: not read directly", variant);
        const double mean[C] = {3, 100, -2}, std[C] = {7, 0.5, 3};
        enum { B = 23 };
        float xa[B * S], xb[B * S];
        int32_t ya[B], yb[B];
        for (int round = 0; round < 4; round++) {
            int64_t idx[B];
            for (int k = 0; k < B; k++) idx[k] = (int64_t)(gr_hash64(round + 10, (uint64_t)k) % N);
            if (round == 3)
                for (int k = 0; k < B; k++) idx[k] = N - 1 - k; /* one descending run */
            idx[5] = idx[2];                                     /* duplicates */
            CHECK(gr_dataset_read(mem, idx, B, mean, std, xa, ya, &err) == GR_OK);
            CHECK(gr_dataset_read(disk, idx, B, mean, std, xb, yb, &err) == GR_OK);
            CHECK_MSG(memcmp(xa, xb, sizeof xa) == 0, "variant %d round %d", variant, round);
            CHECK(memcmp(ya, yb, sizeof ya) == 0);
            CHECK(ya[3] == idx[3]);
        }
        gr_dataset_close(mem);
        gr_dataset_close(disk);
    }
    /* the environment variable sets the limit when the function has not */
    setenv("GPURUN_DATA_MEM_LIMIT", "0", 1);
    CHECK(gr_dataset_memory_limit() == 0);
    gr_dataset_set_memory_limit(12345);
    CHECK(gr_dataset_memory_limit() == 12345);
    gr_dataset_set_memory_limit(-1);
    unsetenv("GPURUN_DATA_MEM_LIMIT");
    size_t avail = 0, total = 0;
    const int64_t def = gr_host_mem_info(&avail, &total) && (int64_t)(avail / 4) < ((int64_t)2 << 30)
                            ? (int64_t)(avail / 4) : (int64_t)2 << 30;
    CHECK_MSG(llabs(gr_dataset_memory_limit() - def) <= (64 << 20), "default limit %lld, expected about %lld",
              (long long)gr_dataset_memory_limit(), (long long)def); /* MemAvailable moves a little */
    H5Tclose(f16);
    free(imgf);
    free(img8);
    free(img16);
}

/* Chunks never written read as the fill value (0), on the in-memory and the
 * on-disk path alike: a hole in the middle, at the end (the sample the
 * direct-read check tries last; this was a double free), one sample per
 * chunk; and the file's last chunk only. */
static void test_unwritten_chunks(void) {
    enum { N = 37, C = 1, H = 3, W = 4, S = C * H * W };
    uint8_t img[N * S];
    int64_t lab[N];
    for (int i = 0; i < N * S; i++) img[i] = (uint8_t)(1 + gr_hash64(9, (uint64_t)i) % 250);
    for (int i = 0; i < N; i++) lab[i] = i % 10;
    static const struct { int chunk; hsize_t hole[2]; } v[] = {{4, {8, 24}}, {4, {20, 37}}, {1, {3, 9}}, {5, {0, 35}}};
    for (size_t t = 0; t < GR_ARRAY_LEN(v); t++) {
        h5spec s = {.group = "/d", .img_ftype = H5T_STD_U8LE, .img_mtype = H5T_NATIVE_UINT8, .rank = 4,
                    .dims = {N, C, H, W}, .img = img, .lab_ftype = H5T_STD_I32LE, .nlab = N, .labels = lab,
                    .chunked = true, .chunk = v[t].chunk, .hole = {v[t].hole[0], v[t].hole[1]}};
        const char *p = tmp_path("holes.h5");
        write_h5(p, &s);
        gr_error err = {0};
        gr_dataset *mem = NULL, *disk = NULL;
        gr_dataset_set_memory_limit(-1);
        CHECK_MSG(gr_dataset_open(p, "/d", &mem, &err) == GR_OK, "case %zu: %s", t, err.msg);
        gr_dataset_set_memory_limit(0);
        CHECK_MSG(gr_dataset_open(p, "/d", &disk, &err) == GR_OK, "case %zu: %s", t, err.msg);
        gr_dataset_set_memory_limit(-1);
        /* a chunk to pread is missing (only the file's last chunk exists in case 3 as well) */
        CHECK_MSG(!disk || !gr_dataset_reads_direct(disk), "case %zu: direct reads over unwritten chunks", t);
        if (mem && disk) {
            int64_t idx[N];
            for (int k = 0; k < N; k++) idx[k] = (k * 7) % N;
            static float xa[N * S], xb[N * S];
            int32_t ya[N], yb[N];
            const double mean[1] = {0}, sd[1] = {1};
            CHECK_MSG(gr_dataset_read(mem, idx, N, mean, sd, xa, ya, &err) == GR_OK, "case %zu: %s", t, err.msg);
            CHECK_MSG(gr_dataset_read(disk, idx, N, mean, sd, xb, yb, &err) == GR_OK, "case %zu: %s", t, err.msg);
            int bad = 0;
            for (int k = 0; k < N; k++)
                for (int e = 0; e < S; e++) {
                    const int64_t i = idx[k];
                    const float want = (hsize_t)i >= v[t].hole[0] && (hsize_t)i < v[t].hole[1] ? 0.0f
                                                                                              : (float)img[i * S + e];
                    bad += xa[k * S + e] != want || xb[k * S + e] != want;
                }
            CHECK_MSG(bad == 0, "case %zu (chunk %d, hole [%llu, %llu)): %d wrong values", t, v[t].chunk,
                      (unsigned long long)v[t].hole[0], (unsigned long long)v[t].hole[1], bad);
        }
        gr_dataset_close(mem);
        gr_dataset_close(disk);
    }
}

/* Float images holding inf/NaN are a data error (exit 3) naming the file,
 * the images dataset and the sample: at open when the split is held in
 * memory, as the batch is read (gr_dataset_read, the loader's workers) when
 * it is read from the file. */
static void test_nonfinite(void) {
    enum { N = 6, S = 8 };
    float img[N * S];
    uint16_t img16[N * S];
    int64_t lab[N];
    for (int i = 0; i < N * S; i++) img[i] = (float)i * 0.5f, img16[i] = 0x3C00;
    for (int i = 0; i < N; i++) lab[i] = i % 2;
    img[3 * S + 6] = NAN;        /* sample 3, element 6 */
    img[5 * S + 1] = -INFINITY;  /* sample 5, element 1 */
    img16[1 * S + 2] = 0x7E00;   /* half NaN: sample 1, element 2 */
    img16[4 * S + 0] = 0x7C00;   /* half inf: sample 4 */
    hid_t f16 = f16_type(H5T_ORDER_LE);
    for (int half = 0; half < 2; half++) {
        h5spec s = {.group = "/train", .img_ftype = half ? f16 : H5T_IEEE_F32LE,
                    .img_mtype = half ? f16 : H5T_NATIVE_FLOAT, .rank = 3, .dims = {N, 2, 4},
                    .img = half ? (const void *)img16 : (const void *)img, .lab_ftype = H5T_STD_I64LE, .nlab = N,
                    .labels = lab};
        const char *p = tmp_path(half ? "nonfinite16.h5" : "nonfinite32.h5");
        write_h5(p, &s);
        const int64_t bad = half ? 1 : 3;
        char want[128];
        snprintf(want, sizeof want, "sample %lld holds NaN at element %d of 8", (long long)bad, half ? 2 : 6);
        /* held in memory: refused at open, naming the first bad sample and counting the others */
        gr_dataset *ds = NULL;
        gr_error err = {0};
        CHECK(gr_dataset_open(p, "/train", &ds, &err) == GR_ERR_DATA);
        CHECK(ds == NULL);
        CHECK_STR_CONTAINS(err.msg, p);
        CHECK_STR_CONTAINS(err.msg, "/train/images: ");
        CHECK_STR_CONTAINS(err.msg, want);
        CHECK_STR_CONTAINS(err.msg, "(and 1 more sample)");
        gr_dataset_close(ds);

        /* read from the file: the batches before the bad sample are fine, its batch is the error */
        gr_dataset_set_memory_limit(0);
        ds = NULL;
        CHECK(gr_dataset_open(p, "/train", &ds, &err) == GR_OK);
        if (ds) {
            CHECK(!gr_dataset_in_memory(ds));
            float x[2 * S];
            int64_t ok_idx[2] = {0, 2}, bad_idx[2] = {2, bad};
            CHECK(gr_dataset_read(ds, ok_idx, 2, NULL, NULL, x, NULL, &err) == GR_OK);
            memset(&err, 0, sizeof err);
            CHECK(gr_dataset_read(ds, bad_idx, 2, NULL, NULL, x, NULL, &err) == GR_ERR_DATA);
            CHECK_STR_CONTAINS(err.msg, p);
            CHECK_STR_CONTAINS(err.msg, "/train/images: ");
            CHECK_STR_CONTAINS(err.msg, want);
            /* the loader with worker threads, in file order: batch 0 (samples 0, 1) of the float32
             * file is fine, batch 1 (2, 3) fails; of the half file batch 0 fails */
            gr_loader_config c = loader_cfg(2, false, true, 0);
            c.workers = 2;
            gr_loader *ld = NULL;
            CHECK(gr_loader_open(ds, &c, &ld, &err) == GR_OK);
            if (ld) {
                gr_batch *bt = NULL;
                if (!half) {
                    CHECK(gr_loader_next(ld, &bt, &err) == GR_OK);
                    if (bt) gr_loader_release(ld, bt);
                }
                memset(&err, 0, sizeof err);
                CHECK(gr_loader_next(ld, &bt, &err) == GR_ERR_DATA);
                CHECK_STR_CONTAINS(err.msg, "/train/images: ");
                CHECK_STR_CONTAINS(err.msg, want);
                gr_loader_close(ld);
            }
            gr_dataset_close(ds);
        }
        gr_dataset_set_memory_limit(-1);
    }
    H5Tclose(f16);
}

int main(void) {
    mkdir(GR_TEST_TMP, 0755);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    test_disk_path();
    test_unwritten_chunks();
    test_nonfinite();
    H5close();
    return gr_test_report();
}
