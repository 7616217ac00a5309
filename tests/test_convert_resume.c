/* test_convert_resume.c — unit tests for the resumable encoded conversion
 * (convert_partial.c through `data imagefolder --store jpeg`): a conversion
 * stopped after each block (gr_conv_stop.requested) and started again until
 * it ends writes the same datasets as one never stopped, with a cut JPEG
 * skipped in both, a torn record and stray bytes after the last committed
 * block ignored, and the blocks done not read again (a file of a done block
 * replaced by garbage of its size and time goes unnoticed, and
 * report->resumed counts them); another conversion's OUT.partial is refused
 * (exit 2) naming --restart, which starts over (its old files removed); a failure before any block
 * is committed leaves no OUT.partial, one after keeps it and says so; a
 * running conversion's lock refuses a second one. */
#define _GNU_SOURCE /* F_OFD_SETLK */
#include "convert_images.h"

#include <fcntl.h>
#include <sys/stat.h>

#define NA 300 /* class a's files */
#define NB 260 /* class b's, then b/zz_cut.jpg: 561 in all, /train 533 (512 + 21), /val 28 */

static uint8_t px_noise(int x, int y, int c) {
    uint32_t h = (uint32_t)x * 73856093u ^ (uint32_t)y * 19349663u ^ (uint32_t)c * 83492791u;
    return (uint8_t)(h ^ h >> 13);
}

static const char *partial_of(const char *out) {
    static char buf[4][600];
    static int k;
    char *p = buf[k++ % 4];
    snprintf(p, 600, "%s.partial", out);
    return p;
}

static void make_corpus(const char *dir) {
    rm_rf(dir);
    mkdir(dir, 0755);
    mkdir(join(dir, "a"), 0755);
    mkdir(join(dir, "b"), 0755);
    char name[64];
    for (int i = 0; i < NA + NB; i++) {
        snprintf(name, sizeof name, "%s/%03d.jpg", i < NA ? "a" : "b", i);
        write_jpeg_as(join(dir, name), 12 + i % 5, 10, 3, 80, false, px_noise);
    }
    uint8_t buf[8192];
    const size_t n = read_bytes(join(dir, "a/000.jpg"), buf, sizeof buf);
    write_bytes(join(dir, "b/zz_cut.jpg"), buf, n / 2);
}

/* Whether dataset path of files a and b holds the same type, shape and bytes. */
static bool same_dataset(hid_t a, hid_t b, const char *path) {
    hid_t d[2] = {H5Dopen2(a, path, H5P_DEFAULT), H5Dopen2(b, path, H5P_DEFAULT)};
    bool same = d[0] >= 0 && d[1] >= 0;
    size_t bytes[2] = {0, 0};
    uint8_t *buf[2] = {NULL, NULL};
    for (int k = 0; k < 2 && same; k++) {
        hid_t t = H5Dget_type(d[k]), sp = H5Dget_space(d[k]);
        bytes[k] = (size_t)H5Sget_simple_extent_npoints(sp) * H5Tget_size(t);
        buf[k] = malloc(bytes[k] + 1);
        same = H5Dread(d[k], t, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf[k]) >= 0;
        H5Tclose(t), H5Sclose(sp);
    }
    same = same && bytes[0] == bytes[1] && memcmp(buf[0], buf[1], bytes[0]) == 0;
    for (int k = 0; k < 2; k++) {
        if (d[k] >= 0) H5Dclose(d[k]);
        free(buf[k]);
    }
    return same;
}

/* Every dataset of /train and /val and their `classes` the same in both files. */
static void check_same(const char *ref, const char *out) {
    static const char *const sets[] = {"encoded", "offsets", "shapes", "formats", "labels"};
    hid_t a = H5Fopen(ref, H5F_ACC_RDONLY, H5P_DEFAULT), b = H5Fopen(out, H5F_ACC_RDONLY, H5P_DEFAULT);
    CHECK(a >= 0 && b >= 0);
    for (int g = 0; g < 2 && a >= 0 && b >= 0; g++)
        for (size_t k = 0; k < GR_ARRAY_LEN(sets); k++) {
            char path[64];
            snprintf(path, sizeof path, "%s/%s", g ? "/val" : "/train", sets[k]);
            CHECK_MSG(same_dataset(a, b, path), "%s differs from the uninterrupted conversion's", path);
        }
    if (a >= 0) H5Fclose(a);
    if (b >= 0) H5Fclose(b);
    char ca[2][32], cb[2][32];
    CHECK(read_classes(ref, "/val", ca, 2) == 2 && read_classes(out, "/val", cb, 2) == 2 && !strcmp(ca[1], cb[1]));
}

/* file's bytes replaced by garbage of the same size, its modification time kept. */
static void garble_keep_time(const char *file) {
    struct stat sb;
    GR_ASSERT(stat(file, &sb) == 0);
    uint8_t junk[8192];
    memset(junk, 0x5a, sizeof junk);
    write_bytes(file, junk, (size_t)sb.st_size);
    const struct timespec times[2] = {sb.st_atim, sb.st_mtim};
    GR_ASSERT(utimensat(AT_FDCWD, file, times, 0) == 0);
}

static void append(const char *path, const char *bytes, size_t n) {
    FILE *f = fopen(path, "ab");
    GR_ASSERT(f && fwrite(bytes, 1, n, f) == n);
    fclose(f);
}

static gr_imagefolder_config config(const char *dir, gr_conv_stop *stop) {
    return (gr_imagefolder_config){.dir = dir, .store = GR_STORE_JPEG, .on_error = GR_ON_ERROR_SKIP,
                                   .val_fraction = 0.05, .seed = 1, .stop = stop};
}

/* One block a run, until it ends: the same file as an uninterrupted run. */
static void test_resume(const char *dir) {
    const char *ref = tmp_path("resume_ref.h5"), *out = tmp_path("resume.h5");
    remove(ref), remove(out), rm_rf(partial_of(out));
    gr_error err = {0};
    gr_imagefolder_config cfg = config(dir, NULL);
    gr_imagefolder_report rep = {0};
    CHECK_MSG(gr_data_convert_imagefolder(&cfg, ref, false, false, &rep, &err) == GR_OK, "%s", err.msg);
    CHECK(rep.samples == 560 && rep.nbad == 1 && rep.resumed == 0);
    gr_imagefolder_report_free(&rep);

    static gr_conv_stop stop;
    atomic_store(&stop.requested, 1);
    cfg = config(dir, &stop);
    const int64_t want_done[3] = {512, 533, 561};
    for (int run = 0; run < 3; run++) {
        CHECK_FAILED(gr_data_convert_imagefolder(&cfg, out, false, false, &rep, &err), GR_ERR_SIGNAL,
                     "stopped as asked", out);
        char kept[64];
        snprintf(kept, sizeof kept, "%lld files converted so far", (long long)want_done[run]);
        CHECK_STR_CONTAINS(err.msg, kept);
        CHECK(atomic_load(&stop.files) == want_done[run] && rep.resumed == (run ? want_done[run - 1] : 0));
        CHECK(file_exists(join(partial_of(out), "index")) && atomic_load(&stop.held) == 0);
        CHECK_STR_CONTAINS(stop.dir, ".partial");
        CHECK_STR_CONTAINS(stop.first, ".partial/train.bytes");
        gr_imagefolder_report_free(&rep);
        if (run == 0) {
            /* block 1 is done: its files are not read again, and what a crash leaves after the
             * last record (bytes of a block not committed, a torn record) is cut off */
            garble_keep_time(join(dir, "a/000.jpg"));
            append(join(partial_of(out), "train.bytes"), "stray bytes of an uncommitted block", 35);
            append(join(partial_of(out), "index"), "RBLK\x40\x00\x00\x00torn", 12);
        }
    }
    /* everything committed: this run reads no image and writes OUT */
    CHECK_MSG(gr_data_convert_imagefolder(&cfg, out, false, false, &rep, &err) == GR_OK, "%s", err.msg);
    CHECK(rep.resumed == 561 && rep.samples == 560 && rep.val_samples == 28 && rep.nbad == 1);
    if (rep.nbad == 1) CHECK_STR_CONTAINS(rep.bad[0].path, "zz_cut.jpg");
    CHECK_MSG(!file_exists(partial_of(out)), "%s left after the conversion", partial_of(out));
    gr_imagefolder_report_free(&rep);
    check_same(ref, out);
    make_corpus(dir); /* a/000.jpg back */
}

/* Another conversion's work: refused naming --restart, kept; --restart starts over. */
static void test_mismatch(const char *dir) {
    const char *out = tmp_path("resume_mis.h5");
    remove(out), rm_rf(partial_of(out));
    gr_error err = {0};
    gr_conv_stop stop = {0};
    atomic_store(&stop.requested, 1);
    gr_imagefolder_config cfg = config(dir, &stop);
    CHECK_FAILED(gr_data_convert_imagefolder(&cfg, out, false, false, NULL, &err), GR_ERR_SIGNAL, "stopped", out);
    struct stat before, after;
    CHECK(stat(join(partial_of(out), "index"), &before) == 0);
    atomic_store(&stop.requested, 0);
    cfg.max_side = 8; /* other options */
    CHECK_FAILED(gr_data_convert_imagefolder(&cfg, out, false, false, NULL, &err), GR_ERR_USAGE,
                 "holds 512 files converted by another conversion", out);
    CHECK_STR_CONTAINS(err.msg, "max_side=0");
    CHECK_STR_CONTAINS(err.msg, "add --restart to discard it");
    cfg.max_side = 0; /* the same options, a file touched: its time is part of the fingerprint */
    struct stat sb;
    CHECK(stat(join(dir, "b/500.jpg"), &sb) == 0);
    const struct timespec later[2] = {sb.st_atim, {sb.st_mtim.tv_sec + 10, 0}};
    CHECK(utimensat(AT_FDCWD, join(dir, "b/500.jpg"), later, 0) == 0);
    CHECK_FAILED(gr_data_convert_imagefolder(&cfg, out, false, false, NULL, &err), GR_ERR_USAGE, "split /train 533",
                 out);
    CHECK(stat(join(partial_of(out), "index"), &after) == 0 && after.st_size == before.st_size);
    /* --restart, into another group: the old splits' bytes files go too (else OUT.partial would stay) */
    cfg.restart = true;
    cfg.val_fraction = 0;
    cfg.group = "/all";
    gr_imagefolder_report rep = {0};
    CHECK_MSG(gr_data_convert_imagefolder(&cfg, out, false, false, &rep, &err) == GR_OK, "%s", err.msg);
    CHECK(rep.resumed == 0 && rep.samples == 560 && rep.nwarnings == 0 && !file_exists(partial_of(out)));
    gr_imagefolder_report_free(&rep);
}

/* A failure: nothing committed, no OUT.partial; after a block, kept and said. */
static void test_failures(const char *dir) {
    const char *out = tmp_path("resume_fail.h5");
    remove(out), rm_rf(partial_of(out));
    gr_error err = {0};
    gr_imagefolder_config cfg = config(dir, NULL);
    cfg.on_error = GR_ON_ERROR_FAIL;
    cfg.val_fraction = 0;
    uint8_t buf[64] = {0};
    write_bytes(join(dir, "a/0000_cut.jpg"), buf, sizeof buf); /* in the first block */
    CHECK_FAILED(gr_data_convert_imagefolder(&cfg, out, false, false, NULL, &err), GR_ERR_DATA,
                 "0000_cut.jpg: cannot decode", out);
    CHECK_MSG(!file_exists(partial_of(out)), "%s left with nothing committed", partial_of(out));
    remove(join(dir, "a/0000_cut.jpg"));
    /* b/zz_cut.jpg, the last file: in the second block */
    CHECK_FAILED(gr_data_convert_imagefolder(&cfg, out, false, false, NULL, &err), GR_ERR_DATA,
                 "zz_cut.jpg: cannot decode", out);
    CHECK_STR_CONTAINS(err.msg, "the 512 files converted before are kept in");
    CHECK(file_exists(join(partial_of(out), "train.bytes")));
    /* a running conversion holds the index locked: a second one is refused */
    const int fd = open(join(partial_of(out), "index"), O_RDWR);
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    CHECK(fd >= 0 && fcntl(fd, F_OFD_SETLK, &fl) == 0);
    CHECK_FAILED(gr_data_convert_imagefolder(&cfg, out, false, false, NULL, &err), GR_ERR_DATA,
                 "another conversion to the same output is running", out);
    close(fd);
    cfg.on_error = GR_ON_ERROR_SKIP;
    cfg.restart = true;
    CHECK_MSG(gr_data_convert_imagefolder(&cfg, out, false, false, NULL, &err) == GR_OK, "%s", err.msg);
    CHECK(!file_exists(partial_of(out)));
}

int main(void) {
    mkdir(GR_TEST_TMP, 0755);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    const char *dir = tmp_path("resume_folder");
    make_corpus(dir);
    test_resume(dir);
    test_mismatch(dir);
    test_failures(dir);
    rm_rf(dir);
    return gr_test_report();
}
