/* exec.h — the runtime: a model's arenas on a backend, plans bound to them,
 * and the one step loop.
 *
 * The model (gr_model) owns the params, grads and optimizer-state arenas on
 * the device; each plan (train: forward + backward; eval: forward only) owns
 * a memory plan (graph/memplan.h), its activation arena and its bound steps
 * (one gr_kargs per non-view node). Compiling checks that the backend has a
 * kernel for every node (a missing one is an error naming the op and layer,
 * never a fallback).
 *
 * gr_plan_run is the one loop over a plan's steps, on every backend and in
 * every mode (CPU, CUDA eager, CUDA Graph capture): each step goes through
 * one dispatch — the plan's before-hooks, gr_backend_exec (kernel, the
 * fp32 staging of half tensors a kernel does not take, the backend's
 * per-op check), the after-hooks.
 * Hooks are where a profiler, a precision cast or a gradient all-reduce
 * attach. */
#ifndef GR_EXEC_H
#define GR_EXEC_H

#include "../graph/memplan.h"
#include "../kernels/backend.h"

typedef struct gr_model {
    const gr_graph *g;
    gr_backend *be;
    float *params;        /* n_params floats */
    float *grads;         /* n_trainable floats */
    float *optim;         /* optim_slots * n_trainable floats */
    int optim_slots;
} gr_model;

/* Callbacks around every step of every run of a plan, in the order added.
 * step: the index in the plan's steps (a is p->steps.step + step); a holds this
 * run's n and context. Either callback may be NULL. A run the backend
 * replays from a recorded CUDA Graph calls no hooks: what they launched on
 * the stream while it was captured (the first run to be recorded) is part
 * of the recording; while a run is being captured, hooks may enqueue work
 * on the backend's stream but must not wait for the device. */
typedef struct gr_exec_hook {
    void (*before)(void *user, int step, const gr_kargs *a);
    void (*after)(void *user, int step, const gr_kargs *a);
    void *user;
    /* closest to the kernel: its before runs after every other hook's, its
     * after before theirs (a profiler times the kernel, not the other hooks) */
    bool inner;
} gr_exec_hook;

typedef struct gr_plan {
    const gr_graph *g;
    gr_model *m;            /* NULL when only planned (no backend): nothing bound */
    gr_memplan mem;         /* where each tensor lives in the activation arena; its bytes */
    void *act;              /* the activation arena on m->be (NULL when not allocated) */
    gr_steps steps;         /* the bound steps (steps.step[0..steps.n)), as the backend sees them */
    gr_exec_hook *hooks;
    int n_hooks;
    /* half storage: steps whose kernel computes in fp32 on staged copies
     * (gr_kargs.staged), and their fp32 staging area on the backend */
    int n_staged;
    size_t stage_bytes;
    void *stage;
    /* whether the backend could say its library scratch for these steps
     * (steps.workspace; false without a backend) */
    bool ws_known;
    /* steps [0, n_fwd_steps) are the forward pass's (with the loss), the
     * rest the backward's (a pipeline stage runs them apart) */
    int n_fwd_steps;
} gr_plan;

/* Allocates the model's arenas on m->be (optim_slots: 0 plain SGD, 1
 * momentum, 2 AdamW). GR_ERR_OOM names bytes needed. */
gr_status gr_model_init(gr_model *m, const gr_graph *g, gr_backend *be, int optim_slots, gr_error *err);
void gr_model_free(gr_model *m);

/* Plans the pass without allocating (alloc=false; m may be NULL: `gpurun
 * plan`) or with its activation arena on the model's backend and its steps
 * bound and prepared there. GR_ERR_DEVICE when the backend lacks a kernel,
 * GR_ERR_OOM when the arena does not fit. */
gr_status gr_plan_compile(gr_plan *p, gr_model *m, const gr_graph *g, gr_plan_mode mode,
                          bool alloc, gr_error *err);
/* The same for the part of the pass one process runs (a pipeline stage,
 * graph/stages.h): steps for the nodes run[i] != 0 only, and the memory plan
 * of gr_memplan_init_part(run, pin). */
gr_status gr_plan_compile_part(gr_plan *p, gr_model *m, const gr_graph *g, gr_plan_mode mode, bool alloc,
                               const uint8_t *run, const uint8_t *pin, gr_error *err);
void gr_plan_free(gr_plan *p);
/* Adds a hook (copied) to every later run of p. */
void gr_plan_add_hook(gr_plan *p, const gr_exec_hook *h);
/* Runs the pass for n <= micro_batch samples. */
void gr_plan_run(gr_plan *p, int64_t n, const gr_exec_ctx *ctx);
/* Runs its steps [from, to) only (a pipeline stage's forward, [0,
 * n_fwd_steps), or backward, [n_fwd_steps, steps.n)), through the same
 * dispatch and launched eagerly: the backend must not record CUDA Graphs
 * (its options say cuda_graph false; GR_ASSERT). */
void gr_plan_run_steps(gr_plan *p, int64_t n, const gr_exec_ctx *ctx, int from, int to);
/* The ops of p's staged steps, "batchnorm, relu, ..." (each once, in run
 * order) into buf; "" when none. counts: an op with native steps too says
 * how many of its steps are staged, "conv (1 of 53)" (the first conv of a
 * GPU run reads the fp32 input batch). */
const char *gr_plan_staged_ops(const gr_plan *p, bool counts, char *buf, size_t n);
/* Device pointer of tensor t (activation arena or model arenas). */
void *gr_plan_ptr(const gr_plan *p, int t);
/* Whether t has a place in p (the model's arenas, or p's activation arena:
 * a part's plan leaves out what its nodes do not touch). */
bool gr_plan_holds(const gr_plan *p, int t);

#endif
