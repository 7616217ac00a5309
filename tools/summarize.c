/* summarize.c — `gpurun summarize RUN_DIR... [--csv | --json] [--sort [-]KEY]`:
 * one row per run of a sweep (tools.h).
 *
 * Columns, in order: run (the directory as given); one per config.yaml key
 * whose value is not the same in all the runs (so the overrides of a sweep;
 * none for one run); status (summary.json's, with its exit code when not 0:
 * "stopped (75)"; without a summary "running" while a live process holds
 * the run's lock, else "interrupted"); then the figures of
 * gr_sum_metric_rows (steps, best_acc, last_acc, final_loss, samples_per_s,
 * wall_s), from summary.json, else from metrics.jsonl (summarize_read.c);
 * then the last val evaluation's other figures, val_loss and one column per
 * metric the jobs declare (val_accuracy_top5, ...), each in the order met.
 *
 * Output: an aligned text table (missing values "-"; one line per run:
 * control characters escaped, \n \r \t \xNN \u00NN, a backslash as \\);
 * --csv, RFC 4180 (CRLF line ends, fields with , " or a control character
 * quoted, missing values empty); --json, an array of objects keyed by column
 * name (numbers as written, missing null, control characters \uXXXX).
 * --sort KEY orders by a column ascending, --sort -KEY descending, numbers
 * by value and text bytewise, missing values last either way, ties in the
 * order given; without it, rows come in the order given.
 *
 * Exit codes: 0; 2 usage (no RUN_DIR, an unknown option, no such --sort
 * column); 3 a RUN_DIR that is not a run directory, or a config.yaml or
 * summary.json that cannot be read; 6 stdout cannot be written. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rundirs.h"
#include "summarize_read.h"
#include "tools.h"

#define GR_SUM_USAGE "gpurun summarize RUN_DIR... [--csv | --json] [--sort [-]KEY]"

typedef enum gr_sum_format { GR_SUM_TABLE, GR_SUM_CSV, GR_SUM_JSON } gr_sum_format;

typedef struct gr_sum_opts {
    const char **dirs;
    int n_dirs;
    gr_sum_format format;
    const char *sort; /* column name, NULL: as given */
    bool desc;
} gr_sum_opts;

typedef struct gr_sum_col {
    char *name;
    int decimals; /* in the text table; -1: as written */
} gr_sum_col;

/* rows x cols cells, row-major; order: the rows in output order */
typedef struct gr_sum_table {
    int rows, cols, cap_cols;
    gr_sum_col *col;
    gr_jval *cell;
    int *order;
} gr_sum_table;

static int gr_sum_usage(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int gr_sum_usage(const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "gpurun: summarize: %s (usage: " GR_SUM_USAGE ")\n", msg);
    return GR_ERR_USAGE;
}

/* ---- arguments ---- */

static int gr_sum_set_sort(gr_sum_opts *o, const char *key) {
    if (o->sort) return gr_sum_usage("--sort given twice");
    o->desc = key[0] == '-';
    o->sort = key + o->desc;
    if (!o->sort[0]) return gr_sum_usage("--sort needs a column name");
    return 0;
}

static int gr_sum_set_format(gr_sum_opts *o, gr_sum_format f) {
    if (o->format != GR_SUM_TABLE && o->format != f) return gr_sum_usage("--csv and --json exclude each other");
    o->format = f;
    return 0;
}

/* Fills o from argv; 0, an exit code, or -1 for --help (printed). */
static int gr_sum_args(int argc, char **argv, gr_sum_opts *o) {
    *o = (gr_sum_opts){.dirs = gr_xcalloc((size_t)argc + 1, sizeof *o->dirs)};
    bool opts = true;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        int rc = 0;
        if (!opts || a[0] != '-' || !a[1]) o->dirs[o->n_dirs++] = a;
        else if (!strcmp(a, "--")) opts = false;
        else if (!strcmp(a, "--csv")) rc = gr_sum_set_format(o, GR_SUM_CSV);
        else if (!strcmp(a, "--json")) rc = gr_sum_set_format(o, GR_SUM_JSON);
        else if (!strncmp(a, "--sort=", 7)) rc = gr_sum_set_sort(o, a + 7);
        else if (!strcmp(a, "--sort"))
            rc = i + 1 < argc ? gr_sum_set_sort(o, argv[++i]) : gr_sum_usage("--sort needs a column name");
        else if (!strcmp(a, "--help") || !strcmp(a, "-h")) return printf("usage: " GR_SUM_USAGE "\n"), -1;
        else rc = gr_sum_usage("unknown option '%s'", a);
        if (rc) return rc;
    }
    return o->n_dirs ? 0 : gr_sum_usage("no run directory given");
}

/* ---- the table ---- */

static gr_jval *gr_sum_at(const gr_sum_table *t, int row, int col) {
    return &t->cell[(size_t)row * (size_t)t->cols + (size_t)col];
}

static void gr_sum_add_col(gr_sum_table *t, const char *name, int decimals) {
    GR_GROW(t->col, t->cap_cols, t->cols + 1);
    t->col[t->cols++] = (gr_sum_col){gr_xstrdup(name), decimals};
}

static bool gr_sum_same(const gr_jval *a, const gr_jval *b) {
    return a->kind == b->kind && (a->text && b->text ? !strcmp(a->text, b->text) : a->text == b->text);
}

static void gr_sum_copy(gr_jval *dst, const gr_jval *src) {
    if (src->kind != GR_J_NULL) gr_jval_set(dst, src->kind, src->num, src->text);
}

/* One config key of one run: runs[run].cfg[idx]. */
typedef struct gr_sum_entry {
    const char *key;
    int run, idx;
} gr_sum_entry;

/* A key's entries (all runs'), entries[start..start+len), and where it first appears. */
typedef struct gr_sum_group {
    int start, len, run, idx;
} gr_sum_group;

static int gr_sum_entry_cmp(const void *pa, const void *pb) {
    const gr_sum_entry *a = pa, *b = pb;
    int c = strcmp(a->key, b->key);
    return c ? c : a->run != b->run ? a->run - b->run : a->idx - b->idx;
}

static int gr_sum_group_cmp(const void *pa, const void *pb) {
    const gr_sum_group *a = pa, *b = pb;
    return a->run != b->run ? a->run - b->run : a->idx - b->idx;
}

/* Every run's config keys, sorted by key (then run): n_entries in *n. */
static gr_sum_entry *gr_sum_entries(const gr_sum_run *runs, int n_runs, int *n) {
    size_t total = 0;
    for (int r = 0; r < n_runs; r++) total += (size_t)runs[r].n_cfg;
    gr_sum_entry *e = gr_xmalloc((total + 1) * sizeof *e);
    *n = 0;
    for (int r = 0; r < n_runs; r++)
        for (int i = 0; i < runs[r].n_cfg; i++) e[(*n)++] = (gr_sum_entry){runs[r].cfg[i].key, r, i};
    qsort(e, (size_t)*n, sizeof *e, gr_sum_entry_cmp);
    return e;
}

/* The keys whose values are not the same in all runs (absent in one counts),
 * in the order they first appear (run, then place in its config.yaml). */
static gr_sum_group *gr_sum_differing(const gr_sum_run *runs, int n_runs, const gr_sum_entry *e, int n,
                                      int *n_groups) {
    gr_sum_group *g = gr_xmalloc(((size_t)n + 1) * sizeof *g);
    *n_groups = 0;
    for (int i = 0, j; i < n; i = j) {
        bool differ = false;
        const gr_jval *v0 = &runs[e[i].run].cfg[e[i].idx].val;
        for (j = i + 1; j < n && !strcmp(e[j].key, e[i].key); j++)
            differ |= !gr_sum_same(v0, &runs[e[j].run].cfg[e[j].idx].val);
        if (differ || j - i != n_runs) g[(*n_groups)++] = (gr_sum_group){i, j - i, e[i].run, e[i].idx};
    }
    qsort(g, (size_t)*n_groups, sizeof *g, gr_sum_group_cmp);
    return g;
}

static void gr_sum_table_build(gr_sum_table *t, const gr_sum_run *runs, int n) {
    *t = (gr_sum_table){.rows = n};
    int n_entries, n_over;
    gr_sum_entry *e = gr_sum_entries(runs, n, &n_entries);
    gr_sum_group *g = gr_sum_differing(runs, n, e, n_entries, &n_over);
    gr_sum_add_col(t, "run", -1);
    for (int k = 0; k < n_over; k++) gr_sum_add_col(t, e[g[k].start].key, -1);
    gr_sum_add_col(t, "status", -1);
    for (int m = 0; m < GR_SUM_N_METRICS; m++)
        gr_sum_add_col(t, gr_sum_metric_rows[m].column, gr_sum_metric_rows[m].decimals);
    const int first_ev = t->cols; /* the evaluations' other figures: each name any run has, in order met */
    for (int r = 0; r < n; r++)
        for (int i = 0; i < runs[r].n_evm; i++) {
            int c = first_ev;
            while (c < t->cols && strcmp(t->col[c].name, runs[r].evm[i].key) != 0) c++;
            if (c == t->cols) gr_sum_add_col(t, runs[r].evm[i].key, 4);
        }
    t->cell = gr_xcalloc((size_t)n * (size_t)t->cols, sizeof *t->cell);
    t->order = gr_xmalloc((size_t)n * sizeof *t->order);
    for (int k = 0; k < n_over; k++)
        for (int i = g[k].start; i < g[k].start + g[k].len; i++)
            gr_sum_copy(gr_sum_at(t, e[i].run, 1 + k), &runs[e[i].run].cfg[e[i].idx].val);
    for (int r = 0; r < n; r++) {
        t->order[r] = r;
        gr_jval_set(gr_sum_at(t, r, 0), GR_J_STR, 0, runs[r].dir);
        gr_jval_set(gr_sum_at(t, r, n_over + 1), GR_J_STR, 0, runs[r].status);
        for (int m = 0; m < GR_SUM_N_METRICS; m++) gr_sum_copy(gr_sum_at(t, r, n_over + 2 + m), &runs[r].metric[m]);
        for (int i = 0; i < runs[r].n_evm; i++)
            for (int c = first_ev; c < t->cols; c++)
                if (!strcmp(t->col[c].name, runs[r].evm[i].key)) gr_sum_copy(gr_sum_at(t, r, c), &runs[r].evm[i].val);
    }
    free(g);
    free(e);
}

static void gr_sum_table_free(gr_sum_table *t) {
    for (size_t i = 0; i < (size_t)t->rows * (size_t)t->cols; i++) gr_jval_free(&t->cell[i]);
    for (int c = 0; c < t->cols; c++) free(t->col[c].name);
    free(t->cell);
    free(t->col);
    free(t->order);
}

/* ---- sorting ---- */

typedef struct gr_sum_key {
    const gr_jval *cell;
    int row;
    bool desc;
} gr_sum_key;

/* Missing last; numbers before text, by value; text bytewise; then the row. */
static int gr_sum_key_cmp(const void *pa, const void *pb) {
    const gr_sum_key *a = pa, *b = pb;
    const gr_jval *x = a->cell, *y = b->cell;
    int c = (x->kind == GR_J_NULL) - (y->kind == GR_J_NULL);
    if (!c && x->kind != GR_J_NULL) {
        c = (x->kind != GR_J_NUM) - (y->kind != GR_J_NUM);
        if (!c) c = x->kind == GR_J_NUM ? (x->num > y->num) - (x->num < y->num) : strcmp(x->text, y->text);
        if (a->desc) c = -c;
    }
    return c ? c : a->row - b->row;
}

static int gr_sum_sort(gr_sum_table *t, const gr_sum_opts *o) {
    if (!o->sort) return 0;
    int col = -1;
    for (int c = 0; c < t->cols && col < 0; c++)
        if (!strcmp(t->col[c].name, o->sort)) col = c;
    if (col < 0) {
        char names[400] = "";
        size_t len = 0;
        for (int c = 0; c < t->cols && len < sizeof names; c++)
            len += (size_t)snprintf(names + len, sizeof names - len, "%s%s", c ? ", " : "", t->col[c].name);
        return gr_sum_usage("--sort: no column '%s' (columns: %s)", o->sort, names);
    }
    gr_sum_key *k = gr_xmalloc((size_t)t->rows * sizeof *k);
    for (int r = 0; r < t->rows; r++) k[r] = (gr_sum_key){gr_sum_at(t, r, col), r, o->desc};
    qsort(k, (size_t)t->rows, sizeof *k, gr_sum_key_cmp);
    for (int r = 0; r < t->rows; r++) t->order[r] = k[r].row;
    free(k);
    return 0;
}

/* ---- output ---- */

/* A control character as UTF-8 writes it: C0 and DEL (one byte), or C1, U+0080..U+009F (0xC2
 * then 0x80..0x9F; some terminals take U+009B as ESC [); its code, else -1. *len: its bytes. */
static int gr_sum_control(const unsigned char *c, int *len) {
    *len = 1;
    if (*c < 0x20 || *c == 0x7f) return *c;
    if (c[0] == 0xc2 && c[1] >= 0x80 && c[1] <= 0x9f) return *len = 2, c[1];
    return -1;
}

/* s as one line of the text table, malloc'ed: control characters as \n, \r, \t, \xNN (C0,
 * DEL) or \u00NN (C1) and a backslash as two, so that no value (a run's name, a status)
 * moves the cursor, retitles the window or starts a row of its own. */
static char *gr_sum_escape(const char *s) {
    char *out = gr_xmalloc(4 * strlen(s) + 1), *o = out;
    for (const unsigned char *c = (const unsigned char *)s; *c;) {
        int len, k = gr_sum_control(c, &len);
        if (*c == '\\') o += sprintf(o, "\\\\");
        else if (k == '\n') o += sprintf(o, "\\n");
        else if (k == '\r') o += sprintf(o, "\\r");
        else if (k == '\t') o += sprintf(o, "\\t");
        else if (k >= 0) o += sprintf(o, len == 1 ? "\\x%02x" : "\\u%04x", (unsigned)k);
        else *o++ = (char)*c;
        c += len;
    }
    *o = '\0';
    return out;
}

/* The cell as the text table shows it, malloc'ed: "-" when missing, a
 * number to the column's decimals, else the text escaped. */
static char *gr_sum_show(const gr_jval *c, int decimals) {
    char buf[64];
    if (c->kind == GR_J_NULL) return gr_xstrdup("-");
    if (c->kind != GR_J_NUM || decimals < 0) return gr_sum_escape(c->text);
    snprintf(buf, sizeof buf, "%.*f", decimals, c->num);
    return gr_xstrdup(buf);
}

/* A column is right-aligned when every value in it is a number. */
static bool gr_sum_numeric(const gr_sum_table *t, int c) {
    bool any = false;
    for (int r = 0; r < t->rows; r++) {
        gr_jkind k = gr_sum_at(t, r, c)->kind;
        if (k != GR_J_NUM && k != GR_J_NULL) return false;
        any |= k == GR_J_NUM;
    }
    return any || t->col[c].decimals >= 0;
}

static void gr_sum_print_row(const gr_sum_table *t, const char *const *text, const int *width, const bool *right,
                             FILE *f) {
    for (int c = 0; c < t->cols; c++) {
        const char *sep = c ? "  " : "";
        bool last = c == t->cols - 1;
        if (right[c]) fprintf(f, "%s%*s", sep, width[c], text[c]);
        else fprintf(f, "%s%-*s", sep, last ? 0 : width[c], text[c]);
    }
    fputc('\n', f);
}

static void gr_sum_write_table(const gr_sum_table *t, FILE *f) {
    const size_t cols = (size_t)t->cols, cells = (size_t)(t->rows + 1) * cols;
    int *width = gr_xcalloc(cols, sizeof *width);
    bool *right = gr_xcalloc(cols, sizeof *right);
    char **text = gr_xcalloc(cells, sizeof *text); /* the header's row, then the rows in order */
    for (int c = 0; c < t->cols; c++) {
        right[c] = gr_sum_numeric(t, c);
        text[c] = gr_sum_escape(t->col[c].name);
        for (int r = 0; r < t->rows; r++)
            text[(size_t)(r + 1) * cols + (size_t)c] = gr_sum_show(gr_sum_at(t, t->order[r], c), t->col[c].decimals);
        for (int r = 0; r <= t->rows; r++) width[c] = GR_MAX(width[c], (int)strlen(text[(size_t)r * cols + (size_t)c]));
    }
    for (int r = 0; r <= t->rows; r++) gr_sum_print_row(t, (const char *const *)text + (size_t)r * cols, width, right, f);
    for (size_t i = 0; i < cells; i++) free(text[i]);
    free(width), free(right), free(text);
}

/* RFC 4180: a field holding a comma, a quote or any control character
 * (CR, LF, ESC...) is quoted, its quotes doubled, so that no value starts a
 * row and a CSV reader gets it back as it was. */
static bool gr_sum_csv_quoted(const char *s) {
    for (const unsigned char *c = (const unsigned char *)s; *c; c++)
        if (*c == ',' || *c == '"' || *c < 0x20 || *c == 0x7f) return true;
    return false;
}

static void gr_sum_csv_field(const char *s, FILE *f) {
    if (!gr_sum_csv_quoted(s)) {
        fputs(s, f);
        return;
    }
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"') fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

static void gr_sum_write_csv(const gr_sum_table *t, FILE *f) {
    for (int c = 0; c < t->cols; c++) fputs(c ? "," : "", f), gr_sum_csv_field(t->col[c].name, f);
    fputs("\r\n", f);
    for (int i = 0; i < t->rows; i++) {
        for (int c = 0; c < t->cols; c++) {
            const gr_jval *x = gr_sum_at(t, t->order[i], c);
            fputs(c ? "," : "", f);
            gr_sum_csv_field(x->kind == GR_J_NULL ? "" : x->text, f);
        }
        fputs("\r\n", f);
    }
}

/* A JSON string: control characters (C0, DEL, C1: gr_sum_control) as \n,
 * \t or \u00NN, which a JSON reader turns back into the same string. */
static void gr_sum_json_string(const char *s, FILE *f) {
    fputc('"', f);
    for (const unsigned char *c = (const unsigned char *)s; *c;) {
        int len, k = gr_sum_control(c, &len);
        if (*c == '"' || *c == '\\') fprintf(f, "\\%c", *c);
        else if (k == '\n') fputs("\\n", f);
        else if (k == '\t') fputs("\\t", f);
        else if (k >= 0) fprintf(f, "\\u%04x", (unsigned)k);
        else fputc(*c, f);
        c += len;
    }
    fputc('"', f);
}

static void gr_sum_write_json(const gr_sum_table *t, FILE *f) {
    fputs("[\n", f);
    for (int i = 0; i < t->rows; i++) {
        fputs("  {", f);
        for (int c = 0; c < t->cols; c++) {
            const gr_jval *x = gr_sum_at(t, t->order[i], c);
            fputs(c ? ", " : "", f);
            gr_sum_json_string(t->col[c].name, f);
            fputs(": ", f);
            if (x->kind == GR_J_NULL) fputs("null", f);
            else if (x->kind == GR_J_STR) gr_sum_json_string(x->text, f);
            else fputs(x->text, f); /* a JSON number (gr_json_is_number) or true/false */
        }
        fputs(i + 1 < t->rows ? "},\n" : "}\n", f);
    }
    fputs("]\n", f);
}

static int gr_sum_write(const gr_sum_table *t, gr_sum_format format) {
    if (format == GR_SUM_CSV) gr_sum_write_csv(t, stdout);
    else if (format == GR_SUM_JSON) gr_sum_write_json(t, stdout);
    else gr_sum_write_table(t, stdout);
    errno = 0;
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "gpurun: summarize: cannot write the output: %s\n", strerror(errno ? errno : EIO));
        return GR_ERR_CKPT; /* 6: an output that cannot be written (tools.h) */
    }
    return 0;
}

/* ---- the command ---- */

int gr_cmd_summarize(int argc, char **argv) {
    gr_sum_opts o;
    int rc = gr_sum_args(argc, argv, &o);
    if (rc) {
        free(o.dirs);
        return rc < 0 ? 0 : rc;
    }
    int n_dirs;
    char **dirs = gr_rundirs_expand("summarize", o.dirs, o.n_dirs, &n_dirs);
    if (!n_dirs) {
        fprintf(stderr, "gpurun: summarize: none of the %d arguments is a run directory or holds one\n", o.n_dirs);
        rc = GR_ERR_DATA;
    }
    gr_sum_run *runs = gr_xcalloc((size_t)n_dirs + 1, sizeof *runs);
    int loaded = 0;
    for (; loaded < n_dirs && !rc; loaded++) {
        gr_error err = {0};
        if (gr_sum_run_load(&runs[loaded], dirs[loaded], &err)) {
            char *msg = gr_sum_escape(err.msg); /* it names the directory, which may hold anything */
            fprintf(stderr, "gpurun: summarize: %s\n", msg);
            free(msg);
            rc = err.status;
        }
    }
    if (!rc) {
        gr_sum_table t;
        gr_sum_table_build(&t, runs, n_dirs);
        rc = gr_sum_sort(&t, &o);
        if (!rc) rc = gr_sum_write(&t, o.format);
        gr_sum_table_free(&t);
    }
    for (int i = 0; i < loaded; i++) gr_sum_run_free(&runs[i]);
    free(runs);
    gr_rundirs_free(dirs, n_dirs);
    free(o.dirs);
    return rc;
}
