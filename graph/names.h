/* names.h — a string -> int table for graph/: the builder's layer names
 * and each scope's names (`input:` references), so that a lookup costs one
 * hash instead of a scan of every layer built so far (150k layers took over
 * a minute with scans; this keeps compile near-linear).
 *
 * Exports: gr_names (open addressing, linear probing, FNV-1a; keys are
 * copied, so callers may pass names in buffers that move), with the usual
 * _init/_free pair, gr_names_put (insert or replace) and gr_names_get. */
#ifndef GR_NAMES_H
#define GR_NAMES_H

#include "../common/gr_common.h"

typedef struct gr_names_slot {
    char *key;   /* NULL = empty (entries are never removed) */
    uint64_t hash;
    int value;
} gr_names_slot;

typedef struct gr_names {
    gr_names_slot *slots;
    size_t cap;  /* a power of two, or 0 before the first put */
    size_t n;    /* keys held; kept at most cap / 2 */
} gr_names;

void gr_names_init(gr_names *t);
void gr_names_free(gr_names *t);
/* Maps key to value, replacing the value a key already has. */
void gr_names_put(gr_names *t, const char *key, int value);
/* The value of key, or -1 when the table does not hold it. */
int gr_names_get(const gr_names *t, const char *key);

#endif
