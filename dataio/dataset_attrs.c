/* dataset_attrs.c — a split's group attributes: `mean`, `std` (numbers) and
 * `classes` (the class names), for dataio.h. */
#include <stdlib.h>
#include <string.h>

#include "dataio.h"
#include "dataset_priv.h"
#include "h5util.h"

int gr_dataset_attr_floats(const gr_dataset *ds, const char *name, double *out, int max) {
    gr_h5_init();
    htri_t ex = H5Aexists(ds->grp, name);
    if (ex <= 0) return ex < 0 ? -1 : 0;
    int rc = -1;
    double *tmp = NULL;
    hid_t a = H5Aopen(ds->grp, name, H5P_DEFAULT), t = -1, sp = -1;
    if (a < 0 || (t = H5Aget_type(a)) < 0 || (sp = H5Aget_space(a)) < 0) goto done;
    H5T_class_t cls = H5Tget_class(t);
    if (cls != H5T_INTEGER && cls != H5T_FLOAT) goto done;
    hssize_t np = H5Sget_simple_extent_npoints(sp);
    if (np < 0 || np > (1 << 20)) goto done;
    tmp = gr_xmalloc((size_t)(np ? np : 1) * sizeof *tmp);
    if (H5Aread(a, H5T_NATIVE_DOUBLE, tmp) < 0) goto done;
    rc = (int)GR_MIN((hssize_t)max, np);
    if (rc < 0) rc = 0;
    memcpy(out, tmp, (size_t)rc * sizeof *out);
done:
    free(tmp);
    if (sp >= 0) H5Sclose(sp);
    if (t >= 0) H5Tclose(t);
    if (a >= 0) H5Aclose(a);
    return rc;
}

/* The n strings of attribute a (type t, a string type) into names. */
static bool gr_classes_read(hid_t a, hid_t t, int n, char **names) {
    if (H5Tis_variable_str(t) > 0) {
        hid_t mt = H5Tcopy(H5T_C_S1);
        /* in the attribute's own character set: h5py writes str as UTF-8 */
        bool ok = mt >= 0 && H5Tset_size(mt, H5T_VARIABLE) >= 0 && H5Tset_cset(mt, H5Tget_cset(t)) >= 0;
        char **v = gr_xcalloc((size_t)n, sizeof *v);
        ok = ok && H5Aread(a, mt, v) >= 0;
        for (int i = 0; i < n; i++) {
            if (ok) names[i] = gr_xstrdup(v[i] ? v[i] : "");
            H5free_memory(v[i]);
        }
        free(v);
        if (mt >= 0) H5Tclose(mt);
        return ok;
    }
    size_t sz = H5Tget_size(t);
    if (sz == 0) return false;
    char *buf = gr_xcalloc((size_t)n * sz + 1, 1);
    bool ok = H5Aread(a, t, buf) >= 0;
    for (int i = 0; ok && i < n; i++) {
        names[i] = gr_xcalloc(sz + 1, 1);
        memcpy(names[i], buf + (size_t)i * sz, sz);
        for (size_t k = strlen(names[i]); k > 0 && names[i][k - 1] == ' '; k--) names[i][k - 1] = '\0';
    }
    free(buf);
    return ok;
}

int gr_dataset_classes(const gr_dataset *ds, char ***names) {
    gr_h5_init();
    *names = NULL;
    hid_t grp = ds->grp;
    htri_t ex = H5Aexists(grp, "classes");
    if (ex <= 0) return ex < 0 ? -1 : 0;
    int rc = -1;
    hid_t a = H5Aopen(grp, "classes", H5P_DEFAULT), t = -1, sp = -1;
    if (a < 0 || (t = H5Aget_type(a)) < 0 || (sp = H5Aget_space(a)) < 0) goto done;
    hssize_t n = H5Sget_simple_extent_npoints(sp);
    if (H5Tget_class(t) != H5T_STRING || n < 1 || n > (1 << 24)) goto done;
    char **v = gr_xcalloc((size_t)n, sizeof *v);
    if (gr_classes_read(a, t, (int)n, v)) {
        *names = v;
        rc = (int)n;
    } else {
        gr_dataset_classes_free(v, (int)n);
    }
done:
    if (sp >= 0) H5Sclose(sp);
    if (t >= 0) H5Tclose(t);
    if (a >= 0) H5Aclose(a);
    return rc;
}

void gr_dataset_classes_free(char **names, int n) {
    if (!names) return;
    for (int i = 0; i < n; i++) free(names[i]);
    free(names);
}
