/* test_dataio_idx.c — unit tests for the IDX converter of dataio/convert.h
 * (`gpurun data mnist|fashion-mnist`): hand-made IDX files, gzipped and plain
 * (values, statistics, class names, --force), broken ones (magic, truncation,
 * counts, shapes, a huge claimed count, a cut gzip stream, missing files, an
 * unwritable output), and the real Fashion-MNIST files when installed (with
 * one epoch of the loader over them; skipped, exit 77, when they are not). */
#include "dataio_fixture.h"
#include "tmp_left.h"

#include "../dataio/convert.h"

#include <dirent.h>
#include <string.h>
#include <zlib.h>

#define FMNIST_DIR "/usr/share/datasets/fashion-mnist"

static void put_be32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16), p[2] = (uint8_t)(v >> 8), p[3] = (uint8_t)v;
}

/* Writes an IDX file (gzipped when gz); bytes_cut drops that many bytes at the end. */
static void write_idx(const char *dir, const char *name, bool gz, uint32_t magic, uint32_t n, uint32_t h,
                      uint32_t w, uint8_t seed, size_t bytes_cut) {
    char path[600];
    snprintf(path, sizeof path, "%s/%s%s", dir, name, gz ? ".gz" : "");
    const bool images = magic == 0x803;
    size_t hl = images ? 16 : 8, dl = images ? (size_t)n * h * w : n;
    uint8_t *buf = malloc(hl + dl);
    put_be32(buf, magic);
    put_be32(buf + 4, n);
    if (images) put_be32(buf + 8, h), put_be32(buf + 12, w);
    for (size_t i = 0; i < dl; i++) buf[hl + i] = images ? (uint8_t)(i * 3 + seed) : (uint8_t)((i + seed) % 10);
    size_t len = hl + dl - bytes_cut;
    if (gz) {
        gzFile f = gzopen(path, "wb");
        gzwrite(f, buf, (unsigned)len);
        gzclose(f);
    } else {
        FILE *f = fopen(path, "wb");
        fwrite(buf, 1, len, f);
        fclose(f);
    }
    free(buf);
}

static void make_idx_dir(const char *dir, bool gz) {
    mkdir(dir, 0755);
    const char *names[4] = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
                            "t10k-labels-idx1-ubyte"};
    for (int k = 0; k < 4; k++) {
        char p[600];
        snprintf(p, sizeof p, "%s/%s.gz", dir, names[k]);
        remove(p);
        snprintf(p, sizeof p, "%s/%s", dir, names[k]);
        remove(p);
    }
    write_idx(dir, "train-images-idx3-ubyte", gz, 0x803, 6, 4, 3, 1, 0);
    write_idx(dir, "train-labels-idx1-ubyte", gz, 0x801, 6, 0, 0, 2, 0);
    write_idx(dir, "t10k-images-idx3-ubyte", false, 0x803, 3, 4, 3, 5, 0); /* mixed: plain */
    write_idx(dir, "t10k-labels-idx1-ubyte", gz, 0x801, 3, 0, 0, 7, 0);
}

static void read_classes(const char *path, const char *group, char out[10][32]) {
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    hid_t a = H5Aopen_by_name(f, group, "classes", H5P_DEFAULT, H5P_DEFAULT);
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, H5T_VARIABLE);
    H5Tset_cset(t, H5T_CSET_UTF8);
    char *v[10] = {0};
    if (a >= 0 && H5Aread(a, t, v) >= 0)
        for (int i = 0; i < 10; i++) {
            snprintf(out[i], 32, "%s", v[i] ? v[i] : "");
            H5free_memory(v[i]);
        }
    H5Tclose(t);
    if (a >= 0) H5Aclose(a);
    H5Fclose(f);
}


static void test_convert_small(void) {
    const char *dir = tmp_path("idx");
    const char *out = tmp_path("idx_out.h5");
    remove(out);
    make_idx_dir(dir, true);
    gr_error err = {0};
    CHECK(gr_data_convert_idx("mnist", dir, out, false, false, &err) == GR_OK);
    CHECK(file_exists(out) && !gr_tmp_left(out));
    gr_dataset *ds = NULL;
    CHECK(gr_dataset_open(out, "/train", &ds, &err) == GR_OK);
    if (ds) {
        int64_t chw[3];
        gr_dataset_sample_shape(ds, chw);
        CHECK(gr_dataset_len(ds) == 6 && chw[0] == 1 && chw[1] == 4 && chw[2] == 3);
        CHECK(gr_dataset_labels(ds)[0] == 2 && gr_dataset_labels(ds)[5] == 7);
        int64_t i1 = 1;
        float x[12];
        int32_t y;
        CHECK(gr_dataset_read(ds, &i1, 1, NULL, NULL, x, &y, &err) == GR_OK);
        CHECK(x[0] == (float)(uint8_t)(12 * 3 + 1) && x[11] == (float)(uint8_t)(23 * 3 + 1) && y == 3);
        double sum = 0, sum2 = 0;
        for (int i = 0; i < 72; i++) sum += (uint8_t)(i * 3 + 1), sum2 += (double)(uint8_t)(i * 3 + 1) * (uint8_t)(i * 3 + 1);
        double m = 0, s = 0;
        CHECK(gr_dataset_attr_floats(ds, "mean", &m, 1) == 1);
        CHECK(gr_dataset_attr_floats(ds, "std", &s, 1) == 1);
        CHECK_CLOSE(m, sum / 72, 1e-12, 0);
        CHECK_CLOSE(s, sqrt(sum2 / 72 - (sum / 72) * (sum / 72)), 1e-9, 0);
        gr_dataset_close(ds);
    }
    CHECK(gr_dataset_open(out, "/test", &ds, &err) == GR_OK);
    if (ds) {
        CHECK(gr_dataset_len(ds) == 3 && gr_dataset_labels(ds)[0] == 7);
        gr_dataset_close(ds);
    }
    char cls[10][32] = {{0}};
    read_classes(out, "/test", cls);
    CHECK(strcmp(cls[0], "0") == 0 && strcmp(cls[9], "9") == 0);

    /* existing output */
    CHECK(gr_data_convert_idx("mnist", dir, out, false, false, &err) == GR_ERR_USAGE);
    CHECK_STR_CONTAINS(err.msg, "dataio_idx_out.h5: already exists (pass --force to overwrite)");
    CHECK(gr_data_convert_idx("fashion-mnist", dir, out, true, false, &err) == GR_OK);
    read_classes(out, "/train", cls);
    CHECK(strcmp(cls[0], "T-shirt/top") == 0 && strcmp(cls[9], "Ankle boot") == 0);
    CHECK(gr_data_convert_idx("cifar", dir, out, true, false, &err) == GR_ERR_USAGE);

    /* broken inputs: exit 3 naming the file, nothing left behind */
    remove(out);
    write_idx(dir, "train-labels-idx1-ubyte", true, 0x803, 6, 0, 0, 2, 0);
    CHECK(gr_data_convert_idx("mnist", dir, out, false, false, &err) == GR_ERR_DATA);
    CHECK_STR_CONTAINS(err.msg, "train-labels-idx1-ubyte.gz: bad magic 0x00000803; expected 0x00000801");
    make_idx_dir(dir, true);
    write_idx(dir, "t10k-images-idx3-ubyte", false, 0x803, 3, 4, 3, 5, 7);
    CHECK(gr_data_convert_idx("mnist", dir, out, false, false, &err) == GR_ERR_DATA);
    CHECK_STR_CONTAINS(err.msg, "t10k-images-idx3-ubyte: truncated");
    make_idx_dir(dir, true);
    write_idx(dir, "train-images-idx3-ubyte", true, 0x803, 6, 4, 3, 1, 20);
    CHECK(gr_data_convert_idx("mnist", dir, out, false, false, &err) == GR_ERR_DATA);
    CHECK_STR_CONTAINS(err.msg, "train-images-idx3-ubyte.gz: truncated");
    make_idx_dir(dir, true);
    write_idx(dir, "train-labels-idx1-ubyte", true, 0x801, 5, 0, 0, 2, 0);
    CHECK(gr_data_convert_idx("mnist", dir, out, false, false, &err) == GR_ERR_DATA);
    CHECK_STR_CONTAINS(err.msg, "count mismatch: 6 images but");
    CHECK_STR_CONTAINS(err.msg, "train-labels-idx1-ubyte.gz has 5 labels");
    make_idx_dir(dir, true);
    write_idx(dir, "t10k-images-idx3-ubyte", false, 0x803, 3, 5, 3, 5, 0);
    CHECK(gr_data_convert_idx("mnist", dir, out, false, false, &err) == GR_ERR_DATA);
    CHECK_STR_CONTAINS(err.msg, "t10k-images-idx3-ubyte: images are 5x3");
    make_idx_dir(dir, true);
    write_idx(dir, "t10k-images-idx3-ubyte", false, 0x803, 3, 4, 3, 5, 0);
    {   /* a header claiming a huge count must fail as truncated, not allocate it */
        char hp[600];
        uint8_t hdr[11] = {0};
        put_be32(hdr, 0x801);
        put_be32(hdr + 4, 0xF0000000u);
        snprintf(hp, sizeof hp, "%s/t10k-labels-idx1-ubyte.gz", dir);
        gzFile hf = gzopen(hp, "wb");
        gzwrite(hf, hdr, sizeof hdr);
        gzclose(hf);
        CHECK(gr_data_convert_idx("mnist", dir, out, false, false, &err) == GR_ERR_DATA);
        CHECK_STR_CONTAINS(err.msg, "t10k-labels-idx1-ubyte.gz: truncated");
    }
    make_idx_dir(dir, true);
    { /* a gzip stream cut in half */
        char gzp[600], cut[640];
        snprintf(gzp, sizeof gzp, "%s/train-images-idx3-ubyte.gz", dir);
        snprintf(cut, sizeof cut, "%s.cut", gzp);
        copy_prefix(gzp, cut, 0.5);
        rename(cut, gzp);
        CHECK(gr_data_convert_idx("mnist", dir, out, false, false, &err) == GR_ERR_DATA);
        CHECK_STR_CONTAINS(err.msg, "train-images-idx3-ubyte.gz: ");
    }
    make_idx_dir(dir, true);
    char lp[600];
    snprintf(lp, sizeof lp, "%s/t10k-labels-idx1-ubyte.gz", dir);
    remove(lp);
    CHECK(gr_data_convert_idx("mnist", dir, out, false, false, &err) == GR_ERR_DATA);
    CHECK_STR_CONTAINS(err.msg, "t10k-labels-idx1-ubyte.gz: no such file");
    CHECK(gr_data_convert_idx("mnist", tmp_path("no_dir"), out, false, false, &err) == GR_ERR_DATA);
    CHECK_STR_CONTAINS(err.msg, "no such directory");
    CHECK(!file_exists(out) && !gr_tmp_left(out));
    /* unwritable output location: HDF5 failure translated, no tmp left */
    make_idx_dir(dir, false);
    const char *bad_out = tmp_path("no_dir/x.h5");
    CHECK(gr_data_convert_idx("mnist", dir, bad_out, false, false, &err) == GR_ERR_DATA);
    CHECK_STR_CONTAINS(err.msg, "no_dir/x.h5: cannot create a temporary file next to it: No such file or directory");
}

static void test_convert_fashion_mnist(void) {
    if (!file_exists(FMNIST_DIR "/train-images-idx3-ubyte.gz")) {
        gr_test_skip("the Fashion-MNIST conversion check: " FMNIST_DIR " is not installed (dataset-fashion-mnist)");
        return;
    }
    const char *out = tmp_path("fmnist.h5");
    gr_error err = {0};
    CHECK(gr_data_convert_idx("fashion-mnist", FMNIST_DIR, out, true, false, &err) == GR_OK);
    uint8_t raw_lab[16 + 8];
    gzFile gz = gzopen(FMNIST_DIR "/train-labels-idx1-ubyte.gz", "rb");
    CHECK(gzread(gz, raw_lab, sizeof raw_lab) == (int)sizeof raw_lab);
    gzclose(gz);
    uint8_t raw_img[16 + 784];
    gz = gzopen(FMNIST_DIR "/train-images-idx3-ubyte.gz", "rb");
    CHECK(gzread(gz, raw_img, sizeof raw_img) == (int)sizeof raw_img);
    gzclose(gz);

    gr_dataset *ds = NULL;
    CHECK(gr_dataset_open(out, "/train", &ds, &err) == GR_OK);
    if (!ds) return;
    int64_t chw[3];
    gr_dataset_sample_shape(ds, chw);
    CHECK(gr_dataset_len(ds) == 60000 && chw[0] == 1 && chw[1] == 28 && chw[2] == 28);
    CHECK(gr_dataset_in_memory(ds));
    bool same = true;
    for (int i = 0; i < 16; i++) same = same && gr_dataset_labels(ds)[i] == raw_lab[8 + i];
    CHECK(same);
    CHECK(gr_dataset_check_labels(ds, 10, &err) == GR_OK);
    double m = 0, s = 0;
    CHECK(gr_dataset_attr_floats(ds, "mean", &m, 1) == 1 && gr_dataset_attr_floats(ds, "std", &s, 1) == 1);
    CHECK_CLOSE(m, 72.94, 0, 0.01);
    CHECK_CLOSE(s, 90.02, 0, 0.01);
    char cls[10][32] = {{0}};
    read_classes(out, "/train", cls);
    CHECK(strcmp(cls[0], "T-shirt/top") == 0 && strcmp(cls[6], "Shirt") == 0);

    float x0[784];
    int64_t i0 = 0;
    int32_t y0;
    CHECK(gr_dataset_read(ds, &i0, 1, &m, &s, x0, &y0, &err) == GR_OK);
    int bad = 0;
    for (int i = 0; i < 784; i++)
        if (fabsf(x0[i] - (float)((raw_img[16 + i] - m) / s)) > 1e-6f) bad++;
    CHECK(bad == 0 && y0 == raw_lab[8]);

    /* the loader over the real data: one epoch of 128-sample shuffled batches */
    gr_loader_config c = {.batch = 128, .shuffle = true, .seed = 7, .rank = 0, .world = 1, .n_norm = 1,
                          .mean = {m}, .std = {s}, .prefetch = 4};
    gr_loader *ld = NULL;
    CHECK(gr_loader_open(ds, &c, &ld, &err) == GR_OK);
    if (ld) {
        CHECK(gr_loader_batches_per_epoch(ld) == 469);
        const int nb = 469;
        int64_t seen = 0;
        double t0 = gr_now();
        for (int b = 0; b < nb; b++) {
            gr_batch *bt = NULL;
            if (gr_loader_next(ld, &bt, &err) != GR_OK) break;
            seen += bt->n;
            gr_loader_release(ld, bt);
        }
        double per = (gr_now() - t0) / nb;
        CHECK(seen == 60000);
        /* printed for the eye only: speed is the benchmarks' business (bench/), never a test's */
        printf("Fashion-MNIST: %.1f us per 128-sample batch (wait_s %.3f)\n", per * 1e6, gr_loader_wait_s(ld));
        gr_loader_close(ld);
    }
    gr_dataset_close(ds);
    CHECK(gr_dataset_open(out, "/test", &ds, &err) == GR_OK);
    if (ds) {
        CHECK(gr_dataset_len(ds) == 10000);
        gr_dataset_close(ds);
    }
    /* a truncated copy of the real file */
    const char *trunc = tmp_path("fmnist_trunc.h5");
    copy_prefix(out, trunc, 0.5);
    CHECK(try_open(trunc, "/train", &err) == GR_ERR_DATA);
    CHECK_STR_CONTAINS(err.msg, "dataio_fmnist_trunc.h5: not an HDF5 file or corrupt (HDF5: ");
    remove(trunc);
    remove(out);
}

int main(void) {
    mkdir(GR_TEST_TMP, 0755);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    test_convert_small();
    test_convert_fashion_mnist();
    H5close();
    return gr_test_report();
}
