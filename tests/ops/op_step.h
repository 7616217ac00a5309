/* op_step.h — what the batchnorm and pooling tests (test_op_bn.c,
 * test_op_pool.c) share beyond finite differences:
 *   - gr_bnt: a small model through the real pipeline on the CPU backend,
 *     its train and eval plans, run one plan step at a time so a test
 *     controls dy; the batchnorm layer's parameters and gradients by name;
 *   - gr_bnt_expect_error: a layer list that must not build, and its message;
 *   - the PyTorch references tests/ops/bn_torch.py writes (run with
 *     /usr/bin/python3; missing torch fails the test), by case and array. */
#ifndef GR_TEST_OP_STEP_H
#define GR_TEST_OP_STEP_H

#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gr_test.h"
#include "graph/graph.h"
#include "exec/exec.h"
#include "runner/train.h"

/* ---- a small model through the real pipeline ---- */

typedef struct gr_bnt {
    gr_cfg *layers;
    gr_job_spec spec;
    gr_graph g;
    gr_backend *be;
    gr_model m;
    gr_plan train, eval;
} gr_bnt;

static inline bool gr_bnt_init(gr_bnt *t, const char *layers, const int64_t *shape, int ndim, int64_t micro) {
    memset(t, 0, sizeof *t);
    gr_error err = {0};
    if (gr_cfg_parse_text(layers, "t", 1, 1, &t->layers, &err) != GR_OK) {
        CHECK_MSG(false, "%s", err.msg);
        return false;
    }
    snprintf(t->spec.file, sizeof t->spec.file, "t");
    t->spec.model.layers = t->layers;
    t->spec.train.micro_batch = micro;
    t->spec.train.batch_size = micro;
    snprintf(t->spec.train.loss, sizeof t->spec.train.loss, "softmax_cross_entropy");
    t->spec.seed = 3;
    if (gr_graph_build(&t->spec, shape, ndim, &t->g, &err) != GR_OK) {
        CHECK_MSG(false, "%s: %s", layers, err.msg);
        gr_cfg_free(t->layers);
        return false;
    }
    gr_autodiff(&t->g, true);
    CHECK(gr_backend_create("cpu", 2, &t->be, &err) == GR_OK);
    CHECK(gr_model_init(&t->m, &t->g, t->be, 0, &err) == GR_OK);
    gr_graph_init_params(&t->g, t->m.params, t->spec.seed);
    CHECK(gr_plan_compile(&t->train, &t->m, &t->g, GR_PLAN_TRAIN, true, &err) == GR_OK);
    CHECK(gr_plan_compile(&t->eval, &t->m, &t->g, GR_PLAN_EVAL, true, &err) == GR_OK);
    return true;
}

static inline void gr_bnt_free(gr_bnt *t) {
    gr_plan_free(&t->train);
    gr_plan_free(&t->eval);
    gr_model_free(&t->m);
    gr_backend_free(t->be);
    gr_graph_free(&t->g);
    gr_cfg_free(t->layers);
}

/* The plan step running the first node of op. */
static inline gr_kargs *gr_bnt_step(gr_plan *p, gr_op op) {
    for (int i = 0; i < p->steps.n; i++)
        if (p->steps.step[i].node->op == op) return &p->steps.step[i];
    GR_ASSERT(!"no such step");
    return NULL;
}

static inline void gr_bnt_run(gr_bnt *t, gr_kargs *a, int64_t n, const gr_exec_ctx *ctx) {
    a->n = n;
    a->ctx = ctx;
    gr_backend_kernel(t->be, a->node->op)(a);
}

/* The params-arena data of the (one) batchnorm layer's tensor pname. */
static inline float *gr_bnt_param(gr_bnt *t, const char *pname) {
    for (int i = 0; i < t->g.n_tensors; i++) {
        const gr_tensor *x = &t->g.tensors[i];
        if ((x->kind == GR_TK_PARAM || x->kind == GR_TK_STATE) && t->g.layers[x->layer].op == GR_OP_BATCHNORM &&
            strcmp(x->pname, pname) == 0)
            return t->m.params + x->param_offset;
    }
    GR_ASSERT(!"no such parameter");
    return NULL;
}

static inline float *gr_bnt_grad(gr_bnt *t, const char *pname) {
    return t->m.grads + (gr_bnt_param(t, pname) - t->m.params);
}

/* One CHECK per array: every |got - want| <= atol + rtol |want|. */
static inline void gr_bnt_close(const char *what, const float *got, const float *want, int64_t n, double rtol,
                                double atol) {
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - want[i]);
        if (!(d <= atol + rtol * fabs(want[i]))) {
            if (bad < 3) fprintf(stderr, "  %s[%lld]: got %.8g, want %.8g\n", what, (long long)i, got[i], want[i]);
            bad++;
        }
    }
    CHECK_MSG(bad == 0, "%s: %lld of %lld values off", what, (long long)bad, (long long)n);
}

/* located: the message starts with the YAML position ("t:1:COL: "). */
static inline void gr_bnt_expect_error_at(const char *layers, const int64_t *shape, int ndim, int64_t micro,
                                          const char *want, bool located) {
    gr_error err = {0};
    gr_cfg *l = NULL;
    CHECK(gr_cfg_parse_text(layers, "t", 1, 1, &l, &err) == GR_OK);
    gr_job_spec spec;
    memset(&spec, 0, sizeof spec);
    snprintf(spec.file, sizeof spec.file, "t");
    spec.model.layers = l;
    spec.train.micro_batch = micro;
    snprintf(spec.train.loss, sizeof spec.train.loss, "softmax_cross_entropy");
    gr_graph g;
    gr_status st = gr_graph_build(&spec, shape, ndim, &g, &err);
    CHECK_MSG(st != GR_OK, "%s: built", layers);
    if (st == GR_OK) gr_graph_free(&g);
    CHECK_STR_CONTAINS(err.msg, want);
    if (located) CHECK_MSG(strncmp(err.msg, "t:1:", 4) == 0, "%s", err.msg);
    gr_cfg_free(l);
}

static inline void gr_bnt_expect_error(const char *layers, const int64_t *shape, int ndim, int64_t micro,
                                       const char *want) {
    gr_bnt_expect_error_at(layers, shape, ndim, micro, want, true);
}

/* ---- PyTorch references ---- */

typedef struct gr_refarr {
    char name[64];
    float *v;
    int64_t n;
} gr_refarr;

static gr_refarr gr_refs[128];
static int gr_n_refs;

static inline bool gr_refs_load(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return false;
    char magic[4];
    bool ok = fread(magic, 1, 4, f) == 4 && memcmp(magic, "GRBN", 4) == 0;
    uint32_t len, cnt;
    while (ok && fread(&len, 4, 1, f) == 1) {
        gr_refarr *r = &gr_refs[gr_n_refs];
        ok = gr_n_refs < (int)GR_ARRAY_LEN(gr_refs) && len < sizeof r->name && fread(r->name, 1, len, f) == len &&
             fread(&cnt, 4, 1, f) == 1;
        if (!ok) break;
        r->name[len] = 0;
        r->n = cnt;
        r->v = malloc((size_t)cnt * sizeof *r->v + 1);
        ok = fread(r->v, sizeof *r->v, cnt, f) == cnt;
        gr_n_refs++;
    }
    fclose(f);
    return ok && gr_n_refs > 0;
}

/* Reference array name ("bn4.y2") of n floats; a zero-filled stand-in when absent. */
static inline const float *gr_ref_get(const char *name, int64_t n) {
    for (int i = 0; i < gr_n_refs; i++)
        if (strcmp(gr_refs[i].name, name) == 0) {
            CHECK_MSG(gr_refs[i].n == n, "%s: %lld values, expected %lld", name, (long long)gr_refs[i].n,
                      (long long)n);
            if (gr_refs[i].n >= n) return gr_refs[i].v;
        }
    CHECK_MSG(false, "reference %s missing", name);
    static float zeros[4096];
    GR_ASSERT(n <= (int64_t)GR_ARRAY_LEN(zeros));
    return zeros;
}

static inline const float *gr_ref(const char *cname, const char *what, int64_t n) {
    char name[64];
    snprintf(name, sizeof name, "%s.%s", cname, what);
    return gr_ref_get(name, n);
}

/* Runs bn_torch.py into GR_TEST_TMP/bn_torch.<tag>.bin (a file per test, so
 * tests may run in parallel) and loads every reference array it wrote. */
static inline bool gr_refs_fetch(const char *tag) {
    char out[512], cmd[1024];
    snprintf(out, sizeof out, "%s/bn_torch.%s.bin", GR_TEST_TMP, tag);
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s/bn_torch.py %s", GR_TEST_DIR, out);
    remove(out);
    if (access("/usr/bin/python3", X_OK) != 0) {
        gr_test_skip("the PyTorch parity checks: /usr/bin/python3 is not installed");
        return false;
    }
    int rc = system(cmd);
    if (rc != -1 && WIFEXITED(rc) && WEXITSTATUS(rc) == GR_TEST_SKIP_CODE) { /* bn_torch.py: no torch */
        gr_test_skip("the PyTorch parity checks: /usr/bin/python3 cannot import torch");
        return false;
    }
    bool have = rc == 0 && gr_refs_load(out);
    CHECK_MSG(have, "no PyTorch references (%s exited %d); /usr/bin/python3 needs torch", cmd, rc);
    return have;
}

static inline void gr_refs_free(void) {
    for (int i = 0; i < gr_n_refs; i++) free(gr_refs[i].v);
    printf("torch parity: %d reference arrays\n", gr_n_refs);
    gr_n_refs = 0;
}

#endif
