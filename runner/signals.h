/* signals.h — preemption: SIGTERM, SIGINT and SIGUSR1 ask the training loop
 * to stop at the next micro-batch boundary, commit a checkpoint and exit 75.
 * A second SIGINT exits at once (status 130) without touching committed
 * files; if the checkpoint is not committed within the deadline, the
 * process exits 6 (no checkpoint) the same way.
 *
 * Until gr_signals_arm() — compile, data open, device set-up, checkpoint
 * verification: nothing in the run directory written yet — a signal ends
 * the process at once with a line and exit 75 (nothing is lost: a resumed
 * run's checkpoint is still the newest), however long that phase takes.
 *
 * SIGPIPE is ignored from gr_signals_install on: a run whose console reader
 * went away trains on (its run directory has every line).
 *
 * The handlers run on a thread of their own: the thread that installs them,
 * and every thread it starts afterwards, block the four signals (signals.c
 * says why). `gpurun run` installs them first thing in main, before the
 * spec is read and before MPI_Init_thread, CUDA or oneDNN start threads of
 * their own (which inherit the blocked mask), so that a signal at any point
 * before the run directory is written is exit 75, never the default 143. */
#ifndef GR_SIGNALS_H
#define GR_SIGNALS_H

/* Installs the handlers, not armed (a signal exits 75 at once), with a
 * deadline of 20 s; again: back to not armed, nothing caught. */
void gr_signals_install(void);
/* checkpoint.signal_deadline_s, once the spec is known (at least 1 s). */
void gr_signals_set_deadline(double deadline_s);
/* From here on a signal is deferred to the next step boundary (the run
 * directory is about to be written). */
void gr_signals_arm(void);
/* Disarms the deadline (the handlers stay: see signals.c). */
void gr_signals_restore(void);
/* The signal caught (SIGTERM, ...), or 0. */
int gr_signals_pending(void);

#endif
