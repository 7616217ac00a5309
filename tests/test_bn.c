/* test_bn.c — batchnorm and the pooling ops beyond finite differences
 * (test_gradcheck_pool.c has those):
 *   - shapes, parameter/state tensors and attribute/shape errors;
 *   - batchnorm's running stats after k training passes (forward + backward,
 *     varying batch) against a double computation with PyTorch's momentum
 *     and unbiased variance; eval uses them and leaves them unchanged;
 *   - parity with PyTorch (tests/bn_torch.py, run with /usr/bin/python3;
 *     without torch the test reports skipped, exit 77, after the checks
 *     above): batchnorm train forward/backward, running
 *     stats and eval forward on 4-D and 2-D input; maxpool (ties, argmax),
 *     avgpool (count_include_pad true and false, non-square, padding, wide
 *     rows), strides 1, 2 and 3, and
 *     global_avgpool forward and backward.
 * Kernels run one plan step at a time so the test controls dy. */
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gr_test.h"
#include "graph/graph.h"
#include "graph/plan.h"
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

static bool gr_bnt_init(gr_bnt *t, const char *layers, const int64_t *shape, int ndim, int64_t micro) {
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

static void gr_bnt_free(gr_bnt *t) {
    gr_plan_free(&t->train);
    gr_plan_free(&t->eval);
    gr_model_free(&t->m);
    gr_backend_free(t->be);
    gr_graph_free(&t->g);
    gr_cfg_free(t->layers);
}

/* The plan step running the first node of op. */
static gr_kargs *gr_bnt_step(gr_plan *p, gr_op op) {
    for (int i = 0; i < p->n_steps; i++)
        if (p->steps[i].node->op == op) return &p->steps[i];
    GR_ASSERT(!"no such step");
    return NULL;
}

static void gr_bnt_run(gr_bnt *t, gr_kargs *a, int64_t n, const gr_exec_ctx *ctx) {
    a->n = n;
    a->ctx = ctx;
    gr_backend_kernel(t->be, a->node->op)(a);
}

/* The params-arena data of the (one) batchnorm layer's tensor pname. */
static float *gr_bnt_param(gr_bnt *t, const char *pname) {
    for (int i = 0; i < t->g.n_tensors; i++) {
        const gr_tensor *x = &t->g.tensors[i];
        if ((x->kind == GR_TK_PARAM || x->kind == GR_TK_STATE) && t->g.layers[x->layer].op == GR_OP_BATCHNORM &&
            strcmp(x->pname, pname) == 0)
            return t->m.params + x->param_offset;
    }
    GR_ASSERT(!"no such parameter");
    return NULL;
}

static float *gr_bnt_grad(gr_bnt *t, const char *pname) {
    return t->m.grads + (gr_bnt_param(t, pname) - t->m.params);
}

/* One CHECK per array: every |got - want| <= atol + rtol |want|. */
static void gr_bnt_close(const char *what, const float *got, const float *want, int64_t n, double rtol,
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

/* ---- shapes, tensors, errors ---- */

static void test_shapes(void) {
    gr_bnt t;
    int64_t s[3] = {64, 112, 112};
    if (gr_bnt_init(&t, "[{maxpool: {kernel: 3, stride: 2, padding: 1}}, global_avgpool, flatten]", s, 3, 2)) {
        const gr_node *mp = &t.g.nodes[t.g.layers[0].node], *gap = &t.g.nodes[t.g.layers[1].node];
        const gr_tensor *y = &t.g.tensors[mp->out[0]], *idx = &t.g.tensors[mp->out[1]];
        CHECK(y->ndim == 4 && y->shape[0] == 2 && y->shape[1] == 64 && y->shape[2] == 56 && y->shape[3] == 56);
        CHECK(idx->elem == GR_I32 && idx->shape[3] == 56 && mp->nout == 2);
        CHECK(mp->flops == 64 * 56 * 56 * 9);
        const gr_tensor *gy = &t.g.tensors[gap->out[0]];
        CHECK(gy->ndim == 4 && gy->shape[1] == 64 && gy->shape[2] == 1 && gy->shape[3] == 1);
        CHECK(t.g.n_classes == 64);
        CHECK(t.g.n_params == 0);
        gr_bnt_free(&t);
    }
    int64_t s2[3] = {3, 4, 5};
    if (gr_bnt_init(&t, "[{avgpool: {kernel: [3, 2], stride: [1, 2], padding: [1, 0]}}, batchnorm, flatten]",
                    s2, 3, 2)) {
        const gr_node *ap = &t.g.nodes[t.g.layers[0].node], *bn = &t.g.nodes[t.g.layers[1].node];
        const gr_tensor *y = &t.g.tensors[ap->out[0]];
        CHECK(y->shape[1] == 3 && y->shape[2] == 4 && y->shape[3] == 2 && ap->nout == 1);
        CHECK(bn->nin == 5 && bn->nout == 2);
        CHECK(strcmp(t.g.tensors[bn->in[1]].name, "batchnorm0.weight") == 0);
        CHECK(strcmp(t.g.tensors[bn->in[2]].name, "batchnorm0.bias") == 0);
        CHECK(strcmp(t.g.tensors[bn->in[3]].name, "batchnorm0.running_mean") == 0);
        CHECK(t.g.tensors[bn->in[3]].kind == GR_TK_STATE);
        CHECK(strcmp(t.g.tensors[bn->in[4]].name, "batchnorm0.running_var") == 0);
        CHECK(t.g.layers[1].n_params == 6);
        /* weight and bias in the params arena, then the two running stats,
         * each at a 64-byte boundary (GR_PARAM_ALIGN floats) */
        CHECK(t.g.n_weights == 6 && t.g.n_trainable == 2 * GR_PARAM_ALIGN && t.g.n_params == 4 * GR_PARAM_ALIGN);
        for (int k = 1; k <= 4; k++) CHECK(t.g.tensors[bn->in[k]].param_offset % GR_PARAM_ALIGN == 0);
        /* initialization as nn.BatchNorm2d */
        CHECK(gr_bnt_param(&t, "weight")[2] == 1.0f && gr_bnt_param(&t, "bias")[2] == 0.0f);
        CHECK(gr_bnt_param(&t, "running_mean")[2] == 0.0f && gr_bnt_param(&t, "running_var")[2] == 1.0f);
        gr_bnt_free(&t);
    }
}

/* located: the message starts with the YAML position ("t:1:COL: "). */
static void gr_bnt_expect_error_at(const char *layers, const int64_t *shape, int ndim, int64_t micro,
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

static void gr_bnt_expect_error(const char *layers, const int64_t *shape, int ndim, int64_t micro,
                                const char *want) {
    gr_bnt_expect_error_at(layers, shape, ndim, micro, want, true);
}

static void test_errors(void) {
    int64_t flat[1] = {784}, img[3] = {1, 4, 4}, s3[2] = {3, 4}, c5[1] = {5};
    gr_bnt_expect_error("[{maxpool: {kernel: 2}}]", flat, 1, 4, "maxpool needs [batch, C, H, W] input, got [n, 784]");
    gr_bnt_expect_error("[global_avgpool]", flat, 1, 4, "global_avgpool needs [batch, C, H, W] input, got [n, 784]");
    gr_bnt_expect_error("[{avgpool: {kernel: 5}}, flatten]", img, 3, 4,
                        "kernel 5x5 is larger than the padded input 4x4");
    gr_bnt_expect_error("[{maxpool: {kernel: [2, 7], padding: [0, 1]}}, flatten]", img, 3, 4,
                        "kernel 2x7 is larger than the padded input 4x6");
    gr_bnt_expect_error("[{maxpool: {kernel: 3, padding: 2}}, flatten]", img, 3, 4,
                        "padding 2 is more than half the kernel 3");
    gr_bnt_expect_error("[{avgpool: {kernel: [2, 4], padding: [1, 3]}}, flatten]", img, 3, 4,
                        "padding 3 is more than half the kernel 4");
    gr_bnt_expect_error("[{maxpool: {kernel: 0}}, flatten]", img, 3, 4, "maxpool.kernel");
    gr_bnt_expect_error("[{maxpool: {kernel: 2, stride: -1}}, flatten]", img, 3, 4, "maxpool.stride");
    gr_bnt_expect_error("[{maxpool: {kernel: 2, padding: -1}}, flatten]", img, 3, 4, "maxpool.padding");
    gr_bnt_expect_error("[{maxpool: {stride: 2}}, flatten]", img, 3, 4, "kernel: required attribute missing");
    gr_bnt_expect_error("[{maxpool: {kernel: 2, strid: 1}}, flatten]", img, 3, 4,
                        "maxpool.strid: unknown attribute (maxpool takes kernel, stride, padding)");
    gr_bnt_expect_error("[{maxpool: {kernel: 2, count_include_pad: false}}, flatten]", img, 3, 4,
                        "unknown attribute");
    gr_bnt_expect_error("[{avgpool: {kernel: [2, 2, 2]}}, flatten]", img, 3, 4, "a [h, w] list of two integers");
    gr_bnt_expect_error("[{avgpool: {kernel: 2, count_include_pad: maybe}}, flatten]", img, 3, 4,
                        "avgpool.count_include_pad");
    /* no attrs node to point at (as dense) */
    gr_bnt_expect_error_at("[maxpool]", img, 3, 4, "model.layers[0].maxpool: maxpool needs attributes", false);
    gr_bnt_expect_error("[{global_avgpool: {kernel: 2}}, flatten]", img, 3, 4, "takes no attributes");
    gr_bnt_expect_error("[batchnorm]", s3, 2, 4, "batchnorm needs [batch, C, H, W] or [batch, C] input, got [n, 3, 4]");
    gr_bnt_expect_error("[{batchnorm: {momentum: 1.5}}]", c5, 1, 4, "batchnorm.momentum");
    gr_bnt_expect_error("[{batchnorm: {eps: 0}}]", c5, 1, 4, "eps must be positive");
    gr_bnt_expect_error("[{batchnorm: {mom: 0.1}}]", c5, 1, 4,
                        "batchnorm.mom: unknown attribute (batchnorm takes momentum, eps)");
    gr_bnt_expect_error("[batchnorm]", c5, 1, 1, "more than one value per channel");
}

/* ---- running stats ---- */

static void test_running_stats(void) {
    const int C = 3, HW = 20, N = 4;
    const double mom = 0.2, eps = 1e-3;
    int64_t s[3] = {3, 4, 5};
    gr_bnt t;
    if (!gr_bnt_init(&t, "[{batchnorm: {momentum: 0.2, eps: 0.001}}, flatten]", s, 3, N)) return;
    float *w = gr_bnt_param(&t, "weight"), *b = gr_bnt_param(&t, "bias");
    float *rm = gr_bnt_param(&t, "running_mean"), *rv = gr_bnt_param(&t, "running_var");
    for (int c = 0; c < C; c++) {
        w[c] = 0.5f + (float)c;
        b[c] = 1.0f - (float)c;
    }
    double em[3] = {0, 0, 0}, ev[3] = {1, 1, 1};
    float x[4 * 3 * 20];
    int32_t y[4] = {0, 1, 2, 3};
    const int64_t ns[3] = {4, 4, 3}; /* the last pass a smaller batch, as a last micro-batch may be */
    for (int pass = 0; pass < 3; pass++) {
        int64_t n = ns[pass];
        for (int i = 0; i < N * C * HW; i++)
            x[i] = 3.0f * gr_uniform(77u + (uint64_t)pass, (uint64_t)i) + (float)((i / HW) % C) * 2.0f - 1.0f;
        gr_batch bt = {.x = x, .y = y, .n = n};
        gr_exec_ctx ctx = {.training = true, .rng_key = 1, .grad_scale = 1.0f / (float)n};
        double loss, correct;
        gr_train_micro_step(&t.train, &bt, &ctx, &loss, &correct); /* forward + backward */
        for (int c = 0; c < C; c++) {
            double s1 = 0.0, s2 = 0.0, m = (double)(n * HW);
            for (int64_t i = 0; i < n; i++)
                for (int j = 0; j < HW; j++) s1 += x[(i * C + c) * HW + j];
            double mean = s1 / m;
            for (int64_t i = 0; i < n; i++)
                for (int j = 0; j < HW; j++) s2 += (x[(i * C + c) * HW + j] - mean) * (x[(i * C + c) * HW + j] - mean);
            em[c] = (1.0 - mom) * em[c] + mom * mean;
            ev[c] = (1.0 - mom) * ev[c] + mom * s2 / (m - 1.0);
            CHECK_CLOSE(rm[c], em[c], 1e-5, 1e-6);
            CHECK_CLOSE(rv[c], ev[c], 1e-5, 1e-6);
        }
    }
    /* eval: normalizes with the running stats, changes nothing */
    float rm0[3], rv0[3];
    memcpy(rm0, rm, sizeof rm0);
    memcpy(rv0, rv, sizeof rv0);
    for (int i = 0; i < N * C * HW; i++) x[i] = 4.0f * gr_uniform(99u, (uint64_t)i) - 1.0f;
    gr_batch bt = {.x = x, .y = y, .n = N};
    gr_exec_ctx ectx = {.training = false, .rng_key = 1, .grad_scale = 1.0f};
    double loss, correct;
    for (int k = 0; k < 2; k++) gr_train_micro_step(&t.eval, &bt, &ectx, &loss, &correct);
    CHECK(memcmp(rm0, rm, sizeof rm0) == 0 && memcmp(rv0, rv, sizeof rv0) == 0);
    const gr_node *bn = &t.g.nodes[t.g.layers[0].node];
    const float *out = gr_plan_ptr(&t.eval, bn->out[0]);
    int bad = 0;
    for (int i = 0; i < N * C * HW; i++) {
        int c = (i / HW) % C;
        double want = (x[i] - (double)rm[c]) / sqrt((double)rv[c] + eps) * w[c] + b[c];
        if (fabs(out[i] - want) > 1e-5 + 1e-5 * fabs(want)) bad++;
    }
    CHECK_MSG(bad == 0, "eval output: %d values off", bad);
    gr_bnt_free(&t);
}

/* ---- PyTorch parity ---- */

typedef struct gr_refarr {
    char name[64];
    float *v;
    int64_t n;
} gr_refarr;

static gr_refarr gr_refs[128];
static int gr_n_refs;

static bool gr_refs_load(const char *path) {
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
static const float *gr_ref_get(const char *name, int64_t n) {
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

static const float *gr_ref(const char *cname, const char *what, int64_t n) {
    char name[64];
    snprintf(name, sizeof name, "%s.%s", cname, what);
    return gr_ref_get(name, n);
}

typedef struct gr_bn_parity {
    const char *name, *layers;
    int ndim;
    int64_t shape[3]; /* per sample */
    int64_t n;
} gr_bn_parity;

static void gr_parity_bn(const gr_bn_parity *pc) {
    gr_bnt t;
    /* planned one sample more than run: the kernels must use the runtime n */
    if (!gr_bnt_init(&t, pc->layers, pc->shape, pc->ndim, pc->n + 1)) return;
    int64_t c = pc->shape[0], total = pc->n;
    for (int i = 0; i < pc->ndim; i++) total *= pc->shape[i];
    char what[96];
    memcpy(gr_bnt_param(&t, "weight"), gr_ref(pc->name, "weight", c), (size_t)c * sizeof(float));
    memcpy(gr_bnt_param(&t, "bias"), gr_ref(pc->name, "bias", c), (size_t)c * sizeof(float));
    gr_exec_ctx train = {.training = true, .grad_scale = 1.0f}, ev = {.training = false, .grad_scale = 1.0f};
    gr_kargs *f = gr_bnt_step(&t.train, GR_OP_BATCHNORM), *bw = gr_bnt_step(&t.train, GR_OP_BATCHNORM_BWD);
    memcpy(f->in[0], gr_ref(pc->name, "x1", total), (size_t)total * sizeof(float));
    gr_bnt_run(&t, f, pc->n, &train);
    memcpy(f->in[0], gr_ref(pc->name, "x2", total), (size_t)total * sizeof(float));
    gr_bnt_run(&t, f, pc->n, &train);
    snprintf(what, sizeof what, "%s: y (train)", pc->name);
    gr_bnt_close(what, f->out[0], gr_ref(pc->name, "y2", total), total, 1e-4, 1e-5);
    snprintf(what, sizeof what, "%s: running_mean", pc->name);
    gr_bnt_close(what, gr_bnt_param(&t, "running_mean"), gr_ref(pc->name, "running_mean", c), c, 1e-5, 1e-6);
    snprintf(what, sizeof what, "%s: running_var", pc->name);
    gr_bnt_close(what, gr_bnt_param(&t, "running_var"), gr_ref(pc->name, "running_var", c), c, 1e-5, 1e-6);

    memset(t.m.grads, 0, (size_t)t.g.n_trainable * sizeof(float));
    memcpy(bw->in[0], gr_ref(pc->name, "dy", total), (size_t)total * sizeof(float));
    CHECK(bw->node->nout == 3);
    gr_bnt_run(&t, bw, pc->n, &train);
    snprintf(what, sizeof what, "%s: dx", pc->name);
    gr_bnt_close(what, bw->out[2], gr_ref(pc->name, "dx", total), total, 1e-3, 1e-4);
    snprintf(what, sizeof what, "%s: dweight", pc->name);
    gr_bnt_close(what, gr_bnt_grad(&t, "weight"), gr_ref(pc->name, "dweight", c), c, 1e-4, 1e-4);
    snprintf(what, sizeof what, "%s: dbias", pc->name);
    gr_bnt_close(what, gr_bnt_grad(&t, "bias"), gr_ref(pc->name, "dbias", c), c, 1e-4, 1e-4);
    /* the backward leaves the running stats alone */
    snprintf(what, sizeof what, "%s: running_mean after backward", pc->name);
    gr_bnt_close(what, gr_bnt_param(&t, "running_mean"), gr_ref(pc->name, "running_mean", c), c, 1e-5, 1e-6);

    gr_kargs *ef = gr_bnt_step(&t.eval, GR_OP_BATCHNORM);
    memcpy(ef->in[0], gr_ref(pc->name, "x3", total), (size_t)total * sizeof(float));
    gr_bnt_run(&t, ef, pc->n, &ev);
    snprintf(what, sizeof what, "%s: y (eval)", pc->name);
    gr_bnt_close(what, ef->out[0], gr_ref(pc->name, "y3", total), total, 1e-4, 1e-5);
    snprintf(what, sizeof what, "%s: running_var after eval", pc->name);
    gr_bnt_close(what, gr_bnt_param(&t, "running_var"), gr_ref(pc->name, "running_var", c), c, 1e-5, 1e-6);
    gr_bnt_free(&t);
}

typedef struct gr_pool_parity {
    const char *name, *layers;
    gr_op op, bwd;
    int64_t shape[3]; /* per sample */
    int64_t n, out_total;
} gr_pool_parity;

static void gr_parity_pool(const gr_pool_parity *pc) {
    gr_bnt t;
    if (!gr_bnt_init(&t, pc->layers, pc->shape, 3, pc->n + 1)) return;
    int64_t total = pc->n * pc->shape[0] * pc->shape[1] * pc->shape[2], nout = pc->out_total;
    gr_exec_ctx train = {.training = true, .grad_scale = 1.0f};
    gr_kargs *f = gr_bnt_step(&t.train, pc->op), *bw = gr_bnt_step(&t.train, pc->bwd);
    CHECK(gr_tensor_sample_numel(f->tout[0]) * pc->n == nout);
    char what[96];
    memcpy(f->in[0], gr_ref(pc->name, "x", total), (size_t)total * sizeof(float));
    gr_bnt_run(&t, f, pc->n, &train);
    snprintf(what, sizeof what, "%s: y", pc->name);
    gr_bnt_close(what, f->out[0], gr_ref(pc->name, "y", nout), nout, 1e-5, 1e-6);
    if (pc->op == GR_OP_MAXPOOL) {
        const int32_t *idx = f->out[1];
        const float *want = gr_ref(pc->name, "idx", nout);
        int64_t bad = 0;
        for (int64_t i = 0; i < nout; i++) bad += idx[i] != (int32_t)want[i];
        CHECK_MSG(bad == 0, "%s: %lld argmax indices differ", pc->name, (long long)bad);
    }
    memcpy(bw->in[0], gr_ref(pc->name, "dy", nout), (size_t)nout * sizeof(float));
    gr_bnt_run(&t, bw, pc->n, &train);
    snprintf(what, sizeof what, "%s: dx", pc->name);
    gr_bnt_close(what, bw->out[0], gr_ref(pc->name, "dx", total), total, 1e-5, 1e-6);
    gr_bnt_free(&t);
}

static void test_torch_parity(void) {
    const char *out = GR_TEST_TMP "/bn_torch.bin";
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s/bn_torch.py %s", GR_TEST_DIR, out);
    remove(out);
    if (access("/usr/bin/python3", X_OK) != 0) {
        gr_test_skip("the PyTorch parity checks: /usr/bin/python3 is not installed");
        return;
    }
    int rc = system(cmd);
    if (rc != -1 && WIFEXITED(rc) && WEXITSTATUS(rc) == GR_TEST_SKIP_CODE) { /* bn_torch.py: no torch */
        gr_test_skip("the PyTorch parity checks: /usr/bin/python3 cannot import torch");
        return;
    }
    bool have = rc == 0 && gr_refs_load(out);
    CHECK_MSG(have, "no PyTorch references (%s exited %d); /usr/bin/python3 needs torch", cmd, rc);
    if (!have) return;
    static const gr_bn_parity bns[] = {
        {"bn4", "[{batchnorm: {momentum: 0.1, eps: 1e-5}}, flatten]", 3, {3, 5, 6}, 4},
        {"bn4m", "[{batchnorm: {momentum: 0.3, eps: 1e-3}}, flatten]", 3, {2, 3, 3}, 2},
        {"bn2", "[batchnorm]", 1, {5}, 6},
    };
    for (size_t i = 0; i < GR_ARRAY_LEN(bns); i++) gr_parity_bn(&bns[i]);
    static const gr_pool_parity pools[] = {
        {"max_ties", "[{maxpool: {kernel: 3, stride: 2, padding: 1}}, flatten]", GR_OP_MAXPOOL, GR_OP_MAXPOOL_BWD,
         {3, 7, 8}, 2, 2 * 3 * 4 * 4},
        {"max_2x2", "[{maxpool: {kernel: 2}}, flatten]", GR_OP_MAXPOOL, GR_OP_MAXPOOL_BWD, {2, 6, 6}, 2, 2 * 2 * 3 * 3},
        {"max_rect", "[{maxpool: {kernel: [3, 2], stride: [2, 1], padding: [1, 1]}}, flatten]", GR_OP_MAXPOOL,
         GR_OP_MAXPOOL_BWD, {2, 6, 5}, 2, 2 * 2 * 3 * 6},
        {"max_s3", "[{maxpool: {kernel: 3, stride: 3, padding: 1}}, flatten]", GR_OP_MAXPOOL, GR_OP_MAXPOOL_BWD,
         {2, 7, 10}, 2, 2 * 2 * 3 * 4},
        {"avg_incl", "[{avgpool: {kernel: 3, stride: 2, padding: 1}}, flatten]", GR_OP_AVGPOOL, GR_OP_AVGPOOL_BWD,
         {3, 7, 8}, 2, 2 * 3 * 4 * 4},
        {"avg_excl", "[{avgpool: {kernel: 3, stride: 2, padding: 1, count_include_pad: false}}, flatten]",
         GR_OP_AVGPOOL, GR_OP_AVGPOOL_BWD, {3, 7, 8}, 2, 2 * 3 * 4 * 4},
        {"avg_rect", "[{avgpool: {kernel: [3, 2], stride: [2, 1], padding: [1, 1], count_include_pad: false}}, "
         "flatten]", GR_OP_AVGPOOL, GR_OP_AVGPOOL_BWD, {2, 6, 5}, 2, 2 * 2 * 3 * 6},
        /* rows wider than avgpool_bwd's chunk of 256 outputs */
        {"avg_wide", "[{avgpool: {kernel: 3, stride: 1, padding: 1, count_include_pad: false}}, flatten]",
         GR_OP_AVGPOOL, GR_OP_AVGPOOL_BWD, {1, 3, 600}, 2, 2 * 1 * 3 * 600},
        {"gap", "[global_avgpool, flatten]", GR_OP_GLOBAL_AVGPOOL, GR_OP_GLOBAL_AVGPOOL_BWD, {3, 5, 4}, 2, 2 * 3},
    };
    for (size_t i = 0; i < GR_ARRAY_LEN(pools); i++) gr_parity_pool(&pools[i]);
    for (int i = 0; i < gr_n_refs; i++) free(gr_refs[i].v);
    printf("torch parity: %d reference arrays\n", gr_n_refs);
}

int main(void) {
    test_shapes();
    test_errors();
    test_running_stats();
    test_torch_parity();
    return gr_test_report();
}
