/* test_signals.c — where the preemption handlers of runner/signals.h run:
 * after gr_signals_install the installing thread, the threads it starts
 * (pthreads, the OpenMP workers that run the kernels) block SIGTERM, SIGINT,
 * SIGUSR1 and SIGALRM, and a SIGTERM sent to the process still reaches the
 * handler (on the thread kept for it) and is seen by gr_signals_pending.
 *
 * The failure this guards against is not deterministic: a signal handled on
 * a thread inside one of oneDNN's JIT GEMM kernels, which point %rsp into
 * their heap workspace, wrote its frame into the heap (see signals.c); the
 * masks are what decides whether that can happen. */
#include <pthread.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include "gr_test.h"
#include "runner/signals.h"

static const int stop_signals[4] = {SIGTERM, SIGINT, SIGUSR1, SIGALRM};

/* Whether the calling thread blocks all four. */
static int blocks_all(void) {
    sigset_t cur;
    pthread_sigmask(SIG_BLOCK, NULL, &cur);
    for (int i = 0; i < 4; i++)
        if (sigismember(&cur, stop_signals[i]) != 1) return 0;
    return 1;
}

static void *thread_blocks(void *out) {
    *(int *)out = blocks_all();
    return NULL;
}

static void test_masks(void) {
    CHECK_MSG(blocks_all(), "the installing thread blocks the stop signals");
    pthread_t t;
    int child = 0;
    CHECK(pthread_create(&t, NULL, thread_blocks, &child) == 0);
    pthread_join(t, NULL);
    CHECK_MSG(child, "a thread started after gr_signals_install blocks them");
    int workers = 0, blocked = 0;
    /* the first parallel region of the process: its workers start now */
    #pragma omp parallel num_threads(3) reduction(+ : workers, blocked)
    {
        workers++;
        blocked += blocks_all();
    }
    CHECK_MSG(workers == 3 && blocked == 3, "OpenMP threads blocking the stop signals: %d of %d", blocked, workers);
}

static void test_delivery(void) {
    gr_signals_arm();
    CHECK(gr_signals_pending() == 0);
    CHECK(kill(getpid(), SIGTERM) == 0);
    for (int i = 0; i < 500 && !gr_signals_pending(); i++) {
        struct timespec ms = {0, 10 * 1000 * 1000};
        nanosleep(&ms, NULL);
    }
    CHECK_MSG(gr_signals_pending() == SIGTERM, "the SIGTERM reached the handler: pending %d", gr_signals_pending());
    gr_signals_restore(); /* the deadline the signal armed */
    /* a second install (a second run in one process) keeps the one thread */
    gr_signals_install();
    CHECK(gr_signals_pending() == 0 && blocks_all());
    gr_signals_restore();
}

int main(void) {
    gr_signals_install(); /* before any OpenMP region, as in main */
    gr_signals_set_deadline(20.0);
    test_masks();
    test_delivery();
    return gr_test_report();
}
