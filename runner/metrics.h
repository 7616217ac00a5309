/* metrics.h — what a training run tells: the sinks behind one interface.
 *
 * Every line the loop reports goes through here, to each sink that is on:
 *   metrics.jsonl  one JSON object per line ({"kind":"train"|"eval", ...}),
 *                  flushed per line; a write failure is exit 6
 *   TensorBoard    train/loss, train/lr, train/samples_per_s, val/loss and
 *                  val/accuracy scalars (log.tensorboard; runner/tfevents.c)
 *   the console    the start line, progress and eval lines on stdout (not
 *                  with --quiet) and the closing "done:" line
 *   summary.json   written once at the end, whatever the outcome
 * It also keeps the run's record (the last and best figures, the train
 * losses not yet reported, the training time so far), which checkpoints
 * carry so that a resumed run's lines continue the first one's, and after a
 * resume it trims the lines of the steps that are run again.
 *
 * The loop calls gr_metrics_step / gr_metrics_eval / gr_metrics_summary and
 * formats nothing itself. */
#ifndef GR_METRICS_H
#define GR_METRICS_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "../common/gr_common.h"
#include "../graph/graph.h"
#include "health.h"
#include "tfevents.h"

#define GR_METRICS_PATH_MAX (1024 + 16) /* GR_PATH_MAX + "/metrics.jsonl" */

/* What the lines say about the run, fixed when it begins. */
typedef struct gr_metrics_run {
    const char *name, *device, *precision, *run_dir;
    const char *device_detail;      /* gr_backend_describe: ISA and libraries, or the GPU */
    const char *staged_ops;         /* gr_plan_staged_ops of the train plan: half storage computed in fp32 */
    int64_t params;                 /* the model's weights */
    int64_t flops;                  /* per sample, a training pass's (gr_graph_flops) */
    int64_t batch, micro_batch;     /* samples per optimizer step (all processes) and per micro-batch (one) */
    int world;                      /* processes (data parallelism; x pipeline stages) */
    int stages;                     /* pipeline stages (0, 1: none) */
    int tensor;                     /* a tensor group's processes (0, 1: none) */
    int threads;                    /* the CPU backend's threads (0: a GPU) */
    int64_t spe, total, start;      /* steps per epoch, the job's steps, the first step of this process */
    int64_t log_every;              /* log.every_steps */
} gr_metrics_run;

/* The run's record: checkpointed, so a resumed run's metrics and summary
 * carry it on. */
typedef struct gr_record {
    double last_loss, last_acc, last_vloss, best_acc; /* NaN: none yet */
    double loss_window;  /* train losses since the last train line, and how many */
    int64_t loss_n;
    double time0;        /* training time before this process */
} gr_record;

typedef struct gr_metrics {
    FILE *jsonl;                   /* metrics.jsonl, opened for append */
    char path[GR_METRICS_PATH_MAX];
    gr_tfevents *tb;               /* NULL unless log.tensorboard */
    bool quiet;                    /* no console lines but errors */
    bool off;                      /* writes no file (data parallelism: every rank but 0) */
    gr_metrics_run run;
    char device_detail[256];       /* run.device_detail points here */
    char staged_ops[256];          /* run.staged_ops points here */
    gr_record rec;
    /* this process's clock */
    double t0;                     /* when its training began (gr_now) */
    double t_window, wait_window;  /* the last train line: when, and the loader's wait then */
    int64_t steps_window;          /* steps since the last train line (throughput) */
    double eval_s;                 /* time spent evaluating */
    double comm_s;                 /* time spent in collectives (data parallelism), this process */
    int grad_buckets;              /* buckets of the gradient all-reduce (0: one after backward, or none) */
    struct {                       /* pipeline parallelism (stages 0: none): rank 0's stage, the first */
        int stages, microbatches, in_flight;
        const char *schedule;
        double idle, predicted;    /* the stages' mean idle fraction, measured; (p-1)/(m+p-1) */
        size_t act_bytes;          /* the first stage's activation arenas (in_flight of them) */
    } pipe;
    size_t planned_bytes;          /* the plan's device memory: the model's arenas, activations, staging, scratch */
    size_t planned_host_bytes;     /* the plan's host memory (hostmem.h), next to peak_rss_bytes */
    int exit_code;                 /* summary.json's: the process's exit code as the summary is written */
    const char *error;             /* and its message when not 0 (NULL: none) */
    bool summarized;               /* summary.json was written */
    bool sealed;                   /* gr_metrics_summary_last wrote it: no later write (under write_mu) */
    pthread_mutex_t write_mu;      /* summary.json's writes: the main thread's and the watchdog's */
    gr_health health;              /* the device's figures on each train line and in the summary */
    size_t device_peak_bytes;      /* what the backend's allocations held at most (gr_backend_mem_peak) */
    double wall_s;                 /* set by gr_metrics_summary */
    int64_t data_skipped;          /* samples skipped under data.on_error skip (gr_metrics_data_skipped) */
    int64_t windows;               /* train lines so far (this process's) */
    double window_wait_pct;        /* the last one's data_wait_pct */
} gr_metrics;

/* A batch's samples skipped under data.on_error skip: counted for
 * summary.json's data_skipped, the first ten said on stderr. */
struct gr_batch;
void gr_metrics_data_skipped(gr_metrics *mx, const struct gr_batch *b);

/* Nothing open, nothing recorded yet (the record's figures NaN). */
void gr_metrics_init(gr_metrics *mx, bool quiet);
/* Closes the sinks (a TensorBoard write failure is not reported here). */
void gr_metrics_close(gr_metrics *mx);

/* run_dir/metrics.jsonl must be a regular file when it exists (exit 6),
 * checked before anything of the run is written. */
gr_status gr_metrics_check(gr_metrics *mx, const char *run_dir, gr_error *err);
/* Opens metrics.jsonl for append and, with tensorboard, a new event file. */
gr_status gr_metrics_open(gr_metrics *mx, const char *run_dir, bool tensorboard, gr_error *err);
/* After a resume from step: drops the lines and events of later steps that
 * earlier starts wrote (they are run again). */
gr_status gr_metrics_trim(gr_metrics *mx, const char *run_dir, int64_t step, gr_error *err);

/* The console's start line; the clock from which rates, ETA and the
 * training time are measured starts here. */
void gr_metrics_begin(gr_metrics *mx, const gr_metrics_run *run);
/* Training time so far, this process's and earlier ones' (checkpoints). */
double gr_metrics_time_s(const gr_metrics *mx);

/* A step's mean loss (also a step the loss scaler skipped). */
void gr_metrics_loss(gr_metrics *mx, double loss);
/* Is a train line due after step (1-based): every log.every_steps and at the end? */
bool gr_metrics_due(const gr_metrics *mx, int64_t step);
/* The train line after step: mean loss since the last one, lr, throughput,
 * loss scale, training time, the share of time spent waiting for data
 * (data_wait_s: the loader's total so far), and the ETA on the console. */
gr_status gr_metrics_step(gr_metrics *mx, int64_t step, double lr, double loss_scale, double data_wait_s,
                          gr_error *err);
/* An evaluation (runner/step.c's gr_job_evaluate): the mean loss (over
 * what the loss counts: samples, or tokens not ignored) and each metric of
 * the graph (graph.h: train.metrics) over one epoch of the split. */
typedef struct gr_eval {
    double loss;
    int n_metrics;
    double metric[GR_MAX_METRICS];
    const char *name[GR_MAX_METRICS]; /* the graph's metric names ("accuracy", "accuracy_top5") */
    int64_t samples;
    bool interrupted;   /* a signal came in between (a preemption does not wait for it): nothing else set */
} gr_eval;

/* An evaluation of the val split after step: recorded (the loss and the
 * top-1 accuracy: last, best) and written, its loss and every metric of
 * the job by name (metrics.jsonl's eval line, TensorBoard's val/<name>, the
 * console; the TensorBoard file is flushed by gr_metrics_flush). */
gr_status gr_metrics_eval(gr_metrics *mx, int64_t step, const gr_eval *e, gr_error *err);
/* Time spent evaluating: not training time (throughput excludes it). */
void gr_metrics_eval_time(gr_metrics *mx, double seconds);
/* Pushes the TensorBoard file's buffered events. */
gr_status gr_metrics_flush(gr_metrics *mx, gr_error *err);

/* summary.json: the run's outcome (status: finished, stopped, diverged,
 * checkpoint_failed), its figures and this process's throughput; then the
 * TensorBoard file is flushed. The first failure is returned. */
gr_status gr_metrics_summary(gr_metrics *mx, const char *status, int64_t steps, double loss_scale,
                             int64_t skipped_steps, double data_wait_s, gr_error *err);
/* From another thread, as the process is about to exit (the collective
 * watchdog, parallel.h, while the main thread is stuck in a collective):
 * summary.json's outcome with exit_code and error, as gr_metrics_summary
 * writes it, unless an outcome is written already; either way no later
 * write changes summary.json. Waits at most 5 s for a write in progress;
 * failures are not reported (the process exits with its own line). */
void gr_metrics_summary_last(gr_metrics *mx, const char *status, int exit_code, const char *error, int64_t steps,
                             double loss_scale, int64_t skipped_steps, double data_wait_s);
/* summary.json while an attempt runs: status "running", this attempt's first
 * step (start_step) and the last step whose checkpoint is committed (steps),
 * so that an attempt killed without a word (SIGKILL, a lost machine) is not
 * taken for the previous attempt's outcome: `summarize` shows it
 * "interrupted" at that step once no process holds the run's lock. Written
 * when the attempt starts and after each committed checkpoint; the outcome
 * (gr_metrics_summary) replaces it. */
gr_status gr_metrics_running(gr_metrics *mx, int64_t committed_step, gr_error *err);
/* The console's closing line. */
void gr_metrics_done(const gr_metrics *mx, int64_t steps);

#endif
