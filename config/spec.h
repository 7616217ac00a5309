/* spec.h — the job spec (DESIGN 1.4, schema v1), and the config module's
 * one header for the rest of the tree: YAML file -> config tree (cfg.h,
 * every node keeps file:line:col) -> `--set` overrides (spec_set.c) -> a
 * walk against the schema table (schema.c) -> typed gr_job_spec with
 * defaults and cross-field rules (spec_load.c); gr_spec_dump (spec_dump.c)
 * writes it back.
 *
 * Exports: everything of cfg.h (graph/build.c reads the free-form model
 * section through the tree helpers: ops parse their own attrs and report
 * file:line:col), gr_job_spec and its parts, gr_spec_load (parse + --set
 * overrides + schema check + defaults), gr_spec_dump (the resolved spec as
 * YAML, for `gpurun validate` and the run directory's config.yaml),
 * gr_spec_free, gr_spec_error and the enum names. */
#ifndef GR_SPEC_H
#define GR_SPEC_H

#include <stdio.h>

#include "../common/gr_common.h"
#include "cfg.h"

#define GR_PATH_MAX 1024
/* The longest path of a run or checkpoint directory (--run-dir, log.dir,
 * checkpoint.dir), in bytes: so that what gpurun makes in it
 * (checkpoints/step-NNNNNNNNN.h5.tmp, weights.h5.tmp) stays within
 * GR_PATH_MAX - 1. A file path (spec, data, checkpoint) is at most
 * GR_PATH_MAX - 1 bytes. Longer ones are refused (exit 2), never cut. */
#define GR_DIR_MAX 1000
#define GR_NAME_MAX 128
#define GR_MAX_MILESTONES 32
#define GR_MAX_CHANNELS 16

/* ---- typed job spec (DESIGN 1.4, schema v1) ---- */
typedef enum gr_precision { GR_PREC_FP32, GR_PREC_TF32, GR_PREC_FP16, GR_PREC_BF16 } gr_precision;
typedef enum gr_optim_type { GR_OPTIM_SGD, GR_OPTIM_ADAMW } gr_optim_type;
/* train.optimizer.decay: weight decay on every parameter (PyTorch's default),
 * or only on those of rank >= 2, the dense and conv weights, leaving biases
 * and norm scales alone (nanoGPT's and timm's recipes). */
typedef enum gr_decay_rule { GR_DECAY_ALL, GR_DECAY_MATRICES } gr_decay_rule;
typedef enum gr_sched_type {
    GR_SCHED_CONSTANT, GR_SCHED_STEP, GR_SCHED_MULTISTEP, GR_SCHED_COSINE, GR_SCHED_LINEAR
} gr_sched_type;

typedef struct gr_split_spec {
    char path[GR_PATH_MAX]; /* "" = not given */
    char group[256];        /* default "/" */
} gr_split_spec;

typedef struct gr_optim_spec {
    gr_optim_type type;   /* sgd */
    double lr;            /* required, > 0, finite */
    double momentum;      /* sgd: [0,1), default 0 */
    bool nesterov;        /* sgd: default false; needs momentum > 0 */
    double weight_decay;  /* >= 0, default 0 */
    double betas[2];      /* adamw: each in [0,1), default [0.9, 0.999] */
    double eps;           /* adamw: > 0, default 1e-8 */
    gr_decay_rule decay;  /* which parameters weight_decay applies to: all (default) */
    const gr_cfg *groups; /* SEQ or NULL: train.optimizer.groups (gr_param_groups_read) */
} gr_optim_spec;

/* One item of train.optimizer.groups: the parameters whose names match
 * `params` (a shell pattern, fnmatch(3) without flags: `*` crosses dots)
 * take its settings; the first group that matches a parameter wins. */
typedef struct gr_param_group {
    char params[256];
    double lr_mult;       /* (0, inf), default 1: multiplies the scheduled lr */
    double weight_decay;  /* >= 0; has_weight_decay false: the optimizer's, under its decay rule */
    bool has_weight_decay;
    bool frozen;          /* never updated (no weight decay, no optimizer state change) */
    gr_cfg at;            /* the item, for messages */
} gr_param_group;

/* Schedules multiply the optimizer's lr (see runner/schedule.h for the
 * exact formulas). Epoch-valued fields may be fractional. */
typedef struct gr_sched_spec {
    gr_sched_type type;       /* constant */
    double warmup_epochs;     /* >= 0, default 0 */
    int64_t warmup_steps;     /* >= 0, default 0; warmup_steps wins when both > 0 */
    double step_size;         /* step: epochs between decays, > 0, default 30 */
    double gamma;             /* step/multistep: factor, (0,1], default 0.1 */
    int n_milestones;         /* multistep: epochs, increasing */
    double milestones[GR_MAX_MILESTONES];
    double min_lr;            /* cosine/linear: final lr, >= 0, default 0 */
} gr_sched_spec;

typedef struct gr_job_spec {
    char file[GR_PATH_MAX];   /* the YAML file it came from */
    char name[GR_NAME_MAX];   /* default: file stem; letters, digits, ._-, not starting with . or - */
    uint64_t seed;            /* 0 */
    char device[32];          /* auto | cpu | cuda | cuda:N */
    gr_precision precision;   /* fp32 */
    bool loss_scale_dynamic;  /* default: true for fp16 only */
    double loss_scale;        /* fixed scale when not dynamic; 1 = none */
    bool deterministic;       /* false (true is refused at load: not honoured yet) */
    bool cuda_graph;          /* true: a GPU captures each pass once into a CUDA Graph and replays it */
    bool cudnn_benchmark;     /* false: conv algorithms by cuDNN's heuristics; true: timed once per shape */

    struct {
        gr_split_spec train, val; /* val.path "" = no eval */
        bool shuffle;             /* true */
        int64_t prefetch;         /* 4, in [1, 64] */
        int64_t workers;          /* in [0, 256]; -1: auto (gr_job_data_workers) */
        int64_t crop_size;        /* augment.crop.size, 0 = off */
        int64_t crop_padding;     /* augment.crop.padding, 0 (type random only) */
        int crop_type;            /* augment.crop.type: 0 random (crop of the padded image),
                                     1 resized (torchvision's RandomResizedCrop) */
        double crop_scale[2];     /* augment.crop.scale [0.08, 1] (resized) */
        double crop_ratio[2];     /* augment.crop.ratio [3/4, 4/3] (resized) */
        bool flip;                /* augment.flip, false */
        int n_mean, n_std;        /* 0 = not given (dataset attrs or /255 apply) */
        double mean[GR_MAX_CHANNELS], std[GR_MAX_CHANNELS]; /* std > 0 */
        char cache[16];           /* auto | memory | none; default auto */
        char decode[8];           /* auto | cpu | gpu: who decodes an encoded split's JPEGs (runner/decode.c) */
        int64_t seq_len;          /* T of token windows (a split of 1-D `tokens`), 1..2^24; 0 = not given */
        int on_error;             /* an encoded sample that does not decode: 0 fail (exit 3), 1 skip (counted) */
    } data;

    struct {
        int n_input;              /* 0 = take from the dataset */
        int64_t input[4];         /* per-sample shape, e.g. [1, 28, 28] */
        const gr_cfg *layers;     /* SEQ, required, non-empty; parsed by graph/build.c */
        const gr_cfg *inputs;     /* SEQ or NULL: the graph's inputs by name (gr_io_decls_read) */
        const gr_cfg *targets;    /* SEQ or NULL: its targets likewise */
        const gr_cfg *blocks;     /* MAP or NULL */
        char init_from[GR_PATH_MAX];
    } model;

    struct {
        int64_t batch_size;       /* required, >= 1 */
        int64_t micro_batch;      /* default batch_size; must divide batch_size; 0 = auto (the runner picks) */
        int64_t epochs;           /* 0 = not given */
        int64_t steps;            /* 0 = not given; at least one of epochs/steps is required */
        gr_optim_spec optimizer;
        gr_sched_spec schedule;
        char loss[64];            /* softmax_cross_entropy */
        double label_smoothing;   /* [0, 1) */
        int64_t loss_classes;     /* train.loss.classes: the first K logits are the classes (0: all) */
        const gr_cfg *metrics;    /* SEQ or NULL (absent: the loss's default); read by graph/head.c */
        double grad_clip;         /* 0 = off, >= 0 */
        int recompute_blocks;     /* train.recompute: 1 blocks (every top-level block use recomputed), 0 none */
    } train;

    struct {
        int64_t data;             /* 0 = auto */
        char backend[16];         /* auto | nccl | mpi | none */
        double bucket_mb;         /* 25, >= 0: gradient all-reduce buckets; 0 = one all-reduce after backward */
        double timeout_s;         /* 600, > 0: a collective slower than this ends the run (exit 7) */
        bool sync_batchnorm;      /* false: per-process batchnorm statistics; true: over the global batch */
        int64_t pipeline;         /* 1: pipeline stages (graph/stages.h cuts the layers; planning only) */
        int64_t tensor;           /* 1: tensor-parallel ranks; > 1 refused at plan and run (not implemented) */
        int64_t microbatches;     /* pipeline micro-batches of a step; 0 = not given: batch / (data x micro-batch) */
        int schedule;             /* 0 gpipe, 1 1f1b (gr_pipe_kind's order; default 1f1b) */
        const gr_cfg *stages;     /* a list of the layer or block-use names where stages 2.. begin; NULL auto */
    } parallel;

    struct {
        char dir[GR_PATH_MAX];    /* "" = <run dir>/checkpoints */
        int64_t every_steps;      /* 0 = off */
        double every_minutes;     /* 0 = off */
        int64_t keep;             /* 3, >= 1 */
        double signal_deadline_s; /* 20: SIGTERM to committed checkpoint */
    } checkpoint;

    struct {
        int64_t every_epochs;     /* 1 (used when every_steps is 0) */
        int64_t every_steps;      /* 0 */
    } eval;

    struct {
        int64_t every_steps;      /* 50, >= 1 */
        char dir[GR_PATH_MAX];    /* "" = runs/<name> */
        bool tensorboard;         /* true */
    } log;

    gr_cfg *root;                 /* the tree after overrides; owns model.layers/blocks */
} gr_job_spec;

/* Loads path, applies each "dotted.key=value" override of sets[0..nsets)
 * (the value parsed as YAML; a path the schema lacks is an error, also when
 * the file does not set it), checks every key against the schema (unknown
 * keys, wrong types, out-of-range, NaN/inf are errors at file:line:col),
 * fills defaults and cross-field rules (micro_batch divides batch_size,
 * epochs or steps given, ...), and refuses the values schema v1 accepts
 * but this version does not honour (`deterministic: true`). On error returns GR_ERR_USAGE with
 * err->msg = "file:line:col: key: message"; a missing/unreadable file is
 * "path: cannot read job spec: <strerror>" (also exit 2), and so is a path
 * that is not a regular file or holds more than 4 MiB (spec_input.h). YAML
 * tags other than the core schema's are refused; `name` (or the file stem
 * it defaults to) must be a safe file name (DESIGN 1.3). */
gr_status gr_spec_load(const char *path, const char *const *sets, int nsets,
                       gr_job_spec *out, gr_error *err);
void gr_spec_free(gr_job_spec *spec);

/* Writes the fully resolved spec (every schema key with its value, defaults
 * filled; the model section as given) as YAML that gr_spec_load accepts. */
void gr_spec_dump(const gr_job_spec *spec, FILE *f);

/* A job-spec error about the value at dotted path `key` (which the job may
 * or may not set), in the usual "file:line:col: key: message" form; exit 2. */
gr_status gr_spec_error(gr_error *err, const gr_job_spec *spec, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

const char *gr_precision_name(gr_precision p);
const char *gr_optim_name(gr_optim_type t);
const char *gr_sched_name(gr_sched_type t);

/* model.inputs / model.targets: the graph's inputs and targets bound to the
 * data's fields by name. An item is a field's name (the tensor takes it) or
 * {name: N, field: F, dtype: float32|int32}; dtype absent: the field's (an
 * integer field int32, any other float32). Absent lists: the image input
 * `input` and the label target `label` of today's HDF5 layout. */
#define GR_MAX_IO 4
typedef enum gr_io_dtype { GR_IO_FROM_FIELD, GR_IO_FLOAT32, GR_IO_INT32 } gr_io_dtype;
typedef struct gr_io_decl {
    char name[64];        /* the tensor's name in the graph (layers name it in `input:`) */
    char field[64];       /* the data's field (an HDF5 dataset of the split) */
    gr_io_dtype dtype;
    gr_cfg at;            /* the item, for messages */
} gr_io_decl;
/* Reads model.inputs (targets false) or model.targets into out[0..*n),
 * at most GR_MAX_IO (targets: 1), names unique and not `input`-clashing;
 * *n 0 when the list is absent. */
gr_status gr_io_decls_read(const gr_job_spec *s, bool targets, gr_io_decl *out, int *n, gr_error *err);

/* Reads s->train.optimizer.groups into a new array (*out, *n; NULL, 0 when
 * none), refusing malformed items at their file:line:col. */
gr_status gr_param_groups_read(const gr_job_spec *s, gr_param_group **out, int *n, gr_error *err);

#endif
