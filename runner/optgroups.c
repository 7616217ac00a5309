/* optgroups.c — see optgroups.h. */
#include "optgroups.h"

#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>

/* What became of each group: it took parameters, or it matched only ones an
 * earlier group took (by: that group, name: one of them), or nothing. */
typedef struct gr_opt_use {
    bool took;
    int by;                 /* -1: it matched nothing */
    const char *name;
} gr_opt_use;

/* The settings of parameter t: the first group whose pattern matches its
 * name, else the optimizer's, weight decay under the decay rule. */
static void gr_opt_settings(const gr_tensor *t, const gr_job_spec *s, const gr_param_group *pg, int npg,
                            gr_opt_use *use, gr_opt_range *r) {
    const gr_optim_spec *o = &s->train.optimizer;
    r->lr_mult = 1.0;
    r->weight_decay = o->decay == GR_DECAY_MATRICES && t->ndim < 2 ? 0.0 : o->weight_decay;
    r->frozen = false;
    int first = -1;
    for (int k = 0; k < npg; k++) {
        if (fnmatch(pg[k].params, t->name, 0) != 0) continue;
        if (first >= 0) { /* matched, but the earlier group has it */
            if (use[k].by < 0) use[k].by = first, use[k].name = t->name;
            continue;
        }
        first = k;
        use[k].took = true;
        r->lr_mult = pg[k].lr_mult;
        if (pg[k].has_weight_decay) r->weight_decay = pg[k].weight_decay;
        r->frozen = pg[k].frozen;
    }
}

/* A group that took no parameter: a pattern that matches none (a typo), or
 * one whose parameters an earlier group takes (the order is wrong). */
static gr_status gr_opt_unused(const gr_graph *g, const gr_param_group *pg, int k, const gr_opt_use *u,
                               gr_error *err) {
    char key[64];
    snprintf(key, sizeof key, "train.optimizer.groups[%d].params", k);
    if (u->by >= 0)
        return gr_cfg_error(err, &pg[k].at, key, "'%s' takes no parameter: those it matches ('%s', ...) are taken by "
                            "groups[%d] ('%s') before it, and the first group that matches a parameter wins",
                            pg[k].params, u->name, u->by, pg[u->by].params);
    char names[400] = "";
    size_t len = 0;
    int shown = 0;
    for (int i = 0; i < g->n_tensors && shown < 4; i++)
        if (g->tensors[i].kind == GR_TK_PARAM) {
            len += (size_t)snprintf(names + len, sizeof names - len, "%s%s", shown ? ", " : "", g->tensors[i].name);
            if (len >= sizeof names) break;
            shown++;
        }
    return gr_cfg_error(err, &pg[k].at, key, "'%s' matches no parameter of the model (they are named "
                        "<layer>.<tensor>: %s%s)", pg[k].params, names, shown == 4 ? ", ..." : "");
}

gr_status gr_opt_groups_make(const gr_graph *g, const gr_job_spec *s, gr_opt_groups *og, gr_error *err) {
    memset(og, 0, sizeof *og);
    gr_param_group *pg;
    int npg;
    gr_status st = gr_param_groups_read(s, &pg, &npg, err);
    if (st) return st;
    gr_opt_use *use = gr_xcalloc((size_t)npg + 1, sizeof *use);
    for (int k = 0; k < npg; k++) use[k].by = -1;
    og->r = gr_xcalloc((size_t)g->n_tensors + 1, sizeof *og->r);
    /* PARAM tensors hold increasing offsets in tensor order (gr_graph_build) */
    int last = -1;
    for (int i = 0; i < g->n_tensors; i++) {
        const gr_tensor *t = &g->tensors[i];
        if (t->kind != GR_TK_PARAM) continue;
        gr_opt_range r = {.off = t->param_offset};
        gr_opt_settings(t, s, pg, npg, use, &r);
        if (last >= 0) GR_ASSERT(r.off > og->r[last].off);
        if (last >= 0 && og->r[last].lr_mult == r.lr_mult && og->r[last].weight_decay == r.weight_decay &&
            og->r[last].frozen == r.frozen)
            continue; /* the range grows to the next one's start */
        if (last >= 0) og->r[last].n = r.off - og->r[last].off;
        og->r[++last] = r;
        og->any_frozen |= r.frozen;
    }
    if (last >= 0) og->r[last].n = g->n_trainable - og->r[last].off;
    og->n = last + 1;
    for (int k = 0; k < npg && !st; k++)
        if (!use[k].took) st = gr_opt_unused(g, pg, k, &use[k], err);
    free(use);
    free(pg);
    if (st) gr_opt_groups_free(og);
    return st;
}

void gr_opt_groups_free(gr_opt_groups *og) {
    free(og->r);
    memset(og, 0, sizeof *og);
}

void gr_opt_groups_print(const gr_opt_groups *og, const gr_graph *g, const gr_job_spec *s, FILE *f) {
    const gr_optim_spec *o = &s->train.optimizer;
    bool head = false;
    for (int i = 0, k = 0; i < g->n_tensors; i++) {
        const gr_tensor *t = &g->tensors[i];
        if (t->kind != GR_TK_PARAM) continue;
        while (k + 1 < og->n && og->r[k + 1].off <= t->param_offset) k++;
        const gr_opt_range *r = &og->r[k];
        if (r->lr_mult == 1.0 && r->weight_decay == o->weight_decay && !r->frozen) continue;
        if (!head) fprintf(f, "optimizer groups (parameters not at lr x1, weight decay %g):\n", o->weight_decay);
        head = true;
        if (r->frozen) fprintf(f, "  %-40s frozen\n", t->name);
        else fprintf(f, "  %-40s lr x%g, weight decay %g\n", t->name, r->lr_mult, r->weight_decay);
    }
}

gr_status gr_opt_groups_check(const gr_job_spec *s, gr_error *err) {
    if (!s->train.optimizer.groups || s->model.n_input == 0) return GR_OK;
    gr_graph g;
    gr_status st = gr_graph_build(s, s->model.input, s->model.n_input, &g, err);
    if (st) return st;
    gr_opt_groups og;
    st = gr_opt_groups_make(&g, s, &og, err);
    if (!st) gr_opt_groups_free(&og);
    gr_graph_free(&g);
    return st;
}

/* og with every float outside the intervals keep[0..nk) ([off, off + n), sorted, disjoint)
 * frozen: each range cut where an interval's edge falls in it. */
static int gr_opt_interval_cmp(const void *a, const void *b) {
    const int64_t *x = a, *y = b;
    return x[0] < y[0] ? -1 : x[0] > y[0];
}

void gr_opt_groups_keep(const gr_opt_groups *og, const gr_opt_range *whole, const int64_t (*keep_in)[2],
                        int nk, gr_opt_groups *out) {
    int64_t (*keep)[2] = gr_xmalloc((size_t)(nk ? nk : 1) * sizeof *keep); /* sorted by offset */
    if (nk) memcpy(keep, keep_in, (size_t)nk * sizeof *keep);
    qsort(keep, (size_t)nk, sizeof *keep, gr_opt_interval_cmp);
    const int nr = og->n ? og->n : 1;
    out->r = gr_xcalloc((size_t)nr * (size_t)(2 * nk + 1), sizeof *out->r);
    out->n = 0;
    out->any_frozen = true;
    for (int k = 0; k < nr; k++) {
        const gr_opt_range *r = og->n ? &og->r[k] : whole;
        int64_t at = r->off;
        const int64_t end = r->off + r->n;
        for (int i = 0; i <= nk && at < end; i++) { /* the gap before interval i, then interval i */
            const int64_t lo = i < nk ? GR_MIN(GR_MAX(keep[i][0], at), end) : end;
            const int64_t hi = i < nk ? GR_MIN(GR_MAX(keep[i][0] + keep[i][1], at), end) : end;
            for (int part = 0; part < 2; part++) {
                const int64_t a = part ? lo : at, b = part ? hi : lo;
                if (b <= a) continue;
                gr_opt_range x = *r;
                x.off = a;
                x.n = b - a;
                x.frozen = r->frozen || part == 0;
                out->r[out->n++] = x;
            }
            at = hi;
        }
    }
    free(keep);
}

