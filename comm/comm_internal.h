/* comm_internal.h — what comm.c calls in comm_mpi.c (built with MPI only). */
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
void gr_comm_mpi_close(gr_comm *c, int abort_code);

gr_status gr_comm_nccl_open(gr_comm *c, void *compute_stream, gr_error *err);
gr_status gr_comm_nccl_isum(gr_comm *c, float *buf, int64_t n, const char *what, gr_error *err);
gr_status gr_comm_nccl_bcast(gr_comm *c, float *buf, int64_t n, const char *what, gr_error *err);
/* the compute stream waits for the started collectives; host: this thread too */
gr_status gr_comm_nccl_wait(gr_comm *c, bool host, gr_error *err);
bool gr_comm_nccl_failed(void);
void gr_comm_nccl_abort(void);
void gr_comm_nccl_close(void);

#endif
