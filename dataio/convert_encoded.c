/* convert_encoded.c — `gpurun data imagefolder --store jpeg`: a split of
 * encoded samples (DESIGN 1.5, encoded image split). A file within
 * --max-side keeps its bytes (JPEG or PNG, any colour space: the loader
 * decodes them); a larger one is decoded, resized (long side to max-side,
 * image.c's arithmetic) and encoded as JPEG. Every file is decoded once here,
 * a kept JPEG at 1/8 scale (its entropy data is still read whole), so a cut or
 * corrupt file is found at conversion, under --on-error, not in training.
 *
 * `encoded` is contiguous, so a sample is one pread at the dataset's file
 * offset plus offsets[i]; HDF5 needs a contiguous dataset's size at creation,
 * so the bytes go to OUT.partial first, a block at a time, committed there
 * so that a stopped conversion goes on where it stopped (convert_partial.h),
 * and are copied in at the end: one extra sequential write and read of the
 * stored bytes. */
#include "convert_encoded.h"
#include "../common/env.h"
#include "h5util.h"
#include "image.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define ENC_BLOCK_FILES 512                   /* files checked per parallel block */
#define ENC_COPY_BYTES ((size_t)64 << 20)      /* the temporary copied in pieces of this */
#define ENC_DEFAULT_QUALITY 90

/* Reads, checks and (past max_side) re-encodes one file. Thread-safe. */
static void enc_one(const char *path, int64_t max_side, int quality, gr_conv_stored *e) {
    char why[GR_IMAGE_WHY_MAX];
    memset(e, 0, sizeof *e);
    FILE *fp = fopen(path, "rb");
    if (!fp) {
        snprintf(why, sizeof why, "%s", strerror(errno));
        e->why = gr_xstrdup(why);
        return;
    }
    uint8_t *data;
    size_t n = gr_image_read_all(fp, &data);
    fclose(fp);
    gr_image_info info;
    gr_image img = {0}, small = {0};
    bool ok = gr_image_probe_mem(data, n, &info, why);
    const bool keep = max_side == 0 || (info.w <= max_side && info.h <= max_side);
    int64_t w = info.w, h = info.h;
    if (ok && keep) {
        ok = gr_image_decode_mem(data, n, 1, &img, why); /* JPEG: at 1/8 scale */
    } else if (ok) {
        gr_image_fit_side(info.w, info.h, max_side, &w, &h);
        ok = gr_image_decode_mem(data, n, GR_MIN(w, h), &img, why);
        free(data);
        data = NULL;
        if (ok) {
            gr_image_resize(&img, w, h, &small);
            ok = gr_image_encode_jpeg(&small, info.channels, quality, &data, &n, why);
        }
    }
    gr_image_free(&img);
    gr_image_free(&small);
    if (!ok) {
        free(data);
        e->why = gr_xstrdup(why);
        return;
    }
    e->bytes = data;
    e->n = n;
    e->shape[0] = (uint16_t)h, e->shape[1] = (uint16_t)w, e->shape[2] = (uint16_t)info.channels;
    e->format = (uint8_t)(keep ? info.format : GR_IMAGE_JPEG);
}

/* The split being written: split k of the partial work p. */
typedef struct enc_split {
    const gr_conv_out *out;
    gr_conv_partial *p;
    int k;
    const char *name;
    int last_pct;
} enc_split;

static void enc_progress(enc_split *s) {
    const gr_conv_part *t = &s->p->parts[s->k];
    if (!s->out->progress) return;
    const int pct = (int)(100 * t->done / t->n);
    if (pct == s->last_pct) return;
    s->last_pct = pct;
    fprintf(stderr, "\rgpurun data: %s %s (encoded) %3d%% %lld/%lld", s->out->path, s->name, pct,
            (long long)t->done, (long long)t->n);
    if (t->done == t->n) fputc('\n', stderr);
    fflush(stderr);
}

/* GPURUN_DATA_BLOCK_DELAY_MS: a pause after each block, committed first
 * (tests: a conversion slow enough to stop in the middle). */
static void enc_test_delay(void) {
    const int64_t ms = gr_env_int(GR_ENV_DATA_BLOCK_DELAY_MS, 0);
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000};
    while (ms > 0 && nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
}

/* Checks the next `count` files of the split on all cores, then adds them
 * to the partial work: a failed file is the error (the first) under fail,
 * nothing of the block added; under skip it is listed. */
static gr_status enc_block(enc_split *s, int64_t count, const gr_imagefolder_config *cfg,
                           gr_imagefolder_report *report, gr_conv_stored *es, gr_error *err) {
    gr_conv_part *t = &s->p->parts[s->k];
    const gr_conv_file *files = t->files + t->done;
    const int quality = cfg->quality ? cfg->quality : ENC_DEFAULT_QUALITY;
    const int64_t max_side = cfg->max_side;
    #pragma omp parallel for schedule(dynamic, 1)
    for (int64_t i = 0; i < count; i++) enc_one(files[i].path, max_side, quality, &es[i]);
    gr_status st = GR_OK;
    for (int64_t i = 0; i < count && st == GR_OK; i++)
        if (es[i].why && cfg->on_error != GR_ON_ERROR_SKIP)
            st = gr_error_set(err, GR_ERR_DATA, "%s: cannot decode: %s (--on-error skip leaves such files out)",
                              files[i].path, es[i].why);
    if (st == GR_OK) st = gr_conv_partial_add(s->p, s->k, es, count, report, err);
    for (int64_t i = 0; i < count; i++) {
        free(es[i].bytes);
        free(es[i].why);
    }
    const bool delay = gr_env_int(GR_ENV_DATA_BLOCK_DELAY_MS, 0) > 0;
    if (st == GR_OK && delay) st = gr_conv_partial_commit(s->p, err); /* what a stop during the pause keeps */
    if (st == GR_OK) enc_progress(s); /* after the commit: a test that sees the count may stop the run */
    if (st == GR_OK && delay) enc_test_delay();
    return st;
}

/* Dataset `what` of group grp, rank 1 or 2, written whole from buf. */
static gr_status enc_write(const enc_split *s, hid_t grp, const char *what, hid_t ftype, hid_t mtype, int rank,
                           const hsize_t *dims, const void *buf, gr_error *err) {
    gr_status st = GR_OK;
    hid_t sp = -1, d = -1;
    const char *f = s->out->tmp, *g = s->name;
    GR_H5_CHECK(sp = H5Screate_simple(rank, dims, NULL), err, "%s: %s/%s: cannot create", f, g, what);
    GR_H5_CHECK(d = H5Dcreate2(grp, what, ftype, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), err,
                "%s: %s/%s: cannot create", f, g, what);
    GR_H5_CHECK(H5Dwrite(d, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf), err, "%s: %s/%s: write failed", f, g, what);
fail:
    if (d >= 0) H5Dclose(d);
    if (sp >= 0) H5Sclose(sp);
    return st;
}

/* `encoded`, contiguous, from the temporary, ENC_COPY_BYTES at a time. */
static gr_status enc_copy(const enc_split *s, hid_t grp, gr_error *err) {
    gr_status st = GR_OK;
    hid_t sp = -1, msp = -1, d = -1, dcpl = -1;
    const char *f = s->out->tmp, *g = s->name;
    const gr_conv_part *t = &s->p->parts[s->k];
    const hsize_t total = t->offsets[t->kept];
    uint8_t *buf = gr_xmalloc((size_t)GR_MIN((hsize_t)ENC_COPY_BYTES, GR_MAX(total, 1)));
    const int fd = gr_conv_partial_bytes_fd(s->p, s->k);
    GR_H5_CHECK(sp = H5Screate_simple(1, &total, NULL), err, "%s: %s/encoded: cannot create", f, g);
    GR_H5_CHECK(dcpl = H5Pcreate(H5P_DATASET_CREATE), err, "%s: %s/encoded: cannot create", f, g);
    GR_H5_CHECK(H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER), err, "%s: %s/encoded: cannot create", f, g);
    GR_H5_CHECK(d = H5Dcreate2(grp, "encoded", H5T_STD_U8LE, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT), err,
                "%s: %s/encoded: cannot create", f, g);
    for (hsize_t at = 0; at < total;) {
        const hsize_t len = GR_MIN(total - at, (hsize_t)ENC_COPY_BYTES);
        for (size_t got = 0; got < len;) {
            const ssize_t r = pread(fd, buf + got, (size_t)len - got, (off_t)(at + got));
            if (r < 0 && errno == EINTR) continue;
            if (r <= 0) {
                st = gr_error_set(err, GR_ERR_DATA, "%s: read back failed: %s", t->bytes_path,
                                  r < 0 ? strerror(errno) : "shorter than written");
                goto fail;
            }
            got += (size_t)r;
        }
        GR_H5_CHECK(msp = H5Screate_simple(1, &len, NULL), err, "%s: %s/encoded: write failed", f, g);
        GR_H5_CHECK(H5Sselect_hyperslab(sp, H5S_SELECT_SET, &at, NULL, &len, NULL), err,
                    "%s: %s/encoded: write failed", f, g);
        GR_H5_CHECK(H5Dwrite(d, H5T_NATIVE_UINT8, msp, sp, H5P_DEFAULT, buf), err, "%s: %s/encoded: write failed",
                    f, g);
        H5Sclose(msp), msp = -1;
        at += len;
    }
fail:
    if (d >= 0) H5Dclose(d);
    if (dcpl >= 0) H5Pclose(dcpl);
    if (msp >= 0) H5Sclose(msp);
    if (sp >= 0) H5Sclose(sp);
    free(buf);
    return st;
}

/* The scalar string attribute name = value on grp. */
static gr_status enc_string_attr(const enc_split *s, hid_t grp, const char *name, const char *value,
                                 gr_error *err) {
    gr_status st = GR_OK;
    hid_t t = -1, sp = -1, a = -1;
    const char *f = s->out->tmp, *g = s->name;
    GR_H5_CHECK(t = H5Tcopy(H5T_C_S1), err, "%s: %s: attribute %s", f, g, name);
    GR_H5_CHECK(H5Tset_size(t, strlen(value)), err, "%s: %s: attribute %s", f, g, name);
    GR_H5_CHECK(H5Tset_cset(t, H5T_CSET_UTF8), err, "%s: %s: attribute %s", f, g, name);
    GR_H5_CHECK(sp = H5Screate(H5S_SCALAR), err, "%s: %s: attribute %s", f, g, name);
    GR_H5_CHECK(a = H5Acreate2(grp, name, t, sp, H5P_DEFAULT, H5P_DEFAULT), err, "%s: %s: attribute %s", f, g, name);
    GR_H5_CHECK(H5Awrite(a, t, value), err, "%s: %s: attribute %s", f, g, name);
fail:
    if (a >= 0) H5Aclose(a);
    if (sp >= 0) H5Sclose(sp);
    if (t >= 0) H5Tclose(t);
    return st;
}

/* The group and its datasets from what the blocks committed. */
static gr_status enc_finish(const enc_split *s, const char *const *names, int64_t nclasses, gr_error *err) {
    hid_t grp = -1;
    gr_status st = gr_conv_group_create(s->out, s->name, &grp, err);
    if (st != GR_OK) return st;
    const gr_conv_part *t = &s->p->parts[s->k];
    const hsize_t n = (hsize_t)t->kept, n1 = n + 1, n3[2] = {n, 3};
    const hid_t ltype = nclasses <= 256 ? H5T_STD_U8LE : nclasses <= 65536 ? H5T_STD_U16LE : H5T_STD_I32LE;
    if (st == GR_OK) st = enc_copy(s, grp, err);
    if (st == GR_OK)
        st = enc_write(s, grp, "offsets", H5T_STD_U64LE, H5T_NATIVE_UINT64, 1, &n1, t->offsets, err);
    if (st == GR_OK) st = enc_write(s, grp, "shapes", H5T_STD_U16LE, H5T_NATIVE_UINT16, 2, n3, t->shapes, err);
    if (st == GR_OK) st = enc_write(s, grp, "formats", H5T_STD_U8LE, H5T_NATIVE_UINT8, 1, &n, t->formats, err);
    if (st == GR_OK) st = enc_write(s, grp, "labels", ltype, H5T_NATIVE_INT32, 1, &n, t->labels, err);
    if (st == GR_OK) st = enc_string_attr(s, grp, "storage", "encoded", err);
    if (st == GR_OK) st = gr_conv_write_classes(s->out, grp, s->name, names, nclasses, err);
    H5Gclose(grp);
    return st;
}

/* Split k: the files not yet done, a block at a time; then its group. */
static gr_status enc_split_write(enc_split *s, const char *const *names, int64_t nclasses,
                                 const gr_imagefolder_config *cfg, gr_imagefolder_report *report,
                                 gr_conv_stored *es, gr_error *err) {
    gr_conv_part *t = &s->p->parts[s->k];
    gr_status st = GR_OK;
    char c[32];
    while (t->done < t->n && st == GR_OK) {
        st = enc_block(s, GR_MIN(t->n - t->done, ENC_BLOCK_FILES), cfg, report, es, err);
        if (st == GR_OK && cfg->stop && atomic_load(&cfg->stop->requested) &&
            (st = gr_conv_partial_commit(s->p, err)) == GR_OK)
            st = gr_error_set(err, GR_ERR_SIGNAL, "%s: stopped as asked; %s files converted so far are kept in %s",
                              s->out->path, gr_fmt_count(s->p->committed, c, sizeof c), s->p->dir);
    }
    if (st == GR_OK) st = gr_conv_partial_commit(s->p, err); /* a split's end */
    if (st == GR_OK && t->kept == 0) {
        const gr_imagefolder_bad *bad = report->bad + t->first_bad;
        st = gr_error_set(err, GR_ERR_DATA, "%s: none of the %lld images of %s could be decoded (the first: %s: %s)",
                          cfg->dir, (long long)t->n, s->name, bad->path, bad->why);
    }
    if (st == GR_OK) st = enc_finish(s, names, nclasses, err);
    return st;
}

gr_status gr_conv_encoded_write(gr_conv_out *o, gr_conv_part *parts, int nparts, const char *const *names,
                                int64_t nclasses, const gr_imagefolder_config *cfg, gr_imagefolder_report *report,
                                gr_error *err) {
    char options[128];
    snprintf(options, sizeof options, "store=jpeg max_side=%lld quality=%d on_error=%s", (long long)cfg->max_side,
             cfg->quality ? cfg->quality : ENC_DEFAULT_QUALITY, cfg->on_error == GR_ON_ERROR_SKIP ? "skip" : "fail");
    gr_conv_partial p;
    gr_status st = gr_conv_partial_open(&p, o->path, parts, nparts, options, cfg->restart, cfg->stop, o->progress,
                                        report, err);
    if (st != GR_OK) return st;
    report->resumed += p.resumed;
    gr_conv_stored *es = gr_xcalloc(ENC_BLOCK_FILES, sizeof *es);
    for (int k = 0; k < nparts && st == GR_OK; k++) {
        enc_split s = {.out = o, .p = &p, .k = k, .name = parts[k].name, .last_pct = -1};
        st = enc_split_write(&s, names, nclasses, cfg, report, es, err);
        if (st == GR_OK) report->samples += parts[k].kept;
    }
    free(es);
    if (st == GR_OK) st = gr_conv_out_commit(o, err);
    if (st != GR_OK && st != GR_ERR_SIGNAL && err) {
        gr_conv_partial_commit(&p, NULL); /* the blocks done before the failure, as far as that goes */
        char c[32];
        const size_t len = strlen(err->msg);
        if (p.committed > 0)
            snprintf(err->msg + len, sizeof err->msg - len, "; the %s files converted before are kept in %s (the "
                     "same command goes on from there)", gr_fmt_count(p.committed, c, sizeof c), p.dir);
    }
    if (st == GR_OK) gr_conv_partial_done(&p, report);
    else gr_conv_partial_close(&p);
    return st;
}
