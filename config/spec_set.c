/* spec_set.c — `--set dotted.key=value` overrides (spec.h): the key's
 * schema part must name rows of the table (schema.c), past a tree or list
 * row it may go on into the model section (by list index, or into a map);
 * the value is parsed as YAML at "--set:1:col" and grafted into the tree
 * before the schema walk, so it is checked exactly as the file's own. An
 * index may also be written in brackets, as the errors name a list's item
 * (model.layers[3].avgpool.kernel is model.layers.3.avgpool.kernel). */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include "schema.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

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

/* key with each "[digits]" after a component as ".digits" (the path the errors print, as --set takes
 * it); anything else is left as written, for the key's own error. Fits: the result is no longer. */
static void gr_set_key_indices(const char *key, char *out) {
    size_t o = 0;
    for (size_t i = 0; key[i];) {
        if (key[i] == '[' && i > 0 && key[i - 1] != '.') {
            size_t d = i + 1;
            while (key[d] >= '0' && key[d] <= '9') d++;
            const char after = d > i + 1 && key[d] == ']' ? key[d + 1] : 'x';
            if (after == 0 || after == '.' || after == '[') { /* "[digits]" ending the component */
                out[o++] = '.';
                memcpy(out + o, key + i + 1, d - i - 1);
                o += d - i - 1;
                i = d + 1;
                continue;
            }
        }
        out[o++] = key[i++];
    }
    out[o] = 0;
}

gr_status gr_spec_apply_set(gr_cfg **root, const char *set, gr_error *err) {
    const char *eq = strchr(set, '=');
    if (!eq || eq == set)
        return gr_error_set(err, GR_ERR_USAGE, "--set %s: expected KEY=VALUE (e.g. train.optimizer.lr=0.1)", set);
    size_t klen = (size_t)(eq - set);
    if (klen >= GR_CFG_KEY_MAX) return gr_error_set(err, GR_ERR_USAGE, "--set %s: key too long", set);
    char key[GR_CFG_KEY_MAX], written[GR_CFG_KEY_MAX];
    memcpy(written, set, klen);
    written[klen] = 0;
    gr_set_key_indices(written, key);
    klen = strlen(key);

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
