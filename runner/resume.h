/* resume.h — a run's checkpoints: what their header records, the periodic
 * saves and the last one, and resuming from one (--resume auto|PATH).
 *
 * A resume is decided in two halves around the run directory: the
 * checkpoint is picked, loaded, verified and checked against the job first
 * (a checkpoint that does not fit changes nothing on disk, exit 6), and
 * restored into the model, the loss scaler and the metrics record once the
 * run directory is this run's (its later metrics lines trimmed). */
#ifndef GR_RESUME_H
#define GR_RESUME_H

#include "job.h"

/* --resume auto on a run whose summary.json says finished: says so on
 * stderr; there is nothing to do (the preemptible idiom reruns every job
 * with --resume auto). */
bool gr_resume_finished_before(const gr_job *j, const gr_run_options *opt);

/* --resume, before the backend is made: the thread count of the checkpoint
 * it will most likely take (the newest whose run record verifies; its
 * tensors are read later, into the model's layout) in j->ckpt_threads. */
void gr_job_peek_threads(gr_job *j, const gr_run_options *opt);

/* --resume: loads the newest checkpoint of j->ckpt_dir that verifies and
 * fits this job (auto: the others are skipped with a line each) or exactly
 * PATH, and checks it fits (the spec, the optimizer, its step's position in
 * this job's batches of spe steps an epoch, not past the job's total steps),
 * and that the checkpoint directory may be written (ckptdir.h), all before
 * the run directory is touched. */
gr_status gr_job_pick_checkpoint(gr_job *j, const gr_run_options *opt, int64_t spe, int64_t total, gr_error *err);

/* Rank 0's saver (saver.h), made before the run directory is touched: a
 * host without room for its copy of the model is an error (exit 4) that
 * leaves nothing on disk. */
gr_status gr_job_saver(gr_job *j, gr_error *err);

/* With --resume, restores the checkpoint
 * gr_job_pick_checkpoint chose (model, loss scaler, metrics record), trims
 * the metrics past it, puts the train loader at its position and returns
 * the step to continue from (*start; 0: fresh). */
gr_status gr_job_resume(gr_job *j, const gr_run_options *opt, int64_t spe, int64_t *start, gr_error *err);

/* Snapshots the model after `step` steps and starts writing it in the
 * background (waiting first for the save in flight, whose failure is
 * reported on stderr; training goes on). */
void gr_job_checkpoint_start(gr_job *j, int64_t step, int64_t spe);

/* Reports a background save that failed (stderr; training goes on). */
void gr_job_checkpoint_poll(gr_job *j);

/* A checkpoint that must be committed before going on (end, signal). When
 * the save of this very step is in flight or committed (a signal in the step
 * after a periodic save: that step is abandoned before its update, so the
 * model is as it was), it is waited for instead of written again, which
 * would double the time a preemption's deadline allows. *again is set then. */
gr_status gr_job_checkpoint_sync(gr_job *j, int64_t step, int64_t spe, bool *again, gr_error *err);

#endif
