/* plot_data.c — a run's series of one metric, from its metrics.jsonl (DESIGN
 * 1.3), for `gpurun plot` (plot_parts.h).
 *
 * Each line is read as one flat JSON object (strings, numbers, true, false,
 * null; a nested object or array is skipped over as a value). A line that is
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

/* ---- the flat-object reader ---- */

typedef enum gr_plot_jtype { GR_PLOT_JSTR, GR_PLOT_JNUM, GR_PLOT_JOTHER } gr_plot_jtype;

/* A cursor over one NUL-terminated line. */
typedef struct gr_plot_jcur {
    const char *p, *end;
} gr_plot_jcur;

/* A value; strings longer than str holds are cut (no key or kind we look
 * for is that long). */
typedef struct gr_plot_jval {
    gr_plot_jtype type;
    double num;
    char str[32];
} gr_plot_jval;

/* What a line says that matters here; a repeated key: the last one counts. */
typedef struct gr_plot_jline {
    const char *key; /* the metric's key */
    char kind[32], split[32];
    bool has_step, has_val;
    double step, val;
} gr_plot_jline;

static bool gr_plot_jdigit(const gr_plot_jcur *c) {
    return c->p < c->end && *c->p >= '0' && *c->p <= '9';
}

static void gr_plot_jws(gr_plot_jcur *c) {
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\r' || *c->p == '\n')) c->p++;
}

static bool gr_plot_jlit(gr_plot_jcur *c, const char *lit) {
    size_t n = strlen(lit);
    if ((size_t)(c->end - c->p) < n || memcmp(c->p, lit, n) != 0) return false;
    c->p += n;
    return true;
}

/* The escape after a backslash; non-ASCII \u escapes read as '?'. */
static bool gr_plot_jescape(gr_plot_jcur *c, char *ch) {
    if (c->p >= c->end) return false;
    char e = *c->p++;
    static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
    const char *k = strchr(from, e);
    if (e != '\0' && k) {
        *ch = to[k - from];
        return true;
    }
    if (e != 'u' || c->end - c->p < 4) return false;
    unsigned code = 0;
    for (int i = 0; i < 4; i++) {
        char h = *c->p++;
        unsigned d = h >= '0' && h <= '9' ? (unsigned)(h - '0')
                     : h >= 'a' && h <= 'f' ? (unsigned)(h - 'a' + 10)
                     : h >= 'A' && h <= 'F' ? (unsigned)(h - 'A' + 10)
                                            : 16u;
        if (d == 16u) return false;
        code = code * 16 + d;
    }
    *ch = code > 0 && code < 0x80 ? (char)code : '?';
    return true;
}

/* A string (at its opening quote) into out[cap], cut to fit. */
static bool gr_plot_jstring(gr_plot_jcur *c, char *out, size_t cap) {
    if (c->p >= c->end || *c->p != '"') return false;
    c->p++;
    size_t n = 0;
    while (c->p < c->end) {
        char ch = *c->p++;
        if (ch == '"') {
            out[n] = '\0';
            return true;
        }
        if ((unsigned char)ch < 0x20) return false;
        if (ch == '\\' && !gr_plot_jescape(c, &ch)) return false;
        if (n + 1 < cap) out[n++] = ch;
    }
    return false;
}

/* A number by JSON's grammar (no NaN, inf, hex or leading '+'). */
static bool gr_plot_jnumber(gr_plot_jcur *c, double *v) {
    const char *s = c->p;
    if (c->p < c->end && *c->p == '-') c->p++;
    if (!gr_plot_jdigit(c)) return false;
    if (*c->p == '0') c->p++;
    else while (gr_plot_jdigit(c)) c->p++;
    if (c->p < c->end && *c->p == '.') {
        c->p++;
        if (!gr_plot_jdigit(c)) return false;
        while (gr_plot_jdigit(c)) c->p++;
    }
    if (c->p < c->end && (*c->p == 'e' || *c->p == 'E')) {
        c->p++;
        if (c->p < c->end && (*c->p == '+' || *c->p == '-')) c->p++;
        if (!gr_plot_jdigit(c)) return false;
        while (gr_plot_jdigit(c)) c->p++;
    }
    char *e;
    *v = strtod(s, &e); /* the line is NUL-terminated; the grammar above is a prefix strtod takes whole */
    return e == c->p;
}

/* A nested object or array, skipped over (brackets counted outside strings). */
static bool gr_plot_jnested(gr_plot_jcur *c) {
    int depth = 0;
    char junk[2];
    while (c->p < c->end) {
        char ch = *c->p;
        if (ch == '"') {
            if (!gr_plot_jstring(c, junk, sizeof junk)) return false;
            continue;
        }
        c->p++;
        if (ch == '{' || ch == '[') depth++;
        else if ((ch == '}' || ch == ']') && --depth == 0) return true;
    }
    return false;
}

static bool gr_plot_jvalue(gr_plot_jcur *c, gr_plot_jval *v) {
    v->type = GR_PLOT_JOTHER;
    if (c->p >= c->end) return false;
    char ch = *c->p;
    if (ch == '"') {
        v->type = GR_PLOT_JSTR;
        return gr_plot_jstring(c, v->str, sizeof v->str);
    }
    if (ch == '-' || (ch >= '0' && ch <= '9')) {
        v->type = GR_PLOT_JNUM;
        return gr_plot_jnumber(c, &v->num);
    }
    if (ch == '{' || ch == '[') return gr_plot_jnested(c);
    return gr_plot_jlit(c, "true") || gr_plot_jlit(c, "false") || gr_plot_jlit(c, "null");
}

static void gr_plot_jtake(gr_plot_jline *l, const char *key, const gr_plot_jval *v) {
    if (strcmp(key, "kind") == 0) {
        snprintf(l->kind, sizeof l->kind, "%s", v->type == GR_PLOT_JSTR ? v->str : "");
    } else if (strcmp(key, "split") == 0) {
        snprintf(l->split, sizeof l->split, "%s", v->type == GR_PLOT_JSTR ? v->str : "");
    } else if (strcmp(key, "step") == 0) {
        l->has_step = v->type == GR_PLOT_JNUM;
        l->step = v->num;
    }
    if (strcmp(key, l->key) == 0) { /* after "step": a metric could be called so */
        l->has_val = v->type == GR_PLOT_JNUM && isfinite(v->num) && fabs(v->num) <= GR_PLOT_MAX_ABS;
        l->val = v->num;
    }
}

/* Reads text[0, len) (NUL-terminated there) as one flat object into *l;
 * false when it is anything else. */
static bool gr_plot_jobject(const char *text, size_t len, gr_plot_jline *l) {
    gr_plot_jcur c = {text, text + len};
    gr_plot_jws(&c);
    if (!gr_plot_jlit(&c, "{")) return false;
    gr_plot_jws(&c);
    bool more = !gr_plot_jlit(&c, "}");
    while (more) {
        char key[32];
        gr_plot_jval v;
        gr_plot_jws(&c);
        if (!gr_plot_jstring(&c, key, sizeof key)) return false;
        gr_plot_jws(&c);
        if (!gr_plot_jlit(&c, ":")) return false;
        gr_plot_jws(&c);
        if (!gr_plot_jvalue(&c, &v)) return false;
        gr_plot_jtake(l, key, &v);
        gr_plot_jws(&c);
        more = gr_plot_jlit(&c, ",");
        if (!more && !gr_plot_jlit(&c, "}")) return false;
    }
    gr_plot_jws(&c);
    return c.p == c.end;
}

/* ---- the series ---- */

/* The point a line holds for metric m; false for lines of other kinds and
 * for torn or malformed ones. */
static bool gr_plot_line_point(const char *text, size_t len, gr_plot_metric m, double *x, double *y) {
    gr_plot_jline l = {.key = gr_plot_metrics[m].key};
    if (!gr_plot_jobject(text, len, &l)) return false;
    if (strcmp(l.kind, gr_plot_metrics[m].kind) != 0) return false;
    if (strcmp(l.kind, "eval") == 0 && l.split[0] && strcmp(l.split, "val") != 0) return false;
    if (!l.has_step || !l.has_val || !(l.step >= 0 && l.step <= 9007199254740992.0) || l.step != floor(l.step))
        return false;
    *x = l.step;
    *y = l.val;
    return true;
}

static void gr_plot_series_add(gr_plot_series *s, double x, double y, int64_t line) {
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 256;
        s->pt = gr_xrealloc(s->pt, (size_t)s->cap * sizeof *s->pt);
    }
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
