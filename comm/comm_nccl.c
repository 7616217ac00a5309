/* comm_nccl.c — the collectives on GPU buffers over NCCL (comm.h), built
 * with CUDA. One communicator per process, bootstrapped with MPI (rank 0's
 * ncclUniqueId broadcast) or, for one process, by itself; one GPU per rank
 * (the runner picks cuda:<local rank>). Collectives run on their own stream,
 * ordered after the compute stream's work so far by an event, and the
 * compute stream waits for them (another event) at gr_comm_wait_all, so a
 * bucket's sum overlaps the rest of backward. NCCL's asynchronous errors
 * are polled by the runner's watchdog (gr_comm_nccl_poll) and abort the
 * communicator. */
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <stdio.h>
#include <string.h>

#include "comm_internal.h"

#ifdef GR_HAVE_MPI
#include <mpi.h>
#endif

static struct {
    ncclComm_t comm;
    cudaStream_t compute, stream;
    cudaEvent_t ready, done;
    bool pending;             /* collectives started since the last wait */
} gr_nccl;

static gr_status gr_nccl_error(const gr_comm *c, const char *call, const char *msg, const char *what, gr_error *err) {
    return gr_error_set(err, GR_ERR_DEVICE, "rank %d of %d: %s (%s) failed: %s", c->rank, c->world, call, what, msg);
}

#define GR_NCCL_TRY(c, call, what, err) do { \
    ncclResult_t r_ = (call); \
    if (r_ != ncclSuccess) return gr_nccl_error(c, #call, ncclGetErrorString(r_), what, err); \
} while (0)
#define GR_CUDA_TRY(c, call, what, err) do { \
    cudaError_t e_ = (call); \
    if (e_ != cudaSuccess) return gr_nccl_error(c, #call, cudaGetErrorString(e_), what, err); \
} while (0)

gr_status gr_comm_nccl_open(gr_comm *c, void *compute_stream, gr_error *err) {
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    if (c->rank == 0) GR_NCCL_TRY(c, ncclGetUniqueId(&id), "making the communicator's id", err);
    if (c->world > 1) {
#ifdef GR_HAVE_MPI
        if (MPI_Bcast(&id, (int)sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD) != MPI_SUCCESS)
            return gr_nccl_error(c, "MPI_Bcast", "failed", "sharing NCCL's id", err);
#else
        return gr_nccl_error(c, "ncclCommInitRank", "several processes need MPI to meet", "bootstrap", err);
#endif
    }
    gr_nccl.compute = compute_stream;
    GR_CUDA_TRY(c, cudaStreamCreateWithFlags(&gr_nccl.stream, cudaStreamNonBlocking), "its stream", err);
    GR_CUDA_TRY(c, cudaEventCreateWithFlags(&gr_nccl.ready, cudaEventDisableTiming), "its events", err);
    GR_CUDA_TRY(c, cudaEventCreateWithFlags(&gr_nccl.done, cudaEventDisableTiming), "its events", err);
    GR_NCCL_TRY(c, ncclCommInitRank(&gr_nccl.comm, c->world, id, c->rank), "joining the ranks' GPUs", err);
    c->nccl = true;
    return GR_OK;
}

/* the collective's stream waits for what the compute stream has queued */
static gr_status gr_nccl_after_compute(gr_comm *c, const char *what, gr_error *err) {
    GR_CUDA_TRY(c, cudaEventRecord(gr_nccl.ready, gr_nccl.compute), what, err);
    GR_CUDA_TRY(c, cudaStreamWaitEvent(gr_nccl.stream, gr_nccl.ready, 0), what, err);
    gr_nccl.pending = true;
    return GR_OK;
}

gr_status gr_comm_nccl_isum(gr_comm *c, float *buf, int64_t n, const char *what, gr_error *err) {
    gr_status st = gr_nccl_after_compute(c, what, err);
    if (st) return st;
    GR_NCCL_TRY(c, ncclAllReduce(buf, buf, (size_t)n, ncclFloat, ncclSum, gr_nccl.comm, gr_nccl.stream), what, err);
    return GR_OK;
}

gr_status gr_comm_nccl_bcast(gr_comm *c, float *buf, int64_t n, const char *what, gr_error *err) {
    gr_status st = gr_nccl_after_compute(c, what, err);
    if (st) return st;
    GR_NCCL_TRY(c, ncclBroadcast(buf, buf, (size_t)n, ncclFloat, 0, gr_nccl.comm, gr_nccl.stream), what, err);
    return gr_comm_nccl_wait(c, true, err);
}

gr_status gr_comm_nccl_wait(gr_comm *c, bool host, gr_error *err) {
    if (!gr_nccl.pending) return GR_OK;
    gr_nccl.pending = false;
    GR_CUDA_TRY(c, cudaEventRecord(gr_nccl.done, gr_nccl.stream), "the collectives' end", err);
    GR_CUDA_TRY(c, cudaStreamWaitEvent(gr_nccl.compute, gr_nccl.done, 0), "the collectives' end", err);
    /* host: the caller waits here (under the runner's watchdog), so a lost rank is seen at its collective */
    if (host) GR_CUDA_TRY(c, cudaStreamSynchronize(gr_nccl.stream), "waiting for the collectives", err);
    return GR_OK;
}

bool gr_comm_nccl_failed(void) {
    ncclResult_t a = ncclSuccess;
    return gr_nccl.comm && ncclCommGetAsyncError(gr_nccl.comm, &a) == ncclSuccess && a != ncclSuccess &&
           a != ncclInProgress;
}

void gr_comm_nccl_abort(void) {
    if (gr_nccl.comm) ncclCommAbort(gr_nccl.comm);
    gr_nccl.comm = NULL;
}

void gr_comm_nccl_close(void) {
    if (!gr_nccl.comm) return;
    (void)cudaStreamSynchronize(gr_nccl.stream);
    ncclCommDestroy(gr_nccl.comm);
    gr_nccl.comm = NULL;
    (void)cudaEventDestroy(gr_nccl.ready);
    (void)cudaEventDestroy(gr_nccl.done);
    (void)cudaStreamDestroy(gr_nccl.stream);
}
