/* job.h — a job as `gpurun run`, `eval` and `plan` hold it while they work:
 * its data, graph, backend, model, plans and loaders, and (for `run`) its
 * run directory, metrics, loss scaler and checkpoints.
 *
 * The runner's files share this struct; each owns a part of it:
 *   job.c      compile (data, input shape, normalization, graph), the
 *              backend, the model and its plans, the loaders, the run
 *              directory's paths and files, the spec as run, free
 *   step.c     the passes: a micro-batch, the optimizer update, evaluation
 *   resume.c   checkpoints: their header, periodic and last saves, resuming
 *   metrics.c  the metrics sinks (gr_metrics)
 *   scaler.c   the loss scaler (gr_scaler)
 *   train.c    the loop (gr_train_run)
 * and eval_cmd.c / plan_cmd.c are `gpurun eval` and `gpurun plan`. */
#ifndef GR_JOB_H
#define GR_JOB_H

#include <stdbool.h>
#include <stdio.h>

#include "../checkpoints/ckpt.h"
#include "../dist/dp.h"
#include "../exec/loophooks.h"
#include "metrics.h"
#include "rundir.h"
#include "saver.h"
#include "scaler.h"
#include "train.h"

typedef struct gr_job {
    const gr_job_spec *spec;
    gr_dataset *train_ds, *val_ds;
    gr_loader *train_ld, *val_ld;
    gr_augment aug, val_aug;  /* per-sample transforms of the two splits */
    int64_t in_shape[3];
    int in_ndim;
    gr_graph_io io;      /* the graph's inputs and target: j->in_shape's image and labels, or model.inputs/targets */
    struct gr_jobio *byname; /* model.inputs: the table sources and the loader's fields (jobio.c); NULL: images */
    double mean[GR_MAX_CHANNELS], std[GR_MAX_CHANNELS];
    int n_norm;
    gr_graph g;
    bool have_graph;
    int fused;           /* the relus gr_job_layout fused into the pass before them (graph/fuse.c) */
    const char *fuse_off; /* why it fused nothing: GPURUN_FUSE=0, pipeline stages, the device; NULL: it ran */
    const char *fuse_left; /* a fusion the device takes that this job leaves out, and why; NULL: none */
    bool no_cache;       /* gr_job_compile reads no images into memory (validate) */
    bool eval_only;      /* eval or predict: nothing trains (what the device notes say) */
    gr_backend *be;
    gr_model m;
    gr_opt_groups og;    /* the optimizer's parameter groups (optgroups.h), made with the graph */
    gr_plan train_plan, eval_plan;
    char run_dir[GR_PATH_MAX];
    gr_rundir_lock lock; /* held from the start of `gpurun run` to its end */
    bool wrote_run_dir;  /* config.yaml written: the run directory holds this run */
    gr_metrics mx;       /* metrics.jsonl, TensorBoard, the console, summary.json; the run's record */
    char ckpt_dir[GR_PATH_MAX + 16];
    gr_rundir_lock ckpt_lock; /* the checkpoint directory's (ckptdir.h); fd -1 when not its own */
    bool ckpt_claim;          /* its .owner is to name this run (ckptdir.h) */
    gr_saver *saver; /* checkpoints: host snapshot buffers + the background writer */
    char *spec_text; /* the resolved spec, stored in every checkpoint */
    bool eval_pending; /* the evaluation due at the checkpoint's step was interrupted */
    bool data_warned;  /* the loader was said not to keep up (train.c) */
    /* --resume: the checkpoint, loaded, verified and checked against the job
     * before the run directory is touched (pre_found false: none, start fresh) */
    gr_ckpt_header pre_h;
    float *pre_params, *pre_optim;
    bool pre_found;
    int ckpt_threads;  /* --resume: the CPU threads its checkpoint was trained with (0: none, unknown) */
    char pre_path[GR_PATH_MAX + 100];
    gr_scaler sc;      /* loss scaling: the scale and its history (checkpointed) */
    gr_dp dp;          /* data parallelism: the processes (dp.comm; world 1: this one alone), the
                        * gradient all-reduce, and dp.step, the 0-based optimizer step being run;
                        * under pipeline or tensor parallelism dp.comm is the ranks of the same
                        * stage and shard of every replica */
    gr_comm world;     /* every process of the run (dp.comm's parent under pipeline or tensor parallelism) */
    bool split;        /* dp.comm is the replicas' sub-communicator of world (parallel.h: gr_parallel_split) */
    struct gr_pipe_job *pp; /* pipeline parallelism (pipe.h); NULL: parallel.pipeline 1 */
    struct gr_tp_job *tp;   /* tensor parallelism (tp.h); NULL: parallel.tensor 1 */
    struct gr_prof *prof; /* --profile (profile.h); NULL: not profiling */
    const gr_loop_hooks *hooks; /* who watches the loop (loophooks.h: the profiler); NULL: nobody */
    int prof_steps;       /* --profile's steps (0: off), known before the backend is configured */
    int64_t ck_step;   /* step of the last save started (-1: none); ck_failed: it was reported failed */
    bool ck_failed;
    int64_t ck_noted;  /* the last committed step summary.json was told of (-1: none) */
    bool decode_gpu;   /* data.decode resolved to the GPU: the loaders ship bytes (decode.c) */
    bool decode_said_png, decode_said_refused; /* the host fall-backs, said once */
    uint8_t *decode_need; /* micro_batch flags: the samples the device decoder gave back */
} gr_job;

/* Whether this process writes the run directory, its metrics and
 * checkpoints: rank 0 (every process of a one-process run). */
static inline bool gr_job_writer(const gr_job *j) { return j->world.rank == 0; }

/* The data-parallel replicas, each reading its share of every batch: the
 * processes, over pipeline x tensor (parallel.h, pipe.h). */
static inline int gr_job_replicas(const gr_job *j) {
    return j->world.world / (int)(j->spec->parallel.pipeline * j->spec->parallel.tensor);
}

/* An empty job of spec (quiet: no console lines but errors). */
void gr_job_init(gr_job *j, const gr_job_spec *spec, bool quiet);
/* Frees everything the job holds (the run directory's lock is the caller's). */
void gr_job_free(gr_job *j);


/* Opens the data (and with need_val the val split), decides the input shape
 * and normalization, builds the graph with its backward pass, and checks the
 * data fit the model: labels within its outputs, the splits' `classes` the
 * same, as many as its outputs (gr_job_check_classes). A split that cannot
 * be opened is exit 3, prefixed with where the spec names its file. */
gr_status gr_job_compile(gr_job *j, const gr_job_spec *spec, bool need_val, gr_error *err);
/* `gpurun validate`: the data files of spec exist and fit its model (all
 * gr_job_compile checks, reading no images); fine when it names none. */
gr_status gr_job_check_data(const gr_job_spec *spec, gr_error *err);
gr_status gr_job_check_classes(const gr_job *j, const gr_dataset *train, const gr_dataset *val, gr_error *err);
/* The backend for device ("auto": CUDA when it runs every op of the job,
 * else the cpu, which is said on stderr even when quiet). */
gr_status gr_job_backend(gr_job *j, const gr_job_spec *s, const char *device, int threads, bool quiet,
                         gr_error *err);
/* The model on the backend: its arenas, the initial parameters (the seed's,
 * or model.init_from) and the train and eval plans. */
gr_status gr_job_model(gr_job *j, gr_error *err);
/* The job's graph for the inputs and target of io: built, its backward
 * appended, stored at the spec's precision (gr_job_compile; `gpurun plan`
 * without data), its optimizer groups made. */
gr_status gr_job_graph(gr_job *j, const gr_graph_io *io, gr_error *err);
/* Its graph part: g built for io, its backward appended, recomputation and
 * the spec's precision applied (a tensor group's part too: tp.c). */
gr_status gr_job_build(const gr_job_spec *spec, const gr_graph_io *io, gr_graph *g, gr_error *err);
/* j->io for today's layout: one float input `input` of j->in_shape, int32
 * labels. */
void gr_job_io_default(gr_job *j);
/* `gpurun eval` and `predict`: the job compiled (with the val split when
 * val), its model on the backend holding the parameters and state of
 * checkpoint (a checkpoint, *step its step, or a run's weights.h5, *step
 * -1), and its eval plan. */
gr_status gr_job_setup_eval(gr_job *j, const gr_job_spec *spec, const char *checkpoint, bool val,
                            const gr_run_options *opt, int64_t *step, gr_error *err);
/* The layout pass for the job's backend (gr_job_model runs it first). */
void gr_job_layout(gr_job *j);
/* The parameters and state of a checkpoint (its optimizer state is read,
 * verified and dropped; *step: the steps it was after) or of a run's final
 * weights.h5 (*step -1: the file does not say) into j's model (eval_cmd.c). */
gr_status gr_job_load_weights(gr_job *j, const char *checkpoint, int64_t *step, gr_error *err);
/* Under fp16/bf16, names on stderr (unless quiet) the ops whose kernels on
 * this backend compute in fp32 on converted copies of their half tensors;
 * on a GPU, that attention runs gpurun's own kernel (not cuDNN's). */
void gr_job_say_staged(const gr_job *j, bool quiet);
/* The loader threads a loader of this job gets: data.workers, or for auto
 * (-1) 0 where the job runs on the cpu and the train split stores its pixels
 * or is read as a table (the training thread makes each batch: such a decode
 * is a copy and a normalize, and decode threads waking among the step's,
 * which take the cores, preempted them and cost more than the decode did:
 * DESIGN 2.3, Threads), else GR_DATA_WORKERS_AUTO (a GPU's step leaves the
 * cores to them; a JPEG split keeps them, as before). *why, when not NULL:
 * the reason, for the lines that name the count. */
enum { GR_DATA_WORKERS_AUTO = 2 };
int gr_job_data_workers(const gr_job *j, const char **why);
/* The base of both loaders' configuration: micro-batch, seed, normalization,
 * prefetch and workers, this rank's shard (j->dp.comm). */
void gr_job_loader_config(const gr_job *j, gr_loader_config *lc);
/* The train loader's configuration (shuffled, drop_last, augmented, batch
 * buffers from the backend) and the val one's (file order, every batch). */
void gr_job_loader_configs(const gr_job *j, gr_loader_config *tl, gr_loader_config *vl);
/* The train loader and the val one, so configured. */
gr_status gr_job_open_loaders(gr_job *j, gr_error *err);

/* Optimizer state slots per trainable value: AdamW 2, SGD with momentum 1, else 0. */
int gr_optim_slots(const gr_optim_spec *o);

/* j->run_dir (--run-dir, log.dir or runs/<name>) and j->ckpt_dir
 * (checkpoint.dir or <run dir>/checkpoints), decided once. */
void gr_job_paths(gr_job *j, const gr_run_options *opt);
/* Whether j->run_dir holds a run (config.yaml, metrics.jsonl or summary.json). */
bool gr_job_dir_holds_run(const gr_job *j);
/* j->run_dir (made and locked at the start) gets this run: config.yaml,
 * metrics.jsonl, TensorBoard, and the checkpoint directory j->ckpt_dir.
 * A directory holding another run is refused unless resumed. */
gr_status gr_job_open_run_dir(gr_job *j, const gr_run_options *opt, gr_error *err);
/* The resolved spec every checkpoint stores (made once, kept in j). */
const char *gr_job_spec_text(gr_job *j);
/* <run dir>/weights.h5: the final weights, loadable by model.init_from. */
gr_status gr_job_save_weights(gr_job *j, gr_error *err);

/* ---- decode.c: data.decode ---- */

/* At compile: data.decode gpu with a split that is not encoded, or with
 * device cpu, is exit 2 naming the key and why. */
gr_status gr_job_decode_check(const gr_job *j, gr_error *err);
/* Once the backend exists, before the loaders open: where the JPEGs of an
 * encoded split are decoded. auto: on the GPU when the job runs on CUDA and
 * the backend's decoder opens, else on the host; gpu on another backend is
 * exit 2; a decoder that does not open sends auto and gpu to the host,
 * said on stderr even with quiet. Sets j->decode_gpu (the loaders'
 * encoded_payload) and says the path (unless quiet): "gpurun: data:
 * decoding JPEGs on cuda:0 with nvJPEG ... (hardware backend, ...)". */
gr_status gr_job_decode_setup(gr_job *j, bool quiet, gr_error *err);
/* A batch with an encoded payload (b->enc; else nothing) decoded by the
 * device into p's input, its PNGs' rows and the JPEGs the decoder gave back
 * (decoded on the host by ld) uploaded, each kind said once; afterwards
 * gr_train_load_batch uploads only its labels. Errors: the decoder's
 * (exit 4), the host decode's (exit 3). */
gr_status gr_job_decode_batch(gr_job *j, gr_plan *p, gr_loader *ld, gr_batch *b, gr_error *err);

/* ---- step.c ---- */

/* Micro-batch k (of accum) of optimizer step `step`: the train loader's next
 * batch (told to the hooks as a data span; decoded into p's input when its
 * payload is encoded; its skipped samples counted) and the context it runs
 * with (its own dropout key over the whole step and the data replicas, the
 * loss scale's gradient scale, batchnorm's sums). The caller uploads it and
 * releases it. */
gr_status gr_train_next_batch(gr_job *j, gr_plan *p, int64_t step, int64_t accum, int64_t k, gr_batch **b,
                              gr_exec_ctx *ctx, gr_error *err);

/* An evaluation: the mean loss (over what the loss counts: samples, or
 * tokens not ignored) and each metric of the graph (graph.h: train.metrics)
 * over one epoch of j->val_ld, in eval mode. */
gr_status gr_job_evaluate(gr_job *j, gr_eval *e, gr_error *err);

#endif
