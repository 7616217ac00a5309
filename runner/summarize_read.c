/* summarize_read.c — one run directory for `gpurun summarize` (see
 * summarize_read.h): config.yaml through the config tree (config/cfg.h, on
 * libyaml), summary.json and metrics.jsonl through a small JSON reader of
 * flat objects (string, number, bool and null values; a nested object or
 * array is checked and skipped). */
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
#include "rundir.h"

#define GR_SUM_SUMMARY_MAX ((size_t)1 << 20) /* summary.json is one line of some 1 KB */
#define GR_SUM_JSON_DEPTH 32                 /* nesting a skipped value may have */

const gr_sum_metric_row gr_sum_metric_rows[GR_SUM_N_METRICS] = {
    [GR_SUM_STEPS] = {"steps", "steps", GR_SUM_TRAIN_LAST, "step", 0},
    [GR_SUM_BEST_ACC] = {"best_acc", "best_val_accuracy", GR_SUM_EVAL_MAX, "accuracy", 4},
    [GR_SUM_LAST_ACC] = {"last_acc", "last_val_accuracy", GR_SUM_EVAL_LAST, "accuracy", 4},
    [GR_SUM_FINAL_LOSS] = {"final_loss", "final_train_loss", GR_SUM_TRAIN_LAST, "loss", 4},
    [GR_SUM_SAMPLES_PER_S] = {"samples_per_s", "samples_per_s", GR_SUM_TRAIN_LAST, "samples_per_s", 1},
    [GR_SUM_WALL_S] = {"wall_s", "wall_s", GR_SUM_TRAIN_LAST, "time_s", 1},
};

void gr_sum_cell_set(gr_sum_cell *c, gr_sum_kind kind, double num, const char *text) {
    char *t = text ? gr_xstrdup(text) : NULL;
    free(c->text);
    *c = (gr_sum_cell){kind, num, t};
}

void gr_sum_cell_free(gr_sum_cell *c) {
    free(c->text);
    *c = (gr_sum_cell){0};
}

/* ---- JSON: one flat object ---- */

typedef struct gr_sum_jfield {
    char *key;
    gr_sum_cell val;
} gr_sum_jfield;

typedef struct gr_sum_jobj {
    gr_sum_jfield *f;
    int n, cap;
} gr_sum_jobj;

typedef struct gr_sum_jp {
    const char *s;
    size_t i, n;
    int depth;
    char why[96];
} gr_sum_jp;

static bool gr_sum_jp_fail(gr_sum_jp *p, const char *what) {
    snprintf(p->why, sizeof p->why, "%s at byte %zu", what, p->i + 1);
    return false;
}

static void gr_sum_jp_ws(gr_sum_jp *p) {
    while (p->i < p->n && p->s[p->i] && strchr(" \t\r\n", p->s[p->i])) p->i++;
}

static bool gr_sum_jp_peek(gr_sum_jp *p, char c) {
    gr_sum_jp_ws(p);
    return p->i < p->n && p->s[p->i] == c;
}

static bool gr_sum_jp_eat(gr_sum_jp *p, char c, const char *what) {
    if (!gr_sum_jp_peek(p, c)) return gr_sum_jp_fail(p, what);
    p->i++;
    return true;
}

static size_t gr_sum_digits(const char *s, size_t n) {
    size_t k = 0;
    while (k < n && s[k] >= '0' && s[k] <= '9') k++;
    return k;
}

/* Length of the JSON number at s (at most n bytes), 0 when there is none. */
static size_t gr_sum_number_len(const char *s, size_t n) {
    size_t i = n && s[0] == '-', d = gr_sum_digits(s + i, n - i);
    if (d == 0 || (d > 1 && s[i] == '0')) return 0;
    i += d;
    if (i < n && s[i] == '.') {
        if (!(d = gr_sum_digits(s + i + 1, n - i - 1))) return 0;
        i += 1 + d;
    }
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        size_t j = i + 1 + (i + 1 < n && (s[i + 1] == '+' || s[i + 1] == '-'));
        if (!(d = gr_sum_digits(s + j, n - j))) return 0;
        i = j + d;
    }
    return i;
}

bool gr_sum_is_number(const char *s) {
    size_t n = strlen(s);
    return n && gr_sum_number_len(s, n) == n;
}

static int gr_sum_hex4(const char *s) {
    int v = 0;
    for (int k = 0; k < 4; k++) {
        char c = s[k];
        int d = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                       : -1;
        if (d < 0) return -1;
        v = v * 16 + d;
    }
    return v;
}

static size_t gr_sum_utf8(unsigned cp, char *o) {
    if (cp < 0x80) return o[0] = (char)cp, 1;
    if (cp < 0x800) return o[0] = (char)(0xC0 | cp >> 6), o[1] = (char)(0x80 | (cp & 0x3F)), 2;
    if (cp < 0x10000)
        return o[0] = (char)(0xE0 | cp >> 12), o[1] = (char)(0x80 | ((cp >> 6) & 0x3F)),
               o[2] = (char)(0x80 | (cp & 0x3F)), 3;
    o[0] = (char)(0xF0 | cp >> 18), o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3F)), o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* The code point of the \uXXXX escape at p->s[p->i] ('u' read past), a
 * surrogate pair joined; -1 (p->why set) when malformed or U+0000. */
static long gr_sum_jp_uescape(gr_sum_jp *p) {
    int hi = p->i + 4 <= p->n ? gr_sum_hex4(p->s + p->i) : -1;
    if (hi <= 0) return gr_sum_jp_fail(p, hi ? "bad \\u escape" : "\\u0000 in a string"), -1;
    p->i += 4;
    if (hi < 0xD800 || hi > 0xDFFF) return hi;
    int lo = hi < 0xDC00 && p->i + 6 <= p->n && p->s[p->i] == '\\' && p->s[p->i + 1] == 'u'
                 ? gr_sum_hex4(p->s + p->i + 2)
                 : -1;
    if (lo < 0xDC00 || lo > 0xDFFF) return gr_sum_jp_fail(p, "lone UTF-16 surrogate"), -1;
    p->i += 6;
    return 0x10000 + ((long)(hi - 0xD800) << 10) + (lo - 0xDC00);
}

/* One escape after a backslash, decoded into o; its length, 0 when bad. */
static size_t gr_sum_jp_escape(gr_sum_jp *p, char *o) {
    const char *from = "\"\\/bfnrt", *to = "\"\\/\b\f\n\r\t";
    if (p->i >= p->n) return gr_sum_jp_fail(p, "unterminated string"), 0;
    char c = p->s[p->i++];
    if (c == 'u') {
        long cp = gr_sum_jp_uescape(p);
        return cp < 0 ? 0 : gr_sum_utf8((unsigned)cp, o);
    }
    const char *k = c ? strchr(from, c) : NULL; /* c may be a NUL byte of the input */
    if (!k) return p->i--, gr_sum_jp_fail(p, "bad escape in a string"), 0;
    o[0] = to[k - from];
    return 1;
}

/* A string at p (opening quote next); *out (when out) a decoded copy. */
static bool gr_sum_jp_string(gr_sum_jp *p, char **out) {
    if (!gr_sum_jp_eat(p, '"', "expected a string")) return false;
    size_t end = p->i;
    while (end < p->n && p->s[end] != '"') end += p->s[end] == '\\' ? 2 : 1;
    char *o = gr_xmalloc(GR_MIN(end, p->n) - p->i + 1); /* decoding never lengthens */
    size_t k = 0;
    for (;;) {
        if (p->i >= p->n) return free(o), gr_sum_jp_fail(p, "unterminated string");
        unsigned char c = (unsigned char)p->s[p->i];
        if (c < 0x20) return free(o), gr_sum_jp_fail(p, "control character in a string");
        p->i++;
        if (c == '"') break;
        size_t e = c == '\\' ? gr_sum_jp_escape(p, o + k) : (o[k] = (char)c, 1);
        if (!e) return free(o), false;
        k += e;
    }
    o[k] = '\0';
    if (out) *out = o;
    else free(o);
    return true;
}

static bool gr_sum_jp_value(gr_sum_jp *p, gr_sum_cell *out);

/* A nested object or array, read and checked, not kept. */
static bool gr_sum_jp_container(gr_sum_jp *p) {
    bool obj = p->s[p->i] == '{';
    char close = obj ? '}' : ']';
    if (++p->depth > GR_SUM_JSON_DEPTH) return gr_sum_jp_fail(p, "nested too deep");
    p->i++;
    for (bool first = true; !gr_sum_jp_peek(p, close); first = false) {
        gr_sum_cell skip = {0};
        if (!first && !gr_sum_jp_eat(p, ',', obj ? "expected ',' or '}'" : "expected ',' or ']'")) return false;
        if (obj && (!gr_sum_jp_string(p, NULL) || !gr_sum_jp_eat(p, ':', "expected ':'"))) return false;
        bool ok = gr_sum_jp_value(p, &skip);
        gr_sum_cell_free(&skip);
        if (!ok) return false;
    }
    p->i++;
    p->depth--;
    return true;
}

static bool gr_sum_jp_word(gr_sum_jp *p, const char *w) {
    size_t n = strlen(w);
    if (p->n - p->i < n || memcmp(p->s + p->i, w, n) != 0) return false;
    p->i += n;
    return true;
}

static bool gr_sum_jp_value(gr_sum_jp *p, gr_sum_cell *out) {
    gr_sum_jp_ws(p);
    if (p->i >= p->n) return gr_sum_jp_fail(p, "expected a value");
    char c = p->s[p->i];
    if (c == '"') {
        char *s;
        if (!gr_sum_jp_string(p, &s)) return false;
        *out = (gr_sum_cell){GR_SUM_STR, 0, s};
        return true;
    }
    if (c == '{' || c == '[') return out->kind = GR_SUM_OTHER, gr_sum_jp_container(p);
    if (gr_sum_jp_word(p, "null")) return out->kind = GR_SUM_MISSING, true;
    if (gr_sum_jp_word(p, "true")) return gr_sum_cell_set(out, GR_SUM_BOOL, 0, "true"), true;
    if (gr_sum_jp_word(p, "false")) return gr_sum_cell_set(out, GR_SUM_BOOL, 0, "false"), true;
    size_t k = gr_sum_number_len(p->s + p->i, p->n - p->i);
    if (!k) return gr_sum_jp_fail(p, "expected a value");
    char *t = gr_xmalloc(k + 1);
    memcpy(t, p->s + p->i, k);
    t[k] = '\0';
    p->i += k;
    *out = (gr_sum_cell){GR_SUM_NUM, strtod(t, NULL), t};
    return true;
}

static void gr_sum_jobj_free(gr_sum_jobj *o) {
    for (int i = 0; i < o->n; i++) free(o->f[i].key), gr_sum_cell_free(&o->f[i].val);
    free(o->f);
    *o = (gr_sum_jobj){0};
}

/* The last value of key in o (JSON's usual rule for a repeated key); NULL when absent. */
static const gr_sum_cell *gr_sum_jobj_get(const gr_sum_jobj *o, const char *key) {
    for (int i = o->n - 1; i >= 0; i--)
        if (strcmp(o->f[i].key, key) == 0) return &o->f[i].val;
    return NULL;
}

static bool gr_sum_jp_field(gr_sum_jp *p, gr_sum_jobj *o) {
    gr_sum_jfield f = {0};
    if (!gr_sum_jp_string(p, &f.key)) return false;
    if (!gr_sum_jp_eat(p, ':', "expected ':'") || !gr_sum_jp_value(p, &f.val)) {
        free(f.key);
        gr_sum_cell_free(&f.val);
        return false;
    }
    if (o->n == o->cap) {
        o->cap = o->cap ? 2 * o->cap : 32;
        o->f = gr_xrealloc(o->f, (size_t)o->cap * sizeof *o->f);
    }
    o->f[o->n++] = f;
    return true;
}

/* Parses text (n bytes) as one JSON object and nothing else into *o; false
 * with why ("expected ':' at byte 17") when it is not one (o is then empty). */
static bool gr_sum_json_object(const char *text, size_t n, gr_sum_jobj *o, char *why, size_t why_n) {
    gr_sum_jp p = {.s = text, .n = n};
    *o = (gr_sum_jobj){0};
    bool ok = gr_sum_jp_eat(&p, '{', "expected '{'");
    for (bool first = true; ok && !gr_sum_jp_peek(&p, '}'); first = false)
        ok = (first || gr_sum_jp_eat(&p, ',', "expected ',' or '}'")) && gr_sum_jp_field(&p, o);
    if (ok && p.i >= p.n) ok = gr_sum_jp_fail(&p, "unterminated object");
    if (ok) {
        p.i++;
        gr_sum_jp_ws(&p);
        if (p.i < p.n) ok = gr_sum_jp_fail(&p, "text after the object");
    }
    if (!ok) {
        gr_sum_jobj_free(o);
        snprintf(why, why_n, "%s", p.why);
    }
    return ok;
}

/* ---- config.yaml: its leaves ---- */

static void gr_sum_kv_add(gr_sum_run *r, const char *key, gr_sum_kind kind, const char *text) {
    if (r->n_cfg == r->cap_cfg) {
        r->cap_cfg = r->cap_cfg ? 2 * r->cap_cfg : 128;
        r->cfg = gr_xrealloc(r->cfg, (size_t)r->cap_cfg * sizeof *r->cfg);
    }
    gr_sum_kv *kv = &r->cfg[r->n_cfg++];
    *kv = (gr_sum_kv){gr_xstrdup(key), {0}};
    gr_sum_cell_set(&kv->val, kind, kind == GR_SUM_NUM ? strtod(text, NULL) : 0, text);
}

/* A scalar's kind as the output shows it: a number where it reads as a
 * JSON number, true/false as bools, null as missing; quoted ones are strings. */
static gr_sum_kind gr_sum_scalar_kind(const gr_cfg *n) {
    const char *s = n->scalar ? n->scalar : "";
    if (n->quoted) return GR_SUM_STR;
    if (!*s || !strcmp(s, "~") || !strcmp(s, "null") || !strcmp(s, "Null") || !strcmp(s, "NULL"))
        return GR_SUM_MISSING;
    if (gr_sum_is_number(s)) return GR_SUM_NUM;
    if (!strcmp(s, "true") || !strcmp(s, "false")) return GR_SUM_BOOL;
    return GR_SUM_STR;
}

static void gr_sum_leaf(void *r, const char *path, const gr_cfg *leaf, const char *text) {
    gr_sum_kv_add(r, path, leaf->kind == GR_CFG_SCALAR ? gr_sum_scalar_kind(leaf) : GR_SUM_STR, text);
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
static gr_status gr_sum_status(gr_sum_run *r, const gr_sum_jobj *o, const char *path, gr_error *err) {
    const gr_sum_cell *s = gr_sum_jobj_get(o, "status"), *code = gr_sum_jobj_get(o, "exit_code");
    if (!s || s->kind != GR_SUM_STR || !s->text[0])
        return gr_error_set(err, GR_ERR_DATA, "%s: no \"status\" string", path);
    if (code && code->kind != GR_SUM_NUM && code->kind != GR_SUM_MISSING)
        return gr_error_set(err, GR_ERR_DATA, "%s: \"exit_code\" is not a number", path);
    if (code && code->kind == GR_SUM_NUM && code->num != 0)
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
    gr_sum_jobj o;
    bool ok = gr_sum_json_object(text, len, &o, why, sizeof why);
    free(text);
    if (!ok) return gr_error_set(err, GR_ERR_DATA, "%s: not a JSON object: %s", path, why);
    st = gr_sum_status(r, &o, path, err);
    for (int m = 0; m < GR_SUM_N_METRICS && !st; m++) {
        const gr_sum_cell *v = gr_sum_jobj_get(&o, gr_sum_metric_rows[m].summary_key);
        if (v && v->kind != GR_SUM_NUM && v->kind != GR_SUM_MISSING)
            st = gr_error_set(err, GR_ERR_DATA, "%s: \"%s\" is not a number", path, gr_sum_metric_rows[m].summary_key);
        else if (v && v->kind == GR_SUM_NUM)
            gr_sum_cell_set(&r->metric[m], GR_SUM_NUM, v->num, v->text);
    }
    gr_sum_jobj_free(&o);
    return st;
}

/* ---- metrics.jsonl ---- */

/* One parsed line into the figures it carries (into fb). */
static void gr_sum_line(gr_sum_cell fb[GR_SUM_N_METRICS], const gr_sum_jobj *o) {
    const gr_sum_cell *kind = gr_sum_jobj_get(o, "kind"), *split = gr_sum_jobj_get(o, "split");
    if (!kind || kind->kind != GR_SUM_STR) return;
    bool train = !strcmp(kind->text, "train");
    bool val = !strcmp(kind->text, "eval") && (!split || (split->kind == GR_SUM_STR && !strcmp(split->text, "val")));
    for (int m = 0; m < GR_SUM_N_METRICS; m++) {
        const gr_sum_metric_row *row = &gr_sum_metric_rows[m];
        if (row->from == GR_SUM_TRAIN_LAST ? !train : !val) continue;
        const gr_sum_cell *v = gr_sum_jobj_get(o, row->line_key);
        if (!v || v->kind != GR_SUM_NUM) continue;
        if (row->from == GR_SUM_EVAL_MAX && fb[m].kind == GR_SUM_NUM && !(v->num > fb[m].num)) continue;
        gr_sum_cell_set(&fb[m], GR_SUM_NUM, v->num, v->text);
    }
}

/* The figures summary.json did not give, from metrics.jsonl (none when it is
 * absent); lines that do not parse are skipped. */
static gr_status gr_sum_read_metrics(gr_sum_run *r, const char *path, gr_error *err) {
    gr_status st = gr_check_regular(path, "a run's file", GR_ERR_DATA, err);
    if (st) return st;
    FILE *f = fopen(path, "r");
    if (!f) {
        if (errno == ENOENT) return GR_OK;
        return gr_error_set(err, GR_ERR_DATA, "%s: cannot read: %s", path, strerror(errno));
    }
    gr_sum_cell fb[GR_SUM_N_METRICS] = {0};
    char *line = NULL, why[128];
    size_t cap = 0;
    ssize_t n;
    while ((n = getline(&line, &cap, f)) > 0) {
        gr_sum_jobj o;
        if (!gr_sum_json_object(line, (size_t)n, &o, why, sizeof why)) continue;
        gr_sum_line(fb, &o);
        gr_sum_jobj_free(&o);
    }
    if (ferror(f)) st = gr_error_set(err, GR_ERR_DATA, "%s: cannot read: %s", path, strerror(errno));
    free(line);
    fclose(f);
    for (int m = 0; m < GR_SUM_N_METRICS; m++) {
        if (r->metric[m].kind == GR_SUM_MISSING) {
            r->metric[m] = fb[m];
            fb[m] = (gr_sum_cell){0};
        }
        gr_sum_cell_free(&fb[m]);
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

gr_status gr_sum_run_load(gr_sum_run *r, const char *dir, gr_error *err) {
    *r = (gr_sum_run){.dir = dir};
    char base[1024], path[1100];
    snprintf(base, sizeof base, "%s", dir);
    for (size_t k = strlen(base); k > 1 && base[k - 1] == '/'; k--) base[k - 1] = '\0';
    gr_status st = gr_sum_check_dir(base, path, sizeof path, err);
    if (!st) st = gr_sum_read_config(r, path, err);
    if (st) return st;
    bool absent = true;
    if (gr_rundir_lock_held(base, NULL, 0)) {
        /* a live run: a summary.json there is an earlier process's (before a resume) */
        snprintf(r->status, sizeof r->status, "running");
    } else {
        snprintf(path, sizeof path, "%s/summary.json", base);
        if ((st = gr_sum_read_summary(r, path, &absent, err))) return st;
        if (absent) snprintf(r->status, sizeof r->status, "interrupted");
    }
    bool need = false;
    for (int m = 0; m < GR_SUM_N_METRICS; m++) need |= r->metric[m].kind == GR_SUM_MISSING;
    snprintf(path, sizeof path, "%s/metrics.jsonl", base);
    return need ? gr_sum_read_metrics(r, path, err) : GR_OK;
}

void gr_sum_run_free(gr_sum_run *r) {
    for (int i = 0; i < r->n_cfg; i++) free(r->cfg[i].key), gr_sum_cell_free(&r->cfg[i].val);
    free(r->cfg);
    for (int m = 0; m < GR_SUM_N_METRICS; m++) gr_sum_cell_free(&r->metric[m]);
    *r = (gr_sum_run){0};
}
