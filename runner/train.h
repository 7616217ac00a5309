/* train.h — the training loop and the commands behind `gpurun run`,
 * `gpurun eval` and `gpurun plan`.
 *
 * gr_train_run drives epochs, micro-batches with gradient accumulation, the
 * optimizer, the LR schedule, gradient clipping, periodic eval, the progress
 * line and the run directory (config.yaml, metrics.jsonl, summary.json).
 * It lives in train.c; the job it runs is compiled in job.c, its lines and
 * files are written by metrics.c, its checkpoints by resume.c; step.c holds
 * the passes below, eval_cmd.c and plan_cmd.c the other two commands. */
#ifndef GR_TRAIN_H
#define GR_TRAIN_H

#include <stdio.h>

#include "../dataio/dataio.h"
#include "../exec/exec.h"
#include "../config/spec.h"
#include "../exec/loophooks.h"
#include "optgroups.h"

typedef struct gr_run_options {
    const char *run_dir;  /* NULL: log.dir, else runs/<name> */
    const char *resume;   /* NULL, "auto" or a checkpoint path */
    const char *device;   /* NULL: the spec's device */
    int threads;          /* 0: all cores */
    bool quiet;           /* no progress lines */
    int profile_steps;    /* --profile [STEPS]: optimizer steps profiled after the warm-up; 0: off */
} gr_run_options;

gr_status gr_train_run(const gr_job_spec *spec, const gr_run_options *opt, gr_error *err);

/* `gpurun eval`: loads the checkpoint's parameters and state into the job's
 * model and prints one JSON line {"kind":"eval","split","checkpoint","step",
 * "samples","loss","accuracy"} over the whole split ("val" or "train"),
 * batchnorm and dropout in eval mode. A checkpoint that does not verify or
 * fit the model is exit 6. */
gr_status gr_train_eval(const gr_job_spec *spec, const char *checkpoint, const char *split,
                        const gr_run_options *opt, gr_error *err);

/* `gpurun predict`: the checkpoint's (or weights.h5's) model applied to
 * inputs (image files; FILE.h5[:GROUP] splits) through the job's eval
 * preprocessing; one JSON line per sample on stdout, {"input", ["index",
 * "label" for a split's samples,] "top": [{"class","index","p"}...]}, the
 * top classes by probability (predict.c). */
gr_status gr_train_predict(const gr_job_spec *spec, const char *checkpoint, int top, const char *const *inputs,
                           int n_inputs, const gr_run_options *opt, gr_error *err);

/* Compiles the job without running it and prints the layer table, parameter
 * count, FLOPs per sample and bytes per arena at the micro-batch. With
 * memory (`--memory BYTES|auto`; NULL: none), whether the job fits that
 * many bytes (auto: what the device has free) and the largest micro-batch
 * that does (runner/memfit.h); a malformed value is exit 2. */
gr_status gr_train_plan_report(const gr_job_spec *spec, const char *memory, FILE *f, gr_error *err);

/* The sums a pass's stats tensors hold (graph.h: the loss's and each
 * metric's [sum, count]), added up over micro-batches and processes. */
typedef struct gr_pass_stats {
    double loss_sum, loss_count;
    int n_metrics;                 /* 0: the metrics were not read (training) */
    double metric_sum[GR_MAX_METRICS], metric_count[GR_MAX_METRICS];
} gr_pass_stats;
/* Adds the pass's loss stats to s, and with metrics each metric's. */
void gr_train_read_pass(gr_plan *p, gr_pass_stats *s, bool metrics);

/* The two halves of an optimizer step, shared by the loop and the tests:
 * one micro-batch's forward + backward (parameter gradients ADD into the
 * grads arena; adds its loss sum and correct count), then clipping and the
 * optimizer update of the whole model at learning rate lr (step: the
 * updates applied before this one, 0-based; AdamW's bias correction uses
 * step + 1). */
void gr_train_micro_step(gr_plan *p, const gr_batch *b, const gr_exec_ctx *ctx, double *loss_sum,
                         double *correct);
/* The same into s (the metrics too when asked), told to the loop's hooks
 * (loophooks.h: the copies as device spans). */
void gr_train_micro_step_hooked(gr_plan *p, const gr_batch *b, const gr_exec_ctx *ctx, gr_pass_stats *s,
                                bool metrics, const gr_loop_hooks *h);
/* Its parts (the profiler times them apart): the batch into the plan's
 * input and label tensors (asynchronous on a GPU), and the pass's loss sum
 * and correct count added to *loss_sum, *correct (a read-back: the fence). */
void gr_train_load_batch(gr_plan *p, const gr_batch *b);
void gr_train_read_stats(gr_plan *p, double *loss_sum, double *correct);

void gr_train_apply(gr_model *m, const gr_job_spec *s, double lr, int64_t step);
/* How an update looks for inf/NaN gradients (one sum of squares, finite.h). */
typedef enum gr_grad_check {
    GR_CHECK_NONE,
    GR_CHECK_SKIP, /* first; found: nothing is updated (dynamic loss scaling skips the step) */
    GR_CHECK_STOP, /* found ends the run (exit 5): without clipping, the sum is taken in the update's
                    * own pass (gr_backend_sgd's sumsq), and the parameters are updated all the same */
} gr_grad_check;
/* The same with the gradients scaled by loss_scale (mixed precision):
 * divides it out, and looks for inf/NaN gradients as check says (the
 * training loop: always); false = found. og: the parameter groups
 * (optgroups.h), each range updated with its settings; NULL: the whole
 * arena with the optimizer's (gr_train_apply). */
bool gr_train_apply_scaled(gr_model *m, const gr_job_spec *s, const gr_opt_groups *og, double lr, int64_t step,
                           double loss_scale, gr_grad_check check, bool *cleared);
/* The same with the gradients' squared norm given (NULL: measured here, over
 * the ranges og does not freeze): a pipeline stage's is the sum of every
 * stage's (runner/pipe.c). cleared (NULL: the gradients are kept): the update
 * may leave the gradients zero as it reads them (gr_backend_sgd); *cleared
 * says whether the whole arena now is (never with a frozen range, whose
 * gradients nothing reads), so the next step need not clear it. */
bool gr_train_apply_sumsq(gr_model *m, const gr_job_spec *s, const gr_opt_groups *og, double lr, int64_t step,
                          double loss_scale, gr_grad_check check, const double *sumsq, bool *cleared);
/* The squared norm of the gradients over the ranges og does not freeze. */
double gr_train_grad_sumsq(gr_model *m, const gr_opt_groups *og);

#endif
