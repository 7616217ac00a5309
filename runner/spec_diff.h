/* spec_diff.h — does a checkpoint belong to this job? Compares the resolved
 * spec a checkpoint carries with the job's own, key by key.
 *
 * Every key that changes the trajectory (seed, data, model, optimizer,
 * schedule, loss, batch, precision...) must be equal; the keys that only
 * say how a run is watched or where it runs may change between restarts:
 * name, device, deterministic, cuda_graph, cudnn_benchmark, log.*,
 * checkpoint.*, eval.*, data.workers, data.prefetch, data.cache, parallel.*
 * (one process in this version) and train.steps / train.epochs (the caller
 * checks that the checkpoint is not past the new end). */
#ifndef GR_SPEC_DIFF_H
#define GR_SPEC_DIFF_H

#include <stddef.h>

#include "../common/gr_common.h"

/* Writes into out (empty when the trajectories agree) the keys that differ,
 * each as "key (checkpoint V, job W)", joined by "; ", at most a few then
 * "and N more". ckpt_yaml and job_yaml are gr_spec_dump texts. Returns the
 * number of differing keys; -1 (out says why) when ckpt_yaml does not parse. */
int gr_spec_diff(const char *ckpt_yaml, const char *job_yaml, char *out, size_t n);

/* The same between rank 0's spec and this rank's, as "key (rank 0 V, rank
 * R W)": every key but name and how a rank reads its data (data.workers,
 * data.prefetch, data.cache) must be equal for the ranks to compute
 * together. */
int gr_spec_diff_ranks(const char *yaml0, const char *yaml, int rank, char *out, size_t n);

#endif
