/* watchdog.c — the collective watchdog (see watchdog.h). */
#include "watchdog.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <time.h>

static struct {
    pthread_t thread;
    bool running;
    double timeout_s;
    int rank, world;
    _Atomic int64_t since_ms;  /* when the pending collective began (0: none) */
    _Atomic(const char *) what;
    _Atomic int64_t step;      /* -1: before the loop's first step (no step named) */
    _Atomic(gr_comm *) comm;   /* whose NCCL errors it polls (NULL: none) */
    void (*fire)(const char *msg);
} gr_wd;

static int64_t gr_wd_now_ms(void) { return (int64_t)(gr_now() * 1000.0); }

/* The end: the line on stderr, the communicator aborted, the runner's fire. */
static void gr_wd_fire(gr_comm *c, const char *msg) {
    fprintf(stderr, "gpurun: %s\n", msg);
    if (c) gr_comm_gpu_abort(c);
    fflush(stderr);
    gr_wd.fire(msg);
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
            gr_wd_fire(c, msg);
            return NULL; /* fire ended the process, or should have */
        }
        int64_t t = atomic_load(&gr_wd.since_ms);
        if (t && (double)(gr_wd_now_ms() - t) > 1000.0 * gr_wd.timeout_s) {
            snprintf(msg, sizeof msg, "rank %d of %d: %s%s did not finish within parallel.timeout_s = %g s: "
                     "another rank is gone or stuck; exiting", gr_wd.rank, gr_wd.world, atomic_load(&gr_wd.what),
                     at, gr_wd.timeout_s);
            gr_wd_fire(c, msg);
            return NULL; /* fire ended the process, or should have */
        }
    }
    return NULL;
}

void gr_wd_start(int rank, int world, double timeout_s, void (*fire)(const char *msg)) {
    gr_wd.timeout_s = timeout_s;
    gr_wd.fire = fire;
    gr_wd.rank = rank;
    gr_wd.world = world;
    atomic_store(&gr_wd.since_ms, 0);
    if (!gr_wd.running && pthread_create(&gr_wd.thread, NULL, gr_wd_main, NULL) == 0) {
        pthread_detach(gr_wd.thread);
        gr_wd.running = true;
    }
}

double gr_wd_enter(const char *what, int64_t step) {
    atomic_store(&gr_wd.what, what);
    atomic_store(&gr_wd.step, step);
    atomic_store(&gr_wd.since_ms, gr_wd_now_ms());
    return gr_now();
}

void gr_wd_leave(void) { atomic_store(&gr_wd.since_ms, 0); }

const char *gr_wd_what(void) { return atomic_load(&gr_wd.what); }

void gr_wd_watch(gr_comm *c) { atomic_store(&gr_wd.comm, c); }
