/* json.c — JSON object writer for metrics and summaries. */
#include "json.h"

#include <math.h>
#include <stdarg.h>
#include <string.h>

static void gr_json_put(gr_json *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void gr_json_put(gr_json *j, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(j->buf + j->len, sizeof j->buf - j->len, fmt, ap);
    va_end(ap);
    GR_ASSERT(k >= 0 && j->len + (size_t)k < sizeof j->buf); /* truncated JSON would be silently invalid */
    j->len += (size_t)k;
}

static void gr_json_key(gr_json *j, const char *key) {
    gr_json_put(j, "%s\"%s\":", j->n++ ? "," : "", key);
}

void gr_json_begin(gr_json *j) {
    j->len = 0;
    j->n = 0;
    j->buf[0] = '\0';
    gr_json_put(j, "{");
}

void gr_json_str(gr_json *j, const char *key, const char *val) {
    gr_json_key(j, key);
    gr_json_put(j, "\"");
    for (const char *c = val; *c; c++) {
        unsigned char u = (unsigned char)*c;
        if (u == '"' || u == '\\') gr_json_put(j, "\\%c", u);
        else if (u < 0x20) gr_json_put(j, "\\u%04x", u);
        else gr_json_put(j, "%c", u);
    }
    gr_json_put(j, "\"");
}

void gr_json_num(gr_json *j, const char *key, double val) {
    gr_json_key(j, key);
    if (isfinite(val)) gr_json_put(j, "%.9g", val);
    else gr_json_put(j, "null");
}

void gr_json_int(gr_json *j, const char *key, int64_t val) {
    gr_json_key(j, key);
    gr_json_put(j, "%lld", (long long)val);
}

void gr_json_raw(gr_json *j, const char *key, const char *json) {
    gr_json_key(j, key);
    gr_json_put(j, "%s", json);
}

const char *gr_json_end(gr_json *j) {
    gr_json_put(j, "}");
    return j->buf;
}
