/* optgroups.h — the optimizer's parameter groups as ranges of the flat
 * parameter, gradient and state arrays: train.optimizer.decay and
 * train.optimizer.groups (config/spec.h) resolved against the model's
 * parameter names. Each range is updated with its own lr multiplier and
 * weight decay, or not at all (frozen). Without groups and with decay: all,
 * one range spans the whole arena and the update is the one call it always
 * was.
 *
 * A range covers its parameters' storage and the zero padding after each
 * (graph.h, GR_PARAM_ALIGN), so ranges start 64-byte aligned and together
 * tile [0, n_trainable). */
#ifndef GR_OPTGROUPS_H
#define GR_OPTGROUPS_H

#include <stdio.h>

#include "../config/spec.h"
#include "../graph/graph.h"

typedef struct gr_opt_range {
    int64_t off, n;         /* floats of the grads arena (and the params arena's front) */
    double lr_mult;         /* multiplies the scheduled lr */
    double weight_decay;
    bool frozen;
} gr_opt_range;

typedef struct gr_opt_groups {
    gr_opt_range *r;
    int n;
    bool any_frozen;        /* then clipping's norm leaves the frozen ranges out */
} gr_opt_groups;

/* The ranges of g's trainable parameters under s's optimizer settings.
 * A group whose pattern matches no parameter is an error at its YAML item
 * (exit 2), naming a few parameter names. */
gr_status gr_opt_groups_make(const gr_graph *g, const gr_job_spec *s, gr_opt_groups *og, gr_error *err);
void gr_opt_groups_free(gr_opt_groups *og);
/* og's ranges (whole: the one range standing for og without any) with every
 * float outside keep[0..nk) ([off, n] pairs, disjoint, in any order) frozen, cut
 * where an interval's edge falls: a pipeline stage's or a tensor group
 * process's part of the update (pipe.c, tp.c); into out (any_frozen). */
void gr_opt_groups_keep(const gr_opt_groups *og, const gr_opt_range *whole, const int64_t (*keep)[2], int nk,
                        gr_opt_groups *out);
/* For `gpurun validate` without data: the groups against the model built at
 * model.input (nothing to check when it is not given: the data's shape
 * decides the model's then, and the run checks them). */
gr_status gr_opt_groups_check(const gr_job_spec *s, gr_error *err);
/* One line per parameter whose settings differ from the optimizer's own
 * (lr multiplier, weight decay, frozen), for `gpurun plan`; nothing when none does. */
void gr_opt_groups_print(const gr_opt_groups *og, const gr_graph *g, const gr_job_spec *s, FILE *f);

#endif
