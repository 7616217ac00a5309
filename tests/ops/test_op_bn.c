/* test_op_bn.c — batchnorm (graph/op_bn.c):
 *   - finite-difference gradchecks through the real pipeline on the backend
 *     named on the command line (gradcheck.h: `cpu` or `cuda`), 4-D and 2-D,
 *     and with a relu fused after it (graph/fuse.c) where the backend takes it;
 *     the harness runs in training mode, so batchnorm normalizes with the
 *     batch statistics and the check covers the full backward through them;
 *   - shapes, parameter/state tensors and attribute/shape errors;
 *   - the running stats after k training passes (forward + backward,
 *     varying batch) against a double computation with PyTorch's momentum
 *     and unbiased variance; eval uses them and leaves them unchanged;
 *   - parity with PyTorch (bn_torch.py, run with /usr/bin/python3; without
 *     torch the test reports skipped, exit 77, after its other checks): train forward/backward, running stats and eval
 *     forward on 4-D and 2-D input; kernels run one plan step at a time so
 *     the test controls dy (op_step.h);
 *   - the bodies (body_check.h), on the CPU against the CPU kernels, in the
 *     kernels' stages (thread partials per slice, per-channel finish,
 *     elementwise pass): training (y, saved, running stats over two steps
 *     with two momenta), eval, and backward in both modes (dw/db accumulate;
 *     with and without dx), 4-D (planes mode, one and several slices) and
 *     2-D (columns mode), including a channel with |mean| >> std; the
 *     reduction geometry: every element of a channel visited exactly once,
 *     the partials within the device scratch.
 * All but the gradchecks run with `cpu` only. */
#include "body_check.h"
#include "gradcheck.h"
#include "op_step.h"

/* ---- gradchecks ---- */

static void test_gradchecks(void) {
    static const gr_gc_case cases[] = {
        {"batchnorm 4-D", "[batchnorm, flatten, {dense: {units: 3}}]", 3, {2, 3, 3}, 0.0, 0.0, NULL},
        {"batchnorm 4-D momentum eps", "[{batchnorm: {momentum: 0.3, eps: 0.01}}, flatten, {dense: {units: 3}}]",
         3, {3, 2, 2}, 0.0, 0.0, NULL},
        {"batchnorm 2-D after dense", "[{dense: {units: 5}}, batchnorm, {dense: {units: 3}}]", 1, {6}, 0.0, 0.0,
         NULL},
    };
    for (size_t i = 0; i < GR_ARRAY_LEN(cases); i++) gr_gc_run(&cases[i]);
    /* a relu fused after it (graph/fuse.c), forward and backward: the relu's kink away from the
     * sampled points (min_abs keeps the inputs, hence the normalized values, off 0) */
    static const gr_gc_case fused[] = {
        {"batchnorm + relu fused, 4-D", "[batchnorm, relu, flatten, {dense: {units: 3}}]", 3, {2, 3, 3}, 0.0, 0.0,
         NULL},
        {"batchnorm + relu fused, 2-D", "[{dense: {units: 5}}, batchnorm, relu, {dense: {units: 3}}]", 1, {6}, 0.0,
         0.0, NULL},
        {"batchnorm + relu fused, then a residual add",
         "[batchnorm, {relu: {}, name: r}, {conv: {filters: 2, kernel: 1}}, {add: {}, input: [r, conv0]}, flatten, "
         "{dense: {units: 3}}]", 3, {2, 3, 3}, 0.0, 0.0, NULL},
        /* the add's inputs are a relu's output (of the input, kept off 0 by min_abs) twice: its relu's
         * kink only where that is 0, flat around it; that first relu's backward folds into the sum of
         * the add's two gradients for it (graph/fuse.c) */
        {"add + relu fused", "[{relu: {}, name: r}, {add: {}, input: [r, r]}, relu, flatten, {dense: {units: 3}}]", 3,
         {2, 3, 3}, 0.0, 0.05, NULL},
    };
    gr_gc_fuse = true;
    for (size_t i = 0; i < GR_ARRAY_LEN(fused); i++) gr_gc_run(&fused[i]);
    gr_gc_fuse = false;
}

/* ---- shapes, tensors, errors ---- */

static void test_shapes(void) {
    gr_bnt t;
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

static void test_errors(void) {
    int64_t s3[2] = {3, 4}, c5[1] = {5};
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

static void test_torch_parity(void) {
    if (!gr_refs_fetch("bn")) return;
    static const gr_bn_parity bns[] = {
        {"bn4", "[{batchnorm: {momentum: 0.1, eps: 1e-5}}, flatten]", 3, {3, 5, 6}, 4},
        {"bn4m", "[{batchnorm: {momentum: 0.3, eps: 1e-3}}, flatten]", 3, {2, 3, 3}, 2},
        {"bn2", "[batchnorm]", 1, {5}, 6},
    };
    for (size_t i = 0; i < GR_ARRAY_LEN(bns); i++) gr_parity_bn(&bns[i]);
    gr_refs_free();
}

/* ---- per-channel reductions ---- */

/* Every element of every channel is visited once by the threads of its
 * slices, and the partials fit the device scratch. */
static void test_chan_geo(int64_t n, int64_t c, int64_t inner) {
    gr_chan_geo g = gr_chan_geo_make(n, c, inner);
    CHECK_MSG(g.m == n * inner && g.slices >= 1 && g.len * g.slices >= g.m && g.len * (g.slices - 1) < g.m,
              "geo n%lld c%lld inner%lld: slices %lld of %lld", (long long)n, (long long)c, (long long)inner,
              (long long)g.slices, (long long)g.len);
    CHECK_MSG(c * g.slices <= GR_CHAN_PARTS_MAX || g.slices == 1, "geo n%lld c%lld inner%lld: %lld partials",
              (long long)n, (long long)c, (long long)inner, (long long)(c * g.slices));
    int64_t threads = g.cols ? 1 : GR_CHAN_THREADS, total = n * c * inner, bad = 0;
    unsigned char *seen = gr_xcalloc((size_t)total, 1);
    for (int64_t ch = 0; ch < c; ch++)
        for (int64_t s = 0; s < g.slices; s++)
            for (int64_t t = 0; t < threads; t++) {
                int64_t e0, e1, step;
                gr_chan_span(&g, s, t, &e0, &e1, &step);
                gr_chan_cur cur = gr_chan_cur_at(&g, e0, step);
                for (int64_t e = e0; e < e1; e += step) {
                    int64_t at = ch * inner + cur.off;
                    if (at < 0 || at >= total || gr_chan_of(at, inner, c) != ch) bad++;
                    else seen[at]++;
                    gr_chan_cur_next(&cur);
                }
            }
    for (int64_t i = 0; i < total; i++) bad += seen[i] != 1;
    CHECK_MSG(bad == 0, "geo n%lld c%lld inner%lld: %lld elements not visited exactly once", (long long)n,
              (long long)c, (long long)inner, (long long)bad);
    free(seen);
}

typedef struct t_bn {
    int64_t n, c, h, w;   /* w == 0: 2-D [n, c] */
    double momentum, eps;
    float offset, spread; /* x = offset_c + spread * U(-1, 1), offset_c = offset * (c + 1) */
} t_bn;

static void t_bn_args(t_args *t, const t_bn *q, gr_op op, int nin, int nout, bool training) {
    int64_t xs[4] = {q->n, q->c, q->h, q->w}, cs[1] = {q->c}, ss[2] = {2, q->c};
    int nd = q->w ? 4 : 2;
    t_args_init(t, op, nin, nout, q->n, training);
    t->node.attrs.momentum = q->momentum;
    t->node.attrs.eps = q->eps;
    if (op == GR_OP_BATCHNORM) {
        t_tensor(&t->tin[0], GR_F32, true, nd, xs);
        for (int i = 1; i < 5; i++) t_tensor(&t->tin[i], GR_F32, false, 1, cs);
        t_tensor(&t->tout[0], GR_F32, true, nd, xs);
        t_tensor(&t->tout[1], GR_F32, false, 2, ss);
    } else {
        t_tensor(&t->tin[0], GR_F32, true, nd, xs);
        t_tensor(&t->tin[1], GR_F32, true, nd, xs);
        t_tensor(&t->tin[2], GR_F32, false, 1, cs);
        t_tensor(&t->tin[3], GR_F32, false, 2, ss);
        t_tensor(&t->tout[0], GR_F32, false, 1, cs);
        t_tensor(&t->tout[1], GR_F32, false, 1, cs);
        t_tensor(&t->tout[2], GR_F32, true, nd, xs);
    }
}

static float *t_bn_input(const t_bn *q, int64_t hw) {
    int64_t total = q->n * q->c * hw;
    float *x = t_rand(total, -q->spread, q->spread);
    for (int64_t i = 0; i < total; i++) x[i] += q->offset * (float)(gr_chan_of(i, hw, q->c) + 1);
    return x;
}

static void test_batchnorm(const t_bn *q) {
    int64_t hw = q->w ? q->h * q->w : 1, c = q->c, total = q->n * c * hw;
    gr_chan_geo g = gr_chan_geo_make(q->n, c, hw);
    char what[160], w2[220];
    snprintf(what, sizeof what, "batchnorm [%lld, %lld%s%lld%s%lld] (%lld slices%s) mom %g offset %g",
             (long long)q->n, (long long)c, q->w ? ", " : "", (long long)(q->w ? q->h : 0), q->w ? ", " : "",
             (long long)q->w, (long long)g.slices, g.cols ? ", columns" : "", q->momentum, (double)q->offset);
    float *w = t_rand(c, 0.5f, 1.5f), *b = t_rand(c, -0.5f, 0.5f);
    float *rm = t_rand(c, -1.0f, 1.0f), *rv = t_rand(c, 0.5f, 2.0f);
    float *rm2 = t_copy(rm, c), *rv2 = t_copy(rv, c);
    float *y = t_alloc(total), *y2 = t_alloc(total), *saved = t_alloc(2 * c), *saved2 = t_alloc(2 * c);
    float *coef = t_alloc(4 * c);
    double *s1 = gr_xcalloc((size_t)c, sizeof *s1), *s2 = gr_xcalloc((size_t)c, sizeof *s2);
    t_args t;

    /* training, two steps on fresh inputs (the running stats compound) */
    float *x = NULL;
    for (int step = 0; step < 2; step++) {
        free(x);
        x = t_bn_input(q, hw);
        t_bn_args(&t, q, GR_OP_BATCHNORM, 5, 2, true);
        float *ins[5] = {x, w, b, rm, rv};
        for (int i = 0; i < 5; i++) t.a.in[i] = ins[i];
        t.a.out[0] = y;
        t.a.out[1] = saved;
        gr_cpu_batchnorm(&t.a);

        t_chan_sums(&g, 0, x, NULL, NULL, s1, s2);
        for (int64_t ch = 0; ch < c; ch++)
            gr_body_bn_train_finish(&g, ch, s1[ch], s2[ch], x, GR_BODY_F32, q->eps, q->momentum, w, b, saved2, rm2,
                                    rv2, coef);
        for (int64_t i = 0; i < total; i++) y2[i] = gr_body_bn_norm(x[i], coef + 4 * gr_chan_of(i, hw, c));
        snprintf(w2, sizeof w2, "%s: train step %d: saved", what, step);
        CHECK_CLOSE_ARR(w2, saved2, saved, 2 * c, 1e-6);
        snprintf(w2, sizeof w2, "%s: train step %d: running_mean", what, step);
        CHECK_CLOSE_ARR(w2, rm2, rm, c, 1e-6);
        snprintf(w2, sizeof w2, "%s: train step %d: running_var", what, step);
        CHECK_CLOSE_ARR(w2, rv2, rv, c, 1e-6);
        snprintf(w2, sizeof w2, "%s: train step %d: y", what, step);
        CHECK_CLOSE_ARR(w2, y2, y, total, 1e-5);
    }

    /* backward of the training step (the CPU's saved feeds both), dw/db
     * accumulating into nonzero values, then without dx */
    float *dy = t_rand(total, -1.0f, 1.0f), *dw = t_rand(c, -1.0f, 1.0f), *db = t_rand(c, -1.0f, 1.0f);
    float *dw2 = t_copy(dw, c), *db2 = t_copy(db, c), *dx = t_alloc(total), *dx2 = t_alloc(total);
    for (int mode = 0; mode < 2; mode++) {
        bool training = mode == 0;
        if (!training) {
            /* eval forward: the running stats (const in the body) */
            t_bn_args(&t, q, GR_OP_BATCHNORM, 5, 2, false);
            float *ins[5] = {x, w, b, rm, rv};
            for (int i = 0; i < 5; i++) t.a.in[i] = ins[i];
            t.a.out[0] = y;
            t.a.out[1] = saved;
            gr_cpu_batchnorm(&t.a);
            for (int64_t ch = 0; ch < c; ch++)
                gr_body_bn_eval_finish(c, ch, (float)q->eps, w, b, rm2, rv2, saved2, coef);
            for (int64_t i = 0; i < total; i++) y2[i] = gr_body_bn_norm(x[i], coef + 4 * gr_chan_of(i, hw, c));
            snprintf(w2, sizeof w2, "%s: eval: saved", what);
            CHECK_CLOSE_ARR(w2, saved2, saved, 2 * c, 1e-6);
            snprintf(w2, sizeof w2, "%s: eval: y", what);
            CHECK_CLOSE_ARR(w2, y2, y, total, 1e-5);
        }
        for (int with_dx = 1; with_dx >= 0; with_dx--) {
            t_bn_args(&t, q, GR_OP_BATCHNORM_BWD, 4, with_dx ? 3 : 2, training);
            float *ins[4] = {dy, x, w, saved};
            for (int i = 0; i < 4; i++) t.a.in[i] = ins[i];
            t.a.out[0] = dw;
            t.a.out[1] = db;
            t.a.out[2] = dx;
            gr_cpu_batchnorm_bwd(&t.a);

            t_chan_sums(&g, 1, dy, x, saved, s1, s2);
            for (int64_t ch = 0; ch < c; ch++)
                gr_body_bn_bwd_finish(&g, ch, s1[ch], s2[ch], training, w, saved, dw2, db2, coef);
            snprintf(w2, sizeof w2, "%s: bwd %s%s: dweight", what, training ? "train" : "eval",
                     with_dx ? "" : " (no dx)");
            CHECK_CLOSE_ARR(w2, dw2, dw, c, 1e-5);
            snprintf(w2, sizeof w2, "%s: bwd %s%s: dbias", what, training ? "train" : "eval",
                     with_dx ? "" : " (no dx)");
            CHECK_CLOSE_ARR(w2, db2, db, c, 1e-5);
            if (!with_dx) continue;
            for (int64_t i = 0; i < total; i++)
                dx2[i] = gr_body_bn_dx(dy[i], x[i], coef + 4 * gr_chan_of(i, hw, c));
            snprintf(w2, sizeof w2, "%s: bwd %s: dx", what, training ? "train" : "eval");
            CHECK_CLOSE_ARR(w2, dx2, dx, total, 1e-5);
        }
    }
    free(w); free(b); free(rm); free(rv); free(rm2); free(rv2); free(y); free(y2); free(saved); free(saved2);
    free(coef); free(s1); free(s2); free(x); free(dy); free(dw); free(db); free(dw2); free(db2); free(dx);
    free(dx2);
}

int main(int argc, char **argv) {
    int rc = gr_gc_args(argc, argv);
    if (rc) return rc;
    test_gradchecks();
    if (!gr_gc_on_cpu()) return gr_test_report();
    test_shapes();
    test_errors();
    test_running_stats();
    test_torch_parity();

    /* geometries: columns and planes modes, one and several slices, the
     * partials cap (16384 channels x 4 slices), more channels than partials */
    test_chan_geo(3, 5, 1);
    test_chan_geo(300, 7, 1);
    test_chan_geo(4, 3, 35);
    test_chan_geo(3, 2, 12544);
    test_chan_geo(128, 3, 49);
    test_chan_geo(1, 1, 1);
    test_chan_geo(2, 70000, 1);
    const int64_t caps[][3] = {{256, 4096, 1}, {256, 16384, 49}, {1024, 64, 12544}, {256, 2048, 49}};
    for (size_t i = 0; i < sizeof caps / sizeof caps[0]; i++) {
        gr_chan_geo g = gr_chan_geo_make(caps[i][0], caps[i][1], caps[i][2]);
        CHECK_MSG(g.slices > 1 && caps[i][1] * g.slices <= GR_CHAN_PARTS_MAX, "geo [%lld][%lld][%lld]: %lld slices",
                  (long long)caps[i][0], (long long)caps[i][1], (long long)caps[i][2], (long long)g.slices);
    }

    /* batchnorm bodies: n, c, h, w (0: 2-D), momentum, eps, offset, spread */
    const t_bn bns[] = {
        {4, 3, 5, 7, 0.1, 1e-5, 0.0f, 1.0f},
        {2, 6, 33, 31, 0.1, 1e-5, 0.3f, 2.0f},
        {3, 2, 112, 112, 0.3, 1e-3, -0.5f, 1.0f},  /* several slices, the last one short */
        {128, 3, 7, 7, 0.1, 1e-5, 0.2f, 1.0f},     /* ResNet's last stage: hw 49 */
        {16, 4, 9, 9, 0.1, 1e-5, 50.0f, 0.01f},    /* |mean| >> std */
        {8, 16, 0, 0, 0.1, 1e-5, 0.1f, 1.0f},      /* 2-D */
        {300, 5, 0, 0, 0.25, 1e-5, -0.2f, 1.0f},   /* 2-D, several slices */
        {2, 1, 1, 1, 0.1, 1e-5, 0.0f, 1.0f},       /* two values per channel */
    };
    for (size_t i = 0; i < sizeof bns / sizeof bns[0]; i++) test_batchnorm(&bns[i]);
    return gr_test_report();
}
