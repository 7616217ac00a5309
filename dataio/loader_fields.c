/* loader_fields.c — the fields a loader delivers (loader_fields.h): a
 * source's fields named by gr_loader_config.fields checked and resolved once
 * (gr_loader_fields_describe, gr_loader_outs_make), and each sample's field
 * converted into its batch buffer: float32 of the stored values, optionally
 * normalized per column, or int32 of an integer field. The image path (crop,
 * flip, normalization) stays the loader's decoder (augment.h). */
#include "loader_fields.h"
#include "h5util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *deliver_name(gr_deliver as) {
    return as == GR_DELIVER_INT32 ? "int32" : as == GR_DELIVER_IMAGE ? "an image" : "float32";
}

gr_status gr_loader_image_check(const gr_source *src, int field, gr_loader_image *im, gr_error *err) {
    const gr_field *f = &src->fields[field];
    const bool chw = strcmp(f->layout, "CHW") == 0, hwc = strcmp(f->layout, "HWC") == 0;
    bool ok = !f->variable && f->rank == 3 && (chw || hwc) &&
              (f->type == GR_FT_UINT8 || f->type == GR_FT_FLOAT16 || f->type == GR_FT_FLOAT32);
    for (int k = 0; ok && k < 3; k++) ok = f->shape[k] >= 1;
    if (!ok)
        return gr_error_set(err, GR_ERR_DATA, "loader: %s: %s: field '%s' is %s%s of rank %d, layout '%s'; the "
                            "loader reads uint8, float16 or float32 images [C,H,W] (layout CHW) or [H,W,C] (HWC)",
                            src->path, f->origin, f->name, f->variable ? "variable-size " : "",
                            gr_ftype_name(f->type), f->rank, f->layout);
    im->field = field;
    im->nhwc = hwc;
    im->chw[0] = f->shape[hwc ? 2 : 0];
    im->chw[1] = f->shape[hwc ? 0 : 1];
    im->chw[2] = f->shape[hwc ? 1 : 2];
    im->dtype = f->type == GR_FT_UINT8 ? GR_DT_UINT8 : f->type == GR_FT_FLOAT16 ? GR_DT_FLOAT16 : GR_DT_FLOAT32;
    return GR_OK;
}

/* "a, b, c": the source's field names, for a message. */
static void field_list(const gr_source *src, char *buf, size_t n) {
    size_t k = 0;
    buf[0] = '\0';
    for (int i = 0; i < src->nfields && k + 1 < n; i++)
        k += (size_t)snprintf(buf + k, n - k, "%s%s", i ? ", " : "", src->fields[i].name);
}

/* The normalization of a FLOAT32 field into o (copied). */
static gr_status out_norm(const gr_source *src, const gr_loader_field *lf, gr_loader_out *o, gr_error *err) {
    const gr_field *f = &src->fields[o->src];
    const int64_t last = f->rank ? f->shape[f->rank - 1] : 1;
    if (lf->n_norm == 0) return GR_OK;
    if (lf->as != GR_DELIVER_FLOAT32)
        return gr_error_set(err, GR_ERR_USAGE, "loader: field '%s' is delivered as %s: it takes no normalization "
                            "(n_norm %d)%s", lf->name, deliver_name(lf->as), lf->n_norm,
                            lf->as == GR_DELIVER_IMAGE ? "; an image is normalized by the loader's mean/std" : "");
    if (lf->n_norm != 1 && lf->n_norm != last)
        return gr_error_set(err, GR_ERR_USAGE, "loader: field '%s' (%s): %d normalization values; expected 1 or %lld "
                            "(one per element of its last axis)", lf->name, f->origin, lf->n_norm, (long long)last);
    if (!lf->mean || !lf->std)
        return gr_error_set(err, GR_ERR_USAGE, "loader: field '%s': n_norm %d without mean and std", lf->name,
                            lf->n_norm);
    for (int j = 0; j < lf->n_norm; j++)
        if (!isfinite(lf->mean[j]) || !isfinite(lf->std[j]) || lf->std[j] == 0.0)
            return gr_error_set(err, GR_ERR_USAGE, "loader: field '%s' (%s): normalize element %d: mean %g / std %g "
                                "is unusable", lf->name, f->origin, j, lf->mean[j], lf->std[j]);
    o->ncol = lf->n_norm;
    o->mean = gr_xmalloc((size_t)lf->n_norm * sizeof *o->mean);
    o->std = gr_xmalloc((size_t)lf->n_norm * sizeof *o->std);
    memcpy(o->mean, lf->mean, (size_t)lf->n_norm * sizeof *o->mean);
    memcpy(o->std, lf->std, (size_t)lf->n_norm * sizeof *o->std);
    return GR_OK;
}

/* cfg's field k resolved into o; the IMAGE field into *im. */
static gr_status out_make(const gr_source *src, const gr_loader_config *cfg, int k, gr_loader_out *o,
                          gr_loader_image *im, gr_error *err) {
    const gr_loader_field *lf = &cfg->fields[k];
    char names[512];
    if (!lf->name || (o->src = gr_source_find(src, lf->name)) < 0) {
        field_list(src, names, sizeof names);
        return gr_error_set(err, GR_ERR_DATA, "loader: %s has no field '%s' (its fields: %s)", src->path,
                            lf->name ? lf->name : "(null)", names);
    }
    const gr_field *f = &src->fields[o->src];
    const bool is_float = f->type == GR_FT_FLOAT16 || f->type == GR_FT_FLOAT32;
    o->as = lf->as;
    o->from = f->type;
    o->ncol = 1;
    o->desc.name = gr_xstrdup(f->name);
    if (f->variable)
        return gr_error_set(err, GR_ERR_DATA, "loader: %s: %s: field '%s' varies in size per sample; the loader "
                            "delivers fields of one shape", src->path, f->origin, f->name);
    if (lf->as == GR_DELIVER_IMAGE) {
        if (im->field >= 0)
            return gr_error_set(err, GR_ERR_USAGE, "loader: fields '%s' and '%s' are both delivered as images; at "
                                "most one field takes the image path", src->fields[im->field].name, f->name);
        gr_status st = gr_loader_image_check(src, o->src, im, err);
        if (st == GR_OK) st = gr_augment_check(&cfg->aug, im->chw[1], im->chw[2], src->path, f->origin, err);
        if (st != GR_OK) return st;
        int64_t oh, ow;
        gr_augment_out_shape(&cfg->aug, im->chw[1], im->chw[2], &oh, &ow);
        o->desc.rank = 3;
        o->desc.shape[0] = im->chw[0], o->desc.shape[1] = oh, o->desc.shape[2] = ow;
        o->elems = im->chw[0] * im->chw[1] * im->chw[2];
    } else if (lf->as == GR_DELIVER_INT32 || lf->as == GR_DELIVER_FLOAT32) {
        if (lf->as == GR_DELIVER_INT32 && is_float)
            return gr_error_set(err, GR_ERR_DATA, "loader: %s: %s: field '%s' is %s; it cannot be delivered as "
                                "int32 (deliver it as float32)", src->path, f->origin, f->name, gr_ftype_name(f->type));
        o->desc.rank = f->rank;
        o->elems = 1;
        for (int d = 0; d < f->rank; d++) o->desc.shape[d] = f->shape[d], o->elems *= f->shape[d];
    } else {
        return gr_error_set(err, GR_ERR_USAGE, "loader: field '%s': unknown delivery %d", lf->name, (int)lf->as);
    }
    o->desc.type = lf->as == GR_DELIVER_INT32 ? GR_FT_INT32 : GR_FT_FLOAT32;
    o->desc.bytes = 4;
    for (int d = 0; d < o->desc.rank; d++) o->desc.bytes *= (size_t)o->desc.shape[d];
    return out_norm(src, lf, o, err);
}

void gr_loader_outs_free(gr_loader_out *outs, int n) {
    if (!outs) return;
    for (int k = 0; k < n; k++) {
        free((char *)outs[k].desc.name);
        free(outs[k].mean);
        free(outs[k].std);
    }
    free(outs);
}

gr_status gr_loader_outs_make(const gr_source *src, const gr_loader_config *cfg, gr_loader_out **outs,
                              gr_loader_image *im, gr_error *err) {
    *outs = NULL;
    memset(im, 0, sizeof *im);
    im->field = -1;
    if (cfg->nfields < 1 || cfg->nfields > GR_SOURCE_MAX_FIELDS || !cfg->fields)
        return gr_error_set(err, GR_ERR_USAGE, "loader: %d fields to deliver; expected 1 to %d", cfg->nfields,
                            GR_SOURCE_MAX_FIELDS);
    gr_loader_out *o = gr_xcalloc((size_t)cfg->nfields, sizeof *o);
    gr_status st = GR_OK;
    for (int k = 0; k < cfg->nfields && st == GR_OK; k++) st = out_make(src, cfg, k, &o[k], im, err);
    if (st == GR_OK && im->field < 0 && (cfg->aug.crop != GR_CROP_NONE || cfg->aug.flip))
        st = gr_error_set(err, GR_ERR_USAGE, "loader: crop and flip apply to an image, and no field is delivered as "
                          "one");
    if (st != GR_OK) {
        gr_loader_outs_free(o, cfg->nfields);
        return st;
    }
    *outs = o;
    return GR_OK;
}

gr_status gr_loader_fields_describe(const gr_source *src, const gr_loader_config *cfg, gr_batch_field *out,
                                    gr_error *err) {
    gr_loader_out *o;
    gr_loader_image im;
    gr_status st = gr_loader_outs_make(src, cfg, &o, &im, err);
    if (st != GR_OK) return st;
    for (int k = 0; k < cfg->nfields; k++) {
        out[k] = o[k].desc;
        out[k].name = src->fields[o[k].src].name; /* the source's: valid while it is open */
    }
    gr_loader_outs_free(o, cfg->nfields);
    return GR_OK;
}

/* Element e of a stored sample as a double. */
static inline double stored_value(gr_ftype t, const void *p, int64_t e) {
    switch (t) {
    case GR_FT_UINT8: return ((const uint8_t *)p)[e];
    case GR_FT_UINT16: return ((const uint16_t *)p)[e];
    case GR_FT_INT32: return ((const int32_t *)p)[e];
    case GR_FT_INT64: return (double)((const int64_t *)p)[e];
    case GR_FT_FLOAT16: return gr_h5_half_to_float(((const uint16_t *)p)[e]);
    case GR_FT_FLOAT32: return ((const float *)p)[e];
    default: break;
    }
    GR_ASSERT(!"unknown field type");
    return 0;
}

gr_status gr_loader_out_convert(const gr_loader_out *o, const gr_source *src, const void *p, int64_t sample,
                                void *dst, gr_error *err) {
    const int64_t n = o->elems;
    if (o->as == GR_DELIVER_INT32) {
        int32_t *y = dst;
        if (o->from == GR_FT_INT32) {
            memcpy(y, p, (size_t)n * sizeof *y);
            return GR_OK;
        }
        for (int64_t e = 0; e < n; e++) {
            if (o->from == GR_FT_INT64) {
                const int64_t v = ((const int64_t *)p)[e];
                if (v < INT32_MIN || v > INT32_MAX) {
                    const gr_field *f = &src->fields[o->src];
                    return gr_error_set(err, GR_ERR_DATA, "%s: %s: sample %lld element %lld: value %lld does not fit "
                                        "int32 (field '%s' is delivered as int32)", src->path, f->origin,
                                        (long long)sample, (long long)e, (long long)v, f->name);
                }
                y[e] = (int32_t)v;
            } else {
                y[e] = (int32_t)stored_value(o->from, p, e); /* uint8, uint16: exact */
            }
        }
        return GR_OK;
    }
    GR_ASSERT(o->as == GR_DELIVER_FLOAT32);
    float *x = dst;
    if (o->from == GR_FT_FLOAT32 && !o->mean) {
        memcpy(x, p, (size_t)n * sizeof *x);
        return GR_OK;
    }
    if (!o->mean) {
        for (int64_t e = 0; e < n; e++) x[e] = (float)stored_value(o->from, p, e);
        return GR_OK;
    }
    for (int64_t e = 0; e < n; e++) {
        const int64_t j = e % o->ncol;
        x[e] = (float)((stored_value(o->from, p, e) - o->mean[j]) / o->std[j]);
    }
    return GR_OK;
}
