/* env.c — the table of GPURUN_* environment variables and their checks
 * (see env.h). */
#include "env.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern char **environ;

#define GR_ENV_PREFIX "GPURUN_"

const gr_env_knob gr_env_knobs[GR_ENV_COUNT] = {
    [GR_ENV_GEMM] = {"GPURUN_GEMM", GR_ENV_ENUM, "onednn|openblas", 0, 0, NULL,
                     "the CPU backend's GEMM library"},
    [GR_ENV_CONV] = {"GPURUN_CONV", GR_ENV_ENUM, "onednn|ref", 0, 0, NULL,
                     "the CPU backend's convolutions: oneDNN primitives or the im2col + GEMM reference"},
    [GR_ENV_CONV_LAYOUT] = {"GPURUN_CONV_LAYOUT", GR_ENV_ENUM, "plain|blocked", 0, 0, NULL,
                            "forces the memory layout of oneDNN's convolutions (unset: chosen per shape), "
                            "for measuring"},
    [GR_ENV_HALF] = {"GPURUN_HALF", GR_ENV_ENUM, "native|staged", 0, 0, NULL,
                     "staged: every kernel computes fp16/bf16 storage in fp32 on converted copies (the "
                     "numerical reference) instead of the CPU's native bf16 kernels and the GPU's native half ones"},
    [GR_ENV_CUDA_SYNC] = {"GPURUN_CUDA_SYNC", GR_ENV_BOOL, NULL, 0, 0, NULL,
                          "1: synchronize and check after every CUDA op (no CUDA Graphs), to find a failing "
                          "kernel"},
    [GR_ENV_FUSE] = {"GPURUN_FUSE", GR_ENV_BOOL, NULL, 0, 0, NULL,
                     "0: no fusion (batchnorm, add or dense + relu, graph/fuse.c), to compare against; the results are "
                     "the same "
                     "bit for bit"},
    [GR_ENV_DATA_MEM_LIMIT] = {"GPURUN_DATA_MEM_LIMIT", GR_ENV_INT, NULL, 0, INT64_MAX, "bytes",
                               "the largest split read into memory at open (default 2 GiB, or a quarter of "
                               "the memory available); larger ones are read batch by batch"},
    [GR_ENV_DATA_DIRECT] = {"GPURUN_DATA_DIRECT", GR_ENV_BOOL, NULL, 0, 0, NULL,
                            "0: every dataset read goes through HDF5 instead of pread"},
    [GR_ENV_LOSS_SCALE_INTERVAL] = {"GPURUN_LOSS_SCALE_INTERVAL", GR_ENV_INT, NULL, 1, INT64_MAX, "steps",
                                    "finite steps after which the dynamic fp16 loss scale doubles "
                                    "(default 2000), for tests"},
    [GR_ENV_MEMORY_LIMIT] = {"GPURUN_MEMORY_LIMIT", GR_ENV_INT, NULL, 1, INT64_MAX, "bytes",
                             "the memory train.micro_batch: auto and the out-of-memory remedies plan for "
                             "(default: 90% of what the device has free at the start); on the CPU also the "
                             "most its arenas may hold (a smaller device: past it, out of memory)"},
    [GR_ENV_SAVE_DELAY_MS] = {"GPURUN_SAVE_DELAY_MS", GR_ENV_INT, NULL, 0, 600000, "milliseconds",
                              "a pause before each checkpoint is written, for tests: a save that takes seconds, "
                              "as a large model's does"},
    [GR_ENV_START_DELAY_MS] = {"GPURUN_START_DELAY_MS", GR_ENV_INT, NULL, 0, 600000, "milliseconds",
                               "a pause at the start of `gpurun run` (its stop signals already caught, the spec "
                               "not yet read), for tests: a slow start (libraries loading, a launcher's peers)"},
    [GR_ENV_DATA_BLOCK_DELAY_MS] = {"GPURUN_DATA_BLOCK_DELAY_MS", GR_ENV_INT, NULL, 0, 600000, "milliseconds",
                                    "a pause after each block of files a resumable `gpurun data` conversion "
                                    "commits to OUT.partial, for tests: a conversion slow enough to stop midway"},
    [GR_ENV_LOADER_DELAY_MS] = {"GPURUN_LOADER_DELAY_MS", GR_ENV_INT, NULL, 0, 600000, "milliseconds",
                                "a pause before each batch a loader makes, for tests: a data path slower than the "
                                "step"},
    [GR_ENV_CMAKE_ARGS] = {"GPURUN_CMAKE_ARGS", GR_ENV_FREE, NULL, 0, 0, NULL,
                           "extra CMake arguments of scripts/dev.sh's build; gpurun does not read it"},
};

gr_env_id gr_env_find(const char *name) {
    for (int i = 0; i < GR_ENV_COUNT; i++)
        if (strcmp(gr_env_knobs[i].name, name) == 0) return (gr_env_id)i;
    return GR_ENV_COUNT;
}

/* The i-th name of an ENUM knob's values into buf; false past the last. */
static bool gr_env_enum_name(const gr_env_knob *k, int i, char *buf, size_t cap) {
    const char *p = k->values;
    for (; i > 0 && p; i--) {
        p = strchr(p, '|');
        if (p) p++;
    }
    if (!p) return false;
    size_t n = strcspn(p, "|");
    if (n >= cap) n = cap - 1;
    memcpy(buf, p, n);
    buf[n] = '\0';
    return true;
}

/* A decimal integer, the whole string, no overflow. */
static bool gr_env_parse_int(const char *s, int64_t *out) {
    const char *d = s[0] == '-' ? s + 1 : s;
    if (d[0] < '0' || d[0] > '9') return false;
    for (const char *c = d; *c; c++)
        if (*c < '0' || *c > '9') return false;
    errno = 0;
    char *end = NULL;
    long long v = strtoll(s, &end, 10);
    if (errno != 0 || *end != '\0') return false;
    *out = (int64_t)v;
    return true;
}

/* "expected onednn or openblas", "expected an integer >= 0 (bytes)", ... into buf. */
static void gr_env_expected(const gr_env_knob *k, char *buf, size_t cap) {
    size_t len = (size_t)snprintf(buf, cap, "expected ");
    char name[64];
    switch (k->kind) {
    case GR_ENV_ENUM: {
        int n = 0;
        while (gr_env_enum_name(k, n, name, sizeof name)) n++;
        for (int i = 0; i < n && len < cap; i++) {
            gr_env_enum_name(k, i, name, sizeof name);
            len += (size_t)snprintf(buf + len, cap - len, "%s%s", i == 0 ? "" : i == n - 1 ? " or " : ", ", name);
        }
        break;
    }
    case GR_ENV_INT:
        if (k->max == INT64_MAX)
            snprintf(buf + len, cap - len, "an integer >= %lld (%s)", (long long)k->min, k->unit);
        else
            snprintf(buf + len, cap - len, "an integer from %lld to %lld (%s)", (long long)k->min,
                     (long long)k->max, k->unit);
        break;
    case GR_ENV_BOOL: snprintf(buf + len, cap - len, "0 or 1"); break;
    case GR_ENV_FREE: snprintf(buf + len, cap - len, "anything"); break;
    }
}

/* The ENUM index, INT value or BOOL value of value; false when malformed. */
static bool gr_env_parse(const gr_env_knob *k, const char *value, int64_t *out) {
    char name[64];
    switch (k->kind) {
    case GR_ENV_ENUM:
        for (int i = 0; gr_env_enum_name(k, i, name, sizeof name); i++)
            if (strcmp(name, value) == 0) {
                *out = i;
                return true;
            }
        return false;
    case GR_ENV_INT: return gr_env_parse_int(value, out) && *out >= k->min && *out <= k->max;
    case GR_ENV_BOOL:
        if (strcmp(value, "0") != 0 && strcmp(value, "1") != 0) return false;
        *out = value[0] == '1';
        return true;
    case GR_ENV_FREE: *out = 0; return true;
    }
    return false;
}

gr_status gr_env_check_value(gr_env_id id, const char *value, gr_error *err) {
    GR_ASSERT((unsigned)id < GR_ENV_COUNT && value);
    const gr_env_knob *k = &gr_env_knobs[id];
    int64_t v;
    if (!value[0] || gr_env_parse(k, value, &v)) return GR_OK;
    char want[256];
    gr_env_expected(k, want, sizeof want);
    return gr_error_set(err, GR_ERR_USAGE, "%s=%.200s: %s", k->name, value, want);
}

gr_status gr_env_check_one(gr_env_id id, gr_error *err) {
    const char *v = getenv(gr_env_knobs[id].name);
    return v ? gr_env_check_value(id, v, err) : GR_OK;
}

/* "GPURUN_FOO=1: ..." for a GPURUN_* name the table lacks. */
static gr_status gr_env_unknown(const char *entry, gr_error *err) {
    size_t nlen = strcspn(entry, "=");
    char name[128];
    snprintf(name, sizeof name, "%.*s", (int)GR_MIN(nlen, sizeof name - 1), entry);
    const char *near = NULL;
    int best = 3; /* suggest a name at most 2 edits away */
    char known[512];
    size_t len = 0;
    for (int i = 0; i < GR_ENV_COUNT; i++) {
        const char *kn = gr_env_knobs[i].name;
        int d = gr_edit_distance(name, kn);
        if (d < best) best = d, near = kn;
        if (gr_env_knobs[i].kind != GR_ENV_FREE && len < sizeof known)
            len += (size_t)snprintf(known + len, sizeof known - len, "%s%s", len ? ", " : "", kn);
    }
    char hint[160] = "";
    if (near) snprintf(hint, sizeof hint, " (did you mean %s?)", near);
    return gr_error_set(err, GR_ERR_USAGE, "%.200s: unknown environment variable%s; gpurun reads %s", entry, hint,
                        known);
}

gr_status gr_env_check(gr_error *err) {
    for (char **e = environ; e && *e; e++) {
        if (strncmp(*e, GR_ENV_PREFIX, strlen(GR_ENV_PREFIX)) != 0) continue;
        size_t nlen = strcspn(*e, "=");
        gr_env_id id = GR_ENV_COUNT;
        for (int i = 0; i < GR_ENV_COUNT; i++)
            if (strlen(gr_env_knobs[i].name) == nlen && strncmp(gr_env_knobs[i].name, *e, nlen) == 0)
                id = (gr_env_id)i;
        if (id == GR_ENV_COUNT) return gr_env_unknown(*e, err);
        const char *value = (*e)[nlen] == '=' ? *e + nlen + 1 : "";
        gr_status st = gr_env_check_value(id, value, err);
        if (st) return st;
    }
    return GR_OK;
}

/* The parsed value of knob id (see gr_env_parse); false when unset, empty or malformed. */
static bool gr_env_get(gr_env_id id, gr_env_kind kind, int64_t *out) {
    GR_ASSERT((unsigned)id < GR_ENV_COUNT && gr_env_knobs[id].kind == kind);
    const char *v = getenv(gr_env_knobs[id].name);
    return v && v[0] && gr_env_parse(&gr_env_knobs[id], v, out);
}

const char *gr_env_str(gr_env_id id) {
    GR_ASSERT((unsigned)id < GR_ENV_COUNT);
    const gr_env_knob *k = &gr_env_knobs[id];
    GR_ASSERT(k->kind == GR_ENV_ENUM || k->kind == GR_ENV_FREE);
    const char *v = getenv(k->name);
    int64_t i;
    return v && v[0] && gr_env_parse(k, v, &i) ? v : NULL;
}

int64_t gr_env_int(gr_env_id id, int64_t dflt) {
    int64_t v;
    return gr_env_get(id, GR_ENV_INT, &v) ? v : dflt;
}

bool gr_env_bool(gr_env_id id, bool dflt) {
    int64_t v;
    return gr_env_get(id, GR_ENV_BOOL, &v) ? v != 0 : dflt;
}
