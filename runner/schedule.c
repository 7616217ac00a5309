/* schedule.c — learning-rate schedules: gr_schedule_lr, the lr used by one
 * optimizer step under train.schedule (formulas in schedule.h). */
#include "schedule.h"

#include <math.h>

/* Epoch boundaries are compared with a small tolerance, so that a
 * fractional epoch setting that is a whole number of steps (step_size 0.3
 * with 10 steps per epoch = 3 steps) decays at exactly that step despite
 * rounding in step / S / step_size. */
#define SCHED_EPOCH_EPS 1e-9
#define SCHED_PI 3.14159265358979323846

static int64_t sched_warmup_steps(const gr_sched_spec *s, int64_t steps_per_epoch) {
    if (s->warmup_steps > 0)
        return s->warmup_steps;
    if (s->warmup_epochs > 0.0)
        return (int64_t)llround(s->warmup_epochs * (double)steps_per_epoch);
    return 0;
}

double gr_schedule_lr(const gr_sched_spec *s, double base_lr, int64_t step,
                      int64_t total_steps, int64_t steps_per_epoch) {
    GR_ASSERT(s != NULL && step >= 0 && steps_per_epoch >= 1);
    const int64_t W = sched_warmup_steps(s, steps_per_epoch);
    if (step < W)
        return base_lr * (double)(step + 1) / (double)W;

    const double e = (double)step / (double)steps_per_epoch;
    int64_t span = total_steps - W;
    if (span < 1)
        span = 1;
    double p = (double)(step - W) / (double)span;
    if (p < 0.0)
        p = 0.0;
    if (p > 1.0)
        p = 1.0;

    switch (s->type) {
    case GR_SCHED_CONSTANT:
        return base_lr;
    case GR_SCHED_STEP: {
        GR_ASSERT(s->step_size > 0.0);
        double k = floor(e / s->step_size + SCHED_EPOCH_EPS);
        return base_lr * pow(s->gamma, k);
    }
    case GR_SCHED_MULTISTEP: {
        int k = 0;
        for (int i = 0; i < s->n_milestones; i++)
            if (e + SCHED_EPOCH_EPS >= s->milestones[i])
                k++;
        return base_lr * pow(s->gamma, (double)k);
    }
    case GR_SCHED_COSINE:
        return s->min_lr + (base_lr - s->min_lr) * (1.0 + cos(SCHED_PI * p)) / 2.0;
    case GR_SCHED_LINEAR:
        return base_lr + (s->min_lr - base_lr) * p;
    }
    GR_ASSERT(!"unknown schedule type");
    return base_lr;
}
