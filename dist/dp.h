/* dp.h — data parallelism's collectives in the training loop.
 *
 * Each of the world's processes (ranks) holds the whole model, reads its
 * shard of every global batch, runs forward and backward on its
 * micro-batches, and the summed gradients (each scaled by 1 / the global
 * batch) are the global batch's: every rank then applies the same update
 * to the same weights. A gr_dp is a rank's side of that: the communicator,
 * the bucketed all-reduce on the train plan (buckets.h), batchnorm's sums
 * over the ranks (parallel.sync_batchnorm), and every collective of the
 * loop timed by the watchdog (watchdog.h) and reported as a GR_SPAN_COMM to
 * the loop's hooks. Which spec asks for what, and what a rank writes, is
 * the runner's (runner/parallel.c). One process (world 1, no NCCL): every
 * call but gr_dp_finish is a no-op returning GR_OK. */
#ifndef GR_DP_H
#define GR_DP_H

#include "buckets.h"
#include "comm.h"
#include "../kernels/backend.h"

typedef struct gr_dp {
    gr_comm comm;        /* the processes (world 1: this one alone) */
    gr_buckets *buckets; /* the bucketed gradient all-reduce (NULL: one all-reduce after the step) */
    gr_xsum xsum;        /* batchnorm's sums over the ranks (sum NULL: off) */
    gr_status xsum_st;   /* its first failure, reported after the micro-batch */
    gr_error xsum_err;
    int64_t step;        /* the 0-based step being run (the loop sets it), for the watchdog's line */
    const gr_loop_hooks *const *hooks; /* the loop's hooks, read at each collective (NULL: none) */
    double *comm_s;      /* where the seconds spent in collectives are summed (NULL: nowhere) */
} gr_dp;

/* With several processes or NCCL: the buckets on train plan p (bucket_mb >
 * 0; else one all-reduce per step), batchnorm's sums (sync_bn and several
 * processes), hooks and comm_s as in gr_dp. p outlives dp's buckets. */
void gr_dp_attach(gr_dp *dp, gr_plan *p, double bucket_mb, bool sync_bn, const gr_loop_hooks *const *hooks,
                  double *comm_s);
/* The training micro-batches' gr_exec_ctx.xsum (NULL: off). */
const gr_xsum *gr_dp_xsum(const gr_dp *dp);
/* Before each micro-batch of a step: whether it is the last one (the one
 * whose backward starts the buckets' sums). */
void gr_dp_arm(gr_dp *dp, bool last_micro_batch);
/* After a step's micro-batches: the gradients grads[0, n) (the buckets
 * waited for, or one all-reduce when there are none) and the loss's sum
 * and count summed over ranks. Every rank calls it, also when a signal
 * stops the step (its sums are then thrown away). */
gr_status gr_dp_reduce_step(gr_dp *dp, float *grads, int64_t n, double *loss_sum, double *loss_count,
                            gr_error *err);
/* Rank 0's x[0, n) on every rank (what names it in errors and the watchdog's line). */
gr_status gr_dp_bcast(gr_dp *dp, float *x, int64_t n, const char *what, gr_error *err);
/* v[0, n) summed over the ranks, in place. */
gr_status gr_dp_sum(gr_dp *dp, double *v, int n, const char *what, gr_error *err);
/* The largest of the ranks' *sig (a pending stop signal; 0: none), in place. */
gr_status gr_dp_agree_stop(gr_dp *dp, int *sig, gr_error *err);
/* Leaves the world at the end of the run (st: its outcome, returned). With
 * several processes an error names the rank; a rank that failed on its own
 * (anything but a signal or divergence, which every rank meets together,
 * or a failure all agreed on) says so and aborts the others with its exit
 * code (MPI_Abort), so none waits forever in a collective. */
gr_status gr_dp_finish(gr_comm *c, gr_status st, gr_error *err);
void gr_dp_free(gr_dp *dp);

#endif
