/* pp.h — pipeline parallelism's stage runtime: one stage of a model replica
 * runs its part of each optimizer step's micro-batches in the order of a
 * schedule (graph/pipeline.h), exchanging activations and their gradients
 * with its neighbours by point-to-point messages (comm.h: MPI between CPU
 * processes, NCCL between GPUs).
 *
 * The stage's nodes and messages come from graph/stages.h (gr_stage_io).
 * Each micro-batch in flight needs its own activations from its forward to
 * its backward, so the stage holds k plans of its part (exec.h:
 * gr_plan_compile_part), k the schedule's peak of micro-batches in flight
 * (1f1b: min(p - s, m); gpipe: m); micro-batch mb runs in slot mb % k,
 * which the schedule has freed by then (its previous micro-batch's backward
 * is done before mb's activation arrives). Every kernel goes through the
 * plans' one dispatch (gr_plan_run_steps); each message is started sends
 * and receives of the listed tensors finished by one wait, timed by the
 * watchdog (parallel.timeout_s: exit 7 naming the peer stage and the step)
 * and reported as a comm span. The parameters' gradients add into the one
 * grads arena in micro-batch order, as one process accumulating does. */
#ifndef GR_PP_H
#define GR_PP_H

#include "../exec/exec.h"
#include "../exec/loophooks.h"
#include "../graph/pipeline.h"
#include "../graph/stages.h"
#include "comm.h"

typedef struct gr_pp {
    gr_comm comm;              /* the replica's stages: its rank is the stage (a sub-communicator; the
                                * caller sets it before the first step) */
    gr_stage_io io;            /* this stage's nodes and messages */
    gr_model *m;
    gr_stage_range *ranges;    /* [p] each stage's parameters, state and gradients (stages.h) */
    gr_pipe_schedule sched;    /* the replica's schedule (every stage's list) */
    gr_plan *slot;             /* [k] the stage's plans, one per micro-batch in flight */
    gr_exec_ctx *ctx;          /* [k] the context each slot's micro-batch runs with */
    int k;
    int64_t step;              /* the 0-based optimizer step (the watchdog's line) */
    const gr_loop_hooks *const *hooks; /* the loop's hooks (NULL: none) */
    double *comm_s;            /* where the seconds waiting for messages are summed (NULL: nowhere) */
    double wait_s, step_s;     /* the last step's seconds waiting for its messages, and in all */
} gr_pp;

/* What the runner does at the schedule's points: load feeds micro-batch mb
 * (0..m-1, in order) into plan (the inputs and targets the stage reads) and
 * sets its context; forwarded follows the stage's forward of mb (the last
 * stage's reads the loss's sums). Either may be NULL. The loop's hooks hear
 * of each micro-batch before its forward and its backward (gr_hooks_micro). */
typedef struct gr_pp_calls {
    gr_status (*load)(void *user, int mb, gr_plan *plan, gr_exec_ctx *ctx, gr_error *err);
    void (*forwarded)(void *user, int mb, gr_plan *plan);
    void *user;
} gr_pp_calls;

/* Stage s of sp: its nodes and messages, the schedule of kind for m
 * micro-batches, and its k plans of g's training pass on model mo; the
 * caller then sets pp->comm, the replica's stages (comm.rank == s,
 * comm.world == sp->p). GR_ERR_OOM names the stage and the bytes of its
 * activation arena. */
gr_status gr_pp_init(gr_pp *pp, int s, const gr_stage_plan *sp, gr_model *mo, const gr_graph *g, gr_pipe_kind kind,
                     int m, gr_error *err);
/* One optimizer step's m micro-batches of n samples through the stage. */
gr_status gr_pp_step(gr_pp *pp, int64_t n, const gr_pp_calls *c, gr_error *err);
/* The stage's activation arenas: bytes of one slot (k of them). */
size_t gr_pp_slot_bytes(const gr_pp *pp);
/* Every stage's parameters, state and optimizer state from its owner to
 * the replica's other stages, so each holds the whole model (before a
 * checkpoint, an evaluation, the final weights). */
gr_status gr_pp_share_model(gr_pp *pp, gr_error *err);
/* v[0, n) summed over the replica's stages (the loss's sums, which the last
 * stage alone has; the squared norms of the stages' gradients). */
gr_status gr_pp_sum(gr_pp *pp, double *v, int n, const char *what, gr_error *err);
void gr_pp_free(gr_pp *pp);

#endif
