/* json_read.c — JSON read back from a run directory (see json_read.h). */
#include "json_read.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GR_JSON_DEPTH 32 /* nesting a skipped value may have */

void gr_jval_set(gr_jval *c, gr_jkind kind, double num, const char *text) {
    char *t = text ? gr_xstrdup(text) : NULL;
    free(c->text);
    *c = (gr_jval){kind, num, t};
}

void gr_jval_free(gr_jval *c) {
    free(c->text);
    *c = (gr_jval){0};
}



typedef struct gr_jp {
    const char *s;
    size_t i, n;
    int depth;
    char why[96];
} gr_jp;

static bool gr_sum_jp_fail(gr_jp *p, const char *what) {
    snprintf(p->why, sizeof p->why, "%s at byte %zu", what, p->i + 1);
    return false;
}

static void gr_sum_jp_ws(gr_jp *p) {
    while (p->i < p->n && p->s[p->i] && strchr(" \t\r\n", p->s[p->i])) p->i++;
}

static bool gr_sum_jp_peek(gr_jp *p, char c) {
    gr_sum_jp_ws(p);
    return p->i < p->n && p->s[p->i] == c;
}

static bool gr_sum_jp_eat(gr_jp *p, char c, const char *what) {
    if (!gr_sum_jp_peek(p, c)) return gr_sum_jp_fail(p, what);
    p->i++;
    return true;
}

static size_t gr_json_digits(const char *s, size_t n) {
    size_t k = 0;
    while (k < n && s[k] >= '0' && s[k] <= '9') k++;
    return k;
}

/* Length of the JSON number at s (at most n bytes), 0 when there is none. */
static size_t gr_json_number_len(const char *s, size_t n) {
    size_t i = n && s[0] == '-', d = gr_json_digits(s + i, n - i);
    if (d == 0 || (d > 1 && s[i] == '0')) return 0;
    i += d;
    if (i < n && s[i] == '.') {
        if (!(d = gr_json_digits(s + i + 1, n - i - 1))) return 0;
        i += 1 + d;
    }
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        size_t j = i + 1 + (i + 1 < n && (s[i + 1] == '+' || s[i + 1] == '-'));
        if (!(d = gr_json_digits(s + j, n - j))) return 0;
        i = j + d;
    }
    return i;
}

bool gr_json_is_number(const char *s) {
    size_t n = strlen(s);
    return n && gr_json_number_len(s, n) == n;
}

static int gr_json_hex4(const char *s) {
    int v = 0;
    for (int k = 0; k < 4; k++) {
        char c = s[k];
        int d = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                       : -1;
        if (d < 0) return -1;
        v = v * 16 + d;
    }
    return v;
}

static size_t gr_json_utf8(unsigned cp, char *o) {
    if (cp < 0x80) return o[0] = (char)cp, 1;
    if (cp < 0x800) return o[0] = (char)(0xC0 | cp >> 6), o[1] = (char)(0x80 | (cp & 0x3F)), 2;
    if (cp < 0x10000)
        return o[0] = (char)(0xE0 | cp >> 12), o[1] = (char)(0x80 | ((cp >> 6) & 0x3F)),
               o[2] = (char)(0x80 | (cp & 0x3F)), 3;
    o[0] = (char)(0xF0 | cp >> 18), o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3F)), o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* The code point of the \uXXXX escape at p->s[p->i] ('u' read past), a
 * surrogate pair joined; -1 (p->why set) when malformed or U+0000. */
static long gr_sum_jp_uescape(gr_jp *p) {
    int hi = p->i + 4 <= p->n ? gr_json_hex4(p->s + p->i) : -1;
    if (hi <= 0) return gr_sum_jp_fail(p, hi ? "bad \\u escape" : "\\u0000 in a string"), -1;
    p->i += 4;
    if (hi < 0xD800 || hi > 0xDFFF) return hi;
    int lo = hi < 0xDC00 && p->i + 6 <= p->n && p->s[p->i] == '\\' && p->s[p->i + 1] == 'u'
                 ? gr_json_hex4(p->s + p->i + 2)
                 : -1;
    if (lo < 0xDC00 || lo > 0xDFFF) return gr_sum_jp_fail(p, "lone UTF-16 surrogate"), -1;
    p->i += 6;
    return 0x10000 + ((long)(hi - 0xD800) << 10) + (lo - 0xDC00);
}

/* One escape after a backslash, decoded into o; its length, 0 when bad. */
static size_t gr_sum_jp_escape(gr_jp *p, char *o) {
    const char *from = "\"\\/bfnrt", *to = "\"\\/\b\f\n\r\t";
    if (p->i >= p->n) return gr_sum_jp_fail(p, "unterminated string"), 0;
    char c = p->s[p->i++];
    if (c == 'u') {
        long cp = gr_sum_jp_uescape(p);
        return cp < 0 ? 0 : gr_json_utf8((unsigned)cp, o);
    }
    const char *k = c ? strchr(from, c) : NULL; /* c may be a NUL byte of the input */
    if (!k) return p->i--, gr_sum_jp_fail(p, "bad escape in a string"), 0;
    o[0] = to[k - from];
    return 1;
}

/* A string at p (opening quote next); *out (when out) a decoded copy. */
static bool gr_sum_jp_string(gr_jp *p, char **out) {
    if (!gr_sum_jp_eat(p, '"', "expected a string")) return false;
    size_t end = p->i;
    while (end < p->n && p->s[end] != '"') end += p->s[end] == '\\' ? 2 : 1;
    char *o = gr_xmalloc(GR_MIN(end, p->n) - p->i + 1); /* decoding never lengthens */
    size_t k = 0;
    for (;;) {
        if (p->i >= p->n) return free(o), gr_sum_jp_fail(p, "unterminated string");
        unsigned char c = (unsigned char)p->s[p->i];
        if (c < 0x20) return free(o), gr_sum_jp_fail(p, "control character in a string");
        p->i++;
        if (c == '"') break;
        size_t e = c == '\\' ? gr_sum_jp_escape(p, o + k) : (o[k] = (char)c, 1);
        if (!e) return free(o), false;
        k += e;
    }
    o[k] = '\0';
    if (out) *out = o;
    else free(o);
    return true;
}

static bool gr_sum_jp_value(gr_jp *p, gr_jval *out);

/* A nested object or array, read and checked, not kept. */
static bool gr_sum_jp_container(gr_jp *p) {
    bool obj = p->s[p->i] == '{';
    char close = obj ? '}' : ']';
    if (++p->depth > GR_JSON_DEPTH) return gr_sum_jp_fail(p, "nested too deep");
    p->i++;
    for (bool first = true; !gr_sum_jp_peek(p, close); first = false) {
        gr_jval skip = {0};
        if (!first && !gr_sum_jp_eat(p, ',', obj ? "expected ',' or '}'" : "expected ',' or ']'")) return false;
        if (obj && (!gr_sum_jp_string(p, NULL) || !gr_sum_jp_eat(p, ':', "expected ':'"))) return false;
        bool ok = gr_sum_jp_value(p, &skip);
        gr_jval_free(&skip);
        if (!ok) return false;
    }
    p->i++;
    p->depth--;
    return true;
}

static bool gr_sum_jp_word(gr_jp *p, const char *w) {
    size_t n = strlen(w);
    if (p->n - p->i < n || memcmp(p->s + p->i, w, n) != 0) return false;
    p->i += n;
    return true;
}

static bool gr_sum_jp_value(gr_jp *p, gr_jval *out) {
    gr_sum_jp_ws(p);
    if (p->i >= p->n) return gr_sum_jp_fail(p, "expected a value");
    char c = p->s[p->i];
    if (c == '"') {
        char *s;
        if (!gr_sum_jp_string(p, &s)) return false;
        *out = (gr_jval){GR_J_STR, 0, s};
        return true;
    }
    if (c == '{' || c == '[') return out->kind = GR_J_OTHER, gr_sum_jp_container(p);
    if (gr_sum_jp_word(p, "null")) return out->kind = GR_J_NULL, true;
    if (gr_sum_jp_word(p, "true")) return gr_jval_set(out, GR_J_BOOL, 0, "true"), true;
    if (gr_sum_jp_word(p, "false")) return gr_jval_set(out, GR_J_BOOL, 0, "false"), true;
    size_t k = gr_json_number_len(p->s + p->i, p->n - p->i);
    if (!k) return gr_sum_jp_fail(p, "expected a value");
    char *t = gr_xmalloc(k + 1);
    memcpy(t, p->s + p->i, k);
    t[k] = '\0';
    p->i += k;
    *out = (gr_jval){GR_J_NUM, strtod(t, NULL), t};
    return true;
}

void gr_jobj_free(gr_jobj *o) {
    for (int i = 0; i < o->n; i++) free(o->f[i].key), gr_jval_free(&o->f[i].val);
    free(o->f);
    *o = (gr_jobj){0};
}

/* The last value of key in o (JSON's usual rule for a repeated key); NULL when absent. */
const gr_jval *gr_jobj_get(const gr_jobj *o, const char *key) {
    for (int i = o->n - 1; i >= 0; i--)
        if (strcmp(o->f[i].key, key) == 0) return &o->f[i].val;
    return NULL;
}

static bool gr_sum_jp_field(gr_jp *p, gr_jobj *o) {
    gr_jfield f = {0};
    if (!gr_sum_jp_string(p, &f.key)) return false;
    if (!gr_sum_jp_eat(p, ':', "expected ':'") || !gr_sum_jp_value(p, &f.val)) {
        free(f.key);
        gr_jval_free(&f.val);
        return false;
    }
    GR_GROW(o->f, o->cap, o->n + 1);
    o->f[o->n++] = f;
    return true;
}

/* Parses text (n bytes) as one JSON object and nothing else into *o; false
 * with why ("expected ':' at byte 17") when it is not one (o is then empty). */
bool gr_json_object_read(const char *text, size_t n, gr_jobj *o, char *why, size_t why_n) {
    gr_jp p = {.s = text, .n = n};
    *o = (gr_jobj){0};
    bool ok = gr_sum_jp_eat(&p, '{', "expected '{'");
    for (bool first = true; ok && !gr_sum_jp_peek(&p, '}'); first = false)
        ok = (first || gr_sum_jp_eat(&p, ',', "expected ',' or '}'")) && gr_sum_jp_field(&p, o);
    if (ok && p.i >= p.n) ok = gr_sum_jp_fail(&p, "unterminated object");
    if (ok) {
        p.i++;
        gr_sum_jp_ws(&p);
        if (p.i < p.n) ok = gr_sum_jp_fail(&p, "text after the object");
    }
    if (!ok) {
        gr_jobj_free(o);
        snprintf(why, why_n, "%s", p.why);
    }
    return ok;
}

