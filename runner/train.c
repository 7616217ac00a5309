/* train.c — the training loop behind `gpurun run` (see train.h).
 *
 * One optimizer step = accum = batch_size / (micro_batch x world) micro-batches
 * on each of the world's processes (parallel.h; world 1 without a launcher),
 * each a forward + backward pass of the train plan that adds into the grads
 * arena (zero at the step's start: cleared by the CPU's last update as it
 * read each block, else by a pass here); the loss gradient is scaled by 1/batch_size
 * so the sum over micro-batches (and processes) is the gradient of the whole
 * batch's mean loss.
 * An epoch is floor(N / batch_size) steps; the micro-batches left over at
 * the end of an epoch are skipped (drop_last), like PyTorch's loop in
 * bench/torch_ref.py.
 *
 * gr_train_run reads as the loop; what each call does lives in its own
 * file: job.c (compile, backend, model, loaders, run directory), step.c
 * (the passes), scaler.c (loss scaling), metrics.c (every line and file the
 * run reports), resume.c (checkpoints and --resume). */
#include "train.h"

#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ckptdir.h"
#include "finite.h"
#include "hostmem.h"
#include "job.h"
#include "memfit.h"
#include "parallel.h"
#include "pipe.h"
#include "tp.h"
#include "profile.h"
#include "resume.h"
#include "schedule.h"
#include "signals.h"

/* The loop's position and outcome. */
typedef struct gr_loop {
    int64_t spe, total, accum; /* steps per epoch, the job's steps, micro-batches per step */
    int64_t start, step;       /* the first step of this process; the step being run (at the end: the steps done) */
    double lr;                 /* the step's learning rate */
    const char *status;        /* summary.json's: finished, stopped, diverged, checkpoint_failed, profiled */
    int64_t prof_end;          /* --profile: the run stops after this step (its warm-up and profiled steps); 0 */
    int stop_signal;           /* the signal that stopped the run (0: none) */
    bool grads_clear;          /* the last update left the grads arena zero: the next step adds into it as it is */
    double last_ckpt;          /* when the last periodic checkpoint started (gr_now) */
    /* the non-trainable state (batchnorm running stats) as it was when the
     * step began: a signal in the middle of a step puts it back, since the
     * step is redone after the resume */
    float *state0;
    size_t state_bytes;
} gr_loop;

/* The run's length, from the train loader's epoch. */
static void gr_loop_init(gr_loop *L, const gr_job *j) {
    const gr_job_spec *s = j->spec;
    const int64_t world = j->dp.comm.world; /* the loader's epoch is this rank's shard */
    L->spe = gr_loader_samples_per_epoch(j->train_ld) / (s->train.batch_size / world);
    GR_ASSERT(L->spe >= 1); /* gr_job_compile refused splits smaller than a batch */
    L->total = s->train.epochs > 0 ? s->train.epochs * L->spe : s->train.steps;
    if (s->train.steps > 0 && s->train.steps < L->total) L->total = s->train.steps;
    L->accum = s->train.batch_size / (s->train.micro_batch * world);
    L->status = "finished";
    L->state_bytes = (size_t)(j->g.n_params - j->g.n_trainable) * sizeof(float);
    L->state0 = L->state_bytes ? gr_xmalloc(L->state_bytes) : NULL;
}

/* The console's start line and the clock. */
/* The attempt's figures and summary.json marked running (gr_metrics_running). */
static gr_status gr_loop_begin(gr_job *j, gr_loop *L, gr_error *err) {
    const gr_job_spec *s = j->spec;
    char detail[256], staged[256];
    gr_metrics_run r = {.name = s->name, .device = gr_backend_name(j->be),
                        .device_detail = gr_backend_describe(j->be, detail, sizeof detail),
                        .staged_ops = gr_plan_staged_ops(&j->train_plan, false, staged, sizeof staged),
                        .precision = gr_precision_name(s->precision), .run_dir = j->run_dir,
                        .params = j->g.n_weights, .flops = gr_graph_flops(&j->g, true), .batch = s->train.batch_size, .micro_batch = s->train.micro_batch,
                        .world = j->world.world, .stages = (int)s->parallel.pipeline,
                        .tensor = (int)s->parallel.tensor,
                        .threads = strcmp(gr_backend_name(j->be), "cpu") == 0 ? j->be->threads : 0,
                        .spe = L->spe, .total = L->total, .start = L->start, .log_every = s->log.every_steps};
    gr_metrics_begin(&j->mx, &r);
    gr_health_open(&j->mx.health, j->be, j->mx.quiet);
    gr_mem_need need; /* the planner's figures, next to what was held (summary.json) */
    gr_memfit_of(&j->g, j->m.optim_slots, &j->train_plan, &j->eval_plan, &need);
    j->mx.planned_bytes = need.total;
    gr_host_need host;
    gr_hostmem_of(j, &need, j->pre_found, &host);
    j->mx.planned_host_bytes = host.total;
    L->last_ckpt = j->mx.t0;
    /* every rank stops there, not only the one that profiles */
    if (j->prof_steps) L->prof_end = GR_MIN(L->total, L->start + GR_PROF_WARMUP + j->prof_steps);
    return gr_metrics_running(&j->mx, L->start, err);
}

/* A loader that keeps the step waiting this much of a log window is said. */
#define GR_DATA_WAIT_WARN_PCT 10.0

/* Once a run, at a train line after the first (whose window holds the
 * loader's start): the step waited for batches GR_DATA_WAIT_WARN_PCT of the
 * window or more, so the data path does not keep up with the device. */
static void gr_loop_data_warning(gr_job *j, bool quiet) {
    const gr_metrics *mx = &j->mx;
    if (quiet || j->data_warned || mx->off || mx->windows < 2 || !(mx->window_wait_pct >= GR_DATA_WAIT_WARN_PCT))
        return;
    j->data_warned = true;
    const long cores = sysconf(_SC_NPROCESSORS_ONLN);
    const long long workers = gr_job_data_workers(j, NULL);
    const bool gpu = strncmp(mx->run.device, "cuda", 4) == 0, jpeg = gr_loader_encoded(j->train_ld);
    const char *advice = workers < cores ? "raise data.workers"
                         : gpu ? "more cores would feed it"
                               : "the loader's workers and the step already share every core: the data costs "
                                 "about as much as the step";
    fprintf(stderr, "gpurun: warning: the training step waited for its batches %.0f%% of the time since the last "
            "line: the data path (data.workers %lld, %ld cores here) does not keep up with %s; %s%s (summary.json's "
            "data_wait_pct says it for the whole run)\n", mx->window_wait_pct, workers, cores, mx->run.device,
            advice, gpu && jpeg ? ", or decode the JPEGs on the GPU (data.decode: gpu)" : "");
}

/* The train line of step `done`, then the data path's warning when due. */
static gr_status gr_loop_line(gr_job *j, const gr_loop *L, int64_t done, bool quiet, gr_error *err) {
    gr_status st = gr_metrics_step(&j->mx, done, L->lr, j->sc.scale, gr_loader_wait_s(j->train_ld), err);
    if (st == GR_OK) gr_loop_data_warning(j, quiet);
    return st;
}

/* Forward + backward of the step's micro-batches into the zeroed grads
 * arena, summed over the processes; *loss: the batch's mean loss. A signal
 * between micro-batches (on any process) abandons the step (L->stop_signal;
 * the non-trainable state is put back). */
static gr_status gr_loop_accumulate(gr_job *j, gr_loop *L, double *loss, gr_error *err) {
    const int64_t nt = j->g.n_trainable, step = L->step, epoch = step / L->spe;
    gr_status st;
    if (j->pp) return gr_pipe_accumulate(j, step, L->spe, L->accum, loss, err); /* a whole step, then a stop */
    gr_plan *plan = gr_tp_train_plan(j); /* a tensor group's part (tp.h), else the model's */
    gr_model *m = gr_tp_model_of(j);
    const int64_t ntp = m->g->n_trainable;
    j->dp.step = step;
    if (j->tp) j->tp->step = step;
    gr_hooks_step_begin(j->hooks, step);
    if (L->state0) gr_backend_download(j->be, L->state0, j->m.params + nt, L->state_bytes);
    if (step > 0 && step % L->spe == 0 && (st = gr_loader_seek(j->train_ld, epoch, 0, err))) return st;
    if (!L->grads_clear) gr_backend_zero(j->be, m->grads, (size_t)ntp * sizeof(float));
    L->grads_clear = false;
    gr_pass_stats ps;
    memset(&ps, 0, sizeof ps);
    for (int64_t k = 0; k < L->accum; k++) {
        gr_batch *b;
        gr_exec_ctx ctx;
        if ((st = gr_train_next_batch(j, plan, step, L->accum, k, &b, &ctx, err))) return st;
        GR_ASSERT(b->epoch == epoch);
        gr_dp_arm(&j->dp, k == L->accum - 1);
        gr_train_micro_step_hooked(plan, b, &ctx, &ps, false, j->hooks);
        gr_loader_release(j->train_ld, b);
        if ((st = gr_tp_pass_status(j, err))) return st;
        if ((st = gr_parallel_stop(j, &L->stop_signal, err))) return st;
        if (L->stop_signal) break; /* the step is redone after the resume */
    }
    if (L->stop_signal && L->state0) gr_backend_upload(j->be, j->m.params + nt, L->state0, L->state_bytes);
    /* on every rank, also when stopped */
    if ((st = gr_dp_reduce_step(&j->dp, m->grads, ntp, &ps.loss_sum, &ps.loss_count, err))) return st;
    *loss = ps.loss_sum / ps.loss_count; /* [n, C]: the count is train.batch_size */
    return GR_OK;
}

/* The whole model on every process before anything reads it: a pipeline's
 * stages' parts (pipe.h), a tensor group's (tp.h); nothing otherwise. */
static gr_status gr_loop_share(gr_job *j, gr_error *err) {
    gr_status st = gr_pipe_share(j, err);
    return st ? st : gr_tp_gather(j, err);
}

/* The optimizer update at the schedule's lr. Every step looks at the
 * gradients' norm (one reduction, finite.h): inf/NaN is a skipped step under
 * dynamic loss scaling (GradScaler skips optimizer.step()), else divergence
 * naming the first layer, as is a loss that is not finite. */
static gr_status gr_loop_update(gr_job *j, gr_loop *L, double loss, gr_error *err) {
    const gr_job_spec *s = j->spec;
    const int64_t step = L->step, epoch = step / L->spe;
    if (!isfinite(loss)) {
        L->status = "diverged";
        return gr_error_set(err, GR_ERR_DIVERGED, "training diverged at step %lld (epoch %lld): the loss is %g; "
                            "lower train.optimizer.lr or set train.grad_clip", (long long)step + 1,
                            (long long)epoch + 1, loss);
    }
    L->lr = gr_schedule_lr(&s->train.schedule, s->train.optimizer.lr, step, L->total, L->spe);
    gr_saver_wait_copied(j->saver); /* a checkpoint's snapshot may still be reading the weights */
    const double scale = j->sc.scale;
    gr_hooks_begin(j->hooks, GR_SPAN_OPTIM, 0.0);
    bool finite = true;
    gr_status st = GR_OK;
    if (j->pp) st = gr_pipe_apply(j, L->lr, step - j->sc.skipped, scale, &finite, err);
    else if (j->tp) st = gr_tp_apply(j, L->lr, step - j->sc.skipped, scale, &finite, err);
    else finite = gr_train_apply_scaled(&j->m, s, &j->og, L->lr, step - j->sc.skipped, scale,
                                        j->sc.dynamic ? GR_CHECK_SKIP : GR_CHECK_STOP, &L->grads_clear);
    gr_hooks_end(j->hooks, GR_SPAN_OPTIM);
    if (st) return st;
    if (!gr_scaler_update(&j->sc, finite)) {
        L->status = "diverged";
        return gr_train_grads_diverged(gr_tp_model_of(j), step + 1, epoch + 1, loss, scale, j->sc.check,
                                       j->sc.dynamic, err); /* a tensor group's part: its gradients */
    }
    gr_metrics_loss(&j->mx, loss);
    return GR_OK;
}

/* Is the val split evaluated after step (1-based)? */
static bool gr_loop_eval_due(const gr_job *j, const gr_loop *L, int64_t step) {
    const gr_job_spec *s = j->spec;
    if (!j->val_ld) return false;
    if (step == L->total) return true;
    if (s->eval.every_steps > 0) return step % s->eval.every_steps == 0;
    return s->eval.every_epochs > 0 && step % L->spe == 0 && (step / L->spe) % s->eval.every_epochs == 0;
}

/* Evaluates the val split after step and reports it; *seconds: how long it
 * took; *interrupted: a signal stopped it (nothing reported; the last
 * figures NaN, the evaluation still due). */
static gr_status gr_loop_evaluate(gr_job *j, int64_t step, double *seconds, bool *interrupted, gr_error *err) {
    gr_eval e;
    double t = gr_now();
    gr_status st = gr_loop_share(j, err); /* every stage or part evaluates the whole model */
    if (st) return st;
    const gr_comm data = j->dp.comm;
    if (j->pp || j->tp) j->dp.comm = j->world; /* the evaluation's batches shared by the whole world */
    st = gr_job_evaluate(j, &e, err);
    j->dp.comm = data;
    if (st) return st;
    *seconds = gr_now() - t;
    *interrupted = e.interrupted;
    if (*interrupted) {
        j->mx.rec.last_acc = j->mx.rec.last_vloss = NAN;
        return GR_OK;
    }
    return gr_metrics_eval(&j->mx, step, &e, err);
}

/* The parameters at a metrics line: each process checks what it updates (a
 * tensor group's part, a stage's copy of the model); stages and parts differ,
 * so the verdict is agreed over the world and every rank stops together (a
 * replica holds what the others hold). */
static gr_status gr_loop_check_params(gr_job *j, int64_t step, int64_t spe, gr_error *err) {
    gr_status st = gr_train_check_params(gr_tp_model_of(j), step, spe, "at the metrics line", err);
    if (!j->pp && !j->tp) return st;
    int v = st ? j->world.world - j->world.rank : 0; /* the lowest rank that found inf/NaN */
    gr_error e2;
    gr_status ast = gr_pipe_agree(j, &v, "agreeing on the parameters' check", st ? &e2 : err);
    if (st || ast) return st ? st : ast;
    if (!v) return GR_OK;
    return gr_error_set(err, GR_ERR_DIVERGED, "training diverged at step %lld: rank %d's %s holds inf/NaN at the "
                        "metrics line (its line names the layer); lower train.optimizer.lr", (long long)step,
                        j->world.world - v, j->tp ? "part of the model" : "pipeline stage");
}

/* A periodic checkpoint when one is due (checkpoint.every_steps or
 * every_minutes), never of inf/NaN weights (the run has diverged then). */
static gr_status gr_loop_checkpoint(gr_job *j, gr_loop *L, int64_t step, gr_error *err) {
    const gr_job_spec *s = j->spec;
    gr_job_checkpoint_poll(j);
    const double now = gr_now();
    bool due = (s->checkpoint.every_steps > 0 && step % s->checkpoint.every_steps == 0) ||
               (s->checkpoint.every_minutes > 0 && now - L->last_ckpt >= 60.0 * s->checkpoint.every_minutes);
    if (j->pp || j->tp) { /* every rank shares the model then: 2 = a signal somewhere (its last follows) */
        int v = gr_signals_pending() ? 2 : due ? 1 : 0;
        gr_status ast = gr_pipe_agree(j, &v, "agreeing on a checkpoint", err);
        if (ast) return ast;
        due = v == 1;
        if (due && step < L->total && (ast = gr_loop_share(j, err))) return ast;
    }
    if (!due || step >= L->total || gr_signals_pending()) return GR_OK;
    gr_status st = gr_train_check_params(&j->m, step, L->spe, "before a checkpoint", err);
    if (st) {
        L->status = "diverged";
        return st;
    }
    gr_job_checkpoint_start(j, step, L->spe);
    L->last_ckpt = now;
    return GR_OK;
}

static const char *gr_signal_name(int sig) {
    return sig == SIGTERM ? "SIGTERM" : sig == SIGINT ? "SIGINT" : sig == SIGUSR1 ? "SIGUSR1" : "a signal";
}

/* The last checkpoint: at the end, or where a signal stopped the run; never
 * of inf/NaN weights. st: the loop's outcome; returns the run's. */
static gr_status gr_loop_last_checkpoint(gr_job *j, gr_loop *L, gr_status st, gr_error *err) {
    if (!st && (st = gr_loop_share(j, err))) return st; /* every rank is here when the loop ended well */
    if (strcmp(L->status, "diverged") != 0 &&
        (st = gr_train_check_params(&j->m, L->step, L->spe, "before the last checkpoint and weights.h5", err)))
        L->status = "diverged";
    if (strcmp(L->status, "diverged") == 0) return st;
    gr_error ce;
    bool periodic = false;
    gr_status cst = gr_job_checkpoint_sync(j, L->step, L->spe, &periodic, &ce);
    if (cst) {
        L->status = L->stop_signal ? "stopped" : "checkpoint_failed"; /* not finished: --resume auto completes it */
        *err = ce;
        return cst;
    }
    if (!L->stop_signal) {
        if (L->step < L->total) { /* --profile: its steps done, the rest not trained */
            L->status = "profiled";
            if (!j->mx.quiet)
                fprintf(stderr, "gpurun: --profile: stopped after step %lld (%d warm-up and %lld profiled steps) of "
                        "%lld, with a checkpoint; rerun with --resume auto (without --profile) to train on\n",
                    (long long)L->step, GR_PROF_WARMUP, (long long)(L->step - L->start - GR_PROF_WARMUP),
                    (long long)L->total);
        }
        return st;
    }
    L->status = "stopped";
    char name[64];
    gr_ckpt_filename(L->step, name, sizeof name);
    return gr_error_set(err, GR_ERR_SIGNAL, "stopped by %s at step %lld; checkpoint %s/%s committed; rerun with "
                        "--resume auto to continue%s", gr_signal_name(L->stop_signal), (long long)L->step,
                        j->ckpt_dir, name, periodic ? " (the step's periodic save, waited for, not written twice)" : "");
}

/* A run that fails (exit st) once its loop has begun says so in
 * summary.json: status failed, its exit code and message (a summary already
 * written with that code stands). */
static void gr_train_failed_summary(gr_job *j, int64_t steps, gr_status st, const gr_error *err) {
    if (!st || !j->wrote_run_dir || !j->mx.run.name || (j->mx.summarized && j->mx.exit_code == (int)st)) return;
    j->mx.exit_code = (int)st;
    j->mx.error = err->msg;
    gr_error e2;
    (void)gr_metrics_summary(&j->mx, "failed", steps, j->sc.scale, j->sc.skipped,
                             j->train_ld ? gr_loader_wait_s(j->train_ld) : 0.0, &e2);
}

/* The collective watchdog's last act before it exits 7 (parallel.h), on its
 * thread while this one is stuck in a collective: once the run directory is
 * written, summary.json says failed, exit 7 and the watchdog's line (as
 * gr_train_failed_summary would); before, the directories this run made
 * (they hold only their locks) are removed, as after any failure in set-up. */
static void gr_train_on_watchdog(void *ctx, const char *msg) {
    gr_job *j = ctx;
    if (!j->wrote_run_dir) {
        gr_ckptdir_release(j, true);
        gr_rundir_lock_release(&j->lock, true);
    } else if (j->mx.run.name)
        gr_metrics_summary_last(&j->mx, "failed", GR_ERR_DEVICE, msg, j->dp.step, j->sc.scale, j->sc.skipped,
                                j->train_ld ? gr_loader_wait_s(j->train_ld) : 0.0);
}

/* The job of this process: its spec, the launched world (and its pipeline stage: pipe.h), whether
 * it writes. */
static void gr_train_job(gr_job *j, const gr_job_spec *s, const gr_run_options *opt, const gr_comm *comm) {
    gr_job_init(j, s, opt->quiet);
    j->prof_steps = opt->profile_steps;
    j->dp.comm = j->world = *comm;
    j->mx.off = !gr_job_writer(j);
    gr_pipe_prepare(j);
}

gr_status gr_train_run(const gr_job_spec *spec, const gr_run_options *opt0, gr_error *err) {
    gr_signals_install(); /* main's first act too (a stop before gr_signals_arm: exit 75 at once) */
    gr_signals_set_deadline(spec->checkpoint.signal_deadline_s);
    gr_job_spec rs; /* the spec as this process runs it (its share of the batch) */
    gr_comm comm;
    gr_status st = gr_parallel_resolve(spec, &rs, &comm, err);
    if (st) return gr_dp_finish(&comm, st, err);
    const gr_job_spec *s = &rs;
    gr_run_options o = *opt0, *opt = &o;
    o.quiet = opt0->quiet || comm.rank != 0; /* rank 0 speaks for the run */
    gr_job j;
    gr_train_job(&j, s, opt, &comm);
    gr_loop L;
    memset(&L, 0, sizeof L);
    gr_parallel_on_exit(gr_train_on_watchdog, &j);
    gr_job_paths(&j, opt);
    if (gr_resume_finished_before(&j, opt)) goto done;
    if ((st = gr_ckptdir_lock(&j, err))) goto done; /* one writer per run (and checkpoint) directory */
    if ((st = gr_job_compile(&j, s, true, err))) goto done;
    if ((st = gr_parallel_same_job(&j, &j.dp.comm.agreed, err)) || (st = gr_tp_prepare(&j, err))) goto done;
    j.sc = gr_scaler_init(s->loss_scale_dynamic, s->loss_scale);
    gr_job_peek_threads(&j, opt); /* the backend takes the thread count it was trained with */
    if ((st = gr_job_backend(&j, s, opt->device ? opt->device : s->device, opt->threads, opt->quiet, err))) goto done;
    if ((st = gr_memfit_micro_batch(&j, &rs, err))) goto done; /* the one place it is decided */
    if ((st = gr_memfit_job_model(&j, err)) || (st = gr_parallel_attach(&j, err))) goto done;
    gr_job_say_staged(&j, opt->quiet);
    if ((st = gr_job_open_loaders(&j, err))) goto done;
    gr_loop_init(&L, &j);
    /* a checkpoint that does not verify or fit changes nothing on disk */
    if ((st = gr_job_pick_checkpoint(&j, opt, L.spe, L.total, err)) || (st = gr_job_saver(&j, err))) goto done;
    gr_signals_arm(); /* the run directory is written from here: a signal now ends in a checkpoint */
    if ((st = gr_job_open_run_dir(&j, opt, err))) goto done;
    if ((st = gr_job_resume(&j, opt, L.spe, &L.start, err))) goto done;
    gr_tp_scatter(&j); /* a tensor group's parts of the model it resumed */
    j.dp.step = L.start; /* the watchdog's messages and summary before the first step */
    if ((st = gr_loop_begin(&j, &L, err))) goto done;
    if (opt->profile_steps && (gr_job_writer(&j) || j.pp || j.tp)) /* each stage's or part's own */
        j.prof = gr_prof_open(&j, opt->profile_steps, L.start, L.total, opt->quiet);

    double eval_s;
    bool interrupted;
    if (j.eval_pending && j.val_ld) { /* the evaluation a signal interrupted before the checkpoint */
        if ((st = gr_loop_evaluate(&j, L.start, &eval_s, &interrupted, err))) goto done;
        gr_metrics_eval_time(&j.mx, eval_s);
        j.eval_pending = interrupted; /* interrupted again: still pending */
    }
    /* a signal during set-up or the resumed evaluation; later ones are agreed after each step */
    if ((st = gr_parallel_stop(&j, &L.stop_signal, err))) goto done;
    for (L.step = L.start; L.step < L.total && !L.stop_signal; L.step++) {
        double loss;
        if ((st = gr_loop_accumulate(&j, &L, &loss, err))) goto done;
        if (L.stop_signal) break;
        if ((st = gr_loop_update(&j, &L, loss, err))) break; /* diverged */
        gr_hooks_step_end(j.hooks);
        const int64_t done_steps = L.step + 1;
        if (gr_metrics_due(&j.mx, done_steps)) {
            if ((st = gr_loop_check_params(&j, done_steps, L.spe, err))) {
                L.status = "diverged";
                break;
            }
            if ((st = gr_loop_line(&j, &L, done_steps, opt->quiet, err))) goto done;
        }
        if (gr_loop_eval_due(&j, &L, done_steps)) {
            if ((st = gr_loop_evaluate(&j, done_steps, &eval_s, &interrupted, err))) goto done;
            if (interrupted) { /* the resumed run does it first */
                L.stop_signal = gr_signals_pending();
                j.eval_pending = true;
                L.step++;
                break;
            }
            gr_metrics_eval_time(&j.mx, eval_s); /* training throughput excludes eval time */
            if ((st = gr_metrics_flush(&j.mx, err))) goto done;
        }
        if ((st = gr_loop_checkpoint(&j, &L, done_steps, err))) break; /* diverged */
        if ((st = gr_parallel_stop(&j, &L.stop_signal, err))) goto done;
        if (L.stop_signal || done_steps == L.prof_end) {
            L.step++;
            break;
        }
    }
    st = gr_loop_last_checkpoint(&j, &L, st, err);
    gr_signals_restore();
    gr_error e2;
    /* what the device learnt while running (the CPU: convolutions that had to run blocked) */
    char detail[sizeof j.mx.device_detail];
    if (strcmp(gr_backend_describe(j.be, detail, sizeof detail), j.mx.device_detail) != 0) {
        if (!opt->quiet) fprintf(stderr, "gpurun: device: %s\n", detail);
        memcpy(j.mx.device_detail, detail, sizeof detail);
    }
    j.mx.device_peak_bytes = gr_backend_mem_peak(j.be);
    gr_pipe_report(&j, st == GR_OK || st == GR_ERR_SIGNAL);
    j.mx.exit_code = (int)st;
    j.mx.error = st ? err->msg : NULL;
    gr_status st2 = gr_metrics_summary(&j.mx, L.status, L.step, j.sc.scale, j.sc.skipped,
                                       gr_loader_wait_s(j.train_ld), &e2);
    if (!st && st2) {
        st = st2;
        *err = e2;
    }
    if (!st && strcmp(L.status, "finished") == 0) st = gr_job_save_weights(&j, err);
    if ((st2 = gr_prof_finish(j.prof, j.run_dir, opt->quiet, &e2)) && !st) { /* a stopped run's profile too */
        st = st2;
        *err = e2;
    }
    if (!st) gr_metrics_done(&j.mx, L.step);
done:
    gr_parallel_on_exit(NULL, NULL); /* a watchdog exiting now has done what it does with j */
    gr_train_failed_summary(&j, L.step, st, err);
    gr_signals_restore();
    free(L.state0);
    gr_rundir_lock lock = j.lock;
    const bool undo = !j.wrote_run_dir;
    comm = j.pp || j.tp ? j.world : j.dp.comm; /* the world as the run left it (NCCL joined) */
    gr_ckptdir_release(&j, undo);
    gr_job_free(&j);
    gr_rundir_lock_release(&lock, undo); /* after every file of the run is closed */
    return gr_dp_finish(&comm, st, err);
}
