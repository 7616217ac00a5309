/* pipe.h — pipeline parallelism, the job's side (the stage runtime is
 * dist/pp.h): the launched world split into stages and data replicas, the
 * stage's part of the model, its optimizer ranges, and the loop's points
 * that change under it.
 *
 * Layout (DESIGN 2.4): rank = (d x pipeline + s) x tensor + t. Stage s of
 * replica d reads replica d's share of every batch (the loader's rank and
 * world are the replica's: j->dp.comm, the ranks of stage s), runs its
 * layers' forward and backward of the step's m micro-batches in the
 * schedule's order, all-reduces its gradients with the other replicas'
 * stage s, and updates its own parameters. Every stage holds the whole
 * model's arenas; gr_pipe_share sends each stage's parameters, state and
 * optimizer state to the others before anything reads the whole model (a
 * checkpoint, which rank 0 writes as one process would, so checkpoints
 * carry no layout; an evaluation, which the whole world shares; the final
 * weights). The loss's sums are the last stage's; the gradients' norm
 * (clipping, the inf/NaN check) is summed over the stages. A weight tied
 * across stages (gr_stages_tied) has a copy on each stage that reads it:
 * their gradient slots are summed over the stages (and replicas), and each
 * such stage updates its copy alike (its norm counted once, by its owner).
 * A signal is agreed by every rank after a whole step. With a tensor group
 * (tp.h) the stage trains its cut of the group's part (g, mo): the same
 * layers, the split ones narrower. */
#ifndef GR_PIPE_H
#define GR_PIPE_H

#include "../dist/pp.h"
#include "job.h"
#include "optgroups.h"

typedef struct gr_pipe_job {
    gr_comm pipe;        /* the replica's stages (rank = stage) */
    gr_stage_plan sp;    /* the cut (of the whole graph j->g) */
    const gr_graph *g;   /* what the stage trains: a tensor group's part (tp.h), else the whole model */
    gr_model *mo;
    gr_pp pp;            /* the stage's runtime */
    bool pp_ready;
    gr_opt_groups og;    /* j->og with every other stage's range frozen but its tied weights' */
    gr_opt_groups og_norm; /* the stage's own range alone: its part of the gradients' norm */
    int *tied, n_tied;   /* the weights tied across stages (graph/stages.h: gr_stages_tied) */
    int stage, p, m, replicas;
    bool split;          /* pipe and j->dp.comm are made (gr_pipe_split) */
    double wait_s, step_s; /* summed over the steps run: waiting for messages, and in all */
} gr_pipe_job;

/* parallel.pipeline > 1, after the ranks agreed on the job: j->pp with this
 * rank's stage and the data replicas (gr_job_replicas). */
void gr_pipe_prepare(gr_job *j);
/* Once the world is joined on the device (NCCL on GPUs: runner/parallel.c):
 * j->world keeps it, j->dp.comm becomes the ranks of this rank's stage and
 * j->pp->pipe (the stage runtime's) the stages of its replica. No-op
 * without j->pp. */
gr_status gr_pipe_split(gr_job *j, gr_error *err);
/* Once the micro-batch is decided and the model's arenas exist: the stage
 * cut (exit 2 as `gpurun plan` says it), the step's micro-batches (exit 2
 * when parallel.microbatches disagrees with train.micro_batch), the
 * stage's plans (exit 4 naming the stage when they do not fit), its
 * optimizer ranges. */
gr_status gr_pipe_model(gr_job *j, gr_error *err);
/* After gr_pipe_model: *p the stage's part of the whole graph's training
 * pass, with no arena (its steps and figures). */
gr_status gr_pipe_whole_plan(gr_job *j, gr_plan *p, gr_error *err);
/* One step's forward and backward of every micro-batch through the stage,
 * its gradients summed over the replicas; *loss: the batch's mean loss,
 * the same on every rank. */
gr_status gr_pipe_accumulate(gr_job *j, int64_t step, int64_t spe, int64_t accum, double *loss, gr_error *err);
/* The optimizer update of the stage's parameters (gr_train_apply_sumsq)
 * with the gradients' norm of the whole model; *finite as it returns. */
gr_status gr_pipe_apply(gr_job *j, double lr, int64_t step, double scale, bool *finite, gr_error *err);
/* Every stage's parameters, state and optimizer state on every stage (no-op
 * without pipeline parallelism). */
gr_status gr_pipe_share(gr_job *j, gr_error *err);
/* *v = its largest over the world (a decision every rank must share). */
gr_status gr_pipe_agree(gr_job *j, int *v, const char *what, gr_error *err);
/* The measured bubble: the fraction of their steps' time the stages spent
 * waiting for their messages (a neighbour not yet there, and the transfer),
 * their mean; every rank calls it (a sum over the stages); -1 before any
 * step. */
gr_status gr_pipe_idle(gr_job *j, double *idle, gr_error *err);
/* summary.json's pipeline figures (metrics.h: mx.pipe), the measured
 * bubble only when ended_well (every rank is there: gr_pipe_idle). */
void gr_pipe_report(gr_job *j, bool ended_well);
void gr_pipe_free(gr_job *j);

#endif
