/* precision_fixture.h — what tests/test_precision.c and tests/test_layout.c
 * share: a deterministic uniform draw, a model built from a layers string
 * at a precision, CPU backends configured for bf16 (native or staged), and
 * one training pass of a model on a backend from given weights and batch. */
#ifndef GR_TEST_PRECISION_FIXTURE_H
#define GR_TEST_PRECISION_FIXTURE_H

#include <stdlib.h>
#include <string.h>

#include "exec/exec.h"
#include "graph/graph.h"
#include "gr_test.h"

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static inline float urand(void) { /* [-1, 1) */
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((rng >> 40) & 0xFFFFFF) / (float)(1 << 23) - 1.0f;
}

typedef struct model {
    gr_cfg *layers;
    gr_graph g;
} model;

static inline void model_build(model *m, const char *layers, const int64_t *in, int nin, int64_t mb, gr_precision p) {
    memset(m, 0, sizeof *m);
    gr_error err = {0};
    CHECK(gr_cfg_parse_text(layers, "prec", 1, 1, &m->layers, &err) == GR_OK);
    gr_job_spec spec;
    memset(&spec, 0, sizeof spec);
    spec.model.layers = m->layers;
    spec.train.micro_batch = mb;
    snprintf(spec.train.loss, sizeof spec.train.loss, "softmax_cross_entropy");
    CHECK_MSG(gr_graph_build(&spec, in, nin, &m->g, &err) == GR_OK, "%s", err.msg);
    gr_autodiff(&m->g, false);
    gr_graph_set_precision(&m->g, p);
}

static inline void model_free(model *m) {
    gr_graph_free(&m->g);
    gr_cfg_free(m->layers);
}

static inline int find(const gr_graph *g, const char *name) {
    for (int t = 0; t < g->n_tensors; t++)
        if (strcmp(g->tensors[t].name, name) == 0) return t;
    CHECK_MSG(0, "no tensor %s", name);
    return 0;
}

/* A CPU backend configured for bf16, native or staged (GPURUN_HALF). */
static inline gr_backend *bf16_backend(bool native) {
    gr_backend *be = NULL;
    gr_error err = {0};
    if (native) unsetenv("GPURUN_HALF");
    else setenv("GPURUN_HALF", "staged", 1);
    CHECK(gr_backend_create("cpu", 2, &be, &err) == GR_OK);
    gr_backend_opts o = {.precision = GR_PREC_BF16};
    gr_backend_configure(be, &o);
    unsetenv("GPURUN_HALF");
    return be;
}

static inline bool have_native_bf16(void) {
    gr_backend *be = bf16_backend(true);
    char d[256];
    bool yes = strstr(gr_backend_describe(be, d, sizeof d), "bf16 native") != NULL;
    gr_backend_free(be);
    return yes;
}

typedef struct run {
    gr_backend *be;
    gr_model m;
    gr_plan p;
} run;

/* One training pass of g on be from the given weights and batch. */
static inline void run_pass(run *r, const gr_graph *g, gr_backend *be, const float *w, const float *x, const int32_t *y,
                     int64_t n) {
    gr_error err = {0};
    r->be = be;
    CHECK(gr_model_init(&r->m, g, be, 0, &err) == GR_OK);
    CHECK_MSG(gr_plan_compile(&r->p, &r->m, g, GR_PLAN_TRAIN, true, &err) == GR_OK, "%s", err.msg);
    gr_backend_upload(be, r->m.params, w, (size_t)g->n_params * sizeof *w);
    memcpy(gr_plan_ptr(&r->p, g->input), x, (size_t)(n * gr_tensor_sample_numel(&g->tensors[g->input])) * sizeof *x);
    memcpy(gr_plan_ptr(&r->p, g->label), y, (size_t)n * sizeof *y);
    gr_exec_ctx ctx = {.training = true, .rng_key = 7, .grad_scale = 1.0f / (float)n};
    gr_plan_run(&r->p, n, &ctx);
}

static inline void run_free(run *r) {
    gr_plan_free(&r->p);
    gr_model_free(&r->m);
}

#endif
