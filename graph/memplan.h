/* memplan.h — the pure memory planner: which nodes a pass runs and where
 * each tensor lives. Needs no device (`gpurun plan` runs it alone); the
 * runtime (exec/exec.h) binds a memory plan to a backend's arenas.
 *
 * Every tensor is an offset into one of four arenas:
 *   params (PARAM then STATE tensors, fp32 master), grads (same layout as the
 *   trainable front of params), optimizer state (slots x grads layout), and
 *   activations (inputs, activations, activation gradients, masks), the last
 *   packed by liveness so tensors whose lifetimes do not overlap share bytes.
 * The first three belong to the model and are laid out by the graph
 * (gr_tensor.param_offset); this planner places the fourth. */
#ifndef GR_MEMPLAN_H
#define GR_MEMPLAN_H

#include "graph.h"

/* train: forward + backward; eval: forward only */
typedef enum gr_plan_mode { GR_PLAN_TRAIN, GR_PLAN_EVAL } gr_plan_mode;

typedef struct gr_memplan {
    const gr_graph *g;
    gr_plan_mode mode;
    int n_nodes;            /* nodes of the pass: g->n_nodes (train) or g->n_forward (eval) */
    int64_t *offset;        /* per tensor: byte offset of a storage root in the activation
                               arena; -1 for views and for tensors in no activation arena */
    size_t act_bytes;       /* activation arena after reuse */
    size_t act_bytes_naive; /* what it would take without reuse */
    size_t naive_by_elem[GR_ELEM_COUNT]; /* act_bytes_naive by storage type (gr_tensor.elem) */
} gr_memplan;

/* Plans the activation arena of g's pass in mode. */
void gr_memplan_init(gr_memplan *mp, const gr_graph *g, gr_plan_mode mode);
/* The same for the part of the pass one process runs (a pipeline stage,
 * graph/stages.h): only the nodes run[i] != 0 (NULL: all) place tensors, a
 * tensor no such node reads or writes gets no offset (-1), and the storage
 * roots pin[t] != 0 (NULL: none; the messages a stage receives and sends)
 * live for the whole pass. */
void gr_memplan_init_part(gr_memplan *mp, const gr_graph *g, gr_plan_mode mode, const uint8_t *run,
                          const uint8_t *pin);
void gr_memplan_free(gr_memplan *mp);
/* Byte offset of tensor t (a view: its storage root's) in the activation
 * arena; -1 when t lives in the model's arenas or in none of this pass. */
int64_t gr_memplan_offset(const gr_memplan *mp, int t);
/* Bytes of the model's arenas for optim_slots (0 plain SGD, 1 momentum,
 * 2 AdamW); returns their sum. */
size_t gr_model_bytes(const gr_graph *g, int optim_slots, size_t *params, size_t *grads, size_t *optim);

#endif
