/* convert_imagenet.c — `gpurun data imagenet OUT.h5 --from DIR`: the
 * ILSVRC2012 classification images to /train and /val (DESIGN 1.1, 1.5),
 * from the layouts people have: train/<wnid>/ (or Kaggle's
 * ILSVRC/Data/CLS-LOC/train/), val/ in class folders or flat with a ground
 * truth (convert_imagenet_val.c). The images go through imagefolder's
 * writers: encoded (the default; resumable, convert_encoded.c) or decoded
 * (--store raw). */
#include "convert_encoded.h"
#include "convert_imagefolder.h"
#include "convert_imagenet.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define INET_KAGGLE "ILSVRC/Data/CLS-LOC"
#define INET_NAMES "LOC_synset_mapping.txt"

/* What one conversion found. */
typedef struct inet_run {
    char *base;            /* the folder holding train/ and val/ */
    gr_conv_scan train;    /* classes: the wnids, sorted; files unless train is left out */
    gr_conv_scan val;
    char **names;          /* the `classes` attribute: LOC_synset_mapping.txt's names, else the wnids */
    char *names_from;      /* that file; NULL: the wnids */
    char *truth;           /* a flat val's ground truth, as read; NULL: class folders */
} inet_run;

static void inet_run_free(inet_run *r) {
    for (int64_t k = 0; r->names && k < r->train.nclasses; k++) free(r->names[k]);
    free(r->names);
    free(r->names_from);
    free(r->truth);
    free(r->base);
    gr_conv_scan_free(&r->train);
    gr_conv_scan_free(&r->val);
}

/* DIR/train, else Kaggle's DIR/ILSVRC/Data/CLS-LOC/train: its parent into r->base. */
static gr_status inet_find_train(const char *dir, inet_run *r, gr_error *err) {
    char *kaggle = gr_conv_join(dir, INET_KAGGLE), *a = gr_conv_join(dir, "train"), *b = gr_conv_join(kaggle, "train");
    gr_status st = GR_OK;
    if (gr_conv_is_dir(a)) r->base = gr_xstrdup(dir);
    else if (gr_conv_is_dir(b)) r->base = gr_xstrdup(kaggle);
    else st = gr_error_set(err, GR_ERR_DATA, "%s: no train folder (looked for %s and Kaggle's %s); --from is the "
                           "ILSVRC2012 folder holding train/<wnid>/ (and val/)", dir, a, b);
    free(kaggle), free(a), free(b);
    return st;
}

/* Train's class folders: with files (scanned as imagefolder does) or, when
 * train is left out, their names alone (they are the labels of val). */
static gr_status inet_scan_train(const gr_imagenet_config *cfg, inet_run *r, gr_error *err) {
    char *dir = gr_conv_join(r->base, "train");
    gr_status st = GR_OK;
    if (!cfg->no_train) {
        st = gr_conv_scan_dir(dir, &r->train, err);
    } else {
        char **names;
        int64_t count, hidden = 0;
        st = gr_conv_list(dir, &names, &count, &hidden, err);
        for (int64_t i = 0; i < count && st == GR_OK; i++) {
            char *path = gr_conv_join(dir, names[i]);
            if (gr_conv_is_dir(path)) {
                GR_GROW(r->train.classes, r->train.classes_cap, r->train.nclasses + 1);
                r->train.classes[r->train.nclasses++] = gr_xstrdup(names[i]);
            }
            free(path);
        }
        gr_conv_list_free(names, count);
        if (st == GR_OK && r->train.nclasses == 0)
            st = gr_error_set(err, GR_ERR_DATA, "%s: no class sub-folders (its <wnid> folders give the labels, also "
                              "of val)", dir);
    }
    free(dir);
    return st;
}

/* val/'s class folders, each a wnid of train's. */
static gr_status inet_val_folders(const inet_run *r, const char *dir, char **names, int64_t count, gr_conv_scan *val,
                                  gr_error *err) {
    gr_status st = GR_OK;
    for (int64_t i = 0; i < count && st == GR_OK; i++) {
        char *path = gr_conv_join(dir, names[i]);
        const int32_t label = gr_inet_label(r->train.classes, r->train.nclasses, names[i]);
        if (!gr_conv_is_dir(path)) val->skipped++;
        else if (label < 0)
            st = gr_error_set(err, GR_ERR_DATA, "%s: class folder %s is not a class of train (no %s/train/%s)", path,
                              names[i], r->base, names[i]);
        else st = gr_conv_scan_class(val, path, label, err);
        free(path);
    }
    return st;
}

/* val/: class folders, or images with a ground truth. */
static gr_status inet_scan_val(const gr_imagenet_config *cfg, inet_run *r, gr_error *err) {
    char *dir = gr_conv_join(r->base, "val"), **names = NULL;
    int64_t count = 0, folders = 0, images = 0;
    gr_status st = GR_OK;
    if (!gr_conv_is_dir(dir))
        st = gr_error_set(err, GR_ERR_DATA, "%s: no val folder (pass --splits train to write /train alone)", dir);
    if (st == GR_OK) st = gr_conv_list(dir, &names, &count, &r->val.skipped, err);
    for (int64_t i = 0; i < count && st == GR_OK; i++) {
        char *path = gr_conv_join(dir, names[i]);
        if (gr_conv_is_dir(path)) folders++;
        else if (gr_conv_is_image_name(names[i])) images++;
        free(path);
    }
    if (st == GR_OK && folders && images)
        st = gr_error_set(err, GR_ERR_DATA, "%s: holds both class folders (%lld) and images (%lld): expected one or "
                          "the other", dir, (long long)folders, (long long)images);
    else if (st == GR_OK && !folders && !images)
        st = gr_error_set(err, GR_ERR_DATA, "%s: no class folders and no JPEG or PNG images", dir);
    else if (st == GR_OK && folders)
        st = inet_val_folders(r, dir, names, count, &r->val, err);
    for (int64_t i = 0; i < count && st == GR_OK && images; i++)
        if (gr_conv_is_image_name(names[i])) st = gr_conv_scan_add(&r->val, gr_conv_join(dir, names[i]), -1, err);
        else r->val.skipped++;
    if (st == GR_OK && images)
        st = gr_inet_flat_val(cfg, dir, r->train.classes, r->train.nclasses, &r->val, &r->truth, err);
    gr_conv_list_free(names, count);
    free(dir);
    return st;
}

/* The classes' names: LOC_synset_mapping.txt's ("n01440764 tench, Tinca
 * tinca": the rest of the line) when it is in DIR or DIR/.., else the wnids. */
static gr_status inet_names(const gr_imagenet_config *cfg, inet_run *r, gr_error *err) {
    const int64_t K = r->train.nclasses;
    r->names = gr_xcalloc((size_t)K, sizeof *r->names);
    char *up = gr_conv_join(cfg->dir, "..");
    char *cand[2] = {gr_conv_join(cfg->dir, INET_NAMES), gr_conv_join(up, INET_NAMES)};
    free(up);
    FILE *f = NULL;
    for (int k = 0; k < 2 && !f; k++)
        if ((f = fopen(cand[k], "r"))) r->names_from = gr_xstrdup(cand[k]);
    free(cand[0]), free(cand[1]);
    if (!f) {
        for (int64_t k = 0; k < K; k++) r->names[k] = gr_xstrdup(r->train.classes[k]);
        return GR_OK;
    }
    char *line = NULL;
    size_t cap = 0;
    for (ssize_t n; (n = getline(&line, &cap, f)) >= 0;) {
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = '\0';
        char *sp = strchr(line, ' ');
        if (sp) *sp = '\0';
        const int32_t k = gr_inet_label(r->train.classes, K, line);
        if (k >= 0 && !r->names[k]) r->names[k] = gr_xstrdup(sp ? sp + 1 : "");
    }
    free(line);
    fclose(f);
    for (int64_t k = 0; k < K; k++)
        if (!r->names[k] || !r->names[k][0])
            return gr_error_set(err, GR_ERR_DATA, "%s: no name for %s, a class of train (expected a line "
                                "'%s <name>')", r->names_from, r->train.classes[k], r->train.classes[k]);
    return GR_OK;
}

/* The splits written, and OUT committed. */
static gr_status inet_write(const gr_imagenet_config *cfg, gr_conv_out *o, inet_run *r, const char *const *groups,
                            gr_imagefolder_report *report, gr_error *err) {
    gr_imagefolder_config ic = cfg->images;
    ic.dir = cfg->dir;
    const char *const *names = (const char *const *)r->names;
    const int64_t K = r->train.nclasses;
    const gr_conv_scan *lists[2] = {cfg->no_train ? &r->val : &r->train, &r->val};
    const int nsplits = cfg->no_train || cfg->no_val ? 1 : 2;
    if (ic.store == GR_STORE_JPEG) {
        gr_conv_part parts[2];
        for (int k = 0; k < nsplits; k++) parts[k] = (gr_conv_part){.name = groups[k], .files = lists[k]->files,
                                                                     .n = lists[k]->n};
        gr_status st = gr_conv_encoded_write(o, parts, nsplits, names, K, &ic, report, err);
        report->val_samples = st == GR_OK && !cfg->no_val ? parts[nsplits - 1].kept : 0;
        return st;
    }
    double mean[3] = {0}, std[3] = {0};
    gr_status st = GR_OK;
    for (int k = 0; k < nsplits && st == GR_OK; k++) {
        const int64_t n0 = report->samples;
        st = gr_conv_raw_split(o, groups[k], lists[k]->files, lists[k]->n, names, K, &ic, k == 0, mean, std, report,
                               err);
        if (strcmp(groups[k], "/val") == 0) report->val_samples = report->samples - n0;
    }
    return st == GR_OK ? gr_conv_out_commit(o, err) : st;
}

static gr_status inet_check(const gr_imagenet_config *cfg, gr_error *err) {
    const gr_imagefolder_config *ic = &cfg->images;
    if (!cfg->dir) return gr_error_set(err, GR_ERR_USAGE, "data imagenet: --from DIR is required");
    if (cfg->no_train && cfg->no_val)
        return gr_error_set(err, GR_ERR_USAGE, "data imagenet: --splits leaves nothing to write (train, val or both)");
    if (ic->dir || ic->group || ic->val_fraction != 0 || ic->seed)
        return gr_error_set(err, GR_ERR_USAGE, "data imagenet: the splits are ILSVRC2012's own (no --group, "
                            "--val-fraction or --seed)");
    return gr_conv_check_images(ic, "imagenet", err);
}

/* What was found, on stderr, before the long part. */
static void inet_say(const gr_imagenet_config *cfg, const inet_run *r, const char *out) {
    char a[32], b[32], c[32];
    fprintf(stderr, "gpurun data: %s: %s classes (%s)", out, gr_fmt_count(r->train.nclasses, a, sizeof a),
            r->names_from ? r->names_from : "named by their wnids");
    if (!cfg->no_train) fprintf(stderr, "; train %s images", gr_fmt_count(r->train.n, b, sizeof b));
    if (!cfg->no_val)
        fprintf(stderr, "; val %s images (%s)", gr_fmt_count(r->val.n, c, sizeof c),
                r->truth ? r->truth : "in class folders");
    fputc('\n', stderr);
}

gr_status gr_data_convert_imagenet(const gr_imagenet_config *cfg, const char *out, bool force, bool progress,
                                   gr_imagefolder_report *report, gr_error *err) {
    gr_imagefolder_report own = {0};
    if (!report) report = &own;
    memset(report, 0, sizeof *report);
    gr_status st = inet_check(cfg, err);
    if (st != GR_OK) return st;
    const char *groups[2] = {cfg->no_train ? "/val" : "/train", "/val"};
    const int ngroups = cfg->no_train || cfg->no_val ? 1 : 2;
    gr_conv_out o;
    if ((st = gr_conv_out_begin_groups(&o, out, groups, ngroups, force, progress, err)) != GR_OK) return st;
    inet_run r = {0};
    st = inet_find_train(cfg->dir, &r, err);
    if (st == GR_OK) st = inet_scan_train(cfg, &r, err);
    if (st == GR_OK && !cfg->no_val) st = inet_scan_val(cfg, &r, err);
    if (st == GR_OK) st = inet_names(cfg, &r, err);
    if (st == GR_OK) {
        report->skipped = r.train.skipped + r.val.skipped;
        if (progress) inet_say(cfg, &r, out);
        gr_conv_out_classes_check(&o, ngroups == 2 ? "/train and /val" : groups[0], (const char *const *)r.names,
                                  r.train.nclasses, &report->warnings, &report->nwarnings, &report->warnings_cap);
        st = inet_write(cfg, &o, &r, groups, report, err);
    }
    if (st == GR_OK && progress) {
        char a[32], b[32];
        fprintf(stderr, "gpurun data: %s: /train %s, /val %s samples %s\n", out,
                cfg->no_train ? "-" : gr_fmt_count(report->samples - report->val_samples, a, sizeof a),
                cfg->no_val ? "-" : gr_fmt_count(report->val_samples, b, sizeof b),
                cfg->images.store == GR_STORE_JPEG ? "stored encoded (JPEG/PNG bytes)" : "decoded");
    }
    gr_conv_out_abort(&o);
    inet_run_free(&r);
    gr_imagefolder_report_free(&own);
    return st;
}
