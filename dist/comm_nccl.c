/* comm_nccl.c — the collectives and point-to-point operations on GPU
 * buffers over NCCL (comm.h), built with CUDA. The world's communicator is
 * one per process, bootstrapped with MPI (rank 0's ncclUniqueId broadcast)
 * or, for one process, by itself; one GPU per rank (the runner picks
 * cuda:<local rank>). A sub-communicator (gr_comm_split) is ncclCommSplit
 * of its parent's, with a stream of its own. Operations run on the
 * communicator's stream, ordered after the compute stream's work so far by
 * an event, and the compute stream waits for them (another event) at
 * gr_comm_wait_all, so a bucket's sum overlaps the rest of backward.
 * Started sends and receives gather in one NCCL group until the next wait
 * or other operation. NCCL's asynchronous errors are polled by the runner's
 * watchdog (gr_comm_gpu_failed) and abort the communicator. */
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm_internal.h"

#ifdef GR_HAVE_MPI
#include <mpi.h>
#endif

struct gr_comm_nccl {
    ncclComm_t comm;
    cudaStream_t compute, stream;
    cudaEvent_t ready, done;
    bool pending;       /* operations started since the last wait */
};

static struct gr_comm_nccl gr_nccl_world;

/* The open group of started sends and receives (ncclGroupStart): NCCL's
 * groups belong to the calling thread, not to a communicator, so there is
 * one, of one communicator (owner), ended before any other operation. */
static struct {
    struct gr_comm_nccl *owner; /* NULL: none open */
    char what[160];             /* its first operation, for an error at ncclGroupEnd */
} gr_nccl_group;

static struct gr_comm_nccl *gr_nccl_of(const gr_comm *c) {
    return c->gpu ? c->gpu : &gr_nccl_world;
}

static gr_status gr_nccl_error(const gr_comm *c, const char *call, const char *msg, const char *what, gr_error *err) {
    return gr_error_set(err, GR_ERR_DEVICE, "rank %d of %d%s: %s (%s) failed: %s", c->rank, c->world,
                        c->sub ? " of a sub-communicator" : "", call, what, msg);
}

#define GR_NCCL_TRY(c, call, what, err) do { \
    ncclResult_t r_ = (call); \
    if (r_ != ncclSuccess) return gr_nccl_error(c, #call, ncclGetErrorString(r_), what, err); \
} while (0)
#define GR_CUDA_TRY(c, call, what, err) do { \
    cudaError_t e_ = (call); \
    if (e_ != cudaSuccess) return gr_nccl_error(c, #call, cudaGetErrorString(e_), what, err); \
} while (0)

static gr_status gr_nccl_streams(const gr_comm *c, struct gr_comm_nccl *g, cudaStream_t compute, gr_error *err) {
    g->compute = compute;
    GR_CUDA_TRY(c, cudaStreamCreateWithFlags(&g->stream, cudaStreamNonBlocking), "its stream", err);
    GR_CUDA_TRY(c, cudaEventCreateWithFlags(&g->ready, cudaEventDisableTiming), "its events", err);
    GR_CUDA_TRY(c, cudaEventCreateWithFlags(&g->done, cudaEventDisableTiming), "its events", err);
    return GR_OK;
}

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
    gr_status st = gr_nccl_streams(c, &gr_nccl_world, compute_stream, err);
    if (st) return st;
    GR_NCCL_TRY(c, ncclCommInitRank(&gr_nccl_world.comm, c->world, id, c->rank), "joining the ranks' GPUs", err);
    c->nccl = true;
    return GR_OK;
}

/* runs the open group (its operations queued on its owner's stream) */
static gr_status gr_nccl_end_group(const gr_comm *c, gr_error *err) {
    if (!gr_nccl_group.owner) return GR_OK;
    gr_nccl_group.owner = NULL;
    GR_NCCL_TRY(c, ncclGroupEnd(), gr_nccl_group.what, err);
    return GR_OK;
}

/* Before an operation: the stream waits for what the compute stream has
 * queued; an open group is run first, unless this operation joins it (a
 * started send or receive of the group's communicator). */
static gr_status gr_nccl_begin(gr_comm *c, struct gr_comm_nccl *g, bool grouped, const char *what, gr_error *err) {
    if (gr_nccl_group.owner && (!grouped || gr_nccl_group.owner != g)) {
        gr_status st = gr_nccl_end_group(c, err);
        if (st) return st;
    }
    GR_CUDA_TRY(c, cudaEventRecord(g->ready, g->compute), what, err);
    GR_CUDA_TRY(c, cudaStreamWaitEvent(g->stream, g->ready, 0), what, err);
    g->pending = true;
    if (grouped && !gr_nccl_group.owner) {
        GR_NCCL_TRY(c, ncclGroupStart(), what, err);
        gr_nccl_group.owner = g;
        snprintf(gr_nccl_group.what, sizeof gr_nccl_group.what, "%s", what);
    }
    return GR_OK;
}

gr_status gr_comm_nccl_isum(gr_comm *c, float *buf, int64_t n, const char *what, gr_error *err) {
    struct gr_comm_nccl *g = gr_nccl_of(c);
    gr_status st = gr_nccl_begin(c, g, false, what, err);
    if (st) return st;
    GR_NCCL_TRY(c, ncclAllReduce(buf, buf, (size_t)n, ncclFloat, ncclSum, g->comm, g->stream), what, err);
    return GR_OK;
}

gr_status gr_comm_nccl_bcast(gr_comm *c, float *buf, int64_t n, const char *what, gr_error *err) {
    struct gr_comm_nccl *g = gr_nccl_of(c);
    gr_status st = gr_nccl_begin(c, g, false, what, err);
    if (st) return st;
    GR_NCCL_TRY(c, ncclBroadcast(buf, buf, (size_t)n, ncclFloat, 0, g->comm, g->stream), what, err);
    return gr_comm_nccl_wait(c, true, err);
}

gr_status gr_comm_nccl_p2p(gr_comm *c, float *buf, int64_t n, int peer, bool send, bool started, const char *what,
                           gr_error *err) {
    struct gr_comm_nccl *g = gr_nccl_of(c);
    char call[64], desc[160]; /* "ncclSend to rank 1"; for the group's error: "what; ncclSend to rank 1" */
    snprintf(call, sizeof call, "%s rank %d", send ? "ncclSend to" : "ncclRecv from", peer);
    snprintf(desc, sizeof desc, "%s; %s", what, call);
    gr_status st = gr_nccl_begin(c, g, started, desc, err);
    if (st) return st;
    ncclResult_t r = send ? ncclSend(buf, (size_t)n, ncclFloat, peer, g->comm, g->stream)
                          : ncclRecv(buf, (size_t)n, ncclFloat, peer, g->comm, g->stream);
    if (r != ncclSuccess) {
        if (gr_nccl_group.owner) { /* close the group, so that no later call of this thread lands in it */
            gr_nccl_group.owner = NULL;
            (void)ncclGroupEnd();
        }
        return gr_nccl_error(c, call, ncclGetErrorString(r), what, err);
    }
    return started ? GR_OK : gr_comm_nccl_wait(c, true, err);
}

gr_status gr_comm_nccl_reduce_scatter(gr_comm *c, const float *send, float *recv, int64_t share, const char *what,
                                      gr_error *err) {
    struct gr_comm_nccl *g = gr_nccl_of(c);
    gr_status st = gr_nccl_begin(c, g, false, what, err);
    if (st) return st;
    GR_NCCL_TRY(c, ncclReduceScatter(send, recv, (size_t)share, ncclFloat, ncclSum, g->comm, g->stream), what, err);
    return gr_comm_nccl_wait(c, true, err);
}

gr_status gr_comm_nccl_all_gather(gr_comm *c, const float *send, float *recv, int64_t n, const char *what,
                                  gr_error *err) {
    struct gr_comm_nccl *g = gr_nccl_of(c);
    gr_status st = gr_nccl_begin(c, g, false, what, err);
    if (st) return st;
    /* in place (send == recv + rank * n) is NCCL's own convention too */
    GR_NCCL_TRY(c, ncclAllGather(send, recv, (size_t)n, ncclFloat, g->comm, g->stream), what, err);
    return gr_comm_nccl_wait(c, true, err);
}

gr_status gr_comm_nccl_wait(gr_comm *c, bool host, gr_error *err) {
    struct gr_comm_nccl *g = gr_nccl_of(c);
    if (!g->pending) return GR_OK;
    g->pending = false;
    if (gr_nccl_group.owner == g) {
        gr_status st = gr_nccl_end_group(c, err);
        if (st) return st;
    }
    GR_CUDA_TRY(c, cudaEventRecord(g->done, g->stream), "the collectives' end", err);
    GR_CUDA_TRY(c, cudaStreamWaitEvent(g->compute, g->done, 0), "the collectives' end", err);
    /* host: the caller waits here (under the runner's watchdog), so a lost rank is seen at its collective */
    if (host) GR_CUDA_TRY(c, cudaStreamSynchronize(g->stream), "waiting for the collectives", err);
    return GR_OK;
}

gr_status gr_comm_nccl_split(const gr_comm *parent, int color, int key, gr_comm *child, gr_error *err) {
    const struct gr_comm_nccl *pg = gr_nccl_of(parent);
    char what[64];
    snprintf(what, sizeof what, "color %d, key %d", color, key);
    gr_status st = gr_nccl_end_group(parent, err); /* (not into a group of sends and receives) */
    if (st) return st;
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 18, 0)
    struct gr_comm_nccl *g = gr_xcalloc(1, sizeof *g);
    ncclResult_t r = ncclCommSplit(pg->comm, color, key, &g->comm, NULL);
    if (r != ncclSuccess) {
        free(g);
        return gr_nccl_error(parent, "ncclCommSplit", ncclGetErrorString(r), what, err);
    }
    child->gpu = g;
    child->nccl = true;
    int rank = -1, world = 0;
    GR_NCCL_TRY(parent, ncclCommUserRank(g->comm, &rank), what, err);
    GR_NCCL_TRY(parent, ncclCommCount(g->comm, &world), what, err);
    if (child->mpi && (rank != child->rank || world != child->world))
        return gr_nccl_error(parent, "ncclCommSplit", "its ranks are not MPI_Comm_split's", what, err);
    child->rank = rank;
    child->world = world;
    return gr_nccl_streams(child, g, pg->compute, err);
#else
    (void)pg, (void)child;
    return gr_nccl_error(parent, "ncclCommSplit", "this build's NCCL is older than 2.18", what, err);
#endif
}

bool gr_comm_nccl_failed(const gr_comm *c) {
    const struct gr_comm_nccl *g = gr_nccl_of(c);
    ncclResult_t a = ncclSuccess;
    return g->comm && ncclCommGetAsyncError(g->comm, &a) == ncclSuccess && a != ncclSuccess && a != ncclInProgress;
}

void gr_comm_nccl_abort(gr_comm *c) {
    struct gr_comm_nccl *g = gr_nccl_of(c);
    if (g->comm) ncclCommAbort(g->comm);
    g->comm = NULL;
}

void gr_comm_nccl_close(gr_comm *c) {
    struct gr_comm_nccl *g = gr_nccl_of(c);
    if (gr_nccl_group.owner == g) {
        gr_nccl_group.owner = NULL;
        (void)ncclGroupEnd();
    }
    if (g->comm) { /* (an aborted or never made communicator: its stream is left as it is) */
        if (g->stream) (void)cudaStreamSynchronize(g->stream);
        ncclCommDestroy(g->comm);
        g->comm = NULL;
        if (g->ready) (void)cudaEventDestroy(g->ready);
        if (g->done) (void)cudaEventDestroy(g->done);
        if (g->stream) (void)cudaStreamDestroy(g->stream);
    }
    if (c->gpu) {
        free(c->gpu);
        c->gpu = NULL;
    }
}
