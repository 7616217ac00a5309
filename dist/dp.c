/* dp.c — data parallelism's collectives in the training loop (see dp.h). */
#include "dp.h"

#include <stdio.h>
#include <string.h>

#include "watchdog.h"

static bool gr_dp_alone(const gr_dp *dp) { return dp->comm.world == 1 && !dp->buckets; }

static void gr_dp_leave(gr_dp *dp, double t0) {
    gr_wd_leave();
    const double t1 = gr_now();
    if (dp->comm_s) *dp->comm_s += t1 - t0;
    gr_hooks_host(dp->hooks ? *dp->hooks : NULL, GR_SPAN_COMM, gr_wd_what(), t0, t1);
}

/* batchnorm's sums (kernels/backend.h's gr_xsum) */
static void gr_dp_xsum_fn(void *user, double *buf, int n) {
    gr_dp *dp = user;
    if (dp->xsum_st) return; /* failed before: the step ends with that error */
    double t0 = gr_wd_enter("the sums of batchnorm's statistics", dp->step);
    dp->xsum_st = gr_comm_sum_f64(&dp->comm, buf, n, "batchnorm's statistics", &dp->xsum_err);
    gr_dp_leave(dp, t0);
}

void gr_dp_attach(gr_dp *dp, gr_plan *p, double bucket_mb, bool sync_bn, const gr_loop_hooks *const *hooks,
                  double *comm_s) {
    dp->hooks = hooks;
    dp->comm_s = comm_s;
    if (dp->comm.world == 1 && !dp->comm.nccl) return;
    if (bucket_mb > 0) dp->buckets = gr_buckets_new(p, &dp->comm, bucket_mb, hooks);
    if (sync_bn && dp->comm.world > 1) dp->xsum = (gr_xsum){.sum = gr_dp_xsum_fn, .user = dp};
}

const gr_xsum *gr_dp_xsum(const gr_dp *dp) { return dp->xsum.sum ? &dp->xsum : NULL; }

void gr_dp_arm(gr_dp *dp, bool last_micro_batch) {
    if (dp->buckets) gr_buckets_arm(dp->buckets, last_micro_batch);
}

gr_status gr_dp_reduce_step(gr_dp *dp, float *grads, int64_t n, double *loss_sum, double *loss_count,
                            gr_error *err) {
    if (gr_dp_alone(dp)) return GR_OK; /* (one process over NCCL still waits for its buckets) */
    if (dp->xsum_st) {
        *err = dp->xsum_err;
        return dp->xsum_st;
    }
    double stats[2] = {*loss_sum, *loss_count};
    double t0 = gr_wd_enter("the all-reduce of the step's gradients", dp->step);
    gr_status st = dp->buckets ? gr_buckets_finish(dp->buckets, err)
                               : gr_comm_sum_f32(&dp->comm, grads, n, "the gradients", err);
    if (!st) st = gr_comm_sum_f64(&dp->comm, stats, 2, "the step's loss", err);
    gr_dp_leave(dp, t0);
    *loss_sum = stats[0];
    *loss_count = stats[1];
    return st;
}

gr_status gr_dp_bcast(gr_dp *dp, float *x, int64_t n, const char *what, gr_error *err) {
    if (dp->comm.world == 1 || n == 0) return GR_OK;
    double t0 = gr_wd_enter(what, dp->step);
    gr_status st = gr_comm_bcast_f32(&dp->comm, x, n, what, err);
    gr_dp_leave(dp, t0);
    return st;
}

gr_status gr_dp_sum(gr_dp *dp, double *v, int n, const char *what, gr_error *err) {
    if (dp->comm.world == 1) return GR_OK;
    double t0 = gr_wd_enter(what, dp->step);
    gr_status st = gr_comm_sum_f64(&dp->comm, v, n, what, err);
    gr_dp_leave(dp, t0);
    return st;
}

gr_status gr_dp_agree_stop(gr_dp *dp, int *sig, gr_error *err) {
    if (dp->comm.world == 1) return GR_OK;
    double t0 = gr_wd_enter("agreeing on a stop signal", dp->step);
    gr_status st = gr_comm_max_int(&dp->comm, sig, "agreeing on a stop signal", err);
    gr_dp_leave(dp, t0);
    return st;
}

gr_status gr_dp_finish(gr_comm *c, gr_status st, gr_error *err) {
    if (st && c->world > 1) {
        char msg[GR_ERROR_MSG_MAX];
        memcpy(msg, err->msg, sizeof msg);
        int w = snprintf(err->msg, sizeof err->msg, "rank %d of %d: ", c->rank, c->world);
        if (w > 0 && (size_t)w < sizeof err->msg) memcpy(err->msg + w, msg, sizeof err->msg - (size_t)w - 1);
        err->msg[sizeof err->msg - 1] = '\0';
    }
    gr_wd_watch(NULL);
    bool together = st == GR_OK || st == GR_ERR_SIGNAL || st == GR_ERR_DIVERGED || c->agreed;
    if (!together && c->joined && c->world > 1) fprintf(stderr, "gpurun: %s\n", err->msg); /* before the abort */
    gr_comm_close(c, together ? 0 : (int)st);
    return st;
}

void gr_dp_free(gr_dp *dp) {
    gr_buckets_free(dp->buckets);
    dp->buckets = NULL;
}
