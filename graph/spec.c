/* spec.c — the job-spec reader (DESIGN 1.4, schema v1).
 *
 * YAML text -> gr_cfg tree (libyaml's event API, so every node and every map
 * key keeps its 1-based file:line:col; aliases are copied, duplicate keys and
 * extra documents are errors) -> `--set` overrides grafted into the tree ->
 * one walk of the tree against the schema table `gr_spec_rows` (key, type,
 * bounds, default, target field) -> typed gr_job_spec. Only rules that relate
 * two keys (micro_batch divides batch_size, epochs or steps, ...) are code.
 * gr_spec_dump writes the resolved spec back from the same table.
 *
 * Every error is GR_ERR_USAGE with "file:line:col: dotted.key: message". */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include "spec.h"
#include "spec_input.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#define GR_CFG_KEY_MAX 512      /* longest dotted key kept for messages */
#define GR_CFG_MAX_NODES 200000 /* caps alias expansion ("billion laughs") */
#define GR_CFG_MAX_DEPTH 200    /* caps nesting, so recursion stays shallow */

/* ======================================================================
 * Config tree
 * ====================================================================== */

static bool gr_cfg_is_null(const gr_cfg *n) {
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
    for (int i = 0; i < map->n; i++)
        if (!strcmp(map->keys[i], key)) return i;
    return -1;
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
    free(node->scalar);
    free((char *)node->file);
    free(node);
}

static gr_cfg *gr_cfg_new(gr_cfg_kind kind, const char *file, int line, int col) {
    gr_cfg *n = gr_xcalloc(1, sizeof *n);
    n->kind = kind;
    n->file = gr_xstrdup(file);
    n->line = line;
    n->col = col;
    if (kind == GR_CFG_SCALAR) n->scalar = gr_xstrdup("");
    return n;
}

static void gr_cfg_seq_append(gr_cfg *seq, gr_cfg *item) {
    seq->items = gr_xrealloc(seq->items, (size_t)(seq->n + 1) * sizeof *seq->items);
    seq->items[seq->n++] = item;
}

/* Takes ownership of key and value. */
static void gr_cfg_map_append(gr_cfg *map, char *key, int line, int col, gr_cfg *value) {
    size_t k = (size_t)map->n + 1;
    map->keys = gr_xrealloc(map->keys, k * sizeof *map->keys);
    map->key_line = gr_xrealloc(map->key_line, k * sizeof *map->key_line);
    map->key_col = gr_xrealloc(map->key_col, k * sizeof *map->key_col);
    map->items = gr_xrealloc(map->items, k * sizeof *map->items);
    map->keys[map->n] = key;
    map->key_line[map->n] = line;
    map->key_col[map->n] = col;
    map->items[map->n] = value;
    map->n++;
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

/* Same, at the position of map key i (unknown or duplicate keys). */
static gr_status gr_cfg_key_error(gr_error *err, const gr_cfg *map, int i, const char *key,
                                  const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static gr_status gr_cfg_key_error(gr_error *err, const gr_cfg *map, int i, const char *key,
                                  const char *fmt, ...) {
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
static const char *gr_cfg_got(const gr_cfg *n, char *buf, size_t cap) {
    if (n->kind == GR_CFG_MAP) return "a map";
    if (n->kind == GR_CFG_SEQ) return "a list";
    if (gr_cfg_is_null(n)) return "nothing";
    snprintf(buf, cap, n->quoted ? "the quoted string '%s'" : "'%s'", n->scalar);
    return buf;
}

static bool gr_cfg_is_digits(const char *s) {
    if (!*s) return false;
    for (; *s; s++)
        if (*s < '0' || *s > '9') return false;
    return true;
}

typedef enum { GR_NUM_OK, GR_NUM_NOT, GR_NUM_NONFINITE } gr_num_kind;

/* YAML 1.2 core-schema float (or int) text -> double. `.nan`, `.inf`, `nan`,
 * `inf`, `infinity` in any case and sign, and overflow, are NONFINITE. */
static gr_num_kind gr_cfg_parse_double(const char *s, double *out) {
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

static void gr_fmt_double(char *buf, size_t cap, double v) {
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(buf, cap, "%.*g", prec, v);
        if (strtod(buf, NULL) == v) return;
    }
}

enum { GR_LO_EXCL = 1, GR_HI_EXCL = 2 };

static gr_status gr_cfg_int_ex(const gr_cfg *n, const char *key, int64_t lo, int64_t hi, int64_t *out,
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

static gr_status gr_cfg_float_ex(const gr_cfg *n, const char *key, double lo, double hi, int flags,
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

/* ---- parsing (libyaml events -> tree) ---- */

typedef struct gr_cfg_anchor {
    char *name;
    const gr_cfg *node;
} gr_cfg_anchor;

typedef struct gr_cfg_parser {
    yaml_parser_t yp;
    const char *file;
    int line0, col0; /* position of the text's first character */
    bool one_line;   /* text without a newline: clamp end-of-input marks to it */
    size_t len;
    gr_cfg_anchor *anchors;
    int n_anchors;
    long n_nodes;
    int depth;
    char path[GR_CFG_KEY_MAX]; /* dotted key of the node being parsed */
    gr_error *err;
} gr_cfg_parser;

static void gr_cfg_mark(const gr_cfg_parser *p, yaml_mark_t m, int *line, int *col) {
    if (p->one_line && m.line > 0) { /* libyaml's mark past the implicit final newline */
        *line = p->line0;
        *col = p->col0 + (int)p->len;
        return;
    }
    *line = (int)m.line + p->line0;
    *col = (int)m.column + (m.line == 0 ? p->col0 : 1);
}

static gr_cfg *gr_cfg_new_at(const gr_cfg_parser *p, gr_cfg_kind kind, yaml_mark_t m) {
    int line, col;
    gr_cfg_mark(p, m, &line, &col);
    return gr_cfg_new(kind, p->file, line, col);
}

static const char *gr_cfg_path_or(const gr_cfg_parser *p) { return p->path[0] ? p->path : "(top level)"; }

static gr_status gr_cfg_parse_error_at(gr_cfg_parser *p, yaml_mark_t m, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static gr_status gr_cfg_parse_error_at(gr_cfg_parser *p, yaml_mark_t m, const char *fmt, ...) {
    char msg[GR_ERROR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    int line, col;
    gr_cfg_mark(p, m, &line, &col);
    return gr_error_set(p->err, GR_ERR_USAGE, "%s:%d:%d: %s", p->file, line, col, msg);
}

static gr_status gr_cfg_syntax_error(gr_cfg_parser *p) {
    yaml_parser_t *y = &p->yp;
    if (y->error == YAML_MEMORY_ERROR)
        return gr_error_set(p->err, GR_ERR_OOM, "%s: out of memory while parsing YAML", p->file);
    const char *problem = y->problem ? y->problem : "malformed YAML";
    if (y->error == YAML_READER_ERROR)
        return gr_error_set(p->err, GR_ERR_USAGE, "%s: YAML syntax error: %s (at byte %zu)", p->file, problem,
                            y->problem_offset);
    if (y->context)
        return gr_cfg_parse_error_at(p, y->problem_mark, "YAML syntax error: %s (%s)", problem, y->context);
    return gr_cfg_parse_error_at(p, y->problem_mark, "YAML syntax error: %s", problem);
}

static gr_status gr_cfg_next(gr_cfg_parser *p, yaml_event_t *ev) {
    if (!yaml_parser_parse(&p->yp, ev)) return gr_cfg_syntax_error(p);
    return GR_OK;
}

static gr_cfg *gr_cfg_copy(const gr_cfg *src, long *budget) {
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

static char *gr_cfg_strndup(const char *s, size_t len) {
    char *d = gr_xmalloc(len + 1);
    memcpy(d, s, len);
    d[len] = 0;
    return d;
}

/* Appends ".key" or "[i]" to p->path; returns the old length for popping. */
static size_t gr_cfg_path_push(gr_cfg_parser *p, const char *key, int index) {
    size_t len = strlen(p->path);
    if (key)
        snprintf(p->path + len, sizeof p->path - len, "%s%s", len ? "." : "", key);
    else
        snprintf(p->path + len, sizeof p->path - len, "[%d]", index);
    return len;
}

/* Honours or refuses the YAML tag of node n (spec_input.h: only the core
 * schema's tags; `!!python/object:...` or `!foo` is an error at the node). */
static gr_status gr_cfg_apply_tag(gr_cfg_parser *p, const yaml_event_t *ev, const char *tag, gr_cfg *n) {
    if (!tag) return GR_OK;
    char why[400];
    switch (gr_cfg_tag_rule(tag, n->kind, why, sizeof why)) {
    case GR_TAG_STR: n->quoted = true; return GR_OK;
    case GR_TAG_PLAIN: n->quoted = false; return GR_OK;
    case GR_TAG_COLLECTION: return GR_OK;
    case GR_TAG_NULL: {
        gr_cfg plain = *n;
        plain.quoted = false;
        if (!gr_cfg_is_null(&plain))
            return gr_cfg_parse_error_at(p, ev->start_mark, "%s: the YAML tag '!!null' on the value '%s'",
                                         gr_cfg_path_or(p), n->scalar);
        n->scalar[0] = 0;
        n->quoted = false;
        return GR_OK;
    }
    case GR_TAG_REFUSED: break;
    }
    return gr_cfg_parse_error_at(p, ev->start_mark, "%s: %s", gr_cfg_path_or(p), why);
}

/* Builds the node that starts with event *ev (consumed) into *out. */
static gr_status gr_cfg_parse_node(gr_cfg_parser *p, yaml_event_t *ev, gr_cfg **out) {
    gr_status st = GR_OK;
    gr_cfg *n = NULL;
    const yaml_char_t *anchor = NULL;
    *out = NULL;
    if (++p->n_nodes > GR_CFG_MAX_NODES) {
        st = gr_cfg_parse_error_at(p, ev->start_mark, "%s: more than %d YAML nodes", gr_cfg_path_or(p),
                                   GR_CFG_MAX_NODES);
        goto done;
    }
    switch (ev->type) {
    case YAML_ALIAS_EVENT: {
        const char *name = (const char *)ev->data.alias.anchor;
        const gr_cfg *src = NULL;
        for (int i = p->n_anchors - 1; i >= 0 && !src; i--)
            if (!strcmp(p->anchors[i].name, name)) src = p->anchors[i].node;
        if (!src) {
            st = gr_cfg_parse_error_at(p, ev->start_mark, "%s: unknown alias '*%s'", gr_cfg_path_or(p), name);
            break;
        }
        long budget = GR_CFG_MAX_NODES - p->n_nodes;
        n = gr_cfg_copy(src, &budget);
        if (!n) {
            st = gr_cfg_parse_error_at(p, ev->start_mark, "%s: alias '*%s' expands to more than %d YAML nodes",
                                       gr_cfg_path_or(p), name, GR_CFG_MAX_NODES);
            break;
        }
        p->n_nodes = GR_CFG_MAX_NODES - budget;
        break;
    }
    case YAML_SCALAR_EVENT: {
        n = gr_cfg_new_at(p, GR_CFG_SCALAR, ev->start_mark);
        free(n->scalar);
        n->scalar = gr_cfg_strndup((const char *)ev->data.scalar.value, ev->data.scalar.length);
        n->quoted = ev->data.scalar.style != YAML_PLAIN_SCALAR_STYLE;
        anchor = ev->data.scalar.anchor;
        st = gr_cfg_apply_tag(p, ev, (const char *)ev->data.scalar.tag, n);
        break;
    }
    case YAML_SEQUENCE_START_EVENT:
    case YAML_MAPPING_START_EVENT: {
        bool is_map = ev->type == YAML_MAPPING_START_EVENT;
        if (++p->depth > GR_CFG_MAX_DEPTH) {
            st = gr_cfg_parse_error_at(p, ev->start_mark, "%s: nested more than %d levels deep",
                                       gr_cfg_path_or(p), GR_CFG_MAX_DEPTH);
            p->depth--;
            break;
        }
        n = gr_cfg_new_at(p, is_map ? GR_CFG_MAP : GR_CFG_SEQ, ev->start_mark);
        anchor = is_map ? ev->data.mapping_start.anchor : ev->data.sequence_start.anchor;
        st = gr_cfg_apply_tag(p, ev, (const char *)(is_map ? ev->data.mapping_start.tag : ev->data.sequence_start.tag), n);
        for (; !st;) {
            yaml_event_t e;
            if ((st = gr_cfg_next(p, &e))) break;
            if (e.type == YAML_SEQUENCE_END_EVENT || e.type == YAML_MAPPING_END_EVENT) {
                yaml_event_delete(&e);
                break;
            }
            if (!is_map) {
                size_t old = gr_cfg_path_push(p, NULL, n->n);
                gr_cfg *item;
                st = gr_cfg_parse_node(p, &e, &item);
                p->path[old] = 0;
                if (st) break;
                gr_cfg_seq_append(n, item);
                continue;
            }
            if (e.type != YAML_SCALAR_EVENT) {
                st = gr_cfg_parse_error_at(p, e.start_mark, "%s: map keys must be plain strings",
                                           gr_cfg_path_or(p));
                yaml_event_delete(&e);
                break;
            }
            char *key = gr_cfg_strndup((const char *)e.data.scalar.value, e.data.scalar.length);
            int kl, kc;
            gr_cfg_mark(p, e.start_mark, &kl, &kc);
            yaml_mark_t km = e.start_mark;
            size_t old = gr_cfg_path_push(p, key, 0);
            if (e.data.scalar.tag) { /* a map key is text: of the tags, only !!str fits it */
                char empty[1] = "";
                gr_cfg kn = {.kind = GR_CFG_SCALAR, .scalar = empty};
                st = gr_cfg_apply_tag(p, &e, (const char *)e.data.scalar.tag, &kn);
                if (!st && !kn.quoted)
                    st = gr_cfg_parse_error_at(p, km, "%s: a map key is a string: of the YAML tags, only !!str "
                                               "fits it", p->path);
            }
            yaml_event_delete(&e);
            if (st) {
                p->path[old] = 0;
                free(key);
                break;
            }
            int dup = gr_cfg_find(n, key);
            if (dup >= 0) {
                st = gr_cfg_parse_error_at(p, km, "%s: duplicate key (first given at line %d)", p->path,
                                           n->key_line[dup]);
                p->path[old] = 0;
                free(key);
                break;
            }
            gr_cfg *value = NULL;
            if (!(st = gr_cfg_next(p, &e))) st = gr_cfg_parse_node(p, &e, &value);
            p->path[old] = 0;
            if (st) {
                free(key);
                break;
            }
            gr_cfg_map_append(n, key, kl, kc, value);
        }
        p->depth--;
        break;
    }
    default:
        st = gr_cfg_parse_error_at(p, ev->start_mark, "%s: unexpected YAML event %d", gr_cfg_path_or(p),
                                   (int)ev->type);
        break;
    }
    if (!st && anchor) {
        p->anchors = gr_xrealloc(p->anchors, (size_t)(p->n_anchors + 1) * sizeof *p->anchors);
        p->anchors[p->n_anchors].name = gr_xstrdup((const char *)anchor);
        p->anchors[p->n_anchors].node = n;
        p->n_anchors++;
    }
done:
    if (st) {
        gr_cfg_free(n);
        n = NULL;
    }
    yaml_event_delete(ev);
    *out = n;
    return st;
}

/* One document (or none: an empty null scalar) from the parser's input. */
static gr_status gr_cfg_parse_stream(gr_cfg_parser *p, gr_cfg **out) {
    yaml_event_t ev;
    gr_cfg *root = NULL;
    gr_status st;
    *out = NULL;
    if ((st = gr_cfg_next(p, &ev))) return st; /* STREAM-START */
    yaml_event_delete(&ev);
    if ((st = gr_cfg_next(p, &ev))) return st;
    if (ev.type == YAML_STREAM_END_EVENT) {
        yaml_event_delete(&ev);
        *out = gr_cfg_new(GR_CFG_SCALAR, p->file, p->line0, p->col0);
        return GR_OK;
    }
    yaml_event_delete(&ev); /* DOCUMENT-START */
    if ((st = gr_cfg_next(p, &ev))) return st;
    if ((st = gr_cfg_parse_node(p, &ev, &root))) return st;
    if ((st = gr_cfg_next(p, &ev))) goto fail; /* DOCUMENT-END */
    yaml_event_delete(&ev);
    if ((st = gr_cfg_next(p, &ev))) goto fail;
    if (ev.type != YAML_STREAM_END_EVENT) {
        st = gr_cfg_parse_error_at(p, ev.start_mark, "a job spec is one YAML document, found a second one");
        yaml_event_delete(&ev);
        goto fail;
    }
    yaml_event_delete(&ev);
    *out = root;
    return GR_OK;
fail:
    gr_cfg_free(root);
    return st;
}

/* key: the dotted key the text is the value of (a --set), for messages. */
static gr_status gr_cfg_parse_buffer(const char *text, size_t len, const char *file, int line, int col,
                                     const char *key, gr_cfg **out, gr_error *err) {
    gr_cfg_parser p;
    memset(&p, 0, sizeof p);
    if (key) snprintf(p.path, sizeof p.path, "%s", key);
    p.file = file;
    p.line0 = line;
    p.col0 = col;
    p.err = err;
    p.len = len;
    p.one_line = memchr(text, '\n', len) == NULL;
    *out = NULL;
    if (!yaml_parser_initialize(&p.yp))
        return gr_error_set(err, GR_ERR_OOM, "%s: out of memory while parsing YAML", file);
    yaml_parser_set_input_string(&p.yp, (const unsigned char *)text, len);
    gr_status st = gr_cfg_parse_stream(&p, out);
    yaml_parser_delete(&p.yp);
    for (int i = 0; i < p.n_anchors; i++) free(p.anchors[i].name);
    free(p.anchors);
    return st;
}

gr_status gr_cfg_parse_text(const char *text, const char *file, int line, int col, gr_cfg **out,
                            gr_error *err) {
    return gr_cfg_parse_buffer(text, strlen(text), file, line, col, NULL, out, err);
}

gr_status gr_cfg_parse_file(const char *path, gr_cfg **out, gr_error *err) {
    *out = NULL;
    char *buf;
    size_t len;
    gr_status st = gr_spec_read_file(path, &buf, &len, err);
    if (st) return st;
    st = gr_cfg_parse_buffer(buf, len, path, 1, 1, NULL, out, err);
    free(buf);
    return st;
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

static void gr_cfg_write_str(FILE *f, const char *s, bool force_quotes) {
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
static void gr_cfg_dump_value(const gr_cfg *n, FILE *f, int indent) {
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

/* ======================================================================
 * Schema table
 * ====================================================================== */

typedef enum gr_spec_type {
    GR_ST_SECTION,    /* a map of further rows */
    GR_ST_INT,        /* int64_t (uint64_t with GR_SF_U64) */
    GR_ST_FLOAT,      /* double */
    GR_ST_BOOL,       /* bool */
    GR_ST_STR,        /* char[size] */
    GR_ST_ENUM,       /* one of `choices`: int enum, or char[size] when size > 0 */
    GR_ST_FLOATS,     /* double[size], count in the int at n_off (or exactly size) */
    GR_ST_INTS,       /* int64_t[size], likewise */
    GR_ST_TREE,       /* kept as a gr_cfg subtree: const gr_cfg * */
    GR_ST_LOSS_SCALE  /* "dynamic" or a number > 0 */
} gr_spec_type;

enum {
    GR_SF_LOX = GR_LO_EXCL, /* lower bound exclusive (same bits as gr_cfg_float_ex's) */
    GR_SF_HIX = GR_HI_EXCL, /* upper bound exclusive */
    GR_SF_REQ = 1 << 2,   /* required when its parent map is given */
    GR_SF_U64 = 1 << 3,   /* int stored as uint64_t */
    GR_SF_AUTO = 1 << 4,  /* int: "auto" means 0 */
    GR_SF_SEQ = 1 << 5,   /* tree: non-empty list */
    GR_SF_MAP = 1 << 6,   /* tree: map */
    GR_SF_FIXED = 1 << 7  /* list: exactly `size` items, no count field */
};

typedef const char *(*gr_spec_check_fn)(const char *value);

typedef struct gr_spec_row {
    const char *path;
    gr_spec_type type;
    int flags;
    double lo, hi;        /* float bounds (also list items) */
    int64_t ilo, ihi;     /* int bounds (also list items) */
    const char *def;      /* default as YAML text; NULL: zero / "" / computed */
    const char *choices;  /* enum values, "sgd|adamw" */
    const char *when;     /* only valid when the sibling `type` is one of these */
    size_t off;           /* offsetof the target in gr_job_spec */
    size_t size;          /* strings: capacity; lists: most items */
    size_t n_off;         /* lists: offsetof the int count */
    gr_spec_check_fn check;
} gr_spec_row;

static const char *gr_spec_check_name(const char *s) { return gr_spec_name_problem(s); }

static const char *gr_spec_check_device(const char *s) {
    if (!strcmp(s, "auto") || !strcmp(s, "cpu") || !strcmp(s, "cuda")) return NULL;
    if (!strncmp(s, "cuda:", 5) && gr_cfg_is_digits(s + 5) && strlen(s + 5) <= 4) return NULL;
    return "expected auto, cpu, cuda or cuda:N";
}

static const char *gr_spec_check_group(const char *s) {
    return s[0] == '/' ? NULL : "an HDF5 group must start with '/'";
}

#define GR_OFF(f) offsetof(gr_job_spec, f)
#define GR_FSZ(f) sizeof(((gr_job_spec *)0)->f)
#define GR_BIG ((int64_t)1 << 50)

#define SECTION(p, fl) {.path = p, .type = GR_ST_SECTION, .flags = fl}
#define INT(p, fl, lo_, hi_, d, f) \
    {.path = p, .type = GR_ST_INT, .flags = fl, .ilo = lo_, .ihi = hi_, .def = d, .off = GR_OFF(f)}
#define FLOAT(p, fl, lo_, hi_, d, w, f) \
    {.path = p, .type = GR_ST_FLOAT, .flags = fl, .lo = lo_, .hi = hi_, .def = d, .when = w, .off = GR_OFF(f)}
#define BOOL(p, d, w, f) {.path = p, .type = GR_ST_BOOL, .def = d, .when = w, .off = GR_OFF(f)}
#define STR(p, fl, d, chk, f) \
    {.path = p, .type = GR_ST_STR, .flags = fl, .def = d, .check = chk, .off = GR_OFF(f), .size = GR_FSZ(f)}
#define ENUM(p, ch, d, f) {.path = p, .type = GR_ST_ENUM, .choices = ch, .def = d, .off = GR_OFF(f)}
#define ENUMSTR(p, ch, d, f) \
    {.path = p, .type = GR_ST_ENUM, .choices = ch, .def = d, .off = GR_OFF(f), .size = GR_FSZ(f)}
#define FLOATS(p, fl, lo_, hi_, d, w, f, nf) \
    {.path = p, .type = GR_ST_FLOATS, .flags = fl, .lo = lo_, .hi = hi_, .def = d, .when = w, \
     .off = GR_OFF(f), .size = GR_FSZ(f) / sizeof(double), .n_off = GR_OFF(nf)}
#define TREE(p, fl, f) {.path = p, .type = GR_ST_TREE, .flags = fl, .off = GR_OFF(f)}

/* Ordered so that every section is followed by its own rows (gr_spec_dump
 * writes them in this order). */
static const gr_spec_row gr_spec_rows[] = {
    STR("name", 0, NULL, gr_spec_check_name, name),
    INT("seed", GR_SF_U64, 0, INT64_MAX, "0", seed),
    STR("device", 0, "auto", gr_spec_check_device, device),
    ENUM("precision", "fp32|tf32|fp16|bf16", "fp32", precision),
    {.path = "loss_scale", .type = GR_ST_LOSS_SCALE, .flags = GR_SF_LOX, .lo = 0, .hi = INFINITY},
    BOOL("deterministic", "false", NULL, deterministic),
    BOOL("cuda_graph", "true", NULL, cuda_graph),
    BOOL("cudnn_benchmark", "false", NULL, cudnn_benchmark),

    SECTION("data", 0),
    SECTION("data.train", 0),
    STR("data.train.path", GR_SF_REQ, NULL, NULL, data.train.path),
    STR("data.train.group", 0, "/", gr_spec_check_group, data.train.group),
    SECTION("data.val", 0),
    STR("data.val.path", GR_SF_REQ, NULL, NULL, data.val.path),
    STR("data.val.group", 0, "/", gr_spec_check_group, data.val.group),
    BOOL("data.shuffle", "true", NULL, data.shuffle),
    INT("data.prefetch", 0, 1, 64, "4", data.prefetch),
    INT("data.workers", 0, 0, 256, "2", data.workers),
    SECTION("data.augment", 0),
    SECTION("data.augment.crop", 0),
    INT("data.augment.crop.size", GR_SF_REQ, 1, 65536, NULL, data.crop_size),
    ENUM("data.augment.crop.type", "random|resized", "random", data.crop_type),
    INT("data.augment.crop.padding", 0, 0, 65536, "0", data.crop_padding),
    {.path = "data.augment.crop.scale", .type = GR_ST_FLOATS, .flags = GR_SF_LOX | GR_SF_FIXED, .lo = 0, .hi = 1,
     .def = "[0.08, 1.0]", .when = "resized", .off = GR_OFF(data.crop_scale), .size = 2},
    {.path = "data.augment.crop.ratio", .type = GR_ST_FLOATS, .flags = GR_SF_LOX | GR_SF_FIXED, .lo = 0,
     .hi = INFINITY, .def = "[0.75, 1.3333333333333333]", .when = "resized", .off = GR_OFF(data.crop_ratio),
     .size = 2},
    BOOL("data.augment.flip", "false", NULL, data.flip),
    SECTION("data.normalize", 0),
    FLOATS("data.normalize.mean", GR_SF_REQ, -INFINITY, INFINITY, NULL, NULL, data.mean, data.n_mean),
    FLOATS("data.normalize.std", GR_SF_REQ | GR_SF_LOX, 0, INFINITY, NULL, NULL, data.std, data.n_std),
    ENUMSTR("data.cache", "auto|memory|none", "auto", data.cache),

    SECTION("model", GR_SF_REQ),
    {.path = "model.input", .type = GR_ST_INTS, .ilo = 1, .ihi = 1 << 30, .off = GR_OFF(model.input),
     .size = 4, .n_off = GR_OFF(model.n_input)},
    TREE("model.blocks", GR_SF_MAP, model.blocks),
    TREE("model.layers", GR_SF_REQ | GR_SF_SEQ, model.layers),
    STR("model.init_from", 0, NULL, NULL, model.init_from),

    SECTION("train", GR_SF_REQ),
    INT("train.batch_size", GR_SF_REQ, 1, GR_BIG, NULL, train.batch_size),
    INT("train.micro_batch", 0, 1, GR_BIG, NULL, train.micro_batch),
    INT("train.epochs", 0, 1, 1000000000, NULL, train.epochs),
    INT("train.steps", 0, 1, GR_BIG, NULL, train.steps),
    SECTION("train.optimizer", GR_SF_REQ),
    ENUM("train.optimizer.type", "sgd|adamw", "sgd", train.optimizer.type),
    FLOAT("train.optimizer.lr", GR_SF_REQ | GR_SF_LOX, 0, INFINITY, NULL, NULL, train.optimizer.lr),
    FLOAT("train.optimizer.momentum", GR_SF_HIX, 0, 1, "0", "sgd", train.optimizer.momentum),
    BOOL("train.optimizer.nesterov", "false", "sgd", train.optimizer.nesterov),
    FLOAT("train.optimizer.weight_decay", 0, 0, INFINITY, "0", NULL, train.optimizer.weight_decay),
    {.path = "train.optimizer.betas", .type = GR_ST_FLOATS, .flags = GR_SF_HIX | GR_SF_FIXED, .lo = 0, .hi = 1,
     .def = "[0.9, 0.999]", .when = "adamw", .off = GR_OFF(train.optimizer.betas), .size = 2},
    FLOAT("train.optimizer.eps", GR_SF_LOX, 0, INFINITY, "1e-8", "adamw", train.optimizer.eps),
    SECTION("train.schedule", 0),
    ENUM("train.schedule.type", "constant|step|multistep|cosine|linear", "constant", train.schedule.type),
    FLOAT("train.schedule.warmup_epochs", 0, 0, INFINITY, "0", NULL, train.schedule.warmup_epochs),
    INT("train.schedule.warmup_steps", 0, 0, GR_BIG, "0", train.schedule.warmup_steps),
    FLOAT("train.schedule.step_size", GR_SF_LOX, 0, INFINITY, "30", "step", train.schedule.step_size),
    FLOAT("train.schedule.gamma", GR_SF_LOX, 0, 1, "0.1", "step|multistep", train.schedule.gamma),
    FLOATS("train.schedule.milestones", 0, 0, INFINITY, NULL, "multistep", train.schedule.milestones,
           train.schedule.n_milestones),
    FLOAT("train.schedule.min_lr", 0, 0, INFINITY, "0", "cosine|linear", train.schedule.min_lr),
    SECTION("train.loss", 0),
    ENUMSTR("train.loss.type", "softmax_cross_entropy", "softmax_cross_entropy", train.loss),
    FLOAT("train.loss.label_smoothing", GR_SF_HIX, 0, 1, "0", NULL, train.label_smoothing),
    FLOAT("train.grad_clip", 0, 0, INFINITY, "0", NULL, train.grad_clip),

    SECTION("parallel", 0),
    INT("parallel.data", GR_SF_AUTO, 0, 1 << 20, "auto", parallel.data),
    ENUMSTR("parallel.backend", "auto|nccl|mpi|none", "auto", parallel.backend),

    SECTION("checkpoint", 0),
    STR("checkpoint.dir", 0, NULL, NULL, checkpoint.dir),
    INT("checkpoint.every_steps", 0, 0, GR_BIG, "0", checkpoint.every_steps),
    FLOAT("checkpoint.every_minutes", 0, 0, INFINITY, "10", NULL, checkpoint.every_minutes),
    INT("checkpoint.keep", 0, 1, 1000000, "3", checkpoint.keep),
    FLOAT("checkpoint.signal_deadline_s", GR_SF_LOX, 0, 86400, "20", NULL, checkpoint.signal_deadline_s),

    SECTION("eval", 0),
    INT("eval.every_epochs", 0, 0, 1000000000, "1", eval.every_epochs),
    INT("eval.every_steps", 0, 0, GR_BIG, "0", eval.every_steps),

    SECTION("log", 0),
    INT("log.every_steps", 0, 1, GR_BIG, "50", log.every_steps),
    STR("log.dir", 0, NULL, NULL, log.dir),
    BOOL("log.tensorboard", "true", NULL, log.tensorboard),
};

_Static_assert(sizeof(gr_precision) == sizeof(int) && sizeof(gr_optim_type) == sizeof(int) &&
                   sizeof(gr_sched_type) == sizeof(int),
               "enum-valued rows are stored as int");

static const gr_spec_row *gr_spec_row_find(const char *path) {
    for (size_t i = 0; i < GR_ARRAY_LEN(gr_spec_rows); i++)
        if (!strcmp(gr_spec_rows[i].path, path)) return &gr_spec_rows[i];
    return NULL;
}

/* Is row a direct child of the section at prefix ("" = top level)? */
static bool gr_spec_row_is_child(const gr_spec_row *r, const char *prefix) {
    size_t n = strlen(prefix);
    if (n && (strncmp(r->path, prefix, n) != 0 || r->path[n] != '.')) return false;
    return !strchr(r->path + (n ? n + 1 : 0), '.');
}

static const char *gr_spec_row_leaf(const gr_spec_row *r) {
    const char *d = strrchr(r->path, '.');
    return d ? d + 1 : r->path;
}

/* Word i of "a|b|c" into buf. */
static const char *gr_spec_choice(const char *choices, int i, char *buf, size_t cap) {
    const char *s = choices;
    for (; i > 0 && s; i--) {
        s = strchr(s, '|');
        if (s) s++;
    }
    if (!s) return "?";
    size_t n = strcspn(s, "|");
    if (n >= cap) n = cap - 1;
    memcpy(buf, s, n);
    buf[n] = 0;
    return buf;
}

static int gr_spec_choice_index(const char *choices, const char *v) {
    char buf[64];
    for (int i = 0;; i++) {
        const char *c = gr_spec_choice(choices, i, buf, sizeof buf);
        if (!strcmp(c, "?")) return -1;
        if (!strcmp(c, v)) return i;
    }
}

/* " (did you mean 'x'?)" or " (allowed: a, b, ...)" for a key unknown in
 * the section at prefix. */
static void gr_spec_suggest(const char *prefix, const char *key, char *buf, size_t cap) {
    const char *best = NULL;
    size_t best_d = SIZE_MAX;
    for (size_t i = 0; i < GR_ARRAY_LEN(gr_spec_rows); i++) {
        const gr_spec_row *r = &gr_spec_rows[i];
        if (!gr_spec_row_is_child(r, prefix)) continue;
        size_t d = (size_t)gr_edit_distance(key, gr_spec_row_leaf(r));
        if (d < best_d) best_d = d, best = gr_spec_row_leaf(r);
    }
    size_t klen = strlen(key);
    if (best && best_d < klen && (best_d <= 1 || (best_d == 2 && GR_MAX(klen, strlen(best)) >= 4))) {
        snprintf(buf, cap, " (did you mean '%s'?)", best);
        return;
    }
    size_t len = (size_t)snprintf(buf, cap, " (allowed:");
    bool first = true;
    for (size_t i = 0; i < GR_ARRAY_LEN(gr_spec_rows) && len < cap; i++) {
        const gr_spec_row *r = &gr_spec_rows[i];
        if (!gr_spec_row_is_child(r, prefix)) continue;
        len += (size_t)snprintf(buf + len, cap - len, "%s %s", first ? "" : ",", gr_spec_row_leaf(r));
        first = false;
    }
    if (len < cap) snprintf(buf + len, cap - len, ")");
}

static void gr_spec_join(char *buf, size_t cap, const char *prefix, const char *key) {
    snprintf(buf, cap, "%s%s%s", prefix, prefix[0] ? "." : "", key);
}

/* ---- typed setters ---- */

static void *gr_spec_field(gr_job_spec *spec, const gr_spec_row *r) { return (char *)spec + r->off; }

static gr_status gr_spec_set_string(const gr_spec_row *r, const gr_cfg *n, const char *key, char *dst,
                                    gr_error *err) {
    char got[300];
    if (n->kind != GR_CFG_SCALAR)
        return gr_cfg_error(err, n, key, "expected a string, got %s", gr_cfg_got(n, got, sizeof got));
    if (strlen(n->scalar) >= r->size)
        return gr_cfg_error(err, n, key, "longer than %zu characters", r->size - 1);
    const char *why = r->check ? r->check(n->scalar) : NULL;
    if (why) return gr_cfg_error(err, n, key, "%s, got '%s'", why, gr_cfg_escape(n->scalar, got, sizeof got));
    memcpy(dst, n->scalar, strlen(n->scalar) + 1);
    return GR_OK;
}

static gr_status gr_spec_set(const gr_spec_row *r, const gr_cfg *n, const char *key, gr_job_spec *spec,
                             gr_error *err) {
    void *dst = gr_spec_field(spec, r);
    char got[300];
    gr_status st = GR_OK;
    switch (r->type) {
    case GR_ST_SECTION:
        return gr_error_set(err, GR_ERR_INTERNAL, "internal error (a bug): %s set as a value", key);
    case GR_ST_INT: {
        int64_t v = 0;
        bool plain = n->kind == GR_CFG_SCALAR && !n->quoted;
        if ((r->flags & GR_SF_AUTO) && plain && !strcmp(n->scalar, "auto")) {
            v = 0;
        } else if ((r->flags & GR_SF_AUTO) &&
                   !(plain && gr_cfg_is_digits(n->scalar + (n->scalar[0] == '+' || n->scalar[0] == '-')))) {
            return gr_cfg_error(err, n, key, "expected auto or an integer, got %s", gr_cfg_got(n, got, sizeof got));
        } else if ((st = gr_cfg_int_ex(n, key, r->ilo, r->ihi, &v, err))) {
            return st;
        }
        if (r->flags & GR_SF_U64) {
            uint64_t u = (uint64_t)v;
            memcpy(dst, &u, sizeof u);
        } else {
            memcpy(dst, &v, sizeof v);
        }
        return GR_OK;
    }
    case GR_ST_FLOAT: {
        double v;
        if ((st = gr_cfg_float_ex(n, key, r->lo, r->hi, r->flags, &v, err))) return st;
        memcpy(dst, &v, sizeof v);
        return GR_OK;
    }
    case GR_ST_BOOL: {
        bool v;
        if ((st = gr_cfg_bool(n, key, &v, err))) return st;
        memcpy(dst, &v, sizeof v);
        return GR_OK;
    }
    case GR_ST_STR:
        return gr_spec_set_string(r, n, key, dst, err);
    case GR_ST_ENUM: {
        int i = n->kind == GR_CFG_SCALAR ? gr_spec_choice_index(r->choices, n->scalar) : -1;
        if (i < 0) {
            char list[256], buf[64];
            size_t len = 0;
            for (int k = 0; len < sizeof list; k++) {
                const char *c = gr_spec_choice(r->choices, k, buf, sizeof buf);
                if (!strcmp(c, "?")) break;
                len += (size_t)snprintf(list + len, sizeof list - len, "%s%s", k ? ", " : "", c);
            }
            return gr_cfg_error(err, n, key, "expected one of %s, got %s", list, gr_cfg_got(n, got, sizeof got));
        }
        if (r->size) {
            memcpy(dst, n->scalar, strlen(n->scalar) + 1);
        } else {
            memcpy(dst, &i, sizeof i);
        }
        return GR_OK;
    }
    case GR_ST_FLOATS:
    case GR_ST_INTS: {
        if (n->kind != GR_CFG_SEQ)
            return gr_cfg_error(err, n, key, "expected a list, got %s", gr_cfg_got(n, got, sizeof got));
        bool fixed = r->flags & GR_SF_FIXED;
        if (fixed && (size_t)n->n != r->size)
            return gr_cfg_error(err, n, key, "expected a list of %zu numbers, got %d", r->size, n->n);
        if (!fixed && (n->n < 1 || (size_t)n->n > r->size))
            return gr_cfg_error(err, n, key, "expected a list of 1 to %zu numbers, got %d", r->size, n->n);
        for (int i = 0; i < n->n; i++) {
            char ikey[GR_CFG_KEY_MAX];
            snprintf(ikey, sizeof ikey, "%s[%d]", key, i);
            if (r->type == GR_ST_FLOATS) {
                double v;
                if ((st = gr_cfg_float_ex(n->items[i], ikey, r->lo, r->hi, r->flags, &v, err))) return st;
                ((double *)dst)[i] = v;
            } else {
                int64_t v;
                if ((st = gr_cfg_int_ex(n->items[i], ikey, r->ilo, r->ihi, &v, err))) return st;
                ((int64_t *)dst)[i] = v;
            }
        }
        if (!fixed) memcpy((char *)spec + r->n_off, &n->n, sizeof n->n);
        return GR_OK;
    }
    case GR_ST_TREE:
        if ((r->flags & GR_SF_SEQ) && (n->kind != GR_CFG_SEQ || n->n == 0))
            return gr_cfg_error(err, n, key, "expected a non-empty list, got %s",
                                n->kind == GR_CFG_SEQ ? "an empty list" : gr_cfg_got(n, got, sizeof got));
        if ((r->flags & GR_SF_MAP) && n->kind != GR_CFG_MAP)
            return gr_cfg_error(err, n, key, "expected a map, got %s", gr_cfg_got(n, got, sizeof got));
        memcpy(dst, &n, sizeof n);
        return GR_OK;
    case GR_ST_LOSS_SCALE:
        if (n->kind == GR_CFG_SCALAR && !strcmp(n->scalar, "dynamic")) {
            spec->loss_scale_dynamic = true;
            spec->loss_scale = 1;
            return GR_OK;
        }
        if (n->kind == GR_CFG_SCALAR && !strcmp(n->scalar, "none")) { /* DESIGN 1.4: no scaling */
            spec->loss_scale_dynamic = false;
            spec->loss_scale = 1;
            return GR_OK;
        }
        if (n->kind == GR_CFG_SCALAR && !n->quoted) {
            double v;
            if (gr_cfg_parse_double(n->scalar, &v) != GR_NUM_NOT) {
                if ((st = gr_cfg_float_ex(n, key, r->lo, r->hi, r->flags, &v, err))) return st;
                spec->loss_scale_dynamic = false;
                spec->loss_scale = v;
                return GR_OK;
            }
        }
        return gr_cfg_error(err, n, key, "expected dynamic, none or a number, got %s", gr_cfg_got(n, got, sizeof got));
    }
    return gr_error_set(err, GR_ERR_INTERNAL, "internal error (a bug): %s has no type", key);
}

/* ---- the walk ---- */

static gr_status gr_spec_walk(const char *prefix, const gr_cfg *map, gr_job_spec *spec, gr_error *err) {
    char got[300];
    if (map->kind != GR_CFG_MAP)
        return gr_cfg_error(err, map, prefix[0] ? prefix : "job spec", "expected a map, got %s",
                            gr_cfg_got(map, got, sizeof got));
    for (int i = 0; i < map->n; i++) {
        char key[GR_CFG_KEY_MAX];
        gr_spec_join(key, sizeof key, prefix, map->keys[i]);
        const gr_spec_row *r = gr_spec_row_find(key);
        if (!r || !gr_spec_row_is_child(r, prefix)) {
            char hint[GR_ERROR_MSG_MAX / 2];
            gr_spec_suggest(prefix, map->keys[i], hint, sizeof hint);
            return gr_cfg_key_error(err, map, i, key, "unknown key%s", hint);
        }
        const gr_cfg *v = map->items[i];
        if (gr_cfg_is_null(v)) continue; /* `key:` with no value = not given */
        gr_status st = r->type == GR_ST_SECTION ? gr_spec_walk(key, v, spec, err) : gr_spec_set(r, v, key, spec, err);
        if (st) return st;
    }
    for (size_t i = 0; i < GR_ARRAY_LEN(gr_spec_rows); i++) {
        const gr_spec_row *r = &gr_spec_rows[i];
        if (!(r->flags & GR_SF_REQ) || !gr_spec_row_is_child(r, prefix)) continue;
        if (gr_cfg_is_null(gr_cfg_get(map, gr_spec_row_leaf(r))))
            return gr_cfg_error(err, map, r->path, "required key missing");
    }
    return GR_OK;
}

static gr_status gr_spec_defaults(gr_job_spec *spec, gr_error *err) {
    for (size_t i = 0; i < GR_ARRAY_LEN(gr_spec_rows); i++) {
        const gr_spec_row *r = &gr_spec_rows[i];
        if (!r->def) continue;
        gr_cfg *n;
        gr_status st = gr_cfg_parse_text(r->def, "<default>", 1, 1, &n, err);
        if (!st) st = gr_spec_set(r, n, r->path, spec, err);
        gr_cfg_free(n);
        if (st) {
            gr_error_prefix(err, "internal error (a bug): bad default in the schema table: ");
            err->status = GR_ERR_INTERNAL;
            return GR_ERR_INTERNAL;
        }
    }
    return GR_OK;
}

/* The node at a dotted schema path, or NULL when absent/null. */
static const gr_cfg *gr_spec_node(const gr_cfg *root, const char *path) {
    char buf[GR_CFG_KEY_MAX];
    snprintf(buf, sizeof buf, "%s", path);
    const gr_cfg *n = root;
    for (char *save = NULL, *tok = strtok_r(buf, ".", &save); tok && n; tok = strtok_r(NULL, ".", &save))
        n = gr_cfg_get(n, tok);
    return gr_cfg_is_null(n) ? NULL : n;
}

/* The current value name of row r's sibling `type` (for `when`). */
static const char *gr_spec_type_of(const gr_job_spec *spec, const gr_spec_row *r, char *buf, size_t cap) {
    char path[GR_CFG_KEY_MAX];
    snprintf(path, sizeof path, "%.*s.type", (int)(gr_spec_row_leaf(r) - 1 - r->path), r->path);
    const gr_spec_row *t = gr_spec_row_find(path);
    GR_ASSERT(t && t->type == GR_ST_ENUM && t->size == 0);
    int v;
    memcpy(&v, (const char *)spec + t->off, sizeof v);
    return gr_spec_choice(t->choices, v, buf, cap);
}

static bool gr_spec_when(const gr_job_spec *spec, const gr_spec_row *r) {
    if (!r->when) return true;
    char buf[64];
    return gr_spec_choice_index(r->when, gr_spec_type_of(spec, r, buf, sizeof buf)) >= 0;
}

/* Rules that relate keys to each other; runs after the walk. */
static gr_status gr_spec_cross(gr_job_spec *spec, gr_error *err) {
    const gr_cfg *root = spec->root;
    char buf[64];
    for (size_t i = 0; i < GR_ARRAY_LEN(gr_spec_rows); i++) {
        const gr_spec_row *r = &gr_spec_rows[i];
        const gr_cfg *n = r->when ? gr_spec_node(root, r->path) : NULL;
        if (n && !gr_spec_when(spec, r)) {
            char tpath[GR_CFG_KEY_MAX];
            snprintf(tpath, sizeof tpath, "%.*s.type", (int)(gr_spec_row_leaf(r) - 1 - r->path), r->path);
            char w[64];
            snprintf(w, sizeof w, "%s", r->when);
            for (char *c = w; *c; c++)
                if (*c == '|') *c = '/';
            return gr_cfg_error(err, n, r->path, "only valid when %s is %s (it is %s)", tpath, w,
                                gr_spec_type_of(spec, r, buf, sizeof buf));
        }
    }

    const gr_cfg *mb = gr_spec_node(root, "train.micro_batch");
    if (!mb) {
        spec->train.micro_batch = spec->train.batch_size;
    } else if (spec->train.micro_batch > spec->train.batch_size) {
        return gr_cfg_error(err, mb, "train.micro_batch", "must be <= train.batch_size (%" PRId64 "), got %" PRId64,
                            spec->train.batch_size, spec->train.micro_batch);
    } else if (spec->train.batch_size % spec->train.micro_batch) {
        return gr_cfg_error(err, mb, "train.micro_batch", "must divide train.batch_size (%" PRId64 "), got %" PRId64,
                            spec->train.batch_size, spec->train.micro_batch);
    }
    if (!spec->train.epochs && !spec->train.steps)
        return gr_cfg_error(err, gr_spec_node(root, "train"), "train", "give epochs or steps (or both)");

    /* weight_decay's default is the optimizer's in PyTorch: SGD 0, AdamW 0.01 */
    if (spec->train.optimizer.type == GR_OPTIM_ADAMW && !gr_spec_node(root, "train.optimizer.weight_decay"))
        spec->train.optimizer.weight_decay = 0.01;

    const gr_cfg *nest = gr_spec_node(root, "train.optimizer.nesterov");
    if (nest && spec->train.optimizer.nesterov && !(spec->train.optimizer.momentum > 0))
        return gr_cfg_error(err, nest, "train.optimizer.nesterov", "needs train.optimizer.momentum > 0");

    const gr_sched_spec *s = &spec->train.schedule;
    if (s->type == GR_SCHED_MULTISTEP && s->n_milestones == 0)
        return gr_cfg_error(err, gr_spec_node(root, "train.schedule"), "train.schedule.milestones",
                            "required for type multistep");
    for (int i = 1; i < s->n_milestones; i++)
        if (!(s->milestones[i] > s->milestones[i - 1])) {
            char key[64], a[40], b[40];
            snprintf(key, sizeof key, "train.schedule.milestones[%d]", i);
            gr_fmt_double(a, sizeof a, s->milestones[i - 1]);
            gr_fmt_double(b, sizeof b, s->milestones[i]);
            return gr_cfg_error(err, gr_spec_node(root, "train.schedule.milestones")->items[i], key,
                                "milestones must increase, got %s after %s", b, a);
        }

    if (spec->data.crop_type == 1) {
        const gr_cfg *pad = gr_spec_node(root, "data.augment.crop.padding");
        if (pad && spec->data.crop_padding > 0)
            return gr_cfg_error(err, pad, "data.augment.crop.padding",
                                "applies to crop type random only (type resized takes scale and ratio)");
        const char *names[2] = {"data.augment.crop.scale", "data.augment.crop.ratio"};
        const double *v[2] = {spec->data.crop_scale, spec->data.crop_ratio};
        for (int i = 0; i < 2; i++)
            if (v[i][0] > v[i][1]) {
                char a[40], b[40];
                gr_fmt_double(a, sizeof a, v[i][0]);
                gr_fmt_double(b, sizeof b, v[i][1]);
                return gr_cfg_error(err, gr_spec_node(root, names[i]), names[i],
                                    "expected [low, high] with low <= high, got [%s, %s]", a, b);
            }
    }
    if (spec->data.n_mean != spec->data.n_std)
        return gr_cfg_error(err, gr_spec_node(root, "data.normalize.std"), "data.normalize.std",
                            "has %d values but data.normalize.mean has %d", spec->data.n_std, spec->data.n_mean);

    if (!gr_spec_node(root, "loss_scale")) {
        spec->loss_scale_dynamic = spec->precision == GR_PREC_FP16;
        spec->loss_scale = 1;
    }
    if (!gr_spec_node(root, "name")) {
        const char *base = strrchr(spec->file, '/');
        base = base ? base + 1 : spec->file;
        size_t len = strlen(base);
        if (len > 5 && !strcmp(base + len - 5, ".yaml")) len -= 5;
        else if (len > 4 && !strcmp(base + len - 4, ".yml")) len -= 4;
        char stem[GR_PATH_MAX], shown[300];
        memcpy(stem, base, len);
        stem[len] = 0;
        const char *why = gr_spec_name_problem(stem);
        if (why)
            return gr_error_set(err, GR_ERR_USAGE, "%s: name: not given, and the file name's stem '%s' cannot be "
                                "the run's name (a name %s); set name: in the spec, or --set name=...",
                                spec->file, gr_cfg_escape(stem, shown, sizeof shown), why);
        memcpy(spec->name, stem, len + 1);
    }
    return GR_OK;
}

/* ---- --set ---- */

/* Replaces (or appends) map's value for key with *v, taking ownership. */
static void gr_cfg_put(gr_cfg *map, const char *key, gr_cfg *v) {
    int i = gr_cfg_find(map, key);
    if (i >= 0) {
        gr_cfg_free(map->items[i]);
        map->items[i] = v;
    } else {
        gr_cfg_map_append(map, gr_xstrdup(key), v->line, v->col, v);
    }
}

/* Applies one "dotted.path=value" to *root. */
static gr_status gr_spec_apply_set(gr_cfg **root, const char *set, gr_error *err) {
    const char *eq = strchr(set, '=');
    if (!eq || eq == set)
        return gr_error_set(err, GR_ERR_USAGE, "--set %s: expected KEY=VALUE (e.g. train.optimizer.lr=0.1)", set);
    size_t klen = (size_t)(eq - set);
    if (klen >= GR_CFG_KEY_MAX) return gr_error_set(err, GR_ERR_USAGE, "--set %s: key too long", set);
    char key[GR_CFG_KEY_MAX];
    memcpy(key, set, klen);
    key[klen] = 0;

    /* Split into components; the schema part must name a row. */
    char *comp[64];
    int nc = 0;
    char kbuf[GR_CFG_KEY_MAX];
    memcpy(kbuf, key, klen + 1);
    for (char *s = kbuf;;) {
        if (nc == (int)GR_ARRAY_LEN(comp)) return gr_error_set(err, GR_ERR_USAGE, "--set %s: key too deep", set);
        comp[nc++] = s;
        char *d = strchr(s, '.');
        if (!d) break;
        *d = 0;
        s = d + 1;
    }
    for (int i = 0; i < nc; i++)
        if (!comp[i][0]) return gr_error_set(err, GR_ERR_USAGE, "--set %s: empty component in key '%s'", set, key);

    char prefix[GR_CFG_KEY_MAX] = "";
    const gr_spec_row *row = NULL;
    int ns = 0; /* components that are schema keys */
    while (ns < nc) {
        char path[GR_CFG_KEY_MAX];
        gr_spec_join(path, sizeof path, prefix, comp[ns]);
        row = gr_spec_row_find(path);
        if (!row) {
            char hint[GR_ERROR_MSG_MAX / 2];
            gr_spec_suggest(prefix, comp[ns], hint, sizeof hint);
            return gr_error_set(err, GR_ERR_USAGE, "--set %s: unknown key '%s'%s", set, key, hint);
        }
        snprintf(prefix, sizeof prefix, "%s", path);
        ns++;
        if (row->type != GR_ST_SECTION) break;
    }
    bool tree_ok = row->type == GR_ST_TREE || row->type == GR_ST_FLOATS || row->type == GR_ST_INTS;
    if (ns < nc && !tree_ok)
        return gr_error_set(err, GR_ERR_USAGE, "--set %s: unknown key '%s' (%s is a single value)", set, key,
                            row->path);

    gr_cfg *value;
    gr_status st = gr_cfg_parse_buffer(eq + 1, strlen(eq + 1), "--set", 1, 1, key, &value, err);
    if (st) return st;

    /* Walk/create the maps of the schema part. */
    if ((*root)->kind != GR_CFG_MAP && gr_cfg_is_null(*root)) {
        gr_cfg_free(*root);
        *root = gr_cfg_new(GR_CFG_MAP, "--set", 1, 1);
    }
    gr_cfg *n = *root;
    char where[GR_CFG_KEY_MAX] = "";
    for (int i = 0; i < nc; i++) {
        bool last = i == nc - 1;
        char next[GR_CFG_KEY_MAX];
        if (n->kind == GR_CFG_MAP) {
            gr_spec_join(next, sizeof next, where, comp[i]);
            if (last) {
                gr_cfg_put(n, comp[i], value);
                return GR_OK;
            }
            gr_cfg *c = gr_cfg_get(n, comp[i]);
            if (!c || gr_cfg_is_null(c)) {
                if (i >= ns - 1) { /* a tree or list: only maps may be created */
                    bool want_seq = comp[i + 1][0] >= '0' && comp[i + 1][0] <= '9';
                    if (want_seq) {
                        gr_cfg_free(value);
                        return gr_error_set(err, GR_ERR_USAGE, "--set %s: %s is not in the job spec", set, next);
                    }
                }
                c = gr_cfg_new(GR_CFG_MAP, "--set", 1, 1);
                gr_cfg_put(n, comp[i], c);
            }
            n = c;
        } else if (n->kind == GR_CFG_SEQ) {
            if (snprintf(next, sizeof next, "%s[%s]", where, comp[i]) >= (int)sizeof next) {
                gr_cfg_free(value);
                return gr_error_set(err, GR_ERR_USAGE, "--set %s: key too long", set);
            }
            char *end;
            errno = 0;
            long idx = strtol(comp[i], &end, 10);
            if (*end || !gr_cfg_is_digits(comp[i]) || errno) {
                gr_cfg_free(value);
                return gr_error_set(err, GR_ERR_USAGE, "--set %s: %s is a list; '%s' is not an index", set,
                                    where, comp[i]);
            }
            if (idx >= n->n) {
                gr_cfg_free(value);
                return gr_error_set(err, GR_ERR_USAGE, "--set %s: index %ld out of range (%s has %d items)", set,
                                    idx, where, n->n);
            }
            if (last) {
                gr_cfg_free(n->items[idx]);
                n->items[idx] = value;
                return GR_OK;
            }
            n = n->items[idx];
        } else {
            gr_cfg_free(value);
            char got[300];
            if (i <= ns)
                return gr_cfg_error(err, n, where[0] ? where : "job spec", "expected a map, got %s", gr_cfg_got(n, got, sizeof got));
            return gr_error_set(err, GR_ERR_USAGE, "--set %s: %s is %s, not a map or list", set, where,
                                gr_cfg_got(n, got, sizeof got));
        }
        snprintf(where, sizeof where, "%s", next);
    }
    gr_cfg_free(value);
    return gr_error_set(err, GR_ERR_INTERNAL, "internal error (a bug): --set %s not applied", set);
}

/* ======================================================================
 * Public entry points
 * ====================================================================== */

gr_status gr_spec_load(const char *path, const char *const *sets, int nsets, gr_job_spec *out, gr_error *err) {
    gr_error local;
    if (!err) err = &local;
    memset(out, 0, sizeof *out);
    if (strlen(path) >= sizeof out->file)
        return gr_error_set(err, GR_ERR_USAGE, "%.64s...: job spec path too long", path);
    memcpy(out->file, path, strlen(path) + 1);
    gr_status st = gr_cfg_parse_file(path, &out->root, err);
    for (int i = 0; !st && i < nsets; i++) st = gr_spec_apply_set(&out->root, sets[i], err);
    if (!st) st = gr_spec_defaults(out, err);
    if (!st) st = gr_spec_walk("", out->root, out, err);
    if (!st) st = gr_spec_cross(out, err);
    if (st) gr_spec_free(out);
    return st;
}

void gr_spec_free(gr_job_spec *spec) {
    if (!spec) return;
    gr_cfg_free(spec->root);
    spec->root = NULL;
    spec->model.layers = NULL;
    spec->model.blocks = NULL;
}

/* Does row r have a value worth writing? Values outside the row's bounds
 * are the "not given" sentinels (epochs 0, crop size 0), "" strings and
 * empty lists likewise; a section needs all its required rows. */
static bool gr_spec_present(const gr_job_spec *spec, const gr_spec_row *r) {
    const char *p = (const char *)spec + r->off;
    if (!gr_spec_when(spec, r)) return false;
    switch (r->type) {
    case GR_ST_SECTION: {
        bool any = false;
        for (size_t i = 0; i < GR_ARRAY_LEN(gr_spec_rows); i++) {
            const gr_spec_row *c = &gr_spec_rows[i];
            if (!gr_spec_row_is_child(c, r->path)) continue;
            bool here = gr_spec_present(spec, c);
            if ((c->flags & GR_SF_REQ) && !here) return false;
            any |= here;
        }
        return any;
    }
    case GR_ST_INT: {
        if (r->flags & GR_SF_U64) return true;
        int64_t v;
        memcpy(&v, p, sizeof v);
        return v >= r->ilo && v <= r->ihi;
    }
    case GR_ST_STR: return p[0] != 0;
    case GR_ST_FLOATS:
    case GR_ST_INTS: {
        if (r->flags & GR_SF_FIXED) return true;
        int k;
        memcpy(&k, (const char *)spec + r->n_off, sizeof k);
        return k > 0;
    }
    case GR_ST_TREE: {
        const gr_cfg *t;
        memcpy(&t, p, sizeof t);
        return t != NULL;
    }
    default: return true;
    }
}

static void gr_spec_dump_section(const gr_job_spec *spec, const char *prefix, FILE *f, int indent) {
    for (size_t i = 0; i < GR_ARRAY_LEN(gr_spec_rows); i++) {
        const gr_spec_row *r = &gr_spec_rows[i];
        if (!gr_spec_row_is_child(r, prefix) || !gr_spec_present(spec, r)) continue;
        const char *p = (const char *)spec + r->off;
        char num[64];
        fprintf(f, "%*s%s:", indent, "", gr_spec_row_leaf(r));
        switch (r->type) {
        case GR_ST_SECTION:
            fputc('\n', f);
            gr_spec_dump_section(spec, r->path, f, indent + 2);
            continue;
        case GR_ST_INT: {
            if (r->flags & GR_SF_U64) {
                uint64_t u;
                memcpy(&u, p, sizeof u);
                fprintf(f, " %" PRIu64, u);
            } else {
                int64_t v;
                memcpy(&v, p, sizeof v);
                if ((r->flags & GR_SF_AUTO) && v == 0) fputs(" auto", f);
                else fprintf(f, " %" PRId64, v);
            }
            break;
        }
        case GR_ST_FLOAT: {
            double v;
            memcpy(&v, p, sizeof v);
            gr_fmt_double(num, sizeof num, v);
            fprintf(f, " %s", num);
            break;
        }
        case GR_ST_BOOL: {
            bool v;
            memcpy(&v, p, sizeof v);
            fputs(v ? " true" : " false", f);
            break;
        }
        case GR_ST_STR:
            fputc(' ', f);
            gr_cfg_write_str(f, p, false);
            break;
        case GR_ST_ENUM:
            if (r->size) {
                fprintf(f, " %s", p);
            } else {
                int v;
                memcpy(&v, p, sizeof v);
                fprintf(f, " %s", gr_spec_choice(r->choices, v, num, sizeof num));
            }
            break;
        case GR_ST_FLOATS:
        case GR_ST_INTS: {
            int k = (int)r->size;
            if (!(r->flags & GR_SF_FIXED)) memcpy(&k, (const char *)spec + r->n_off, sizeof k);
            fputs(" [", f);
            for (int j = 0; j < k; j++) {
                if (r->type == GR_ST_FLOATS) {
                    double v;
                    memcpy(&v, p + (size_t)j * sizeof v, sizeof v);
                    gr_fmt_double(num, sizeof num, v);
                    fprintf(f, "%s%s", j ? ", " : "", num);
                } else {
                    int64_t v;
                    memcpy(&v, p + (size_t)j * sizeof v, sizeof v);
                    fprintf(f, "%s%" PRId64, j ? ", " : "", v);
                }
            }
            fputc(']', f);
            break;
        }
        case GR_ST_TREE: {
            const gr_cfg *t;
            memcpy(&t, p, sizeof t);
            gr_cfg_dump_value(t, f, indent + 2);
            continue;
        }
        case GR_ST_LOSS_SCALE:
            if (spec->loss_scale_dynamic) {
                fputs(" dynamic", f);
            } else if (spec->loss_scale == 1) {
                fputs(" none", f);
            } else {
                gr_fmt_double(num, sizeof num, spec->loss_scale);
                fprintf(f, " %s", num);
            }
            break;
        }
        fputc('\n', f);
    }
}

void gr_spec_dump(const gr_job_spec *spec, FILE *f) {
    fprintf(f, "# gpurun job spec (schema v1), resolved from %s\n", spec->file);
    gr_spec_dump_section(spec, "", f, 0);
}

const char *gr_precision_name(gr_precision p) {
    static const char *const names[] = {"fp32", "tf32", "fp16", "bf16"};
    return (unsigned)p < GR_ARRAY_LEN(names) ? names[p] : "?";
}

const char *gr_optim_name(gr_optim_type t) {
    static const char *const names[] = {"sgd", "adamw"};
    return (unsigned)t < GR_ARRAY_LEN(names) ? names[t] : "?";
}

const char *gr_sched_name(gr_sched_type t) {
    static const char *const names[] = {"constant", "step", "multistep", "cosine", "linear"};
    return (unsigned)t < GR_ARRAY_LEN(names) ? names[t] : "?";
}

gr_status gr_spec_error(gr_error *err, const gr_job_spec *spec, const char *key, const char *fmt, ...) {
    char msg[GR_ERROR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    const gr_cfg *n = spec->root ? gr_spec_node(spec->root, key) : NULL;
    if (n) return gr_cfg_error(err, n, key, "%s", msg);
    return gr_error_set(err, GR_ERR_USAGE, "%s: %s: %s", spec->file, key, msg);
}
