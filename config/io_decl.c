/* io_decl.c — model.inputs and model.targets (spec.h: gr_io_decl): the
 * graph's inputs and targets by name, bound to the data's fields. Their
 * shapes and element types come from the data (the runner's); here only
 * the items' form. */
#include "spec.h"

#include <stdio.h>
#include <string.h>

static gr_status gr_io_name(const gr_cfg *v, const char *key, char *dst, size_t n, gr_error *err) {
    if (v->kind != GR_CFG_SCALAR || !v->scalar[0])
        return gr_cfg_error(err, v, key, "expected a name");
    if (strlen(v->scalar) >= n)
        return gr_cfg_error(err, v, key, "'%s' is longer than %zu characters", v->scalar, n - 1);
    if (strchr(v->scalar, '.') || strchr(v->scalar, '/'))
        return gr_cfg_error(err, v, key, "'%s': no dots or slashes in a name", v->scalar);
    snprintf(dst, n, "%s", v->scalar);
    return GR_OK;
}

static gr_status gr_io_item(const gr_cfg *item, const char *key, gr_io_decl *d, gr_error *err) {
    memset(d, 0, sizeof *d);
    d->at = *item;
    if (item->kind == GR_CFG_SCALAR) {
        gr_status st = gr_io_name(item, key, d->name, sizeof d->name, err);
        if (!st) snprintf(d->field, sizeof d->field, "%s", d->name);
        return st;
    }
    if (item->kind != GR_CFG_MAP)
        return gr_cfg_error(err, item, key, "expected a field's name or a map like {name: x, field: features}");
    for (int i = 0; i < item->n; i++) {
        const char *k = item->keys[i];
        const gr_cfg *v = item->items[i];
        char sub[128];
        snprintf(sub, sizeof sub, "%s.%s", key, k);
        gr_status st = GR_OK;
        if (strcmp(k, "name") == 0) {
            st = gr_io_name(v, sub, d->name, sizeof d->name, err);
        } else if (strcmp(k, "field") == 0) {
            st = gr_io_name(v, sub, d->field, sizeof d->field, err);
        } else if (strcmp(k, "dtype") == 0) {
            if (v->kind == GR_CFG_SCALAR && strcmp(v->scalar, "float32") == 0) d->dtype = GR_IO_FLOAT32;
            else if (v->kind == GR_CFG_SCALAR && strcmp(v->scalar, "int32") == 0) d->dtype = GR_IO_INT32;
            else st = gr_cfg_error(err, v, sub, "expected float32 or int32");
        } else {
            gr_cfg at = *item;
            at.line = item->key_line[i];
            at.col = item->key_col[i];
            st = gr_cfg_error(err, &at, key, "unknown key '%s' (an input or target takes name, field, dtype)", k);
        }
        if (st) return st;
    }
    if (!d->name[0] && !d->field[0])
        return gr_cfg_error(err, item, key, "give the field (field: NAME), and a name if it differs");
    if (!d->field[0]) snprintf(d->field, sizeof d->field, "%s", d->name);
    if (!d->name[0]) snprintf(d->name, sizeof d->name, "%s", d->field);
    return GR_OK;
}

gr_status gr_io_decls_read(const gr_job_spec *s, bool targets, gr_io_decl *out, int *n, gr_error *err) {
    *n = 0;
    const gr_cfg *seq = targets ? s->model.targets : s->model.inputs;
    const char *what = targets ? "model.targets" : "model.inputs";
    if (!seq || seq->kind != GR_CFG_SEQ) return GR_OK;
    const int most = targets ? 1 : GR_MAX_IO;
    if (seq->n > most)
        return gr_cfg_error(err, seq, what, "%d items; at most %d (%s)", seq->n, most,
                            targets ? "the loss takes one target" : "inputs of one graph");
    for (int i = 0; i < seq->n; i++) {
        char key[64];
        snprintf(key, sizeof key, "%s[%d]", what, i);
        gr_status st = gr_io_item(seq->items[i], key, &out[i], err);
        if (st) return st;
        for (int k = 0; k < i; k++)
            if (strcmp(out[k].name, out[i].name) == 0)
                return gr_cfg_error(err, &out[i].at, key, "'%s' is already %s[%d]", out[i].name, what, k);
        if (!targets && i > 0 && strcmp(out[i].name, "input") == 0)
            return gr_cfg_error(err, &out[i].at, key, "'input' names the first input; call this one otherwise");
        *n = i + 1;
    }
    return GR_OK;
}
