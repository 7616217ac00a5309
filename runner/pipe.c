/* pipe.c — pipeline parallelism, the job's side (see pipe.h). */
#include "pipe.h"

#include "parallel.h"
#include "tp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../config/schema.h"
#include "../dist/watchdog.h"

void gr_pipe_prepare(gr_job *j) {
    const gr_job_spec *s = j->spec;
    if (s->parallel.pipeline <= 1) return;
    const int P = (int)s->parallel.pipeline, T = (int)s->parallel.tensor;
    gr_pipe_job *pj = gr_xcalloc(1, sizeof *pj);
    j->pp = pj;
    pj->p = P;
    pj->stage = (j->world.rank / T) % P;
    pj->replicas = j->world.world / (P * T);
}

gr_status gr_pipe_split(gr_job *j, gr_error *err) {
    gr_pipe_job *pj = j->pp;
    if (!pj) return GR_OK;
    const int P = pj->p, T = (int)j->spec->parallel.tensor, d = j->world.rank / (P * T), t = j->world.rank % T;
    gr_status st = gr_parallel_group(j, d * T + t, pj->stage, &pj->pipe, "pipeline stages", err);
    if (st) return st;
    GR_ASSERT(j->dp.comm.world == pj->replicas && pj->pipe.world == P && pj->pipe.rank == pj->stage);
    pj->pp.comm = pj->pipe;
    pj->split = true;
    return GR_OK;
}

/* The stage's optimizer groups: its own range (og_norm), and with the tied weights it reads but
 * does not own (og). */
static void gr_pipe_groups(gr_job *j, gr_pipe_job *pj) {
    const gr_stage_range *r = &pj->pp.ranges[pj->stage];
    const gr_opt_range whole = {0, pj->g->n_trainable, 1.0, j->spec->train.optimizer.weight_decay, false};
    /* a tensor group's part: its own groups (a row bias frozen on t > 0, its part of the norm) */
    const gr_opt_groups *base = j->tp ? &j->tp->og : &j->og, *base_norm = j->tp ? &j->tp->og_norm : &j->og;
    int64_t (*keep)[2] = gr_xcalloc((size_t)pj->n_tied + 1, sizeof *keep);
    int nk = 0;
    keep[nk][0] = r->param_off, keep[nk++][1] = r->param_n;
    gr_opt_groups_keep(base_norm, &whole, (const int64_t(*)[2])keep, nk, &pj->og_norm);
    for (int i = 0; i < pj->n_tied; i++) {
        const gr_tensor *t = &pj->g->tensors[pj->tied[i]];
        if (t->param_offset >= r->param_off && t->param_offset < r->param_off + r->param_n) continue; /* its own */
        keep[nk][0] = t->param_offset, keep[nk++][1] = gr_tensor_numel(t);
    }
    gr_opt_groups_keep(base, &whole, (const int64_t(*)[2])keep, nk, &pj->og);
    free(keep);
}

gr_status gr_pipe_model(gr_job *j, gr_error *err) {
    gr_pipe_job *pj = j->pp;
    const gr_job_spec *s = j->spec;
    const int64_t per = s->train.batch_size / pj->replicas, mb = j->g.micro_batch;
    GR_ASSERT(per % mb == 0);
    const int64_t m = per / mb;
    if (s->parallel.microbatches && s->parallel.microbatches != m) {
        j->world.agreed = j->dp.comm.agreed = true;
        return gr_spec_error(err, s, "parallel.microbatches", "%lld, but train.micro_batch %lld makes a replica's "
                             "share of train.batch_size (%lld) %lld micro-batches; give one of the two",
                             (long long)s->parallel.microbatches, (long long)mb, (long long)per, (long long)m);
    }
    if (m > GR_PIPE_MAX_MICRO)
        return gr_spec_error(err, s, "train.micro_batch", "%lld makes %lld pipeline micro-batches a step; at most %d",
                             (long long)mb, (long long)m, GR_PIPE_MAX_MICRO);
    pj->m = (int)m;
    pj->g = j->tp ? &j->tp->g : &j->g; /* a tensor group's part: the same layers (tp.c), cut as the whole */
    pj->mo = j->tp ? &j->tp->m : &j->m;
    gr_status st = gr_stages_cut(&j->g, s, &pj->sp, err);
    if (st) { /* the same spec and graph on every rank: each meets it, none aborts the others */
        j->world.agreed = j->dp.comm.agreed = true;
        return st;
    }
    if ((st = gr_pp_init(&pj->pp, pj->stage, &pj->sp, pj->mo, pj->g, (gr_pipe_kind)s->parallel.schedule, pj->m,
                         err)))
        return st;
    pj->pp_ready = true;
    for (int i = 0; j->tp && i < pj->pp.k; i++) gr_tp_hook_plan(j, &pj->pp.slot[i]);
    pj->pp.step = 0;
    pj->pp.hooks = &j->hooks;
    pj->pp.comm_s = &j->mx.comm_s;
    pj->n_tied = gr_stages_tied(pj->g, &pj->sp, NULL);
    pj->tied = gr_xcalloc((size_t)pj->n_tied + 1, sizeof *pj->tied);
    gr_stages_tied(pj->g, &pj->sp, pj->tied);
    gr_pipe_groups(j, pj);
    return GR_OK;
}

gr_status gr_pipe_whole_plan(gr_job *j, gr_plan *p, gr_error *err) {
    gr_pipe_job *pj = j->pp;
    if (!j->tp)
        return gr_plan_compile_part(p, &j->m, &j->g, GR_PLAN_TRAIN, false, pj->pp.io.run, pj->pp.io.pin, err);
    gr_stage_io io; /* the part's nodes need not be the whole graph's */
    gr_stage_io_init(&j->g, &pj->sp, pj->stage, &io);
    gr_status st = gr_plan_compile_part(p, &j->m, &j->g, GR_PLAN_TRAIN, false, io.run, io.pin, err);
    gr_stage_io_free(&io);
    return st;
}

/* The step's state the schedule's calls read. */
typedef struct gr_pipe_call {
    gr_job *j;
    int64_t step, epoch, accum;
    gr_pass_stats ps;
} gr_pipe_call;

/* Micro-batch mb of the step: the next batch of the replica's loader into
 * the stage's plan, and its context (the same keys as one process running
 * the step's micro-batches in order). */
static gr_status gr_pipe_load(void *user, int mb, gr_plan *plan, gr_exec_ctx *ctx, gr_error *err) {
    gr_pipe_call *c = user;
    gr_job *j = c->j;
    gr_batch *b;
    gr_status st = gr_train_next_batch(j, plan, c->step, c->accum, mb, &b, ctx, err);
    if (st) return st;
    GR_ASSERT(b->epoch == c->epoch);
    gr_hooks_micro(j->hooks, mb);
    gr_hooks_begin(j->hooks, GR_SPAN_H2D, 0.0);
    gr_train_load_batch(plan, b);
    gr_hooks_end(j->hooks, GR_SPAN_H2D);
    gr_loader_release(j->train_ld, b);
    return GR_OK;
}

/* After the stage's forward of mb: the last stage reads the loss's sums (a copy to the host, as one
 * process's pass ends; the others have none). */
static void gr_pipe_forwarded(void *user, int mb, gr_plan *plan) {
    (void)mb;
    gr_pipe_call *c = user;
    gr_job *j = c->j;
    gr_hooks_begin(j->hooks, GR_SPAN_D2H, 0.0);
    if (j->pp->stage == j->pp->p - 1) gr_train_read_pass(plan, &c->ps, false);
    gr_hooks_end(j->hooks, GR_SPAN_D2H);
}

/* The tied weights' gradient slots summed over the replicas of the stage (the owner's were, with
 * its range), then over the stages: every copy then holds the whole gradient. */
static gr_status gr_pipe_sum_tied(gr_job *j, gr_error *err) {
    gr_pipe_job *pj = j->pp;
    gr_status st = GR_OK;
    if (!pj->n_tied) return GR_OK;
    const double t0 = gr_wd_enter("the sums of the weights tied across pipeline stages", j->dp.step);
    const gr_stage_range *r = &pj->pp.ranges[pj->stage];
    for (int i = 0; i < pj->n_tied && !st; i++) {
        const gr_tensor *t = &pj->g->tensors[pj->tied[i]];
        float *slot = pj->mo->grads + t->param_offset;
        const bool own = t->param_offset >= r->param_off && t->param_offset < r->param_off + r->param_n;
        if (j->dp.comm.world > 1 && !own) /* the owner's range is summed over the replicas already */
            st = gr_comm_sum_f32(&j->dp.comm, slot, gr_tensor_numel(t), t->name, err);
        if (!st) st = gr_comm_sum_f32(&pj->pipe, slot, gr_tensor_numel(t), t->name, err);
    }
    gr_wd_leave();
    j->mx.comm_s += gr_now() - t0;
    return st;
}

gr_status gr_pipe_accumulate(gr_job *j, int64_t step, int64_t spe, int64_t accum, double *loss, gr_error *err) {
    gr_pipe_job *pj = j->pp;
    const gr_stage_range *r = &pj->pp.ranges[pj->stage];
    gr_pipe_call c = {.j = j, .step = step, .epoch = step / spe, .accum = accum};
    GR_ASSERT(accum == pj->m);
    gr_status st;
    j->dp.step = pj->pp.step = step;
    if (j->tp) j->tp->step = step;
    gr_hooks_step_begin(j->hooks, step);
    if (step > 0 && step % spe == 0 && (st = gr_loader_seek(j->train_ld, c.epoch, 0, err))) return st;
    gr_backend_zero(j->be, pj->mo->grads + r->param_off, (size_t)r->param_n * sizeof(float));
    for (int i = 0; i < pj->n_tied; i++) { /* every stage's copy, read there or not (a sum's zero) */
        const gr_tensor *t = &pj->g->tensors[pj->tied[i]];
        gr_backend_zero(j->be, pj->mo->grads + t->param_offset, (size_t)gr_tensor_numel(t) * sizeof(float));
    }
    const gr_pp_calls calls = {gr_pipe_load, gr_pipe_forwarded, &c};
    if ((st = gr_pp_step(&pj->pp, j->spec->train.micro_batch, &calls, err)) || (st = gr_tp_pass_status(j, err)))
        return st;
    pj->wait_s += pj->pp.wait_s;
    pj->step_s += pj->pp.step_s;
    /* the stage's gradients over the replicas, then the loss's sums over the stages */
    if ((st = gr_dp_reduce_step(&j->dp, pj->mo->grads + r->param_off, r->param_n, &c.ps.loss_sum,
                                &c.ps.loss_count, err)))
        return st;
    if ((st = gr_pipe_sum_tied(j, err))) return st;
    double v[2] = {c.ps.loss_sum, c.ps.loss_count};
    if ((st = gr_pp_sum(&pj->pp, v, 2, "the step's loss over the pipeline stages", err))) return st;
    *loss = v[0] / v[1];
    return GR_OK;
}

gr_status gr_pipe_apply(gr_job *j, double lr, int64_t step, double scale, bool *finite, gr_error *err) {
    gr_pipe_job *pj = j->pp;
    double sumsq = gr_train_grad_sumsq(pj->mo, &pj->og_norm); /* a tied weight's counted by its owner */
    gr_status st = gr_pp_sum(&pj->pp, &sumsq, 1, "the gradients' norm over the pipeline stages", err);
    if (st || (st = gr_tp_sum_norm(j, &sumsq, err))) return st; /* and over a tensor group's parts */
    *finite = gr_train_apply_sumsq(pj->mo, j->spec, &pj->og, lr, step, scale, GR_CHECK_SKIP, &sumsq, NULL);
    return GR_OK;
}

gr_status gr_pipe_share(gr_job *j, gr_error *err) {
    if (!j->pp || !j->pp->pp_ready) return GR_OK;
    return gr_pp_share_model(&j->pp->pp, err);
}

gr_status gr_pipe_agree(gr_job *j, int *v, const char *what, gr_error *err) {
    if (j->world.world == 1) return GR_OK;
    const double t0 = gr_wd_enter(what, j->dp.step);
    gr_status st = gr_comm_max_int(&j->world, v, what, err);
    gr_wd_leave();
    j->mx.comm_s += gr_now() - t0;
    return st;
}

gr_status gr_pipe_idle(gr_job *j, double *idle, gr_error *err) {
    gr_pipe_job *pj = j->pp;
    double v[2] = {pj->step_s > 0 ? pj->wait_s / pj->step_s : 0.0, pj->step_s > 0 ? 1.0 : 0.0};
    gr_status st = gr_pp_sum(&pj->pp, v, 2, "the pipeline stages' idle time", err);
    *idle = v[1] > 0 ? v[0] / v[1] : -1.0;
    return st;
}

void gr_pipe_report(gr_job *j, bool ended_well) {
    gr_pipe_job *pj = j->pp;
    if (!pj || !pj->pp_ready) return;
    const gr_job_spec *s = j->spec;
    double idle = -1.0;
    gr_error e;
    if (ended_well && gr_pipe_idle(j, &idle, &e)) idle = -1.0;
    j->mx.pipe.stages = pj->p;
    j->mx.pipe.microbatches = pj->m;
    j->mx.pipe.schedule = gr_pipe_kind_name((gr_pipe_kind)s->parallel.schedule);
    j->mx.pipe.idle = idle;
    j->mx.pipe.predicted = gr_pipe_bubble_fraction(pj->p, pj->m);
    j->mx.pipe.in_flight = pj->pp.k;
    j->mx.pipe.act_bytes = (size_t)pj->pp.k * gr_pp_slot_bytes(&pj->pp);
}

void gr_pipe_free(gr_job *j) {
    gr_pipe_job *pj = j->pp;
    if (!pj) return;
    gr_pp_free(&pj->pp);
    gr_stages_free(&pj->sp);
    gr_opt_groups_free(&pj->og);
    gr_opt_groups_free(&pj->og_norm);
    free(pj->tied);
    if (pj->split) gr_comm_free(&pj->pipe);
    free(pj);
    j->pp = NULL;
}
