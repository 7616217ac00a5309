/* comm_group.c — the operations beyond the sums (comm.h): point-to-point
 * sends and receives, reduce-scatter, all-gather, and sub-communicators
 * (gr_comm_split, gr_comm_free). Each checks its arguments the same way on
 * every rank (so a refusal is every rank's, before any of them talks),
 * does a world of 1's work itself, and hands the rest to NCCL (GPU
 * buffers: comm_nccl.c) or MPI (comm_mpi.c). */
#include <limits.h>
#include <string.h>

#include "comm.h"
#include "comm_internal.h"

/* the largest tag every MPI accepts (MPI_TAG_UB is at least this) */
#define GR_COMM_TAG_MAX 32767

/* peer and tag of a send or receive: GR_ERR_USAGE naming the operation and the peer */
static gr_status gr_comm_check_p2p(const gr_comm *c, const char *op, int64_t n, int peer, int tag, bool started,
                                   const char *what, gr_error *err) {
    if (peer < 0 || peer >= c->world)
        return gr_error_set(err, GR_ERR_USAGE, "%s (%s): peer rank %d is not a rank of this communicator (0..%d)",
                            op, what, peer, c->world - 1);
    if (peer == c->rank)
        return gr_error_set(err, GR_ERR_USAGE, "%s (%s): peer rank %d is this rank: a send or receive needs "
                            "another rank (of %d)", op, what, peer, c->world);
    if (tag < 0 || tag > GR_COMM_TAG_MAX)
        return gr_error_set(err, GR_ERR_USAGE, "%s (%s) with rank %d: tag %d is not in 0..%d", op, what, peer, tag,
                            GR_COMM_TAG_MAX);
    if (n < 0 || (started && n > INT_MAX))
        return gr_error_set(err, GR_ERR_USAGE, "%s (%s) with rank %d: %lld floats (a started one takes 0..%d)", op,
                            what, peer, (long long)n, INT_MAX);
    return GR_OK;
}

static gr_status gr_comm_p2p(gr_comm *c, const char *op, float *buf, int64_t n, int peer, int tag, bool send,
                             bool started, const char *what, gr_error *err) {
    gr_status st = gr_comm_check_p2p(c, op, n, peer, tag, started, what, err);
    if (st) return st;
#ifdef GR_HAVE_NCCL
    if (c->nccl) return gr_comm_nccl_p2p(c, buf, n, peer, send, started, what, err);
#endif
#ifdef GR_HAVE_MPI
    if (c->kind == GR_COMM_MPI) return gr_comm_mpi_p2p(c, buf, n, peer, tag, send, started, what, err);
#endif
    /* a world of 1 has no other rank: refused above */
    (void)buf, (void)send;
    return gr_error_set(err, GR_ERR_INTERNAL, "%s (%s): no communicator reaches rank %d", op, what, peer);
}

gr_status gr_comm_send_f32(gr_comm *c, const float *buf, int64_t n, int peer, int tag, const char *what,
                           gr_error *err) {
    return gr_comm_p2p(c, "send", (float *)buf, n, peer, tag, true, false, what, err); /* only read */
}

gr_status gr_comm_recv_f32(gr_comm *c, float *buf, int64_t n, int peer, int tag, const char *what, gr_error *err) {
    return gr_comm_p2p(c, "receive", buf, n, peer, tag, false, false, what, err);
}

gr_status gr_comm_isend_f32(gr_comm *c, const float *buf, int64_t n, int peer, int tag, const char *what,
                            gr_error *err) {
    return gr_comm_p2p(c, "started send", (float *)buf, n, peer, tag, true, true, what, err); /* only read */
}

gr_status gr_comm_irecv_f32(gr_comm *c, float *buf, int64_t n, int peer, int tag, const char *what, gr_error *err) {
    return gr_comm_p2p(c, "started receive", buf, n, peer, tag, false, true, what, err);
}

/* a world of 1's reduce-scatter and all-gather: recv = send (host buffers) */
static void gr_comm_copy(const float *send, float *recv, int64_t n) {
    if (send != recv && n > 0) memmove(recv, send, (size_t)n * sizeof *recv);
}

gr_status gr_comm_reduce_scatter_f32(gr_comm *c, const float *send, float *recv, int64_t n, const char *what,
                                     gr_error *err) {
    if (n < 0 || n % c->world)
        return gr_error_set(err, GR_ERR_USAGE, "reduce-scatter (%s): %lld floats do not split into %d equal shares "
                            "(pad to a multiple of %d)", what, (long long)n, c->world, c->world);
    const int64_t share = n / c->world;
    if (share > INT_MAX)
        return gr_error_set(err, GR_ERR_USAGE, "reduce-scatter (%s): a share of %lld floats is over %d", what,
                            (long long)share, INT_MAX);
    GR_ASSERT(share == 0 || recv + share <= send || send + n <= recv); /* no overlap */
#ifdef GR_HAVE_NCCL
    if (c->nccl) return gr_comm_nccl_reduce_scatter(c, send, recv, share, what, err);
#endif
#ifdef GR_HAVE_MPI
    if (c->kind == GR_COMM_MPI) return gr_comm_mpi_reduce_scatter(c, send, recv, share, what, err);
#endif
    (void)err;
    gr_comm_copy(send, recv, n);
    return GR_OK;
}

gr_status gr_comm_all_gather_f32(gr_comm *c, const float *send, float *recv, int64_t n, const char *what,
                                 gr_error *err) {
    if (n < 0 || n > INT_MAX)
        return gr_error_set(err, GR_ERR_USAGE, "all-gather (%s): %lld floats from each rank (0..%d)", what,
                            (long long)n, INT_MAX);
    const float *mine = recv + (int64_t)c->rank * n;
    GR_ASSERT(n == 0 || send == mine || send + n <= recv || recv + c->world * n <= send); /* in place, or apart */
#ifdef GR_HAVE_NCCL
    if (c->nccl) return gr_comm_nccl_all_gather(c, send, recv, n, what, err);
#endif
#ifdef GR_HAVE_MPI
    if (c->kind == GR_COMM_MPI) return gr_comm_mpi_all_gather(c, send, recv, n, what, err);
#endif
    (void)err;
    gr_comm_copy(send, recv, n);
    return GR_OK;
}

void gr_comm_free(gr_comm *child) {
    if (!child->sub) return;
#ifdef GR_HAVE_NCCL
    if (child->gpu) gr_comm_nccl_close(child); /* (never the world's: child->gpu is its own) */
#endif
#ifdef GR_HAVE_MPI
    gr_comm_mpi_free(child);
#endif
    child->nccl = child->sub = child->joined = false;
    child->kind = GR_COMM_NONE;
    child->rank = 0;
    child->world = 1;
}

gr_status gr_comm_split(gr_comm *parent, int color, int key, gr_comm *child, gr_error *err) {
    GR_ASSERT(child != parent && (parent->kind != GR_COMM_NONE || parent->world == 1)); /* opened */
    memset(child, 0, sizeof *child);
    child->world = 1;
    if (color < 0)
        return gr_error_set(err, GR_ERR_USAGE, "splitting a communicator: color %d (key %d) is negative: every "
                            "rank needs a group (color >= 0)", color, key);
    gr_comm c = *parent; /* kind, local rank, launcher, joined */
    c.agreed = c.nccl = false;
    c.mpi = NULL;
    c.gpu = NULL;
    c.sub = true;
    c.rank = 0;
    c.world = 1;
    gr_status st = GR_OK;
#ifdef GR_HAVE_MPI
    if (c.kind == GR_COMM_MPI) st = gr_comm_mpi_split(parent, color, key, &c, err);
#endif
#ifdef GR_HAVE_NCCL
    if (!st && parent->nccl) st = gr_comm_nccl_split(parent, color, key, &c, err);
#endif
    if (st) {
        gr_comm_free(&c);
        return st;
    }
    *child = c;
    return GR_OK;
}
