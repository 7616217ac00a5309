/* attrs.c — op attributes from YAML: one parser for every op, driven by the
 * op's table (gr_attr_table in graph.h: key, kind, field, bounds, default;
 * kinds: integers, [h, w] pairs, floats, bools, lists of integers),
 * so an op file lists its attributes instead of parsing them, and the
 * "unknown attribute (dense takes units, bias, tied, transpose)" message is
 * made from the table. Values are numbers, bools and layer names (dense's
 * `tied`). Errors point at the YAML node: "job.yaml:7:20:
 * model.layers[1].dense.units: ...". */
#include "graph.h"

#include <stdio.h>
#include <string.h>

/* An int for both spatial sides or a [h, w] list, each in [lo, hi]. */
static gr_status gr_attrs_pair(const gr_cfg *v, const char *key, int64_t lo, int64_t hi, int64_t out[2],
                               gr_error *err) {
    if (v->kind == GR_CFG_SCALAR) {
        gr_status st = gr_cfg_int(v, key, lo, hi, &out[0], err);
        out[1] = out[0];
        return st;
    }
    if (v->kind != GR_CFG_SEQ || v->n != 2)
        return gr_cfg_error(err, v, key, "expected an integer or a [h, w] list of two integers");
    for (int i = 0; i < 2; i++) {
        char sub[320];
        snprintf(sub, sizeof sub, "%s[%d]", key, i);
        gr_status st = gr_cfg_int(v->items[i], sub, lo, hi, &out[i], err);
        if (st) return st;
    }
    return GR_OK;
}

/* A list of 1..GR_MAX_DIMS integers, each in [lo, hi]. */
static gr_status gr_attrs_list(const gr_cfg *v, const char *key, int64_t lo, int64_t hi, gr_ilist *out,
                               gr_error *err) {
    if (v->kind != GR_CFG_SEQ || v->n < 1 || v->n > GR_MAX_DIMS)
        return gr_cfg_error(err, v, key, "expected a list of 1 to %d integers, e.g. [2, 3]", GR_MAX_DIMS);
    for (int i = 0; i < v->n; i++) {
        char sub[320];
        snprintf(sub, sizeof sub, "%s[%d]", key, i);
        gr_status st = gr_cfg_int(v->items[i], sub, lo, hi, &out->v[i], err);
        if (st) return st;
    }
    out->n = v->n;
    return GR_OK;
}

/* "unknown attribute (<op> takes <keys><note>)" at the position of the map's key i. */
static gr_status gr_attrs_unknown(const char *op, const gr_attr_table *t, const gr_cfg *attrs, int i,
                                  const char *key, gr_error *err) {
    char takes[256];
    size_t k = (size_t)snprintf(takes, sizeof takes, "%s takes ", op);
    for (int d = 0; d < t->n && k < sizeof takes; d++)
        k += (size_t)snprintf(takes + k, sizeof takes - k, "%s%s", d ? ", " : "", t->defs[d].key);
    if (t->takes_note && k < sizeof takes) snprintf(takes + k, sizeof takes - k, "%s", t->takes_note);
    gr_cfg at = *attrs;
    at.line = attrs->key_line[i];
    at.col = attrs->key_col[i];
    if (attrs->items[i] && attrs->items[i]->file) at.file = attrs->items[i]->file; /* a key --set added */
    return gr_cfg_error(err, &at, key, "unknown attribute (%s)", takes);
}

static void gr_attrs_default(const gr_attr_def *d, gr_attrs *a) {
    char *field = (char *)a + d->offset;
    switch (d->kind) {
    case GR_ATTR_INT: *(int64_t *)field = (int64_t)d->def; break;
    case GR_ATTR_PAIR: ((int64_t *)field)[0] = ((int64_t *)field)[1] = (int64_t)d->def; break;
    case GR_ATTR_FLOAT: *(double *)field = d->def; break;
    case GR_ATTR_BOOL: *(bool *)field = d->def != 0.0; break;
    case GR_ATTR_NAME: field[0] = '\0'; break;
    case GR_ATTR_LIST: memset(field, 0, sizeof(gr_ilist)); break; /* no default list: n = 0 */
    }
}

/* A layer name: a non-empty plain scalar that fits char[GR_NAME_MAX]. */
static gr_status gr_attrs_name(const gr_cfg *v, const char *key, char *out, gr_error *err) {
    if (v->kind != GR_CFG_SCALAR || !v->scalar[0])
        return gr_cfg_error(err, v, key, "expected the name of a layer");
    if (strlen(v->scalar) >= GR_NAME_MAX)
        return gr_cfg_error(err, v, key, "a layer name is at most %d characters", GR_NAME_MAX - 1);
    snprintf(out, GR_NAME_MAX, "%s", v->scalar);
    return GR_OK;
}

/* One given value v of attribute d, its YAML path sub. */
static gr_status gr_attrs_value(const gr_attr_def *d, const gr_cfg *v, const char *sub, gr_attrs *a,
                                gr_error *err) {
    char *field = (char *)a + d->offset;
    gr_status st = GR_OK;
    switch (d->kind) {
    case GR_ATTR_INT: st = gr_cfg_int(v, sub, (int64_t)d->lo, (int64_t)d->hi, (int64_t *)field, err); break;
    case GR_ATTR_PAIR: st = gr_attrs_pair(v, sub, (int64_t)d->lo, (int64_t)d->hi, (int64_t *)field, err); break;
    case GR_ATTR_FLOAT: st = gr_cfg_float(v, sub, d->lo, d->hi, (double *)field, err); break;
    case GR_ATTR_BOOL: st = gr_cfg_bool(v, sub, (bool *)field, err); break;
    case GR_ATTR_NAME: st = gr_attrs_name(v, sub, field, err); break;
    case GR_ATTR_LIST: st = gr_attrs_list(v, sub, (int64_t)d->lo, (int64_t)d->hi, (gr_ilist *)field, err); break;
    }
    if (!st && (d->opts & GR_ATTR_POSITIVE) && !(*(double *)field > 0.0))
        st = gr_cfg_error(err, v, sub, "%s must be positive", d->key);
    return st;
}

static bool gr_attrs_empty(const gr_cfg *attrs) {
    return !attrs || (attrs->kind == GR_CFG_SCALAR && !attrs->scalar[0]);
}

gr_status gr_attrs_read(const char *op, const gr_attr_table *t, gr_attrs *a, const gr_cfg *attrs,
                        const char *key, gr_error *err) {
    if (!t) {
        if (!gr_attrs_empty(attrs) && !(attrs->kind == GR_CFG_MAP && attrs->n == 0))
            return gr_cfg_error(err, attrs, key, "%s takes no attributes", op);
        return GR_OK;
    }
    bool required = false;
    for (int d = 0; d < t->n; d++) {
        GR_ASSERT(!(t->defs[d].opts & GR_ATTR_POSITIVE) || t->defs[d].kind == GR_ATTR_FLOAT);
        gr_attrs_default(&t->defs[d], a);
        required |= (t->defs[d].opts & GR_ATTR_REQUIRED) != 0;
    }
    if (!required && gr_attrs_empty(attrs)) return GR_OK;
    if (!attrs || attrs->kind != GR_CFG_MAP) return gr_cfg_error(err, attrs, key, "%s", t->usage);
    bool given[64] = {false};
    GR_ASSERT(t->n <= (int)GR_ARRAY_LEN(given));
    for (int i = 0; i < attrs->n; i++) {
        char sub[300];
        snprintf(sub, sizeof sub, "%s.%s", key, attrs->keys[i]);
        int d = 0;
        while (d < t->n && strcmp(t->defs[d].key, attrs->keys[i]) != 0) d++;
        if (d == t->n) return gr_attrs_unknown(op, t, attrs, i, sub, err);
        gr_status st = gr_attrs_value(&t->defs[d], attrs->items[i], sub, a, err);
        if (st) return st;
        given[d] = true;
    }
    for (int d = 0; d < t->n; d++)
        if ((t->defs[d].opts & GR_ATTR_REQUIRED) && !given[d])
            return gr_cfg_error(err, attrs, key, "%s: required attribute missing", t->defs[d].key);
    return GR_OK;
}

gr_status gr_op_parse_attrs(gr_op op, gr_attrs *a, const gr_cfg *attrs, const char *key, gr_error *err) {
    const gr_op_impl *impl = gr_op_impl_of(op);
    GR_ASSERT(impl && (gr_op_flags(op) & GR_OPF_LAYER));
    gr_status st = gr_attrs_read(gr_op_name(op), impl->attrs, a, attrs, key, err);
    if (!st && impl->check) st = impl->check(a, attrs, key, err);
    return st;
}
