/* ckpt.h — checkpoints (DESIGN 1.6): everything a run needs to continue as
 * if never stopped, in one HDF5 file per commit, checkpoints/step-%09d.h5:
 *   root attributes  format "gpurun-checkpoint", version, step, epoch,
 *                    sample_in_epoch, world_size, precision, loss_scale,
 *                    rng (uint64 words), optimizer, spec (resolved YAML);
 *   /params/<layer>/<tensor>, /state/<layer>/<tensor> (weights.h), and
 *   /optim/<layer>/<tensor>/<slot> (SGD: momentum_buffer; AdamW: exp_avg,
 *   exp_avg_sq, as in PyTorch's optimizer state), each float32 with a crc32c.
 * The data loader's position, every RNG stream (dropout masks, shuffles,
 * augmentation draws) and the LR schedule are pure functions of (seed, step),
 * so the step restores them exactly.
 *
 * Commit protocol: write NAME.tmp, fsync, rename, fsync the directory, then
 * rewrite LATEST (the committed file's name) the same way. `keep` deletes
 * older checkpoints only after a newer one committed. */
#ifndef GR_CKPT_H
#define GR_CKPT_H

#include "../graph/graph.h"

#define GR_CKPT_FORMAT "gpurun-checkpoint"
#define GR_CKPT_VERSION 2 /* 2: the run record has a crc32c (record_crc32c); 1 is still read */

typedef struct gr_ckpt_header {
    int64_t step;             /* optimizer steps done */
    int64_t epoch;            /* position of the next batch */
    int64_t sample_in_epoch;
    int64_t world_size;
    char precision[16];
    double loss_scale;
    int64_t loss_scale_good;  /* dynamic loss scaling: finite steps since the scale last changed
                                 (attribute absent = 0) */
    int64_t skipped_steps;    /* steps skipped for inf/NaN gradients so far: the optimizer has
                                 applied step - skipped_steps updates (attribute absent = 0) */
    /* the run's record so far, so that a resumed run's metrics and summary read
     * as an uninterrupted run's (attributes absent = NaN, and 0 for the counts) */
    double last_train_loss, best_val_accuracy, last_val_accuracy, last_val_loss;
    double loss_window_sum;   /* train losses of the steps since the last train line */
    int64_t loss_window_steps;
    double time_s;            /* training time before this checkpoint (metrics' time_s) */
    uint64_t rng[2];          /* the seed, and the stream counter (steps * micro-batches) */
    char optimizer[16];       /* sgd | adamw */
    int optim_slots;          /* 0, 1 or 2 */
    int64_t eval_pending;     /* 1: a signal interrupted the evaluation due at this step; the
                                 resumed run does it first (attribute absent = 0) */
    int64_t threads;          /* the CPU threads that trained up to here: a resumed run takes as
                                 many, since the rounding follows them (0: on a GPU, or
                                 attribute absent) */
    char *spec;               /* the resolved YAML (read: malloc'd, caller frees) */
} gr_ckpt_header;

/* A host snapshot of the model: params arena (PARAM + STATE) and the
 * optimizer slots (optim_slots arrays of n_trainable floats). */
typedef struct gr_ckpt_state {
    const gr_graph *g;
    float *params;
    float *optim;
} gr_ckpt_state;

/* "step-000001200.h5" */
void gr_ckpt_filename(int64_t step, char *buf, size_t n);

/* The committed checkpoints of dir (step-*.h5): how many there are, and
 * the steps of the newest min(that, max) in steps[], newest first. 0 when
 * dir is missing or unreadable. */
int gr_ckpt_committed(const char *dir, int64_t *steps, int max);

/* Writes dir/step-%09d.h5 through .tmp, fsync and rename, then LATEST; then
 * deletes all but the newest `keep` checkpoints (never the new one). On any
 * failure the .tmp is removed and nothing committed changes. */
gr_status gr_ckpt_save(const char *dir, const gr_ckpt_header *h, const gr_ckpt_state *s, int keep, gr_error *err);

/* Reads and verifies path into s (params, optim) and h (spec allocated):
 * format and version, header values in range, every tensor of the model
 * present with its shape and crc32c. Errors (exit 6) name the file and the
 * tensor or attribute, with expected and actual values. */
gr_status gr_ckpt_load(const char *path, gr_ckpt_header *h, const gr_ckpt_state *s, gr_error *err);

/* A gpurun checkpoint file whose run record and every dataset match their
 * crc32c, whatever job it fits: tells a checkpoint of another spec from a
 * damaged one. */
bool gr_ckpt_intact(const char *path);

/* The run record (root attributes) of dir's newest checkpoint whose record
 * verifies and that keep (when not NULL) takes, given the record with its
 * spec (dir not NULL: --resume auto), else of path; no tensor is read.
 * False when there is none. h->spec is not kept (NULL). */
typedef bool (*gr_ckpt_peek_fn)(const gr_ckpt_header *h, void *ctx);
bool gr_ckpt_peek(const char *dir, const char *path, gr_ckpt_peek_fn keep, void *ctx, gr_ckpt_header *h);

/* The caller's check that a loaded checkpoint fits its job (the spec, the
 * position): GR_OK takes it; an error (its message naming path) rejects it. */
typedef gr_status (*gr_ckpt_fit_fn)(const char *path, const gr_ckpt_header *h, void *ctx, gr_error *err);

/* --resume auto: the newest checkpoint in dir that verifies and that fit
 * (NULL: any) accepts, tried from the highest step down (LATEST is not
 * trusted blindly); leftovers (*.tmp) and checkpoints that fail verification
 * or fit are skipped with a line on stderr naming them, so one damaged or
 * misfit file never stops a preemptible loop. Returns GR_OK with *found false
 * when there is no committed checkpoint (step-*.h5) at all. The loaded state
 * is in s and h, the file's path in path. When committed checkpoints exist
 * but none is taken — intact ones of another spec or damaged ones — it is
 * GR_ERR_CKPT: starting fresh would overwrite the run, so the job is refused. */
gr_status gr_ckpt_resume_auto(const char *dir, gr_ckpt_fit_fn fit, void *fit_ctx, gr_ckpt_header *h,
                              const gr_ckpt_state *s, bool *found, char *path, size_t path_n, gr_error *err);

#endif
