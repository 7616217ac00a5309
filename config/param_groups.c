/* param_groups.c — train.optimizer.groups: a list of maps
 *   - {params: PATTERN, lr_mult: X, weight_decay: Y, frozen: BOOL}
 * read into gr_param_group (spec.h). `params` is required; the others
 * default to lr_mult 1, the optimizer's weight decay, not frozen. Matching
 * the patterns against the model's parameter names is the runner's (it
 * has the graph): here only the items' form is checked. */
#include "spec.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static gr_status gr_param_group_key(const gr_cfg *item, int i, const char *key, gr_param_group *pg, gr_error *err) {
    const char *k = item->keys[i];
    const gr_cfg *v = item->items[i];
    char sub[300];
    snprintf(sub, sizeof sub, "%s.%s", key, k);
    if (strcmp(k, "params") == 0) {
        if (v->kind != GR_CFG_SCALAR || !v->scalar[0])
            return gr_cfg_error(err, v, sub, "expected a parameter name pattern, e.g. '*.bias' or 'fc.*'");
        if (strlen(v->scalar) >= sizeof pg->params)
            return gr_cfg_error(err, v, sub, "a pattern of %zu bytes; at most %zu", strlen(v->scalar),
                                sizeof pg->params - 1);
        snprintf(pg->params, sizeof pg->params, "%s", v->scalar);
        return GR_OK;
    }
    if (strcmp(k, "lr_mult") == 0) {
        gr_status st = gr_cfg_float(v, sub, 0, INFINITY, &pg->lr_mult, err);
        if (!st && !(pg->lr_mult > 0))
            return gr_cfg_error(err, v, sub, "must be > 0 (freeze parameters with frozen: true)");
        return st;
    }
    if (strcmp(k, "weight_decay") == 0) {
        pg->has_weight_decay = true;
        return gr_cfg_float(v, sub, 0, INFINITY, &pg->weight_decay, err);
    }
    if (strcmp(k, "frozen") == 0) return gr_cfg_bool(v, sub, &pg->frozen, err);
    gr_cfg at = *item;
    at.line = item->key_line[i];
    at.col = item->key_col[i];
    return gr_cfg_error(err, &at, key, "unknown key '%s' (a group takes params, lr_mult, weight_decay, frozen)", k);
}

gr_status gr_param_groups_read(const gr_job_spec *s, gr_param_group **out, int *n, gr_error *err) {
    *out = NULL;
    *n = 0;
    const gr_cfg *seq = s->train.optimizer.groups;
    if (!seq || seq->kind != GR_CFG_SEQ || seq->n == 0) return GR_OK;
    gr_param_group *pg = gr_xcalloc((size_t)seq->n, sizeof *pg);
    gr_status st = GR_OK;
    for (int g = 0; g < seq->n && !st; g++) {
        const gr_cfg *item = seq->items[g];
        char key[64];
        snprintf(key, sizeof key, "train.optimizer.groups[%d]", g);
        pg[g].lr_mult = 1.0;
        pg[g].at = *item;
        if (item->kind != GR_CFG_MAP) {
            st = gr_cfg_error(err, item, key, "expected a map like {params: '*.bias', weight_decay: 0}");
            break;
        }
        for (int i = 0; i < item->n && !st; i++) st = gr_param_group_key(item, i, key, &pg[g], err);
        if (!st && !pg[g].params[0])
            st = gr_cfg_error(err, item, key, "params: required (the pattern of the parameter names it takes)");
    }
    if (st) {
        free(pg);
        return st;
    }
    *out = pg;
    *n = seq->n;
    return GR_OK;
}
