/* weights.c — parameters and state to and from HDF5 (see weights.h). */
#include "weights.h"
#include "../common/crc32c.h"
#include "../dataio/h5util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define W_CHECK(expr, ...) do { \
    if ((expr) < 0) { st = gr_h5_fail(err, GR_ERR_CKPT, __VA_ARGS__); goto fail; } \
} while (0)

/* "/params/conv0/weight" for a PARAM or STATE tensor. */
static void gr_weights_path(const gr_graph *g, const gr_tensor *t, char *buf, size_t n) {
    snprintf(buf, n, "/%s/%s/%s", t->kind == GR_TK_PARAM ? "params" : "state", g->layers[t->layer].name, t->pname);
}

static bool gr_weights_tensor(const gr_tensor *t) { return t->kind == GR_TK_PARAM || t->kind == GR_TK_STATE; }

/* Creates the groups of an absolute path's parents that do not exist yet. */
static herr_t gr_weights_make_parents(hid_t f, const char *path) {
    char buf[512];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = strchr(buf + 1, '/'); p; p = strchr(p + 1, '/')) {
        *p = '\0';
        htri_t ex = H5Lexists(f, buf, H5P_DEFAULT);
        if (ex < 0) return -1;
        if (!ex) {
            hid_t gid = H5Gcreate2(f, buf, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
            if (gid < 0) return -1;
            H5Gclose(gid);
        }
        *p = '/';
    }
    return 0;
}

static gr_status gr_weights_fsync(const char *path, gr_error *err) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || fsync(fd) != 0) {
        int e = errno;
        if (fd >= 0) close(fd);
        return gr_error_set(err, GR_ERR_CKPT, "%s: cannot sync: %s", path, strerror(e));
    }
    close(fd);
    return GR_OK;
}

gr_status gr_weights_save(const char *path, const gr_graph *g, const float *params, gr_error *err) {
    gr_h5_init();
    char tmp[GR_PATH_MAX + 8];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    gr_status st = GR_OK;
    hid_t f = -1, sp = -1, ds = -1, asp = -1, attr = -1;
    W_CHECK(f = H5Fcreate(tmp, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), "%s: cannot create", tmp);
    for (int i = 0; i < g->n_tensors; i++) {
        const gr_tensor *t = &g->tensors[i];
        if (!gr_weights_tensor(t)) continue;
        char name[512];
        gr_weights_path(g, t, name, sizeof name);
        hsize_t dims[GR_MAX_DIMS];
        for (int d = 0; d < t->ndim; d++) dims[d] = (hsize_t)t->shape[d];
        const float *data = params + t->param_offset;
        const uint32_t crc = gr_crc32c(0, data, (size_t)gr_tensor_numel(t) * sizeof(float));
        W_CHECK(gr_weights_make_parents(f, name), "%s: %s: cannot create its group", tmp, name);
        W_CHECK(sp = H5Screate_simple(t->ndim, dims, NULL), "%s: %s: cannot create", tmp, name);
        W_CHECK(ds = H5Dcreate2(f, name, H5T_IEEE_F32LE, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                "%s: %s: cannot create", tmp, name);
        W_CHECK(H5Dwrite(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, data), "%s: %s: write failed", tmp,
                name);
        W_CHECK(asp = H5Screate(H5S_SCALAR), "%s: %s: cannot write crc32c", tmp, name);
        W_CHECK(attr = H5Acreate2(ds, "crc32c", H5T_STD_U32LE, asp, H5P_DEFAULT, H5P_DEFAULT),
                "%s: %s: cannot write crc32c", tmp, name);
        W_CHECK(H5Awrite(attr, H5T_NATIVE_UINT32, &crc), "%s: %s: cannot write crc32c", tmp, name);
        H5Aclose(attr), attr = -1;
        H5Sclose(asp), asp = -1;
        H5Dclose(ds), ds = -1;
        H5Sclose(sp), sp = -1;
    }
    W_CHECK(H5Fclose(f), "%s: cannot close", tmp);
    f = -1;
    if ((st = gr_weights_fsync(tmp, err))) goto fail;
    if (rename(tmp, path) != 0) {
        st = gr_error_set(err, GR_ERR_CKPT, "%s: cannot rename to %s: %s", tmp, path, strerror(errno));
        goto fail;
    }
    return GR_OK;
fail:
    if (attr >= 0) H5Aclose(attr);
    if (asp >= 0) H5Sclose(asp);
    if (ds >= 0) H5Dclose(ds);
    if (sp >= 0) H5Sclose(sp);
    if (f >= 0) H5Fclose(f);
    unlink(tmp);
    return st;
}

/* Names of datasets under /params and /state that g lacks, for the notice. */
typedef struct gr_weights_extra {
    const gr_graph *g;
    const char *top;
    int count;
    char first[600];
} gr_weights_extra;

static herr_t gr_weights_visit(hid_t obj, const char *name, const H5O_info_t *info, void *data) {
    (void)obj;
    gr_weights_extra *x = data;
    if (info->type != H5O_TYPE_DATASET) return 0;
    char full[600];
    snprintf(full, sizeof full, "/%s/%s", x->top, name);
    for (int i = 0; i < x->g->n_tensors; i++) {
        const gr_tensor *t = &x->g->tensors[i];
        if (!gr_weights_tensor(t)) continue;
        char p[512];
        gr_weights_path(x->g, t, p, sizeof p);
        if (strcmp(p, full) == 0) return 0;
    }
    if (x->count++ == 0) snprintf(x->first, sizeof x->first, "%s", full);
    return 0;
}

gr_status gr_weights_load(const char *path, const gr_graph *g, float *params, gr_error *err) {
    gr_h5_init();
    if (access(path, R_OK) != 0)
        return gr_error_set(err, GR_ERR_CKPT, "%s: %s", path, strerror(errno));
    gr_status st = GR_OK;
    hid_t f = -1, ds = -1, sp = -1, attr = -1;
    W_CHECK(f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT), "%s: not an HDF5 file or corrupt", path);
    for (int i = 0; i < g->n_tensors; i++) {
        const gr_tensor *t = &g->tensors[i];
        if (!gr_weights_tensor(t)) continue;
        char name[512], want[64];
        gr_weights_path(g, t, name, sizeof name);
        gr_shape_str(t, want, sizeof want);
        htri_t ex = 1;
        for (char *p = strchr(name + 1, '/'); p && ex > 0; p = strchr(p + 1, '/')) {
            *p = '\0';
            ex = H5Lexists(f, name, H5P_DEFAULT);
            *p = '/';
        }
        if (ex > 0) ex = H5Lexists(f, name, H5P_DEFAULT);
        W_CHECK(ex, "%s: %s: cannot look up", path, name);
        if (!ex) {
            st = gr_error_set(err, GR_ERR_CKPT, "%s: %s: missing (the model's %s needs it, shape %s)", path, name,
                              g->layers[t->layer].name, want);
            goto fail;
        }
        W_CHECK(ds = H5Dopen2(f, name, H5P_DEFAULT), "%s: %s: cannot open as a dataset", path, name);
        W_CHECK(sp = H5Dget_space(ds), "%s: %s: cannot read its shape", path, name);
        hsize_t dims[8];
        int nd = H5Sget_simple_extent_ndims(sp);
        W_CHECK(nd, "%s: %s: cannot read its shape", path, name);
        bool same = nd == t->ndim && nd <= 8;
        if (nd > 0 && nd <= 8) H5Sget_simple_extent_dims(sp, dims, NULL);
        for (int d = 0; same && d < nd; d++) same = dims[d] == (hsize_t)t->shape[d];
        if (!same) {
            char have[128] = "[";
            size_t k = 1;
            for (int d = 0; d < nd && d < 8 && k < sizeof have; d++)
                k += (size_t)snprintf(have + k, sizeof have - k, "%s%llu", d ? ", " : "", (unsigned long long)dims[d]);
            if (k < sizeof have) snprintf(have + k, sizeof have - k, "]");
            st = gr_error_set(err, GR_ERR_CKPT, "%s: %s: shape %s, but the model's is %s", path, name, have, want);
            goto fail;
        }
        float *dst = params + t->param_offset;
        W_CHECK(H5Dread(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, dst), "%s: %s: read failed (corrupt?)",
                path, name);
        htri_t has_crc = H5Aexists(ds, "crc32c");
        W_CHECK(has_crc, "%s: %s: cannot look up crc32c", path, name);
        if (has_crc) {
            uint32_t stored = 0;
            W_CHECK(attr = H5Aopen(ds, "crc32c", H5P_DEFAULT), "%s: %s: cannot read crc32c", path, name);
            W_CHECK(H5Aread(attr, H5T_NATIVE_UINT32, &stored), "%s: %s: cannot read crc32c", path, name);
            H5Aclose(attr), attr = -1;
            uint32_t crc = gr_crc32c(0, dst, (size_t)gr_tensor_numel(t) * sizeof(float));
            if (crc != stored) {
                st = gr_error_set(err, GR_ERR_CKPT, "%s: %s: crc32c mismatch (stored 0x%08x, computed 0x%08x): the "
                                  "file is corrupt", path, name, stored, crc);
                goto fail;
            }
        }
        H5Sclose(sp), sp = -1;
        H5Dclose(ds), ds = -1;
    }
    {
        const char *tops[2] = {"params", "state"};
        gr_weights_extra x = {.g = g};
        for (int k = 0; k < 2; k++) {
            x.top = tops[k];
            if (H5Lexists(f, tops[k], H5P_DEFAULT) <= 0) continue;
            hid_t grp = H5Gopen2(f, tops[k], H5P_DEFAULT);
            if (grp < 0) continue;
            H5Ovisit2(grp, H5_INDEX_NAME, H5_ITER_NATIVE, gr_weights_visit, &x, H5O_INFO_BASIC);
            H5Gclose(grp);
        }
        if (x.count)
            fprintf(stderr, "gpurun: %s: %d tensor(s) the model does not have were ignored (first: %s)\n", path,
                    x.count, x.first);
    }
    H5Fclose(f);
    return GR_OK;
fail:
    if (attr >= 0) H5Aclose(attr);
    if (sp >= 0) H5Sclose(sp);
    if (ds >= 0) H5Dclose(ds);
    if (f >= 0) H5Fclose(f);
    return st;
}
