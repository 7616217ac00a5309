/* comm_internal.h — what comm.c and comm_group.c call in comm_mpi.c (built
 * with MPI only) and comm_nccl.c (built with NCCL only). Each takes the
 * gr_comm whose handles it uses: c->mpi / c->gpu, or the world's when NULL.
 * The arguments were checked by the caller (peers, counts, divisibility). */
#ifndef GR_COMM_INTERNAL_H
#define GR_COMM_INTERNAL_H

#include "comm.h"

typedef enum { GR_COMM_F32, GR_COMM_F64 } gr_comm_dtype;

gr_status gr_comm_mpi_open(gr_comm *c, gr_error *err);
gr_status gr_comm_mpi_sum(gr_comm *c, void *buf, int64_t n, gr_comm_dtype t, const char *what, gr_error *err);
gr_status gr_comm_mpi_max_int(gr_comm *c, int *v, const char *what, gr_error *err);
gr_status gr_comm_mpi_isum(gr_comm *c, float *buf, int64_t n, const char *what, gr_error *err);
gr_status gr_comm_mpi_progress(gr_comm *c, bool wait, gr_error *err);
gr_status gr_comm_mpi_bcast(gr_comm *c, float *buf, int64_t n, const char *what, gr_error *err);
/* send (buf is read) or receive n floats; started: into the pending table */
gr_status gr_comm_mpi_p2p(gr_comm *c, float *buf, int64_t n, int peer, int tag, bool send, bool started,
                          const char *what, gr_error *err);
gr_status gr_comm_mpi_reduce_scatter(gr_comm *c, const float *send, float *recv, int64_t share, const char *what,
                                     gr_error *err);
gr_status gr_comm_mpi_all_gather(gr_comm *c, const float *send, float *recv, int64_t n, const char *what,
                                 gr_error *err);
/* child->mpi, rank and world from MPI_Comm_split of parent's communicator */
gr_status gr_comm_mpi_split(const gr_comm *parent, int color, int key, gr_comm *child, gr_error *err);
void gr_comm_mpi_free(gr_comm *c);
void gr_comm_mpi_close(gr_comm *c, int abort_code);

gr_status gr_comm_nccl_open(gr_comm *c, void *compute_stream, gr_error *err);
gr_status gr_comm_nccl_isum(gr_comm *c, float *buf, int64_t n, const char *what, gr_error *err);
gr_status gr_comm_nccl_bcast(gr_comm *c, float *buf, int64_t n, const char *what, gr_error *err);
gr_status gr_comm_nccl_p2p(gr_comm *c, float *buf, int64_t n, int peer, bool send, bool started, const char *what,
                           gr_error *err);
gr_status gr_comm_nccl_reduce_scatter(gr_comm *c, const float *send, float *recv, int64_t share, const char *what,
                                      gr_error *err);
gr_status gr_comm_nccl_all_gather(gr_comm *c, const float *send, float *recv, int64_t n, const char *what,
                                  gr_error *err);
/* the compute stream waits for the started collectives; host: this thread too */
gr_status gr_comm_nccl_wait(gr_comm *c, bool host, gr_error *err);
/* child->gpu from ncclCommSplit of parent's; child->rank/world are checked against it, or set (no MPI) */
gr_status gr_comm_nccl_split(const gr_comm *parent, int color, int key, gr_comm *child, gr_error *err);
bool gr_comm_nccl_failed(const gr_comm *c);
void gr_comm_nccl_abort(gr_comm *c);
void gr_comm_nccl_close(gr_comm *c); /* the world's, or (gr_comm_free) a sub-communicator's */

#endif
