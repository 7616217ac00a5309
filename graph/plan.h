/* plan.h — execution plans: the ordered node list of one pass and a memory
 * plan in which every tensor is an offset into one of four arenas:
 *   params (PARAM then STATE tensors, fp32 master), grads (same layout as the
 *   trainable front of params), optimizer state (slots x grads layout), and
 *   activations (inputs, activations, activation gradients, masks), the last
 *   packed by liveness so tensors whose lifetimes do not overlap share bytes.
 *
 * The model (gr_model) owns the first three on the device; each plan (train:
 * forward + backward; eval: forward only) owns its activation arena.
 * Compiling checks that the backend has a kernel for every node (a missing
 * one is an error naming the op, never a fallback). */
#ifndef GR_PLAN_H
#define GR_PLAN_H

#include "../kernels/backend.h"
#include "graph.h"

typedef struct gr_model {
    const gr_graph *g;
    gr_backend *be;
    float *params;        /* n_params floats */
    float *grads;         /* n_trainable floats */
    float *optim;         /* optim_slots * n_trainable floats */
    int optim_slots;
} gr_model;

typedef enum gr_plan_mode { GR_PLAN_TRAIN, GR_PLAN_EVAL } gr_plan_mode;

typedef struct gr_plan {
    const gr_graph *g;
    gr_model *m;
    gr_plan_mode mode;
    int n_steps;
    gr_kargs *steps;      /* one per node to run, pointers resolved */
    int64_t *offset;      /* per tensor: byte offset in the activation arena, -1 elsewhere */
    size_t act_bytes;     /* activation arena after reuse */
    size_t act_bytes_naive; /* what it would take without reuse */
    void *act;
    void *be_state;       /* the backend's per-plan state (conv algorithms, captured graphs) */
} gr_plan;

/* Allocates the model's arenas on m->be (optim_slots: 0 plain SGD, 1
 * momentum, 2 AdamW). GR_ERR_OOM names bytes needed. */
gr_status gr_model_init(gr_model *m, const gr_graph *g, gr_backend *be, int optim_slots, gr_error *err);
void gr_model_free(gr_model *m);
size_t gr_model_bytes(const gr_graph *g, int optim_slots, size_t *params, size_t *grads, size_t *optim);

/* Plans the pass without allocating (alloc=false, for `gpurun plan`) or
 * with its activation arena on the model's backend. */
gr_status gr_plan_compile(gr_plan *p, gr_model *m, const gr_graph *g, gr_plan_mode mode,
                          bool alloc, gr_error *err);
void gr_plan_free(gr_plan *p);
/* Runs the pass for n <= micro_batch samples. */
void gr_plan_run(gr_plan *p, int64_t n, const gr_exec_ctx *ctx);
/* Device pointer of tensor t (activation arena or model arenas). */
void *gr_plan_ptr(const gr_plan *p, int t);

#endif
