/* json_read.h — JSON read back from a run directory: summary.json and the
 * lines of metrics.jsonl, each one flat object (DESIGN 1.3), for `gpurun
 * summarize` and `gpurun plot`. Values are strings (decoded), numbers (kept
 * with their text as written), true/false and null; a nested object or
 * array is checked and skipped. */
#ifndef GR_JSON_READ_H
#define GR_JSON_READ_H

#include <stdbool.h>
#include <stddef.h>

#include "gr_common.h"

typedef enum gr_jkind {
    GR_J_NULL,  /* absent, or null */
    GR_J_NUM,   /* text is the number as written (a JSON number) */
    GR_J_STR,
    GR_J_BOOL,  /* text is "true" or "false" */
    GR_J_OTHER  /* a JSON object or array (read, not kept) */
} gr_jkind;

typedef struct gr_jval {
    gr_jkind kind;
    double num; /* GR_J_NUM */
    char *text; /* owned; NULL when missing */
} gr_jval;

/* Sets c to (kind, num, a copy of text), freeing what it held. */
void gr_jval_set(gr_jval *c, gr_jkind kind, double num, const char *text);
void gr_jval_free(gr_jval *c);

/* Is s, all of it, a JSON number (-?int frac? exp?)? */
bool gr_json_is_number(const char *s);

typedef struct gr_jfield {
    char *key;
    gr_jval val;
} gr_jfield;

typedef struct gr_jobj {
    gr_jfield *f;
    int n, cap;
} gr_jobj;

/* Parses text (n bytes) as one JSON object and nothing else into *o; false
 * with why ("expected ':' at byte 17") when it is not one (o is then empty:
 * a line torn by a kill, two glued together, garbage). */
bool gr_json_object_read(const char *text, size_t n, gr_jobj *o, char *why, size_t why_n);
/* The last value of key in o (JSON's usual rule for a repeated key); NULL when absent. */
const gr_jval *gr_jobj_get(const gr_jobj *o, const char *key);
void gr_jobj_free(gr_jobj *o);

#endif
