/* env.h — every GPURUN_* environment variable gpurun reads, in one table
 * (name, meaning, the values it takes), and the one way to read them.
 *
 * gr_env_check validates the whole environment once, at start
 * (runner/main.c): a GPURUN_* name the table does not hold, or a value that
 * is not one of the knob's values, is a usage error (exit 2) that names the
 * variable and the value and says what is expected. The typed getters read
 * one knob by id: unset or empty reads as the caller's default, and so does
 * a malformed value (gr_env_check has refused it before anything ran; code
 * that runs without it, such as tests and benchmarks, gets the default, or
 * checks the knob itself with gr_env_check_one as the CPU backend does).
 *
 * Values: an enum knob takes one of its names; an integer knob a decimal
 * integer in [min, max] (no sign unless min < 0, no spaces, no suffix); a
 * boolean knob 0 or 1; a free knob anything (a name the tools around gpurun
 * use, which gpurun itself does not read). */
#ifndef GR_ENV_H
#define GR_ENV_H

#include <stdbool.h>
#include <stdint.h>

#include "gr_common.h"

typedef enum gr_env_id {
    GR_ENV_GEMM,                /* kernels/cpu/cpu_backend.c */
    GR_ENV_CONV,                /* kernels/cpu/cpu_backend.c */
    GR_ENV_CONV_LAYOUT,         /* kernels/cpu/conv_onednn.c */
    GR_ENV_HALF,                /* kernels/cpu/cpu_backend.c, kernels/cuda/cuda_backend.c */
    GR_ENV_CUDA_SYNC,           /* kernels/cuda/cuda_backend.c */
    GR_ENV_FUSE,                /* runner/job.c */
    GR_ENV_DATA_MEM_LIMIT,      /* dataio/dataset.c */
    GR_ENV_DATA_DIRECT,         /* dataio/dataset.c */
    GR_ENV_LOSS_SCALE_INTERVAL, /* runner/scaler.c */
    GR_ENV_MEMORY_LIMIT,        /* kernels/cpu/cpu_backend.c, runner/memfit.c */
    GR_ENV_SAVE_DELAY_MS,       /* runner/saver.c */
    GR_ENV_START_DELAY_MS,      /* runner/main.c */
    GR_ENV_DATA_BLOCK_DELAY_MS, /* dataio/convert_encoded.c */
    GR_ENV_LOADER_DELAY_MS,     /* dataio/loader.c */
    GR_ENV_CMAKE_ARGS,          /* scripts/dev.sh (not read by gpurun) */
    GR_ENV_COUNT
} gr_env_id;

typedef enum gr_env_kind { GR_ENV_ENUM, GR_ENV_INT, GR_ENV_BOOL, GR_ENV_FREE } gr_env_kind;

typedef struct gr_env_knob {
    const char *name;      /* "GPURUN_GEMM" */
    gr_env_kind kind;
    const char *values;    /* ENUM: its names, '|'-separated, the default first ("onednn|openblas") */
    int64_t min, max;      /* INT: the range */
    const char *unit;      /* INT: what it counts ("bytes", "steps") */
    const char *meaning;   /* one line: what it changes */
} gr_env_knob;

/* The table, indexed by gr_env_id. */
extern const gr_env_knob gr_env_knobs[GR_ENV_COUNT];

/* Every GPURUN_* variable of the environment: known, and well formed.
 * GR_ERR_USAGE with "GPURUN_X=V: ..." at the first that is not. */
gr_status gr_env_check(gr_error *err);
/* The environment's value of knob id well formed (or unset). */
gr_status gr_env_check_one(gr_env_id id, gr_error *err);
/* value (not NULL) well formed for knob id; "" is (it reads as unset). */
gr_status gr_env_check_value(gr_env_id id, const char *value, gr_error *err);
/* The id of a GPURUN_* name; GR_ENV_COUNT when the table lacks it. */
gr_env_id gr_env_find(const char *name);

/* ENUM or FREE: the value; NULL when unset, empty or malformed. */
const char *gr_env_str(gr_env_id id);
/* INT: the value; dflt when unset, empty or malformed. */
int64_t gr_env_int(gr_env_id id, int64_t dflt);
/* BOOL: the value; dflt when unset, empty or malformed. */
bool gr_env_bool(gr_env_id id, bool dflt);

#endif
