/* parallel.h — data parallelism, the job's side: the launch resolved
 * against the spec, the spec's choices for the collectives (dist/dp.h:
 * the communicator, the bucketed all-reduce, batchnorm's sums, the
 * watchdog), and the job's state in them. Every rank reads its shard of
 * every global batch (the loader's rank/world split: rank r takes
 * positions r, r + world, ... of the epoch's order, so a step sees the same
 * samples as one process with the same train.batch_size). Rank 0 alone
 * writes the run directory; every rank agrees, at the same points of the
 * loop, on whether a signal stops the run. */
#ifndef GR_PARALLEL_H
#define GR_PARALLEL_H

#include "job.h"

/* The spec as this rank runs it (rs: a shallow copy of s): parallel.data
 * checked against the launched world (auto: the world), the backend
 * (auto: mpi for several processes, none for one), train.batch_size in
 * equal shares of whole micro-batches per process; then the comm joined
 * (MPI_Init for several, under the watchdog: parallel.timeout_s). Spec
 * errors are exit 2 naming the key. The micro-batch per rank is decided
 * later, once the model is compiled and the device open (memfit.h:
 * gr_memfit_micro_batch). */
gr_status gr_parallel_resolve(const gr_job_spec *s, gr_job_spec *rs, gr_comm *c, gr_error *err);
/* The launched world (c, detected) against the spec: it must be parallel.data
 * x parallel.pipeline x parallel.tensor (data auto: a multiple of the other
 * two). Ranks are laid out as Megatron's: tensor innermost, then pipeline,
 * then data (DESIGN 2.4). Exit 2 naming the keys and values. */
gr_status gr_parallel_check_world(const gr_job_spec *s, const gr_comm *c, gr_error *err);
/* Once the model and its plans are made: NCCL on a GPU (refusing what the
 * spec asks that a GPU cannot do), and j->dp attached to the train plan
 * (parallel.bucket_mb, parallel.sync_batchnorm; dist/dp.h). */
gr_status gr_parallel_attach(gr_job *j, gr_error *err);
/* A model split over processes (pipeline stages, pipe.h; tensor groups,
 * tp.h), once the world is joined on the device: j->world keeps it, and
 * collectively j->dp.comm becomes the data replicas of this one's place in
 * its replica (rank = (d x pipeline + s) x tensor + t: the ranks of the
 * same s and t, ordered by d). No-op without either. */
gr_status gr_parallel_split(gr_job *j, gr_error *err);
/* After gr_parallel_split, collectively: *group the ranks of the world that
 * share color, ordered by key (a replica's stages, a tensor group). what
 * names the split for the watchdog. */
gr_status gr_parallel_group(gr_job *j, int color, int key, gr_comm *group, const char *what, gr_error *err);
/* j->dp.comm the world again (gr_job_free, before the world ends). */
void gr_parallel_unsplit(gr_job *j);
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
/* What the collective watchdog (dist/watchdog.h, started by
 * gr_parallel_resolve for several processes) does before it exits 7, on its
 * own thread while the main thread is stuck in a collective: fn(ctx, its
 * message), at most once; NULL: nothing. Set again (or to NULL) by the main
 * thread; once this returns, a callback set before is not running and will
 * not run. */
void gr_parallel_on_exit(void (*fn)(void *ctx, const char *msg), void *ctx);

/* After compiling, before anything collective: every rank runs rank 0's
 * job (the resolved spec's keys but name and data.workers/prefetch/cache,
 * and the data files' identity: samples, shape, size, crc32c of the first
 * MiB). A mismatch is exit 2 on every rank (*agreed: each knows, none aborts
 * the others), the ranks that differ naming their keys, rank 0 naming them. */
gr_status gr_parallel_same_job(gr_job *j, bool *agreed, gr_error *err);

#endif
