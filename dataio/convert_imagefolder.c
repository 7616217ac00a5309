/* convert_imagefolder.c — `gpurun data imagefolder OUT.h5 --from DIR --size S`:
 * a folder of class folders of JPEG and PNG files to one split of the HDF5
 * layout of DESIGN 1.5: each image decoded to RGB, resized so its short side
 * is R, centre-cropped to SxS (dataio/image.h, which `gpurun predict` shares,
 * so a model's input at prediction is what it was trained on).
 *
 * A file's format is told by its first bytes, not its name (ImageNet has a
 * PNG named .JPEG); the name only selects the files looked at (*.jpg,
 * *.jpeg, *.png). A corrupt file is an error naming it, never an exit or a
 * crash; what then happens to the conversion is the --on-error policy. */
#include "convert_imagefolder.h"
#include "convert_encoded.h"
#include "h5util.h"
#include "image.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the converter ---- */

void gr_imagefolder_report_free(gr_imagefolder_report *r) {
    for (int64_t i = 0; i < r->nbad; i++) {
        free(r->bad[i].path);
        free(r->bad[i].why);
    }
    for (int64_t i = 0; i < r->nwarnings; i++) free(r->warnings[i]);
    free(r->bad);
    free(r->warnings);
    memset(r, 0, sizeof *r);
}

void gr_imagefolder_report_bad(gr_imagefolder_report *r, const char *path, char *why) {
    if ((r->nbad & (r->nbad - 1)) == 0) /* 0, 1, 2, 4, ...: grow at powers of two */
        r->bad = gr_xrealloc(r->bad, (size_t)GR_MAX(2 * r->nbad, 1) * sizeof *r->bad);
    r->bad[r->nbad++] = (gr_imagefolder_bad){gr_xstrdup(path), why};
}

/* The block's working memory and where its samples go. */
typedef struct if_job {
    gr_conv_split *split;
    int64_t R, S;
    gr_on_error on_error;
    uint8_t *images;             /* block * 3 * S * S */
    int32_t *labels;             /* block */
    char **errs;                 /* block */
    int32_t *kept;               /* the labels written, in order (skip only: the split is shrunk to them) */
    gr_imagefolder_report *report;
} if_job;

/* Decodes, resizes and crops one block of files on all cores, then appends
 * it. A file that fails is the error (the first, in order) under fail; under
 * skip it is listed and the others close up. */
static gr_status if_block(if_job *jb, const gr_conv_file *files, int64_t count, gr_error *err) {
    const int64_t S = jb->S, R = jb->R, sample = 3 * S * S;
    uint8_t *const images = jb->images;
    int32_t *const labels = jb->labels;
    char **const errs = jb->errs;
    #pragma omp parallel for schedule(dynamic, 1)
    for (int64_t i = 0; i < count; i++) {
        char msg[GR_IMAGE_WHY_MAX];
        gr_image img;
        labels[i] = files[i].label;
        errs[i] = NULL;
        if (!gr_image_decode(files[i].path, R, &img, msg)) {
            errs[i] = gr_xstrdup(msg);
            continue;
        }
        gr_image_resize_crop(&img, R, S, images + i * sample);
        gr_image_free(&img);
    }
    gr_status st = GR_OK;
    int64_t kept = 0;
    for (int64_t i = 0; i < count; i++) {
        if (!errs[i]) {
            if (kept < i) {
                memcpy(images + kept * sample, images + i * sample, (size_t)sample);
                labels[kept] = labels[i];
            }
            kept++;
        } else if (jb->on_error == GR_ON_ERROR_SKIP) {
            gr_imagefolder_report_bad(jb->report, files[i].path, errs[i]);
            errs[i] = NULL;
        } else if (st == GR_OK) {
            st = gr_error_set(err, GR_ERR_DATA, "%s: cannot decode: %s (--on-error skip leaves such files out)",
                              files[i].path, errs[i]);
        }
        free(errs[i]);
    }
    if (st != GR_OK || kept == 0) return st;
    if (jb->kept) memcpy(jb->kept + jb->split->next, labels, (size_t)kept * sizeof *labels);
    return gr_conv_split_write(jb->split, kept, images, labels, err);
}

/* Shrinks split s, created for more samples, to the s->next written (files
 * left out under skip): the images dataset is chunked, so it is cut; labels
 * is contiguous, so it is made again from `kept`. gr_conv_split has fixed
 * sizes because every other converter knows its count up front. */
static gr_status if_split_shrink(gr_conv_split *s, const int32_t *kept, gr_error *err) {
    gr_status st = GR_OK;
    hid_t type = -1, sp = -1;
    const char *f = s->out->tmp, *g = s->name;
    const hsize_t dims[4] = {(hsize_t)s->next, (hsize_t)s->c, (hsize_t)s->h, (hsize_t)s->w};
    GR_H5_CHECK(H5Dset_extent(s->images, dims), err, "%s: %s/images: cannot shrink to %lld samples", f, g,
                (long long)s->next);
    GR_H5_CHECK(type = H5Dget_type(s->labels), err, "%s: %s/labels: cannot read its type", f, g);
    H5Dclose(s->labels);
    s->labels = -1;
    GR_H5_CHECK(H5Ldelete(s->group, "labels", H5P_DEFAULT), err, "%s: %s/labels: cannot delete", f, g);
    GR_H5_CHECK(sp = H5Screate_simple(1, dims, NULL), err, "%s: %s/labels: cannot create", f, g);
    GR_H5_CHECK(s->labels = H5Dcreate2(s->group, "labels", type, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), err,
                "%s: %s/labels: cannot create", f, g);
    GR_H5_CHECK(H5Dwrite(s->labels, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, kept), err,
                "%s: %s/labels: write failed", f, g);
    s->n = s->next;
fail:
    if (type >= 0) H5Tclose(type);
    if (sp >= 0) H5Sclose(sp);
    return st;
}

gr_status gr_conv_raw_split(const gr_conv_out *o, const char *name, const gr_conv_file *files, int64_t n,
                            const char *const *classes, int64_t nclasses, const gr_imagefolder_config *cfg,
                            bool stats, double *mean, double *std, gr_imagefolder_report *report, gr_error *err) {
    const int64_t S = cfg->size, R = cfg->short_side ? cfg->short_side : S, nbad0 = report->nbad;
    gr_conv_split s;
    gr_status st = gr_conv_split_create(o, name, n, 3, S, S, nclasses, stats, &s, err);
    if (st != GR_OK) return st;
    const int64_t block = gr_conv_block_samples(n, 3 * S * S);
    if_job jb = {.split = &s, .R = R, .S = S, .on_error = cfg->on_error, .report = report,
                 .images = gr_xmalloc((size_t)(block * 3 * S * S)),
                 .labels = gr_xmalloc((size_t)block * sizeof *jb.labels),
                 .errs = gr_xcalloc((size_t)block, sizeof *jb.errs),
                 .kept = cfg->on_error == GR_ON_ERROR_SKIP ? gr_xmalloc((size_t)n * sizeof *jb.kept) : NULL};
    for (int64_t first = 0; first < n && st == GR_OK; first += block)
        st = if_block(&jb, files + first, GR_MIN(block, n - first), err);
    const gr_imagefolder_bad *bad = report->bad + nbad0;
    if (st == GR_OK && report->nbad - nbad0 == n)
        st = gr_error_set(err, GR_ERR_DATA, "%s: none of the %lld images could be decoded (the first: %s: %s); %s "
                          "would be empty", cfg->dir, (long long)n, bad->path, bad->why, name);
    if (st == GR_OK && report->nbad > nbad0) {
        if (o->progress) fputc('\n', stderr); /* the bar stopped short of 100% */
        st = if_split_shrink(&s, jb.kept, err);
    }
    free(jb.images);
    free(jb.labels);
    free(jb.errs);
    free(jb.kept);
    report->samples += s.next;
    return gr_conv_split_end(&s, st, classes, nclasses, mean, std, err);
}

/* Whether group is "/" or "/name[/name...]" without empty, "." or ".." names. */
static bool if_group_ok(const char *group) {
    if (group[0] != '/') return false;
    if (group[1] == '\0') return true;
    for (const char *p = group; *p; ) {
        const char *name = p + 1, *end = strchr(name, '/');
        const size_t len = end ? (size_t)(end - name) : strlen(name);
        if (len == 0 || (len == 1 && name[0] == '.') || (len == 2 && name[0] == '.' && name[1] == '.')) return false;
        p = name + len;
    }
    return true;
}

/* --store jpeg's options; --size and --short-side are the raw store's. */
static gr_status if_check_store(const gr_imagefolder_config *cfg, const char *what, gr_error *err) {
    if (cfg->store == GR_STORE_RAW) {
        if (cfg->max_side || cfg->quality || cfg->restart)
            return gr_error_set(err, GR_ERR_USAGE, "data %s: --%s applies only with --store jpeg%s", what,
                                cfg->max_side ? "max-side" : cfg->quality ? "quality" : "restart",
                                cfg->restart ? " (a raw conversion is not resumable)" : "");
        return GR_OK;
    }
    if (cfg->store != GR_STORE_JPEG)
        return gr_error_set(err, GR_ERR_USAGE, "data %s: --store must be raw or jpeg", what);
    if (cfg->size || cfg->short_side)
        return gr_error_set(err, GR_ERR_USAGE, "data %s: --%s does not apply with --store jpeg (the images "
                            "are stored encoded, at their own size up to --max-side)", what,
                            cfg->size ? "size" : "short-side");
    if (cfg->max_side < 0 || cfg->max_side > GR_IMAGE_MAX_SRC_SIDE)
        return gr_error_set(err, GR_ERR_USAGE, "data %s: --max-side must be in [1, %d], got %lld", what,
                            GR_IMAGE_MAX_SRC_SIDE, (long long)cfg->max_side);
    if (cfg->quality < 0 || cfg->quality > 100)
        return gr_error_set(err, GR_ERR_USAGE, "data %s: --quality must be in [1, 100], got %d", what, cfg->quality);
    return GR_OK;
}

gr_status gr_conv_check_images(const gr_imagefolder_config *cfg, const char *what, gr_error *err) {
    const int64_t S = cfg->size, R = cfg->short_side ? cfg->short_side : cfg->size;
    gr_status st = if_check_store(cfg, what, err);
    if (st != GR_OK) return st;
    if (cfg->on_error != GR_ON_ERROR_FAIL && cfg->on_error != GR_ON_ERROR_SKIP)
        return gr_error_set(err, GR_ERR_USAGE, "data %s: --on-error must be skip or fail", what);
    if (cfg->store == GR_STORE_JPEG) return GR_OK;
    if (S < 1 || S > GR_IMAGE_MAX_SIDE)
        return gr_error_set(err, GR_ERR_USAGE, "data %s: --size must be in [1, %d], got %lld", what,
                            GR_IMAGE_MAX_SIDE, (long long)S);
    /* checked here, before anything is read or written: samples are
     * 3 x S x S bytes, one per chunk at this size */
    const int64_t smax = gr_conv_max_side(3);
    if (S > smax)
        return gr_error_set(err, GR_ERR_USAGE, "data %s: --size %lld is too large: a 3-channel sample of "
                            "%lldx%lld is over HDF5's 4 GiB chunk limit; the largest --size is %lld", what,
                            (long long)S, (long long)S, (long long)S, (long long)smax);
    if (R < S || R > GR_IMAGE_MAX_SIDE)
        return gr_error_set(err, GR_ERR_USAGE, "data %s: --short-side must be in [--size %lld, %d], got %lld", what,
                            (long long)S, GR_IMAGE_MAX_SIDE, (long long)R);
    return GR_OK;
}

/* --group, --val-fraction. */
static gr_status if_check_groups(const gr_imagefolder_config *cfg, gr_error *err) {
    if (cfg->group && !if_group_ok(cfg->group))
        return gr_error_set(err, GR_ERR_USAGE, "data imagefolder: --group must be an absolute HDF5 path "
                                               "(\"/train\"), got \"%s\"", cfg->group);
    if (cfg->val_fraction != 0 && !(cfg->val_fraction > 0 && cfg->val_fraction < 1))
        return gr_error_set(err, GR_ERR_USAGE, "data imagefolder: --val-fraction must be in (0, 1), got %g",
                            cfg->val_fraction);
    if (cfg->val_fraction != 0 && cfg->group)
        return gr_error_set(err, GR_ERR_USAGE, "data imagefolder: --group does not apply with --val-fraction, which "
                                               "writes /train and /val");
    return GR_OK;
}

/* The files as /train's then /val's (gr_split_stratified), into lists
 * (scan->n, sharing the paths); the count of /val's. */
static gr_status if_split_files(const gr_imagefolder_config *cfg, const gr_conv_scan *scan, gr_conv_file *lists,
                                int64_t *nval, gr_error *err) {
    int32_t *labels = gr_xmalloc((size_t)GR_MAX(scan->n, 1) * sizeof *labels);
    uint8_t *val = gr_xmalloc((size_t)GR_MAX(scan->n, 1));
    for (int64_t i = 0; i < scan->n; i++) labels[i] = scan->files[i].label;
    *nval = gr_split_stratified(labels, scan->n, scan->nclasses, cfg->val_fraction, cfg->seed, val);
    int64_t t = 0, v = scan->n - *nval;
    for (int64_t i = 0; i < scan->n; i++) lists[val[i] ? v++ : t++] = scan->files[i];
    free(labels);
    free(val);
    if (*nval == 0)
        return gr_error_set(err, GR_ERR_DATA, "%s: --val-fraction %g leaves /val empty: every class folder holds a "
                            "single image, and a class of one image stays in /train", cfg->dir, cfg->val_fraction);
    return GR_OK;
}

/* The splits written (lists, /train's then /val's): decoded, or encoded
 * and then OUT committed too. */
static gr_status if_write(const gr_imagefolder_config *cfg, gr_conv_out *o, const gr_conv_scan *scan,
                          const char *const *groups, int ngroups, const gr_conv_file *lists, int64_t nval,
                          double *mean, double *std, gr_imagefolder_report *report, gr_error *err) {
    const char *const *classes = (const char *const *)scan->classes;
    const int64_t ntrain = scan->n - nval;
    if (cfg->store == GR_STORE_JPEG) {
        gr_conv_part parts[2] = {{.name = groups[0], .files = lists, .n = ntrain},
                                 {.name = groups[1], .files = lists + ntrain, .n = nval}};
        gr_status st = gr_conv_encoded_write(o, parts, ngroups, classes, scan->nclasses, cfg, report, err);
        report->val_samples = ngroups == 2 && st == GR_OK ? parts[1].kept : 0;
        return st;
    }
    gr_status st = gr_conv_raw_split(o, groups[0], lists, ntrain, classes, scan->nclasses, cfg, true, mean, std,
                                     report, err);
    const int64_t n0 = report->samples;
    if (st == GR_OK && ngroups == 2)
        st = gr_conv_raw_split(o, "/val", lists + ntrain, nval, classes, scan->nclasses, cfg, false, mean, std,
                               report, err);
    report->val_samples = report->samples - n0;
    return st == GR_OK ? gr_conv_out_commit(o, err) : st;
}

gr_status gr_data_convert_imagefolder(const gr_imagefolder_config *cfg, const char *out, bool force, bool progress,
                                      gr_imagefolder_report *report, gr_error *err) {
    gr_imagefolder_report own = {0};
    if (!report) report = &own;
    memset(report, 0, sizeof *report);
    gr_status st = gr_conv_check_images(cfg, "imagefolder", err);
    if (st == GR_OK) st = if_check_groups(cfg, err);
    if (st != GR_OK) return st;
    const bool two = cfg->val_fraction > 0;
    const char *groups[2] = {two || !cfg->group ? "/train" : cfg->group, "/val"};
    gr_conv_out o;
    if ((st = gr_conv_out_begin_groups(&o, out, groups, two ? 2 : 1, force, progress, err)) != GR_OK) return st;
    gr_conv_scan scan;
    if ((st = gr_conv_scan_dir(cfg->dir, &scan, err)) != GR_OK) {
        gr_conv_out_abort(&o);
        return st;
    }
    report->skipped = scan.skipped;
    gr_conv_file *lists = two ? gr_xmalloc((size_t)scan.n * sizeof *lists) : scan.files;
    int64_t nval = 0;
    if (two) st = if_split_files(cfg, &scan, lists, &nval, err);
    /* before the commit, which closes the kept groups of OUT */
    gr_conv_out_classes_check(&o, two ? "/train and /val" : groups[0], (const char *const *)scan.classes,
                              scan.nclasses, &report->warnings, &report->nwarnings, &report->warnings_cap);
    double mean[3] = {0}, std[3] = {0};
    if (st == GR_OK) st = if_write(cfg, &o, &scan, groups, two ? 2 : 1, lists, nval, mean, std, report, err);
    if (st == GR_OK && progress) {
        const int64_t ntrain = report->samples - report->val_samples;
        char counts[1100];
        if (two) snprintf(counts, sizeof counts, "/train %lld, /val %lld", (long long)ntrain,
                          (long long)report->val_samples);
        else snprintf(counts, sizeof counts, "%.1000s %lld", groups[0], (long long)ntrain);
        if (cfg->store == GR_STORE_JPEG)
            fprintf(stderr, "gpurun data: %s: %s samples stored encoded (JPEG/PNG bytes) in %lld classes\n", out,
                    counts, (long long)scan.nclasses);
        else fprintf(stderr, "gpurun data: %s: %s samples of 3x%lldx%lld in %lld classes; mean %.2f %.2f %.2f, std %.2f "
                        "%.2f %.2f%s\n", out, counts, (long long)cfg->size, (long long)cfg->size,
                (long long)scan.nclasses, mean[0], mean[1], mean[2], std[0], std[1], std[2], two ? " (of /train)" : "");
    }
    gr_conv_out_abort(&o);
    if (two) free(lists);
    gr_conv_scan_free(&scan);
    gr_imagefolder_report_free(&own);
    return st;
}
