/* stages.h — pipeline stages, pure planning: the built graph's layers (in
 * build order, which is the forward order) cut into p contiguous stages,
 * either balanced by FLOPs (parallel.stages: auto) or at the named layers
 * or block uses (parallel.stages: [name, ...], where stages 2.. begin).
 * Nothing here runs a stage: `gpurun plan` prints the cut (DESIGN 2.4).
 *
 * What a cut must respect: stage s+1 receives from stage s only (the
 * activation message: every tensor of s that s+1 reads), so an edge from a
 * layer of stage i to a layer of stage j > i + 1 (a skip connection over a
 * whole stage) is refused, and so is a layer's state read in another
 * stage; a trainable weight read in several stages (tied) is carried
 * (gr_stages_tied). Graph inputs and targets are read by
 * whichever stage needs them (each stage's process loads its own fields).
 *
 * Exports: gr_stages_balance (the cutter on a plain cost list),
 * gr_stages_cut / gr_stages_free (on a graph, named in its messages). */
#ifndef GR_STAGES_H
#define GR_STAGES_H

#include "graph.h"

typedef struct gr_stage {
    int first, last;  /* the stage's layers, indices into g->layers, inclusive */
    int64_t flops;    /* per sample, forward + backward (+ recomputation); the last stage has the loss */
    int64_t params;   /* the parameters its layers own */
} gr_stage;

typedef struct gr_stage_plan {
    int p;
    gr_stage *stages; /* [p] */
    bool named;       /* cut at parallel.stages' names (false: balanced) */
} gr_stage_plan;

/* Cuts cost[0..n) into p non-empty contiguous parts whose largest sum is the
 * least possible; first[s] is part s's first index (first[0] = 0). Costs are
 * >= 0 and their sum fits an int64_t. Needs 1 <= p <= n (GR_ASSERT). */
void gr_stages_balance(const int64_t *cost, int n, int p, int *first);

/* The stages of g for p = spec->parallel.pipeline: named when
 * spec->parallel.stages is given, balanced otherwise. Usage errors (exit 2)
 * at the key's file:line:col: p above the layers; a name that is no layer or
 * block use, out of order, or naming the first layer; as many names as p - 1
 * wanted; an edge over a stage or a layer's state read in another stage (both layers
 * named). out is empty on error (gr_stages_free is safe). */
gr_status gr_stages_cut(const gr_graph *g, const gr_job_spec *spec, gr_stage_plan *out, gr_error *err);
void gr_stages_free(gr_stage_plan *sp);

/* What stage s of sp runs of g's training pass (forward, loss, backward)
 * and the messages it exchanges, as storage roots of the activation arena
 * in tensor order:
 *   run[i]      node i is the stage's: its layer is, or (no layer: the loss,
 *               the metrics) the stage is the last; backward nodes and
 *               autodiff's sums carry their forward layer;
 *   recv_act    what the stage reads of s - 1's forward (the activation
 *               message: received before the stage's forward of a micro-batch),
 *   send_act    what s + 1 reads of this stage's forward (sent after it),
 *   recv_grad   what the stage reads of s + 1's backward (received before
 *               its backward),
 *   send_grad   what s - 1 reads of this stage's backward (sent after it);
 *   pin[t]      the four lists' roots, which the stage's memory plan keeps
 *               for the whole pass (memplan.h: gr_memplan_init_part).
 * The graph inputs and targets are not messages: each stage reads its own.
 * gr_stages_cut has refused every other crossing (an edge over a stage, a
 * layer's state, a recomputed block cut in two), which here is GR_ASSERT;
 * a tied weight is no message (gr_stages_tied). */
typedef struct gr_stage_io {
    int s, p;
    uint8_t *run;  /* [g->n_nodes] */
    uint8_t *pin;  /* [g->n_tensors] */
    int *recv_act, n_recv_act, *send_act, n_send_act;
    int *recv_grad, n_recv_grad, *send_grad, n_send_grad;
} gr_stage_io;

void gr_stage_io_init(const gr_graph *g, const gr_stage_plan *sp, int s, gr_stage_io *io);

/* Where a stage's parameters live: its layers' PARAM tensors are
 * [param_off, param_off + param_n) of the params arena (and of the grads
 * arena, and of each optimizer slot), their STATE tensors [state_off,
 * state_off + state_n); both contiguous, since tensors are laid out in
 * build order (GR_ASSERT). An empty range has n 0. */
typedef struct gr_stage_range {
    int64_t param_off, param_n, state_off, state_n;
} gr_stage_range;
void gr_stages_ranges(const gr_graph *g, const gr_stage_plan *sp, gr_stage_range *r /* [sp->p] */);
/* The weights tied across stages (PARAM tensors that a layer of another
 * stage than their owner's reads: GPT-2's embedding read by its head), in
 * tensor order, into out (NULL: only counted); returns how many. Each
 * reading stage adds its part of the gradient into its own copy's slot;
 * the runtime sums the slots over the stages, and each updates its copy
 * alike (runner/pipe.c). */
int gr_stages_tied(const gr_graph *g, const gr_stage_plan *sp, int *out);
void gr_stage_io_free(gr_stage_io *io);

#endif
