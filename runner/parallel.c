/* parallel.c — data parallelism in the training loop (see parallel.h). */
#include "parallel.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../config/schema.h"
#include "../dist/buckets.h"
#include "signals.h"

/* ---- the collective watchdog (parallel.timeout_s) ----
 * A collective waits for every rank; one that is gone or stuck would hold
 * the others forever. The start-up (MPI initialisation, the ranks' job
 * check, NCCL's set-up) and each collective of the loop are timed: when one
 * runs past the timeout, this rank says which (at which step), lets the run
 * write what it must (gr_parallel_on_exit: rank 0's summary.json) and exits
 * 7 (a thread cannot call MPI_Abort under MPI_THREAD_FUNNELED, nor at all
 * inside MPI_Init; the launcher ends the others when a rank exits, and each
 * has its own watchdog). */
static struct {
    pthread_t thread;
    bool running;
    double timeout_s;
    int rank, world;
    _Atomic int64_t since_ms;  /* when the pending collective began (0: none) */
    _Atomic(const char *) what;
    _Atomic int64_t step;      /* -1: before the loop's first step (no step named) */
    _Atomic(gr_comm *) comm;   /* whose NCCL errors it polls (the job's; NULL: none) */
} gr_wd;

/* What runs before the watchdog exits (gr_parallel_on_exit). The mutex is
 * held from the call to _exit, so the main thread cannot change it (and free
 * what ctx points to) meanwhile. */
static pthread_mutex_t gr_wd_exit_mu = PTHREAD_MUTEX_INITIALIZER;
static void (*gr_wd_exit_fn)(void *ctx, const char *msg);
static void *gr_wd_exit_ctx;

void gr_parallel_on_exit(void (*fn)(void *ctx, const char *msg), void *ctx) {
    pthread_mutex_lock(&gr_wd_exit_mu);
    gr_wd_exit_fn = fn;
    gr_wd_exit_ctx = ctx;
    pthread_mutex_unlock(&gr_wd_exit_mu);
}

static int64_t gr_wd_now_ms(void) { return (int64_t)(gr_now() * 1000.0); }

/* The watchdog's end: the line, the exit callback, exit 7. */
static _Noreturn void gr_wd_exit(gr_comm *c, const char *msg) {
    fprintf(stderr, "gpurun: %s\n", msg);
    if (c) gr_comm_gpu_abort(c);
    fflush(stderr);
    pthread_mutex_lock(&gr_wd_exit_mu);
    if (gr_wd_exit_fn) gr_wd_exit_fn(gr_wd_exit_ctx, msg);
    _exit(GR_ERR_DEVICE);
}

static void *gr_wd_main(void *arg) {
    (void)arg;
    static char msg[GR_ERROR_MSG_MAX]; /* summary.json's error: kept until the process ends */
    for (;;) {
        nanosleep(&(struct timespec){.tv_sec = 0, .tv_nsec = 100 * 1000 * 1000}, NULL);
        gr_comm *c = atomic_load(&gr_wd.comm);
        const int64_t step = atomic_load(&gr_wd.step);
        char at[48] = "";
        if (step >= 0) snprintf(at, sizeof at, " (step %lld)", (long long)step + 1);
        if (c && gr_comm_gpu_failed(c)) { /* NCCL's asynchronous error: a peer is gone, or the network */
            snprintf(msg, sizeof msg, "rank %d of %d: NCCL reported an asynchronous error%s: aborting the "
                     "communicator; exiting", gr_wd.rank, gr_wd.world, at);
            gr_wd_exit(c, msg);
        }
        int64_t t = atomic_load(&gr_wd.since_ms);
        if (t && (double)(gr_wd_now_ms() - t) > 1000.0 * gr_wd.timeout_s) {
            snprintf(msg, sizeof msg, "rank %d of %d: %s%s did not finish within parallel.timeout_s = %g s: "
                     "another rank is gone or stuck; exiting", gr_wd.rank, gr_wd.world, atomic_load(&gr_wd.what),
                     at, gr_wd.timeout_s);
            gr_wd_exit(c, msg);
        }
    }
    return NULL;
}

/* Before MPI_Init: the rank and world are the launcher's (gr_comm_detect). */
static void gr_wd_start(const gr_comm *c, double timeout_s) {
    gr_wd.timeout_s = timeout_s;
    gr_wd.rank = c->rank;
    gr_wd.world = c->world;
    atomic_store(&gr_wd.since_ms, 0);
    if (!gr_wd.running && pthread_create(&gr_wd.thread, NULL, gr_wd_main, NULL) == 0) {
        pthread_detach(gr_wd.thread);
        gr_wd.running = true;
    }
}

/* Around every collective: the watchdog's clock, and the time summary.json's comm_s sums. */
double gr_parallel_wd_enter(const char *what, int64_t step) {
    atomic_store(&gr_wd.what, what);
    atomic_store(&gr_wd.step, step);
    atomic_store(&gr_wd.since_ms, gr_wd_now_ms());
    return gr_now();
}

void gr_parallel_wd_leave(void) { atomic_store(&gr_wd.since_ms, 0); }

static void gr_wd_leave(gr_job *j, double t0) {
    gr_parallel_wd_leave();
    const double t1 = gr_now();
    j->mx.comm_s += t1 - t0;
    gr_hooks_host(j->hooks, GR_SPAN_COMM, atomic_load(&gr_wd.what), t0, t1);
}

gr_status gr_parallel_resolve(const gr_job_spec *s, gr_job_spec *rs, gr_comm *c, gr_error *err) {
    *rs = *s;
    gr_comm_detect(c);
    const int world = c->world;
    if (s->parallel.data > 0 && s->parallel.data != world)
        return gr_spec_error(err, s, "parallel.data", "%lld processes asked for, but this one was started as one of "
                             "%d%s%s (launch it with `mpirun -np %lld gpurun ...` or `srun -n %lld gpurun ...`, or "
                             "set parallel.data: auto)", (long long)s->parallel.data, world,
                             c->launcher[0] ? " by " : ", without a launcher", c->launcher, (long long)s->parallel.data,
                             (long long)s->parallel.data);
    gr_comm_kind kind = world > 1 ? GR_COMM_MPI : GR_COMM_NONE;
    if (world > 1 && strcmp(s->parallel.backend, "none") == 0)
        return gr_spec_error(err, s, "parallel.backend", "none, but %s started %d processes of this job (auto or mpi "
                             "moves their gradients)", c->launcher, world);
    if (world > 1 && !gr_comm_built(kind))
        return gr_spec_error(err, s, "parallel.backend", "%s started %d processes, but this build of gpurun has no "
                             "MPI (install libopenmpi-dev and rebuild: scripts/dev.sh build)", c->launcher, world);
    /* a replayed CUDA Graph calls no hooks, and the buckets start from them */
    if (world > 1 || strcmp(s->parallel.backend, "nccl") == 0) rs->cuda_graph = false;
    if (world == 1) return gr_comm_open(c, kind, err);
    /* a rank that never starts (or stops answering) holds the others in MPI_Init's exchange */
    gr_wd_start(c, s->parallel.timeout_s);
    gr_parallel_wd_enter("MPI initialisation", -1);
    gr_status st = gr_comm_open(c, kind, err);
    gr_parallel_wd_leave();
    return st;
}

/* parallel.sync_batchnorm: batchnorm's sums over the processes (kernels/backend.h's gr_xsum) */
static void gr_parallel_xsum(void *user, double *buf, int n) {
    gr_job *j = user;
    if (j->xsum_st) return; /* failed before: the step ends with that error */
    double t0 = gr_parallel_wd_enter("the sums of batchnorm's statistics", j->step);
    j->xsum_st = gr_comm_sum_f64(&j->comm, buf, n, "batchnorm's statistics", &j->xsum_err);
    gr_wd_leave(j, t0);
}

const gr_xsum *gr_parallel_xsum_of(const gr_job *j) { return j->xsum.sum ? &j->xsum : NULL; }

/* The GPU side: NCCL on this rank's GPU, ordered with the backend's stream
 * (parallel.backend auto or nccl with several processes; nccl also for one,
 * a communicator of one, which puts the whole path on a single GPU). */
static gr_status gr_parallel_attach_gpu(gr_job *j, gr_error *err) {
    const gr_job_spec *s = j->spec;
    const bool gpu = !gr_backend_host_addressable(j->be), nccl = strcmp(s->parallel.backend, "nccl") == 0;
    if (nccl && !gpu)
        return gr_spec_error(err, s, "parallel.backend", "nccl sums GPU buffers, but the job runs on device %s "
                             "(mpi or auto moves the gradients of CPU processes)", gr_backend_name(j->be));
    if (!gpu || (j->comm.world == 1 && !nccl)) return GR_OK;
    if (strcmp(s->parallel.backend, "mpi") == 0)
        return gr_spec_error(err, s, "parallel.backend", "mpi, but the job runs on device %s: GPU buffers go over "
                             "NCCL (set auto or nccl)", gr_backend_name(j->be));
    if (s->parallel.sync_batchnorm && j->comm.world > 1)
        return gr_spec_error(err, s, "parallel.sync_batchnorm", "is not supported on GPUs yet (only the CPU's "
                             "batchnorm sums its statistics over the processes)");
    if (gr_job_writer(j) && !j->mx.quiet)
        fprintf(stderr, "gpurun: data parallelism on %s: CUDA Graphs are off (the gradient buckets start from the "
                "launches' hooks)\n", gr_backend_name(j->be));
    if (j->comm.world > 1) gr_parallel_wd_enter("NCCL's set-up", -1);
    gr_status st = gr_comm_open_gpu(&j->comm, gr_backend_stream(j->be), err);
    gr_parallel_wd_leave();
    if (!st) atomic_store(&gr_wd.comm, &j->comm); /* the watchdog polls its asynchronous errors */
    return st;
}

gr_status gr_parallel_attach(gr_job *j, gr_error *err) {
    gr_status st = gr_parallel_attach_gpu(j, err);
    if (st || (j->comm.world == 1 && !j->comm.nccl)) return st;
    if (j->spec->parallel.bucket_mb > 0)
        j->buckets = gr_buckets_new(&j->train_plan, &j->comm, j->spec->parallel.bucket_mb, &j->hooks);
    j->mx.grad_buckets = gr_buckets_count(j->buckets);
    if (j->spec->parallel.sync_batchnorm && j->comm.world > 1) j->xsum = (gr_xsum){.sum = gr_parallel_xsum, .user = j};
    return GR_OK;
}

void gr_parallel_arm(gr_job *j, bool last_micro_batch) {
    if (j->buckets) gr_buckets_arm(j->buckets, last_micro_batch);
}

gr_status gr_parallel_reduce_step(gr_job *j, double *loss_sum, double *loss_count, gr_error *err) {
    if (j->comm.world == 1 && !j->buckets) return GR_OK; /* (one process over NCCL still waits for its buckets) */
    if (j->xsum_st) {
        *err = j->xsum_err;
        return j->xsum_st;
    }
    double stats[2] = {*loss_sum, *loss_count};
    double t0 = gr_parallel_wd_enter("the all-reduce of the step's gradients", j->step);
    gr_status st = j->buckets ? gr_buckets_finish(j->buckets, err)
                              : gr_comm_sum_f32(&j->comm, j->m.grads, j->g.n_trainable, "the gradients", err);
    if (!st) st = gr_comm_sum_f64(&j->comm, stats, 2, "the step's loss", err);
    gr_wd_leave(j, t0);
    *loss_sum = stats[0];
    *loss_count = stats[1];
    return st;
}

gr_status gr_parallel_share_state(gr_job *j, gr_error *err) {
    const int64_t nt = j->g.n_trainable, ns = j->g.n_params - nt;
    if (j->comm.world == 1 || ns == 0) return GR_OK;
    double t0 = gr_parallel_wd_enter("sharing rank 0's batchnorm statistics", j->step);
    gr_status st = gr_comm_bcast_f32(&j->comm, j->m.params + nt, ns, "rank 0's batchnorm statistics", err);
    gr_wd_leave(j, t0);
    return st;
}

gr_status gr_parallel_reduce_eval(gr_job *j, gr_pass_stats *s, int64_t *seen, gr_error *err) {
    if (j->comm.world == 1) return GR_OK;
    double v[3 + 2 * GR_MAX_METRICS] = {s->loss_sum, s->loss_count};
    int n = 2;
    for (int i = 0; i < s->n_metrics; i++) v[n++] = s->metric_sum[i], v[n++] = s->metric_count[i];
    v[n++] = (double)*seen;
    double t0 = gr_parallel_wd_enter("the sums of an evaluation", j->step);
    gr_status st = gr_comm_sum_f64(&j->comm, v, n, "the sums of an evaluation", err);
    gr_wd_leave(j, t0);
    s->loss_sum = v[0];
    s->loss_count = v[1];
    for (int i = 0; i < s->n_metrics; i++) s->metric_sum[i] = v[2 + 2 * i], s->metric_count[i] = v[3 + 2 * i];
    *seen = (int64_t)v[n - 1];
    return st;
}

gr_status gr_parallel_stop(gr_job *j, int *sig, gr_error *err) {
    *sig = gr_signals_pending();
    if (j->comm.world == 1) return GR_OK;
    double t0 = gr_parallel_wd_enter("agreeing on a stop signal", j->step);
    gr_status st = gr_comm_max_int(&j->comm, sig, "agreeing on a stop signal", err);
    gr_wd_leave(j, t0);
    return st;
}

gr_status gr_parallel_finish(gr_comm *c, gr_status st, gr_error *err) {
    if (st && c->world > 1) {
        char msg[GR_ERROR_MSG_MAX];
        memcpy(msg, err->msg, sizeof msg);
        int w = snprintf(err->msg, sizeof err->msg, "rank %d of %d: ", c->rank, c->world);
        if (w > 0 && (size_t)w < sizeof err->msg) memcpy(err->msg + w, msg, sizeof err->msg - (size_t)w - 1);
        err->msg[sizeof err->msg - 1] = '\0';
    }
    atomic_store(&gr_wd.comm, NULL);
    bool together = st == GR_OK || st == GR_ERR_SIGNAL || st == GR_ERR_DIVERGED || c->agreed;
    if (!together && c->joined && c->world > 1) fprintf(stderr, "gpurun: %s\n", err->msg); /* before the abort */
    gr_comm_close(c, together ? 0 : (int)st);
    return st;
}
