/* safetensors.c — Hugging Face's safetensors format (see safetensors.h):
 * a strict JSON parser for its header, the header's checks, and the
 * conversion of F32/F16/BF16 data to float32. */
#include "safetensors.h"
#include "../common/gr_half.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- JSON ---- */

typedef struct st_js {
    const unsigned char *s;
    size_t n, i;
    const char *ctx;                 /* the tensor entry being read, for messages; NULL none */
    char why[256];                   /* the first failure */
} st_js;

__attribute__((format(printf, 2, 3))) static bool js_fail(st_js *j, const char *fmt, ...) {
    if (j->why[0]) return false;
    char m[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m, sizeof m, fmt, ap);
    va_end(ap);
    if (j->ctx)
        snprintf(j->why, sizeof j->why, "tensor '%.60s': %s at byte %zu of the JSON", j->ctx, m, j->i);
    else
        snprintf(j->why, sizeof j->why, "%s at byte %zu of the JSON", m, j->i);
    return false;
}

static void js_ws(st_js *j) {
    while (j->i < j->n && (j->s[j->i] == ' ' || j->s[j->i] == '\t' || j->s[j->i] == '\n' || j->s[j->i] == '\r'))
        j->i++;
}

/* The next non-space byte; -1 at the end. */
static int js_peek(st_js *j) {
    js_ws(j);
    return j->i < j->n ? j->s[j->i] : -1;
}

static bool js_expect(st_js *j, char c) {
    if (js_peek(j) != c) return js_fail(j, "expected '%c'", c);
    j->i++;
    return true;
}

/* The length of the valid UTF-8 sequence at p (avail bytes), 0 if none:
 * no overlong forms, no surrogates, nothing past U+10FFFF. */
static int js_utf8_len(const unsigned char *p, size_t avail) {
    unsigned c = p[0];
    int len;
    uint32_t cp, min;
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) len = 2, cp = c & 0x1Fu, min = 0x80;
    else if ((c & 0xF0u) == 0xE0) len = 3, cp = c & 0x0Fu, min = 0x800;
    else if (c >= 0xF0 && c <= 0xF4) len = 4, cp = c & 0x07u, min = 0x10000;
    else return 0;
    if ((size_t)len > avail) return 0;
    for (int k = 1; k < len; k++) {
        if ((p[k] & 0xC0u) != 0x80u) return 0;
        cp = cp << 6 | (p[k] & 0x3Fu);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    return len;
}

static bool js_hex4(st_js *j, uint32_t *v) {
    *v = 0;
    for (int k = 0; k < 4; k++, j->i++) {
        int c = j->i < j->n ? j->s[j->i] : -1, d;
        if (c >= '0' && c <= '9') d = c - '0';
        else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
        else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
        else return js_fail(j, "bad \\u escape");
        *v = *v << 4 | (uint32_t)d;
    }
    return true;
}

static size_t js_put_utf8(char *o, uint32_t cp) {
    if (cp < 0x80) { o[0] = (char)cp; return 1; }
    if (cp < 0x800) { o[0] = (char)(0xC0 | cp >> 6); o[1] = (char)(0x80 | (cp & 0x3F)); return 2; }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | cp >> 12); o[1] = (char)(0x80 | (cp >> 6 & 0x3F)); o[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | cp >> 18); o[1] = (char)(0x80 | (cp >> 12 & 0x3F));
    o[2] = (char)(0x80 | (cp >> 6 & 0x3F)); o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* One \uXXXX escape (after the backslash and 'u'), a surrogate pair whole. */
static bool js_unicode(st_js *j, uint32_t *cp) {
    if (!js_hex4(j, cp)) return false;
    if (*cp >= 0xDC00 && *cp <= 0xDFFF) return js_fail(j, "a lone low surrogate");
    if (*cp >= 0xD800 && *cp <= 0xDBFF) {
        uint32_t lo;
        if (j->i + 2 > j->n || j->s[j->i] != '\\' || j->s[j->i + 1] != 'u') return js_fail(j, "a lone high surrogate");
        j->i += 2;
        if (!js_hex4(j, &lo)) return false;
        if (lo < 0xDC00 || lo > 0xDFFF) return js_fail(j, "a lone high surrogate");
        *cp = 0x10000 + ((*cp - 0xD800) << 10) + (lo - 0xDC00);
    }
    if (*cp == 0) return js_fail(j, "a string holds U+0000");
    return true;
}

/* A string, decoded into *out (malloc'd; out NULL: checked only). */
static bool js_string(st_js *j, char **out) {
    if (!js_expect(j, '"')) return false;
    size_t start = j->i;
    char *o = out ? gr_xmalloc(j->n - start + 1) : NULL; /* decoding never lengthens */
    size_t k = 0;
    bool ok = false;
    for (;;) {
        if (j->i >= j->n) { js_fail(j, "unterminated string"); break; }
        unsigned c = j->s[j->i];
        if (c == '"') { j->i++; ok = true; break; }
        if (c < 0x20) { js_fail(j, "a control character in a string"); break; }
        if (c == '\\') {
            if (++j->i >= j->n) { js_fail(j, "unterminated string"); break; }
            char e = (char)j->s[j->i++], d = 0;
            const char *map = "\"\"\\\\//b\bf\fn\nr\rt\t";
            for (const char *m = map; *m; m += 2)
                if (*m == e) d = m[1];
            if (d) { if (o) o[k++] = d; continue; }
            uint32_t cp;
            if (e != 'u') { j->i--; js_fail(j, "bad escape '\\%c'", e); break; }
            if (!js_unicode(j, &cp)) break;
            if (o) k += js_put_utf8(o + k, cp);
            continue;
        }
        int len = js_utf8_len(j->s + j->i, j->n - j->i);
        if (!len) { js_fail(j, "invalid UTF-8 in a string"); break; }
        if (o) memcpy(o + k, j->s + j->i, (size_t)len), k += (size_t)len;
        j->i += (size_t)len;
    }
    if (!ok) { free(o); return false; }
    if (o) { o[k] = 0; *out = o; }
    return true;
}

/* A number, checked against JSON's grammar; *u its value when it is a
 * non-negative integer below 2^53 written without fraction or exponent
 * (*is_uint tells). */
static bool js_number(st_js *j, bool *is_uint, uint64_t *u) {
    js_ws(j);
    size_t i = j->i;
    const unsigned char *s = j->s;
    bool neg = false, plain = true;
    uint64_t v = 0;
#define JS_DIGIT(k) ((k) < j->n && s[k] >= '0' && s[k] <= '9')
    if (i < j->n && s[i] == '-') neg = true, i++;
    if (!JS_DIGIT(i)) return js_fail(j, "expected a value");
    if (s[i] == '0') i++;
    else
        for (; JS_DIGIT(i); i++) {
            if (v > (1ull << 53)) plain = false;
            else v = v * 10 + (uint64_t)(s[i] - '0');
        }
    if (i < j->n && s[i] == '.') {
        plain = false;
        if (!JS_DIGIT(++i)) { j->i = i; return js_fail(j, "expected a digit"); }
        while (JS_DIGIT(i)) i++;
    }
    if (i < j->n && (s[i] == 'e' || s[i] == 'E')) {
        plain = false;
        if (++i < j->n && (s[i] == '+' || s[i] == '-')) i++;
        if (!JS_DIGIT(i)) { j->i = i; return js_fail(j, "expected a digit"); }
        while (JS_DIGIT(i)) i++;
    }
#undef JS_DIGIT
    j->i = i;
    *is_uint = plain && !neg && v < (1ull << 53);
    *u = v;
    return true;
}

static int js_cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Keys sorted, the first repeated one into j->why (where: "an object"). */
static bool js_unique(st_js *j, char **keys, int n, const char *where) {
    if (n > 1) qsort(keys, (size_t)n, sizeof *keys, js_cmp_str); /* keys may be NULL when n is 0 */
    for (int k = 1; k < n; k++)
        if (!strcmp(keys[k - 1], keys[k])) {
            if (!j->why[0]) snprintf(j->why, sizeof j->why, "key '%.60s' appears twice in %s", keys[k], where);
            return false;
        }
    return true;
}

/* ---- the header ---- */

static const struct { const char *name; gr_st_dtype dt; int size; } st_dtypes[] = {
    {"F32", GR_ST_F32, 4}, {"F16", GR_ST_F16, 2}, {"BF16", GR_ST_BF16, 2},
    {"F64", GR_ST_OTHER, 8}, {"I64", GR_ST_OTHER, 8}, {"U64", GR_ST_OTHER, 8},
    {"I32", GR_ST_OTHER, 4}, {"U32", GR_ST_OTHER, 4}, {"I16", GR_ST_OTHER, 2}, {"U16", GR_ST_OTHER, 2},
    {"I8", GR_ST_OTHER, 1}, {"U8", GR_ST_OTHER, 1}, {"BOOL", GR_ST_OTHER, 1},
    {"F8_E4M3", GR_ST_OTHER, 1}, {"F8_E5M2", GR_ST_OTHER, 1},
};

/* An array of non-negative integers: at most max of them into v, *n read. */
static bool st_uint_list(st_js *j, const char *key, uint64_t *v, int max, int *n) {
    if (!js_expect(j, '[')) return false;
    *n = 0;
    if (js_peek(j) == ']') { j->i++; return true; }
    for (;;) {
        bool is_uint = false;
        uint64_t u = 0;
        if (!js_number(j, &is_uint, &u)) return false;
        if (!is_uint) return js_fail(j, "%s: expected a non-negative integer below 2^53", key);
        if (*n == max) return js_fail(j, "%s: more than %d values", key, max);
        v[(*n)++] = u;
        int c = js_peek(j);
        j->i++;
        if (c == ']') return true;
        if (c != ',') { j->i--; return js_fail(j, "expected ',' or ']'"); }
    }
}

static bool st_dtype(st_js *j, gr_st_tensor *t) {
    char *s;
    if (!js_string(j, &s)) return false;
    bool ok = strlen(s) < sizeof t->dtype;
    if (ok) snprintf(t->dtype, sizeof t->dtype, "%s", s);
    free(s);
    if (!ok) return js_fail(j, "dtype: an over-long name");
    t->dt = GR_ST_OTHER;
    t->elem_size = 0;
    for (size_t k = 0; k < GR_ARRAY_LEN(st_dtypes); k++)
        if (!strcmp(t->dtype, st_dtypes[k].name)) t->dt = st_dtypes[k].dt, t->elem_size = st_dtypes[k].size;
    return true;
}

/* One tensor's entry: exactly dtype, shape and data_offsets. */
static bool st_entry(st_js *j, gr_st_tensor *t) {
    if (!js_expect(j, '{')) return false;
    bool seen[3] = {false, false, false};
    static const char *const keys[3] = {"dtype", "shape", "data_offsets"};
    if (js_peek(j) != '}')
        for (;;) {
            char *key;
            size_t at = j->i;
            if (!js_string(j, &key)) return false;
            int k = 0;
            while (k < 3 && strcmp(key, keys[k])) k++;
            free(key);
            if (k == 3 || seen[k]) {
                j->i = at;
                return js_fail(j, k == 3 ? "unknown key (a tensor has dtype, shape and data_offsets)"
                                         : "a key appears twice");
            }
            seen[k] = true;
            if (!js_expect(j, ':')) return false;
            uint64_t v[GR_ST_MAX_DIMS];
            int n;
            if (k == 0 && !st_dtype(j, t)) return false;
            if (k == 1) {
                if (!st_uint_list(j, "shape", v, GR_ST_MAX_DIMS, &n)) return false;
                t->ndim = n;
                for (int d = 0; d < n; d++) t->shape[d] = (int64_t)v[d];
            }
            if (k == 2) {
                if (!st_uint_list(j, "data_offsets", v, 2, &n)) return false;
                if (n != 2) return js_fail(j, "data_offsets: expected [begin, end]");
                t->begin = v[0], t->end = v[1];
            }
            int c = js_peek(j);
            j->i++;
            if (c == '}') break;
            if (c != ',') { j->i--; return js_fail(j, "expected ',' or '}'"); }
        }
    else
        j->i++;
    for (int k = 0; k < 3; k++)
        if (!seen[k]) return js_fail(j, "no %s", keys[k]);
    return true;
}

/* "__metadata__": an object of strings, its keys unique. */
static bool st_metadata(st_js *j) {
    char **keys = NULL;
    int nk = 0, cap = 0;
    bool ok = js_peek(j) == '{' || js_fail(j, "__metadata__: expected an object of strings");
    if (ok) j->i++;
    if (ok && js_peek(j) == '}') j->i++;
    else
        while (ok) {
            GR_GROW(keys, cap, nk + 1);
            if (!(ok = js_string(j, &keys[nk]))) break;
            nk++;
            if (!(ok = js_expect(j, ':'))) break;
            if (js_peek(j) != '"') ok = js_fail(j, "__metadata__: expected an object of strings");
            if (!ok || !(ok = js_string(j, NULL))) break;
            int c = js_peek(j);
            j->i++;
            if (c == '}') break;
            if (c != ',') { j->i--; ok = js_fail(j, "expected ',' or '}'"); }
        }
    if (ok) ok = js_unique(j, keys, nk, "__metadata__");
    for (int k = 0; k < nk; k++) free(keys[k]);
    free(keys);
    return ok;
}

static bool st_object(st_js *j, gr_st_file *f) {
    int cap = 0;
    bool meta = false;
    if (!js_expect(j, '{')) return false;
    if (js_peek(j) == '}') { j->i++; return true; }
    for (;;) {
        char *key;
        size_t at = j->i;
        if (!js_string(j, &key)) return false;
        if (!js_expect(j, ':')) { free(key); return false; }
        if (!strcmp(key, "__metadata__")) {
            free(key);
            if (meta) { j->i = at; return js_fail(j, "key '__metadata__' appears twice in the header"); }
            meta = true;
            if (!st_metadata(j)) return false;
        } else {
            GR_GROW(f->t, cap, f->n + 1);
            gr_st_tensor *t = &f->t[f->n++];
            memset(t, 0, sizeof *t);
            t->name = key;
            j->ctx = key;
            if (!st_entry(j, t)) return false;
            j->ctx = NULL;
        }
        int c = js_peek(j);
        j->i++;
        if (c == '}') return true;
        if (c != ',') { j->i--; return js_fail(j, "expected ',' or '}'"); }
    }
}

static int st_cmp_name(const void *a, const void *b) {
    return strcmp(((const gr_st_tensor *)a)->name, ((const gr_st_tensor *)b)->name);
}

static int st_cmp_begin(const void *a, const void *b) {
    const gr_st_tensor *x = *(const gr_st_tensor *const *)a, *y = *(const gr_st_tensor *const *)b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end;
}

/* Each tensor's size against its shape and dtype, its offsets within the data. */
static gr_status st_check_sizes(const gr_st_file *f, const char *file, gr_error *err) {
    for (int k = 0; k < f->n; k++) {
        const gr_st_tensor *t = &f->t[k];
        if (t->begin > t->end || t->end > f->data_size)
            return gr_error_set(err, GR_ERR_CKPT, "%s: bad safetensors header: tensor '%s': data_offsets [%llu, "
                                "%llu] are out of range (the data has %llu bytes)", file, t->name,
                                (unsigned long long)t->begin, (unsigned long long)t->end,
                                (unsigned long long)f->data_size);
        if (!t->elem_size) continue;
        uint64_t bytes = (uint64_t)t->elem_size;
        bool over = false;
        for (int d = 0; d < t->ndim; d++) {
            if (t->shape[d] && bytes > UINT64_MAX / (uint64_t)t->shape[d]) over = true;
            bytes *= (uint64_t)t->shape[d];
        }
        if (over || bytes != t->end - t->begin)
            return gr_error_set(err, GR_ERR_CKPT, "%s: bad safetensors header: tensor '%s': its shape holds %s%llu "
                                "bytes of %s, but data_offsets [%llu, %llu] give %llu", file, t->name,
                                over ? "over " : "", over ? (unsigned long long)UINT64_MAX : (unsigned long long)bytes,
                                t->dtype, (unsigned long long)t->begin, (unsigned long long)t->end,
                                (unsigned long long)(t->end - t->begin));
    }
    return GR_OK;
}

/* The tensors tile the data: sorted by begin, each starts where the last ended. */
static gr_status st_check_tiling(const gr_st_file *f, const char *file, gr_error *err) {
    const gr_st_tensor **ord = gr_xmalloc(((size_t)f->n + 1) * sizeof *ord);
    for (int k = 0; k < f->n; k++) ord[k] = &f->t[k];
    qsort(ord, (size_t)f->n, sizeof *ord, st_cmp_begin);
    uint64_t at = 0;
    gr_status st = GR_OK;
    for (int k = 0; k < f->n && !st; k++) {
        const gr_st_tensor *t = ord[k], *p = k ? ord[k - 1] : NULL;
        if (t->begin < at)
            st = gr_error_set(err, GR_ERR_CKPT, "%s: bad safetensors header: tensors '%s' and '%s' overlap (bytes "
                              "[%llu, %llu) and [%llu, %llu))", file, p->name, t->name, (unsigned long long)p->begin,
                              (unsigned long long)p->end, (unsigned long long)t->begin, (unsigned long long)t->end);
        else if (t->begin > at)
            st = gr_error_set(err, GR_ERR_CKPT, "%s: bad safetensors header: bytes [%llu, %llu) of the data belong "
                              "to no tensor", file, (unsigned long long)at, (unsigned long long)t->begin);
        at = t->end;
    }
    if (!st && at != f->data_size)
        st = gr_error_set(err, GR_ERR_CKPT, "%s: bad safetensors header: bytes [%llu, %llu) of the data belong to "
                          "no tensor", file, (unsigned long long)at, (unsigned long long)f->data_size);
    free(ord);
    return st;
}

gr_status gr_st_parse(gr_st_file *f, const char *file, const char *json, size_t n, uint64_t data_size,
                      gr_error *err) {
    memset(f, 0, sizeof *f);
    f->fd = -1;
    f->data_size = data_size;
    st_js j = {.s = (const unsigned char *)json, .n = n};
    bool ok = st_object(&j, f);
    if (ok && js_peek(&j) != -1) ok = js_fail(&j, "more after the header's object");
    if (ok) {
        char **names = gr_xmalloc(((size_t)f->n + 1) * sizeof *names);
        for (int k = 0; k < f->n; k++) names[k] = f->t[k].name;
        ok = js_unique(&j, names, f->n, "the header (a tensor named twice)");
        free(names);
    }
    gr_status st = GR_OK;
    if (!ok) st = gr_error_set(err, GR_ERR_CKPT, "%s: bad safetensors header: %s", file, j.why);
    if (!st && f->n > 0) qsort(f->t, (size_t)f->n, sizeof *f->t, st_cmp_name); /* f->t is NULL with no tensors */
    if (!st) st = st_check_sizes(f, file, err);
    if (!st) st = st_check_tiling(f, file, err);
    if (st) gr_st_close(f);
    return st;
}

static uint64_t st_le64(const unsigned char *b) {
    uint64_t v = 0;
    for (int k = 7; k >= 0; k--) v = v << 8 | b[k];
    return v;
}

/* Reads exactly n bytes at off; false on a short read (errno 0) or an error. */
static bool st_pread(int fd, void *buf, size_t n, uint64_t off) {
    size_t got = 0;
    errno = 0;
    while (got < n) {
        ssize_t r = pread(fd, (char *)buf + got, n - got, (off_t)(off + got));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return false;
        got += (size_t)r;
    }
    return true;
}

gr_status gr_st_open(gr_st_file *f, const char *path, gr_error *err) {
    memset(f, 0, sizeof *f);
    f->fd = -1;
    int fd = open(path, O_RDONLY);
    struct stat sb;
    if (fd < 0 || fstat(fd, &sb) != 0) {
        gr_status st = gr_error_set(err, GR_ERR_CKPT, "%s: %s", path, strerror(errno));
        if (fd >= 0) close(fd);
        return st;
    }
    uint64_t size = (uint64_t)sb.st_size;
    unsigned char b8[8];
    if (size < 8 || !st_pread(fd, b8, 8, 0)) {
        close(fd);
        return gr_error_set(err, GR_ERR_CKPT, "%s: not a safetensors file: %llu bytes, shorter than its 8-byte "
                            "header length", path, (unsigned long long)size);
    }
    uint64_t n = st_le64(b8);
    if (n > GR_ST_MAX_HEADER || n < 2) {
        close(fd);
        return gr_error_set(err, GR_ERR_CKPT, "%s: not a safetensors file (nor an HDF5 file or llm.c's GPT-2 "
                            "checkpoint): its first 8 bytes give a header of %llu bytes (at most %llu)", path,
                            (unsigned long long)n, GR_ST_MAX_HEADER);
    }
    if (n > size - 8) {
        close(fd);
        return gr_error_set(err, GR_ERR_CKPT, "%s: truncated: a safetensors header of %llu bytes, but only %llu "
                            "follow its length", path, (unsigned long long)n, (unsigned long long)(size - 8));
    }
    char *json = gr_xmalloc((size_t)n);
    gr_status st = GR_OK;
    if (!st_pread(fd, json, (size_t)n, 8))
        st = gr_error_set(err, GR_ERR_CKPT, "%s: cannot read: %s", path, strerror(errno ? errno : EIO));
    else if (json[0] != '{')
        st = gr_error_set(err, GR_ERR_CKPT, "%s: not a safetensors file (nor an HDF5 file or llm.c's GPT-2 "
                          "checkpoint): no JSON object after the 8-byte header length", path);
    if (!st) st = gr_st_parse(f, path, json, (size_t)n, size - 8 - n, err);
    free(json);
    if (st) {
        close(fd);
        return st;
    }
    f->fd = fd;
    f->data_start = 8 + n;
    return GR_OK;
}

const gr_st_tensor *gr_st_find(const gr_st_file *f, const char *name) {
    gr_st_tensor key = {.name = (char *)name};
    return f->n ? bsearch(&key, f->t, (size_t)f->n, sizeof *f->t, st_cmp_name) : NULL;
}

gr_status gr_st_read_values(int fd, const char *file, const char *what, uint64_t off, gr_st_dtype dt, int64_t n,
                            float *dst, gr_error *err) {
    GR_ASSERT(dt != GR_ST_OTHER);
    const size_t es = dt == GR_ST_F32 ? 4 : 2, chunk = 1 << 16; /* values per read */
    unsigned char *buf = gr_xmalloc(chunk * es);
    gr_status st = GR_OK;
    for (int64_t at = 0; at < n && !st; at += (int64_t)chunk) {
        size_t m = (size_t)(n - at) < chunk ? (size_t)(n - at) : chunk;
        if (!st_pread(fd, buf, m * es, off + (uint64_t)at * es)) {
            st = errno ? gr_error_set(err, GR_ERR_CKPT, "%s: %s: cannot read: %s", file, what, strerror(errno))
                       : gr_error_set(err, GR_ERR_CKPT, "%s: truncated: the file ends inside %s", file, what);
            break;
        }
        float *o = dst + at;
        const unsigned char *b = buf;
        if (dt == GR_ST_F32)
            for (size_t k = 0; k < m; k++, b += 4)
                o[k] = gr_half_float_hd((uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 |
                                        (uint32_t)b[3] << 24);
        else if (dt == GR_ST_F16)
            for (size_t k = 0; k < m; k++, b += 2) o[k] = gr_fp16_decode_hd((uint16_t)(b[0] | b[1] << 8));
        else
            for (size_t k = 0; k < m; k++, b += 2) o[k] = gr_bf16_decode_hd((uint16_t)(b[0] | b[1] << 8));
    }
    free(buf);
    return st;
}

gr_status gr_st_read(const gr_st_file *f, const char *file, const gr_st_tensor *t, float *dst, gr_error *err) {
    if (t->dt == GR_ST_OTHER)
        return gr_error_set(err, GR_ERR_CKPT, "%s: %s: dtype %s, which gpurun does not read (F32, F16 or BF16)",
                            file, t->name, t->dtype);
    char what[300];
    snprintf(what, sizeof what, "tensor '%s'", t->name);
    return gr_st_read_values(f->fd, file, what, f->data_start + t->begin, t->dt,
                             (int64_t)((t->end - t->begin) / (t->dt == GR_ST_F32 ? 4 : 2)), dst, err);
}

void gr_st_close(gr_st_file *f) {
    for (int k = 0; k < f->n; k++) free(f->t[k].name);
    free(f->t);
    if (f->fd >= 0) close(f->fd);
    memset(f, 0, sizeof *f);
    f->fd = -1;
}
