/* saver.h — asynchronous checkpoint saves: the training loop copies the
 * model into the saver's host buffers (the only stall), and a background
 * thread writes and commits the file (checkpoints/ckpt.h) while training
 * goes on. At most one save is in flight: starting another waits for it.
 * A failed save is reported by the next gr_saver_poll/gr_saver_wait; the
 * previous checkpoint stays committed. */
#ifndef GR_SAVER_H
#define GR_SAVER_H

#include "../checkpoints/ckpt.h"
#include "../kernels/backend.h"

typedef struct gr_saver gr_saver;

/* dir: the checkpoint directory (made before the first save); keep:
 * checkpoints kept. Its copy of the parameters and optimizer state is
 * allocated here: GR_ERR_OOM, saying so, when the host has no room. */
gr_status gr_saver_new(const char *dir, int keep, const gr_graph *g, int optim_slots, gr_saver **out,
                       gr_error *err);
void gr_saver_free(gr_saver *sv);
/* Waits for the save in flight, if any; returns its status (once). */
gr_status gr_saver_wait(gr_saver *sv, gr_error *err);
/* Without waiting: true when a save finished since the last report, with
 * its status in *st / err. */
bool gr_saver_poll(gr_saver *sv, gr_status *st, gr_error *err);
/* Starts writing the buffers as the checkpoint of h (copied; h->spec is
 * copied too). Call gr_saver_wait first. */
void gr_saver_start(gr_saver *sv, const gr_ckpt_header *h);
/* Seconds the last finished save took in the background, and its bytes. */
double gr_saver_last_s(const gr_saver *sv);

/* The training loop's way to save: waits for the save in flight (a failure
 * is returned, the new save still starts), then snapshots the model and
 * starts writing it as the checkpoint of h. params/optim are the backend's
 * arenas. On the CPU backend (host memory) only the non-trainable state
 * (batchnorm running stats, which the forward pass updates) is copied here;
 * the parameters and optimizer slots, which change only in the optimizer
 * update, are copied by the writer thread, and gr_saver_wait_copied must be
 * called before the next update. Other backends download all of it here. */
gr_status gr_saver_snapshot(gr_saver *sv, gr_backend *be, const float *params, const float *optim,
                            const gr_ckpt_header *h, gr_error *err);
/* Returns once the snapshot no longer reads the model (no-op otherwise). */
void gr_saver_wait_copied(gr_saver *sv);

#endif
