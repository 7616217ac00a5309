/* step.c — the passes the loop and the tests share (see train.h): one
 * micro-batch's forward + backward, the optimizer update, and the
 * evaluation of a whole split (job.h). */
#include "job.h"

#include <math.h>
#include <string.h>

#include "parallel.h"
#include "signals.h"

void gr_train_load_batch(gr_plan *p, const gr_batch *b) {
    const gr_graph *g = p->g;
    if (b->nfields) { /* inputs and target by name (jobio.c): the inputs' fields in order, then the target's */
        GR_ASSERT(b->nfields == g->n_inputs + 1);
        for (int i = 0; i <= g->n_inputs; i++) {
            const int t = i < g->n_inputs ? g->inputs[i] : g->label;
            if (!gr_plan_holds(p, t)) continue; /* a pipeline stage that does not read it */
            gr_backend_upload_batch(p->m->be, gr_plan_ptr(p, t), b->fields[i].data, (size_t)b->n * b->fields[i].bytes);
        }
        return;
    }
    size_t per = (size_t)gr_tensor_sample_numel(&g->tensors[g->input]);
    /* asynchronous on a GPU: the stats read-back at the end of the pass is the fence; an encoded
     * payload was decoded into the input on the device (gr_job_decode_batch) */
    if (b->enc) GR_ASSERT(b->enc->decoded);
    else if (gr_plan_holds(p, g->input))
        gr_backend_upload_batch(p->m->be, gr_plan_ptr(p, g->input), b->x, (size_t)b->n * per * sizeof(float));
    if (gr_plan_holds(p, g->label))
        gr_backend_upload_batch(p->m->be, gr_plan_ptr(p, g->label), b->y, (size_t)b->n * sizeof(int32_t));
}

gr_status gr_train_next_batch(gr_job *j, gr_plan *p, int64_t step, int64_t accum, int64_t k, gr_batch **b,
                              gr_exec_ctx *ctx, gr_error *err) {
    const gr_job_spec *s = j->spec;
    const double t0 = gr_now();
    gr_status st = gr_loader_next(j->train_ld, b, err);
    if (st) return st;
    gr_hooks_host(j->hooks, GR_SPAN_DATA, "the next batch", t0, gr_now());
    if ((st = gr_job_decode_batch(j, p, j->train_ld, *b, err))) return st;
    gr_metrics_data_skipped(&j->mx, *b); /* after the decode: a device's refusals get their stand-ins there */
    GR_ASSERT((*b)->n == s->train.micro_batch);
    /* one key per micro-batch of the whole step (the same as before for one process) */
    const uint64_t mb = (uint64_t)((step * accum + k) * j->dp.comm.world + j->dp.comm.rank);
    *ctx = (gr_exec_ctx){.training = true, .rng_key = gr_hash64(s->seed, mb),
                         .grad_scale = gr_scaler_grad_scale(&j->sc, s->train.batch_size), .xsum = gr_dp_xsum(&j->dp)};
    return GR_OK;
}

void gr_train_read_pass(gr_plan *p, gr_pass_stats *s, bool metrics) {
    const gr_graph *g = p->g;
    float stats[2];
    gr_backend_download(p->m->be, stats, gr_plan_ptr(p, g->loss_stats), sizeof stats);
    s->loss_sum += stats[0];
    s->loss_count += stats[1];
    if (!metrics) return;
    s->n_metrics = g->n_metrics;
    for (int i = 0; i < g->n_metrics; i++) {
        gr_backend_download(p->m->be, stats, gr_plan_ptr(p, g->metrics[i].stats), sizeof stats);
        s->metric_sum[i] += stats[0];
        s->metric_count[i] += stats[1];
    }
}

void gr_train_read_stats(gr_plan *p, double *loss_sum, double *correct) {
    gr_pass_stats s;
    memset(&s, 0, sizeof s);
    gr_train_read_pass(p, &s, true);
    *loss_sum += s.loss_sum;
    *correct += s.n_metrics ? s.metric_sum[0] : 0.0;
}

void gr_train_micro_step(gr_plan *p, const gr_batch *b, const gr_exec_ctx *ctx, double *loss_sum,
                         double *correct) {
    gr_pass_stats s;
    memset(&s, 0, sizeof s);
    gr_train_micro_step_hooked(p, b, ctx, &s, true, NULL);
    *loss_sum += s.loss_sum;
    *correct += s.n_metrics ? s.metric_sum[0] : 0.0;
}

void gr_train_micro_step_hooked(gr_plan *p, const gr_batch *b, const gr_exec_ctx *ctx, gr_pass_stats *s,
                                bool metrics, const gr_loop_hooks *h) {
    const gr_graph *g = p->g;
    gr_hooks_begin(h, GR_SPAN_H2D, (double)b->n * (double)(gr_tensor_sample_numel(&g->tensors[g->input]) * 4 + 4));
    gr_train_load_batch(p, b);
    gr_hooks_end(h, GR_SPAN_H2D);
    gr_plan_run(p, b->n, ctx);
    gr_hooks_begin(h, GR_SPAN_D2H, 0.0);
    gr_train_read_pass(p, s, metrics);
    gr_hooks_end(h, GR_SPAN_D2H);
}

void gr_train_apply(gr_model *m, const gr_job_spec *s, double lr, int64_t step) {
    (void)gr_train_apply_scaled(m, s, NULL, lr, step, 1.0, GR_CHECK_NONE, NULL);
}

/* The squared norm of the gradients clipping measures: all of them, or
 * those of the ranges that are not frozen. */
static double gr_train_sumsq(gr_model *m, const gr_opt_groups *og) {
    if (!og || !og->any_frozen) return gr_backend_sumsq(m->be, m->grads, m->g->n_trainable);
    double sumsq = 0.0;
    for (int k = 0; k < og->n; k++)
        if (!og->r[k].frozen) sumsq += gr_backend_sumsq(m->be, m->grads + og->r[k].off, og->r[k].n);
    return sumsq;
}

bool gr_train_apply_scaled(gr_model *m, const gr_job_spec *s, const gr_opt_groups *og, double lr, int64_t step,
                           double loss_scale, gr_grad_check check, bool *cleared) {
    return gr_train_apply_sumsq(m, s, og, lr, step, loss_scale, check, NULL, cleared);
}

double gr_train_grad_sumsq(gr_model *m, const gr_opt_groups *og) { return gr_train_sumsq(m, og); }

bool gr_train_apply_sumsq(gr_model *m, const gr_job_spec *s, const gr_opt_groups *og, double lr, int64_t step,
                          double loss_scale, gr_grad_check check, const double *given, bool *cleared) {
    const gr_optim_spec *o = &s->train.optimizer;
    if (cleared) *cleared = false;
    const int64_t nt = m->g->n_trainable;
    const bool clip = s->train.grad_clip > 0.0;
    /* a check that ends the run need not come before the update: the update's pass takes the sum */
    const bool in_pass = check == GR_CHECK_STOP && !clip && !given;
    float mult = 1.0f;
    if (clip || (check != GR_CHECK_NONE && !in_pass)) {
        double sumsq = given ? *given : gr_train_sumsq(m, og);
        if (check != GR_CHECK_NONE && !isfinite(sumsq)) return false;
        if (clip) mult = gr_clip_factor(sqrt(sumsq) / loss_scale, s->train.grad_clip);
    }
    double total = 0.0, part = 0.0;
    const bool clear = cleared && (!og || !og->any_frozen); /* a frozen range's gradients would stay */
    bool all = clear, done = false;
    int64_t covered = 0;
    if (loss_scale != 1.0) mult = (float)((double)mult / loss_scale);
    const gr_opt_range whole = {0, nt, 1.0, o->weight_decay, false};
    const int nr = og ? og->n : 1;
    for (int k = 0; k < nr; k++) {
        const gr_opt_range *r = og ? &og->r[k] : &whole;
        if (r->frozen || r->n == 0) continue;
        const double rlr = r->lr_mult == 1.0 ? lr : lr * r->lr_mult;
        if (o->type == GR_OPTIM_SGD) {
            gr_sgd_hparams h = {(float)rlr, (float)o->momentum, (float)r->weight_decay, mult, o->nesterov};
            gr_backend_sgd(m->be, m->params + r->off, m->grads + r->off, m->optim + r->off, r->n, &h,
                           in_pass ? &part : NULL, clear ? &done : NULL);
        } else {
            gr_adamw_hparams h = {(float)rlr, (float)o->betas[0], (float)o->betas[1], (float)o->eps,
                                  (float)r->weight_decay, mult, step + 1};
            gr_backend_adamw(m->be, m->params + r->off, m->grads + r->off, m->optim + r->off,
                             m->optim + nt + r->off, r->n, &h, in_pass ? &part : NULL, clear ? &done : NULL);
        }
        total += part;
        all = all && done;
        covered += r->n;
    }
    if (cleared) *cleared = all && covered == nt;
    return !in_pass || isfinite(total);
}

gr_status gr_job_evaluate(gr_job *j, gr_eval *e, gr_error *err) {
    /* every evaluation takes one whole epoch of the val loader, which is
     * unshuffled and unaugmented, so each starts where the last ended and
     * finds its first batches already prefetched */
    gr_status st;
    gr_exec_ctx ctx = {.training = false, .rng_key = 0, .grad_scale = 0.0f};
    gr_pass_stats s;
    memset(&s, 0, sizeof s);
    memset(e, 0, sizeof *e);
    e->n_metrics = j->g.n_metrics;
    for (int i = 0; i < e->n_metrics; i++) e->name[i] = j->g.metrics[i].name;
    int64_t seen = 0, nb = gr_loader_batches_per_epoch(j->val_ld);
    if ((st = gr_parallel_share_state(j, err))) return st;
    for (int64_t i = 0; i < nb; i++) {
        gr_batch *b;
        /* a preemption does not wait for the evaluation (one process: several agree at step boundaries) */
        if (j->dp.comm.world == 1 && gr_signals_pending()) {
            e->interrupted = true;
            return GR_OK;
        }
        if ((st = gr_loader_next(j->val_ld, &b, err))) return st;
        GR_ASSERT(b->index == i);
        if (i % j->dp.comm.world == j->dp.comm.rank) { /* data parallelism: every world-th batch */
            if ((st = gr_job_decode_batch(j, &j->eval_plan, j->val_ld, b, err))) return st;
            gr_metrics_data_skipped(&j->mx, b); /* after the decode, as in training */
            gr_train_micro_step_hooked(&j->eval_plan, b, &ctx, &s, true, NULL);
            seen += b->n;
        }
        gr_loader_release(j->val_ld, b);
    }
    s.n_metrics = j->g.n_metrics;
    if ((st = gr_parallel_reduce_eval(j, &s, &seen, err))) return st;
    e->samples = seen;
    e->loss = s.loss_sum / (s.loss_count > 0 ? s.loss_count : 1.0);
    for (int i = 0; i < e->n_metrics; i++)
        e->metric[i] = s.metric_sum[i] / (s.metric_count[i] > 0 ? s.metric_count[i] : 1.0);
    return GR_OK;
}
