/* matfile.c — MAT-files of level 5 read into memory (see matfile.h). The
 * format (MathWorks, "MAT-File Format", the level 5 chapter): a 128-byte
 * header (text, subsystem offset, version 0x0100, endian "IM"), then data
 * elements, each a tag (type and byte count, or in the "small" form both in
 * 4 bytes with up to 4 bytes of data) and its data padded to 8 bytes. A
 * variable is an miMATRIX element (array flags, dimensions, name, then by
 * class: the real values; the characters; a struct's field names and one
 * miMATRIX per element and field; a cell's miMATRIX per element), or an
 * miCOMPRESSED element whose zlib stream inflates to one. */
#include "matfile.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

enum { MI_INT8 = 1, MI_UINT8, MI_INT16, MI_UINT16, MI_INT32, MI_UINT32, MI_SINGLE, MI_DOUBLE = 9, MI_INT64 = 12,
       MI_UINT64, MI_MATRIX, MI_COMPRESSED, MI_UTF8, MI_UTF16, MI_UTF32 };
enum { MX_CELL = 1, MX_STRUCT, MX_OBJECT, MX_CHAR, MX_SPARSE, MX_DOUBLE, MX_UINT64 = 15 };
#define MAT_MAX_DEPTH 32

typedef struct mat_bytes {
    const uint8_t *p;
    size_t n;
} mat_bytes;

typedef struct mat_ctx {
    const char *path;
    gr_error *err;
    int depth;
} mat_ctx;

static uint32_t mat_u32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static bool mat_fail(mat_ctx *c, const char *what) {
    gr_error_set(c->err, GR_ERR_DATA, "%s: not a MAT-file MATLAB can read, or damaged: %s", c->path, what);
    return false;
}

/* The data element at the front of *in: its type and data; *in moves past
 * it (and its padding). */
static bool mat_elem(mat_ctx *c, mat_bytes *in, uint32_t *type, mat_bytes *data) {
    if (in->n < 8) return mat_fail(c, "a data element's tag is cut off");
    const uint32_t w0 = mat_u32(in->p);
    size_t size, adv;
    if (w0 >> 16) { /* small: the byte count in the upper half, the data in the next 4 bytes */
        *type = w0 & 0xffff, size = w0 >> 16, adv = 8;
        if (size > 4) return mat_fail(c, "a small data element of more than 4 bytes");
        *data = (mat_bytes){in->p + 4, size};
    } else {
        *type = w0, size = mat_u32(in->p + 4);
        if (size > in->n - 8) return mat_fail(c, "a data element runs past the end");
        *data = (mat_bytes){in->p + 8, size};
        adv = *type == MI_COMPRESSED ? 8 + size : 8 + ((size + 7) & ~(size_t)7);
    }
    adv = GR_MIN(adv, in->n); /* the file's last element may lack its padding */
    in->p += adv, in->n -= adv;
    return true;
}

/* Bytes per value of a numeric data type; 0 for others. */
static size_t mat_type_size(uint32_t t) {
    switch (t) {
    case MI_INT8: case MI_UINT8: case MI_UTF8: return 1;
    case MI_INT16: case MI_UINT16: case MI_UTF16: return 2;
    case MI_INT32: case MI_UINT32: case MI_SINGLE: case MI_UTF32: return 4;
    case MI_DOUBLE: case MI_INT64: case MI_UINT64: return 8;
    default: return 0;
    }
}

/* Value i of data of type t (a numeric type) as a double. */
static double mat_value(uint32_t t, const uint8_t *p, size_t i) {
    uint64_t u = 0;
    const size_t sz = mat_type_size(t);
    for (size_t b = 0; b < sz; b++) u |= (uint64_t)p[i * sz + b] << (8 * b);
    switch (t) {
    case MI_INT8: return (int8_t)u;
    case MI_INT16: return (int16_t)u;
    case MI_INT32: return (int32_t)u;
    case MI_INT64: return (double)(int64_t)u;
    case MI_SINGLE: { float f; uint32_t v = (uint32_t)u; memcpy(&f, &v, 4); return f; }
    case MI_DOUBLE: { double d; memcpy(&d, &u, 8); return d; }
    default: return (double)u;
    }
}

/* Appends code point cp as UTF-8 to s at *n. */
static void mat_put_utf8(char *s, size_t *n, uint32_t cp) {
    if (cp > 0x10ffff || (cp >= 0xd800 && cp < 0xe000)) cp = 0xfffd;
    if (cp < 0x80) s[(*n)++] = (char)cp;
    else if (cp < 0x800) s[(*n)++] = (char)(0xc0 | cp >> 6), s[(*n)++] = (char)(0x80 | (cp & 0x3f));
    else if (cp < 0x10000)
        s[(*n)++] = (char)(0xe0 | cp >> 12), s[(*n)++] = (char)(0x80 | (cp >> 6 & 0x3f)),
        s[(*n)++] = (char)(0x80 | (cp & 0x3f));
    else
        s[(*n)++] = (char)(0xf0 | cp >> 18), s[(*n)++] = (char)(0x80 | (cp >> 12 & 0x3f)),
        s[(*n)++] = (char)(0x80 | (cp >> 6 & 0x3f)), s[(*n)++] = (char)(0x80 | (cp & 0x3f));
}

/* A char array's data element as UTF-8 (UTF-8 and 8-bit data kept as
 * they are; 16-bit units with their surrogate pairs; 32-bit code points). */
static bool mat_chars(mat_ctx *c, uint32_t t, mat_bytes d, gr_mat_array *a) {
    const size_t sz = mat_type_size(t);
    if (sz == 0 || t == MI_SINGLE || t == MI_DOUBLE) return mat_fail(c, "a char array of non-integer data");
    const size_t units = d.n / sz;
    size_t n = 0;
    a->text = gr_xmalloc(units * 4 + 1);
    for (size_t i = 0; i < units; i++) {
        uint32_t u = (uint32_t)mat_value(t == MI_UTF16 ? MI_UINT16 : t == MI_UTF32 ? MI_UINT32 : t, d.p, i);
        if (sz == 1) {
            a->text[n++] = (char)u;
            continue;
        }
        if (sz == 2 && u >= 0xd800 && u < 0xdc00 && i + 1 < units) {
            const uint32_t lo = (uint32_t)mat_value(MI_UINT16, d.p, i + 1);
            if (lo >= 0xdc00 && lo < 0xe000) u = 0x10000 + ((u - 0xd800) << 10) + (lo - 0xdc00), i++;
        }
        mat_put_utf8(a->text, &n, u);
    }
    a->text[n] = '\0';
    return true;
}

static bool mat_matrix(mat_ctx *c, mat_bytes in, gr_mat_array *a);

/* The next element of in, an miMATRIX, into a new array *out. */
static bool mat_child(mat_ctx *c, mat_bytes *in, gr_mat_array **out) {
    uint32_t t;
    mat_bytes d;
    if (!mat_elem(c, in, &t, &d)) return false;
    if (t != MI_MATRIX) return mat_fail(c, "a struct or cell element that is not an array");
    *out = gr_xcalloc(1, sizeof **out);
    return mat_matrix(c, d, *out);
}

/* A struct array's field names and fields, after its name. */
static bool mat_struct(mat_ctx *c, mat_bytes in, gr_mat_array *a) {
    uint32_t t;
    mat_bytes d;
    if (!mat_elem(c, &in, &t, &d) || t != MI_INT32 || d.n != 4) return mat_fail(c, "a struct's field name length");
    const size_t len = mat_u32(d.p);
    if (!mat_elem(c, &in, &t, &d) || t != MI_INT8 || len == 0 || d.n % len != 0)
        return mat_fail(c, "a struct's field names");
    a->nfields = (int)GR_MIN(d.n / len, (size_t)INT32_MAX);
    if ((double)a->numel * a->nfields * 8 > (double)in.n) return mat_fail(c, "a struct larger than its data");
    a->fields = gr_xcalloc((size_t)GR_MAX(a->nfields, 1), sizeof *a->fields);
    for (int f = 0; f < a->nfields; f++) a->fields[f] = strndup((const char *)d.p + (size_t)f * len, len);
    a->elems = gr_xcalloc((size_t)GR_MAX(a->numel * a->nfields, 1), sizeof *a->elems);
    for (int64_t i = 0; i < a->numel * a->nfields; i++)
        if (!mat_child(c, &in, &a->elems[i])) return false;
    return true;
}

/* The array whose miMATRIX data is in. */
static bool mat_matrix(mat_ctx *c, mat_bytes in, gr_mat_array *a) {
    a->name = gr_xstrdup("");
    if (in.n == 0) return true; /* an empty array: [] */
    if (++c->depth > MAT_MAX_DEPTH) return mat_fail(c, "arrays nested too deep");
    uint32_t t;
    mat_bytes d;
    if (!mat_elem(c, &in, &t, &d) || t != MI_UINT32 || d.n != 8) return mat_fail(c, "an array's flags");
    const uint32_t cls = mat_u32(d.p) & 0xff;
    if (!mat_elem(c, &in, &t, &d) || t != MI_INT32 || d.n < 8 || d.n > 4 * GR_MAT_MAX_DIMS)
        return mat_fail(c, "an array's dimensions");
    a->ndims = (int)(d.n / 4);
    a->numel = 1;
    for (int k = 0; k < a->ndims; k++) {
        a->dims[k] = (int32_t)mat_u32(d.p + 4 * k);
        if (a->dims[k] < 0 || (a->dims[k] > 0 && a->numel > INT64_MAX / 16 / a->dims[k]))
            return mat_fail(c, "an array's dimensions");
        a->numel *= a->dims[k];
    }
    if (!mat_elem(c, &in, &t, &d) || t != MI_INT8) return mat_fail(c, "an array's name");
    free(a->name);
    a->name = strndup((const char *)d.p, d.n);
    bool ok = true;
    if (cls == MX_CELL) {
        a->cls = GR_MAT_CELL;
        if ((double)a->numel * 8 > (double)in.n) return mat_fail(c, "a cell array larger than its data");
        a->elems = gr_xcalloc((size_t)GR_MAX(a->numel, 1), sizeof *a->elems);
        for (int64_t i = 0; i < a->numel && ok; i++) ok = mat_child(c, &in, &a->elems[i]);
    } else if (cls == MX_STRUCT) {
        a->cls = GR_MAT_STRUCT;
        ok = mat_struct(c, in, a);
    } else if (cls == MX_CHAR) {
        a->cls = GR_MAT_CHAR;
        ok = mat_elem(c, &in, &t, &d) && mat_chars(c, t, d, a);
    } else if (cls >= MX_DOUBLE && cls <= MX_UINT64) {
        a->cls = GR_MAT_NUMERIC;
        ok = mat_elem(c, &in, &t, &d);
        const size_t sz = mat_type_size(t);
        if (ok && (sz == 0 || t >= MI_UTF8 || d.n != (size_t)a->numel * sz))
            return mat_fail(c, "a numeric array whose data does not match its dimensions");
        a->num = gr_xmalloc((size_t)GR_MAX(a->numel, 1) * sizeof *a->num);
        for (int64_t i = 0; ok && i < a->numel; i++) a->num[i] = mat_value(t, d.p, (size_t)i);
    } else {
        a->cls = GR_MAT_OTHER; /* sparse, objects, function handles: not needed here */
    }
    c->depth--;
    return ok;
}

/* The zlib stream z inflated into *out (allocated), at most GR_MAT_MAX_BYTES. */
static bool mat_inflate(mat_ctx *c, mat_bytes z, uint8_t **out, size_t *n) {
    z_stream s;
    memset(&s, 0, sizeof s);
    if (inflateInit(&s) != Z_OK) return mat_fail(c, "zlib cannot start");
    size_t cap = GR_MAX(z.n * 4, (size_t)4096);
    *out = gr_xmalloc(cap), *n = 0;
    s.next_in = (Bytef *)z.p;
    s.avail_in = (uInt)z.n;
    int r = Z_OK;
    while (r == Z_OK) {
        if (*n == cap) {
            if (cap >= GR_MAT_MAX_BYTES) break;
            cap = GR_MIN(2 * cap, GR_MAT_MAX_BYTES);
            *out = gr_xrealloc(*out, cap);
        }
        s.next_out = *out + *n;
        s.avail_out = (uInt)(cap - *n);
        r = inflate(&s, Z_NO_FLUSH);
        *n = cap - s.avail_out;
        if (r == Z_BUF_ERROR && s.avail_in == 0) break;
    }
    inflateEnd(&s);
    if (r == Z_STREAM_END) return true;
    char what[160];
    snprintf(what, sizeof what, *n >= GR_MAT_MAX_BYTES ? "a compressed variable over %zu bytes"
                                : "compressed data that zlib refuses or that is cut off (%zu bytes inflated)",
             *n >= GR_MAT_MAX_BYTES ? GR_MAT_MAX_BYTES : *n);
    return mat_fail(c, what);
}

/* The file's variables, until the one named `name`: into *out, else NULL. */
static bool mat_find(mat_ctx *c, mat_bytes in, const char *name, gr_mat_array **out) {
    *out = NULL;
    while (in.n > 0) {
        uint32_t t;
        mat_bytes d;
        uint8_t *raw = NULL;
        size_t nraw;
        if (!mat_elem(c, &in, &t, &d)) return false;
        if (t == MI_COMPRESSED) {
            if (!mat_inflate(c, d, &raw, &nraw)) {
                free(raw);
                return false;
            }
            mat_bytes inner = {raw, nraw};
            if (!mat_elem(c, &inner, &t, &d)) t = 0;
        }
        gr_mat_array *a = t == MI_MATRIX ? gr_xcalloc(1, sizeof *a) : NULL;
        const bool ok = !a || mat_matrix(c, d, a);
        free(raw);
        if (ok && a && strcmp(a->name, name) == 0) {
            *out = a;
            return true;
        }
        gr_mat_free(a);
        if (!ok) return false;
    }
    return true;
}

gr_status gr_mat_read(const char *path, const char *name, gr_mat_array **out, gr_error *err) {
    *out = NULL;
    gr_status st = gr_check_regular(path, "a MAT-file", GR_ERR_DATA, err);
    if (st != GR_OK) return st;
    FILE *f = fopen(path, "rb");
    if (!f) return gr_error_set(err, GR_ERR_DATA, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    const bool sized = fstat(fileno(f), &sb) == 0;
    const size_t n = sized ? (size_t)sb.st_size : 0;
    uint8_t *buf = sized && n <= GR_MAT_MAX_BYTES ? gr_xmalloc(GR_MAX(n, 1)) : NULL;
    const bool failed = !sized || (buf && fread(buf, 1, n, f) != n);
    fclose(f);
    mat_ctx c = {path, err, 0};
    gr_mat_array *a = NULL;
    if (failed) st = gr_error_set(err, GR_ERR_DATA, "%s: cannot read", path);
    else if (!buf) st = gr_error_set(err, GR_ERR_DATA, "%s: over %zu bytes, too large for a MAT-file of metadata",
                                     path, GR_MAT_MAX_BYTES);
    else if (n >= 128 && buf[126] == 'M' && buf[127] == 'I')
        st = gr_error_set(err, GR_ERR_DATA, "%s: a big-endian MAT-file, which is not read here; save it again on a "
                          "little-endian machine (any PC)", path);
    else if (n >= 128 && mat_u32(buf + 124) == 0x4d490200u)
        st = gr_error_set(err, GR_ERR_DATA, "%s: a MAT-file of version 7.3 (HDF5), which is not read here; save it "
                          "again with -v7", path);
    else if (n < 128 || buf[126] != 'I' || buf[127] != 'M' || buf[124] != 0 || buf[125] != 1)
        st = gr_error_set(err, GR_ERR_DATA, "%s: not a MAT-file of level 5 (no 'IM' version 0x0100 header)", path);
    else if (!mat_find(&c, (mat_bytes){buf + 128, n - 128}, name, &a)) st = GR_ERR_DATA; /* mat_fail said what */
    else if (!a) st = gr_error_set(err, GR_ERR_DATA, "%s: no variable named '%s'", path, name);
    free(buf);
    if (st == GR_OK) *out = a;
    return st;
}

const gr_mat_array *gr_mat_field(const gr_mat_array *s, int64_t e, const char *field) {
    if (!s || s->cls != GR_MAT_STRUCT || e < 0 || e >= s->numel) return NULL;
    for (int f = 0; f < s->nfields; f++)
        if (strcmp(s->fields[f], field) == 0) return s->elems[e * s->nfields + f];
    return NULL;
}

void gr_mat_free(gr_mat_array *a) {
    if (!a) return;
    const int64_t kids = a->cls == GR_MAT_STRUCT ? a->numel * a->nfields : a->cls == GR_MAT_CELL ? a->numel : 0;
    for (int64_t i = 0; a->elems && i < kids; i++) gr_mat_free(a->elems[i]);
    for (int f = 0; a->fields && f < a->nfields; f++) free(a->fields[f]);
    free(a->elems);
    free(a->fields);
    free(a->name);
    free(a->num);
    free(a->text);
    free(a);
}
