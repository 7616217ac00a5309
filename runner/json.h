/* json.h — the few JSON writers metrics.jsonl and summary.json need: a
 * line of "key": value pairs built up in a fixed buffer. */
#ifndef GR_JSON_H
#define GR_JSON_H

#include <stdio.h>

#include "../common/gr_common.h"

typedef struct gr_json {
    char buf[8192]; /* a line that would not fit is a bug (asserted) */
    size_t len;
    int n;
} gr_json;

void gr_json_begin(gr_json *j);
void gr_json_str(gr_json *j, const char *key, const char *val);
void gr_json_num(gr_json *j, const char *key, double val); /* non-finite -> null */
void gr_json_int(gr_json *j, const char *key, int64_t val);
/* A value that is JSON text already (an array, an object). */
void gr_json_raw(gr_json *j, const char *key, const char *json);
/* Closes the object and returns the text (no newline). */
const char *gr_json_end(gr_json *j);

#endif
