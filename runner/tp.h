/* tp.h — tensor parallelism, the job's side: a tensor group of t processes
 * trains its parts of the model's split layers (graph/tensor.h), each
 * process its part's graph, arenas and train plan; the whole model's graph
 * and arenas stay the job's (j->g, j->m), for the evaluation, checkpoints
 * and the final weights, which therefore carry no layout.
 *
 * Layout (DESIGN 2.4): rank = (d x pipeline + s) x tensor + t; the group's
 * processes read the same batches (the loader's rank and world are the
 * replica's: j->dp.comm, the ranks of the same t). In the part's train plan
 * a hook on the one dispatch sums over the group a row layer's output
 * (forward) and a column layer's input gradient (backward): Megatron's g
 * and f. The update: the gradients' norm is the group's sum of its split
 * tensors' and rank 0's replicated ones; a row layer's bias is rank 0's
 * (zero and frozen on the others); replicated layers see alike inputs and
 * gradients on every process, so their copies stay alike. Before anything
 * reads the whole model (gr_tp_gather) each process's slices are summed
 * into it over the group; after a resume the whole model's slices are
 * copied into the parts (gr_tp_scatter).
 *
 * Inside pipeline stages (pipe.h) each stage trains its cut of the part's
 * graph: the hooks are on the stage's plans, the norm is summed over the
 * stages and then the group, and the stages share their parts before the
 * group sums them into the whole model.
 *
 * Half precision: a row output or column input gradient in half storage is
 * decoded, summed in fp32 and rounded once (each part was rounded by its
 * kernel: one rounding more than one process makes).
 *
 * On GPUs the group's sums go over NCCL (the group a communicator split
 * from the world's), and the whole model's slices move through host copies
 * (gr_tp_gather, gr_tp_scatter: before a checkpoint, an evaluation, and
 * after a resume). */
#ifndef GR_TP_H
#define GR_TP_H

#include "../graph/tensor.h"
#include "job.h"
#include "optgroups.h"

typedef struct gr_tp_job {
    gr_comm group;        /* the tensor group (rank = t) */
    bool split;           /* group and j->dp.comm made (gr_tp_split) */
    int rank, t;
    gr_tp_plan plan;      /* on the whole graph j->g */
    gr_graph g;           /* this process's part */
    bool have_graph;
    gr_model m;           /* its arenas */
    gr_plan train;        /* its train plan, with the group's sums as hooks */
    gr_opt_groups og;     /* the part's groups, a row bias frozen on rank > 0 */
    gr_opt_groups og_norm; /* what this process counts in the gradients' norm */
    float *scratch;       /* a half tensor's sum in fp32 (the backend's memory) */
    int64_t scratch_n;
    gr_status hook_st;    /* a hook's first failure, reported after the pass */
    gr_error hook_err;
    int64_t step;
} gr_tp_job;

/* parallel.tensor > 1, once the whole graph is built (gr_job_compile): j->tp
 * with this rank's place and part (gr_tp_graph); refuses (exit 2, agreed
 * by every rank) what the split refuses. */
gr_status gr_tp_prepare(gr_job *j, gr_error *err);
/* After the whole graph is built (gr_job_compile): the split (exit 2 at
 * the refused layer), and the part's graph. */
gr_status gr_tp_graph(gr_job *j, gr_error *err);
/* After the whole model's arenas hold their initial values: the part's
 * arenas (those values' slices), its train plan and hooks (without
 * pipeline stages: theirs are the stage's, pipe.c), its groups. */
gr_status gr_tp_model(gr_job *j, gr_error *err);
/* After gr_parallel_split: the group (the ranks of the same replica and stage). */
gr_status gr_tp_split(gr_job *j, gr_error *err);
/* The train plan and model the loop runs: the part's (NULL without j->tp). */
static inline gr_plan *gr_tp_train_plan(gr_job *j) { return j->tp ? &j->tp->train : &j->train_plan; }
static inline gr_model *gr_tp_model_of(gr_job *j) { return j->tp ? &j->tp->m : &j->m; }
/* The whole model from the group's parts (params, state, optimizer state). */
gr_status gr_tp_gather(gr_job *j, gr_error *err);
/* The parts from the whole model (after a resume). */
void gr_tp_scatter(gr_job *j);
/* The group's sums after p's steps (the part's train plan; a pipeline
 * stage's plans of the part). */
void gr_tp_hook_plan(gr_job *j, gr_plan *p);
/* *sumsq (this process's part of the gradients' squared norm) summed over
 * the group; no-op without j->tp. */
gr_status gr_tp_sum_norm(gr_job *j, double *sumsq, gr_error *err);
/* A pass's hook failure (the group's sums), once. */
gr_status gr_tp_pass_status(gr_job *j, gr_error *err);
/* The update of the part with the group's gradient norm; *finite as it returns. */
gr_status gr_tp_apply(gr_job *j, double lr, int64_t step, double scale, bool *finite, gr_error *err);
void gr_tp_free(gr_job *j);

#endif
