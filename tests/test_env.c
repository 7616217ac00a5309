/* test_env.c — the GPURUN_* environment table (common/env.h): the table is
 * whole, gr_env_check refuses an unknown GPURUN_* name and every malformed
 * value with a message naming the variable, the value and what is expected,
 * accepts the well-formed ones, and the typed getters read what was set
 * (their default when unset, empty or malformed). */
#include <stdlib.h>
#include <string.h>

#include "common/env.h"
#include "gr_test.h"
#include "kernels/backend.h"

/* Unsets every knob, so the cases start from a clean environment. */
static void env_clear(void) {
    for (int i = 0; i < GR_ENV_COUNT; i++) unsetenv(gr_env_knobs[i].name);
}

/* gr_env_check with only name=value set: its status, and its message into msg. */
static gr_status env_check_with(const char *name, const char *value, char *msg, size_t cap) {
    env_clear();
    setenv(name, value, 1);
    gr_error err = {0};
    gr_status st = gr_env_check(&err);
    snprintf(msg, cap, "%s", st ? err.msg : "");
    unsetenv(name);
    return st;
}

static void test_table(void) {
    for (int i = 0; i < GR_ENV_COUNT; i++) {
        const gr_env_knob *k = &gr_env_knobs[i];
        CHECK_MSG(k->name && strncmp(k->name, "GPURUN_", 7) == 0, "knob %d has no GPURUN_ name", i);
        if (!k->name) continue;
        CHECK_MSG(k->meaning && k->meaning[0], "%s: no meaning", k->name);
        CHECK_MSG(gr_env_find(k->name) == (gr_env_id)i, "%s: found as %d", k->name, (int)gr_env_find(k->name));
        if (k->kind == GR_ENV_ENUM) CHECK_MSG(k->values && strchr(k->values, '|'), "%s: no values", k->name);
        if (k->kind == GR_ENV_INT) CHECK_MSG(k->min <= k->max && k->unit, "%s: range or unit", k->name);
    }
    CHECK(gr_env_find("GPURUN_FOO") == GR_ENV_COUNT);
    CHECK(gr_env_find("GPURUN_") == GR_ENV_COUNT);
}

static void test_refused(void) {
    static const struct { const char *name, *value, *want; } bad[] = {
        {"GPURUN_FOO", "1", "GPURUN_FOO=1: unknown environment variable"},
        {"GPURUN_GEMN", "openblas", "did you mean GPURUN_GEMM?"},
        {"GPURUN_", "x", "GPURUN_=x: unknown environment variable"},
        {"GPURUN_GEMM", "blas", "GPURUN_GEMM=blas: expected onednn or openblas"},
        {"GPURUN_GEMM", "OpenBLAS", "GPURUN_GEMM=OpenBLAS: expected onednn or openblas"},
        {"GPURUN_CONV", "im2col", "GPURUN_CONV=im2col: expected onednn or ref"},
        {"GPURUN_CONV_LAYOUT", "nchw", "GPURUN_CONV_LAYOUT=nchw: expected plain or blocked"},
        {"GPURUN_HALF", "emulate", "GPURUN_HALF=emulate: expected native or staged"},
        {"GPURUN_CUDA_SYNC", "yes", "GPURUN_CUDA_SYNC=yes: expected 0 or 1"},
        {"GPURUN_CUDA_SYNC", "2", "GPURUN_CUDA_SYNC=2: expected 0 or 1"},
        {"GPURUN_DATA_DIRECT", "off", "GPURUN_DATA_DIRECT=off: expected 0 or 1"},
        {"GPURUN_DATA_MEM_LIMIT", "2G", "GPURUN_DATA_MEM_LIMIT=2G: expected an integer >= 0 (bytes)"},
        {"GPURUN_DATA_MEM_LIMIT", "-1", "GPURUN_DATA_MEM_LIMIT=-1: expected an integer >= 0"},
        {"GPURUN_DATA_MEM_LIMIT", " 5", "GPURUN_DATA_MEM_LIMIT= 5: expected an integer"},
        {"GPURUN_DATA_MEM_LIMIT", "+5", "GPURUN_DATA_MEM_LIMIT=+5: expected an integer"},
        {"GPURUN_DATA_MEM_LIMIT", "99999999999999999999", "=99999999999999999999: expected an integer >= 0"},
        {"GPURUN_LOSS_SCALE_INTERVAL", "0", "GPURUN_LOSS_SCALE_INTERVAL=0: expected an integer >= 1 (steps)"},
        {"GPURUN_LOSS_SCALE_INTERVAL", "5x", "GPURUN_LOSS_SCALE_INTERVAL=5x: expected an integer >= 1"},
        {"GPURUN_LOSS_SCALE_INTERVAL", "abc", "GPURUN_LOSS_SCALE_INTERVAL=abc: expected an integer >= 1"},
    };
    char msg[GR_ERROR_MSG_MAX];
    for (size_t i = 0; i < GR_ARRAY_LEN(bad); i++) {
        gr_status st = env_check_with(bad[i].name, bad[i].value, msg, sizeof msg);
        CHECK_MSG(st == GR_ERR_USAGE, "%s=%s: status %d, expected %d", bad[i].name, bad[i].value, (int)st,
                  (int)GR_ERR_USAGE);
        CHECK_STR_CONTAINS(msg, bad[i].want);
    }
    /* gr_env_check_value: the same verdict without touching the environment */
    gr_error err = {0};
    CHECK(gr_env_check_value(GR_ENV_GEMM, "blas", &err) == GR_ERR_USAGE);
    CHECK_STR_CONTAINS(err.msg, "GPURUN_GEMM=blas: expected onednn or openblas");
}

static void test_accepted(void) {
    static const struct { const char *name, *value; } good[] = {
        {"GPURUN_GEMM", "onednn"}, {"GPURUN_GEMM", "openblas"}, {"GPURUN_GEMM", ""},
        {"GPURUN_CONV", "ref"}, {"GPURUN_CONV", "onednn"},
        {"GPURUN_CONV_LAYOUT", "plain"}, {"GPURUN_CONV_LAYOUT", "blocked"},
        {"GPURUN_HALF", "native"}, {"GPURUN_HALF", "staged"},
        {"GPURUN_CUDA_SYNC", "1"}, {"GPURUN_CUDA_SYNC", "0"}, {"GPURUN_DATA_DIRECT", "0"},
        {"GPURUN_DATA_MEM_LIMIT", "0"}, {"GPURUN_DATA_MEM_LIMIT", "9223372036854775807"},
        {"GPURUN_LOSS_SCALE_INTERVAL", "1"}, {"GPURUN_LOSS_SCALE_INTERVAL", "2000"},
        {"GPURUN_CMAKE_ARGS", "-DGPURUN_CUDA=OFF"},
        {"GPURUNX", "1"}, {"XGPURUN_FOO", "1"}, /* not GPURUN_* names */
    };
    char msg[GR_ERROR_MSG_MAX];
    for (size_t i = 0; i < GR_ARRAY_LEN(good); i++) {
        gr_status st = env_check_with(good[i].name, good[i].value, msg, sizeof msg);
        CHECK_MSG(st == GR_OK, "%s=%s refused: %s", good[i].name, good[i].value, msg);
    }
    env_clear();
    gr_error err = {0};
    CHECK(gr_env_check(&err) == GR_OK);
}

static void test_getters(void) {
    env_clear();
    CHECK(gr_env_str(GR_ENV_GEMM) == NULL);
    CHECK(gr_env_int(GR_ENV_DATA_MEM_LIMIT, -1) == -1);
    CHECK(gr_env_bool(GR_ENV_DATA_DIRECT, true) && !gr_env_bool(GR_ENV_CUDA_SYNC, false));
    setenv("GPURUN_GEMM", "openblas", 1);
    setenv("GPURUN_DATA_MEM_LIMIT", "4096", 1);
    setenv("GPURUN_LOSS_SCALE_INTERVAL", "5", 1);
    setenv("GPURUN_DATA_DIRECT", "0", 1);
    setenv("GPURUN_CUDA_SYNC", "1", 1);
    CHECK(gr_env_str(GR_ENV_GEMM) && strcmp(gr_env_str(GR_ENV_GEMM), "openblas") == 0);
    CHECK(gr_env_int(GR_ENV_DATA_MEM_LIMIT, -1) == 4096);
    CHECK(gr_env_int(GR_ENV_LOSS_SCALE_INTERVAL, 2000) == 5);
    CHECK(!gr_env_bool(GR_ENV_DATA_DIRECT, true) && gr_env_bool(GR_ENV_CUDA_SYNC, false));
    /* empty reads as unset; malformed as the default (gr_env_check refuses it first) */
    setenv("GPURUN_GEMM", "", 1);
    setenv("GPURUN_DATA_MEM_LIMIT", "2G", 1);
    setenv("GPURUN_LOSS_SCALE_INTERVAL", "0", 1);
    setenv("GPURUN_CUDA_SYNC", "yes", 1);
    CHECK(gr_env_str(GR_ENV_GEMM) == NULL);
    CHECK(gr_env_int(GR_ENV_DATA_MEM_LIMIT, -1) == -1);
    CHECK(gr_env_int(GR_ENV_LOSS_SCALE_INTERVAL, 2000) == 2000);
    CHECK(!gr_env_bool(GR_ENV_CUDA_SYNC, false));
    env_clear();
}

/* The CPU backend checks its own two knobs (tests and benchmarks make
 * backends without gr_env_check): the same message, exit 2. */
static void test_backend(void) {
    env_clear();
    setenv("GPURUN_GEMM", "blas", 1);
    gr_backend *be = NULL;
    gr_error err = {0};
    CHECK(gr_backend_create("cpu", 1, &be, &err) == GR_ERR_USAGE);
    CHECK_STR_CONTAINS(err.msg, "GPURUN_GEMM=blas: expected onednn or openblas");
    env_clear();
    setenv("GPURUN_CONV", "im2col", 1);
    CHECK(gr_backend_create("cpu", 1, &be, &err) == GR_ERR_USAGE);
    CHECK_STR_CONTAINS(err.msg, "GPURUN_CONV=im2col: expected onednn or ref");
    env_clear();
    CHECK(gr_backend_create("cpu", 1, &be, &err) == GR_OK);
    gr_backend_free(be);
}

int main(void) {
    test_table();
    test_refused();
    test_accepted();
    test_getters();
    test_backend();
    return gr_test_report();
}
