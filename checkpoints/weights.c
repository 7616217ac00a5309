/* weights.c — parameters and state to and from HDF5 (see weights.h). */
#include "weights.h"
#include "tensorio.h"
#include "../common/tmpfile.h"
#include "../dataio/h5util.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

bool gr_weights_tensor(const gr_tensor *t) { return t->kind == GR_TK_PARAM || t->kind == GR_TK_STATE; }

void gr_weights_name(const gr_graph *g, const gr_tensor *t, char *buf, size_t n) {
    snprintf(buf, n, "/%s/%s/%s", t->kind == GR_TK_PARAM ? "params" : "state", g->layers[t->layer].name, t->pname);
}

gr_status gr_weights_put(hid_t f, const char *file, const gr_graph *g, const float *params, gr_error *err) {
    for (int i = 0; i < g->n_tensors; i++) {
        const gr_tensor *t = &g->tensors[i];
        if (!gr_weights_tensor(t)) continue;
        char name[512];
        gr_weights_name(g, t, name, sizeof name);
        gr_status st = gr_tio_write(f, file, name, t->ndim, t->shape, params + t->param_offset, err);
        if (st) return st;
    }
    return GR_OK;
}

gr_status gr_weights_get(hid_t f, const char *file, const gr_graph *g, float *params, bool need_crc,
                         gr_error *err) {
    for (int i = 0; i < g->n_tensors; i++) {
        const gr_tensor *t = &g->tensors[i];
        if (!gr_weights_tensor(t)) continue;
        char name[512];
        gr_weights_name(g, t, name, sizeof name);
        gr_status st = gr_tio_read(f, file, name, t->ndim, t->shape, params + t->param_offset, need_crc, err);
        if (st) return st;
    }
    return GR_OK;
}

gr_status gr_weights_save(const char *path, const gr_graph *g, const float *params, gr_error *err) {
    gr_h5_init();
    gr_tmpfile tf;
    gr_status st = gr_tmpfile_create(&tf, path, GR_ERR_CKPT, err);
    if (st) return st;
    char reopen[64];
    hid_t f = H5Fcreate(gr_tmpfile_reopen_path(&tf, reopen, sizeof reopen), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    if (f < 0) st = gr_h5_fail(err, GR_ERR_CKPT, "%s: cannot create", tf.tmp);
    if (f >= 0) st = gr_weights_put(f, tf.tmp, g, params, err);
    if (f >= 0 && H5Fclose(f) < 0 && !st) st = gr_h5_fail(err, GR_ERR_CKPT, "%s: cannot close (disk full?)", tf.tmp);
    if (!st) st = gr_tmpfile_commit(&tf, true, GR_ERR_CKPT, err);
    gr_tmpfile_abort(&tf); /* removes the temporary after a failure */
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
        gr_weights_name(x->g, t, p, sizeof p);
        if (strcmp(p, full) == 0) return 0;
    }
    if (x->count++ == 0) snprintf(x->first, sizeof x->first, "%s", full);
    return 0;
}

bool gr_weights_is_export(const char *path) {
    gr_h5_init();
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0) return false;
    bool is = H5Aexists(f, "format") == 0 && H5Lexists(f, "params", H5P_DEFAULT) > 0;
    H5Fclose(f);
    return is;
}

gr_status gr_weights_load(const char *path, const gr_graph *g, float *params, gr_error *err) {
    gr_h5_init();
    if (access(path, R_OK) != 0) return gr_error_set(err, GR_ERR_CKPT, "%s: %s", path, strerror(errno));
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0) return gr_h5_fail(err, GR_ERR_CKPT, "%s: not an HDF5 file or corrupt", path);
    gr_status st = gr_weights_get(f, path, g, params, false, err);
    if (!st) {
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
    return st;
}
