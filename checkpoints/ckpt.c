/* ckpt.c — checkpoint files, their commit and their verification (ckpt.h). */
#include "ckpt.h"
#include "tensorio.h"
#include "weights.h"
#include "../common/crc32c.h"
#include "../common/tmpfile.h"
#include "../dataio/h5util.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CK_CHECK(expr, ...) do { \
    if ((expr) < 0) { st = gr_h5_fail(err, GR_ERR_CKPT, __VA_ARGS__); goto fail; } \
} while (0)

#define GR_CKPT_SPEC_MAX ((size_t)16 << 20)

static const char *const gr_ckpt_slots_sgd[] = {"momentum_buffer"};
static const char *const gr_ckpt_slots_adamw[] = {"exp_avg", "exp_avg_sq"};

static const char *gr_ckpt_slot_name(const char *optimizer, int k) {
    return strcmp(optimizer, "adamw") == 0 ? gr_ckpt_slots_adamw[k] : gr_ckpt_slots_sgd[k];
}

void gr_ckpt_filename(int64_t step, char *buf, size_t n) { snprintf(buf, n, "step-%09lld.h5", (long long)step); }

/* step of "step-%09d.h5", or -1 */
static int64_t gr_ckpt_parse_name(const char *name) {
    size_t len = strlen(name);
    if (len < 12 || strncmp(name, "step-", 5) != 0 || strcmp(name + len - 3, ".h5") != 0) return -1;
    int64_t v = 0;
    for (size_t i = 5; i < len - 3; i++) {
        if (name[i] < '0' || name[i] > '9' || v > (INT64_MAX - 9) / 10) return -1;
        v = 10 * v + (name[i] - '0');
    }
    return v;
}

/* ---- attributes ---- */

/* An attribute of n values (0: a scalar) stored as ftype, given as mtype. */
static herr_t gr_attr_put(hid_t obj, const char *name, hid_t ftype, hid_t mtype, const void *v, hsize_t n) {
    hid_t sp = n ? H5Screate_simple(1, &n, NULL) : H5Screate(H5S_SCALAR);
    hid_t a = sp < 0 ? -1 : H5Acreate2(obj, name, ftype, sp, H5P_DEFAULT, H5P_DEFAULT);
    herr_t r = a < 0 ? -1 : H5Awrite(a, mtype, v);
    if (a >= 0) H5Aclose(a);
    if (sp >= 0) H5Sclose(sp);
    return r;
}

static herr_t gr_attr_i64(hid_t obj, const char *name, int64_t v) {
    return gr_attr_put(obj, name, H5T_STD_I64LE, H5T_NATIVE_INT64, &v, 0);
}
static herr_t gr_attr_f64(hid_t obj, const char *name, double v) {
    return gr_attr_put(obj, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, &v, 0);
}
static herr_t gr_attr_u32(hid_t obj, const char *name, uint32_t v) {
    return gr_attr_put(obj, name, H5T_STD_U32LE, H5T_NATIVE_UINT32, &v, 0);
}
static herr_t gr_attr_u64s(hid_t obj, const char *name, const uint64_t *v, hsize_t n) {
    return gr_attr_put(obj, name, H5T_STD_U64LE, H5T_NATIVE_UINT64, v, n);
}

static herr_t gr_attr_str(hid_t obj, const char *name, const char *s) {
    hid_t t = H5Tcopy(H5T_C_S1);
    if (t < 0) return -1;
    herr_t r = H5Tset_size(t, strlen(s) + 1);
    hid_t sp = r < 0 ? -1 : H5Screate(H5S_SCALAR);
    hid_t a = sp < 0 ? -1 : H5Acreate2(obj, name, t, sp, H5P_DEFAULT, H5P_DEFAULT);
    r = a < 0 ? -1 : H5Awrite(a, t, s);
    if (a >= 0) H5Aclose(a);
    if (sp >= 0) H5Sclose(sp);
    H5Tclose(t);
    return r;
}

/* Reads a scalar numeric attribute, checking [lo, hi]. */
static gr_status gr_read_i64(hid_t f, const char *path, const char *name, int64_t lo, int64_t hi, int64_t *out,
                             gr_error *err) {
    htri_t ex = H5Aexists(f, name);
    if (ex <= 0) return gr_error_set(err, GR_ERR_CKPT, "%s: attribute %s: missing", path, name);
    hid_t a = H5Aopen(f, name, H5P_DEFAULT), sp = a < 0 ? -1 : H5Aget_space(a);
    int64_t v = 0;
    bool ok = sp >= 0 && H5Sget_simple_extent_npoints(sp) == 1 && H5Aread(a, H5T_NATIVE_INT64, &v) >= 0;
    if (sp >= 0) H5Sclose(sp);
    if (a >= 0) H5Aclose(a);
    if (!ok) return gr_h5_fail(err, GR_ERR_CKPT, "%s: attribute %s: unreadable", path, name);
    if (v < lo || v > hi)
        return gr_error_set(err, GR_ERR_CKPT, "%s: attribute %s: %lld is outside [%lld, %lld]", path, name,
                            (long long)v, (long long)lo, (long long)hi);
    *out = v;
    return GR_OK;
}

/* Reads a string attribute (fixed or variable length) of at most max bytes. */
static gr_status gr_read_str(hid_t f, const char *path, const char *name, size_t max, char **out, gr_error *err) {
    *out = NULL;
    htri_t ex = H5Aexists(f, name);
    if (ex <= 0) return gr_error_set(err, GR_ERR_CKPT, "%s: attribute %s: missing", path, name);
    gr_status st = GR_OK;
    hid_t a = H5Aopen(f, name, H5P_DEFAULT), t = -1, mt = -1;
    CK_CHECK(a, "%s: attribute %s: unreadable", path, name);
    CK_CHECK(t = H5Aget_type(a), "%s: attribute %s: unreadable", path, name);
    if (H5Tget_class(t) != H5T_STRING) {
        st = gr_error_set(err, GR_ERR_CKPT, "%s: attribute %s: not a string", path, name);
        goto fail;
    }
    if (gr_tio_attr_count(a) != 1) { /* H5Aread writes every string: more would overrun *out */
        st = gr_error_set(err, GR_ERR_CKPT, "%s: attribute %s: not a single string", path, name);
        goto fail;
    }
    if (H5Tis_variable_str(t) > 0) {
        char *s = NULL;
        CK_CHECK(mt = H5Tcopy(H5T_C_S1), "%s: attribute %s: unreadable", path, name);
        CK_CHECK(H5Tset_size(mt, H5T_VARIABLE), "%s: attribute %s: unreadable", path, name);
        CK_CHECK(H5Aread(a, mt, &s), "%s: attribute %s: unreadable", path, name);
        size_t n = s ? strlen(s) : 0;
        if (n > max) {
            H5free_memory(s);
            st = gr_error_set(err, GR_ERR_CKPT, "%s: attribute %s: %zu bytes, over the limit %zu", path, name, n, max);
            goto fail;
        }
        *out = gr_xstrdup(s ? s : "");
        H5free_memory(s);
    } else {
        size_t n = H5Tget_size(t);
        if (n == 0 || n > max) {
            st = gr_error_set(err, GR_ERR_CKPT, "%s: attribute %s: %zu bytes, outside (0, %zu]", path, name, n, max);
            goto fail;
        }
        char *s = gr_xcalloc(n + 1, 1);
        if (H5Aread(a, t, s) < 0) {
            free(s);
            st = gr_h5_fail(err, GR_ERR_CKPT, "%s: attribute %s: unreadable", path, name);
            goto fail;
        }
        *out = s;
    }
fail:
    if (mt >= 0) H5Tclose(mt);
    if (t >= 0) H5Tclose(t);
    if (a >= 0) H5Aclose(a);
    return st;
}

/* ---- the run record's checksum ---- */

/* crc32c of every root attribute but format and the checksum itself, in a
 * fixed text form (doubles as %a: exact), then the spec: what a resume adopts
 * without another check (the position, the loss scale, the record). */
static uint32_t gr_ckpt_record_crc(const gr_ckpt_header *h) {
    char buf[1024];
    int n = snprintf(buf, sizeof buf,
                     "version=%d step=%lld epoch=%lld sample_in_epoch=%lld world_size=%lld precision=%s "
                     "loss_scale=%a loss_scale_good=%lld skipped_steps=%lld threads=%lld last_train_loss=%a "
                     "best_val_accuracy=%a last_val_accuracy=%a last_val_loss=%a loss_window_sum=%a "
                     "loss_window_steps=%lld time_s=%a rng=%llu,%llu optimizer=%s optim_slots=%d eval_pending=%lld\n",
                     GR_CKPT_VERSION, (long long)h->step, (long long)h->epoch, (long long)h->sample_in_epoch,
                     (long long)h->world_size, h->precision, h->loss_scale, (long long)h->loss_scale_good,
                     (long long)h->skipped_steps, (long long)h->threads, h->last_train_loss, h->best_val_accuracy,
                     h->last_val_accuracy, h->last_val_loss, h->loss_window_sum, (long long)h->loss_window_steps,
                     h->time_s, (unsigned long long)h->rng[0], (unsigned long long)h->rng[1], h->optimizer,
                     h->optim_slots, (long long)h->eval_pending);
    GR_ASSERT(n > 0 && (size_t)n < sizeof buf);
    uint32_t c = gr_crc32c(0, buf, (size_t)n);
    return h->spec ? gr_crc32c(c, h->spec, strlen(h->spec)) : c;
}

static gr_status gr_ckpt_check_record(hid_t f, const char *path, const gr_ckpt_header *h, int64_t version,
                                      gr_error *err) {
    if (version < 2) return GR_OK; /* written before the record had a checksum */
    uint32_t want = 0;
    hid_t a = H5Aexists(f, "record_crc32c") > 0 ? H5Aopen(f, "record_crc32c", H5P_DEFAULT) : -1;
    const bool ok = a >= 0 && gr_tio_attr_count(a) == 1 && H5Aread(a, H5T_NATIVE_UINT32, &want) >= 0;
    if (a >= 0) H5Aclose(a);
    if (!ok) return gr_h5_fail(err, GR_ERR_CKPT, "%s: attribute record_crc32c: missing or unreadable", path);
    const uint32_t got = gr_ckpt_record_crc(h);
    if (got != want)
        return gr_error_set(err, GR_ERR_CKPT, "%s: the run record (the root attributes: step, position, loss scale, "
                            "accuracies, spec...) fails its crc32c (stored 0x%08x, computed 0x%08x): damaged",
                            path, want, got);
    return GR_OK;
}

/* ---- write ---- */

static gr_status gr_ckpt_write_file(const gr_tmpfile *tf, const gr_ckpt_header *h, const gr_ckpt_state *s,
                                    gr_error *err) {
    gr_status st = GR_OK;
    const gr_graph *g = s->g;
    const char *tmp = tf->tmp; /* the temporary created exclusively, opened again as itself */
    char reopen[64];
    hid_t f = H5Fcreate(gr_tmpfile_reopen_path(tf, reopen, sizeof reopen), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    CK_CHECK(f, "%s: cannot create", tmp);
    const uint64_t rng[2] = {h->rng[0], h->rng[1]};
    CK_CHECK(gr_attr_str(f, "format", GR_CKPT_FORMAT), "%s: cannot write the header", tmp);
    CK_CHECK(gr_attr_i64(f, "version", GR_CKPT_VERSION), "%s: cannot write the header", tmp);
    CK_CHECK(gr_attr_i64(f, "step", h->step), "%s: cannot write the header", tmp);
    CK_CHECK(gr_attr_i64(f, "epoch", h->epoch), "%s: cannot write the header", tmp);
    CK_CHECK(gr_attr_i64(f, "sample_in_epoch", h->sample_in_epoch), "%s: cannot write the header", tmp);
    CK_CHECK(gr_attr_i64(f, "world_size", h->world_size), "%s: cannot write the header", tmp);
    CK_CHECK(gr_attr_str(f, "precision", h->precision), "%s: cannot write the header", tmp);
    CK_CHECK(gr_attr_f64(f, "loss_scale", h->loss_scale), "%s: cannot write the header", tmp);
    CK_CHECK(gr_attr_u64s(f, "rng", rng, 2), "%s: cannot write the header", tmp);
    CK_CHECK(gr_attr_str(f, "optimizer", h->optimizer), "%s: cannot write the header", tmp);
    CK_CHECK(gr_attr_i64(f, "optim_slots", h->optim_slots), "%s: cannot write the header", tmp);
    CK_CHECK(gr_attr_i64(f, "eval_pending", h->eval_pending), "%s: cannot write the header", tmp);
    CK_CHECK(gr_attr_i64(f, "loss_scale_good", h->loss_scale_good), "%s: cannot write the header", tmp);
    CK_CHECK(gr_attr_i64(f, "skipped_steps", h->skipped_steps), "%s: cannot write the header", tmp);
    CK_CHECK(gr_attr_i64(f, "threads", h->threads), "%s: cannot write the header", tmp);
    CK_CHECK(gr_attr_f64(f, "last_train_loss", h->last_train_loss), "%s: cannot write the header", tmp);
    CK_CHECK(gr_attr_f64(f, "best_val_accuracy", h->best_val_accuracy), "%s: cannot write the header", tmp);
    CK_CHECK(gr_attr_f64(f, "last_val_accuracy", h->last_val_accuracy), "%s: cannot write the header", tmp);
    CK_CHECK(gr_attr_f64(f, "last_val_loss", h->last_val_loss), "%s: cannot write the header", tmp);
    CK_CHECK(gr_attr_f64(f, "loss_window_sum", h->loss_window_sum), "%s: cannot write the header", tmp);
    CK_CHECK(gr_attr_i64(f, "loss_window_steps", h->loss_window_steps), "%s: cannot write the header", tmp);
    CK_CHECK(gr_attr_f64(f, "time_s", h->time_s), "%s: cannot write the header", tmp);
    CK_CHECK(gr_attr_str(f, "spec", h->spec ? h->spec : ""), "%s: cannot write the header", tmp);
    CK_CHECK(gr_attr_u32(f, "record_crc32c", gr_ckpt_record_crc(h)), "%s: cannot write the header", tmp);
    if ((st = gr_weights_put(f, tmp, g, s->params, err))) goto fail;
    for (int k = 0; k < h->optim_slots; k++)
        for (int i = 0; i < g->n_tensors; i++) {
            const gr_tensor *t = &g->tensors[i];
            if (t->kind != GR_TK_PARAM) continue;
            char name[600];
            snprintf(name, sizeof name, "/optim/%s/%s/%s", g->layers[t->layer].name, t->pname,
                     gr_ckpt_slot_name(h->optimizer, k));
            const float *data = s->optim + (size_t)k * (size_t)g->n_trainable + (size_t)t->param_offset;
            if ((st = gr_tio_write(f, tmp, name, t->ndim, t->shape, data, err))) goto fail;
        }
fail:
    if (f >= 0 && H5Fclose(f) < 0 && !st) st = gr_h5_fail(err, GR_ERR_CKPT, "%s: cannot close (disk full?)", tmp);
    return st;
}

/* Committed checkpoints of dir, by step descending. */
typedef struct gr_ckpt_list {
    int64_t *steps;
    int n;
} gr_ckpt_list;

static int gr_cmp_desc(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x < y) - (x > y);
}

static gr_ckpt_list gr_ckpt_scan(const char *dir, bool report_tmp) {
    gr_ckpt_list l = {NULL, 0};
    DIR *d = opendir(dir);
    if (!d) return l;
    int cap = 0;
    for (struct dirent *e; (e = readdir(d));) {
        size_t len = strlen(e->d_name);
        if (report_tmp && len > 4 && strcmp(e->d_name + len - 4, ".tmp") == 0)
            fprintf(stderr, "gpurun: %s/%s: an unfinished write (skipped)\n", dir, e->d_name);
        int64_t s = gr_ckpt_parse_name(e->d_name);
        if (s < 0) continue;
        GR_GROW(l.steps, cap, l.n + 1);
        l.steps[l.n++] = s;
    }
    closedir(d);
    if (l.n) qsort(l.steps, (size_t)l.n, sizeof *l.steps, gr_cmp_desc);
    return l;
}

int gr_ckpt_committed(const char *dir, int64_t *steps, int max) {
    gr_ckpt_list l = gr_ckpt_scan(dir, false);
    for (int i = 0; i < l.n && i < max; i++) steps[i] = l.steps[i];
    free(l.steps);
    return l.n;
}

/* Unfinished writes a killed or stopped save left behind: step-*.h5.*.tmp
 * and LATEST.*.tmp (common/tmpfile.h), and the step-*.h5.tmp of earlier
 * versions; one save runs at a time, so after a commit none is anyone's. */
static void gr_ckpt_remove_stale_tmp(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return;
    for (struct dirent *e; (e = readdir(d));) {
        size_t len = strlen(e->d_name);
        const bool step = strncmp(e->d_name, "step-", 5) == 0 && strstr(e->d_name, ".h5.") != NULL;
        const bool latest = strncmp(e->d_name, "LATEST.", 7) == 0;
        if (!(step || latest) || len < 4 || strcmp(e->d_name + len - 4, ".tmp") != 0) continue;
        char p[GR_PATH_MAX + 300];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        if (unlink(p) != 0 && errno != ENOENT)
            fprintf(stderr, "gpurun: %s: cannot delete an unfinished write: %s\n", p, strerror(errno));
    }
    closedir(d);
}

gr_status gr_ckpt_save(const char *dir, const gr_ckpt_header *h, const gr_ckpt_state *s, int keep, gr_error *err) {
    gr_h5_init();
    char name[64], path[GR_PATH_MAX + 80], latest[GR_PATH_MAX + 16];
    gr_ckpt_filename(h->step, name, sizeof name);
    snprintf(path, sizeof path, "%s/%s", dir, name);
    gr_tmpfile tf;
    gr_status st = gr_tmpfile_create(&tf, path, GR_ERR_CKPT, err);
    if (!st) st = gr_ckpt_write_file(&tf, h, s, err);
    if (!st) st = gr_tmpfile_commit(&tf, true, GR_ERR_CKPT, err);
    gr_tmpfile_abort(&tf); /* removes the temporary after a failure */
    if (st) return st;
    char line[80];
    snprintf(line, sizeof line, "%s\n", name);
    snprintf(latest, sizeof latest, "%s/LATEST", dir);
    gr_error le;
    if (gr_tio_write_text(latest, line, &le)) /* the checkpoint is committed all the same */
        fprintf(stderr, "gpurun: %s is committed, but LATEST could not be updated (%s); --resume auto finds "
                "checkpoints without it\n", path, le.msg);
    gr_ckpt_remove_stale_tmp(dir);
    /* keep the newest `keep` up to this step; later ones belong to a run
     * this one has replaced (it resumed from before them) */
    gr_ckpt_list l = gr_ckpt_scan(dir, false);
    int kept = 0;
    for (int i = 0; i < l.n; i++) {
        if (l.steps[i] <= h->step && kept++ < keep) continue;
        char old[64], op[GR_PATH_MAX + 80];
        gr_ckpt_filename(l.steps[i], old, sizeof old);
        snprintf(op, sizeof op, "%s/%s", dir, old);
        if (unlink(op) != 0 && errno != ENOENT)
            fprintf(stderr, "gpurun: %s: cannot delete an old checkpoint: %s\n", op, strerror(errno));
    }
    free(l.steps);
    return GR_OK;
}

/* ---- read ---- */

/* A scalar double attribute that older checkpoints lack: *v keeps its value when absent. */
static gr_status gr_read_opt_f64(hid_t f, const char *path, const char *name, double *v, gr_error *err) {
    if (H5Aexists(f, name) <= 0) return GR_OK;
    hid_t a = H5Aopen(f, name, H5P_DEFAULT), sp = a < 0 ? -1 : H5Aget_space(a);
    bool ok = sp >= 0 && H5Sget_simple_extent_npoints(sp) == 1 && H5Aread(a, H5T_NATIVE_DOUBLE, v) >= 0;
    if (sp >= 0) H5Sclose(sp);
    if (a >= 0) H5Aclose(a);
    return ok ? GR_OK : gr_h5_fail(err, GR_ERR_CKPT, "%s: attribute %s: not a number", path, name);
}

/* The root attributes into h (spec allocated; freed on failure), each in
 * range, and from version 2 on the run record's crc32c (gr_ckpt_record_crc):
 * one flipped bit anywhere in the record is a damaged file. */
static gr_status gr_ckpt_read_header(hid_t f, const char *path, gr_ckpt_header *h, gr_error *err) {
    memset(h, 0, sizeof *h);
    char *str = NULL;
    int64_t v = 0, version = 0;
    gr_status st = gr_read_str(f, path, "format", 64, &str, err);
    if (!st && strcmp(str, GR_CKPT_FORMAT) != 0)
        st = gr_error_set(err, GR_ERR_CKPT, "%s: attribute format: \"%s\", expected \"%s\" (not a gpurun "
                          "checkpoint)", path, str, GR_CKPT_FORMAT);
    free(str);
    str = NULL;
    if (!st) st = gr_read_i64(f, path, "version", 1, GR_CKPT_VERSION, &version, err);
    if (!st) st = gr_read_i64(f, path, "step", 0, (int64_t)1 << 50, &h->step, err);
    if (!st) st = gr_read_i64(f, path, "epoch", 0, (int64_t)1 << 50, &h->epoch, err);
    if (!st) st = gr_read_i64(f, path, "sample_in_epoch", 0, (int64_t)1 << 50, &h->sample_in_epoch, err);
    if (!st) st = gr_read_i64(f, path, "world_size", 1, 1 << 20, &h->world_size, err);
    if (!st) st = gr_read_i64(f, path, "optim_slots", 0, 2, &v, err);
    if (!st) h->optim_slots = (int)v;
    if (!st && H5Aexists(f, "eval_pending") > 0) st = gr_read_i64(f, path, "eval_pending", 0, 1, &h->eval_pending, err);
    if (!st && H5Aexists(f, "loss_scale_good") > 0)
        st = gr_read_i64(f, path, "loss_scale_good", 0, INT64_MAX, &h->loss_scale_good, err);
    if (!st && H5Aexists(f, "skipped_steps") > 0)
        st = gr_read_i64(f, path, "skipped_steps", 0, h->step, &h->skipped_steps, err);
    if (!st && H5Aexists(f, "threads") > 0) st = gr_read_i64(f, path, "threads", 0, 1024, &h->threads, err);
    if (!st && H5Aexists(f, "loss_window_steps") > 0)
        st = gr_read_i64(f, path, "loss_window_steps", 0, h->step, &h->loss_window_steps, err);
    h->last_train_loss = h->best_val_accuracy = h->last_val_accuracy = h->last_val_loss = NAN;
    if (!st) st = gr_read_opt_f64(f, path, "last_train_loss", &h->last_train_loss, err);
    if (!st) st = gr_read_opt_f64(f, path, "best_val_accuracy", &h->best_val_accuracy, err);
    if (!st) st = gr_read_opt_f64(f, path, "last_val_accuracy", &h->last_val_accuracy, err);
    if (!st) st = gr_read_opt_f64(f, path, "last_val_loss", &h->last_val_loss, err);
    if (!st) st = gr_read_opt_f64(f, path, "loss_window_sum", &h->loss_window_sum, err);
    if (!st) st = gr_read_opt_f64(f, path, "time_s", &h->time_s, err);
    if (!st && h->loss_window_steps > 0 && !isfinite(h->loss_window_sum))
        st = gr_error_set(err, GR_ERR_CKPT, "%s: attribute loss_window_sum: %g over %lld steps", path,
                          h->loss_window_sum, (long long)h->loss_window_steps);
    if (!st && (st = gr_read_str(f, path, "optimizer", 15, &str, err)) == GR_OK) {
        snprintf(h->optimizer, sizeof h->optimizer, "%s", str);
        free(str);
        str = NULL;
    }
    if (!st && (st = gr_read_str(f, path, "precision", 15, &str, err)) == GR_OK) {
        snprintf(h->precision, sizeof h->precision, "%s", str);
        free(str);
        str = NULL;
    }
    if (!st) st = gr_read_str(f, path, "spec", GR_CKPT_SPEC_MAX, &h->spec, err);
    if (!st) {
        hid_t a = H5Aopen(f, "rng", H5P_DEFAULT), sp = a < 0 ? -1 : H5Aget_space(a);
        bool ok = sp >= 0 && H5Sget_simple_extent_npoints(sp) == 2 && H5Aread(a, H5T_NATIVE_UINT64, h->rng) >= 0;
        if (sp >= 0) H5Sclose(sp);
        if (a >= 0) H5Aclose(a);
        if (!ok) st = gr_h5_fail(err, GR_ERR_CKPT, "%s: attribute rng: missing or not 2 words", path);
    }
    if (!st) {
        hid_t a = H5Aopen(f, "loss_scale", H5P_DEFAULT);
        const bool one = a >= 0 && gr_tio_attr_count(a) == 1; /* more values would overrun loss_scale */
        bool ok = one && H5Aread(a, H5T_NATIVE_DOUBLE, &h->loss_scale) >= 0;
        if (a >= 0) H5Aclose(a);
        if (a >= 0 && !one) st = gr_error_set(err, GR_ERR_CKPT, "%s: attribute loss_scale: not a single number", path);
        else if (!ok) st = gr_h5_fail(err, GR_ERR_CKPT, "%s: attribute loss_scale: missing or unreadable", path);
        else if (!(h->loss_scale > 0.0) || !isfinite(h->loss_scale))
            st = gr_error_set(err, GR_ERR_CKPT, "%s: attribute loss_scale: %g is not a positive finite number", path,
                              h->loss_scale);
    }
    if (!st) st = gr_ckpt_check_record(f, path, h, version, err);
    if (st) {
        free(h->spec);
        h->spec = NULL;
    }
    return st;
}

gr_status gr_ckpt_load(const char *path, gr_ckpt_header *h, const gr_ckpt_state *s, gr_error *err) {
    gr_h5_init();
    memset(h, 0, sizeof *h);
    gr_status rs = gr_check_regular(path, "the checkpoint", GR_ERR_CKPT, err); /* a FIFO would block */
    if (rs) return rs;
    if (access(path, R_OK) != 0) return gr_error_set(err, GR_ERR_CKPT, "%s: %s", path, strerror(errno));
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0) return gr_h5_fail(err, GR_ERR_CKPT, "%s: not an HDF5 file, or truncated or corrupt", path);
    const gr_graph *g = s->g;
    gr_status st = gr_ckpt_read_header(f, path, h, err);
    if (!st) st = gr_weights_get(f, path, g, s->params, true, err);
    for (int k = 0; !st && k < h->optim_slots; k++)
        for (int i = 0; !st && i < g->n_tensors; i++) {
            const gr_tensor *t = &g->tensors[i];
            if (t->kind != GR_TK_PARAM) continue;
            char name[600];
            snprintf(name, sizeof name, "/optim/%s/%s/%s", g->layers[t->layer].name, t->pname,
                     gr_ckpt_slot_name(h->optimizer, k));
            float *dst = s->optim + (size_t)k * (size_t)g->n_trainable + (size_t)t->param_offset;
            st = gr_tio_read(f, path, name, t->ndim, t->shape, dst, true, err);
        }
    H5Fclose(f);
    if (st) {
        free(h->spec);
        h->spec = NULL;
    }
    return st;
}

/* Every dataset of a gpurun checkpoint file against its crc32c. */
typedef struct gr_intact_walk {
    bool ok;
    int n;
} gr_intact_walk;

static herr_t gr_intact_visit(hid_t obj, const char *name, const H5O_info_t *info, void *data) {
    gr_intact_walk *w = data;
    if (info->type != H5O_TYPE_DATASET) return 0;
    hid_t ds = H5Dopen2(obj, name, H5P_DEFAULT), sp = ds < 0 ? -1 : H5Dget_space(ds);
    hssize_t n = sp < 0 ? -1 : H5Sget_simple_extent_npoints(sp);
    float *buf = n >= 0 ? malloc((size_t)n * sizeof(float) + 1) : NULL;
    uint32_t want = 0;
    bool ok = buf && H5Dread(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) >= 0 &&
              H5Aexists(ds, "crc32c") > 0;
    if (ok) {
        hid_t a = H5Aopen(ds, "crc32c", H5P_DEFAULT);
        ok = a >= 0 && gr_tio_attr_count(a) == 1 && H5Aread(a, H5T_NATIVE_UINT32, &want) >= 0;
        if (a >= 0) H5Aclose(a);
    }
    ok = ok && gr_crc32c(0, buf, (size_t)n * sizeof(float)) == want;
    free(buf);
    if (sp >= 0) H5Sclose(sp);
    if (ds >= 0) H5Dclose(ds);
    w->n++;
    if (!ok) w->ok = false;
    return ok ? 0 : 1; /* stop at the first bad one */
}

bool gr_ckpt_intact(const char *path) {
    gr_h5_init();
    if (gr_check_regular(path, "the checkpoint", GR_ERR_CKPT, NULL)) return false;
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0) return false;
    gr_ckpt_header h;
    gr_error e;
    gr_intact_walk w = {.ok = true};
    /* the header in range and its record's crc32c, then every dataset's */
    const bool head = gr_ckpt_read_header(f, path, &h, &e) == GR_OK;
    const bool ok = head && H5Ovisit2(f, H5_INDEX_NAME, H5_ITER_NATIVE, gr_intact_visit, &w, H5O_INFO_BASIC) >= 0 &&
                    w.ok && w.n > 0;
    if (head) free(h.spec);
    H5Fclose(f);
    return ok;
}

static bool gr_ckpt_peek_file(const char *path, gr_ckpt_peek_fn keep, void *ctx, gr_ckpt_header *h) {
    if (gr_check_regular(path, "the checkpoint", GR_ERR_CKPT, NULL)) return false;
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0) return false;
    gr_error e;
    bool ok = gr_ckpt_read_header(f, path, h, &e) == GR_OK;
    H5Fclose(f);
    if (ok && keep) ok = keep(h, ctx);
    free(h->spec);
    h->spec = NULL;
    return ok;
}

bool gr_ckpt_peek(const char *dir, const char *path, gr_ckpt_peek_fn keep, void *ctx, gr_ckpt_header *h) {
    gr_h5_init();
    if (!dir) return gr_ckpt_peek_file(path, NULL, NULL, h);
    gr_ckpt_list l = gr_ckpt_scan(dir, false);
    bool ok = false;
    for (int i = 0; i < l.n && !ok; i++) {
        char name[64], p[GR_PATH_MAX + 100];
        gr_ckpt_filename(l.steps[i], name, sizeof name);
        snprintf(p, sizeof p, "%s/%s", dir, name);
        ok = gr_ckpt_peek_file(p, keep, ctx, h);
    }
    free(l.steps);
    return ok;
}

gr_status gr_ckpt_resume_auto(const char *dir, gr_ckpt_fit_fn fit, void *fit_ctx, gr_ckpt_header *h,
                              const gr_ckpt_state *s, bool *found, char *path, size_t path_n, gr_error *err) {
    *found = false;
    char latest[GR_PATH_MAX + 16];
    snprintf(latest, sizeof latest, "%s/LATEST", dir);
    /* a FIFO or a device there would block or never end: only a regular LATEST is read */
    FILE *lf = gr_check_regular(latest, "LATEST", GR_ERR_CKPT, NULL) == GR_OK ? fopen(latest, "r") : NULL;
    if (!lf && access(latest, F_OK) == 0)
        fprintf(stderr, "gpurun: %s is not a regular file; looking at the checkpoint files themselves\n", latest);
    if (lf) {
        char line[256] = "";
        bool got = fgets(line, sizeof line, lf) != NULL;
        fclose(lf);
        line[strcspn(line, "\r\n")] = '\0';
        char lp[GR_PATH_MAX + 300];
        snprintf(lp, sizeof lp, "%s/%s", dir, line);
        if (!got || !line[0])
            fprintf(stderr, "gpurun: %s is empty; looking at the checkpoint files themselves\n", latest);
        else if (gr_ckpt_parse_name(line) < 0 || access(lp, F_OK) != 0)
            fprintf(stderr, "gpurun: %s names '%s', which is not there; looking at the checkpoint files "
                    "themselves\n", latest, line);
    }
    gr_ckpt_list l = gr_ckpt_scan(dir, true);
    int misfits = 0;
    char first[GR_ERROR_MSG_MAX] = "", newest[GR_ERROR_MSG_MAX] = "";
    for (int i = 0; i < l.n && !*found; i++) {
        char name[64];
        gr_ckpt_filename(l.steps[i], name, sizeof name);
        snprintf(path, path_n, "%s/%s", dir, name);
        gr_error e;
        if (gr_ckpt_load(path, h, s, &e) == GR_OK) {
            if (!fit || fit(path, h, fit_ctx, &e) == GR_OK) {
                *found = true;
                break;
            }
            free(h->spec); /* verified, but not of this job */
            h->spec = NULL;
            fprintf(stderr, "gpurun: skipping %s: %s\n", path, e.msg);
            if (misfits++ == 0) snprintf(first, sizeof first, "%s", e.msg);
            if (i == 0) snprintf(newest, sizeof newest, "%s", e.msg);
            continue;
        }
        bool intact = gr_ckpt_intact(path);
        fprintf(stderr, "gpurun: skipping %s: %s%s\n", path, e.msg,
                intact ? " (the file itself is intact: written for another spec)" : "");
        if (intact && misfits++ == 0) snprintf(first, sizeof first, "%s", e.msg);
        if (i == 0) snprintf(newest, sizeof newest, "%s", e.msg);
    }
    free(l.steps);
    if (!*found && misfits)
        return gr_error_set(err, GR_ERR_CKPT, "--resume auto: %d checkpoint%s in %s %s intact but none fits this "
                            "job (the newest: %s); nothing was changed: go back to the spec they were written for, "
                            "or move them away (or pass another --run-dir) to start over", misfits,
                            misfits == 1 ? "" : "s", dir, misfits == 1 ? "is" : "are", first);
    if (!*found && l.n > 0) /* committed checkpoints, all damaged: starting over would throw the run away */
        return gr_error_set(err, GR_ERR_CKPT, "--resume auto: %d checkpoint%s in %s, none verifies (the newest: %s); "
                            "nothing was changed: restore one from a backup, or move them away (or pass another "
                            "--run-dir) to start over", l.n, l.n == 1 ? "" : "s", dir, newest);
    return GR_OK;
}
