/* eager.h — the optimizer update of each parameter as soon as the step's
 * pass is done with it, while its gradient is still in cache.
 *
 * Without it the update is one pass over the whole model after the
 * backward pass (step.c: gr_train_apply_sumsq), by when the gradients, the
 * weights and the optimizer's state are out of the cache: on a 2-core AMD
 * EPYC the Fashion-MNIST MLP's update took 227 us a step that way, 72 us
 * when its arrays were in cache. Here a hook on the train plan (the one
 * dispatch, exec.h) updates each parameter's range after the last step of
 * the pass that writes its gradient or reads the parameter
 * (gr_plan_grad_ranges), so no later step sees the new value; the update
 * itself is gr_train_update_part, the same arithmetic on the same floats as
 * the whole-model pass, so the weights come out bit for bit the same.
 *
 * Where it applies: the CPU backend (a GPU's update is one kernel launch
 * over memory-bound data either way, and a recorded CUDA Graph would replay
 * the hook's launches with their first lr), one process with the whole
 * model (no data, pipeline or tensor parallelism: their gradients are final
 * only after a collective), no train.grad_clip (its factor needs every
 * gradient's norm first), and no dynamic loss scaling (a step with inf/NaN
 * gradients must update nothing). The check for inf/NaN gradients that ends
 * the run (GR_CHECK_STOP) takes the sum of squares in the same pass, as the
 * whole-model update does. Elsewhere the loop updates after the pass as
 * before. With accumulation only the step's last micro-batch is armed. */
#ifndef GR_EAGER_H
#define GR_EAGER_H

#include "job.h"

typedef struct gr_eager gr_eager;

/* The eager update of j's train plan (a hook on it), or NULL where it does
 * not apply (above). Call after the backend, the groups and the loss scaler
 * are set up (gr_job_compile, gr_job_backend). */
gr_eager *gr_eager_new(gr_job *j);
void gr_eager_free(gr_eager *e);
/* The plan's next run is the step's last micro-batch: each range is updated
 * at lr (AdamW's step: updates before this one), its gradients multiplied
 * by mult (the loss scale's inverse). */
void gr_eager_arm(gr_eager *e, double lr, int64_t step, float mult);
/* The gradients' multiplier at loss scale `scale` (static: eager.h), as
 * gr_train_apply_sumsq computes it. */
static inline float gr_eager_mult(double scale) { return scale != 1.0 ? (float)(1.0 / scale) : 1.0f; }
/* After the armed run: the ranges no step reached are updated (a parameter
 * nothing in the pass reads), and the step's findings returned: false when
 * the gradients' sum of squares is not finite; *cleared: every gradient was
 * left zero. Disarms. */
bool gr_eager_finish(gr_eager *e, bool *cleared);

#endif
