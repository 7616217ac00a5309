/* comm_mpi.c — the collectives and point-to-point operations over MPI
 * (comm.h). Errors are returned, not fatal (MPI_ERRORS_RETURN on the world
 * communicator and on every sub-communicator), so the runner can name the
 * operation and exit 7. Counts above INT_MAX go in pieces (the blocking sum,
 * broadcast, send and receive). The world's operations use MPI_COMM_WORLD
 * and a static table of started ones; a sub-communicator (gr_comm_split)
 * has its own of both, in c->mpi. */
#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include "comm_internal.h"

/* a started operation: a sum (peer -1) or a send or receive of n floats */
typedef struct gr_mpi_op {
    const char *what;
    int peer;
    bool send;
    int64_t n;
} gr_mpi_op;

/* a communicator and its started operations (one process, one thread) */
struct gr_comm_mpi {
    MPI_Comm comm;
    int n;
    MPI_Request req[GR_COMM_MAX_PENDING];
    MPI_Status status[GR_COMM_MAX_PENDING];
    gr_mpi_op op[GR_COMM_MAX_PENDING];
};

static struct gr_comm_mpi gr_mpi_world; /* .comm unused: MPI_COMM_WORLD (gr_mpi_comm) */

static struct gr_comm_mpi *gr_mpi_of(const gr_comm *c) {
    return c->mpi ? c->mpi : &gr_mpi_world;
}

static MPI_Comm gr_mpi_comm(const gr_comm *c) {
    return c->mpi ? c->mpi->comm : MPI_COMM_WORLD;
}

static gr_status gr_mpi_error(const gr_comm *c, int rc, const char *call, const char *what, gr_error *err) {
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS) snprintf(msg, sizeof msg, "MPI error %d", rc);
    return gr_error_set(err, GR_ERR_DEVICE, "rank %d of %d%s: %s (%s) failed: %s", c->rank, c->world,
                        c->sub ? " of a sub-communicator" : "", call, what, msg);
}

/* "MPI_Send to rank 3" */
static const char *gr_mpi_p2p_call(char *buf, size_t size, const char *call, bool send, int peer) {
    snprintf(buf, size, "%s %s rank %d", call, send ? "to" : "from", peer);
    return buf;
}

gr_status gr_comm_mpi_open(gr_comm *c, gr_error *err) {
    int inited = 0, provided = 0, rank = 0, world = 0, rc;
    MPI_Initialized(&inited);
    if (!inited && (rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided)) != MPI_SUCCESS)
        return gr_mpi_error(c, rc, "MPI_Init_thread", "joining the launched processes", err);
    c->kind = GR_COMM_MPI;
    c->joined = true;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    if (rank != c->rank || world != c->world)
        return gr_error_set(err, GR_ERR_DEVICE, "MPI says rank %d of %d, but the launcher's environment (%s) said "
                            "rank %d of %d", rank, world, c->launcher[0] ? c->launcher : "none", c->rank, c->world);
    return GR_OK;
}

gr_status gr_comm_mpi_sum(gr_comm *c, void *buf, int64_t n, gr_comm_dtype t, const char *what, gr_error *err) {
    const size_t size = t == GR_COMM_F32 ? sizeof(float) : sizeof(double);
    MPI_Datatype dt = t == GR_COMM_F32 ? MPI_FLOAT : MPI_DOUBLE;
    for (int64_t off = 0; off < n; off += INT_MAX) {
        int cnt = (int)(n - off < INT_MAX ? n - off : INT_MAX);
        int rc = MPI_Allreduce(MPI_IN_PLACE, (char *)buf + (size_t)off * size, cnt, dt, MPI_SUM, gr_mpi_comm(c));
        if (rc != MPI_SUCCESS) return gr_mpi_error(c, rc, "MPI_Allreduce", what, err);
    }
    return GR_OK;
}

gr_status gr_comm_mpi_isum(gr_comm *c, float *buf, int64_t n, const char *what, gr_error *err) {
    struct gr_comm_mpi *m = gr_mpi_of(c);
    GR_ASSERT(n <= INT_MAX && m->n < GR_COMM_MAX_PENDING);
    int rc = MPI_Iallreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, gr_mpi_comm(c), &m->req[m->n]);
    if (rc != MPI_SUCCESS) return gr_mpi_error(c, rc, "MPI_Iallreduce", what, err);
    m->op[m->n++] = (gr_mpi_op){.what = what, .peer = -1};
    return GR_OK;
}

/* the started operations' failure: the one MPI says failed (else the first) */
static gr_status gr_mpi_pending_error(gr_comm *c, struct gr_comm_mpi *m, int rc, bool wait, gr_error *err) {
    int bad = 0;
    for (int i = 0; rc == MPI_ERR_IN_STATUS && i < m->n; i++)
        if (m->status[i].MPI_ERROR != MPI_SUCCESS && m->status[i].MPI_ERROR != MPI_ERR_PENDING) {
            bad = i;
            rc = m->status[i].MPI_ERROR;
            break;
        }
    const gr_mpi_op *o = &m->op[bad];
    char what[256], call[64];
    if (o->peer < 0) snprintf(what, sizeof what, "%s", o->what);
    else snprintf(what, sizeof what, "%s; %s", o->what,
                  gr_mpi_p2p_call(call, sizeof call, o->send ? "MPI_Isend" : "MPI_Irecv", o->send, o->peer));
    m->n = 0;
    return gr_mpi_error(c, rc, wait ? "MPI_Waitall" : "MPI_Testall", what, err);
}

/* the finished receives got what they asked for (a shorter message is no error to MPI) */
static gr_status gr_mpi_check_counts(gr_comm *c, struct gr_comm_mpi *m, gr_error *err) {
    for (int i = 0; i < m->n; i++) {
        const gr_mpi_op *o = &m->op[i];
        int got = 0;
        if (o->peer < 0 || o->send) continue;
        MPI_Get_count(&m->status[i], MPI_FLOAT, &got);
        if (got != o->n) {
            m->n = 0;
            return gr_error_set(err, GR_ERR_DEVICE, "rank %d of %d%s: MPI_Irecv from rank %d (%s) failed: got "
                                "%d floats, expected %lld", c->rank, c->world, c->sub ? " of a sub-communicator" : "",
                                o->peer, o->what, got, (long long)o->n);
        }
    }
    return GR_OK;
}

gr_status gr_comm_mpi_progress(gr_comm *c, bool wait, gr_error *err) {
    struct gr_comm_mpi *m = gr_mpi_of(c);
    if (!m->n) return GR_OK;
    int done = 0, rc = wait ? MPI_Waitall(m->n, m->req, m->status) : MPI_Testall(m->n, m->req, &done, m->status);
    if (rc != MPI_SUCCESS) return gr_mpi_pending_error(c, m, rc, wait, err);
    if (!wait && !done) return GR_OK;
    gr_status st = gr_mpi_check_counts(c, m, err);
    m->n = 0; /* every request finished (and was freed) */
    return st;
}

gr_status gr_comm_mpi_bcast(gr_comm *c, float *buf, int64_t n, const char *what, gr_error *err) {
    for (int64_t off = 0; off < n; off += INT_MAX) {
        int cnt = (int)(n - off < INT_MAX ? n - off : INT_MAX);
        int rc = MPI_Bcast(buf + off, cnt, MPI_FLOAT, 0, gr_mpi_comm(c));
        if (rc != MPI_SUCCESS) return gr_mpi_error(c, rc, "MPI_Bcast", what, err);
    }
    return GR_OK;
}

gr_status gr_comm_mpi_max_int(gr_comm *c, int *v, const char *what, gr_error *err) {
    int rc = MPI_Allreduce(MPI_IN_PLACE, v, 1, MPI_INT, MPI_MAX, gr_mpi_comm(c));
    return rc == MPI_SUCCESS ? GR_OK : gr_mpi_error(c, rc, "MPI_Allreduce", what, err);
}

static gr_status gr_mpi_start_p2p(gr_comm *c, float *buf, int64_t n, int peer, int tag, bool send, const char *what,
                                  gr_error *err) {
    struct gr_comm_mpi *m = gr_mpi_of(c);
    GR_ASSERT(n <= INT_MAX && m->n < GR_COMM_MAX_PENDING);
    int rc = send ? MPI_Isend(buf, (int)n, MPI_FLOAT, peer, tag, gr_mpi_comm(c), &m->req[m->n])
                  : MPI_Irecv(buf, (int)n, MPI_FLOAT, peer, tag, gr_mpi_comm(c), &m->req[m->n]);
    char call[64];
    if (rc != MPI_SUCCESS)
        return gr_mpi_error(c, rc, gr_mpi_p2p_call(call, sizeof call, send ? "MPI_Isend" : "MPI_Irecv", send, peer),
                            what, err);
    m->op[m->n++] = (gr_mpi_op){.what = what, .peer = peer, .send = send, .n = n};
    return GR_OK;
}

gr_status gr_comm_mpi_p2p(gr_comm *c, float *buf, int64_t n, int peer, int tag, bool send, bool started,
                          const char *what, gr_error *err) {
    if (started) return gr_mpi_start_p2p(c, buf, n, peer, tag, send, what, err);
    char call[64];
    for (int64_t off = 0; off < n || off == 0; off += INT_MAX) { /* n == 0: one empty message */
        int cnt = (int)(n - off < INT_MAX ? n - off : INT_MAX), got = 0, rc;
        MPI_Status stat;
        rc = send ? MPI_Send(buf + off, cnt, MPI_FLOAT, peer, tag, gr_mpi_comm(c))
                  : MPI_Recv(buf + off, cnt, MPI_FLOAT, peer, tag, gr_mpi_comm(c), &stat);
        if (rc != MPI_SUCCESS)
            return gr_mpi_error(c, rc, gr_mpi_p2p_call(call, sizeof call, send ? "MPI_Send" : "MPI_Recv", send, peer),
                                what, err);
        if (!send && (MPI_Get_count(&stat, MPI_FLOAT, &got), got != cnt))
            return gr_error_set(err, GR_ERR_DEVICE, "rank %d of %d%s: MPI_Recv from rank %d (%s) failed: got %d "
                                "floats, expected %d", c->rank, c->world, c->sub ? " of a sub-communicator" : "",
                                peer, what, got, cnt);
        if (n == 0) break;
    }
    return GR_OK;
}

gr_status gr_comm_mpi_reduce_scatter(gr_comm *c, const float *send, float *recv, int64_t share, const char *what,
                                     gr_error *err) {
    GR_ASSERT(share <= INT_MAX);
    int rc = MPI_Reduce_scatter_block(send, recv, (int)share, MPI_FLOAT, MPI_SUM, gr_mpi_comm(c));
    return rc == MPI_SUCCESS ? GR_OK : gr_mpi_error(c, rc, "MPI_Reduce_scatter_block", what, err);
}

gr_status gr_comm_mpi_all_gather(gr_comm *c, const float *send, float *recv, int64_t n, const char *what,
                                 gr_error *err) {
    GR_ASSERT(n <= INT_MAX);
    const void *in = send == recv + (int64_t)c->rank * n ? MPI_IN_PLACE : (const void *)send;
    int rc = MPI_Allgather(in, (int)n, MPI_FLOAT, recv, (int)n, MPI_FLOAT, gr_mpi_comm(c));
    return rc == MPI_SUCCESS ? GR_OK : gr_mpi_error(c, rc, "MPI_Allgather", what, err);
}

gr_status gr_comm_mpi_split(const gr_comm *parent, int color, int key, gr_comm *child, gr_error *err) {
    struct gr_comm_mpi *m = gr_xcalloc(1, sizeof *m);
    int rc = MPI_Comm_split(gr_mpi_comm(parent), color, key, &m->comm);
    if (rc != MPI_SUCCESS) {
        free(m);
        char what[64];
        snprintf(what, sizeof what, "color %d, key %d", color, key);
        return gr_mpi_error(parent, rc, "MPI_Comm_split", what, err);
    }
    MPI_Comm_set_errhandler(m->comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(m->comm, &child->rank);
    MPI_Comm_size(m->comm, &child->world);
    child->mpi = m;
    return GR_OK;
}

void gr_comm_mpi_free(gr_comm *c) {
    if (!c->mpi) return;
    GR_ASSERT(c->mpi->n == 0); /* its started operations were waited for */
    MPI_Comm_free(&c->mpi->comm);
    free(c->mpi);
    c->mpi = NULL;
}

void gr_comm_mpi_close(gr_comm *c, int abort_code) {
    if (abort_code && c->world > 1) {
        fflush(stdout);
        fflush(stderr);
        MPI_Abort(MPI_COMM_WORLD, abort_code);
    }
    MPI_Finalize();
}
