/* memfit.c — a job's memory at a micro-batch, and the largest that fits (see memfit.h). */
#include "memfit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/env.h"
#include "../config/schema.h"
#include "../graph/graph.h"

gr_status gr_memfit_compile(gr_plan *p, gr_model *stub, const gr_graph *g, gr_plan_mode mode, gr_error *err) {
    if (stub->be && gr_plan_compile(p, stub, g, mode, false, err) == GR_OK) return GR_OK;
    return gr_plan_compile(p, NULL, g, mode, false, err);
}

void gr_memfit_of(const gr_graph *g, int optim_slots, const gr_plan *tp, const gr_plan *ep, gr_mem_need *out) {
    memset(out, 0, sizeof *out);
    out->micro_batch = g->micro_batch;
    gr_model_bytes(g, optim_slots, &out->params, &out->grads, &out->optim);
    out->act_train = tp->mem.act_bytes;
    out->act_eval = ep->mem.act_bytes;
    out->stage = tp->stage_bytes + ep->stage_bytes; /* each plan holds its own */
    out->workspace = GR_MAX(tp->steps.workspace, ep->steps.workspace);
    out->workspace_known = tp->ws_known && ep->ws_known;
    out->total = out->params + out->grads + out->optim + out->act_train + out->act_eval + out->stage + out->workspace;
}

/* The need of job tj's graph (built, laid out for be) at micro-batch m: the
 * graph planned at m, not rebuilt. */
static gr_status gr_memfit_at(gr_job *tj, int64_t m, gr_backend *be, gr_mem_need *out, gr_error *err) {
    gr_plan tp, ep;
    memset(&tp, 0, sizeof tp);
    memset(&ep, 0, sizeof ep);
    gr_model stub = {.g = &tj->g, .be = be}; /* the plans point at it until freed */
    gr_status st = gr_graph_set_batch(&tj->g, m, err);
    if (!st) st = gr_memfit_compile(&tp, &stub, &tj->g, GR_PLAN_TRAIN, err);
    if (!st) st = gr_memfit_compile(&ep, &stub, &tj->g, GR_PLAN_EVAL, err);
    if (!st) gr_memfit_of(&tj->g, gr_optim_slots(&tj->spec->train.optimizer), &tp, &ep, out);
    gr_plan_free(&tp);
    gr_plan_free(&ep);
    return st;
}

/* A job of spec s with its graph built for be (layout too), to plan at
 * several micro-batches; gr_job_free it. */
static gr_status gr_memfit_job(gr_job *tj, const gr_job_spec *s, const gr_graph_io *io,
                               gr_backend *be, gr_error *err) {
    gr_job_init(tj, s, true);
    gr_status st = gr_job_graph(tj, io, err);
    if (!st && be) {
        tj->be = be; /* borrowed: taken back before gr_job_free */
        gr_job_layout(tj);
        tj->be = NULL;
    }
    return st;
}

gr_status gr_memfit_need(const gr_job_spec *s, const gr_graph_io *io, int64_t m, gr_backend *be,
                         gr_mem_need *out, gr_error *err) {
    gr_job tj;
    gr_status st = gr_memfit_job(&tj, s, io, be, err);
    if (!st) st = gr_memfit_at(&tj, m, be, out, err);
    gr_job_free(&tj);
    return st;
}

gr_status gr_memfit_largest(const gr_job_spec *s, const gr_graph_io *io, int64_t per, size_t limit,
                            gr_backend *be, gr_mem_need *best, gr_error *err) {
    memset(best, 0, sizeof *best);
    gr_job tj; /* one graph, planned at each candidate */
    gr_status st = gr_memfit_job(&tj, s, io, be, err);
    if (st) {
        gr_job_free(&tj);
        return st;
    }
    int64_t *div = gr_xmalloc((size_t)(per < 4096 ? per : 4096) * sizeof *div);
    int nd = 0;
    for (int64_t d = 1; d <= per && nd < 4096; d++)
        if (per % d == 0) div[nd++] = d;
    gr_mem_need need;
    int lo = 0, hi = nd - 1; /* the largest fitting index: the need grows with the micro-batch */
    while (lo <= hi && !st) {
        int mid = (lo + hi) / 2;
        if ((st = gr_memfit_at(&tj, div[mid], be, &need, err))) break;
        if (need.total <= limit) {
            *best = need;
            lo = mid + 1;
        } else {
            if (mid == 0) *best = need, best->micro_batch = 0; /* not even 1 */
            hi = mid - 1;
        }
    }
    free(div);
    gr_job_free(&tj);
    return st;
}

/* auto: the largest micro-batch of per that fits the device */
static gr_status gr_memfit_auto(gr_job *j, const gr_job_spec *rs, int64_t per, int64_t *mb, gr_error *err) {
    size_t limit = (size_t)gr_env_int(GR_ENV_MEMORY_LIMIT, 0), fr = 0, tot = 0;
    const bool from_env = limit > 0;
    if (!from_env) {
        if (!gr_backend_mem_info(j->be, &fr, &tot))
            return gr_spec_error(err, rs, "train.micro_batch", "auto: device %s does not say how much memory it has "
                                 "free; give a number", gr_backend_name(j->be));
        limit = fr / 10 * 9;
    }
    gr_mem_need best;
    gr_status st = gr_memfit_largest(rs, &j->io, per, limit, j->be, &best, err);
    if (st) return st;
    char a[64], b[64];
    gr_fmt_count((int64_t)best.total, a, sizeof a);
    gr_fmt_count((int64_t)limit, b, sizeof b);
    if (best.micro_batch == 0)
        return gr_error_set(err, GR_ERR_OOM, "%s: train.micro_batch auto: not even micro-batch 1 fits: it needs %s "
                            "bytes on %s, and %s are there to plan for (%s)", rs->file, a, gr_backend_name(j->be), b,
                            from_env ? "GPURUN_MEMORY_LIMIT" : "90% of the free memory");
    if (!j->mx.quiet)
        fprintf(stderr, "gpurun: train.micro_batch auto: %lld (%s bytes of the %s %s)\n", (long long)best.micro_batch,
                a, b, from_env ? "GPURUN_MEMORY_LIMIT allows" : "that are 90% of the device's free memory");
    *mb = best.micro_batch;
    return GR_OK;
}

gr_status gr_memfit_micro_batch(gr_job *j, gr_job_spec *rs, gr_error *err) {
    const int64_t batch = rs->train.batch_size, world = gr_job_replicas(j);
    int64_t mb = rs->train.micro_batch;
    /* unset: the process's share of the batch, in parallel.microbatches pipeline micro-batches when given */
    if (!gr_spec_node(rs->root, "train.micro_batch"))
        mb = batch / world / (rs->parallel.pipeline > 1 && rs->parallel.microbatches ? rs->parallel.microbatches : 1);
    GR_ASSERT(batch % ((mb ? mb : 1) * world) == 0); /* checked against the launch: gr_parallel_resolve */
    gr_status st = mb == 0 ? gr_memfit_auto(j, rs, batch / world, &mb, err) : GR_OK;
    if (st) return st;
    rs->train.micro_batch = mb;
    return gr_graph_set_batch(&j->g, mb, err); /* the graph planned at it, not rebuilt */
}

/* The budget the planner's figures are measured against: GPURUN_MEMORY_LIMIT, else 90% of free. */
static size_t gr_memfit_budget(gr_backend *be, bool *from_env) {
    size_t limit = (size_t)gr_env_int(GR_ENV_MEMORY_LIMIT, 0), fr = 0, tot = 0;
    *from_env = limit > 0;
    if (!*from_env && gr_backend_mem_info(be, &fr, &tot)) limit = fr / 10 * 9;
    return limit;
}

gr_status gr_memfit_job_model(gr_job *j, gr_error *err) {
    bool from_env;
    const size_t budget = gr_memfit_budget(j->be, &from_env); /* before anything of the job is allocated */
    gr_status st = gr_job_model(j, err);
    if (st != GR_ERR_OOM || !budget) return st;
    const gr_job_spec *s = j->spec;
    const int64_t per = s->train.batch_size / gr_job_replicas(j);
    char tail[600] = "", a[64], b[64];
    size_t len = 0;
    gr_fmt_count((int64_t)budget, b, sizeof b);
    gr_mem_need best;
    gr_error e2;
    if (!gr_memfit_largest(s, &j->io, per, budget, j->be, &best, &e2) && best.micro_batch > 0) {
        gr_fmt_count((int64_t)best.total, a, sizeof a);
        len += (size_t)snprintf(tail + len, sizeof tail - len, "train.micro_batch %lld fits (%s bytes)",
                                (long long)best.micro_batch, a);
    }
    if (s->model.blocks && !s->train.recompute_blocks) { /* recomputing the block uses */
        gr_job_spec r = *s;
        r.train.recompute_blocks = 1;
        if (!gr_memfit_largest(&r, &j->io, per, budget, j->be, &best, &e2) && best.micro_batch > 0) {
            gr_fmt_count((int64_t)best.total, a, sizeof a);
            len += (size_t)snprintf(tail + len, sizeof tail - len, "%strain.recompute: blocks fits micro-batch %lld "
                                    "(%s bytes)", len ? "; " : "", (long long)best.micro_batch, a);
        }
    }
    if (s->precision == GR_PREC_FP32 || s->precision == GR_PREC_TF32) {
        gr_job_spec h = *s;
        h.precision = GR_PREC_BF16;
        /* the backend as a bf16 run configures it (which half steps are native), then as it was */
        gr_backend_opts o = {.precision = GR_PREC_BF16, .cudnn_benchmark = s->cudnn_benchmark, .cuda_graph = s->cuda_graph};
        gr_backend_configure(j->be, &o);
        gr_status hs = gr_memfit_largest(&h, &j->io, per, budget, j->be, &best, &e2);
        o.precision = s->precision;
        gr_backend_configure(j->be, &o);
        if (!hs && best.micro_batch > 0) {
            gr_fmt_count((int64_t)best.total, a, sizeof a);
            len += (size_t)snprintf(tail + len, sizeof tail - len, "%sprecision bf16 fits micro-batch %lld (%s bytes)",
                                    len ? "; " : "", (long long)best.micro_batch, a);
        }
    }
    size_t m = strlen(err->msg);
    if (len && m < sizeof err->msg)
        snprintf(err->msg + m, sizeof err->msg - m, ". Remedies, planned for this job in %s bytes (%s): %s; or "
                 "train.micro_batch: auto", b, from_env ? "GPURUN_MEMORY_LIMIT" : "90% of what was free", tail);
    else if (m < sizeof err->msg)
        snprintf(err->msg + m, sizeof err->msg - m, ". Not even micro-batch 1 fits in %s bytes (%s): the model's "
                 "arenas alone (params, grads, optimizer state) are too large for this device", b,
                 from_env ? "GPURUN_MEMORY_LIMIT" : "90% of what was free");
    return st;
}
