/* comm.c — launch detection and the collectives of one process (world 1);
 * with MPI in the build, comm_mpi.c does the rest, and comm_nccl.c on GPU
 * buffers (comm_internal.h). Point-to-point, reduce-scatter, all-gather
 * and sub-communicators: comm_group.c. */
#include "comm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm_internal.h"

static int gr_env_int_or(const char *name, int dflt) {
    const char *v = getenv(name);
    if (!v || !*v) return dflt;
    char *end;
    long x = strtol(v, &end, 10);
    return *end || x < 0 || x > (1 << 24) ? dflt : (int)x;
}

void gr_comm_detect(gr_comm *c) {
    memset(c, 0, sizeof *c);
    c->world = 1;
    static const struct {
        const char *size, *rank, *local, *name;
    } launchers[] = {
        {"OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "Open MPI"},
        {"SLURM_NTASKS", "SLURM_PROCID", "SLURM_LOCALID", "Slurm"},
        {"PMI_SIZE", "PMI_RANK", "MPI_LOCALRANKID", "PMI"},
    };
    for (size_t i = 0; i < GR_ARRAY_LEN(launchers); i++) {
        int w = gr_env_int_or(launchers[i].size, 0);
        if (w < 1) continue;
        /* an sbatch script's own shell has SLURM_NTASKS too; only srun's tasks have a step */
        if (i == 1 && !getenv("SLURM_STEP_ID")) continue;
        c->world = w;
        c->rank = gr_env_int_or(launchers[i].rank, 0);
        c->local_rank = gr_env_int_or(launchers[i].local, 0);
        snprintf(c->launcher, sizeof c->launcher, "%s", launchers[i].name);
        return;
    }
}

const char *gr_comm_kind_name(gr_comm_kind k) {
    return k == GR_COMM_MPI ? "mpi" : k == GR_COMM_NCCL ? "nccl" : "none";
}

bool gr_comm_built(gr_comm_kind k) {
    if (k == GR_COMM_NONE) return true;
#ifdef GR_HAVE_MPI
    if (k == GR_COMM_MPI) return true;
#endif
#ifdef GR_HAVE_NCCL
    if (k == GR_COMM_NCCL) return true;
#endif
    return false;
}

gr_status gr_comm_open_gpu(gr_comm *c, void *compute_stream, gr_error *err) {
    GR_ASSERT(!c->sub); /* a sub-communicator is on the GPUs when its parent was at gr_comm_split */
#ifdef GR_HAVE_NCCL
    return gr_comm_nccl_open(c, compute_stream, err);
#else
    (void)c, (void)compute_stream;
    return gr_error_set(err, GR_ERR_USAGE, "parallel.backend nccl: this build of gpurun has no NCCL (a CUDA "
                        "toolkit with nccl.h and libnccl)");
#endif
}

bool gr_comm_gpu_failed(const gr_comm *c) {
#ifdef GR_HAVE_NCCL
    return c->nccl && gr_comm_nccl_failed(c);
#else
    (void)c;
    return false;
#endif
}

void gr_comm_gpu_abort(gr_comm *c) {
#ifdef GR_HAVE_NCCL
    if (c->nccl) gr_comm_nccl_abort(c);
#endif
    (void)c;
}

gr_status gr_comm_open(gr_comm *c, gr_comm_kind kind, gr_error *err) {
    GR_ASSERT(kind != GR_COMM_NCCL); /* the GPUs join afterwards, over this: gr_comm_open_gpu */
    if (kind == GR_COMM_NONE) {
        GR_ASSERT(c->world == 1);
        c->kind = kind;
        return GR_OK;
    }
    if (!gr_comm_built(kind))
        return gr_error_set(err, GR_ERR_USAGE, "parallel.backend %s: this build of gpurun has no %s (rebuild with "
                            "libopenmpi-dev installed)", gr_comm_kind_name(kind), gr_comm_kind_name(kind));
#ifdef GR_HAVE_MPI
    return gr_comm_mpi_open(c, err);
#else
    return GR_OK;
#endif
}

gr_status gr_comm_sum_f32(gr_comm *c, float *buf, int64_t n, const char *what, gr_error *err) {
#ifdef GR_HAVE_NCCL
    if (c->nccl) {
        gr_status st = gr_comm_nccl_isum(c, buf, n, what, err);
        return st ? st : gr_comm_nccl_wait(c, true, err);
    }
#endif
#ifdef GR_HAVE_MPI
    if (c->kind == GR_COMM_MPI) return gr_comm_mpi_sum(c, buf, n, GR_COMM_F32, what, err);
#endif
    (void)c, (void)buf, (void)n, (void)what, (void)err;
    return GR_OK;
}

gr_status gr_comm_sum_f64(gr_comm *c, double *buf, int n, const char *what, gr_error *err) {
#ifdef GR_HAVE_MPI
    if (c->kind == GR_COMM_MPI) return gr_comm_mpi_sum(c, buf, n, GR_COMM_F64, what, err);
#endif
    (void)c, (void)buf, (void)n, (void)what, (void)err;
    return GR_OK;
}

gr_status gr_comm_isum_f32(gr_comm *c, float *buf, int64_t n, const char *what, gr_error *err) {
#ifdef GR_HAVE_NCCL
    if (c->nccl) return gr_comm_nccl_isum(c, buf, n, what, err);
#endif
#ifdef GR_HAVE_MPI
    if (c->kind == GR_COMM_MPI) return gr_comm_mpi_isum(c, buf, n, what, err);
#endif
    (void)c, (void)buf, (void)n, (void)what, (void)err;
    return GR_OK;
}

gr_status gr_comm_progress(gr_comm *c, gr_error *err) {
    if (c->nccl) return GR_OK; /* NCCL progresses on the GPU */
#ifdef GR_HAVE_MPI
    if (c->kind == GR_COMM_MPI) return gr_comm_mpi_progress(c, false, err);
#endif
    (void)c, (void)err;
    return GR_OK;
}

gr_status gr_comm_wait_all(gr_comm *c, gr_error *err) {
#ifdef GR_HAVE_NCCL
    if (c->nccl) return gr_comm_nccl_wait(c, true, err);
#endif
#ifdef GR_HAVE_MPI
    if (c->kind == GR_COMM_MPI) return gr_comm_mpi_progress(c, true, err);
#endif
    (void)c, (void)err;
    return GR_OK;
}

gr_status gr_comm_bcast_f32(gr_comm *c, float *buf, int64_t n, const char *what, gr_error *err) {
#ifdef GR_HAVE_NCCL
    if (c->nccl) return gr_comm_nccl_bcast(c, buf, n, what, err);
#endif
#ifdef GR_HAVE_MPI
    if (c->kind == GR_COMM_MPI) return gr_comm_mpi_bcast(c, buf, n, what, err);
#endif
    (void)c, (void)buf, (void)n, (void)what, (void)err;
    return GR_OK;
}

gr_status gr_comm_max_int(gr_comm *c, int *v, const char *what, gr_error *err) {
#ifdef GR_HAVE_MPI
    if (c->kind == GR_COMM_MPI) return gr_comm_mpi_max_int(c, v, what, err);
#endif
    (void)c, (void)v, (void)what, (void)err;
    return GR_OK;
}

void gr_comm_close(gr_comm *c, int abort_code) {
    GR_ASSERT(!c->sub); /* a sub-communicator is freed (gr_comm_free) */
#ifdef GR_HAVE_NCCL
    if (c->nccl) {
        if (abort_code) gr_comm_nccl_abort(c);
        else gr_comm_nccl_close(c);
        c->nccl = false;
    }
#endif
#ifdef GR_HAVE_MPI
    if (c->kind == GR_COMM_MPI && c->joined) gr_comm_mpi_close(c, abort_code);
#endif
    (void)abort_code;
    c->joined = false;
    c->kind = GR_COMM_NONE;
}
