/* signals.c — see signals.h. Handlers only set flags, arm the deadline and,
 * for the second SIGINT or the deadline, write a line and _exit. */
#include "signals.h"

#include <math.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t gr_sig_caught;
static volatile sig_atomic_t gr_sig_armed; /* 0: set-up, a signal exits at once */
static unsigned gr_sig_deadline = 20;
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
    if (!gr_sig_armed && sig != SIGALRM) {
        gr_sig_say(sig == SIGINT    ? "gpurun: stopped by SIGINT"
                   : sig == SIGTERM ? "gpurun: stopped by SIGTERM"
                                    : "gpurun: stopped by SIGUSR1");
        gr_sig_say(" during set-up (compile, data, device), before the run directory was written; nothing "
                   "changed: rerun with --resume auto to continue\n");
        _exit(75);
    }
    if (gr_sig_caught) {
        if (sig == SIGINT) {
            gr_sig_say("gpurun: second interrupt: exiting now, committed checkpoints untouched\n");
            _exit(130);
        }
        return;
    }
    gr_sig_caught = sig;
    alarm(gr_sig_deadline);
}

void gr_signals_install(double deadline_s) {
    gr_sig_caught = 0;
    gr_sig_armed = 0;
    gr_sig_deadline = deadline_s >= 1.0 ? (unsigned)ceil(deadline_s) : 1u;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = gr_sig_handler;
    sigemptyset(&sa.sa_mask);
    for (int i = 0; i < 4; i++) sigaction(gr_sig_list[i], &sa, &gr_sig_old[i]);
}

void gr_signals_arm(void) { gr_sig_armed = 1; }

/* Disarms the deadline. The handlers stay until the process exits, so a
 * second SIGINT while the run writes its summary still exits at once with
 * its message (SIGALRM goes back to its default). */
void gr_signals_restore(void) {
    alarm(0);
    sigaction(SIGALRM, &gr_sig_old[3], NULL);
}

int gr_signals_pending(void) { return (int)gr_sig_caught; }
