/* finite.h — inf/NaN in a training run's gradients and parameters: which
 * layer holds them, and the divergence error (exit 5) that names it.
 *
 * The loop looks at one number per step, the gradients' sum of squares
 * (gr_train_apply_scaled: one reduction over the grads arena, which
 * clipping and loss scaling use too; in double, so finite floats never
 * overflow it); only when it is not finite are the gradients downloaded and
 * scanned tensor by tensor to name the first layer. The parameters (and the
 * batchnorm state) are checked the same way, one reduction over the params
 * arena, where they are about to be seen: at each metrics line, before each
 * checkpoint snapshot and before the last checkpoint and weights.h5.
 *
 * Exports:
 *   gr_train_nonfinite_layer   the first tensor of an arena holding inf/NaN, in graph order
 *   gr_train_grads_diverged    the exit-5 error for gradients that hold inf/NaN
 *   gr_train_check_params      GR_OK, or the exit-5 error naming the first inf/NaN parameter */
#ifndef GR_FINITE_H
#define GR_FINITE_H

#include "../exec/exec.h"

/* Which arena gr_train_nonfinite_layer scans. */
typedef enum gr_finite_arena { GR_FINITE_GRADS, GR_FINITE_PARAMS } gr_finite_arena;

/* The first tensor, in graph order (by layer, then the layer's tensors in
 * order), whose values in the arena hold an inf or a NaN: a PARAM tensor
 * (GRADS: its gradient), or a PARAM or STATE tensor (PARAMS). Returns its
 * index in m->g->tensors, or -1 when every value is finite; *bad (when not
 * NULL) gets how many of its values are not finite. Downloads the arena:
 * for the failure path. */
int gr_train_nonfinite_layer(const gr_model *m, gr_finite_arena arena, int64_t *bad);

/* GR_ERR_DIVERGED for a step (1-based, as the metrics count) whose
 * gradients hold inf/NaN, naming the first layer whose gradient does:
 *   "training diverged at step 7 (epoch 1): the gradient of layer dense1
 *    (dense1/weight: 80 of 80 values inf/NaN) is not finite, though the
 *    loss was 2.302; lower train.optimizer.lr, or check the data and
 *    model.init_from"
 * loss_scale: the scale the step ran at; scaled: loss scaling was on
 * (dynamic: at its smallest scale), which the message says instead. */
gr_status gr_train_grads_diverged(const gr_model *m, int64_t step, int64_t epoch, double loss, double loss_scale,
                                  bool scaled, bool dynamic, gr_error *err);

/* One reduction over the params arena; GR_OK when every parameter and
 * state value is finite, else GR_ERR_DIVERGED naming the step (the steps
 * done, as the metrics count; spe: steps per epoch), the first tensor
 * (graph order) holding inf/NaN and `when` ("at the metrics line", ...). */
gr_status gr_train_check_params(const gr_model *m, int64_t step, int64_t spe, const char *when, gr_error *err);

#endif
