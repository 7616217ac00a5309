/* cfg_internal.h — what the config module's files share and the rest of the
 * tree does not see: building trees (cfg.c) for the parser (cfg_parse.c) and
 * for `--set` (spec_set.c), the scalar conversions behind the typed readers
 * with their bound flags (the schema walk uses them directly), and the
 * writers behind gr_cfg_dump (spec_dump.c writes scalars with them).
 * Internal to config/. */
#ifndef GR_CFG_INTERNAL_H
#define GR_CFG_INTERNAL_H

#include <stdio.h>

#include "cfg.h"

#define GR_CFG_KEY_MAX 512 /* longest dotted key kept for messages */

/* ---- building (cfg.c) ---- */

/* A null value: absent, or an unquoted "", ~, null, Null or NULL. */
bool gr_cfg_is_null(const gr_cfg *n);
/* A new node at file:line:col (a scalar's text is ""). */
gr_cfg *gr_cfg_new(gr_cfg_kind kind, const char *file, int line, int col);
void gr_cfg_seq_append(gr_cfg *seq, gr_cfg *item);
/* Takes ownership of key and value. */
void gr_cfg_map_append(gr_cfg *map, char *key, int line, int col, gr_cfg *value);
/* A deep copy that spends one of *budget per node; NULL once it runs out
 * (the parser caps alias expansion with it). */
gr_cfg *gr_cfg_copy(const gr_cfg *src, long *budget);
/* gr_cfg_error at the position of map key i (unknown or duplicate keys). */
gr_status gr_cfg_key_error(gr_error *err, const gr_cfg *map, int i, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* ---- name indexes (cfg.c) ----
 * An open-addressing hash index over names[0..n) (a map's keys, the
 * parser's anchors) that finds one in O(1): a scan per key made a map of n
 * keys O(n^2) to parse (its duplicate check) and a model of n blocks O(n^2)
 * to build: 150,000 keys took a minute. Below 16 names there is no table and
 * a find scans. The hash is seeded by owner's address (the map, the
 * parser), so no fixed set of names collides. */

/* The index of name among names[0..n), the newest when it is there twice, or -1. */
int gr_cfg_index_find(const gr_cfg_index *ix, const void *owner, char *const *names, int n, const char *name);
/* Indexes names[n - 1] (names[0..n - 1) being indexed), growing the table
 * when it would be over half full. */
void gr_cfg_index_add(gr_cfg_index *ix, const void *owner, char *const *names, int n);
void gr_cfg_index_free(gr_cfg_index *ix);

/* ---- scalar conversion (cfg.c) ---- */

/* How a non-scalar or empty value reads in "got ..." messages. */
const char *gr_cfg_got(const gr_cfg *n, char *buf, size_t cap);
/* s is one or more ASCII digits and nothing else. */
bool gr_cfg_is_digits(const char *s);

typedef enum { GR_NUM_OK, GR_NUM_NOT, GR_NUM_NONFINITE } gr_num_kind;
/* YAML 1.2 core-schema float (or int) text -> double. `.nan`, `.inf`, `nan`,
 * `inf`, `infinity` in any case and sign, and overflow, are NONFINITE. */
gr_num_kind gr_cfg_parse_double(const char *s, double *out);
/* The shortest of %.15g..%.17g that reads back as v. */
void gr_fmt_double(char *buf, size_t cap, double v);

/* Bound flags of gr_cfg_float_ex (the schema's row flags reuse these bits). */
enum { GR_LO_EXCL = 1, GR_HI_EXCL = 2 };
gr_status gr_cfg_int_ex(const gr_cfg *n, const char *key, int64_t lo, int64_t hi, int64_t *out, gr_error *err);
gr_status gr_cfg_float_ex(const gr_cfg *n, const char *key, double lo, double hi, int flags, double *out,
                          gr_error *err);

/* ---- parsing (cfg_parse.c) ---- */

/* gr_cfg_parse_text over len bytes; key: the dotted key the text is the
 * value of (a --set), for messages, or NULL. */
gr_status gr_cfg_parse_buffer(const char *text, size_t len, const char *file, int line, int col,
                              const char *key, gr_cfg **out, gr_error *err);

/* ---- writing (cfg.c) ---- */

/* A string value: plain when it reads back as the same string, else
 * double-quoted (force_quotes: always). */
void gr_cfg_write_str(FILE *f, const char *s, bool force_quotes);
/* Writes what follows "key:" or "-": the scalar on the same line, else a
 * newline and the block at indent. */
void gr_cfg_dump_value(const gr_cfg *n, FILE *f, int indent);

#endif
