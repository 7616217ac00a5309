/* split.c — a split's attributes read into its parts (see split.h). */
#include "split.h"

#include <stdio.h>
#include <string.h>

/* The parts' sizes: `sizes` as given, or `parts` equal ones of len (len < 0:
 * unknown, sizes 1 as placeholders for the parse-only build). */
static gr_status gr_split_sizes(const gr_cfg *attrs, const char *key, int64_t len, int64_t *size, int *n,
                                gr_error *err) {
    const gr_cfg *sz = gr_cfg_get(attrs, "sizes"), *pa = gr_cfg_get(attrs, "parts");
    char sub[600];
    if ((sz != NULL) == (pa != NULL))
        return gr_cfg_error(err, attrs, key, "split: give sizes ([64, 64]) or parts (2), one of them");
    if (pa) {
        int64_t p = 0;
        snprintf(sub, sizeof sub, "%s.parts", key);
        gr_status st = gr_cfg_int(pa, sub, 2, GR_SPLIT_MAX, &p, err);
        if (st) return st;
        if (len >= 0 && len % p)
            return gr_cfg_error(err, pa, sub, "split: %lld parts do not divide the axis's %lld", (long long)p,
                                (long long)len);
        for (int i = 0; i < p; i++) size[i] = len >= 0 ? len / p : 1;
        *n = (int)p;
        return GR_OK;
    }
    snprintf(sub, sizeof sub, "%s.sizes", key);
    if (sz->kind != GR_CFG_SEQ || sz->n < 2 || sz->n > GR_SPLIT_MAX)
        return gr_cfg_error(err, sz, sub, "split: expected a list of 2 to %d sizes, e.g. [64, 64]", GR_SPLIT_MAX);
    int64_t sum = 0;
    for (int i = 0; i < sz->n; i++) {
        gr_status st = gr_cfg_int(sz->items[i], sub, 1, INT64_C(1) << 40, &size[i], err);
        if (st) return st;
        sum += size[i];
    }
    if (len >= 0 && sum != len)
        return gr_cfg_error(err, sz, sub, "split: the sizes sum to %lld, but the axis has %lld", (long long)sum,
                            (long long)len);
    *n = sz->n;
    return GR_OK;
}

static gr_status gr_split_names(const gr_cfg *attrs, const char *key, const char *base, gr_split *sp,
                                gr_error *err) {
    const gr_cfg *nm = gr_cfg_get(attrs, "names");
    char sub[600];
    snprintf(sub, sizeof sub, "%s.names", key);
    if (nm && (nm->kind != GR_CFG_SEQ || nm->n != sp->n))
        return gr_cfg_error(err, nm, sub, "split: expected a list of %d names, one per part", sp->n);
    for (int i = 0; i < sp->n; i++) {
        if (!nm) {
            snprintf(sp->names[i], GR_NAME_MAX, "%s_%d", base, i);
            continue;
        }
        const gr_cfg *v = nm->items[i];
        if (v->kind != GR_CFG_SCALAR || !v->scalar[0] || strchr(v->scalar, '.') || !strcmp(v->scalar, "input") ||
            strlen(v->scalar) >= GR_NAME_MAX)
            return gr_cfg_error(err, v, sub, "'%s' cannot name a layer (a name, no dots; 'input' is taken)",
                                v->kind == GR_CFG_SCALAR ? v->scalar : "?");
        for (int k = 0; k < i; k++)
            if (!strcmp(sp->names[k], v->scalar))
                return gr_cfg_error(err, v, sub, "split: '%s' names two parts", v->scalar);
        snprintf(sp->names[i], GR_NAME_MAX, "%s", v->scalar);
    }
    return GR_OK;
}

gr_status gr_split_parse(const gr_cfg *attrs, const char *key, const gr_tensor *x, const char *base, gr_split *sp,
                         gr_error *err) {
    memset(sp, 0, sizeof *sp);
    if (!attrs || attrs->kind != GR_CFG_MAP)
        return gr_cfg_error(err, attrs, key, "split needs attributes, e.g. {axis: -1, sizes: [64, 64], names: "
                            "[a, b]} or {axis: 1, parts: 2}");
    for (int i = 0; i < attrs->n; i++) {
        const char *k = attrs->keys[i];
        if (strcmp(k, "axis") && strcmp(k, "sizes") && strcmp(k, "parts") && strcmp(k, "names")) {
            gr_cfg at = *attrs;
            at.line = attrs->key_line[i];
            at.col = attrs->key_col[i];
            return gr_cfg_error(err, &at, key, "split takes axis, sizes or parts, names; not '%s'", k);
        }
    }
    const gr_cfg *ax = gr_cfg_get(attrs, "axis");
    char sub[600];
    snprintf(sub, sizeof sub, "%s.axis", key);
    if (!ax) return gr_cfg_error(err, attrs, key, "split: axis is required (-1: the last)");
    gr_status st = gr_cfg_int(ax, sub, -GR_MAX_DIMS, GR_MAX_DIMS - 1, &sp->axis, err);
    int64_t len = -1, r = 0;
    if (!st && x && !(st = gr_axis_resolve(sp->axis, x->ndim, false, "split", ax, sub, &r, err))) len = x->shape[r];
    int64_t size[GR_SPLIT_MAX];
    if (!st) st = gr_split_sizes(attrs, key, len, size, &sp->n, err);
    if (!st) st = gr_split_names(attrs, key, base, sp, err);
    if (st) return st;
    int64_t at = 0;
    for (int i = 0; i < sp->n; i++) {
        sp->start[i] = at;
        sp->end[i] = at += size[i];
    }
    return GR_OK;
}

int gr_split_count(const gr_cfg *attrs) {
    const gr_cfg *sz = attrs && attrs->kind == GR_CFG_MAP ? gr_cfg_get(attrs, "sizes") : NULL;
    const gr_cfg *pa = attrs && attrs->kind == GR_CFG_MAP ? gr_cfg_get(attrs, "parts") : NULL;
    if (sz && sz->kind == GR_CFG_SEQ) return sz->n > 1 && sz->n <= GR_SPLIT_MAX ? sz->n : 1;
    if (pa && pa->kind == GR_CFG_SCALAR) {
        int64_t p = 0;
        gr_error ignored;
        if (!gr_cfg_int(pa, "parts", 2, GR_SPLIT_MAX, &p, &ignored)) return (int)p;
    }
    return 1;
}
