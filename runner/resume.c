/* resume.c — checkpoints of a run and resuming from one (see resume.h). */
#include "resume.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ckptdir.h"
#include "spec_diff.h"

bool gr_resume_finished_before(const gr_job *j, const gr_run_options *opt) {
    if (!opt->resume || strcmp(opt->resume, "auto") != 0) return false;
    /* did the run finish (summary.json written with status finished)? */
    char path[GR_PATH_MAX + 64], text[4096];
    snprintf(path, sizeof path, "%s/summary.json", j->run_dir);
    FILE *f = fopen(path, "r");
    if (!f) return false;
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    if (!strstr(text, "\"status\":\"finished\"")) return false;
    fprintf(stderr, "gpurun: %s: this run already finished (summary.json); nothing to do (to train it "
            "further, start a new run with --set model.init_from=%s/weights.h5)\n", j->run_dir, j->run_dir);
    return true;
}

/* Where step's first micro-batch comes from: epochs are whole steps. */
static void gr_job_position(const gr_job *j, int64_t step, int64_t spe, int64_t *epoch, int64_t *sample) {
    *epoch = step / spe;
    *sample = (step % spe) * j->spec->train.batch_size; /* global: every process's samples */
}

/* ---- picking and restoring ---- */

/* What a checkpoint must match besides its tensors' shapes: this job. */
typedef struct gr_fit_ctx {
    gr_job *j;
    int64_t spe; /* steps per epoch */
} gr_fit_ctx;

/* Every key that shapes the trajectory equal, the optimizer, and the
 * position its step has in this job's batches (gr_ckpt_fit_fn). */
static gr_status gr_job_fits(const char *path, const gr_ckpt_header *h, void *ctx, gr_error *err) {
    const gr_fit_ctx *c = ctx;
    gr_job *j = c->j;
    const gr_job_spec *s = j->spec;
    char diff[GR_ERROR_MSG_MAX / 2];
    int nd = h->spec ? gr_spec_diff(h->spec, gr_job_spec_text(j), diff, sizeof diff) : 0;
    free(j->spec_text); /* made again once train.micro_batch: auto is resolved (gr_memfit_micro_batch) */
    j->spec_text = NULL;
    if (nd != 0) return gr_error_set(err, GR_ERR_CKPT, "%s: written for another job: %s", path, diff);
    const int slots = gr_optim_slots(&s->train.optimizer);
    if (h->optim_slots != slots || strcmp(h->optimizer, gr_optim_name(s->train.optimizer.type)) != 0)
        return gr_error_set(err, GR_ERR_CKPT, "%s: optimizer %s with %d state slot(s), but the job uses %s with %d",
                            path, h->optimizer, h->optim_slots, gr_optim_name(s->train.optimizer.type), slots);
    int64_t epoch, sample;
    gr_job_position(j, h->step, c->spe, &epoch, &sample);
    if (h->epoch != epoch || h->sample_in_epoch != sample)
        return gr_error_set(err, GR_ERR_CKPT, "%s: step %lld was at epoch %lld sample %lld, but this job's batches "
                            "put it at epoch %lld sample %lld (train.batch_size or the data changed?)", path,
                            (long long)h->step, (long long)h->epoch, (long long)h->sample_in_epoch, (long long)epoch,
                            (long long)sample);
    return GR_OK;
}

/* --resume auto's peek passes over checkpoints written for another job, as
 * the pick will (gr_job_fits): their thread count is not the one resumed
 * from (e2e_resume under load: another spec's newest checkpoint, trained
 * with 1 thread, made the run resume step 80 of a 2-thread run at 1). */
static bool gr_job_peek_same_spec(const gr_ckpt_header *h, void *ctx) {
    gr_job *j = ctx;
    char diff[64];
    const bool same = !h->spec || gr_spec_diff(h->spec, gr_job_spec_text(j), diff, sizeof diff) == 0;
    free(j->spec_text); /* made again once train.micro_batch: auto is resolved, as in gr_job_fits */
    j->spec_text = NULL;
    return same;
}

void gr_job_peek_threads(gr_job *j, const gr_run_options *opt) {
    j->ckpt_threads = 0;
    if (!opt->resume) return;
    gr_ckpt_header h;
    const bool is_auto = strcmp(opt->resume, "auto") == 0;
    if (gr_ckpt_peek(is_auto ? j->ckpt_dir : NULL, opt->resume, is_auto ? gr_job_peek_same_spec : NULL, j, &h))
        j->ckpt_threads = (int)h.threads;
}

static gr_status gr_job_pick(gr_job *j, const gr_run_options *opt, int64_t spe, int64_t total, gr_error *err) {
    j->pre_found = false;
    if (!opt->resume) return GR_OK;
    /* zeroed: a checkpoint fills the tensors, not the padding between them (read by whole-arena sums) */
    j->pre_params = gr_xcalloc((size_t)(j->g.n_params + 1), sizeof(float));
    j->pre_optim = gr_xcalloc((size_t)(2 * j->g.n_trainable + 1), sizeof(float));
    gr_ckpt_state cs = {&j->g, j->pre_params, j->pre_optim};
    gr_ckpt_header *h = &j->pre_h;
    gr_fit_ctx fc = {.j = j, .spe = spe};
    gr_status st;
    const char *path = j->pre_path;
    if (strcmp(opt->resume, "auto") == 0) {
        /* a file that does not verify or fit is skipped for the next older one */
        if ((st = gr_ckpt_resume_auto(j->ckpt_dir, gr_job_fits, &fc, h, &cs, &j->pre_found, j->pre_path,
                                      sizeof j->pre_path, err)))
            return st;
        if (!j->pre_found) return GR_OK;
    } else {
        snprintf(j->pre_path, sizeof j->pre_path, "%s", opt->resume);
        if ((st = gr_ckpt_load(opt->resume, h, &cs, err))) return st;
        if ((st = gr_job_fits(path, h, &fc, err))) {
            free(h->spec);
            h->spec = NULL;
            size_t len = strlen(err->msg);
            snprintf(err->msg + len, sizeof err->msg - len, "; nothing was changed: resume with the spec it was "
                     "written for, or start over elsewhere (another --run-dir)");
            return st;
        }
        j->pre_found = true;
    }
    free(h->spec);
    h->spec = NULL;
    /* not a damaged file: the job was shortened (train.steps, train.epochs) */
    if (h->step > total)
        return gr_error_set(err, GR_ERR_CKPT, "%s: at step %lld, past this job's end (%lld steps): raise "
                            "train.steps or train.epochs to continue it", path, (long long)h->step, (long long)total);
    return GR_OK;
}

gr_status gr_job_pick_checkpoint(gr_job *j, const gr_run_options *opt, int64_t spe, int64_t total, gr_error *err) {
    gr_status st = gr_job_pick(j, opt, spe, total, err);
    return st ? st : gr_ckptdir_check(j, opt, err); /* another run's checkpoints are not written over */
}

gr_status gr_job_saver(gr_job *j, gr_error *err) {
    if (!gr_job_writer(j)) return GR_OK; /* rank 0 alone saves */
    const gr_job_spec *s = j->spec;
    return gr_saver_new(j->ckpt_dir, (int)s->checkpoint.keep, &j->g, gr_optim_slots(&s->train.optimizer), &j->saver,
                        err);
}

gr_status gr_job_resume(gr_job *j, const gr_run_options *opt, int64_t spe, int64_t *start, gr_error *err) {
    const gr_job_spec *s = j->spec;
    *start = 0;
    gr_status st; /* j->ckpt_dir: made by gr_job_open_run_dir */
    gr_job_spec_text(j);
    const int slots = gr_optim_slots(&s->train.optimizer);
    const bool w = gr_job_writer(j); /* rank 0 alone saves and trims */
    if (!opt->resume) return GR_OK;
    if (!j->pre_found) {
        if (!opt->quiet) fprintf(stderr, "gpurun: --resume auto: no checkpoint in %s; starting fresh\n", j->ckpt_dir);
        /* an earlier attempt died before its first checkpoint: its steps are redone */
        return w ? gr_metrics_trim(&j->mx, j->run_dir, 0, err) : GR_OK;
    }
    const char *path = j->pre_path;
    gr_ckpt_header h = j->pre_h; /* loaded, verified and checked by gr_job_pick_checkpoint */
    gr_ckpt_state cs = {&j->g, j->pre_params, j->pre_optim};
    gr_backend_upload(j->be, j->m.params, cs.params, (size_t)j->g.n_params * sizeof(float));
    if (slots) gr_backend_upload(j->be, j->m.optim, cs.optim, (size_t)slots * (size_t)j->g.n_trainable * sizeof(float));
    if (w && (st = gr_metrics_trim(&j->mx, j->run_dir, h.step, err))) return st;
    if (!opt->quiet) fprintf(stderr, "gpurun: resuming from %s at step %lld\n", path, (long long)h.step);
    *start = h.step;
    j->eval_pending = h.eval_pending != 0;
    if (j->sc.dynamic) { /* the scale carries on where it was */
        j->sc.scale = h.loss_scale;
        j->sc.good = h.loss_scale_good;
    }
    j->sc.skipped = h.skipped_steps; /* AdamW's step count is the updates applied */
    gr_record *rec = &j->mx.rec;
    rec->last_loss = h.last_train_loss;
    rec->best_acc = h.best_val_accuracy;
    rec->last_acc = h.last_val_accuracy;
    rec->last_vloss = h.last_val_loss;
    rec->loss_window = h.loss_window_steps > 0 ? h.loss_window_sum : 0.0;
    rec->loss_n = h.loss_window_steps;
    rec->time0 = isfinite(h.time_s) && h.time_s > 0 ? h.time_s : 0.0;
    if (h.step == 0) return GR_OK;
    int64_t epoch, sample;
    gr_job_position(j, h.step, spe, &epoch, &sample);
    return gr_loader_seek(j->train_ld, epoch, sample / j->dp.comm.world, err); /* this rank's share */
}

/* ---- saving ---- */

static void gr_job_header(const gr_job *j, int64_t step, int64_t spe, gr_ckpt_header *h) {
    const gr_job_spec *s = j->spec;
    const gr_record *rec = &j->mx.rec;
    memset(h, 0, sizeof *h);
    h->step = step;
    gr_job_position(j, step, spe, &h->epoch, &h->sample_in_epoch);
    h->world_size = j->dp.comm.world;
    snprintf(h->precision, sizeof h->precision, "%s", gr_precision_name(s->precision));
    h->loss_scale = j->sc.scale;
    h->loss_scale_good = j->sc.good;
    h->skipped_steps = j->sc.skipped;
    h->last_train_loss = rec->last_loss;
    h->best_val_accuracy = rec->best_acc;
    h->last_val_accuracy = rec->last_acc;
    h->last_val_loss = rec->last_vloss;
    h->loss_window_sum = rec->loss_window;
    h->loss_window_steps = rec->loss_n;
    h->time_s = gr_metrics_time_s(&j->mx);
    h->rng[0] = s->seed;
    h->rng[1] = (uint64_t)(step * (s->train.batch_size / s->train.micro_batch));
    snprintf(h->optimizer, sizeof h->optimizer, "%s", gr_optim_name(s->train.optimizer.type));
    h->optim_slots = gr_optim_slots(&s->train.optimizer);
    h->eval_pending = j->eval_pending;
    h->threads = strcmp(gr_backend_name(j->be), "cpu") == 0 ? j->be->threads : 0;
    h->spec = j->spec_text;
}

/* A checkpoint of j->ck_step is committed: summary.json says so (gr_metrics_running). */
static void gr_job_committed(gr_job *j) {
    gr_error e;
    j->ck_noted = j->ck_step;
    if (gr_metrics_running(&j->mx, j->ck_step, &e))
        fprintf(stderr, "gpurun: warning: summary.json not updated after the checkpoint of step %lld: %s\n",
                (long long)j->ck_step, e.msg);
}

void gr_job_checkpoint_start(gr_job *j, int64_t step, int64_t spe) {
    if (!j->saver) return; /* not rank 0 */
    gr_error e;
    /* the save in flight first: its commit is noted, its failure said */
    if (gr_saver_wait(j->saver, &e))
        fprintf(stderr, "gpurun: checkpoint failed (training goes on; the checkpoints committed before it stay): "
                "%s\n", e.msg);
    else if (j->ck_step >= 0 && j->ck_step != j->ck_noted && !j->ck_failed)
        gr_job_committed(j);
    gr_ckpt_header h;
    gr_job_header(j, step, spe, &h);
    j->ck_step = step;
    j->ck_failed = false;
    if (gr_saver_snapshot(j->saver, j->be, j->m.params, j->m.optim, &h, &e))
        fprintf(stderr, "gpurun: checkpoint failed (training goes on; the checkpoints committed before it stay): "
                "%s\n", e.msg);
}

void gr_job_checkpoint_poll(gr_job *j) {
    if (!j->saver) return;
    gr_status st;
    gr_error e;
    if (!gr_saver_poll(j->saver, &st, &e)) return;
    if (!st) {
        gr_job_committed(j);
        return;
    }
    j->ck_failed = true;
    fprintf(stderr, "gpurun: checkpoint failed (training goes on; the checkpoints committed before it stay): %s\n",
            e.msg);
}

gr_status gr_job_checkpoint_sync(gr_job *j, int64_t step, int64_t spe, bool *again, gr_error *err) {
    *again = false;
    if (!j->saver) return GR_OK;
    if (j->ck_step == step && !j->ck_failed && !j->eval_pending) {
        gr_status st = gr_saver_wait(j->saver, err);
        if (!st) {
            gr_job_committed(j);
            *again = true;
            return GR_OK;
        }
        fprintf(stderr, "gpurun: checkpoint failed: %s; writing it again\n", err->msg);
    }
    gr_job_checkpoint_start(j, step, spe);
    gr_status st = gr_saver_wait(j->saver, err);
    if (!st) gr_job_committed(j);
    return st;
}
