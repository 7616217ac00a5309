/* run.c — the one step loop and its dispatch with hooks.
 *
 * Every op of every run passes through gr_exec_step: the plan's
 * before-hooks, gr_backend_exec (kernel with its half staging, the
 * backend's per-op check), its after-hooks. The backend only decides how
 * the loop's launches are used (gr_backend_run_begin/end): launched eagerly,
 * recorded into a CUDA Graph while launched, or skipped because it replayed
 * a recording. */
#include "exec.h"

#include <stdlib.h>

void gr_plan_add_hook(gr_plan *p, const gr_exec_hook *h) {
    p->hooks = gr_xrealloc(p->hooks, (size_t)(p->n_hooks + 1) * sizeof *p->hooks);
    p->hooks[p->n_hooks++] = *h;
}

static void gr_exec_step(gr_plan *p, int i, int64_t n, const gr_exec_ctx *ctx) {
    gr_kargs *a = &p->steps.step[i];
    a->n = n;
    a->ctx = ctx;
    for (int inner = 0; inner < 2; inner++)
        for (int k = 0; k < p->n_hooks; k++)
            if (p->hooks[k].inner == inner && p->hooks[k].before) p->hooks[k].before(p->hooks[k].user, i, a);
    gr_backend_exec(a);
    for (int inner = 1; inner >= 0; inner--)
        for (int k = 0; k < p->n_hooks; k++)
            if (p->hooks[k].inner == inner && p->hooks[k].after) p->hooks[k].after(p->hooks[k].user, i, a);
}

void gr_plan_run(gr_plan *p, int64_t n, const gr_exec_ctx *ctx) {
    GR_ASSERT(p->act && n >= 1 && n <= p->g->micro_batch);
    gr_backend *be = p->m->be;
    gr_run_mode mode = gr_backend_run_begin(be, &p->steps, n, ctx);
    if (mode == GR_RUN_REPLAYED) return;
    for (int i = 0; i < p->steps.n; i++) gr_exec_step(p, i, n, ctx);
    gr_backend_run_end(be, &p->steps, mode);
}

void gr_plan_run_steps(gr_plan *p, int64_t n, const gr_exec_ctx *ctx, int from, int to) {
    GR_ASSERT(p->act && n >= 1 && n <= p->g->micro_batch && from >= 0 && from <= to && to <= p->steps.n);
    gr_backend *be = p->m->be;
    gr_run_mode mode = gr_backend_run_begin(be, &p->steps, n, ctx); /* the run's context reaches the device */
    GR_ASSERT(mode == GR_RUN_EAGER); /* a pipeline's jobs turn CUDA Graphs off (runner/parallel.c) */
    for (int i = from; i < to; i++) gr_exec_step(p, i, n, ctx);
    gr_backend_run_end(be, &p->steps, mode);
}
