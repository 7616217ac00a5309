/* scaler.h — the loss scaler of mixed-precision training (fp16/bf16).
 *
 * The loss's gradient is multiplied by the scale, so that small gradients
 * survive half-precision storage, and the update divides it back out.
 * Dynamic scaling follows PyTorch's GradScaler defaults: start at 2^16; a
 * step whose gradients hold inf/NaN is skipped and halves the scale; 2000
 * finite steps in a row double it. A fixed scale (loss_scale: N) that
 * overflows is reported as divergence, since nothing would absorb it.
 *
 * The scale, the count of finite steps since it changed and the steps
 * skipped are checkpointed (runner/resume.c), so a resumed run carries on
 * with the same scale. */
#ifndef GR_SCALER_H
#define GR_SCALER_H

#include <stdbool.h>
#include <stdint.h>

#define GR_SCALE_INIT 65536.0
#define GR_SCALE_INTERVAL 2000
#define GR_SCALE_FLOOR (1.0 / 16777216.0) /* below 2^-24 no fp16 gradient is left to save */

typedef struct gr_scaler {
    double scale;
    int64_t interval;  /* GR_SCALE_INTERVAL, or GPURUN_LOSS_SCALE_INTERVAL (tests) */
    int64_t good;      /* finite steps since the scale last changed */
    int64_t skipped;   /* steps skipped so far (carried over by resume) */
    bool dynamic, check; /* check: the gradients are looked at for inf/NaN (any scale but a fixed 1) */
} gr_scaler;

/* The job's scaler: dynamic (loss_scale: dynamic), else the fixed scale
 * (loss_scale: N; 0: none, a scale of 1). */
gr_scaler gr_scaler_init(bool dynamic, double fixed);

/* The seed of the loss gradient for a batch of `batch` samples: the mean's
 * 1/batch, times the scale. */
float gr_scaler_grad_scale(const gr_scaler *sc, int64_t batch);

/* After a step's gradients were looked at: finite or not. Returns false when
 * they were not and nothing absorbs it (a fixed scale, or a dynamic one
 * halved below GR_SCALE_FLOOR): the run has diverged. */
bool gr_scaler_update(gr_scaler *sc, bool finite);

#endif
