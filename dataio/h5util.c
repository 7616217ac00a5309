/* h5util.c — HDF5 error translation and the float16 type for dataio/. */
#include "h5util.h"

#include <stdbool.h>

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

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
