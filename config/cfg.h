/* cfg.h — the config tree: one YAML document (libyaml) as a tree of maps,
 * lists and scalars in which every node and every map key keeps its 1-based
 * file:line:col, so that any later check can point at the text it refuses.
 * Generic: it knows nothing of the job schema (spec.h builds on it).
 *
 * Exports: gr_cfg (the tree), gr_cfg_parse_file / gr_cfg_parse_text,
 * gr_cfg_free, gr_cfg_clone, gr_cfg_dump, lookups (gr_cfg_get, gr_cfg_find),
 * typed scalar readers that report file:line:col (gr_cfg_int, gr_cfg_float,
 * gr_cfg_bool) and gr_cfg_error, the one message form. */
#ifndef GR_CFG_H
#define GR_CFG_H

#include <stdio.h>

#include "../common/gr_common.h"

typedef enum gr_cfg_kind { GR_CFG_SCALAR, GR_CFG_MAP, GR_CFG_SEQ } gr_cfg_kind;

/* A hash index of names kept in an array (cfg_internal.h's gr_cfg_index_*). */
typedef struct gr_cfg_index {
    int *slot;  /* 1 + an index into the names, 0: empty; NULL below 16 names */
    size_t cap; /* slots: a power of 2, at most half of them used */
} gr_cfg_index;

typedef struct gr_cfg gr_cfg;
struct gr_cfg {
    gr_cfg_kind kind;
    const char *file; /* the YAML file, or "--set" for an override value */
    int line, col;    /* 1-based position of this node's value */
    char *scalar;     /* GR_CFG_SCALAR: the text ("" for an empty/null value) */
    bool quoted;      /* scalar was quoted in the source: always a string */
    int n;            /* MAP: number of pairs; SEQ: number of items */
    char **keys;      /* MAP: keys[i] */
    int *key_line, *key_col; /* MAP: position of keys[i] */
    gr_cfg **items;   /* MAP: value of keys[i]; SEQ: item i */
    gr_cfg_index key_index; /* MAP: of keys, for gr_cfg_find */
};

/* MAP lookup; NULL when absent or when map is not a map. */
gr_cfg *gr_cfg_get(const gr_cfg *map, const char *key);
/* Index of key in map, or -1: O(1) (a map of many keys is hashed), so the
 * parser's duplicate-key check and the model's block lookups stay linear in
 * the size of the spec. */
int gr_cfg_find(const gr_cfg *map, const char *key);

/* Typed scalar readers for op attrs. `key` is used in the message only.
 * Errors (exit 2) read `file:line:col: key: message`, e.g.
 * "job.yaml:7:20: model.layers[1].dense.units: expected an integer, got 'abc'".
 * Integers reject fractions, NaN, inf; both check [lo, hi]. */
gr_status gr_cfg_int(const gr_cfg *node, const char *key, int64_t lo, int64_t hi,
                     int64_t *out, gr_error *err);
gr_status gr_cfg_float(const gr_cfg *node, const char *key, double lo, double hi,
                       double *out, gr_error *err);
gr_status gr_cfg_bool(const gr_cfg *node, const char *key, bool *out, gr_error *err);
/* Formats "file:line:col: key: " + message into err, status GR_ERR_USAGE. */
gr_status gr_cfg_error(gr_error *err, const gr_cfg *node, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Parses one YAML document (file) or one YAML value (text, for --set) into a
 * tree. Anchors/aliases are resolved; multiple documents are an error. */
gr_status gr_cfg_parse_file(const char *path, gr_cfg **out, gr_error *err);
gr_status gr_cfg_parse_text(const char *text, const char *file, int line, int col,
                            gr_cfg **out, gr_error *err);
void gr_cfg_free(gr_cfg *node);
/* A deep copy (positions kept), to be freed with gr_cfg_free. */
gr_cfg *gr_cfg_clone(const gr_cfg *src);
/* Writes the subtree as block YAML at the given indent (gr_spec_dump writes
 * the model section with it). */
void gr_cfg_dump(const gr_cfg *node, FILE *f, int indent);
/* Calls fn for every leaf under root with its dotted path ("train.optimizer.lr";
 * sequence items by index: "model.layers.1.dense.units"; cut at 1023 bytes):
 * a scalar (text: its value), an empty map or sequence ("{}", "[]"), and
 * with flow_seqs a sequence of scalars as one leaf ("[1, 8, 8]"). leaf is
 * the node. (A checkpoint's spec against the job's; a sweep's differing keys.) */
void gr_cfg_leaves(const gr_cfg *root, bool flow_seqs,
                   void (*fn)(void *user, const char *path, const gr_cfg *leaf, const char *text), void *user);

#endif
