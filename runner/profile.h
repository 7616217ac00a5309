/* profile.h — `gpurun run --profile [STEPS]`: where a training
 * step's time goes.
 *
 * After GR_PROF_WARMUP optimizer steps (the first ones make primitives and
 * touch memory), STEPS steps are timed: every op of the train plan through
 * a hook on the one dispatch (exec.h), each call between two time marks on
 * the device's timeline (gr_backend_mark: CUDA events, the CPU's clock);
 * the batch's copy to the device and the stats' read-back the same way; the
 * optimizer update; the wait for the loader's next batch and the
 * collectives of a data-parallel run on the host clock. It attaches through
 * hooks only: the plan's (exec.h) and the loop's (loophooks.h). A CUDA run profiles
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

/* A profiler of `steps` optimizer steps of job j (its train plan compiled)
 * after the warm-up from step start, of the run's total: it adds a hook to
 * the train plan and sets j->hooks (loophooks.h), through which alone it
 * sees the run. NULL (nothing to profile) when the run has no step past the
 * warm-up, said on stderr unless quiet. */
gr_prof *gr_prof_open(gr_job *j, int steps, int64_t start, int64_t total, bool quiet);
void gr_prof_free(gr_prof *p);

/* profile.txt and trace.json into run_dir (a run that profiled no step:
 * nothing); says where on stderr unless quiet. */
gr_status gr_prof_finish(gr_prof *p, const char *run_dir, bool quiet, gr_error *err);

#endif
