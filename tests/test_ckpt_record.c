/* test_ckpt_record.c — a checkpoint's run record (its root attributes: the
 * position, the loss scale, the accuracies, the RNG, the spec) is covered by
 * a crc32c (checkpoints/ckpt.c): every single-bit flip of every attribute's
 * stored bytes is refused by gr_ckpt_load, and gr_ckpt_intact calls the file
 * damaged (not "of another spec"). A version-1 file (before the checksum)
 * still loads. */
#include <hdf5.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "checkpoints/ckpt.h"
#include "dataio/h5util.h"
#include "gr_test.h"
#include "graph/graph.h"

#define DIR GR_TEST_TMP "/ckpt_record"

static gr_cfg *layers;

static void gr_rec_graph(gr_graph *g) {
    gr_error err = {0};
    gr_job_spec spec;
    memset(&spec, 0, sizeof spec);
    CHECK(gr_cfg_parse_text("[flatten, {dense: {units: 3}}]", "rec", 1, 1, &layers, &err) == GR_OK);
    spec.model.layers = layers;
    spec.train.batch_size = 4;
    spec.train.micro_batch = 4;
    snprintf(spec.train.loss, sizeof spec.train.loss, "softmax_cross_entropy");
    int64_t shape[3] = {1, 2, 2};
    CHECK(gr_graph_build(&spec, shape, 3, g, &err) == GR_OK);
}

static void gr_rec_header(gr_ckpt_header *h) {
    memset(h, 0, sizeof *h);
    h->step = 6;
    h->epoch = 1;
    h->sample_in_epoch = 8;
    h->world_size = 1;
    snprintf(h->precision, sizeof h->precision, "fp32");
    h->loss_scale = 1.0;
    h->last_train_loss = 0.5;
    h->best_val_accuracy = 0.7;
    h->last_val_accuracy = 0.65;
    h->last_val_loss = 0.9;
    h->loss_window_sum = 1.5;
    h->loss_window_steps = 2;
    h->time_s = 12.5;
    h->threads = 2;
    h->rng[0] = 11;
    h->rng[1] = 6;
    snprintf(h->optimizer, sizeof h->optimizer, "sgd");
    h->optim_slots = 1;
    h->spec = "name: rec\nseed: 11\n";
}

/* The raw bytes of attribute name (its file type), and its types. */
typedef struct gr_rec_attr {
    hid_t ftype, space;
    unsigned char *buf;
    size_t n;
} gr_rec_attr;

static bool gr_rec_read(hid_t f, const char *name, gr_rec_attr *a) {
    hid_t id = H5Aopen(f, name, H5P_DEFAULT);
    if (id < 0) return false;
    a->ftype = H5Aget_type(id);
    a->space = H5Aget_space(id);
    const hssize_t pts = H5Sget_simple_extent_npoints(a->space);
    bool ok = H5Tis_variable_str(a->ftype) <= 0; /* fixed-size: the bytes are the value */
    a->n = ok ? H5Tget_size(a->ftype) * (size_t)pts : 0;
    a->buf = ok ? malloc(a->n) : NULL;
    ok = ok && H5Aread(id, a->ftype, a->buf) >= 0;
    H5Aclose(id);
    return ok;
}

static void gr_rec_write(hid_t f, const char *name, const gr_rec_attr *a) {
    CHECK(H5Adelete(f, name) >= 0);
    hid_t id = H5Acreate2(f, name, a->ftype, a->space, H5P_DEFAULT, H5P_DEFAULT);
    CHECK(id >= 0 && H5Awrite(id, a->ftype, a->buf) >= 0);
    H5Aclose(id);
}

/* Flips bit b of attribute name in path; false when the attribute's bytes
 * cannot be had (a variable-length string). */
static bool gr_rec_flip(const char *path, const char *name, size_t bit, size_t *nbits) {
    hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    CHECK(f >= 0);
    gr_rec_attr a = {0};
    bool ok = gr_rec_read(f, name, &a);
    *nbits = a.n * 8;
    if (ok && bit < *nbits) {
        a.buf[bit / 8] ^= (unsigned char)(1u << (bit % 8));
        gr_rec_write(f, name, &a);
    }
    free(a.buf);
    if (a.ftype > 0) H5Tclose(a.ftype);
    if (a.space > 0) H5Sclose(a.space);
    H5Fclose(f);
    return ok;
}

static const char *const gr_rec_names[] = {
    "version", "step", "epoch", "sample_in_epoch", "world_size", "precision", "loss_scale", "rng", "optimizer",
    "optim_slots", "eval_pending", "loss_scale_good", "skipped_steps", "threads", "last_train_loss",
    "best_val_accuracy", "last_val_accuracy", "last_val_loss", "loss_window_sum", "loss_window_steps", "time_s",
    "spec", "record_crc32c"};

int main(void) {
    gr_h5_init();
    gr_graph g;
    gr_rec_graph(&g);
    float *params = calloc((size_t)g.n_params + 1, sizeof(float)), *optim = calloc((size_t)g.n_trainable + 1, 4);
    for (int64_t i = 0; i < g.n_params; i++) params[i] = 0.01f * (float)i;
    gr_ckpt_state st = {&g, params, optim};
    gr_ckpt_header h, r;
    gr_rec_header(&h);
    gr_error err = {0};
    CHECK(system("rm -rf " DIR " && mkdir -p " DIR) == 0);
    CHECK(gr_ckpt_save(DIR, &h, &st, 3, &err) == GR_OK);
    char good[512], bad[512];
    snprintf(good, sizeof good, "%s/step-000000006.h5", DIR);
    snprintf(bad, sizeof bad, "%s/flipped.h5", DIR);
    CHECK(gr_ckpt_load(good, &r, &st, &err) == GR_OK);
    CHECK(r.step == 6 && r.best_val_accuracy == 0.7 && r.threads == 2 && r.spec && !strcmp(r.spec, h.spec));
    free(r.spec);
    CHECK(gr_ckpt_intact(good));

    int tried = 0, missed = 0, strings = 0;
    for (size_t k = 0; k < sizeof gr_rec_names / sizeof gr_rec_names[0]; k++) {
        size_t nbits = 1;
        for (size_t bit = 0; bit < nbits; bit++) {
            char cmd[1200];
            snprintf(cmd, sizeof cmd, "cp %s %s", good, bad);
            CHECK(system(cmd) == 0);
            if (!gr_rec_flip(bad, gr_rec_names[k], bit, &nbits)) { /* a variable-length string */
                strings++;
                break;
            }
            tried++;
            r.spec = NULL;
            gr_status s = gr_ckpt_load(bad, &r, &st, &err);
            if (s == GR_OK) {
                free(r.spec);
                if (missed++ < 5) CHECK_MSG(false, "attribute %s, bit %zu flipped: loaded", gr_rec_names[k], bit);
            } else if (bit == 0 && k == 15) {
                CHECK_MSG(strstr(err.msg, "fails its crc32c") != NULL, "best_val_accuracy flipped: %s", err.msg);
            }
            CHECK_MSG(!gr_ckpt_intact(bad) || s == GR_OK, "attribute %s bit %zu: intact", gr_rec_names[k], bit);
        }
    }
    CHECK_MSG(missed == 0 && tried > 1000, "%d single-bit flips tried, %d loaded", tried, missed);
    printf("%d single-bit flips of the record, every one refused (%d variable-length strings flipped whole "
           "below)\n", tried, strings);

    /* variable-length strings (the spec, precision...): one changed character */
    CHECK(system("cp " DIR "/step-000000006.h5 " DIR "/flipped.h5") == 0);
    hid_t f = H5Fopen(bad, H5F_ACC_RDWR, H5P_DEFAULT);
    CHECK(f >= 0);
    CHECK(H5Adelete(f, "spec") >= 0);
    hid_t t = H5Tcopy(H5T_C_S1), sp = H5Screate(H5S_SCALAR);
    H5Tset_size(t, H5T_VARIABLE);
    const char *other = "name: rec\nseed: 13\n";
    hid_t a = H5Acreate2(f, "spec", t, sp, H5P_DEFAULT, H5P_DEFAULT);
    CHECK(a >= 0 && H5Awrite(a, t, &other) >= 0);
    H5Aclose(a), H5Sclose(sp), H5Tclose(t), H5Fclose(f);
    CHECK(gr_ckpt_load(bad, &r, &st, &err) == GR_ERR_CKPT);
    CHECK_MSG(strstr(err.msg, "fails its crc32c") != NULL, "spec changed: %s", err.msg);

    /* version 1 (before the record's checksum): no record_crc32c, still read */
    CHECK(system("cp " DIR "/step-000000006.h5 " DIR "/v1.h5") == 0);
    f = H5Fopen(DIR "/v1.h5", H5F_ACC_RDWR, H5P_DEFAULT);
    CHECK(f >= 0 && H5Adelete(f, "record_crc32c") >= 0);
    int64_t one = 1;
    a = H5Aopen(f, "version", H5P_DEFAULT);
    CHECK(a >= 0 && H5Awrite(a, H5T_NATIVE_INT64, &one) >= 0);
    H5Aclose(a), H5Fclose(f);
    CHECK_MSG(gr_ckpt_load(DIR "/v1.h5", &r, &st, &err) == GR_OK, "a version-1 file: %s", err.msg);
    free(r.spec);
    /* version 2 without it: damaged */
    CHECK(system("cp " DIR "/step-000000006.h5 " DIR "/nocrc.h5") == 0);
    f = H5Fopen(DIR "/nocrc.h5", H5F_ACC_RDWR, H5P_DEFAULT);
    CHECK(f >= 0 && H5Adelete(f, "record_crc32c") >= 0);
    H5Fclose(f);
    CHECK(gr_ckpt_load(DIR "/nocrc.h5", &r, &st, &err) == GR_ERR_CKPT);
    CHECK_MSG(strstr(err.msg, "record_crc32c") != NULL, "%s", err.msg);

    free(params);
    free(optim);
    gr_graph_free(&g);
    gr_cfg_free(layers);
    return gr_test_report();
}
