/* plot_data.c — a run's series of one metric, from its metrics.jsonl (DESIGN
 * 1.3), for `gpurun plot` (plot_parts.h).
 *
 * Each line is read as one flat JSON object (json_read.h). A line that is
 * not exactly one such object (torn by a kill mid-write, or garbage) is
 * skipped, as is a value that is not a finite number (null, "NaN", a string). */
#include "plot_parts.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/json_read.h"

/* Where each metric is logged: lines of `kind`, under `key`. */
static const struct {
    const char *name, *kind, *key;
} gr_plot_metrics[] = {
    [GR_PLOT_LOSS] = {"loss", "train", "loss"},
    [GR_PLOT_ACCURACY] = {"accuracy", "eval", "accuracy"},
    [GR_PLOT_LR] = {"lr", "train", "lr"},
    [GR_PLOT_VAL_LOSS] = {"val_loss", "eval", "loss"},
    [GR_PLOT_SAMPLES_PER_S] = {"samples_per_s", "train", "samples_per_s"},
};
_Static_assert(GR_ARRAY_LEN(gr_plot_metrics) == GR_PLOT_METRIC_COUNT, "one row per gr_plot_metric");

/* Values beyond this are no plottable numbers (spans of them overflow). */
#define GR_PLOT_MAX_ABS 1e300

const char *gr_plot_metric_name(gr_plot_metric m) {
    GR_ASSERT(m >= 0 && m < GR_PLOT_METRIC_COUNT);
    return gr_plot_metrics[m].name;
}

bool gr_plot_metric_parse(const char *name, gr_plot_metric *m) {
    for (int i = 0; i < GR_PLOT_METRIC_COUNT; i++) {
        if (strcmp(name, gr_plot_metrics[i].name) == 0) {
            *m = (gr_plot_metric)i;
            return true;
        }
    }
    return false;
}

/* ---- the series ---- */

/* The point a line holds for metric m; false for lines of other kinds, for
 * torn or malformed ones (json_read.h), and for a value that is not a
 * finite number (null, "NaN", a string). */
static bool gr_plot_line_point(const char *text, size_t len, gr_plot_metric m, double *x, double *y) {
    gr_jobj o;
    char why[96];
    if (!gr_json_object_read(text, len, &o, why, sizeof why)) return false;
    const gr_jval *kind = gr_jobj_get(&o, "kind"), *split = gr_jobj_get(&o, "split");
    const gr_jval *step = gr_jobj_get(&o, "step"), *v = gr_jobj_get(&o, gr_plot_metrics[m].key);
    bool ok = kind && kind->kind == GR_J_STR && strcmp(kind->text, gr_plot_metrics[m].kind) == 0 &&
              /* eval lines of the val split (older lines name none) */
              (strcmp(kind->text, "eval") != 0 || !split || (split->kind == GR_J_STR && !strcmp(split->text, "val"))) &&
              step && step->kind == GR_J_NUM && step->num >= 0 && step->num <= 9007199254740992.0 &&
              step->num == floor(step->num) && v && v->kind == GR_J_NUM && isfinite(v->num) &&
              fabs(v->num) <= GR_PLOT_MAX_ABS;
    if (ok) *x = step->num, *y = v->num;
    gr_jobj_free(&o);
    return ok;
}

static void gr_plot_series_add(gr_plot_series *s, double x, double y, int64_t line) {
    GR_GROW(s->pt, s->cap, s->n + 1);
    s->pt[s->n++] = (gr_plot_point){x, y, line};
}

static int gr_plot_point_cmp(const void *a, const void *b) {
    const gr_plot_point *p = a, *q = b;
    if (p->x != q->x) return p->x < q->x ? -1 : 1;
    return p->line < q->line ? -1 : p->line > q->line;
}

/* Sorts by step and keeps, of the points of one step, the last logged. */
static void gr_plot_series_settle(gr_plot_series *s) {
    if (s->n == 0) return;
    qsort(s->pt, (size_t)s->n, sizeof *s->pt, gr_plot_point_cmp);
    int64_t k = 0;
    for (int64_t i = 0; i < s->n; i++) {
        if (k > 0 && s->pt[k - 1].x == s->pt[i].x) k--;
        s->pt[k++] = s->pt[i];
    }
    s->n = k;
}

/* Opens path for reading only if it is a regular file (a FIFO must not hang
 * the command); NULL with err set otherwise. */
static FILE *gr_plot_open_regular(const char *path, gr_error *err) {
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        gr_error_set(err, GR_ERR_DATA, "%s: cannot read: %s", path, strerror(errno));
        return NULL;
    }
    struct stat sb;
    FILE *f = NULL;
    if (fstat(fd, &sb) != 0) gr_error_set(err, GR_ERR_DATA, "%s: cannot read: %s", path, strerror(errno));
    else if (!S_ISREG(sb.st_mode)) gr_error_set(err, GR_ERR_DATA, "%s: cannot read: not a regular file", path);
    else if (!(f = fdopen(fd, "r"))) gr_error_set(err, GR_ERR_DATA, "%s: cannot read: %s", path, strerror(errno));
    if (!f) close(fd);
    return f;
}

static gr_status gr_plot_series_read(FILE *f, const char *path, gr_plot_metric m, gr_plot_series *s,
                                     gr_error *err) {
    char *text = NULL;
    size_t cap = 0;
    ssize_t len;
    int64_t line = 0;
    while ((len = getline(&text, &cap, f)) >= 0) {
        double x, y;
        line++;
        if (gr_plot_line_point(text, (size_t)len, m, &x, &y)) gr_plot_series_add(s, x, y, line);
    }
    int e = errno;
    bool bad = ferror(f);
    free(text);
    if (bad) return gr_error_set(err, GR_ERR_DATA, "%s: cannot read (line %lld): %s", path,
                                 (long long)line + 1, strerror(e));
    gr_plot_series_settle(s);
    return GR_OK;
}

gr_status gr_plot_series_load(const char *run_dir, gr_plot_metric m, gr_plot_series *s, gr_error *err) {
    memset(s, 0, sizeof *s);
    struct stat sb;
    if (stat(run_dir, &sb) != 0)
        return gr_error_set(err, GR_ERR_DATA, "%s: no run directory: %s", run_dir, strerror(errno));
    if (!S_ISDIR(sb.st_mode)) return gr_error_set(err, GR_ERR_DATA, "%s: no run directory: not a directory", run_dir);
    size_t n = strlen(run_dir);
    bool slash = n > 0 && run_dir[n - 1] == '/';
    char *path = gr_xmalloc(n + sizeof "/metrics.jsonl");
    snprintf(path, n + sizeof "/metrics.jsonl", "%s%smetrics.jsonl", run_dir, slash ? "" : "/");
    FILE *f = gr_plot_open_regular(path, err);
    gr_status st = f ? gr_plot_series_read(f, path, m, s, err) : GR_ERR_DATA;
    if (f) fclose(f);
    free(path);
    if (st != GR_OK) gr_plot_series_free(s);
    return st;
}

void gr_plot_series_free(gr_plot_series *s) {
    free(s->pt);
    memset(s, 0, sizeof *s);
}
