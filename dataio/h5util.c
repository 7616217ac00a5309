/* h5util.c — HDF5 error translation and the float16 type for dataio/. */
#include "h5util.h"

#include <stdbool.h>

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void gr_h5_init(void) {
    /* Cheap and idempotent; per thread in thread-safe HDF5 builds, so it is
     * called on every entry rather than guarded by a flag. */
    /* No library shutdown at exit: after a close that failed (a full disk
     * during the final flush) HDF5 keeps the file object, and its atexit
     * handler then crashes on it (exit 139 instead of the run's own code).
     * The process is ending; the OS reclaims everything. Only effective
     * before the library's first use, so first. */
    static _Atomic bool said;
    if (!said) {
        said = true;
        H5dont_atexit();
    }
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
}

typedef struct h5_walk_ctx {
    char *buf;
    size_t n;
} h5_walk_ctx;

/* H5E_WALK_UPWARD visits the innermost (first detected) error first. */
static herr_t h5_walk_first(unsigned idx, const H5E_error2_t *e, void *data) {
    h5_walk_ctx *c = data;
    if (idx != 0) return 0;
    char minor[256] = "";
    if (H5Eget_msg(e->min_num, NULL, minor, sizeof minor) < 0) minor[0] = '\0';
    const char *desc = e->desc ? e->desc : "";
    if (minor[0] && desc[0]) snprintf(c->buf, c->n, "%s: %s", minor, desc);
    else snprintf(c->buf, c->n, "%s", minor[0] ? minor : desc);
    return 1; /* stop */
}

void gr_h5_last_error(char *buf, size_t n) {
    if (!n) return;
    buf[0] = '\0';
    h5_walk_ctx c = { buf, n };
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, h5_walk_first, &c);
    if (!buf[0]) snprintf(buf, n, "unknown error");
}

gr_status gr_h5_fail(gr_error *err, gr_status st, const char *fmt, ...) {
    char head[GR_ERROR_MSG_MAX / 2], h5[GR_ERROR_MSG_MAX / 2];
    gr_h5_last_error(h5, sizeof h5);
    /* HDF5's file-driver messages are long and multi-line ("time = ..., filename
     * = ..., errno = 28, error message = 'No space left on device', ..."): keep the
     * system's error message where there is one, on one line */
    const char *em = strstr(h5, "error message = '");
    if (em) {
        char sys[128];
        snprintf(sys, sizeof sys, "%s", em + 17);
        char *q = strchr(sys, '\'');
        if (q) *q = '\0';
        char *colon = strstr(h5, ": time =");
        snprintf(colon ? colon : h5, sizeof h5 - (size_t)((colon ? colon : h5) - h5), ": %s", sys);
    }
    for (char *c = h5; *c; c++)
        if (*c == '\n') *c = ' ';
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(head, sizeof head, fmt, ap);
    va_end(ap);
    return gr_error_set(err, st, "%s (HDF5: %s)", head, h5);
}

char *gr_h5_join(const char *group, const char *name) {
    size_t n = strlen(group) + strlen(name) + 2;
    char *s = gr_xmalloc(n);
    snprintf(s, n, "%s%s%s", group, strcmp(group, "/") == 0 ? "" : "/", name);
    return s;
}

hid_t gr_h5_float16_type(void) {
    /* Sign at bit 15, 5-bit exponent at 10 with bias 15, 10-bit mantissa:
     * the fields must shrink before the size does. */
    hid_t t = H5Tcopy(H5T_IEEE_F32LE);
    if (t < 0) return t;
    if (H5Tset_fields(t, 15, 10, 5, 0, 10) < 0 || H5Tset_precision(t, 16) < 0 ||
        H5Tset_size(t, 2) < 0 || H5Tset_ebias(t, 15) < 0) {
        H5Tclose(t);
        return -1;
    }
    return t;
}

char *gr_h5_normalize_group(const char *g) {
    if (!g) g = "";
    size_t n = strlen(g);
    char *s = gr_xmalloc(n + 2);
    size_t k = 0;
    s[k++] = '/';
    for (size_t i = 0; i < n; i++) {
        if (g[i] == '/' && s[k - 1] == '/') continue;
        s[k++] = g[i];
    }
    if (k > 1 && s[k - 1] == '/') k--;
    s[k] = '\0';
    return s;
}

htri_t gr_h5_path_exists(hid_t file, const char *path) {
    if (strcmp(path, "/") == 0) return 1;
    size_t n = strlen(path);
    char *buf = gr_xmalloc(n + 1);
    htri_t r = 1;
    for (size_t i = 1; i <= n && r > 0; i++) {
        if (path[i] == '/' || path[i] == '\0') {
            memcpy(buf, path, i);
            buf[i] = '\0';
            r = H5Lexists(file, buf, H5P_DEFAULT);
        }
    }
    free(buf);
    return r;
}

void gr_h5_describe_type(hid_t t, char *buf, size_t n) {
    size_t sz = H5Tget_size(t);
    switch (H5Tget_class(t)) {
    case H5T_INTEGER:
        snprintf(buf, n, "%sint%zu", H5Tget_sign(t) == H5T_SGN_NONE ? "u" : "", sz * 8);
        break;
    case H5T_FLOAT: snprintf(buf, n, "float%zu", sz * 8); break;
    case H5T_STRING: snprintf(buf, n, "string"); break;
    case H5T_COMPOUND: snprintf(buf, n, "compound"); break;
    case H5T_ENUM: snprintf(buf, n, "enum"); break;
    case H5T_ARRAY: snprintf(buf, n, "array"); break;
    case H5T_VLEN: snprintf(buf, n, "variable-length"); break;
    case H5T_BITFIELD: snprintf(buf, n, "bitfield%zu", sz * 8); break;
    case H5T_OPAQUE: snprintf(buf, n, "opaque"); break;
    case H5T_REFERENCE: snprintf(buf, n, "reference"); break;
    default: snprintf(buf, n, "unknown type"); break;
    }
}

bool gr_h5_is_ieee_half(hid_t t) {
    size_t spos, epos, esize, mpos, msize;
    if (H5Tget_fields(t, &spos, &epos, &esize, &mpos, &msize) < 0) return false;
    return spos == 15 && epos == 10 && esize == 5 && mpos == 0 && msize == 10 && H5Tget_ebias(t) == 15;
}

gr_status gr_h5_check_input(const char *path, struct stat *sb, gr_error *err) {
    if (stat(path, sb) != 0) {
        if (errno == ENOENT || errno == ENOTDIR) return gr_error_set(err, GR_ERR_DATA, "%s: no such file", path);
        return gr_error_set(err, GR_ERR_DATA, "%s: %s", path, strerror(errno));
    }
    if (S_ISDIR(sb->st_mode)) return gr_error_set(err, GR_ERR_DATA, "%s: is a directory, not an HDF5 file", path);
    if (!S_ISREG(sb->st_mode)) /* a FIFO would block the open, a device would be read without end */
        return gr_check_regular(path, "the dataset", GR_ERR_DATA, err);
    if (access(path, R_OK) != 0) return gr_error_set(err, GR_ERR_DATA, "%s: %s", path, strerror(errno));
    return GR_OK;
}

int gr_h5_read_string_attr(hid_t obj, const char *name, char *buf, size_t n) {
    htri_t ex = H5Aexists(obj, name);
    if (ex < 0) return -2;
    if (ex == 0) return 0;
    int rc = -2;
    hid_t a = H5Aopen(obj, name, H5P_DEFAULT), t = -1, sp = -1, mt = -1;
    if (a < 0) goto done;
    if ((t = H5Aget_type(a)) < 0 || (sp = H5Aget_space(a)) < 0) goto done;
    if (H5Tget_class(t) != H5T_STRING || H5Sget_simple_extent_npoints(sp) != 1) {
        snprintf(buf, n, "not a single string");
        rc = -1;
        goto done;
    }
    htri_t var = H5Tis_variable_str(t);
    if (var < 0) goto done;
    if (var) {
        char *s = NULL;
        /* in the attribute's character set: h5py writes str as UTF-8, which
         * HDF5 will not convert to the ASCII of a plain H5T_C_S1 */
        if ((mt = H5Tcopy(H5T_C_S1)) < 0 || H5Tset_size(mt, H5T_VARIABLE) < 0 ||
            H5Tset_cset(mt, H5Tget_cset(t)) < 0)
            goto done;
        if (H5Aread(a, mt, &s) < 0) goto done;
        snprintf(buf, n, "%s", s ? s : "");
        H5free_memory(s);
    } else {
        size_t sz = H5Tget_size(t);
        char *s = gr_xcalloc(sz + 1, 1);
        if (H5Aread(a, t, s) < 0) { free(s); goto done; }
        snprintf(buf, n, "%s", s);
        free(s);
    }
    size_t k = strlen(buf);
    while (k > 0 && buf[k - 1] == ' ') buf[--k] = '\0';
    rc = 1;
done:
    if (mt >= 0) H5Tclose(mt);
    if (sp >= 0) H5Sclose(sp);
    if (t >= 0) H5Tclose(t);
    if (a >= 0) H5Aclose(a);
    return rc;
}

static int gr_cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

int64_t gr_rows_sorted_distinct(const int64_t *idx, int64_t n, int64_t **sorted, int64_t *cap) {
    if (n > *cap) {
        *sorted = gr_xrealloc(*sorted, (size_t)n * sizeof **sorted);
        *cap = n;
    }
    int64_t *s = *sorted;
    memcpy(s, idx, (size_t)n * sizeof *idx);
    qsort(s, (size_t)n, sizeof *s, gr_cmp_i64);
    int64_t m = 0;
    for (int64_t i = 0; i < n; i++)
        if (m == 0 || s[i] != s[m - 1]) s[m++] = s[i];
    return m;
}

bool gr_h5_is_encoded(hid_t grp) {
    char storage[32];
    return gr_h5_read_string_attr(grp, "storage", storage, sizeof storage) == 1 && !strcmp(storage, "encoded");
}

gr_status gr_h5_refuse_encoded(hid_t grp, const char *path, const char *group, gr_error *err) {
    if (!gr_h5_is_encoded(grp)) return GR_OK;
    return gr_error_set(err, GR_ERR_DATA, "%s: group %s is an encoded image split (JPEG/PNG bytes, `gpurun data "
                        "imagefolder --store jpeg`): it is read as images and labels only, not as a table of "
                        "named fields (model.inputs); drop model.inputs/targets, or convert with the default "
                        "--store raw (--size S)", path, group);
}
