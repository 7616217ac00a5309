/* finite.c — inf/NaN in gradients and parameters (see finite.h). */
#include "finite.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "../kernels/backend.h"

/* Whether tensor t lives in the arena scanned. */
static bool gr_finite_in(const gr_tensor *t, gr_finite_arena arena) {
    return t->kind == GR_TK_PARAM || (arena == GR_FINITE_PARAMS && t->kind == GR_TK_STATE);
}

int gr_train_nonfinite_layer(const gr_model *m, gr_finite_arena arena, int64_t *bad) {
    const gr_graph *g = m->g;
    const int64_t n = arena == GR_FINITE_GRADS ? g->n_trainable : g->n_params;
    if (bad) *bad = 0;
    if (n <= 0) return -1;
    float *host = gr_xmalloc((size_t)n * sizeof *host);
    gr_backend_download(m->be, host, arena == GR_FINITE_GRADS ? m->grads : m->params, (size_t)n * sizeof *host);
    int found = -1;
    for (int i = 0; i < g->n_tensors; i++) {
        const gr_tensor *t = &g->tensors[i];
        if (!gr_finite_in(t, arena)) continue;
        /* graph order: the lowest layer; within it, the first tensor */
        if (found >= 0 && t->layer >= g->tensors[found].layer) continue;
        const float *v = host + t->param_offset;
        const int64_t cnt = gr_tensor_numel(t);
        int64_t k = 0;
        for (int64_t e = 0; e < cnt; e++) k += !isfinite(v[e]);
        if (!k) continue;
        found = i;
        if (bad) *bad = k;
    }
    free(host);
    return found;
}

/* "dense1/weight: 80 of 80 values inf/NaN" for tensor i, or a note that the
 * scan found none (the reduction and the scan disagree only on a bug). */
static void gr_finite_what(const gr_graph *g, int i, int64_t bad, char *buf, size_t n) {
    if (i < 0) {
        snprintf(buf, n, "no single tensor found holding them");
        return;
    }
    const gr_tensor *t = &g->tensors[i];
    snprintf(buf, n, "%s/%s: %lld of %lld values inf/NaN", g->layers[t->layer].name, t->pname, (long long)bad,
             (long long)gr_tensor_numel(t));
}

gr_status gr_train_grads_diverged(const gr_model *m, int64_t step, int64_t epoch, double loss, double loss_scale,
                                  bool scaled, bool dynamic, gr_error *err) {
    int64_t bad = 0;
    int i = gr_train_nonfinite_layer(m, GR_FINITE_GRADS, &bad);
    char what[256];
    gr_finite_what(m->g, i, bad, what, sizeof what);
    const char *layer = i >= 0 ? m->g->layers[m->g->tensors[i].layer].name : "?";
    if (scaled)
        return gr_error_set(err, GR_ERR_DIVERGED, "training diverged at step %lld (epoch %lld): the gradients are "
                            "inf/NaN at loss scale %g%s; first layer %s (%s)", (long long)step, (long long)epoch,
                            loss_scale, dynamic ? ", the smallest scale dynamic scaling tries"
                                                : "; set loss_scale: dynamic, or a smaller loss_scale", layer, what);
    return gr_error_set(err, GR_ERR_DIVERGED, "training diverged at step %lld (epoch %lld): the gradient of layer %s "
                        "(%s) is not finite, though the loss was %g; lower train.optimizer.lr, or check the data "
                        "and model.init_from", (long long)step, (long long)epoch, layer, what, loss);
}

gr_status gr_train_check_params(const gr_model *m, int64_t step, int64_t spe, const char *when, gr_error *err) {
    const gr_graph *g = m->g;
    const int64_t epoch = step > 0 && spe > 0 ? (step - 1) / spe + 1 : 1;
    if (g->n_params <= 0 || isfinite(gr_backend_sumsq(m->be, m->params, g->n_params))) return GR_OK;
    int64_t bad = 0;
    int i = gr_train_nonfinite_layer(m, GR_FINITE_PARAMS, &bad);
    char what[256];
    gr_finite_what(g, i, bad, what, sizeof what);
    return gr_error_set(err, GR_ERR_DIVERGED, "training diverged at step %lld (epoch %lld): the parameters hold "
                        "inf/NaN %s (first: layer %s, %s); lower train.optimizer.lr", (long long)step,
                        (long long)epoch, when, i >= 0 ? g->layers[g->tensors[i].layer].name : "?", what);
}
