/* plot.c — `gpurun plot RUN_DIR... -o OUT.png [--metric M] [--size WxH]`
 * (tools.h): one metric (loss [default], accuracy, lr, val_loss,
 * samples_per_s) of each run against the optimizer step, all runs in one PNG
 * (800x500 by default, 200x150 to 4000x4000): white, a framed plot area with
 * 1-2-5 ticks and labels, axis titles, the metric as title, one tab10 colour
 * per run and a legend naming each run by its directory's basename (by the
 * path as given where two basenames are the same). The parts are listed in
 * plot_parts.h.
 *
 * Options may come anywhere; "--" ends them (a RUN_DIR starting with '-').
 * Exit codes: 0; 2 usage (no RUN_DIR, no -o, an unknown option or metric, a
 * bad --size); 3 a RUN_DIR without a readable metrics.jsonl, or no run with
 * a value of the metric; 6 OUT.png cannot be written, or exists and is not a
 * regular file (nothing is left behind: the PNG goes to a private
 * OUT.png.<pid>.<hex>.tmp first).
 *
 * A RUN_DIR may be a sweep's directory, and entries of a glob that are not
 * runs are skipped (rundirs.h).
 *
 * On success one line on stdout says what was written ("wrote OUT.png (loss
 * of 3 runs)"); with -v, instead, what was drawn, where (for tests and
 * scripts that check a plot's pixels):
 *   plot: x XLO..XHI, y YLO..YHI, N runs, WxH, frame X0,Y0 X1,Y1, legend X0,Y0 X1,Y1; wrote OUT.png
 * A point (step, value) is at pixel coordinates
 *   px = X0 + (step - XLO) / (XHI - XLO) * (X1 - X0)
 *   py = Y1 - (value - YLO) / (YHI - YLO) * (Y1 - Y0)
 * (continuous: pixel (i, j) covers [i, i+1) x [j, j+1)); curves are clipped
 * to [X0, X1) x [Y0, Y1); the legend box [X0, X1) x [Y0, Y1) is drawn over
 * them. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plot_parts.h"
#include "rundirs.h"
#include "tools.h"

#define GR_PLOT_USAGE \
    "gpurun plot RUN_DIR... -o OUT.png [--metric loss|accuracy|lr|val_loss|samples_per_s] [--size WxH] [-v]"

typedef struct gr_plot_opts {
    const char **dirs;
    int ndirs;
    const char *out;
    gr_plot_metric metric;
    int w, h;
    bool verbose; /* -v: the geometry line */
} gr_plot_opts;

static int gr_plot_usage(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int gr_plot_usage(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "gpurun: plot: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, " (usage: %s)\n", GR_PLOT_USAGE);
    va_end(ap);
    return GR_ERR_USAGE;
}

/* "WxH", both decimal, within 200x150 .. 4000x4000. */
static bool gr_plot_parse_size(const char *s, int *w, int *h) {
    long v[2];
    for (int i = 0; i < 2; i++) {
        if (*s < '0' || *s > '9') return false;
        char *e;
        errno = 0;
        v[i] = strtol(s, &e, 10);
        if (errno || *e != (i == 0 ? 'x' : '\0')) return false;
        s = e + 1;
    }
    if (v[0] < 200 || v[0] > 4000 || v[1] < 150 || v[1] > 4000) return false;
    *w = (int)v[0], *h = (int)v[1];
    return true;
}

/* The value of the option at argv[*i] ("--opt V" or "--opt=V"); NULL when it
 * is not that option. *missing: it is, but without a value. */
static const char *gr_plot_optval(int argc, char **argv, int *i, const char *name, bool *missing) {
    size_t n = strlen(name);
    if (strncmp(argv[*i], name, n) != 0) return NULL;
    if (argv[*i][n] == '=' && name[1] == '-') return argv[*i] + n + 1;
    if (argv[*i][n] != '\0') return NULL;
    if (*i + 1 >= argc) {
        *missing = true;
        return NULL;
    }
    return argv[++*i];
}

/* One option at argv[*i]: returns -1 when it was one and is fine, else the exit code. */
static int gr_plot_option(int argc, char **argv, int *i, gr_plot_opts *o) {
    const char *a = argv[*i], *v;
    bool missing = false;
    if ((v = gr_plot_optval(argc, argv, i, "-o", &missing))) {
        if (!*v) return gr_plot_usage("-o: an empty path");
        o->out = v;
    } else if ((v = gr_plot_optval(argc, argv, i, "--metric", &missing))) {
        if (!gr_plot_metric_parse(v, &o->metric))
            return gr_plot_usage("unknown metric '%s' (loss, accuracy, lr, val_loss or samples_per_s)", v);
    } else if ((v = gr_plot_optval(argc, argv, i, "--size", &missing))) {
        if (!gr_plot_parse_size(v, &o->w, &o->h))
            return gr_plot_usage("--size '%s': expected WxH from 200x150 to 4000x4000", v);
    } else if (!strcmp(a, "-v") || !strcmp(a, "--verbose")) {
        o->verbose = true;
    } else if (missing) {
        return gr_plot_usage("%s needs a value", a);
    } else {
        return gr_plot_usage("unknown option '%s'", a);
    }
    return -1;
}

/* Fills *o from argv; -1 when fine, else the exit code (the error printed). */
static int gr_plot_parse(int argc, char **argv, gr_plot_opts *o) {
    *o = (gr_plot_opts){.metric = GR_PLOT_LOSS, .w = 800, .h = 500};
    o->dirs = gr_xcalloc((size_t)argc + 1, sizeof *o->dirs);
    bool dirs_only = false;
    for (int i = 0; i < argc; i++) {
        if (dirs_only || argv[i][0] != '-') {
            o->dirs[o->ndirs++] = argv[i];
        } else if (strcmp(argv[i], "--") == 0) {
            dirs_only = true;
        } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            printf("usage: %s\n", GR_PLOT_USAGE);
            return 0;
        } else {
            int rc = gr_plot_option(argc, argv, &i, o);
            if (rc >= 0) return rc;
        }
    }
    if (o->ndirs == 0) return gr_plot_usage("no RUN_DIR given");
    if (!o->out) return gr_plot_usage("no output given (-o OUT.png)");
    return -1;
}

/* The last component of path (trailing slashes ignored) into buf. */
static void gr_plot_basename(const char *path, char *buf, size_t cap) {
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/') n--;
    size_t b = n;
    while (b > 0 && path[b - 1] != '/') b--;
    if (b == n) b = 0; /* "/" */
    snprintf(buf, cap, "%.*s", (int)(n - b), path + b);
}

/* Each run's legend label: its basename, or its path when another run has the same basename. */
static char **gr_plot_labels(const gr_plot_opts *o) {
    char **lab = gr_xcalloc((size_t)o->ndirs, sizeof *lab);
    for (int i = 0; i < o->ndirs; i++) {
        size_t cap = strlen(o->dirs[i]) + 1;
        lab[i] = gr_xmalloc(cap);
        gr_plot_basename(o->dirs[i], lab[i], cap);
    }
    bool *clash = gr_xcalloc((size_t)o->ndirs, sizeof *clash);
    for (int i = 0; i < o->ndirs; i++)
        for (int j = i + 1; j < o->ndirs; j++)
            if (strcmp(lab[i], lab[j]) == 0) clash[i] = clash[j] = true;
    for (int i = 0; i < o->ndirs; i++)
        if (clash[i]) snprintf(lab[i], strlen(o->dirs[i]) + 1, "%s", o->dirs[i]);
    free(clash);
    return lab;
}

/* Draws the runs and writes the PNG; the exit code. */
static int gr_plot_draw(const gr_plot_opts *o, const gr_plot_run *runs) {
    gr_plot_canvas c;
    gr_plot_frame f;
    gr_error err = {0};
    gr_plot_canvas_init(&c, o->w, o->h);
    gr_plot_chart(&c, gr_plot_metric_name(o->metric), runs, o->ndirs, &f);
    gr_status st = gr_plot_png_write(o->out, &c, &err);
    gr_plot_canvas_free(&c);
    if (st != GR_OK) {
        fprintf(stderr, "gpurun: plot: %s\n", err.msg);
        return st;
    }
    if (o->verbose)
        printf("plot: x %.9g..%.9g, y %.9g..%.9g, %d runs, %dx%d, frame %d,%d %d,%d, legend %d,%d %d,%d; wrote %s\n",
               f.xlo, f.xhi, f.ylo, f.yhi, o->ndirs, o->w, o->h, f.fx0, f.fy0, f.fx1, f.fy1, f.lx0, f.ly0, f.lx1,
               f.ly1, o->out);
    else
        printf("wrote %s (%s of %d run%s)\n", o->out, gr_plot_metric_name(o->metric), o->ndirs, o->ndirs == 1 ? "" : "s");
    return 0;
}

/* Loads the runs' series, checks there is something to draw, draws it. */
static int gr_plot_runs(const gr_plot_opts *o) {
    gr_plot_series *s = gr_xcalloc((size_t)o->ndirs, sizeof *s);
    gr_plot_run *runs = gr_xcalloc((size_t)o->ndirs, sizeof *runs);
    char **lab = gr_plot_labels(o);
    gr_error err = {0};
    int rc = 0, loaded = 0;
    int64_t points = 0;
    for (; loaded < o->ndirs && rc == 0; loaded++) {
        if (gr_plot_series_load(o->dirs[loaded], o->metric, &s[loaded], &err) != GR_OK) {
            fprintf(stderr, "gpurun: plot: %s\n", err.msg);
            rc = GR_ERR_DATA;
        }
        runs[loaded] = (gr_plot_run){lab[loaded], &s[loaded]};
        points += s[loaded].n;
    }
    if (rc == 0 && points == 0) {
        if (o->ndirs == 1)
            fprintf(stderr, "gpurun: plot: %s has no values in %s/metrics.jsonl\n", gr_plot_metric_name(o->metric),
                    o->dirs[0]);
        else
            fprintf(stderr, "gpurun: plot: %s has no values in the metrics.jsonl of any of the %d runs\n",
                    gr_plot_metric_name(o->metric), o->ndirs);
        rc = GR_ERR_DATA;
    }
    if (rc == 0) rc = gr_plot_draw(o, runs);
    for (int i = 0; i < o->ndirs; i++) {
        if (i < loaded) gr_plot_series_free(&s[i]);
        free(lab[i]);
    }
    free(lab);
    free(runs);
    free(s);
    return rc;
}

int gr_cmd_plot(int argc, char **argv) {
    gr_plot_opts o;
    int rc = gr_plot_parse(argc, argv, &o);
    if (rc < 0) {
        const char **given = o.dirs;
        int n_given = o.ndirs;
        char **dirs = gr_rundirs_expand("plot", given, n_given, &o.ndirs);
        o.dirs = (const char **)dirs;
        if (o.ndirs) rc = gr_plot_runs(&o);
        else fprintf(stderr, "gpurun: plot: none of the %d arguments is a run directory or holds one\n", n_given), rc = GR_ERR_DATA;
        gr_rundirs_free(dirs, o.ndirs);
        o.dirs = given;
    }
    free(o.dirs);
    fflush(stdout);
    return rc;
}
