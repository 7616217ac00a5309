/* cfg.c — the config tree (cfg.h): nodes and lookups, the typed scalar
 * readers (YAML 1.2 core-schema numbers and booleans, range-checked, every
 * error at file:line:col), deep copies, and the block-YAML writer behind
 * gr_cfg_dump. The parser is cfg_parse.c. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include "cfg_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- nodes ---- */

bool gr_cfg_is_null(const gr_cfg *n) {
    if (!n) return true;
    if (n->kind != GR_CFG_SCALAR || n->quoted) return false;
    const char *s = n->scalar;
    return !s[0] || !strcmp(s, "~") || !strcmp(s, "null") || !strcmp(s, "Null") || !strcmp(s, "NULL");
}

gr_cfg *gr_cfg_get(const gr_cfg *map, const char *key) {
    int i = gr_cfg_find(map, key);
    return i < 0 ? NULL : map->items[i];
}

int gr_cfg_find(const gr_cfg *map, const char *key) {
    if (!map || map->kind != GR_CFG_MAP) return -1;
    return gr_cfg_index_find(&map->key_index, map, map->keys, map->n, key);
}

/* ---- name indexes (cfg_internal.h) ---- */

#define GR_CFG_INDEX_MIN 16

static size_t gr_cfg_index_hash(const void *owner, const char *name) {
    uint64_t h = 14695981039346656037ull ^ ((uint64_t)(uintptr_t)owner * 0x9E3779B97F4A7C15ull);
    for (const unsigned char *c = (const unsigned char *)name; *c; c++) h = (h ^ *c) * 1099511628211ull;
    return (size_t)(h ^ (h >> 29));
}

/* names[k] into the table: into the slot of its name when that is there (the newest wins). */
static void gr_cfg_index_put(gr_cfg_index *ix, const void *owner, char *const *names, int k) {
    size_t mask = ix->cap - 1, i = gr_cfg_index_hash(owner, names[k]) & mask;
    while (ix->slot[i] && strcmp(names[ix->slot[i] - 1], names[k]) != 0) i = (i + 1) & mask;
    ix->slot[i] = k + 1;
}

int gr_cfg_index_find(const gr_cfg_index *ix, const void *owner, char *const *names, int n, const char *name) {
    if (!ix->slot) {
        for (int k = n - 1; k >= 0; k--)
            if (!strcmp(names[k], name)) return k;
        return -1;
    }
    size_t mask = ix->cap - 1;
    for (size_t i = gr_cfg_index_hash(owner, name) & mask; ix->slot[i]; i = (i + 1) & mask)
        if (!strcmp(names[ix->slot[i] - 1], name)) return ix->slot[i] - 1;
    return -1;
}

void gr_cfg_index_add(gr_cfg_index *ix, const void *owner, char *const *names, int n) {
    if (n < GR_CFG_INDEX_MIN) return;
    if (2 * (size_t)n > ix->cap) {
        free(ix->slot);
        ix->cap = ix->cap ? 2 * ix->cap : 4 * GR_CFG_INDEX_MIN;
        ix->slot = gr_xcalloc(ix->cap, sizeof *ix->slot);
        for (int k = 0; k + 1 < n; k++) gr_cfg_index_put(ix, owner, names, k);
    }
    gr_cfg_index_put(ix, owner, names, n - 1);
}

void gr_cfg_index_free(gr_cfg_index *ix) {
    free(ix->slot);
    *ix = (gr_cfg_index){0};
}

void gr_cfg_free(gr_cfg *node) {
    if (!node) return;
    for (int i = 0; i < node->n; i++) {
        gr_cfg_free(node->items[i]);
        if (node->keys) free(node->keys[i]);
    }
    free(node->items);
    free(node->keys);
    free(node->key_line);
    free(node->key_col);
    gr_cfg_index_free(&node->key_index);
    free(node->scalar);
    free((char *)node->file);
    free(node);
}

gr_cfg *gr_cfg_new(gr_cfg_kind kind, const char *file, int line, int col) {
    gr_cfg *n = gr_xcalloc(1, sizeof *n);
    n->kind = kind;
    n->file = gr_xstrdup(file);
    n->line = line;
    n->col = col;
    if (kind == GR_CFG_SCALAR) n->scalar = gr_xstrdup("");
    return n;
}

/* A node's arrays hold a power of two of entries, at least n: they grow (to
 * 2n, 1 from none) when n is 0 or a power of two, so that appending n
 * entries costs O(n), not n reallocations. Only the appends below make them. */
static size_t gr_cfg_grown(int n) { return (n & (n - 1)) == 0 ? (n ? 2 * (size_t)n : 1) : 0; }

void gr_cfg_seq_append(gr_cfg *seq, gr_cfg *item) {
    size_t k = gr_cfg_grown(seq->n);
    if (k) seq->items = gr_xrealloc(seq->items, k * sizeof *seq->items);
    seq->items[seq->n++] = item;
}

/* Takes ownership of key and value. */
void gr_cfg_map_append(gr_cfg *map, char *key, int line, int col, gr_cfg *value) {
    size_t k = gr_cfg_grown(map->n);
    if (k) {
        map->keys = gr_xrealloc(map->keys, k * sizeof *map->keys);
        map->key_line = gr_xrealloc(map->key_line, k * sizeof *map->key_line);
        map->key_col = gr_xrealloc(map->key_col, k * sizeof *map->key_col);
        map->items = gr_xrealloc(map->items, k * sizeof *map->items);
    }
    map->keys[map->n] = key;
    map->key_line[map->n] = line;
    map->key_col[map->n] = col;
    map->items[map->n] = value;
    map->n++;
    gr_cfg_index_add(&map->key_index, map, map->keys, map->n);
}

gr_status gr_cfg_error(gr_error *err, const gr_cfg *node, const char *key, const char *fmt, ...) {
    char msg[GR_ERROR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (!node) return gr_error_set(err, GR_ERR_USAGE, "%s: %s", key, msg);
    return gr_error_set(err, GR_ERR_USAGE, "%s:%d:%d: %s: %s", node->file, node->line, node->col, key, msg);
}

gr_status gr_cfg_key_error(gr_error *err, const gr_cfg *map, int i, const char *key, const char *fmt, ...) {
    char msg[GR_ERROR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return gr_error_set(err, GR_ERR_USAGE, "%s:%d:%d: %s: %s", map->file, map->key_line[i],
                        map->key_col[i], key, msg);
}

/* ---- scalar conversion ---- */

/* How a non-scalar or empty value reads in "got ..." messages. */
const char *gr_cfg_got(const gr_cfg *n, char *buf, size_t cap) {
    if (n->kind == GR_CFG_MAP) return "a map";
    if (n->kind == GR_CFG_SEQ) return "a list";
    if (gr_cfg_is_null(n)) return "nothing";
    snprintf(buf, cap, n->quoted ? "the quoted string '%s'" : "'%s'", n->scalar);
    return buf;
}

bool gr_cfg_is_digits(const char *s) {
    if (!*s) return false;
    for (; *s; s++)
        if (*s < '0' || *s > '9') return false;
    return true;
}

/* YAML 1.2 core-schema float (or int) text -> double. `.nan`, `.inf`, `nan`,
 * `inf`, `infinity` in any case and sign, and overflow, are NONFINITE. */
gr_num_kind gr_cfg_parse_double(const char *s, double *out) {
    const char *p = s;
    if (*p == '+' || *p == '-') p++;
    const char *q = p + (*p == '.');
    static const char *const nonfinite[] = {"nan", "inf", "infinity"};
    for (size_t i = 0; i < GR_ARRAY_LEN(nonfinite); i++) {
        size_t k = strlen(nonfinite[i]);
        if (strlen(q) == k) {
            bool same = true;
            for (size_t j = 0; j < k; j++)
                if ((q[j] | 0x20) != nonfinite[i][j]) same = false;
            if (same) return GR_NUM_NONFINITE;
        }
    }
    int digits = 0;
    while (*p >= '0' && *p <= '9') p++, digits++;
    if (*p == '.') {
        p++;
        while (*p >= '0' && *p <= '9') p++, digits++;
    }
    if (!digits) return GR_NUM_NOT;
    if (*p == 'e' || *p == 'E') {
        p++;
        if (*p == '+' || *p == '-') p++;
        if (!(*p >= '0' && *p <= '9')) return GR_NUM_NOT;
        while (*p >= '0' && *p <= '9') p++;
    }
    if (*p) return GR_NUM_NOT;
    double v = strtod(s, NULL);
    if (!isfinite(v)) return GR_NUM_NONFINITE;
    *out = v;
    return GR_NUM_OK;
}

void gr_fmt_double(char *buf, size_t cap, double v) {
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(buf, cap, "%.*g", prec, v);
        if (strtod(buf, NULL) == v) return;
    }
}

gr_status gr_cfg_int_ex(const gr_cfg *n, const char *key, int64_t lo, int64_t hi, int64_t *out,
                               gr_error *err) {
    char got[300];
    if (n->kind != GR_CFG_SCALAR || n->quoted || gr_cfg_is_null(n))
        return gr_cfg_error(err, n, key, "expected an integer, got %s", gr_cfg_got(n, got, sizeof got));
    const char *s = n->scalar;
    const char *d = s + (*s == '+' || *s == '-');
    if (!gr_cfg_is_digits(d))
        return gr_cfg_error(err, n, key, "expected an integer, got '%s'", s);
    errno = 0;
    long long v = strtoll(s, NULL, 10);
    if (errno == ERANGE) return gr_cfg_error(err, n, key, "integer out of range, got %s", s);
    if (v < lo) return gr_cfg_error(err, n, key, "must be >= %" PRId64 ", got %s", lo, s);
    if (v > hi) return gr_cfg_error(err, n, key, "must be <= %" PRId64 ", got %s", hi, s);
    *out = (int64_t)v;
    return GR_OK;
}

gr_status gr_cfg_float_ex(const gr_cfg *n, const char *key, double lo, double hi, int flags,
                                 double *out, gr_error *err) {
    char got[300];
    if (n->kind != GR_CFG_SCALAR || n->quoted || gr_cfg_is_null(n))
        return gr_cfg_error(err, n, key, "expected a number, got %s", gr_cfg_got(n, got, sizeof got));
    double v = 0;
    gr_num_kind k = gr_cfg_parse_double(n->scalar, &v);
    if (k == GR_NUM_NOT) return gr_cfg_error(err, n, key, "expected a number, got '%s'", n->scalar);
    if (k == GR_NUM_NONFINITE)
        return gr_cfg_error(err, n, key, "must be a finite number, got %s", n->scalar);
    bool lo_bad = (flags & GR_LO_EXCL) ? !(v > lo) : !(v >= lo);
    bool hi_bad = (flags & GR_HI_EXCL) ? !(v < hi) : !(v <= hi);
    if (lo_bad || hi_bad) {
        char a[40], b[40];
        gr_fmt_double(a, sizeof a, lo);
        gr_fmt_double(b, sizeof b, hi);
        if (isfinite(lo) && isfinite(hi))
            return gr_cfg_error(err, n, key, "must be in %c%s, %s%c, got %s", (flags & GR_LO_EXCL) ? '(' : '[',
                                a, b, (flags & GR_HI_EXCL) ? ')' : ']', n->scalar);
        if (lo_bad)
            return gr_cfg_error(err, n, key, "must be %s %s, got %s", (flags & GR_LO_EXCL) ? ">" : ">=", a,
                                n->scalar);
        return gr_cfg_error(err, n, key, "must be %s %s, got %s", (flags & GR_HI_EXCL) ? "<" : "<=", b,
                            n->scalar);
    }
    *out = v;
    return GR_OK;
}

gr_status gr_cfg_int(const gr_cfg *node, const char *key, int64_t lo, int64_t hi, int64_t *out,
                     gr_error *err) {
    return gr_cfg_int_ex(node, key, lo, hi, out, err);
}

gr_status gr_cfg_float(const gr_cfg *node, const char *key, double lo, double hi, double *out,
                       gr_error *err) {
    return gr_cfg_float_ex(node, key, lo, hi, 0, out, err);
}

gr_status gr_cfg_bool(const gr_cfg *node, const char *key, bool *out, gr_error *err) {
    char got[300];
    if (node->kind == GR_CFG_SCALAR && !node->quoted) {
        const char *s = node->scalar;
        if (!strcmp(s, "true") || !strcmp(s, "True") || !strcmp(s, "TRUE")) return *out = true, GR_OK;
        if (!strcmp(s, "false") || !strcmp(s, "False") || !strcmp(s, "FALSE")) return *out = false, GR_OK;
    }
    return gr_cfg_error(err, node, key, "expected true or false, got %s", gr_cfg_got(node, got, sizeof got));
}

/* ---- copies ---- */

gr_cfg *gr_cfg_copy(const gr_cfg *src, long *budget) {
    if (--*budget < 0) return NULL;
    gr_cfg *n = gr_cfg_new(src->kind, src->file, src->line, src->col);
    free(n->scalar);
    n->scalar = src->scalar ? gr_xstrdup(src->scalar) : NULL;
    n->quoted = src->quoted;
    for (int i = 0; i < src->n; i++) {
        gr_cfg *c = gr_cfg_copy(src->items[i], budget);
        if (!c) {
            gr_cfg_free(n);
            return NULL;
        }
        if (src->kind == GR_CFG_MAP)
            gr_cfg_map_append(n, gr_xstrdup(src->keys[i]), src->key_line[i], src->key_col[i], c);
        else
            gr_cfg_seq_append(n, c);
    }
    return n;
}

gr_cfg *gr_cfg_clone(const gr_cfg *src) {
    long budget = LONG_MAX;
    return src ? gr_cfg_copy(src, &budget) : NULL;
}

/* ---- dumping ---- */

static void gr_cfg_write_quoted(FILE *f, const char *s);

/* Text that cannot be written as a plain block scalar (it would parse as
 * something else, or not at all). */
static bool gr_cfg_plain_unsafe(const char *s) {
    size_t n = strlen(s);
    if (!n) return false;
    if (strchr("[]{},#&*!|>'\"%@` \t", s[0])) return true;
    if (strchr("-?:", s[0]) && (s[1] == 0 || s[1] == ' ' || s[1] == '\t')) return true;
    if (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == ':') return true;
    if (strstr(s, ": ") || strstr(s, " #")) return true;
    for (const unsigned char *c = (const unsigned char *)s; *c; c++)
        if (*c < 0x20 || *c == 0x7f) return true;
    return false;
}

/* A string value: also quote what would read as null. */
static bool gr_cfg_needs_quotes(const char *s) {
    if (!s[0] || !strcmp(s, "~") || !strcmp(s, "null") || !strcmp(s, "Null") || !strcmp(s, "NULL")) return true;
    return gr_cfg_plain_unsafe(s);
}

/* Writes s plain when allowed, else double-quoted. A plain tree scalar stays
 * plain (so `~` stays null) unless its text cannot be plain. */
static void gr_cfg_write_scalar(FILE *f, const char *s, bool quoted) {
    if (quoted || gr_cfg_plain_unsafe(s)) {
        gr_cfg_write_quoted(f, s);
        return;
    }
    fputs(s, f);
}

void gr_cfg_write_str(FILE *f, const char *s, bool force_quotes) {
    if (!force_quotes && !gr_cfg_needs_quotes(s)) {
        fputs(s, f);
        return;
    }
    gr_cfg_write_quoted(f, s);
}

static void gr_cfg_write_quoted(FILE *f, const char *s) {
    fputc('"', f);
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        if (*c == '"' || *c == '\\') fprintf(f, "\\%c", *c);
        else if (*c == '\n') fputs("\\n", f);
        else if (*c == '\t') fputs("\\t", f);
        else if (*c < 0x20 || *c == 0x7f) fprintf(f, "\\x%02x", *c);
        else fputc(*c, f);
    }
    fputc('"', f);
}

static void gr_cfg_dump_at(const gr_cfg *n, FILE *f, int indent, bool inline_first);

/* Writes what follows "key:" or "-": the scalar on the same line, else a
 * newline and the block at indent. */
void gr_cfg_dump_value(const gr_cfg *n, FILE *f, int indent) {
    if (n->kind == GR_CFG_SCALAR) {
        if (n->scalar[0] || n->quoted) {
            fputc(' ', f);
            gr_cfg_write_scalar(f, n->scalar, n->quoted);
        }
        fputc('\n', f);
    } else if (n->n == 0) {
        fputs(n->kind == GR_CFG_MAP ? " {}\n" : " []\n", f);
    } else {
        fputc('\n', f);
        gr_cfg_dump_at(n, f, indent, false);
    }
}

static void gr_cfg_dump_at(const gr_cfg *n, FILE *f, int indent, bool inline_first) {
    if (n->kind == GR_CFG_SCALAR || n->n == 0) {
        if (!inline_first) fprintf(f, "%*s", indent, "");
        if (n->kind == GR_CFG_SCALAR) gr_cfg_write_scalar(f, n->scalar, n->quoted);
        else fputs(n->kind == GR_CFG_MAP ? "{}" : "[]", f);
        fputc('\n', f);
        return;
    }
    for (int i = 0; i < n->n; i++) {
        if (i > 0 || !inline_first) fprintf(f, "%*s", indent, "");
        const gr_cfg *c = n->items[i];
        if (n->kind == GR_CFG_MAP) {
            gr_cfg_write_str(f, n->keys[i], false);
            fputc(':', f);
            gr_cfg_dump_value(c, f, indent + 2);
        } else if (c->kind != GR_CFG_SCALAR && c->n > 0) {
            fputs("- ", f);
            gr_cfg_dump_at(c, f, indent + 2, true);
        } else {
            fputc('-', f);
            gr_cfg_dump_value(c, f, indent + 2);
        }
    }
}

void gr_cfg_dump(const gr_cfg *node, FILE *f, int indent) {
    if (node) gr_cfg_dump_at(node, f, indent, false);
}

typedef struct gr_cfg_walk {
    bool flow_seqs;
    void (*fn)(void *user, const char *path, const gr_cfg *leaf, const char *text);
    void *user;
    char path[1024];
} gr_cfg_walk;

static bool gr_cfg_all_scalars(const gr_cfg *seq) {
    for (int i = 0; i < seq->n; i++)
        if (seq->items[i]->kind != GR_CFG_SCALAR) return false;
    return true;
}

/* a sequence of scalars in flow form, "[1, 8, 8]" (malloc'ed) */
static char *gr_cfg_flow(const gr_cfg *seq) {
    size_t len = 3;
    for (int i = 0; i < seq->n; i++) len += strlen(seq->items[i]->scalar ? seq->items[i]->scalar : "") + 2;
    char *s = gr_xmalloc(len), *o = s;
    *o++ = '[';
    for (int i = 0; i < seq->n; i++)
        o += sprintf(o, "%s%s", i ? ", " : "", seq->items[i]->scalar ? seq->items[i]->scalar : "");
    strcpy(o, "]");
    return s;
}

static void gr_cfg_leaves_at(gr_cfg_walk *w, const gr_cfg *node, size_t len) {
    if (node->kind == GR_CFG_SCALAR) {
        w->fn(w->user, w->path, node, node->scalar ? node->scalar : "");
        return;
    }
    if (node->n == 0) {
        w->fn(w->user, w->path, node, node->kind == GR_CFG_MAP ? "{}" : "[]");
        return;
    }
    if (w->flow_seqs && node->kind == GR_CFG_SEQ && gr_cfg_all_scalars(node)) {
        char *flow = gr_cfg_flow(node);
        w->fn(w->user, w->path, node, flow);
        free(flow);
        return;
    }
    const size_t cap = sizeof w->path;
    for (int i = 0; i < node->n; i++) {
        int k = node->kind == GR_CFG_MAP ? snprintf(w->path + len, cap - len, "%s%s", len ? "." : "", node->keys[i])
                                         : snprintf(w->path + len, cap - len, "%s%d", len ? "." : "", i);
        gr_cfg_leaves_at(w, node->items[i], k > 0 && len + (size_t)k < cap ? len + (size_t)k : cap - 1);
        w->path[len] = '\0';
    }
}

void gr_cfg_leaves(const gr_cfg *root, bool flow_seqs,
                   void (*fn)(void *user, const char *path, const gr_cfg *leaf, const char *text), void *user) {
    gr_cfg_walk *w = gr_xcalloc(1, sizeof *w);
    w->flow_seqs = flow_seqs;
    w->fn = fn;
    w->user = user;
    if (root) gr_cfg_leaves_at(w, root, 0);
    free(w);
}
