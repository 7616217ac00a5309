/* tensorio.c — see tensorio.h. */
#define _GNU_SOURCE /* sync_file_range */
#include "tensorio.h"
#include "../common/crc32c.h"
#include "../common/tmpfile.h"
#include "../dataio/h5util.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Data written since the disk writeback was last started, per thread (one
 * file is written by one thread at a time). */
static _Thread_local size_t tio_unsynced;
#define TIO_WRITEBACK_BYTES ((size_t)8 << 20)

/* Starts writing the file's dirty pages to disk now, without waiting, so the
 * commit's fsync finds little left to do (Linux; elsewhere a no-op). */
static void tio_writeback(hid_t f, size_t bytes) {
    tio_unsynced += bytes;
    if (tio_unsynced < TIO_WRITEBACK_BYTES) return;
    tio_unsynced = 0;
#ifdef SYNC_FILE_RANGE_WRITE
    void *handle = NULL;
    if (H5Fget_vfd_handle(f, H5P_DEFAULT, &handle) >= 0 && handle)
        (void)sync_file_range(*(int *)handle, 0, 0, SYNC_FILE_RANGE_WRITE);
#else
    (void)f;
#endif
}

#define TIO_CHECK(expr, ...) do { \
    if ((expr) < 0) { st = gr_h5_fail(err, GR_ERR_CKPT, __VA_ARGS__); goto fail; } \
} while (0)

static int64_t tio_numel(int ndim, const int64_t *shape) {
    int64_t n = 1;
    for (int d = 0; d < ndim; d++) n *= shape[d];
    return n;
}

static void tio_shape_str(int ndim, const hsize_t *dims, char *buf, size_t n) {
    size_t k = (size_t)snprintf(buf, n, "[");
    for (int d = 0; d < ndim && k < n; d++)
        k += (size_t)snprintf(buf + k, n - k, "%s%llu", d ? ", " : "", (unsigned long long)dims[d]);
    if (k < n) snprintf(buf + k, n - k, "]");
}

hssize_t gr_tio_attr_count(hid_t attr) {
    hid_t sp = H5Aget_space(attr);
    hssize_t n = sp < 0 ? -1 : H5Sget_simple_extent_npoints(sp);
    if (sp >= 0) H5Sclose(sp);
    return n;
}

htri_t gr_tio_exists(hid_t f, const char *name) {
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", name);
    htri_t ex = 1;
    for (char *p = strchr(buf + 1, '/'); ex > 0; p = strchr(p + 1, '/')) {
        if (p) *p = '\0';
        ex = H5Lexists(f, buf, H5P_DEFAULT);
        if (!p) break;
        *p = '/';
    }
    return ex;
}

static herr_t tio_make_parents(hid_t f, const char *name) {
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", name);
    for (char *p = strchr(buf + 1, '/'); p; p = strchr(p + 1, '/')) {
        *p = '\0';
        htri_t ex = H5Lexists(f, buf, H5P_DEFAULT);
        if (ex < 0) return -1;
        if (!ex) {
            hid_t g = H5Gcreate2(f, buf, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
            if (g < 0) return -1;
            H5Gclose(g);
        }
        *p = '/';
    }
    return 0;
}

gr_status gr_tio_write(hid_t f, const char *file, const char *name, int ndim, const int64_t *shape,
                       const float *data, gr_error *err) {
    gr_status st = GR_OK;
    hid_t sp = -1, ds = -1, asp = -1, attr = -1;
    hsize_t dims[8];
    for (int d = 0; d < ndim; d++) dims[d] = (hsize_t)shape[d];
    const uint32_t crc = gr_crc32c(0, data, (size_t)tio_numel(ndim, shape) * sizeof(float));
    TIO_CHECK(tio_make_parents(f, name), "%s: %s: cannot create its group", file, name);
    TIO_CHECK(sp = H5Screate_simple(ndim, dims, NULL), "%s: %s: cannot create", file, name);
    TIO_CHECK(ds = H5Dcreate2(f, name, H5T_IEEE_F32LE, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
              "%s: %s: cannot create", file, name);
    TIO_CHECK(H5Dwrite(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, data), "%s: %s: write failed", file,
              name);
    tio_writeback(f, (size_t)tio_numel(ndim, shape) * sizeof(float));
    TIO_CHECK(asp = H5Screate(H5S_SCALAR), "%s: %s: cannot write crc32c", file, name);
    TIO_CHECK(attr = H5Acreate2(ds, "crc32c", H5T_STD_U32LE, asp, H5P_DEFAULT, H5P_DEFAULT),
              "%s: %s: cannot write crc32c", file, name);
    TIO_CHECK(H5Awrite(attr, H5T_NATIVE_UINT32, &crc), "%s: %s: cannot write crc32c", file, name);
fail:
    if (attr >= 0) H5Aclose(attr);
    if (asp >= 0) H5Sclose(asp);
    if (ds >= 0) H5Dclose(ds);
    if (sp >= 0) H5Sclose(sp);
    return st;
}

/* A tensor read back must be finite: training from an inf/NaN weight (or
 * optimizer slot) would only spread it. Names the first bad element. */
static gr_status tio_check_finite(const char *file, const char *name, int ndim, const int64_t *shape,
                                  const float *v, gr_error *err) {
    const int64_t n = tio_numel(ndim, shape);
    int64_t bad = -1;
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(v[i])) { bad = i; break; }
    if (bad < 0) return GR_OK;
    int64_t count = 0;
    for (int64_t i = bad; i < n; i++) count += !isfinite(v[i]);
    return gr_error_set(err, GR_ERR_CKPT, "%s: %s: element %lld is %s (%lld of %lld values are not finite); a "
                        "model cannot start from non-finite weights", file, name, (long long)bad,
                        isnan(v[bad]) ? "NaN" : v[bad] > 0 ? "inf" : "-inf", (long long)count, (long long)n);
}

gr_status gr_tio_read(hid_t f, const char *file, const char *name, int ndim, const int64_t *shape, float *dst,
                      bool need_crc, gr_error *err) {
    gr_status st = GR_OK;
    hid_t ds = -1, sp = -1, attr = -1;
    htri_t ex = gr_tio_exists(f, name);
    TIO_CHECK(ex, "%s: %s: cannot look up (corrupt file?)", file, name);
    if (!ex) return gr_error_set(err, GR_ERR_CKPT, "%s: %s: missing", file, name);
    TIO_CHECK(ds = H5Dopen2(f, name, H5P_DEFAULT), "%s: %s: cannot open as a dataset", file, name);
    TIO_CHECK(sp = H5Dget_space(ds), "%s: %s: cannot read its shape", file, name);
    int nd = H5Sget_simple_extent_ndims(sp);
    TIO_CHECK(nd, "%s: %s: cannot read its shape", file, name);
    hsize_t have[8] = {0}, want[8];
    if (nd <= 8) TIO_CHECK(H5Sget_simple_extent_dims(sp, have, NULL), "%s: %s: cannot read its shape", file, name);
    bool same = nd == ndim;
    for (int d = 0; d < ndim; d++) {
        want[d] = (hsize_t)shape[d];
        if (same && have[d] != want[d]) same = false;
    }
    if (!same) {
        char a[160], b[160];
        tio_shape_str(nd <= 8 ? nd : 8, have, a, sizeof a);
        tio_shape_str(ndim, want, b, sizeof b);
        st = gr_error_set(err, GR_ERR_CKPT, "%s: %s: shape %s, but %s is expected", file, name, a, b);
        goto fail;
    }
    TIO_CHECK(H5Dread(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, dst),
              "%s: %s: read failed (truncated or corrupt file?)", file, name);
    htri_t has = H5Aexists(ds, "crc32c");
    TIO_CHECK(has, "%s: %s: cannot look up crc32c", file, name);
    if (!has && need_crc) {
        st = gr_error_set(err, GR_ERR_CKPT, "%s: %s: no crc32c attribute", file, name);
        goto fail;
    }
    if (has) {
        uint32_t stored = 0;
        TIO_CHECK(attr = H5Aopen(ds, "crc32c", H5P_DEFAULT), "%s: %s: cannot read crc32c", file, name);
        if (gr_tio_attr_count(attr) != 1) { /* more values would overrun `stored` */
            st = gr_error_set(err, GR_ERR_CKPT, "%s: %s: crc32c is not a single value: the file is corrupt", file,
                              name);
            goto fail;
        }
        TIO_CHECK(H5Aread(attr, H5T_NATIVE_UINT32, &stored), "%s: %s: cannot read crc32c", file, name);
        const uint32_t crc = gr_crc32c(0, dst, (size_t)tio_numel(ndim, shape) * sizeof(float));
        if (crc != stored) {
            st = gr_error_set(err, GR_ERR_CKPT, "%s: %s: crc32c mismatch (stored 0x%08x, computed 0x%08x): the "
                              "file is corrupt", file, name, stored, crc);
            goto fail;
        }
    }
    st = tio_check_finite(file, name, ndim, shape, dst, err);
fail:
    if (attr >= 0) H5Aclose(attr);
    if (sp >= 0) H5Sclose(sp);
    if (ds >= 0) H5Dclose(ds);
    return st;
}

gr_status gr_tio_write_text(const char *path, const char *text, gr_error *err) {
    gr_tmpfile tf;
    gr_status st = gr_tmpfile_create(&tf, path, GR_ERR_CKPT, err);
    if (st) return st;
    FILE *f = gr_tmpfile_fdopen(&tf, "w");
    if (f) errno = 0;
    size_t n = strlen(text);
    bool ok = f && fwrite(text, 1, n, f) == n;
    if (f && fclose(f) != 0) ok = false;
    if (!ok) st = gr_error_set(err, GR_ERR_CKPT, "%s: cannot write: %s", tf.tmp, strerror(errno ? errno : EIO));
    else st = gr_tmpfile_commit(&tf, true, GR_ERR_CKPT, err);
    gr_tmpfile_abort(&tf); /* removes the temporary after a failure */
    return st;
}
