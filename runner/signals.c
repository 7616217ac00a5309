/* signals.c — see signals.h. Handlers only set flags, arm the deadline and,
 * for the second SIGINT or the deadline, write a line and _exit.
 *
 * Where they run: gr_signals_install blocks the four signals in its thread,
 * and so in every thread started after it (the OpenMP workers, the loaders,
 * the checkpoint writer, the collective watchdog, MPI's and CUDA's own; not
 * a thread a shared library's constructor started before main, such as
 * OpenBLAS's pool), and leaves them open in one thread of their own
 * that does nothing but wait for them. The kernel writes a handler's frame
 * below the interrupted thread's stack pointer, and oneDNN's JIT GEMM
 * kernels run with %rsp pointing into their heap workspace (oneDNN issue
 * 4845, fixed after 3.11): a SIGTERM taken inside one wrote its frame into
 * the heap, which glibc found corrupted later ("corrupted size vs.
 * prev_size while consolidating", "free(): invalid pointer"). */
#include "signals.h"

#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

#include "rundir.h"

/* lock-free atomics: safe in a handler, and read by other threads */
static atomic_int gr_sig_caught;
static atomic_int gr_sig_armed; /* 0: set-up, a signal exits at once */
static atomic_uint gr_sig_deadline = 20;
static struct sigaction gr_sig_old[4];
static const int gr_sig_list[4] = {SIGTERM, SIGINT, SIGUSR1, SIGALRM};

static void gr_sig_say(const char *msg) {
    ssize_t r = write(2, msg, strlen(msg));
    (void)r;
}

static void gr_sig_handler(int sig) {
    if (sig == SIGALRM) {
        gr_sig_say("gpurun: no checkpoint was committed within checkpoint.signal_deadline_s of the signal; "
                    "exiting without one (rerun with --resume auto resumes from the previous one)\n");
        _exit(6);
    }
    if (!atomic_load(&gr_sig_armed) && sig != SIGALRM) {
        gr_sig_say(sig == SIGINT    ? "gpurun: stopped by SIGINT"
                   : sig == SIGTERM ? "gpurun: stopped by SIGTERM"
                                    : "gpurun: stopped by SIGUSR1");
        gr_sig_say(" during set-up (start, MPI, compile, data, device), before the run directory was written; nothing "
                   "changed: rerun with --resume auto to continue\n");
        gr_rundir_undo_made(); /* a directory made only to be locked goes again */
        _exit(75);
    }
    if (atomic_load(&gr_sig_caught)) {
        if (sig == SIGINT) {
            gr_sig_say("gpurun: second interrupt: exiting now, committed checkpoints untouched\n");
            _exit(130);
        }
        return;
    }
    atomic_store(&gr_sig_caught, sig);
    alarm(atomic_load(&gr_sig_deadline));
}

static void gr_sig_set(sigset_t *set) {
    sigemptyset(set);
    for (int i = 0; i < 4; i++) sigaddset(set, gr_sig_list[i]);
}

/* The thread the handlers run on. */
static void *gr_sig_thread(void *arg) {
    (void)arg;
    for (;;) pause();
    return NULL;
}

static pthread_once_t gr_sig_once = PTHREAD_ONCE_INIT;
static bool gr_sig_thread_ok; /* false: it could not be started; the caller keeps the signals */

static void gr_sig_thread_start(void) {
    sigset_t set, old;
    gr_sig_set(&set);
    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&a, 256 * 1024);
    pthread_t t;
    pthread_sigmask(SIG_UNBLOCK, &set, &old); /* the new thread starts with this mask */
    gr_sig_thread_ok = pthread_create(&t, &a, gr_sig_thread, NULL) == 0;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&a);
}

void gr_signals_set_deadline(double deadline_s) {
    atomic_store(&gr_sig_deadline, deadline_s >= 1.0 ? (unsigned)ceil(deadline_s) : 1u);
}

void gr_signals_install(void) {
    atomic_store(&gr_sig_caught, 0);
    atomic_store(&gr_sig_armed, 0);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = gr_sig_handler;
    sigemptyset(&sa.sa_mask);
    for (int i = 0; i < 4; i++) sigaction(gr_sig_list[i], &sa, &gr_sig_old[i]);
    /* a run whose console reader goes away (`| head`, a dead tee, a log
     * shipper) trains on: its console writes fail with EPIPE, unread, and the
     * run directory keeps every line (SIGPIPE would kill it with no checkpoint) */
    signal(SIGPIPE, SIG_IGN);
    pthread_once(&gr_sig_once, gr_sig_thread_start);
    if (gr_sig_thread_ok) {
        sigset_t set;
        gr_sig_set(&set);
        pthread_sigmask(SIG_BLOCK, &set, NULL);
    }
}

void gr_signals_arm(void) { atomic_store(&gr_sig_armed, 1); }

/* Disarms the deadline. The handlers stay until the process exits, so a
 * second SIGINT while the run writes its summary still exits at once with
 * its message (SIGALRM goes back to its default). */
void gr_signals_restore(void) {
    alarm(0);
    sigaction(SIGALRM, &gr_sig_old[3], NULL);
}

int gr_signals_pending(void) { return atomic_load(&gr_sig_caught); }
