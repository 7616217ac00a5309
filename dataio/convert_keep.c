/* convert_keep.c — converters that write some groups into an existing file
 * (`gpurun data imagefolder --group /val` into a file holding /train): the
 * checks before the conversion (OUT is an HDF5 file; a group written is not
 * in it unless --force), the copy of everything else of OUT into OUT.tmp at
 * the commit (so the rename replaces OUT by a complete file, or nothing
 * happens to it), and the comparison of the `classes` of the groups kept
 * with the ones written. HDF5 does not reclaim the space of deleted objects,
 * so OUT.tmp is a fresh file the kept objects are copied into, not a copy of
 * OUT with groups deleted. */
#include "convert_out.h"
#include "h5util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define KEEP_CLASSES_DEPTH 8 /* how deep the classes check looks for groups */

#if H5_VERSION_GE(1, 12, 0)
#define KEEP_RECLAIM(t, sp, buf) H5Treclaim((t), (sp), H5P_DEFAULT, (buf))
#define KEEP_IS_HDF5(path) H5Fis_accessible((path), H5P_DEFAULT)
#else
#define KEEP_RECLAIM(t, sp, buf) H5Dvlen_reclaim((t), (sp), H5P_DEFAULT, (buf))
#define KEEP_IS_HDF5(path) H5Fis_hdf5(path)
#endif

/* Whether path is one of o->groups; *holds: whether one lies under it. */
static bool keep_written(const gr_conv_out *o, const char *path, bool *holds) {
    const size_t n = strlen(path);
    *holds = false;
    for (int g = 0; g < o->ngroups; g++) {
        const char *G = o->groups[g];
        if (strcmp(G, path) == 0) return true;
        if (strncmp(G, path, n) == 0 && (n == 1 || G[n] == '/')) *holds = true;
    }
    return false;
}

/* The name of link i (by name order) of group g, allocated; NULL on failure. */
static char *keep_link_name(hid_t g, hsize_t i) {
    ssize_t len = H5Lget_name_by_idx(g, ".", H5_INDEX_NAME, H5_ITER_INC, i, NULL, 0, H5P_DEFAULT);
    if (len < 0) return NULL;
    char *name = gr_xmalloc((size_t)len + 1);
    if (H5Lget_name_by_idx(g, ".", H5_INDEX_NAME, H5_ITER_INC, i, name, (size_t)len + 1, H5P_DEFAULT) < 0) {
        free(name);
        return NULL;
    }
    return name;
}

/* Whether group path is in f: 1 yes, 0 no; -1 (err set, GR_ERR_USAGE) when
 * an object on the way to it is not a group. */
static int keep_has(const gr_conv_out *o, hid_t f, const char *path, gr_error *err) {
    char *p = gr_xstrdup(path);
    const size_t len = strlen(p);
    int rc = 1;
    for (size_t i = 1; i <= len && rc == 1; i++) {
        if (i < len && p[i] != '/') continue;
        p[i] = '\0';
        if (H5Lexists(f, p, H5P_DEFAULT) <= 0) {
            rc = 0;
        } else if (i < len) {
            hid_t obj = H5Oopen(f, p, H5P_DEFAULT);
            if (obj < 0 || H5Iget_type(obj) != H5I_GROUP) {
                gr_error_set(err, GR_ERR_USAGE, "%s: %s is not a group, so it cannot hold group %s", o->path, p,
                             path);
                rc = -1;
            }
            if (obj >= 0) H5Oclose(obj);
        }
        if (i < len) p[i] = '/';
    }
    free(p);
    return rc;
}

/* Refuses the groups already in o->old unless force. */
static gr_status keep_check_groups(const gr_conv_out *o, bool force, gr_error *err) {
    char have[512] = "";
    int nhave = 0;
    for (int g = 0; g < o->ngroups; g++) {
        const int rc = keep_has(o, o->old, o->groups[g], err);
        if (rc < 0) return GR_ERR_USAGE;
        if (rc == 0) continue;
        const size_t used = strlen(have);
        snprintf(have + used, sizeof have - used, "%s%s", nhave ? " and " : "", o->groups[g]);
        nhave++;
    }
    if (nhave == 0 || force) return GR_OK;
    return gr_error_set(err, GR_ERR_USAGE, "%s: already has group%s %s; --force replaces %s (and keeps the file's "
                        "other groups)", o->path, nhave > 1 ? "s" : "", have, nhave > 1 ? "them" : "it");
}

gr_status gr_conv_out_begin_groups(gr_conv_out *o, const char *out, const char *const *groups, int ngroups,
                                   bool force, bool progress, gr_error *err) {
    memset(o, 0, sizeof *o);
    o->file = o->old = -1;
    bool whole = false;
    for (int g = 0; g < ngroups; g++) whole = whole || strcmp(groups[g], "/") == 0;
    struct stat sb;
    if (stat(out, &sb) != 0) return gr_conv_out_create(o, out, progress, err);
    gr_status st = gr_check_regular(out, "the output file", GR_ERR_DATA, err);
    if (st != GR_OK) return st;
    gr_h5_init();
    if (KEEP_IS_HDF5(out) <= 0)
        return gr_error_set(err, GR_ERR_DATA, "%s: exists and is not an HDF5 file; not writing into it (remove it or "
                            "choose another output file)", out);
    if (whole) return gr_conv_out_begin(o, out, force, progress, err);
    o->path = gr_xstrdup(out); /* for the messages until gr_conv_out_create sets it again */
    o->groups = gr_xmalloc((size_t)ngroups * sizeof *o->groups);
    for (o->ngroups = 0; o->ngroups < ngroups; o->ngroups++) o->groups[o->ngroups] = gr_xstrdup(groups[o->ngroups]);
    o->old = H5Fopen(out, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (o->old < 0) st = gr_h5_fail(err, GR_ERR_DATA, "%s: cannot open", out);
    if (st == GR_OK) st = keep_check_groups(o, force, err);
    free(o->path);
    o->path = NULL;
    if (st == GR_OK) st = gr_conv_out_create(o, out, progress, err);
    if (st != GR_OK) gr_conv_out_abort(o);
    return st;
}

typedef struct keep_attr_ctx {
    const gr_conv_out *o;
    hid_t dst;
    const char *path;
    gr_error *err;
    gr_status st;
} keep_attr_ctx;

/* H5Aiterate2's callback: attribute `name` of src onto c->dst, as it is. */
static herr_t keep_attr(hid_t src, const char *name, const H5A_info_t *info, void *ctx) {
    (void)info;
    keep_attr_ctx *c = ctx;
    gr_error *err = c->err;
    const char *path = c->path;
    gr_status st = GR_OK;
    hid_t a = -1, t = -1, sp = -1, b = -1;
    void *buf = NULL;
    bool read = false; /* buf holds what H5Aread allocated for variable-length values */
    GR_H5_CHECK(a = H5Aopen(src, name, H5P_DEFAULT), err, "%s: %s: attribute %s: cannot read", c->o->path, path,
                name);
    GR_H5_CHECK(t = H5Aget_type(a), err, "%s: %s: attribute %s: cannot read", c->o->path, path, name);
    GR_H5_CHECK(sp = H5Aget_space(a), err, "%s: %s: attribute %s: cannot read", c->o->path, path, name);
    const hssize_t np = H5Sget_simple_extent_npoints(sp);
    const size_t sz = H5Tget_size(t);
    GR_H5_CHECK(np < 0 || sz == 0 ? -1 : 0, err, "%s: %s: attribute %s: cannot read", c->o->path, path, name);
    buf = gr_xcalloc((size_t)GR_MAX(np, 1), sz);
    GR_H5_CHECK(H5Aread(a, t, buf), err, "%s: %s: attribute %s: cannot read", c->o->path, path, name);
    read = true;
    GR_H5_CHECK(b = H5Acreate2(c->dst, name, t, sp, H5P_DEFAULT, H5P_DEFAULT), err,
                "%s: %s: attribute %s: cannot copy", c->o->tmp, path, name);
    GR_H5_CHECK(H5Awrite(b, t, buf), err, "%s: %s: attribute %s: cannot copy", c->o->tmp, path, name);
fail:
    if (read && (H5Tis_variable_str(t) > 0 || H5Tdetect_class(t, H5T_VLEN) > 0)) KEEP_RECLAIM(t, sp, buf);
    free(buf);
    if (b >= 0) H5Aclose(b);
    if (sp >= 0) H5Sclose(sp);
    if (t >= 0) H5Tclose(t);
    if (a >= 0) H5Aclose(a);
    c->st = st;
    return st == GR_OK ? 0 : -1;
}

/* The attributes of src (path) onto dst, as they are. */
static gr_status keep_attrs(const gr_conv_out *o, hid_t src, hid_t dst, const char *path, gr_error *err) {
    keep_attr_ctx c = {o, dst, path, err, GR_OK};
    hsize_t idx = 0;
    if (H5Aiterate2(src, H5_INDEX_NAME, H5_ITER_INC, &idx, keep_attr, &c) < 0 && c.st == GR_OK)
        c.st = gr_h5_fail(err, GR_ERR_DATA, "%s: %s: cannot read its attributes", o->path, path);
    return c.st;
}

/* A soft or external link of src made again in dst. */
static gr_status keep_link(const gr_conv_out *o, hid_t src, hid_t dst, const char *name, const H5L_info_t *li,
                           const char *path, gr_error *err) {
    gr_status st = GR_OK;
    char *val = gr_xcalloc(li->u.val_size + 1, 1);
    const char *file = NULL, *obj = NULL;
    GR_H5_CHECK(H5Lget_val(src, name, val, li->u.val_size, H5P_DEFAULT), err, "%s: %s: cannot read the link",
                o->path, path);
    if (li->type == H5L_TYPE_SOFT) {
        GR_H5_CHECK(H5Lcreate_soft(val, dst, name, H5P_DEFAULT, H5P_DEFAULT), err, "%s: %s: cannot copy the link",
                    o->tmp, path);
    } else {
        GR_H5_CHECK(H5Lunpack_elink_val(val, li->u.val_size, NULL, &file, &obj), err,
                    "%s: %s: cannot read the external link", o->path, path);
        GR_H5_CHECK(H5Lcreate_external(file, obj, dst, name, H5P_DEFAULT, H5P_DEFAULT), err,
                    "%s: %s: cannot copy the external link", o->tmp, path);
    }
fail:
    free(val);
    return st;
}

/* Copies group src (path) into dst, but for the groups written: its
 * attributes, then each link: a written group skipped, a group holding one
 * made again (the conversion made it) and recursed into, any other object
 * copied whole. */
static gr_status keep_group(const gr_conv_out *o, hid_t src, hid_t dst, const char *path, gr_error *err) {
    gr_status st = keep_attrs(o, src, dst, path, err);
    H5G_info_t gi = {0};
    if (st == GR_OK && H5Gget_info(src, &gi) < 0) st = gr_h5_fail(err, GR_ERR_DATA, "%s: %s: cannot list", o->path,
                                                                   path);
    for (hsize_t i = 0; st == GR_OK && i < gi.nlinks; i++) {
        char *name = keep_link_name(src, i), *child = NULL;
        hid_t sg = -1, dg = -1;
        H5L_info_t li;
        bool holds;
        GR_H5_CHECK(name ? 0 : -1, err, "%s: %s: cannot list", o->path, path);
        child = gr_h5_join(path, name);
        GR_H5_CHECK(H5Lget_info(src, name, &li, H5P_DEFAULT), err, "%s: %s: cannot read the link", o->path, child);
        if (keep_written(o, child, &holds)) {
            /* replaced by the conversion */
        } else if (holds) {
            GR_H5_CHECK(sg = H5Gopen2(src, name, H5P_DEFAULT), err, "%s: %s: cannot open", o->path, child);
            GR_H5_CHECK(dg = H5Gopen2(dst, name, H5P_DEFAULT), err, "%s: %s: cannot open", o->tmp, child);
            st = keep_group(o, sg, dg, child, err);
        } else if (li.type == H5L_TYPE_HARD) {
            if (o->progress) fprintf(stderr, "gpurun data: %s: keeping %s\n", o->path, child);
            GR_H5_CHECK(H5Ocopy(src, name, dst, name, H5P_DEFAULT, H5P_DEFAULT), err, "%s: %s: cannot copy it into %s",
                        o->path, child, o->tmp);
        } else if (li.type == H5L_TYPE_SOFT || li.type == H5L_TYPE_EXTERNAL) {
            st = keep_link(o, src, dst, name, &li, child, err);
        } else {
            st = gr_error_set(err, GR_ERR_DATA, "%s: %s: a link of a kind this converter cannot copy", o->path, child);
        }
    fail:
        if (sg >= 0) H5Gclose(sg);
        if (dg >= 0) H5Gclose(dg);
        free(name);
        free(child);
    }
    return st;
}

gr_status gr_conv_out_keep(gr_conv_out *o, gr_error *err) {
    gr_status st = GR_OK;
    hid_t src = -1, dst = -1;
    GR_H5_CHECK(src = H5Gopen2(o->old, "/", H5P_DEFAULT), err, "%s: cannot open group /", o->path);
    GR_H5_CHECK(dst = H5Gopen2(o->file, "/", H5P_DEFAULT), err, "%s: cannot open group /", o->tmp);
    st = keep_group(o, src, dst, "/", err);
fail:
    if (src >= 0) H5Gclose(src);
    if (dst >= 0) H5Gclose(dst);
    return st;
}

/* The `classes` attribute of g: its count with *names allocated, 0 when
 * absent, -1 when not a list of strings. */
static int keep_read_classes(hid_t g, char ***names) {
    *names = NULL;
    if (H5Aexists(g, "classes") <= 0) return 0;
    hid_t a = H5Aopen(g, "classes", H5P_DEFAULT), t = a >= 0 ? H5Aget_type(a) : -1, sp = a >= 0 ? H5Aget_space(a) : -1;
    const hssize_t n = sp >= 0 ? H5Sget_simple_extent_npoints(sp) : -1;
    const bool vlen = t >= 0 && H5Tis_variable_str(t) > 0;
    const size_t sz = t >= 0 ? H5Tget_size(t) : 0;
    int rc = -1;
    if (t >= 0 && H5Tget_class(t) == H5T_STRING && n >= 1 && n <= (1 << 24) && sz > 0) {
        hid_t mt = vlen ? H5Tcopy(H5T_C_S1) : -1;
        if (vlen) H5Tset_size(mt, H5T_VARIABLE), H5Tset_cset(mt, H5Tget_cset(t));
        char *buf = gr_xcalloc((size_t)n, vlen ? sizeof(char *) : sz + 1);
        if (H5Aread(a, vlen ? mt : t, buf) >= 0) {
            *names = gr_xcalloc((size_t)n, sizeof **names);
            for (hssize_t i = 0; i < n; i++) {
                const char *v = vlen ? ((char **)(void *)buf)[i] : NULL;
                if (vlen) {
                    (*names)[i] = gr_xstrdup(v ? v : "");
                    H5free_memory(((char **)(void *)buf)[i]);
                } else {
                    (*names)[i] = gr_xcalloc(sz + 1, 1);
                    memcpy((*names)[i], buf + (size_t)i * sz, sz);
                    for (size_t k = strlen((*names)[i]); k > 0 && (*names)[i][k - 1] == ' '; k--)
                        (*names)[i][k - 1] = '\0';
                }
            }
            rc = (int)n;
        }
        free(buf);
        if (mt >= 0) H5Tclose(mt);
    }
    if (sp >= 0) H5Sclose(sp);
    if (t >= 0) H5Tclose(t);
    if (a >= 0) H5Aclose(a);
    return rc;
}

typedef struct keep_classes {
    const gr_conv_out *o;
    const char *written;
    const char *const *names;
    int64_t n;
    char ***msgs;
    int64_t *count, *cap;
} keep_classes;

static void keep_classes_say(const keep_classes *kc, const char *path, const char *what) {
    char msg[GR_ERROR_MSG_MAX];
    snprintf(msg, sizeof msg, "%s: the classes of %s (written now) and of %s (kept) differ: %s; a job that trains on "
             "the one and evaluates on the other is refused", kc->o->path, kc->written, path, what);
    GR_GROW(*kc->msgs, *kc->cap, *kc->count + 1);
    (*kc->msgs)[(*kc->count)++] = gr_xstrdup(msg);
}

/* Compares group g (path) and, to KEEP_CLASSES_DEPTH, the groups under it. */
static void keep_classes_walk(const keep_classes *kc, hid_t g, const char *path, int depth) {
    bool holds;
    if (keep_written(kc->o, path, &holds)) return;
    char **have = NULL, what[600];
    const int nh = keep_read_classes(g, &have);
    int64_t k = 0;
    while (k < nh && k < kc->n && strcmp(have[k], kc->names[k]) == 0) k++;
    if (nh < 0)
        snprintf(what, sizeof what, "attribute classes of %.200s is not a list of strings", path);
    else if (nh > 0 && k < kc->n && k < nh)
        snprintf(what, sizeof what, "class %lld is '%.200s' in the one, '%.200s' in the other", (long long)k,
                 kc->names[k], have[k]);
    else if (nh > 0 && nh != kc->n)
        snprintf(what, sizeof what, "%lld classes in the one, %d in the other (class %lld is '%.200s')",
                 (long long)kc->n, nh, (long long)k, k < nh ? have[k] : kc->names[k]);
    if (nh < 0 || (nh > 0 && (k < nh || k < kc->n))) keep_classes_say(kc, path, what);
    for (int i = 0; i < nh; i++) free(have[i]);
    free(have);
    H5G_info_t gi;
    if (depth >= KEEP_CLASSES_DEPTH || H5Gget_info(g, &gi) < 0) return;
    for (hsize_t i = 0; i < gi.nlinks; i++) {
        char *name = keep_link_name(g, i);
        H5L_info_t li;
        if (name && H5Lget_info(g, name, &li, H5P_DEFAULT) >= 0 && li.type == H5L_TYPE_HARD) {
            hid_t obj = H5Oopen(g, name, H5P_DEFAULT);
            if (obj >= 0 && H5Iget_type(obj) == H5I_GROUP) {
                char *child = gr_h5_join(path, name);
                keep_classes_walk(kc, obj, child, depth + 1);
                free(child);
            }
            if (obj >= 0) H5Oclose(obj);
        }
        free(name);
    }
}

void gr_conv_out_classes_check(const gr_conv_out *o, const char *written, const char *const *names, int64_t n,
                               char ***msgs, int64_t *count, int64_t *cap) {
    if (o->old < 0) return;
    const keep_classes kc = {o, written, names, n, msgs, count, cap};
    hid_t root = H5Gopen2(o->old, "/", H5P_DEFAULT);
    if (root < 0) return;
    keep_classes_walk(&kc, root, "/", 0);
    H5Gclose(root);
}
