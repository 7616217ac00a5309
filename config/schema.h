/* schema.h — the job-spec schema as a table (schema.c): one row per key of
 * schema v1 (DESIGN 1.4) with its type, bounds, default and target field in
 * gr_job_spec, and the lookups over it that loading (spec_load.c), `--set`
 * (spec_set.c) and dumping (spec_dump.c) share. Internal to config/.
 *
 * Exports: gr_spec_row and gr_spec_rows[0..gr_spec_n_rows) (ordered so that
 * every section is followed by its own rows), gr_spec_row_find and the row
 * helpers, gr_spec_node (the tree node at a dotted path), gr_spec_when (is a
 * type-dependent row valid for the current type?), and gr_spec_apply_set
 * (spec_set.c) for gr_spec_load. */
#ifndef GR_SCHEMA_H
#define GR_SCHEMA_H

#include "cfg_internal.h"
#include "spec.h"

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
    GR_SF_FIXED = 1 << 7, /* list: exactly `size` items, no count field */
    GR_SF_LIST = 1 << 8,  /* tree: a list, which may be empty */
    GR_SF_AUTO_NEG = 1 << 9 /* int: "auto" means -1 (where 0 is a value of its own) */
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
    /* Bool and enum rows whose every value schema v1 accepts but this
     * version honours only some of: those values ("false", "auto|none"), and
     * why another is refused at load (spec_load.c), at its file:line:col. */
    const char *honoured;
    const char *unhonoured_why;
} gr_spec_row;

extern const gr_spec_row gr_spec_rows[];
extern const size_t gr_spec_n_rows;

/* The row at a dotted path ("train.optimizer.lr"), or NULL. */
const gr_spec_row *gr_spec_row_find(const char *path);
/* Is row a direct child of the section at prefix ("" = top level)? */
bool gr_spec_row_is_child(const gr_spec_row *r, const char *prefix);
/* The last component of the row's path. */
const char *gr_spec_row_leaf(const gr_spec_row *r);
/* Word i of "a|b|c" into buf; "?" past the end. */
const char *gr_spec_choice(const char *choices, int i, char *buf, size_t cap);
/* Index of v among "a|b|c", or -1. */
int gr_spec_choice_index(const char *choices, const char *v);
/* " (did you mean 'x'?)" or " (allowed: a, b, ...)" for a key unknown in
 * the section at prefix. */
void gr_spec_suggest(const char *prefix, const char *key, char *buf, size_t cap);
/* prefix.key, or key at the top level. */
void gr_spec_join(char *buf, size_t cap, const char *prefix, const char *key);

/* The node at a dotted schema path, or NULL when absent/null. */
const gr_cfg *gr_spec_node(const gr_cfg *root, const char *path);
/* The current value name of row r's sibling `type` (for `when`). */
const char *gr_spec_type_of(const gr_job_spec *spec, const gr_spec_row *r, char *buf, size_t cap);
/* Is row r valid for its section's current type (always, without `when`)? */
bool gr_spec_when(const gr_job_spec *spec, const gr_spec_row *r);

/* spec_set.c: applies one "dotted.key=value" to *root (a --set). */
gr_status gr_spec_apply_set(gr_cfg **root, const char *set, gr_error *err);

#endif
