/* memfit.c — a job's memory at a micro-batch, and the largest that fits (see memfit.h). */
#include "memfit.h"

#include <stdlib.h>
#include <string.h>

#include "../graph/graph.h"

/* Plans the pass without arenas, on the stub's backend when it has every
 * kernel (which half steps are native), else device-free. */
static gr_status gr_memfit_compile(gr_plan *p, gr_model *stub, const gr_graph *g, gr_plan_mode mode, gr_error *err) {
    if (stub->be && gr_plan_compile(p, stub, g, mode, false, err) == GR_OK) return GR_OK;
    return gr_plan_compile(p, NULL, g, mode, false, err);
}

gr_status gr_memfit_need(const gr_job_spec *s, const int64_t *in_shape, int in_ndim, int64_t m, gr_backend *be,
                         gr_mem_need *out, gr_error *err) {
    gr_job_spec t = *s; /* shallow: only read */
    t.train.micro_batch = m;
    gr_job j;
    gr_job_init(&j, &t, true);
    memset(out, 0, sizeof *out);
    out->micro_batch = m;
    gr_plan tp, ep;
    memset(&tp, 0, sizeof tp);
    memset(&ep, 0, sizeof ep);
    gr_status st = gr_job_graph(&j, in_shape, in_ndim, err);
    if (!st) {
        j.be = be; /* borrowed: taken back before gr_job_free */
        if (be) gr_job_layout(&j);
        gr_model stub = {.g = &j.g, .be = be};
        st = gr_memfit_compile(&tp, &stub, &j.g, GR_PLAN_TRAIN, err);
        if (!st) st = gr_memfit_compile(&ep, &stub, &j.g, GR_PLAN_EVAL, err);
    }
    if (!st) {
        gr_model_bytes(&j.g, gr_optim_slots(&s->train.optimizer), &out->params, &out->grads, &out->optim);
        out->act_train = tp.mem.act_bytes;
        out->act_eval = ep.mem.act_bytes;
        out->stage = tp.stage_bytes > ep.stage_bytes ? tp.stage_bytes : ep.stage_bytes;
        out->total = out->params + out->grads + out->optim + out->act_train + out->act_eval + out->stage;
    }
    gr_plan_free(&tp);
    gr_plan_free(&ep);
    j.be = NULL;
    gr_job_free(&j);
    return st;
}

gr_status gr_memfit_largest(const gr_job_spec *s, const int64_t *in_shape, int in_ndim, int64_t per, size_t limit,
                            gr_backend *be, gr_mem_need *best, gr_error *err) {
    int64_t *div = gr_xmalloc((size_t)(per < 4096 ? per : 4096) * sizeof *div);
    int nd = 0;
    for (int64_t d = 1; d <= per && nd < 4096; d++)
        if (per % d == 0) div[nd++] = d;
    gr_mem_need need;
    memset(best, 0, sizeof *best);
    int lo = 0, hi = nd - 1, found = -1; /* the largest fitting index: the need grows with the micro-batch */
    gr_status st = GR_OK;
    while (lo <= hi && !st) {
        int mid = (lo + hi) / 2;
        if ((st = gr_memfit_need(s, in_shape, in_ndim, div[mid], be, &need, err))) break;
        if (need.total <= limit) {
            found = mid;
            *best = need;
            lo = mid + 1;
        } else {
            if (mid == 0) *best = need, best->micro_batch = 0; /* not even 1 */
            hi = mid - 1;
        }
    }
    (void)found;
    free(div);
    return st;
}
