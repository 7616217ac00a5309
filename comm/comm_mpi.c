/* comm_mpi.c — the collectives over MPI (comm.h). Errors are returned, not
 * fatal (MPI_ERRORS_RETURN on the world communicator), so the runner can
 * name the operation and exit 7. Counts above INT_MAX go in pieces. */
#include <limits.h>
#include <mpi.h>
#include <stdio.h>

#include "comm_internal.h"

static gr_status gr_mpi_error(const gr_comm *c, int rc, const char *call, const char *what, gr_error *err) {
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS) snprintf(msg, sizeof msg, "MPI error %d", rc);
    return gr_error_set(err, GR_ERR_DEVICE, "rank %d of %d: %s (%s) failed: %s", c->rank, c->world, call, what,
                        msg);
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
        int rc = MPI_Allreduce(MPI_IN_PLACE, (char *)buf + (size_t)off * size, cnt, dt, MPI_SUM, MPI_COMM_WORLD);
        if (rc != MPI_SUCCESS) return gr_mpi_error(c, rc, "MPI_Allreduce", what, err);
    }
    return GR_OK;
}

/* the started sums (one process, one thread: a static table) */
static MPI_Request gr_mpi_req[GR_COMM_MAX_PENDING];
static const char *gr_mpi_what[GR_COMM_MAX_PENDING];
static int gr_mpi_n;

gr_status gr_comm_mpi_isum(gr_comm *c, float *buf, int64_t n, const char *what, gr_error *err) {
    GR_ASSERT(n <= INT_MAX && gr_mpi_n < GR_COMM_MAX_PENDING);
    int rc = MPI_Iallreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &gr_mpi_req[gr_mpi_n]);
    if (rc != MPI_SUCCESS) return gr_mpi_error(c, rc, "MPI_Iallreduce", what, err);
    gr_mpi_what[gr_mpi_n++] = what;
    return GR_OK;
}

gr_status gr_comm_mpi_progress(gr_comm *c, bool wait, gr_error *err) {
    if (!gr_mpi_n) return GR_OK;
    int done = 0, rc = wait ? MPI_Waitall(gr_mpi_n, gr_mpi_req, MPI_STATUSES_IGNORE)
                            : MPI_Testall(gr_mpi_n, gr_mpi_req, &done, MPI_STATUSES_IGNORE);
    if (rc != MPI_SUCCESS) {
        gr_mpi_n = 0;
        return gr_mpi_error(c, rc, wait ? "MPI_Waitall" : "MPI_Testall", gr_mpi_what[0], err);
    }
    if (wait || done) gr_mpi_n = 0; /* every request finished (and was freed) */
    return GR_OK;
}

gr_status gr_comm_mpi_bcast(gr_comm *c, float *buf, int64_t n, const char *what, gr_error *err) {
    for (int64_t off = 0; off < n; off += INT_MAX) {
        int cnt = (int)(n - off < INT_MAX ? n - off : INT_MAX);
        int rc = MPI_Bcast(buf + off, cnt, MPI_FLOAT, 0, MPI_COMM_WORLD);
        if (rc != MPI_SUCCESS) return gr_mpi_error(c, rc, "MPI_Bcast", what, err);
    }
    return GR_OK;
}

gr_status gr_comm_mpi_max_int(gr_comm *c, int *v, const char *what, gr_error *err) {
    int rc = MPI_Allreduce(MPI_IN_PLACE, v, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    return rc == MPI_SUCCESS ? GR_OK : gr_mpi_error(c, rc, "MPI_Allreduce", what, err);
}

void gr_comm_mpi_close(gr_comm *c, int abort_code) {
    if (abort_code && c->world > 1) {
        fflush(stdout);
        fflush(stderr);
        MPI_Abort(MPI_COMM_WORLD, abort_code);
    }
    MPI_Finalize();
}
