/* profile.h — `gpurun run --profile [STEPS]`: where a training
 * step's time goes.
 *
 * After GR_PROF_WARMUP optimizer steps (the first ones make primitives and
 * touch memory), STEPS steps are timed: every op of the train plan through
 * a hook on the one dispatch (exec.h), each call between two time marks on
 * the device's timeline (gr_backend_mark: CUDA events, the CPU's clock);
 * the batch's copy to the device and the stats' read-back the same way; the
 * optimizer update; the wait for the loader's next batch and the
 * collectives of a data-parallel run on the host clock. A CUDA run profiles
 * without graph replay (a replay calls no hooks).
 *
 * The run directory gets profile.txt, a table sorted by time: layer, op,
 * direction (forward, backward, recompute), calls, total, mean, share, and
 * the GFLOP/s and GB/s the plan's FLOP and byte counts give; above it the
 * measured step time next to the table's total per step. And trace.json, in
 * the Chrome trace-event format (Perfetto, chrome://tracing opens it): one
 * complete event per op per micro-batch of each profiled step, with the
 * step and layer in its args (tid 1 the device's ops and copies, tid 0 the
 * host's waits). Nothing is profiled in a run shorter than the warm-up. */
#ifndef GR_PROFILE_H
#define GR_PROFILE_H

#include <stdbool.h>

#include "job.h"

#define GR_PROF_WARMUP 3

typedef struct gr_prof gr_prof;

/* The spans timed besides the ops. */
typedef enum gr_prof_kind {
    GR_PROF_DATA,  /* waiting for the loader's next batch (host) */
    GR_PROF_H2D,   /* the batch to the device (device) */
    GR_PROF_D2H,   /* the pass's loss and correct count back (device) */
    GR_PROF_OPTIM, /* clipping and the optimizer update (device) */
    GR_PROF_COMM,  /* a collective outside the ops (host) */
    GR_PROF_KINDS
} gr_prof_kind;

/* A profiler of `steps` optimizer steps of job j (its train plan compiled,
 * a hook added to it) after the warm-up from step start, of the run's
 * total; NULL (nothing to profile) when the run has no step past the
 * warm-up, said on stderr unless quiet. */
gr_prof *gr_prof_open(gr_job *j, int steps, int64_t start, int64_t total, bool quiet);
void gr_prof_free(gr_prof *p);

/* Around each optimizer step (its micro-batches, collectives and update);
 * the end waits for the device and reads the step's marks. */
void gr_prof_step_begin(gr_prof *p, int64_t step);
void gr_prof_step_end(gr_prof *p);
/* One micro-batch's pass (gr_train_micro_step) with its copies timed. */
void gr_prof_micro_step(gr_prof *p, gr_plan *plan, const gr_batch *b, const gr_exec_ctx *ctx, double *loss_sum,
                        double *correct);
/* A device span (H2D, D2H, OPTIM) between begin and end. */
void gr_prof_begin(gr_prof *p, gr_prof_kind k);
void gr_prof_end(gr_prof *p, gr_prof_kind k);
/* A host span (DATA, COMM) of [t0, t1] on the host clock; what: its name
 * in the trace ("the gradients"). A collective inside an op (sync
 * batchnorm's) is in the op's time: traced, not a row of its own. */
void gr_prof_host(gr_prof *p, gr_prof_kind k, const char *what, double t0, double t1);

/* profile.txt and trace.json into run_dir (a run that profiled no step:
 * nothing); says where on stderr unless quiet. */
gr_status gr_prof_finish(gr_prof *p, const char *run_dir, bool quiet, gr_error *err);

#endif
