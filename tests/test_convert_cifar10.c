/* test_convert_cifar10.c — unit tests for `gpurun data cifar10`
 * (gr_data_convert_cifar10 of dataio/convert.h) on hand-made batch files:
 * pixels, labels, the train statistics on both splits, class names (built in
 * or from batches.meta.txt), --force, and every bad input (wrong record
 * counts, short files, labels out of range, missing files) with its exit
 * code, a message naming the file, and nothing left behind. */
#include "convert_fixture.h"

#define CIF_R 4 /* records per fake batch file */

static uint8_t cif_pixel(int file, int r, int c, int y, int x) {
    return (uint8_t)(file * 31 + r * 13 + c * 5 + y * 3 + x * 7);
}

static int cif_label(int file, int r) {
    return (file * 3 + r * 7) % 10;
}

static const char *const cif_names[6] = {"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin",
                                         "data_batch_4.bin", "data_batch_5.bin", "test_batch.bin"};

/* File k of a fake CIFAR-10 directory with `records` records. */
static void cif_write(const char *dir, int k, int records) {
    size_t n = (size_t)records * 3073;
    uint8_t *b = malloc(n);
    for (int r = 0; r < records; r++) {
        uint8_t *rec = b + (size_t)r * 3073;
        rec[0] = (uint8_t)cif_label(k, r);
        for (int c = 0; c < 3; c++)
            for (int y = 0; y < 32; y++)
                for (int x = 0; x < 32; x++) rec[1 + c * 1024 + y * 32 + x] = cif_pixel(k, r, c, y, x);
    }
    write_bytes(join(dir, cif_names[k]), b, n);
    free(b);
}

static void cif_make(const char *dir) {
    rm_rf(dir);
    mkdir(dir, 0755);
    for (int k = 0; k < 6; k++) cif_write(dir, k, CIF_R);
}

static void test_cifar10(void) {
    const char *dir = tmp_path("cifar"), *out = tmp_path("cifar.h5");
    gr_error err = {0};
    cif_make(dir);
    remove(out);
    CHECK(gr_data_convert_cifar10(dir, CIF_R, out, false, false, &err) == GR_OK);
    CHECK(file_exists(out) && !tmp_exists(out));
    split_data tr, te;
    if (read_split(out, "/train", &tr) && read_split(out, "/test", &te)) {
        CHECK(tr.n == 5 * CIF_R && te.n == CIF_R);
        CHECK(tr.chw[0] == 3 && tr.chw[1] == 32 && tr.chw[2] == 32);
        int bad = 0, badl = 0;
        for (int k = 0; k < 6; k++)
            for (int r = 0; r < CIF_R; r++) {
                const split_data *d = k < 5 ? &tr : &te;
                const int64_t i = k < 5 ? k * CIF_R + r : r;
                badl += d->y[i] != cif_label(k, r);
                for (int c = 0; c < 3; c++)
                    for (int y = 0; y < 32; y++)
                        for (int x = 0; x < 32; x++)
                            bad += d->x[((i * 3 + c) * 32 + y) * 32 + x] != (float)cif_pixel(k, r, c, y, x);
            }
        CHECK_MSG(bad == 0 && badl == 0, "%d pixels, %d labels differ", bad, badl);
        double want_m[3], want_s[3], m[4], s[4];
        stats_of(&tr, want_m, want_s);
        CHECK(read_attr(out, "/train", "mean", m, 4) == 3 && read_attr(out, "/train", "std", s, 4) == 3);
        for (int c = 0; c < 3; c++) CHECK_CLOSE(m[c], want_m[c], 1e-9, 1e-9);
        for (int c = 0; c < 3; c++) CHECK_CLOSE(s[c], want_s[c], 1e-6, 1e-6);
        /* the test split carries the train statistics */
        CHECK(read_attr(out, "/test", "mean", m, 4) == 3);
        CHECK_CLOSE(m[2], want_m[2], 1e-9, 1e-9);
    }
    split_free(&tr);
    split_free(&te);
    char cls[12][32] = {{0}};
    CHECK(read_classes(out, "/train", cls, 12) == 10);
    CHECK(strcmp(cls[0], "airplane") == 0 && strcmp(cls[9], "truck") == 0);
    int nf;
    size_t lsize;
    CHECK(read_chunk(out, "/train", &nf, &lsize) == 5 * CIF_R && nf == 0 && lsize == 1);

    /* class names from batches.meta.txt (CRLF, trailing blank lines) */
    const char meta[] = "c0\r\nc1\nc2\nc3\nc4\nc5\nc6\nc7\nc8\nlast one \n\n\n";
    write_bytes(join(dir, "batches.meta.txt"), meta, sizeof meta - 1);
    CHECK(gr_data_convert_cifar10(dir, CIF_R, out, false, false, &err) == GR_ERR_USAGE);
    CHECK_STR_CONTAINS(err.msg, "already exists (pass --force to overwrite)");
    CHECK(gr_data_convert_cifar10(dir, CIF_R, out, true, false, &err) == GR_OK);
    CHECK(read_classes(out, "/test", cls, 12) == 10);
    CHECK(strcmp(cls[0], "c0") == 0 && strcmp(cls[9], "last one") == 0);
    remove(out);

    /* bad inputs: exit 3 naming the file, nothing written */
    write_bytes(join(dir, "batches.meta.txt"), "a\nb\nc\n", 6);
    CHECK_FAILED(gr_data_convert_cifar10(dir, CIF_R, out, false, false, &err), GR_ERR_DATA,
                 "batches.meta.txt: 3 class names; expected 10", out);
    remove(join(dir, "batches.meta.txt"));
    CHECK(mkfifo(join(dir, "batches.meta.txt"), 0600) == 0); /* refused, not read: a read would block */
    CHECK_FAILED(gr_data_convert_cifar10(dir, CIF_R, out, false, false, &err), GR_ERR_DATA,
                 "batches.meta.txt: the class names file is a FIFO, not a regular file", out);
    remove(join(dir, "batches.meta.txt"));
    CHECK_FAILED(gr_data_convert_cifar10(dir, GR_CIFAR10_BATCH_RECORDS, out, false, false, &err), GR_ERR_DATA,
                 "data_batch_1.bin: holds 4 records; expected 10000", out);
    remove(join(dir, "data_batch_3.bin"));
    CHECK_FAILED(gr_data_convert_cifar10(dir, CIF_R, out, false, false, &err), GR_ERR_DATA,
                 "data_batch_3.bin: no such file", out);
    cif_write(dir, 2, CIF_R + 1);
    CHECK_FAILED(gr_data_convert_cifar10(dir, CIF_R, out, false, false, &err), GR_ERR_DATA,
                 "data_batch_3.bin: holds 5 records; expected 4", out);
    cif_write(dir, 2, CIF_R);
    {   /* a byte short */
        uint8_t *b = malloc(CIF_R * 3073);
        size_t n = read_bytes(join(dir, "test_batch.bin"), b, CIF_R * 3073);
        write_bytes(join(dir, "test_batch.bin"), b, n - 1);
        CHECK_FAILED(gr_data_convert_cifar10(dir, CIF_R, out, false, false, &err), GR_ERR_DATA,
                     "test_batch.bin: size 12291 is not a multiple of 3073 bytes", out);
        b[2 * 3073] = 10; /* label of record 2 */
        write_bytes(join(dir, "test_batch.bin"), b, n);
        CHECK_FAILED(gr_data_convert_cifar10(dir, CIF_R, out, false, false, &err), GR_ERR_DATA,
                     "test_batch.bin: record 2: label 10 is outside [0, 10)", out);
        free(b);
    }
    write_bytes(join(dir, "data_batch_5.bin"), "", 0);
    CHECK_FAILED(gr_data_convert_cifar10(dir, CIF_R, out, false, false, &err), GR_ERR_DATA,
                 "data_batch_5.bin: size 0 is not a multiple", out);
    CHECK_FAILED(gr_data_convert_cifar10(tmp_path("no_such_dir"), CIF_R, out, false, false, &err), GR_ERR_DATA,
                 "convert_no_such_dir: no such directory", out);
    rm_rf(dir);
}

int main(void) {
    mkdir(GR_TEST_TMP, 0755);
    test_cifar10();
    return gr_test_report();
}
