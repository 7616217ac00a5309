/* watchdog.h — the collective watchdog (parallel.timeout_s).
 *
 * A collective waits for every rank; one that is gone or stuck would hold
 * the others forever. The start-up (MPI initialisation, the ranks' job
 * check, NCCL's set-up) and each collective of the loop are timed: when one
 * runs past the timeout, the watchdog's thread writes the line that says
 * which (at which step) and hands it to the fire function the runner gave,
 * which ends the process (runner/parallel.c: rank 0's summary.json, exit 7;
 * a thread cannot call MPI_Abort under MPI_THREAD_FUNNELED, nor at all
 * inside MPI_Init; the launcher ends the others when a rank exits, and each
 * has its own watchdog). With a communicator to watch (gr_wd_watch), an
 * asynchronous NCCL error (a peer gone, the network) fires the same way,
 * the communicator aborted first. One watchdog per process; its thread
 * starts with the first gr_wd_start. */
#ifndef GR_WATCHDOG_H
#define GR_WATCHDOG_H

#include "comm.h"

/* Arms it for this process's rank of world (before MPI_Init: the
 * launcher's, gr_comm_detect): a collective pending longer than timeout_s
 * seconds writes its line on stderr and calls fire(the line) on the
 * watchdog's thread; fire ends the process (the thread stops if it returns). For
 * several processes only. */
void gr_wd_start(int rank, int world, double timeout_s, void (*fire)(const char *msg));
/* Around a collective: what it is, for the line that names it, and the
 * 0-based step (-1: set-up, before the loop; no step named). Returns the
 * time it began (gr_now). No effect before gr_wd_start. */
double gr_wd_enter(const char *what, int64_t step);
void gr_wd_leave(void);
/* What the last gr_wd_enter named. */
const char *gr_wd_what(void);
/* The communicator whose asynchronous NCCL errors it polls (NULL: none). */
void gr_wd_watch(gr_comm *c);

#endif
