/* buckets.h — the gradient all-reduce in buckets, overlapped with backward
 * (parallel.bucket_mb).
 *
 * The grads arena is one contiguous array, each parameter's gradient a
 * range of it, written by the backward step of its layer. Buckets are runs
 * of neighbouring ranges of about bucket_mb MiB, cut from the end of the
 * arena (backward finishes the last layers first). A hook on the train
 * plan (the one dispatch, exec.h) starts a bucket's sum over the ranks as
 * soon as the last step that writes into it has run, while the rest of
 * backward goes on, and lets the started sums progress after every step.
 * Only the step's last micro-batch is armed: with accumulation the
 * gradients are summed over ranks once per optimizer step. */
#ifndef GR_BUCKETS_H
#define GR_BUCKETS_H

#include "comm.h"
#include "../exec/exec.h"

typedef struct gr_buckets gr_buckets;
#include "../exec/loophooks.h"

/* The buckets of train plan p's gradients (bucket_mb > 0) and their hook
 * on p; c and p outlive them. *hooks (NULL or not) is read at each hook: the
 * job's loop hooks (the profiler's), told of the hook's work as a collective. */
gr_buckets *gr_buckets_new(gr_plan *p, gr_comm *c, double bucket_mb, const gr_loop_hooks *const *hooks);
void gr_buckets_free(gr_buckets *b);
int gr_buckets_count(const gr_buckets *b);
/* Bucket i (0: the one at the end of the arena): grads[lo, hi), started after plan step ready. */
void gr_buckets_get(const gr_buckets *b, int i, int64_t *lo, int64_t *hi, int *ready);
/* The next run of the plan starts the sums (the step's last micro-batch). */
void gr_buckets_arm(gr_buckets *b, bool on);
/* After the armed run: starts any bucket not started yet, waits for all,
 * and returns the first failure any of them had. */
gr_status gr_buckets_finish(gr_buckets *b, gr_error *err);

#endif
