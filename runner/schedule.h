/* schedule.h — learning-rate schedules (train.schedule) and the optimizer
 * step count arithmetic around them.
 *
 * lr(step) for optimizer step `step` (0-based: the lr used BY step `step`),
 * base = train.optimizer.lr, T = total optimizer steps of the run,
 * S = optimizer steps per epoch, W = warmup steps (warmup_steps if > 0,
 * else round(warmup_epochs * S)), e = step / S (fractional epoch):
 *   warmup (step < W):  base * (step + 1) / W            (all types)
 *   constant:  base
 *   step:      base * gamma^floor(e / step_size)
 *   multistep: base * gamma^(number of milestones m with e >= m)
 *   cosine:    min_lr + (base - min_lr) * (1 + cos(pi * p)) / 2
 *   linear:    base + (min_lr - base) * p
 * where p = (step - W) / max(1, T - W), clamped to [0, 1].
 * (step and multistep follow PyTorch's StepLR/MultiStepLR stepped once per
 * epoch when e is whole; cosine/linear are per optimizer step.) */
#ifndef GR_SCHEDULE_H
#define GR_SCHEDULE_H

#include "../config/spec.h"

double gr_schedule_lr(const gr_sched_spec *s, double base_lr, int64_t step,
                      int64_t total_steps, int64_t steps_per_epoch);

#endif
