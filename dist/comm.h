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
 * buffers, summed on a stream of their own: comm_nccl.c).
 *
 * Beyond the sums (comm_group.c): point-to-point sends and receives,
 * reduce-scatter and all-gather, and sub-communicators (gr_comm_split, like
 * MPI_Comm_split), on which every operation of this header works with the
 * group's own rank and world. The launched world's gr_comm holds no handle
 * (MPI_COMM_WORLD and the process's one NCCL communicator), so it may be
 * copied; a sub-communicator holds its own (mpi, gpu), shared by its copies
 * and released once, by gr_comm_free. */
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
    bool sub;              /* made by gr_comm_split: released by gr_comm_free, never closed */
    struct gr_comm_mpi *mpi;   /* a sub-communicator's MPI_Comm and started operations (NULL: the world's) */
    struct gr_comm_nccl *gpu;  /* a sub-communicator's NCCL communicator and stream (NULL: the world's) */
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
 * aborting its communicator (so nothing waits on it any more); c's own
 * communicator (the world's, or a sub-communicator's). */
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

/* ---- point-to-point (comm_group.c) ----
 * n floats of buf to rank peer of c (send), or into buf from it (recv).
 * peer: a rank of c other than this one (a send to itself is refused:
 * GR_ERR_USAGE, as is every peer of a world of 1); tag: 0..32767 (what MPI
 * guarantees; else GR_ERR_USAGE), the same on both sides, as is n (over
 * MPI a receive of another count than was sent is GR_ERR_DEVICE, except
 * a started one of fewer, which Open MPI 4.1 was seen never to finish). Over NCCL the tag is not
 * sent: sends to a peer meet its receives in the order they were made.
 * Blocking: the call returns when buf may be reused (send) or holds the
 * data (recv); two ranks that both send first may wait for each other
 * forever (MPI's rendezvous, NCCL always): order them, or start them.
 * A failure is GR_ERR_DEVICE naming the operation, what, and the peer. */
gr_status gr_comm_send_f32(gr_comm *c, const float *buf, int64_t n, int peer, int tag, const char *what,
                           gr_error *err);
gr_status gr_comm_recv_f32(gr_comm *c, float *buf, int64_t n, int peer, int tag, const char *what, gr_error *err);
/* Started sends and receives (n <= INT_MAX, else GR_ERR_USAGE): they join
 * c's started sums, and gr_comm_wait_all(c) finishes them all (buf must
 * stay untouched until then; GR_COMM_MAX_PENDING in all; each communicator
 * has its own, waited for apart). Over NCCL the started sends and receives
 * of c between two waits run as one group (ncclGroupStart/End), so a ring
 * of them cannot deadlock; gr_comm_wait_all(c), or any other NCCL
 * operation (of any communicator: NCCL's groups are the thread's, not a
 * communicator's), ends the group and runs it first. */
gr_status gr_comm_isend_f32(gr_comm *c, const float *buf, int64_t n, int peer, int tag, const char *what,
                            gr_error *err);
gr_status gr_comm_irecv_f32(gr_comm *c, float *buf, int64_t n, int peer, int tag, const char *what, gr_error *err);

/* ---- reduce-scatter and all-gather (comm_group.c), blocking ----
 * Reduce-scatter (sum): send[0..n) on every rank, n a multiple of world
 * (else GR_ERR_USAGE, before any rank talks: a caller pads), share = n /
 * world <= INT_MAX; rank r gets recv[0..share) = the sum over ranks of
 * send[r*share .. (r+1)*share). send and recv do not overlap. World 1:
 * recv = send. */
gr_status gr_comm_reduce_scatter_f32(gr_comm *c, const float *send, float *recv, int64_t n, const char *what,
                                     gr_error *err);
/* All-gather: send[0..n) on every rank (n <= INT_MAX); recv[r*n .. (r+1)*n)
 * = rank r's, for every r (recv holds world * n). In place when send ==
 * recv + rank * n (a shard of recv updated where it lies). World 1:
 * recv = send. */
gr_status gr_comm_all_gather_f32(gr_comm *c, const float *send, float *recv, int64_t n, const char *what,
                                 gr_error *err);

/* ---- sub-communicators (comm_group.c) ----
 * Like MPI_Comm_split, collective over parent (every rank calls it, in the
 * same order as the other operations): the ranks of one color (>= 0; else
 * GR_ERR_USAGE) form *child, ordered by key, then by their rank in parent.
 * child's rank and world are within the group; its kind, local rank and
 * launcher are parent's; every operation of this header works on it, over
 * MPI (MPI_Comm_split of parent's) and, when parent is on the GPUs, NCCL
 * (ncclCommSplit of parent's; on the same compute stream, with a stream of
 * its own). parent must have been opened (gr_comm_open). A failure is
 * GR_ERR_DEVICE and leaves *child a world of 1 that needs no freeing. */
gr_status gr_comm_split(gr_comm *parent, int color, int key, gr_comm *child, gr_error *err);
/* Releases a sub-communicator, on each of its ranks, before the world is
 * closed; its started operations must have finished (gr_comm_wait_all).
 * Anything else (the world, a failed split's child) is left as it is. */
void gr_comm_free(gr_comm *child);

/* Leaves the world: MPI_Finalize; with abort_code != 0, MPI_Abort with it
 * (the launcher then stops the other ranks instead of leaving them waiting
 * forever in a collective; this process exits with abort_code). */
void gr_comm_close(gr_comm *c, int abort_code);

#endif
