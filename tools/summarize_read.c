/* summarize_read.c — one run directory for `gpurun summarize` (see
 * summarize_read.h): config.yaml through the config tree (config/cfg.h, on
 * libyaml), summary.json and metrics.jsonl through json_read.h. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include "summarize_read.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../config/cfg.h"
#include "../common/json_read.h"
#include "../common/lockfile.h"

#define GR_SUM_SUMMARY_MAX ((size_t)1 << 20) /* summary.json is one line of some 1 KB */

const gr_sum_metric_row gr_sum_metric_rows[GR_SUM_N_METRICS] = {
    [GR_SUM_STEPS] = {"steps", "steps", GR_SUM_TRAIN_LAST, "step", 0},
    [GR_SUM_BEST_ACC] = {"best_acc", "best_val_accuracy", GR_SUM_EVAL_MAX, "accuracy", 4},
    [GR_SUM_LAST_ACC] = {"last_acc", "last_val_accuracy", GR_SUM_EVAL_LAST, "accuracy", 4},
    [GR_SUM_FINAL_LOSS] = {"final_loss", "final_train_loss", GR_SUM_TRAIN_LAST, "loss", 4},
    [GR_SUM_SAMPLES_PER_S] = {"samples_per_s", "samples_per_s", GR_SUM_TRAIN_LAST, "samples_per_s", 1},
    [GR_SUM_WALL_S] = {"wall_s", "wall_s", GR_SUM_TRAIN_LAST, "time_s", 1},
};

/* ---- config.yaml: its leaves ---- */

static void gr_sum_kv_add(gr_sum_run *r, const char *key, gr_jkind kind, const char *text) {
    GR_GROW(r->cfg, r->cap_cfg, r->n_cfg + 1);
    gr_sum_kv *kv = &r->cfg[r->n_cfg++];
    *kv = (gr_sum_kv){gr_xstrdup(key), {0}};
    gr_jval_set(&kv->val, kind, kind == GR_J_NUM ? strtod(text, NULL) : 0, text);
}

/* A scalar's kind as the output shows it: a number where it reads as a
 * JSON number, true/false as bools, null as missing; quoted ones are strings. */
static gr_jkind gr_sum_scalar_kind(const gr_cfg *n) {
    const char *s = n->scalar ? n->scalar : "";
    if (n->quoted) return GR_J_STR;
    if (!*s || !strcmp(s, "~") || !strcmp(s, "null") || !strcmp(s, "Null") || !strcmp(s, "NULL"))
        return GR_J_NULL;
    if (gr_json_is_number(s)) return GR_J_NUM;
    if (!strcmp(s, "true") || !strcmp(s, "false")) return GR_J_BOOL;
    return GR_J_STR;
}

static void gr_sum_leaf(void *r, const char *path, const gr_cfg *leaf, const char *text) {
    gr_sum_kv_add(r, path, leaf->kind == GR_CFG_SCALAR ? gr_sum_scalar_kind(leaf) : GR_J_STR, text);
}

static gr_status gr_sum_read_config(gr_sum_run *r, const char *path, gr_error *err) {
    gr_cfg *root = NULL;
    if (gr_cfg_parse_file(path, &root, err)) {
        err->status = GR_ERR_DATA;
        return GR_ERR_DATA;
    }
    if (root->kind != GR_CFG_MAP) {
        gr_cfg_free(root);
        return gr_error_set(err, GR_ERR_DATA, "%s: not a job spec (a YAML mapping)", path);
    }
    gr_cfg_leaves(root, true, gr_sum_leaf, r); /* a sequence of plain values is one column: [0.5] */
    gr_cfg_free(root);
    return GR_OK;
}

/* ---- summary.json ---- */

/* Reads path whole into *text (NUL-added); *absent when there is no such file. */
static gr_status gr_sum_slurp(const char *path, char **text, size_t *len, bool *absent, gr_error *err) {
    *text = NULL;
    *absent = false;
    gr_status st = gr_check_regular(path, "a run's file", GR_ERR_DATA, err);
    if (st) return st;
    FILE *f = fopen(path, "rb");
    if (!f) {
        if (errno == ENOENT) return *absent = true, GR_OK;
        return gr_error_set(err, GR_ERR_DATA, "%s: cannot read: %s", path, strerror(errno));
    }
    char *buf = gr_xmalloc(GR_SUM_SUMMARY_MAX + 1);
    size_t n = fread(buf, 1, GR_SUM_SUMMARY_MAX + 1, f);
    int bad = ferror(f);
    fclose(f);
    if (bad || n > GR_SUM_SUMMARY_MAX) {
        free(buf);
        return gr_error_set(err, GR_ERR_DATA, "%s: %s", path, bad ? "cannot read" : "larger than 1 MiB");
    }
    buf[n] = '\0';
    *text = buf;
    *len = n;
    return GR_OK;
}

/* status, or "status (exit code)" when the code is not 0. */
static gr_status gr_sum_status(gr_sum_run *r, const gr_jobj *o, const char *path, gr_error *err) {
    const gr_jval *s = gr_jobj_get(o, "status"), *code = gr_jobj_get(o, "exit_code");
    if (!s || s->kind != GR_J_STR || !s->text[0])
        return gr_error_set(err, GR_ERR_DATA, "%s: no \"status\" string", path);
    if (code && code->kind != GR_J_NUM && code->kind != GR_J_NULL)
        return gr_error_set(err, GR_ERR_DATA, "%s: \"exit_code\" is not a number", path);
    if (code && code->kind == GR_J_NUM && code->num != 0)
        snprintf(r->status, sizeof r->status, "%s (%s)", s->text, code->text);
    else
        snprintf(r->status, sizeof r->status, "%s", s->text);
    return GR_OK;
}

/* summary.json's figures and status; *absent when the run wrote none. */
static gr_status gr_sum_read_summary(gr_sum_run *r, const char *path, bool *absent, gr_error *err) {
    char *text, why[128];
    size_t len = 0;
    gr_status st = gr_sum_slurp(path, &text, &len, absent, err);
    if (st || *absent) return st;
    gr_jobj o;
    bool ok = gr_json_object_read(text, len, &o, why, sizeof why);
    free(text);
    if (!ok) return gr_error_set(err, GR_ERR_DATA, "%s: not a JSON object: %s", path, why);
    st = gr_sum_status(r, &o, path, err);
    for (int m = 0; m < GR_SUM_N_METRICS && !st; m++) {
        const gr_jval *v = gr_jobj_get(&o, gr_sum_metric_rows[m].summary_key);
        if (v && v->kind != GR_J_NUM && v->kind != GR_J_NULL)
            st = gr_error_set(err, GR_ERR_DATA, "%s: \"%s\" is not a number", path, gr_sum_metric_rows[m].summary_key);
        else if (v && v->kind == GR_J_NUM)
            gr_jval_set(&r->metric[m], GR_J_NUM, v->num, v->text);
    }
    gr_jobj_free(&o);
    return st;
}

/* ---- metrics.jsonl ---- */

/* One parsed line into the figures it carries (into fb). */
/* A val evaluation line's figures besides its accuracy (a column of its
 * own), as the run's last: "val_loss", "val_<metric>". */
static void gr_sum_eval_figures(gr_sum_run *r, const gr_jobj *o) {
    for (int i = 0; i < r->n_evm; i++) free(r->evm[i].key), gr_jval_free(&r->evm[i].val);
    r->n_evm = 0;
    for (int i = 0; i < o->n; i++) {
        const gr_jfield *f = &o->f[i];
        if (f->val.kind != GR_J_NUM || !strcmp(f->key, "step") || !strcmp(f->key, "epoch") ||
            !strcmp(f->key, "accuracy"))
            continue;
        GR_GROW(r->evm, r->cap_evm, r->n_evm + 1);
        gr_sum_kv *kv = &r->evm[r->n_evm++];
        char key[160];
        snprintf(key, sizeof key, "val_%s", f->key);
        *kv = (gr_sum_kv){gr_xstrdup(key), {0}};
        gr_jval_set(&kv->val, GR_J_NUM, f->val.num, f->val.text);
    }
}

static void gr_sum_line(gr_sum_run *r, gr_jval fb[GR_SUM_N_METRICS], const gr_jobj *o) {
    const gr_jval *kind = gr_jobj_get(o, "kind"), *split = gr_jobj_get(o, "split");
    if (!kind || kind->kind != GR_J_STR) return;
    bool train = !strcmp(kind->text, "train");
    bool val = !strcmp(kind->text, "eval") && (!split || (split->kind == GR_J_STR && !strcmp(split->text, "val")));
    if (val) gr_sum_eval_figures(r, o);
    for (int m = 0; m < GR_SUM_N_METRICS; m++) {
        const gr_sum_metric_row *row = &gr_sum_metric_rows[m];
        if (row->from == GR_SUM_TRAIN_LAST ? !train : !val) continue;
        const gr_jval *v = gr_jobj_get(o, row->line_key);
        if (!v || v->kind != GR_J_NUM) continue;
        if (row->from == GR_SUM_EVAL_MAX && fb[m].kind == GR_J_NUM && !(v->num > fb[m].num)) continue;
        gr_jval_set(&fb[m], GR_J_NUM, v->num, v->text);
    }
}

/* The figures summary.json did not give, and the last val evaluation's
 * (gr_sum_eval_figures), from metrics.jsonl (none when it is absent); lines
 * that do not parse are skipped. */
static gr_status gr_sum_read_metrics(gr_sum_run *r, const char *path, gr_error *err) {
    gr_status st = gr_check_regular(path, "a run's file", GR_ERR_DATA, err);
    if (st) return st;
    FILE *f = fopen(path, "r");
    if (!f) {
        if (errno == ENOENT) return GR_OK;
        return gr_error_set(err, GR_ERR_DATA, "%s: cannot read: %s", path, strerror(errno));
    }
    gr_jval fb[GR_SUM_N_METRICS] = {0};
    char *line = NULL, why[128];
    size_t cap = 0;
    ssize_t n;
    while ((n = getline(&line, &cap, f)) > 0) {
        gr_jobj o;
        if (!gr_json_object_read(line, (size_t)n, &o, why, sizeof why)) continue;
        gr_sum_line(r, fb, &o);
        gr_jobj_free(&o);
    }
    if (ferror(f)) st = gr_error_set(err, GR_ERR_DATA, "%s: cannot read: %s", path, strerror(errno));
    free(line);
    fclose(f);
    for (int m = 0; m < GR_SUM_N_METRICS; m++) {
        if (r->metric[m].kind == GR_J_NULL) {
            r->metric[m] = fb[m];
            fb[m] = (gr_jval){0};
        }
        gr_jval_free(&fb[m]);
    }
    return st;
}

/* ---- the run ---- */

/* dir must be a directory holding config.yaml; path gets dir/config.yaml. */
static gr_status gr_sum_check_dir(const char *dir, char *path, size_t n, gr_error *err) {
    struct stat sb;
    if (stat(dir, &sb) != 0)
        return gr_error_set(err, GR_ERR_DATA, "%s: not a run directory (%s)", dir,
                            errno == ENOENT ? "no such directory" : strerror(errno));
    if (!S_ISDIR(sb.st_mode)) return gr_error_set(err, GR_ERR_DATA, "%s: not a run directory (not a directory)", dir);
    snprintf(path, n, "%s/config.yaml", dir);
    if (stat(path, &sb) != 0 && errno == ENOENT)
        return gr_error_set(err, GR_ERR_DATA, "%s: not a run directory (no config.yaml)", dir);
    return GR_OK;
}

/* The run's status and figures: summary.json's, then metrics.jsonl's; base
 * is the directory, path room for base/metrics.jsonl. */
static gr_status gr_sum_read_outcome(gr_sum_run *r, const char *base, char *path, size_t n, gr_error *err) {
    bool absent = true;
    gr_status st;
    if (gr_lockfile_held(base, NULL, 0)) {
        /* a live run: a summary.json there is an earlier process's (before a resume) */
        snprintf(r->status, sizeof r->status, "running");
    } else {
        snprintf(path, n, "%s/summary.json", base);
        if ((st = gr_sum_read_summary(r, path, &absent, err))) return st;
        /* none, or an attempt's "running" with no process left: killed without a word */
        if (absent || !strcmp(r->status, "running")) snprintf(r->status, sizeof r->status, "interrupted");
    }
    snprintf(path, n, "%s/metrics.jsonl", base); /* the evaluations' figures, and what summary.json lacks */
    return gr_sum_read_metrics(r, path, err);
}

gr_status gr_sum_run_load(gr_sum_run *r, const char *dir, gr_error *err) {
    *r = (gr_sum_run){.dir = dir};
    /* as long as dir is: a fixed buffer cut a long one to another directory (its parent) */
    char *base = gr_xstrdup(dir);
    for (size_t k = strlen(base); k > 1 && base[k - 1] == '/'; k--) base[k - 1] = '\0';
    const size_t n = strlen(base) + sizeof "/metrics.jsonl";
    char *path = gr_xmalloc(n);
    gr_status st = gr_sum_check_dir(base, path, n, err);
    if (!st) st = gr_sum_read_config(r, path, err);
    if (!st) st = gr_sum_read_outcome(r, base, path, n, err);
    free(path);
    free(base);
    return st;
}

void gr_sum_run_free(gr_sum_run *r) {
    for (int i = 0; i < r->n_cfg; i++) free(r->cfg[i].key), gr_jval_free(&r->cfg[i].val);
    free(r->cfg);
    for (int m = 0; m < GR_SUM_N_METRICS; m++) gr_jval_free(&r->metric[m]);
    for (int i = 0; i < r->n_evm; i++) free(r->evm[i].key), gr_jval_free(&r->evm[i].val);
    free(r->evm);
    *r = (gr_sum_run){0};
}
