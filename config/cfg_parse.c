/* cfg_parse.c — YAML text -> config tree (cfg.h), on libyaml's event API,
 * so that every node and every map key keeps its 1-based file:line:col.
 * Aliases are copied (at most GR_CFG_MAX_NODES nodes in all: no "billion
 * laughs"), nesting is capped, duplicate keys and a second document are
 * errors, and YAML tags go through spec_input.h's rule (only the core
 * schema's). A file is read through spec_input.h's door (regular, <= 4 MiB).
 * Map keys and anchors are hashed (cfg_internal.h's name index), so parsing
 * takes time linear in the text: no key or alias scans the others. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include "cfg_internal.h"
#include "spec_input.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#define GR_CFG_MAX_NODES 200000 /* caps alias expansion ("billion laughs") */
#define GR_CFG_MAX_DEPTH 200    /* caps nesting, so recursion stays shallow */

typedef struct gr_cfg_parser {
    yaml_parser_t yp;
    const char *file;
    int line0, col0; /* position of the text's first character */
    bool one_line;   /* text without a newline: clamp end-of-input marks to it */
    size_t len;
    char **anchor_names;         /* anchors in the order defined (a name again: the newest counts) */
    const gr_cfg **anchor_nodes;
    int n_anchors, cap_anchors;
    gr_cfg_index anchor_index;   /* of anchor_names: an alias is found in O(1) */
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
        int a = gr_cfg_index_find(&p->anchor_index, p, p->anchor_names, p->n_anchors, name);
        const gr_cfg *src = a >= 0 ? p->anchor_nodes[a] : NULL;
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
        if (p->n_anchors == p->cap_anchors) {
            p->cap_anchors = p->cap_anchors ? 2 * p->cap_anchors : 16;
            p->anchor_names = gr_xrealloc(p->anchor_names, (size_t)p->cap_anchors * sizeof *p->anchor_names);
            p->anchor_nodes = gr_xrealloc(p->anchor_nodes, (size_t)p->cap_anchors * sizeof *p->anchor_nodes);
        }
        p->anchor_names[p->n_anchors] = gr_xstrdup((const char *)anchor);
        p->anchor_nodes[p->n_anchors++] = n;
        gr_cfg_index_add(&p->anchor_index, p, p->anchor_names, p->n_anchors);
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

gr_status gr_cfg_parse_buffer(const char *text, size_t len, const char *file, int line, int col,
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
    for (int i = 0; i < p.n_anchors; i++) free(p.anchor_names[i]);
    free(p.anchor_names);
    free(p.anchor_nodes);
    gr_cfg_index_free(&p.anchor_index);
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
