/* signals.h — preemption: SIGTERM, SIGINT and SIGUSR1 ask the training loop
 * to stop at the next micro-batch boundary, commit a checkpoint and exit 75.
 * A second SIGINT exits at once (status 130) without touching committed
 * files; if the checkpoint is not committed within the deadline, the
 * process exits 6 (no checkpoint) the same way. */
#ifndef GR_SIGNALS_H
#define GR_SIGNALS_H

void gr_signals_install(double deadline_s);
/* Disarms the deadline (the handlers stay: see signals.c). */
void gr_signals_restore(void);
/* The signal caught (SIGTERM, ...), or 0. */
int gr_signals_pending(void);

#endif
