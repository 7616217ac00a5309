/* gradcheck.h — the finite-difference gradient check shared by the
 * tests/ops/test_op_*.c files, through the real pipeline: graph build ->
 * autodiff -> plan -> the backend's kernels.
 *
 * Each case is a small model ending in softmax cross-entropy (gr_gc_run),
 * one loss node of any kind on the input batch with its targets
 * (gr_gc_loss_run: mse, bce with fp32 targets, softmax cross-entropy over
 * the last axis with ignored tokens; loss_graph.h builds it), or a model on
 * int32 token ids with per-token targets (gr_gc_token_run: token_graph.h;
 * only the parameters have gradients). The analytic
 * gradients (parameters and the input batch) from one backward pass are
 * compared with central differences of the mean loss, (L(w+h) - L(w-h)) / 2h,
 * L being the loss's stats[0] / stats[1].
 * Kinks are avoided by construction: ops with one (relu, maxpool) are fed
 * inputs whose magnitude is well above h.
 *
 * The backend comes from the command line (gr_gc_args): `cpu` (the default)
 * or `cuda`, configured strict fp32 (no TF32), checked with the same
 * tolerances; `cuda` on a build without CUDA or a machine without a device
 * prints "SKIP: ..." and the test exits 77 (ctest's SKIP_RETURN_CODE).
 * Parameters, gradients and the input's gradient move through the backend's
 * upload/download, so the same code runs on device memory. */
#ifndef GR_TEST_GRADCHECK_H
#define GR_TEST_GRADCHECK_H

#include <stdlib.h>
#include <string.h>

#include "gr_test.h"
#include "loss_graph.h"
#include "token_graph.h"
#include "graph/graph.h"
#include "exec/exec.h"
#include "runner/train.h"
#include "kernels/cpu/cpu.h"

/* The conv path (kernels/cpu/cpu.h) of the CPU backend each case makes;
 * NULL: the backend's own (GPURUN_CONV). */
static const char *gr_gc_conv_path;
/* Set by a test: the fusions the backend takes (gr_backend_fusions, graph/fuse.c) are applied, and
 * at least one must be (on a backend that takes none, nothing is fused and the case checks the
 * unfused graph). */
static bool gr_gc_fuse;

typedef struct gr_gc_case {
    const char *name;
    const char *layers;      /* YAML flow list */
    int ndim;
    int64_t shape[3];        /* per sample */
    double label_smoothing;
    double min_abs;          /* inputs drawn with |x| >= min_abs */
    const char *blocks;      /* YAML flow map of model.blocks, or NULL */
} gr_gc_case;

/* The device the gradchecks run on: "cpu" or "cuda:0". */
static const char *gr_gc_device = "cpu";

/* Reads the backend from argv ([cpu|cuda]). Returns 0 to go on, 77 when
 * `cuda` cannot run here (after printing "SKIP: ..."), 2 on a bad argument. */
static int gr_gc_args(int argc, char **argv) {
    const char *want = argc > 1 ? argv[1] : "cpu";
    if (argc > 2 || (strcmp(want, "cpu") != 0 && strcmp(want, "cuda") != 0)) {
        fprintf(stderr, "usage: %s [cpu|cuda]\n", argv[0]);
        return 2;
    }
    if (strcmp(want, "cuda") == 0) {
        gr_error err = {0};
        gr_backend *be = NULL;
        if (gr_backend_create("cuda:0", 1, &be, &err) != GR_OK) {
            printf("SKIP: %s\n", err.msg);
            return 77;
        }
        gr_backend_free(be);
        gr_gc_device = "cuda:0";
    }
    printf("backend %s\n", gr_gc_device);
    return 0;
}

/* Whether the checks run on the CPU backend (the CPU-only parts of a family
 * test — kernel paths, host/device bodies, errors — run only then). */
static bool gr_gc_on_cpu(void) { return strcmp(gr_gc_device, "cpu") == 0; }

static double gr_gc_loss(gr_plan *p, const gr_batch *b, const gr_exec_ctx *ctx) {
    double loss = 0.0, correct = 0.0;
    gr_train_micro_step(p, b, ctx, &loss, &correct);
    float st[2];
    gr_backend_download(p->m->be, st, gr_plan_ptr(p, p->g->loss_stats), sizeof st);
    if (st[1] != (float)b->n) { /* [n, C] logits: the loss averages over the samples */
        fprintf(stderr, "  the loss's count is %g, not the %lld samples\n", st[1], (long long)b->n);
        return NAN;
    }
    return loss / (double)b->n;
}

static void gr_gc_compare(const char *what, const char *cname, double analytic, double numeric,
                          int *bad) {
    double tol = 1e-4 + 1e-2 * fabs(numeric);
    if (fabs(analytic - numeric) > tol) {
        if (*bad < 5)
            fprintf(stderr, "  %s: %s: analytic %.6g vs numeric %.6g\n", cname, what, analytic, numeric);
        (*bad)++;
    }
}

/* Central differences of the loss over v[0..n), each against analytic[k]
 * (bad counts the misses); loss(ctx) reads v. Returns the entries checked. */
static inline int gr_gc_sweep(float *v, int64_t n, const float *analytic, float h, const char *name,
                              double (*loss)(void *ctx), void *ctx, int *bad) {
    for (int64_t k = 0; k < n; k++) {
        float v0 = v[k];
        v[k] = v0 + h;
        double lp = loss(ctx);
        v[k] = v0 - h;
        double lm = loss(ctx);
        v[k] = v0;
        gr_gc_compare("input", name, analytic[k], (lp - lm) / (2.0 * h), bad);
    }
    return (int)n;
}

/* The verdict of a gradcheck: no entry off, and enough of them. */
static inline void gr_gc_report(const char *name, int bad, int checked) {
    CHECK_MSG(bad == 0, "%s: %d of %d gradient entries off", name, bad, checked);
    CHECK_MSG(checked > 10, "%s: only %d entries checked", name, checked);
    printf("gradcheck %-28s %4d entries ok\n", name, checked - bad);
}

typedef struct gr_gc_pass {
    gr_plan *p;
    const gr_batch *b;
    const gr_exec_ctx *ctx;
} gr_gc_pass;

static double gr_gc_pass_loss(void *c) {
    const gr_gc_pass *r = c;
    return gr_gc_loss(r->p, r->b, r->ctx);
}

static void gr_gc_run(const gr_gc_case *c) {
    gr_error err = {0};
    gr_cfg *layers = NULL;
    CHECK(gr_cfg_parse_text(c->layers, "gradcheck", 1, 1, &layers, &err) == GR_OK);
    if (!layers) { fprintf(stderr, "%s\n", err.msg); return; }
    gr_job_spec spec;
    memset(&spec, 0, sizeof spec);
    snprintf(spec.file, sizeof spec.file, "gradcheck");
    spec.model.layers = layers;
    gr_cfg *blocks = NULL;
    if (c->blocks) {
        CHECK(gr_cfg_parse_text(c->blocks, "gradcheck-blocks", 1, 1, &blocks, &err) == GR_OK);
        spec.model.blocks = blocks;
    }
    const int64_t n = 4;
    spec.train.micro_batch = n;
    spec.train.batch_size = n;
    spec.train.label_smoothing = c->label_smoothing;
    snprintf(spec.train.loss, sizeof spec.train.loss, "softmax_cross_entropy");
    spec.seed = 7;

    gr_graph g;
    gr_status st = gr_graph_build(&spec, c->shape, c->ndim, &g, &err);
    CHECK_MSG(st == GR_OK, "%s: %s", c->name, err.msg);
    if (st) { gr_cfg_free(layers); gr_cfg_free(blocks); return; }
    gr_autodiff(&g, true);
    gr_backend *be;
    CHECK(gr_backend_create(gr_gc_device, 1, &be, &err) == GR_OK);
    if (gr_gc_on_cpu() && gr_gc_conv_path) CHECK(gr_cpu_conv_set_path(gr_cpu_backend_state(be), gr_gc_conv_path));
    if (gr_gc_fuse && gr_backend_fusions(be))
        CHECK_MSG(gr_graph_fuse(&g, gr_backend_fusions(be)) > 0, "%s: nothing fused", c->name);
    if (!gr_gc_on_cpu()) {
        gr_backend_opts fp32 = {.precision = GR_PREC_FP32};
        gr_backend_configure(be, &fp32);
    }
    gr_model m;
    CHECK(gr_model_init(&m, &g, be, 0, &err) == GR_OK);
    /* the parameters live on the backend; w is their host copy */
    float *w = calloc((size_t)(g.n_params ? g.n_params : 1), sizeof *w);
    gr_graph_init_params(&g, w, spec.seed);
    gr_backend_upload(be, m.params, w, (size_t)g.n_params * sizeof *w);
    gr_plan p;
    CHECK(gr_plan_compile(&p, &m, &g, GR_PLAN_TRAIN, true, &err) == GR_OK);

    int64_t per = gr_tensor_sample_numel(&g.tensors[g.input]);
    float *x = malloc((size_t)(n * per) * sizeof *x);
    int32_t y[4];
    uint64_t key = 0xABCDull;
    for (int64_t i = 0; i < n * per; i++) {
        float v = 4.0f * gr_uniform(key, (uint64_t)i) - 2.0f;
        if (fabsf(v) < c->min_abs) v = v < 0 ? v - (float)c->min_abs : v + (float)c->min_abs;
        x[i] = v;
    }
    for (int i = 0; i < n; i++) y[i] = (int32_t)(gr_hash64(key, 1000u + (uint64_t)i) % (uint64_t)g.n_classes);
    gr_batch b = {.x = x, .y = y, .n = n};
    gr_exec_ctx ctx = {.training = true, .rng_key = 99, .grad_scale = 1.0f / (float)n};

    /* analytic */
    gr_backend_zero(be, m.grads, (size_t)g.n_trainable * sizeof(float));
    gr_gc_loss(&p, &b, &ctx);
    float *gw = malloc((size_t)g.n_trainable * sizeof *gw);
    gr_backend_download(be, gw, m.grads, (size_t)g.n_trainable * sizeof *gw);
    int gx_t = g.tensors[g.input].grad;
    CHECK_MSG(gx_t >= 0, "%s: the input has no gradient", c->name);
    float *gx = malloc((size_t)(n * per) * sizeof *gx);
    if (gx_t >= 0) gr_backend_download(be, gx, gr_plan_ptr(&p, gx_t), (size_t)(n * per) * sizeof *gx);

    const float h = 1e-2f;
    int bad = 0, checked = 0;
    /* parameters: every element of small tensors, a stride through large ones */
    int64_t stride = g.n_trainable > 400 ? g.n_trainable / 400 : 1;
    for (int64_t k = 0; k < g.n_trainable; k += stride) {
        float w0 = w[k];
        w[k] = w0 + h;
        gr_backend_upload(be, m.params + k, &w[k], sizeof *w);
        double lp = gr_gc_loss(&p, &b, &ctx);
        w[k] = w0 - h;
        gr_backend_upload(be, m.params + k, &w[k], sizeof *w);
        double lm = gr_gc_loss(&p, &b, &ctx);
        w[k] = w0;
        gr_backend_upload(be, m.params + k, &w[k], sizeof *w);
        gr_gc_compare("param", c->name, gw[k], (lp - lm) / (2.0 * h), &bad);
        checked++;
    }
    /* the input batch */
    gr_gc_pass pass = {&p, &b, &ctx};
    if (gx_t >= 0) checked += gr_gc_sweep(x, n * per, gx, h, c->name, gr_gc_pass_loss, &pass, &bad);
    gr_gc_report(c->name, bad, checked);

    free(x);
    free(w);
    free(gw);
    free(gx);
    gr_plan_free(&p);
    gr_model_free(&m);
    gr_backend_free(be);
    gr_graph_free(&g);
    gr_cfg_free(layers);
    gr_cfg_free(blocks);
}

/* The mean loss stats[0] / stats[1] of one training pass of x, t. */
static inline double gr_gc_loss_of(gr_plan *p, const gr_graph *g, int64_t n, const float *x, const void *t,
                            const gr_exec_ctx *ctx) {
    float st[2], mt[2];
    gr_lg_upload(p, g, n, x, t);
    gr_plan_run(p, n, ctx);
    gr_lg_stats(p, g, st, mt);
    return (double)st[0] / (double)st[1];
}

typedef struct gr_gc_lpass {
    gr_plan *p;
    const gr_graph *g;
    int64_t n;
    const float *x;
    const void *t;
    const gr_exec_ctx *ctx;
} gr_gc_lpass;

static double gr_gc_lpass_loss(void *c) {
    const gr_gc_lpass *r = c;
    return gr_gc_loss_of(r->p, r->g, r->n, r->x, r->t, r->ctx);
}

/* The gradcheck of loss case c alone on a batch of 3 samples: the input
 * batch is its prediction (every element checked). */
static inline void gr_gc_loss_run(const gr_lg_case *c) {
    gr_error err = {0};
    gr_graph g;
    const int64_t n = 3;
    gr_status st = gr_lg_build(c, n, &g, &err);
    CHECK_MSG(st == GR_OK, "%s: %s", c->name, err.msg);
    if (st) return;
    gr_autodiff(&g, true);
    gr_backend *be;
    CHECK(gr_backend_create(gr_gc_device, 1, &be, &err) == GR_OK);
    if (!gr_gc_on_cpu()) {
        gr_backend_opts fp32 = {.precision = GR_PREC_FP32};
        gr_backend_configure(be, &fp32);
    }
    gr_model m;
    CHECK(gr_model_init(&m, &g, be, 0, &err) == GR_OK);
    gr_plan p;
    CHECK(gr_plan_compile(&p, &m, &g, GR_PLAN_TRAIN, true, &err) == GR_OK);
    const int64_t nx = gr_lg_x_numel(&g, n);
    float *x = malloc((size_t)nx * sizeof *x), *gx = malloc((size_t)nx * sizeof *gx);
    void *t = malloc((size_t)gr_lg_t_numel(&g, n) * 4u);
    gr_lg_fill(c, &g, n, 0xC0FFEEull, 2.0f, x, t);
    gr_exec_ctx ctx = {.training = true, .rng_key = 99, .grad_scale = 1.0f / (float)n};
    gr_gc_loss_of(&p, &g, n, x, t, &ctx);
    int gx_t = g.tensors[g.input].grad;
    CHECK_MSG(gx_t >= 0, "%s: the input has no gradient", c->name);
    if (gx_t >= 0) gr_backend_download(be, gx, gr_plan_ptr(&p, gx_t), (size_t)nx * sizeof *gx);
    const float h = 1e-2f;
    int bad = 0, checked = 0;
    gr_gc_lpass pass = {&p, &g, n, x, t, &ctx};
    if (gx_t >= 0) checked = gr_gc_sweep(x, nx, gx, h, c->name, gr_gc_lpass_loss, &pass, &bad);
    gr_gc_report(c->name, bad, checked);
    free(x);
    free(gx);
    free(t);
    gr_plan_free(&p);
    gr_model_free(&m);
    gr_backend_free(be);
    gr_graph_free(&g);
}

/* The gradcheck of token model c on 4 samples: every parameter element (a
 * stride through more than 400), against central differences of the mean
 * loss over the tokens. */
static inline void gr_gc_token_run(const gr_tk_case *c) {
    gr_error err = {0};
    gr_tk_model tm;
    const int64_t n = 4;
    gr_status st = gr_tk_build(&tm, c, n, GR_PREC_FP32, &err);
    CHECK_MSG(st == GR_OK, "%s: %s", c->name, err.msg);
    if (st) {
        gr_tk_free(&tm);
        return;
    }
    const gr_graph *g = &tm.g;
    CHECK_MSG(g->tensors[g->input].grad < 0, "%s: the token ids have a gradient", c->name);
    gr_backend *be;
    CHECK(gr_backend_create(gr_gc_device, 1, &be, &err) == GR_OK);
    if (!gr_gc_on_cpu()) {
        gr_backend_opts fp32 = {.precision = GR_PREC_FP32};
        gr_backend_configure(be, &fp32);
    }
    gr_model m;
    CHECK(gr_model_init(&m, g, be, 0, &err) == GR_OK);
    float *w = calloc((size_t)g->n_params + 1, sizeof *w), *gw = calloc((size_t)g->n_trainable + 1, sizeof *gw);
    gr_graph_init_params(g, w, tm.spec.seed);
    gr_backend_upload(be, m.params, w, (size_t)g->n_params * sizeof *w);
    gr_plan p;
    CHECK(gr_plan_compile(&p, &m, g, GR_PLAN_TRAIN, true, &err) == GR_OK);
    const int64_t nt = gr_tk_numel(g, n);
    int32_t *ids = malloc((size_t)nt * sizeof *ids), *next = malloc((size_t)nt * sizeof *next);
    gr_tk_fill(c, g, n, 0x70CE5ull, ids, next);
    gr_exec_ctx ctx = {.training = true, .rng_key = 99, .grad_scale = 1.0f / (float)n};
    gr_backend_zero(be, m.grads, (size_t)g->n_trainable * sizeof(float));
    gr_tk_run(&p, n, ids, next, &ctx);
    gr_backend_download(be, gw, m.grads, (size_t)g->n_trainable * sizeof *gw);
    const float h = 1e-2f;
    int bad = 0, checked = 0;
    const int64_t stride = g->n_trainable > 400 ? g->n_trainable / 400 : 1;
    for (int64_t k = 0; k < g->n_trainable; k += stride) {
        const float w0 = w[k];
        double l[2];
        for (int s = 0; s < 2; s++) {
            w[k] = s ? w0 - h : w0 + h;
            gr_backend_upload(be, m.params + k, &w[k], sizeof *w);
            l[s] = gr_tk_run(&p, n, ids, next, &ctx);
        }
        w[k] = w0;
        gr_backend_upload(be, m.params + k, &w[k], sizeof *w);
        gr_gc_compare("param", c->name, gw[k], (l[0] - l[1]) / (2.0 * h), &bad);
        checked++;
    }
    gr_gc_report(c->name, bad, checked);
    free(ids);
    free(next);
    free(w);
    free(gw);
    gr_plan_free(&p);
    gr_model_free(&m);
    gr_backend_free(be);
    gr_tk_free(&tm);
}

#endif
