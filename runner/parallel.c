/* parallel.c — data parallelism, the job's side (see parallel.h): what the
 * spec asks of the launched processes, and the job's state in the
 * collectives that dist/dp.h runs. */
#include "parallel.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "../config/schema.h"
#include "../dist/watchdog.h"
#include "pipe.h"
#include "tp.h"
#include "signals.h"

/* The watchdog's end (dist/watchdog.h; its line is on stderr): the exit callback, exit 7.
 * The mutex is held from the callback to _exit, so the main thread cannot
 * change it (and free what ctx points to) meanwhile. */
static pthread_mutex_t gr_wd_exit_mu = PTHREAD_MUTEX_INITIALIZER;
static void (*gr_wd_exit_fn)(void *ctx, const char *msg);
static void *gr_wd_exit_ctx;

void gr_parallel_on_exit(void (*fn)(void *ctx, const char *msg), void *ctx) {
    pthread_mutex_lock(&gr_wd_exit_mu);
    gr_wd_exit_fn = fn;
    gr_wd_exit_ctx = ctx;
    pthread_mutex_unlock(&gr_wd_exit_mu);
}

static void gr_parallel_watchdog_exit(const char *msg) {
    pthread_mutex_lock(&gr_wd_exit_mu);
    if (gr_wd_exit_fn) gr_wd_exit_fn(gr_wd_exit_ctx, msg);
    _exit(GR_ERR_DEVICE);
}

gr_status gr_parallel_check_world(const gr_job_spec *s, const gr_comm *c, gr_error *err) {
    const int world = c->world;
    const long long pt = (long long)(s->parallel.pipeline * s->parallel.tensor);
    if (s->parallel.data > 0 && pt == 1 && s->parallel.data != world)
        return gr_spec_error(err, s, "parallel.data", "%lld processes asked for, but this one was started as one of "
                             "%d%s%s (launch it with `mpirun -np %lld gpurun ...` or `srun -n %lld gpurun ...`, or "
                             "set parallel.data: auto)", (long long)s->parallel.data, world,
                             c->launcher[0] ? " by " : ", without a launcher", c->launcher, (long long)s->parallel.data,
                             (long long)s->parallel.data);
    if (s->parallel.data > 0 && s->parallel.data * pt != world)
        return gr_spec_error(err, s, "parallel.data", "parallel.data %lld x parallel.pipeline %lld x parallel.tensor "
                             "%lld = %lld processes, but this one was started as one of %d%s%s",
                             (long long)s->parallel.data, (long long)s->parallel.pipeline,
                             (long long)s->parallel.tensor, (long long)s->parallel.data * pt, world,
                             c->launcher[0] ? " by " : ", without a launcher", c->launcher);
    if (world % pt != 0 && !c->launcher[0])
        return gr_spec_error(err, s, s->parallel.pipeline > 1 ? "parallel.pipeline" : "parallel.tensor",
                             "a model replica is parallel.pipeline %lld x parallel.tensor %lld = %lld processes, one "
                             "a stage or shard, but this one was started without a launcher: launch it with `mpirun "
                             "-np %lld gpurun ...` or `srun -n %lld gpurun ...`", (long long)s->parallel.pipeline,
                             (long long)s->parallel.tensor, pt, pt, pt);
    if (world % pt != 0)
        return gr_spec_error(err, s, "parallel.pipeline", "%lld x parallel.tensor %lld = %lld processes a model "
                             "replica, but %s started %d, not a multiple (parallel.data: auto takes the world over "
                             "the replica)", (long long)s->parallel.pipeline, (long long)s->parallel.tensor, pt,
                             c->launcher[0] ? c->launcher : "this process was", world);
    return GR_OK;
}

/* The batch's share per data replica (world over pipeline x tensor), in
 * whole micro-batches: train.micro_batch when given, parallel.microbatches
 * when given (pipeline), both (their product must be the share). */
static gr_status gr_parallel_shares(const gr_job_spec *s, const gr_comm *c, gr_error *err) {
    const int64_t replicas = c->world / (s->parallel.pipeline * s->parallel.tensor);
    const int64_t mb = gr_spec_node(s->root, "train.micro_batch") ? s->train.micro_batch : 0; /* 0: unset, auto */
    const int64_t m = s->parallel.pipeline > 1 ? s->parallel.microbatches : 0;
    const char *what = s->parallel.pipeline > 1 ? " data-parallel replicas" : " processes";
    if (s->train.batch_size % replicas != 0)
        return gr_spec_error(err, s, "train.batch_size", "%lld (the global batch) does not split evenly over the "
                             "%lld%s (each takes an equal share; give a multiple of %lld)",
                             (long long)s->train.batch_size, (long long)replicas, replicas > 1 ? what : " process",
                             (long long)replicas);
    if (mb && s->train.batch_size % (mb * replicas) != 0)
        return gr_spec_error(err, s, "train.batch_size", "%lld (the global batch) is not a multiple of "
                             "train.micro_batch %lld x %lld%s", (long long)s->train.batch_size, (long long)mb,
                             (long long)replicas, what);
    if (m && s->train.batch_size % (m * replicas) != 0)
        return gr_spec_error(err, s, "parallel.microbatches", "%lld does not split train.batch_size %lld over %lld%s "
                             "into equal micro-batches", (long long)m, (long long)s->train.batch_size,
                             (long long)replicas, what);
    if (mb && m && mb * m * replicas != s->train.batch_size)
        return gr_spec_error(err, s, "parallel.microbatches", "%lld micro-batches of train.micro_batch %lld make %lld "
                             "samples, but a replica's share of train.batch_size %lld is %lld (give one of the two)",
                             (long long)m, (long long)mb, (long long)(m * mb), (long long)s->train.batch_size,
                             (long long)(s->train.batch_size / replicas));
    if (m && gr_spec_node(s->root, "train.micro_batch") && s->train.micro_batch == 0)
        return gr_spec_error(err, s, "train.micro_batch", "auto with parallel.microbatches %lld: the micro-batch "
                             "is the replica's share over them; leave one of the two out", (long long)m);
    return GR_OK;
}

gr_status gr_parallel_resolve(const gr_job_spec *s, gr_job_spec *rs, gr_comm *c, gr_error *err) {
    *rs = *s;
    gr_comm_detect(c);
    const int world = c->world;
    gr_status cst = gr_parallel_check_world(s, c, err);
    if (cst) return cst;
    gr_comm_kind kind = world > 1 ? GR_COMM_MPI : GR_COMM_NONE;
    if (world > 1 && strcmp(s->parallel.backend, "none") == 0)
        return gr_spec_error(err, s, "parallel.backend", "none, but %s started %d processes of this job (auto or mpi "
                             "moves their gradients)", c->launcher, world);
    if (world > 1 && !gr_comm_built(kind))
        return gr_spec_error(err, s, "parallel.backend", "%s started %d processes, but this build of gpurun has no "
                             "MPI (install libopenmpi-dev and rebuild: scripts/dev.sh build)", c->launcher, world);
    /* each replica takes an equal share of the batch, in whole micro-batches (decided in memfit.c) */
    if ((cst = gr_parallel_shares(s, c, err))) return cst;
    /* a replayed CUDA Graph calls no hooks, and the buckets start from them; a stage runs its pass in parts */
    if (world > 1 || strcmp(s->parallel.backend, "nccl") == 0) rs->cuda_graph = false;
    if (world == 1) return gr_comm_open(c, kind, err);
    /* a rank that never starts (or stops answering) holds the others in MPI_Init's exchange */
    gr_wd_start(c->rank, c->world, s->parallel.timeout_s, gr_parallel_watchdog_exit);
    gr_wd_enter("MPI initialisation", -1);
    gr_status st = gr_comm_open(c, kind, err);
    gr_wd_leave();
    return st;
}

/* The GPU side: NCCL on this rank's GPU, ordered with the backend's stream
 * (parallel.backend auto or nccl with several processes; nccl also for one,
 * a communicator of one, which puts the whole path on a single GPU). */
static gr_status gr_parallel_attach_gpu(gr_job *j, gr_error *err) {
    const gr_job_spec *s = j->spec;
    gr_comm *c = &j->dp.comm;
    const bool gpu = !gr_backend_host_addressable(j->be), nccl = strcmp(s->parallel.backend, "nccl") == 0;
    if (nccl && !gpu)
        return gr_spec_error(err, s, "parallel.backend", "nccl sums GPU buffers, but the job runs on device %s "
                             "(mpi or auto moves the gradients of CPU processes)", gr_backend_name(j->be));
    if (!gpu || (c->world == 1 && !nccl)) return GR_OK;
    if (strcmp(s->parallel.backend, "mpi") == 0)
        return gr_spec_error(err, s, "parallel.backend", "mpi, but the job runs on device %s: GPU buffers go over "
                             "NCCL (set auto or nccl)", gr_backend_name(j->be));
    if (s->parallel.sync_batchnorm && c->world > 1)
        return gr_spec_error(err, s, "parallel.sync_batchnorm", "is not supported on GPUs yet (only the CPU's "
                             "batchnorm sums its statistics over the processes)");
    if (gr_job_writer(j) && !j->mx.quiet)
        fprintf(stderr, "gpurun: data parallelism on %s: CUDA Graphs are off (the gradient buckets start from the "
                "launches' hooks)\n", gr_backend_name(j->be));
    if (c->world > 1) gr_wd_enter("NCCL's set-up", -1);
    gr_status st = gr_comm_open_gpu(c, gr_backend_stream(j->be), err);
    gr_wd_leave();
    if (!st) gr_wd_watch(c); /* the watchdog polls its asynchronous errors */
    return st;
}

gr_status gr_parallel_split(gr_job *j, gr_error *err) {
    if (!j->pp && !j->tp) return GR_OK;
    j->world = j->dp.comm; /* as it is now (NCCL joined on a GPU): the splits' parent, the run's end */
    const int T = (int)j->spec->parallel.tensor, P = (int)j->spec->parallel.pipeline, r = j->world.rank;
    const int t = r % T, s = (r / T) % P, d = r / (P * T);
    gr_comm data;
    gr_wd_enter("splitting the ranks into data replicas", -1);
    gr_status st = gr_comm_split(&j->world, s * T + t, d, &data, err);
    gr_wd_leave();
    if (st) return st;
    j->dp.comm = data;
    j->split = true;
    return GR_OK;
}

gr_status gr_parallel_group(gr_job *j, int color, int key, gr_comm *group, const char *what, gr_error *err) {
    GR_ASSERT(j->split);
    char line[96];
    snprintf(line, sizeof line, "splitting the ranks into %s", what);
    gr_wd_enter(line, -1);
    gr_status st = gr_comm_split(&j->world, color, key, group, err);
    gr_wd_leave();
    return st;
}

void gr_parallel_unsplit(gr_job *j) {
    if (!j->split) return;
    gr_comm_free(&j->dp.comm); /* the replicas' (a sub-communicator) */
    j->dp.comm = j->world;
    j->split = false;
}

gr_status gr_parallel_attach(gr_job *j, gr_error *err) {
    gr_status st = gr_parallel_attach_gpu(j, err); /* on the world, split after (NCCL's too) */
    if (st || (st = gr_parallel_split(j, err)) || (st = gr_pipe_split(j, err)) || (st = gr_tp_split(j, err)))
        return st;
    /* pipeline: the stage's gradients in one all-reduce after its step (its plans run in parts);
     * a tensor group's part alone: its own plan's hooks start the buckets */
    gr_dp_attach(&j->dp, j->pp ? &j->train_plan : gr_tp_train_plan(j), j->pp ? 0.0 : j->spec->parallel.bucket_mb,
                 j->spec->parallel.sync_batchnorm, &j->hooks, &j->mx.comm_s);
    j->mx.grad_buckets = gr_buckets_count(j->dp.buckets);
    return GR_OK;
}

gr_status gr_parallel_share_state(gr_job *j, gr_error *err) {
    const int64_t nt = j->g.n_trainable, ns = j->g.n_params - nt;
    return gr_dp_bcast(&j->dp, j->m.params + nt, ns, "sharing rank 0's batchnorm statistics", err);
}

gr_status gr_parallel_reduce_eval(gr_job *j, gr_pass_stats *s, int64_t *seen, gr_error *err) {
    if (j->dp.comm.world == 1) return GR_OK;
    double v[3 + 2 * GR_MAX_METRICS] = {s->loss_sum, s->loss_count};
    int n = 2;
    for (int i = 0; i < s->n_metrics; i++) v[n++] = s->metric_sum[i], v[n++] = s->metric_count[i];
    v[n++] = (double)*seen;
    gr_status st = gr_dp_sum(&j->dp, v, n, "the sums of an evaluation", err);
    s->loss_sum = v[0];
    s->loss_count = v[1];
    for (int i = 0; i < s->n_metrics; i++) s->metric_sum[i] = v[2 + 2 * i], s->metric_count[i] = v[3 + 2 * i];
    *seen = (int64_t)v[n - 1];
    return st;
}

gr_status gr_parallel_stop(gr_job *j, int *sig, gr_error *err) {
    *sig = gr_signals_pending();
    if (!j->pp && !j->tp) return gr_dp_agree_stop(&j->dp, sig, err);
    const gr_comm data = j->dp.comm;
    j->dp.comm = j->world; /* every rank, also of the other pipeline stages */
    gr_status st = gr_dp_agree_stop(&j->dp, sig, err);
    j->dp.comm = data;
    return st;
}
