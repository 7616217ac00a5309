/* spec.h — the job spec: YAML file -> config tree (every node keeps
 * file:line:col) -> typed gr_job_spec, validated against the schema table in
 * spec.c (DESIGN 1.4).
 *
 * Exports: gr_cfg (the tree), gr_spec_load (parse + --set overrides +
 * schema check + defaults), gr_spec_dump (the resolved spec as YAML, for
 * `gpurun validate` and the run directory's config.yaml), gr_spec_free,
 * and small tree helpers that graph/build.c uses to read the free-form
 * model section (ops parse their own attrs and report file:line:col). */
#ifndef GR_SPEC_H
#define GR_SPEC_H

#include <stdio.h>

#include "../common/gr_common.h"

#define GR_PATH_MAX 1024
#define GR_NAME_MAX 128
#define GR_MAX_MILESTONES 32
#define GR_MAX_CHANNELS 16

/* ---- config tree ---- */
typedef enum gr_cfg_kind { GR_CFG_SCALAR, GR_CFG_MAP, GR_CFG_SEQ } gr_cfg_kind;

typedef struct gr_cfg gr_cfg;
struct gr_cfg {
    gr_cfg_kind kind;
    const char *file; /* the YAML file, or "--set" for an override value */
    int line, col;    /* 1-based position of this node's value */
    char *scalar;     /* GR_CFG_SCALAR: the text ("" for an empty/null value) */
    bool quoted;      /* scalar was quoted in the source: always a string */
    int n;            /* MAP: number of pairs; SEQ: number of items */
    char **keys;      /* MAP: keys[i] */
    int *key_line, *key_col; /* MAP: position of keys[i] */
    gr_cfg **items;   /* MAP: value of keys[i]; SEQ: item i */
};

/* MAP lookup; NULL when absent or when map is not a map. */
gr_cfg *gr_cfg_get(const gr_cfg *map, const char *key);
/* Index of key in map, or -1. */
int gr_cfg_find(const gr_cfg *map, const char *key);

/* Typed scalar readers for op attrs. `key` is used in the message only.
 * Errors (exit 2) read `file:line:col: key: message`, e.g.
 * "job.yaml:7:20: model.layers[1].dense.units: expected an integer, got 'abc'".
 * Integers reject fractions, NaN, inf; both check [lo, hi]. */
gr_status gr_cfg_int(const gr_cfg *node, const char *key, int64_t lo, int64_t hi,
                     int64_t *out, gr_error *err);
gr_status gr_cfg_float(const gr_cfg *node, const char *key, double lo, double hi,
                       double *out, gr_error *err);
gr_status gr_cfg_bool(const gr_cfg *node, const char *key, bool *out, gr_error *err);
/* Formats "file:line:col: key: " + message into err, status GR_ERR_USAGE. */
gr_status gr_cfg_error(gr_error *err, const gr_cfg *node, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Parses one YAML document (file) or one YAML value (text, for --set) into a
 * tree. Anchors/aliases are resolved; multiple documents are an error. */
gr_status gr_cfg_parse_file(const char *path, gr_cfg **out, gr_error *err);
gr_status gr_cfg_parse_text(const char *text, const char *file, int line, int col,
                            gr_cfg **out, gr_error *err);
void gr_cfg_free(gr_cfg *node);
/* A deep copy (positions kept), to be freed with gr_cfg_free. */
gr_cfg *gr_cfg_clone(const gr_cfg *src);
/* Writes the subtree as block YAML at the given indent (used by gr_spec_dump
 * for the model section). */
void gr_cfg_dump(const gr_cfg *node, FILE *f, int indent);

/* ---- typed job spec (DESIGN 1.4, schema v1) ---- */
typedef enum gr_precision { GR_PREC_FP32, GR_PREC_TF32, GR_PREC_FP16, GR_PREC_BF16 } gr_precision;
typedef enum gr_optim_type { GR_OPTIM_SGD, GR_OPTIM_ADAMW } gr_optim_type;
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
} gr_optim_spec;

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
    bool deterministic;       /* false */
    bool cuda_graph;          /* true: a GPU captures each pass once into a CUDA Graph and replays it */
    bool cudnn_benchmark;     /* false: conv algorithms by cuDNN's heuristics; true: timed once per shape */

    struct {
        gr_split_spec train, val; /* val.path "" = no eval */
        bool shuffle;             /* true */
        int64_t prefetch;         /* 4, in [1, 64] */
        int64_t workers;          /* 2, in [0, 256] */
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
    } data;

    struct {
        int n_input;              /* 0 = take from the dataset */
        int64_t input[4];         /* per-sample shape, e.g. [1, 28, 28] */
        const gr_cfg *layers;     /* SEQ, required, non-empty; parsed by graph/build.c */
        const gr_cfg *blocks;     /* MAP or NULL */
        char init_from[GR_PATH_MAX];
    } model;

    struct {
        int64_t batch_size;       /* required, >= 1 */
        int64_t micro_batch;      /* default batch_size; must divide batch_size */
        int64_t epochs;           /* 0 = not given */
        int64_t steps;            /* 0 = not given; at least one of epochs/steps is required */
        gr_optim_spec optimizer;
        gr_sched_spec schedule;
        char loss[64];            /* softmax_cross_entropy */
        double label_smoothing;   /* [0, 1) */
        double grad_clip;         /* 0 = off, >= 0 */
    } train;

    struct {
        int64_t data;             /* 0 = auto */
        char backend[16];         /* auto | nccl | mpi | none */
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
 * epochs or steps given, ...). On error returns GR_ERR_USAGE with
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

#endif
