/* ckptdir.h — a checkpoint directory belongs to one run (DESIGN 1.3).
 *
 * checkpoint.dir may be anywhere (a shared disk, a bucket mount), so the
 * run directory's lock does not cover it: rank 0 locks it too (its own
 * `.lock`, unless it is the run directory itself), and records whose it is
 * in `.owner` ("run /absolute/run/dir", then the host and time it was
 * claimed) when the run directory is first written.
 *
 * A run that would write into a checkpoint directory holding committed
 * checkpoints (step-*.h5) it did not resume from is refused, exit 6, naming
 * the directory, the files and their owner, before anything is written:
 *   - a fresh run (nothing resumed), whoever the owner;
 *   - a run resumed from a file elsewhere (--resume PATH) into a directory
 *     another run owns, or that has no owner record.
 * A run resumed from a checkpoint of the directory itself (--resume auto,
 * or --resume PATH inside it) is that run's continuation: when the record
 * names another run directory (a run directory moved or made anew, as on a
 * spot instance whose local disk is gone) it says so and takes it over. */
#ifndef GR_CKPTDIR_H
#define GR_CKPTDIR_H

#include "job.h"

#define GR_CKPTDIR_OWNER ".owner"

/* Locks the run directory (rundir.h), then j->ckpt_dir (made if missing)
 * unless it is the run directory: exit 6 when another live run holds
 * either. A no-op off rank 0. */
gr_status gr_ckptdir_lock(gr_job *j, gr_error *err);

/* Once the checkpoint to resume from is picked (gr_job_pick_checkpoint
 * ends with it), before the run directory is written: the refusals above
 * (exit 6, nothing changed); otherwise notes whether gr_ckptdir_claim must
 * write the record. */
gr_status gr_ckptdir_check(gr_job *j, const gr_run_options *opt, gr_error *err);

/* Writes j->ckpt_dir/.owner naming this run's directory, when
 * gr_ckptdir_check found it missing or naming another (exit 6 on failure). */
gr_status gr_ckptdir_claim(gr_job *j, gr_error *err);

/* Releases the lock (with undo: a directory the lock made and nothing else
 * wrote is removed again). */
void gr_ckptdir_release(gr_job *j, bool undo);

#endif
