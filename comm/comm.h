/* comm.h — the processes of a data-parallel run and what they say to each
 * other.
 *
 * gpurun starts no processes: a launcher does (`mpirun -np 4 gpurun job.yaml`,
 * `srun gpurun job.yaml`). gr_comm_detect reads who this process is from the
 * launcher's environment; a process started without a launcher is rank 0
 * of world 1 and never touches MPI. gr_comm_open joins the others
 * (MPI_Init_thread; the main thread alone calls MPI). The collectives are
 * blocking, in place, and the same call sequence must run on every rank,
 * as with any MPI program; a failing one is GR_ERR_DEVICE (exit 7) naming
 * the operation, never an abort in the middle of a write.
 *
 * Kinds: none (world 1), mpi (between processes, MPI). The host's small
 * collectives (sums of doubles, the max) always go over MPI; the float
 * buffers (gradients, state) too on CPUs, and over NCCL once
 * gr_comm_open_gpu has joined the ranks' GPUs (then they are device
 * buffers, summed on a stream of their own: comm_nccl.c). */
#ifndef GR_COMM_H
#define GR_COMM_H

#include "../common/gr_common.h"

typedef enum gr_comm_kind { GR_COMM_NONE, GR_COMM_MPI, GR_COMM_NCCL } gr_comm_kind;

typedef struct gr_comm {
    gr_comm_kind kind;     /* GR_COMM_NONE until gr_comm_open */
    int rank, world;       /* 0, 1 without a launcher */
    int local_rank;        /* the rank among those on this machine (GPU choice) */
    char launcher[32];     /* "" (none), "Open MPI", "Slurm", "PMI" */
    bool joined;           /* gr_comm_open reached the other ranks */
    bool agreed;           /* every rank met the same failure and knows it: each exits on its own */
    bool nccl;             /* the float buffers are on the GPU, summed over NCCL (gr_comm_open_gpu) */
} gr_comm;

/* Who this process is: Open MPI's OMPI_COMM_WORLD_{SIZE,RANK,LOCAL_RANK},
 * else Slurm's SLURM_NTASKS/SLURM_PROCID/SLURM_LOCALID (under srun: with
 * SLURM_STEP_ID), else PMI_SIZE/PMI_RANK; none: rank 0 of 1. */
void gr_comm_detect(gr_comm *c);
/* Whether this build has the kind (none always; mpi when built with MPI). */
bool gr_comm_built(gr_comm_kind k);
const char *gr_comm_kind_name(gr_comm_kind k);
/* Joins the launched world with kind (GR_COMM_NONE: nothing to join, world
 * must be 1). The world MPI reports must be the detected one. */
gr_status gr_comm_open(gr_comm *c, gr_comm_kind kind, gr_error *err);
/* After gr_comm_open: NCCL on this process's GPU (the current device; one
 * process alone too, a communicator of one), ordered after the work of the
 * backend's compute stream (a cudaStream_t). Every float collective below
 * then takes device buffers. GR_ERR_USAGE when the build has no NCCL. */
gr_status gr_comm_open_gpu(gr_comm *c, void *compute_stream, gr_error *err);
/* For a watchdog thread: whether NCCL reported an asynchronous error, and
 * aborting its communicator (so nothing waits on it any more). */
bool gr_comm_gpu_failed(const gr_comm *c);
void gr_comm_gpu_abort(gr_comm *c);
/* buf[0..n) = the sum over ranks, in place (floats and doubles). */
gr_status gr_comm_sum_f32(gr_comm *c, float *buf, int64_t n, const char *what, gr_error *err);
gr_status gr_comm_sum_f64(gr_comm *c, double *buf, int n, const char *what, gr_error *err);
/* Started sums: buf[0..n) (n <= INT_MAX) summed over ranks in place, in
 * the background; every rank must start the same ones in the same order.
 * gr_comm_progress lets them advance (MPI progresses inside its calls) and
 * gr_comm_wait_all returns when all have finished (the buffers are then
 * the sums). At most GR_COMM_MAX_PENDING at a time. */
#define GR_COMM_MAX_PENDING 1024
gr_status gr_comm_isum_f32(gr_comm *c, float *buf, int64_t n, const char *what, gr_error *err);
gr_status gr_comm_progress(gr_comm *c, gr_error *err);
gr_status gr_comm_wait_all(gr_comm *c, gr_error *err);
/* buf[0..n) = rank 0's (float). */
gr_status gr_comm_bcast_f32(gr_comm *c, float *buf, int64_t n, const char *what, gr_error *err);
/* *v = the largest *v over ranks. */
gr_status gr_comm_max_int(gr_comm *c, int *v, const char *what, gr_error *err);
/* Leaves the world: MPI_Finalize; with abort_code != 0, MPI_Abort with it
 * (the launcher then stops the other ranks instead of leaving them waiting
 * forever in a collective; this process exits with abort_code). */
void gr_comm_close(gr_comm *c, int abort_code);

#endif
