/* parallel.h — data parallelism in the training loop: the
 * launch resolved against the spec, the collectives of a step, and which
 * rank writes what.
 *
 * Each of the world's processes (ranks) holds the whole model, reads its
 * shard of every global batch (the loader's rank/world split: rank r takes
 * positions r, r + world, ... of the epoch's order, so a step sees the same
 * samples as one process with the same train.batch_size), runs forward and
 * backward on its micro-batches, and the summed gradients (each scaled by
 * 1 / the global batch) are the global batch's: every rank then applies the
 * same update to the same weights. Rank 0 alone writes the run directory;
 * every rank agrees, at the same points of the loop, on whether a signal
 * stops the run. */
#ifndef GR_PARALLEL_H
#define GR_PARALLEL_H

#include "job.h"

/* The spec as this rank runs it (rs: a shallow copy of s): parallel.data
 * checked against the launched world (auto: the world), the backend
 * (auto: mpi for several processes, none for one); then the comm joined
 * (MPI_Init for several). Spec errors are exit 2 naming the key. The
 * micro-batch per rank is decided later, once the model is compiled and the
 * device open (memfit.h: gr_memfit_micro_batch). */
gr_status gr_parallel_resolve(const gr_job_spec *s, gr_job_spec *rs, gr_comm *c, gr_error *err);
/* Once the model and its plans are made: refuses several processes on a
 * GPU (that needs NCCL), and with parallel.bucket_mb > 0 hooks the
 * bucketed all-reduce onto the train plan (buckets.h). */
gr_status gr_parallel_attach(gr_job *j, gr_error *err);
/* The training micro-batches' gr_exec_ctx.xsum: with parallel.sync_batchnorm
 * and several processes, batchnorm's sums over them; else NULL. */
const gr_xsum *gr_parallel_xsum_of(const gr_job *j);
/* Before each micro-batch of a step: whether it is the last one (the one
 * whose backward starts the buckets' sums). */
void gr_parallel_arm(gr_job *j, bool last_micro_batch);
/* After a step's micro-batches: the gradients (the buckets waited for, or
 * one all-reduce when there are none) and the loss's sum and count
 * summed over ranks (nothing for one process). Every rank calls it, also
 * when a signal stops the step (its sums are then thrown away). */
gr_status gr_parallel_reduce_step(gr_job *j, double *loss_sum, double *loss_count, gr_error *err);
/* Before an evaluation: rank 0's non-trainable state (batchnorm's running
 * statistics, which per-rank statistics make differ) on every rank, so
 * every shard is evaluated with the model rank 0 saves (as PyTorch DDP's
 * broadcast_buffers). */
gr_status gr_parallel_share_state(gr_job *j, gr_error *err);
/* After an evaluation: its sums and sample count over ranks (each
 * evaluated every world-th batch of the val split). */
gr_status gr_parallel_reduce_eval(gr_job *j, gr_pass_stats *s, int64_t *seen, gr_error *err);
/* The signal that stops the run, agreed by every rank (the largest pending
 * one; 0: go on). One process: gr_signals_pending(). */
gr_status gr_parallel_stop(gr_job *j, int *sig, gr_error *err);
/* Leaves the world at the end of the run (st: its outcome, returned). With
 * several processes an error names the rank; a rank that failed on its own
 * (anything but a signal or divergence, which every rank meets together)
 * says so and aborts the others with its exit code (MPI_Abort), so none
 * waits forever in a collective. */
gr_status gr_parallel_finish(gr_comm *c, gr_status st, gr_error *err);

/* The watchdog (parallel.timeout_s, started by gr_parallel_resolve for
 * several processes) around a collective: what it is, for the line that
 * names it, and the 0-based step (-1: set-up, before the loop; no step
 * named). A collective pending longer than the timeout ends the process:
 * its line, the gr_parallel_on_exit callback, exit 7. For the collectives
 * outside parallel.c (parallel_check.c); no effect for one process. */
double gr_parallel_wd_enter(const char *what, int64_t step);
void gr_parallel_wd_leave(void);
/* What the watchdog does before it exits 7 (on its own thread, while the
 * main thread is stuck in a collective): fn(ctx, its message), at most once;
 * NULL: nothing. Set again (or to NULL) by the main thread; once this
 * returns, a callback set before is not running and will not run. */
void gr_parallel_on_exit(void (*fn)(void *ctx, const char *msg), void *ctx);

/* After compiling, before anything collective: every rank runs rank 0's
 * job (the resolved spec's keys but name and data.workers/prefetch/cache,
 * and the data files' identity: samples, shape, size, crc32c of the first
 * MiB). A mismatch is exit 2 on every rank (*agreed: each knows, none aborts
 * the others), the ranks that differ naming their keys, rank 0 naming them. */
gr_status gr_parallel_same_job(gr_job *j, bool *agreed, gr_error *err);

#endif
