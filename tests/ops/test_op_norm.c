/* test_op_norm.c — layernorm (graph/op_norm.c):
 *   - finite-difference gradchecks through the real pipeline on the backend
 *     named on the command line (gradcheck.h: `cpu` or `cuda`): ranks 2, 3
 *     and 4, C = 13 (no multiple of 8 or 16) among them, with and without
 *     bias, on the input (dx) and after a dense layer; every parameter
 *     (dweight, dbias) and the input batch are checked;
 *   - shapes and tensors: PyTorch's parameter names and init (ones, zeros),
 *     the saved {mean, rstd} [n, ..., 2] per row, batched and fp32 under
 *     bf16 (GR_OPF_FP32_SAVED) while y is bf16, the backward node's outputs
 *     with and without bias and dx; the shape and attribute errors;
 *   - numerics: a row with |mean| >> std against a double reference (the
 *     variance from deviations, not E[x^2] - E[x]^2);
 *   - gradient accumulation through the pipeline: two micro-steps leave in
 *     the grads arena the sum of what each leaves alone;
 *   - mixed precision on the CPU: a bf16 training pass (layernorm staged
 *     through fp32, its saved statistics neither half nor staged) against
 *     the fp32 pass, within bf16's rounding;
 *   - the bodies (kernels/body_norm.h), on the CPU against the CPU kernels, in
 *     the kernels' stages (a warp of lanes per row and their butterfly;
 *     the parameter gradients' columns by slices of rows): forward (y,
 *     saved), backward (dx; dweight/dbias accumulating into nonzero values;
 *     without dx, without bias), over row lengths below, at and above a
 *     warp, and the slices cover every row once;
 *   - GR_NORM_DUMP=path (cpu): the PyTorch parity cases written there for
 *     tests/ops/norm_parity_torch.py (F.layer_norm, forward and gradients).
 * All but the gradchecks run with `cpu` only. */
#include "body_check.h"
#include "gradcheck.h"
#include "op_step.h"
#include "precision_fixture.h"

#include "kernels/body_norm.h"

/* ---- gradchecks ---- */

static void test_gradchecks(void) {
    static const gr_gc_case cases[] = {
        {"layernorm [n, 13]", "[layernorm, {dense: {units: 3}}]", 1, {13}, 0.0, 0.0, NULL},
        {"layernorm [n, 13] no bias", "[{layernorm: {bias: false}}, {dense: {units: 3}}]", 1, {13}, 0.0, 0.0, NULL},
        {"layernorm [n, 3, 13] eps 0.01", "[{layernorm: {eps: 0.01}}, flatten, {dense: {units: 3}}]", 2, {3, 13}, 0.0,
         0.0, NULL},
        {"layernorm [n, 4, 16] no bias", "[{layernorm: {bias: false}}, flatten, {dense: {units: 3}}]", 2, {4, 16}, 0.0,
         0.0, NULL},
        {"layernorm [n, 2, 3, 5] after dense", "[{dense: {units: 5}}, layernorm, gelu_tanh, flatten, "
         "{dense: {units: 3}}]", 3, {2, 3, 4}, 0.0, 0.0, NULL},
        {"two layernorms [n, 9]", "[layernorm, {dense: {units: 6}}, {layernorm: {bias: false, eps: 1e-3}}, "
         "{dense: {units: 3}}]", 1, {9}, 0.0, 0.0, NULL},
    };
    for (size_t i = 0; i < GR_ARRAY_LEN(cases); i++) gr_gc_run(&cases[i]);
}

/* ---- shapes, tensors, errors ---- */

/* The params-arena data of the (first) layernorm layer's tensor pname. */
static float *ln_param(gr_bnt *t, const char *pname) {
    for (int i = 0; i < t->g.n_tensors; i++) {
        const gr_tensor *x = &t->g.tensors[i];
        if (x->kind == GR_TK_PARAM && t->g.layers[x->layer].op == GR_OP_LAYERNORM && strcmp(x->pname, pname) == 0)
            return t->m.params + x->param_offset;
    }
    GR_ASSERT(!"no such parameter");
    return NULL;
}

static float *ln_grad(gr_bnt *t, const char *pname) { return t->m.grads + (ln_param(t, pname) - t->m.params); }

static const gr_node *ln_node(const gr_graph *g, gr_op op) {
    for (int i = 0; i < g->n_nodes; i++)
        if (g->nodes[i].op == op) return &g->nodes[i];
    return NULL;
}

static void test_shapes(void) {
    gr_bnt t;
    int64_t s[2] = {5, 13};
    if (!gr_bnt_init(&t, "[{dense: {units: 7}}, layernorm, flatten]", s, 2, 4)) return;
    const gr_node *f = ln_node(&t.g, GR_OP_LAYERNORM), *b = ln_node(&t.g, GR_OP_LAYERNORM_BWD);
    CHECK(f && b && f->nin == 3 && f->nout == 2 && b->nin == 4 && b->nout == 3);
    if (!f || !b) { gr_bnt_free(&t); return; }
    const gr_tensor *y = &t.g.tensors[f->out[0]], *sv = &t.g.tensors[f->out[1]];
    CHECK(y->ndim == 3 && y->shape[1] == 5 && y->shape[2] == 7 && y->batched);
    CHECK(sv->ndim == 3 && sv->shape[0] == 4 && sv->shape[1] == 5 && sv->shape[2] == 2 && sv->batched);
    CHECK(strcmp(sv->name, "layernorm0.saved") == 0 && sv->elem == GR_F32);
    CHECK(strcmp(t.g.tensors[f->in[1]].name, "layernorm0.weight") == 0);
    CHECK(strcmp(t.g.tensors[f->in[2]].name, "layernorm0.bias") == 0);
    CHECK(strcmp(t.g.tensors[f->in[2]].pname, "bias") == 0 && t.g.layers[1].n_params == 14);
    /* the backward: dweight, dbias, then dx (the dense before needs it) */
    CHECK(b->out[0] == t.g.tensors[f->in[1]].grad && b->out[1] == t.g.tensors[f->in[2]].grad);
    CHECK(b->out[2] == t.g.tensors[f->in[0]].grad && b->in[3] == f->out[1] && b->attrs.bias);
    /* nn.LayerNorm's initialization */
    const float *w = ln_param(&t, "weight"), *bb = ln_param(&t, "bias");
    for (int j = 0; j < 7; j++) CHECK(w[j] == 1.0f && bb[j] == 0.0f);
    /* under bf16, y is stored in half and the saved statistics stay fp32 */
    const int yi = f->out[0], si = f->out[1];
    gr_graph_set_precision(&t.g, GR_PREC_BF16);
    CHECK(t.g.tensors[yi].elem == GR_BF16 && t.g.tensors[si].elem == GR_F32);
    /* another micro-batch resizes them */
    gr_error err = {0};
    CHECK(gr_graph_set_batch(&t.g, 9, &err) == GR_OK && t.g.tensors[si].shape[0] == 9);
    gr_bnt_free(&t);

    /* no bias: {x, weight} in; {dweight, dx} out; on the input, which needs a gradient (gr_bnt_init asks) */
    if (!gr_bnt_init(&t, "[{layernorm: {bias: false}}, flatten]", s, 2, 3)) return;
    f = ln_node(&t.g, GR_OP_LAYERNORM);
    b = ln_node(&t.g, GR_OP_LAYERNORM_BWD);
    CHECK(f && b && f->nin == 2 && b->nout == 2 && !b->attrs.bias && t.g.layers[0].n_params == 13);
    if (f && b) CHECK(b->out[1] == t.g.tensors[f->in[0]].grad);
    gr_bnt_free(&t);
}

static void test_errors(void) {
    int64_t c5[1] = {5};
    gr_bnt_expect_error("[layernorm]", c5, 0, 4, "layernorm needs [batch, ..., C] input of rank 2 to 4 (it normalizes "
                        "the last axis), got [n]");
    gr_bnt_expect_error("[{layernorm: {eps: 0}}]", c5, 1, 4, "t:1:20: model.layers[0].layernorm.eps: eps must be "
                        "positive");
    gr_bnt_expect_error("[{layernorm: {eps: 1.5}}]", c5, 1, 4, "t:1:20: model.layers[0].layernorm.eps: must be in "
                        "[0, 1], got 1.5");
    gr_bnt_expect_error("[{layernorm: {bias: false, affine: true}}]", c5, 1, 4, "t:1:28: model.layers[0].layernorm."
                        "affine: unknown attribute (layernorm takes eps, bias)");
    gr_bnt_expect_error("[{layernorm: {bias: 2}}]", c5, 1, 4, "layernorm.bias: expected true or false");
    gr_bnt_expect_error("[{layernorm: 3}]", c5, 1, 4, "layernorm: expected a map of attributes, e.g. {eps: 1e-5, "
                        "bias: true}");
}

/* ---- numerics: |mean| >> std ---- */

static void test_numerics(void) {
    const int64_t c = 257;
    int64_t xs[2] = {2, c}, cs[1] = {c}, ss[2] = {2, 2};
    float *x = t_rand(2 * c, -0.01f, 0.01f), *w = t_rand(c, 1.0f, 1.0f), *y = t_alloc(2 * c), saved[4];
    for (int64_t j = 0; j < c; j++) x[j] += 1000.0f, x[c + j] -= 300.0f;
    t_args t;
    t_args_init(&t, GR_OP_LAYERNORM, 2, 2, 2, true);
    t.node.attrs.eps = 1e-12;
    t_tensor(&t.tin[0], GR_F32, true, 2, xs);
    t_tensor(&t.tin[1], GR_F32, false, 1, cs);
    t_tensor(&t.tout[0], GR_F32, true, 2, xs);
    t_tensor(&t.tout[1], GR_F32, true, 2, ss);
    t.a.in[0] = x;
    t.a.in[1] = w;
    t.a.out[0] = y;
    t.a.out[1] = saved;
    gr_cpu_layernorm(&t.a);
    for (int r = 0; r < 2; r++) {
        double m = 0.0, v = 0.0;
        for (int64_t j = 0; j < c; j++) m += x[r * c + j];
        m /= (double)c;
        for (int64_t j = 0; j < c; j++) v += (x[r * c + j] - m) * (x[r * c + j] - m);
        double rstd = 1.0 / sqrt(v / (double)c + 1e-12);
        /* the mean is rounded to fp32 (half an ulp of 1000 is 3e-5: about 5e-6 of the variance) */
        CHECK_MSG(fabs(saved[2 * r] - m) <= 6.2e-5 && fabs(saved[2 * r + 1] - rstd) <= 1e-4 * rstd,
                  "row %d: mean %.9g rstd %.9g, want %.9g %.9g", r, saved[2 * r], saved[2 * r + 1], m, rstd);
        double worst = 0.0;
        for (int64_t j = 0; j < c; j++) worst = fmax(worst, fabs(y[r * c + j] - (x[r * c + j] - m) * rstd));
        CHECK_MSG(worst < 2e-2, "row %d: y off by %.3g", r, worst); /* xhat ~ 1.7; x's own fp32 step is 1e-2 of it */
    }
    free(x); free(w); free(y);
}

/* ---- gradient accumulation ---- */

static void test_accumulation(void) {
    gr_bnt t;
    int64_t s[2] = {3, 10};
    if (!gr_bnt_init(&t, "[{dense: {units: 6}}, layernorm, flatten, {dense: {units: 4}}]", s, 2, 4)) return;
    float *w = ln_param(&t, "weight"), *b = ln_param(&t, "bias");
    for (int j = 0; j < 6; j++) {
        w[j] = 0.5f + 0.1f * (float)j;
        b[j] = 0.2f - 0.05f * (float)j;
    }
    const int64_t nt = t.g.n_trainable;
    float xa[4 * 30], xb[4 * 30];
    for (int i = 0; i < 4 * 30; i++) {
        xa[i] = 2.0f * gr_uniform(5, (uint64_t)i) - 1.0f;
        xb[i] = 3.0f * gr_uniform(6, (uint64_t)i);
    }
    int32_t ya[4] = {0, 1, 2, 3}, yb[4] = {3, 3, 1, 0};
    gr_exec_ctx ctx = {.training = true, .rng_key = 1, .grad_scale = 0.125f};
    gr_batch ba = {.x = xa, .y = ya, .n = 4}, bb = {.x = xb, .y = yb, .n = 4};
    float *ga = t_alloc(nt), *gb = t_alloc(nt);
    double loss, correct;
    memset(t.m.grads, 0, (size_t)nt * sizeof(float));
    gr_train_micro_step(&t.train, &ba, &ctx, &loss, &correct);
    memcpy(ga, t.m.grads, (size_t)nt * sizeof(float));
    memset(t.m.grads, 0, (size_t)nt * sizeof(float));
    gr_train_micro_step(&t.train, &bb, &ctx, &loss, &correct);
    memcpy(gb, t.m.grads, (size_t)nt * sizeof(float));
    memset(t.m.grads, 0, (size_t)nt * sizeof(float));
    gr_train_micro_step(&t.train, &ba, &ctx, &loss, &correct);
    gr_train_micro_step(&t.train, &bb, &ctx, &loss, &correct);
    const char *names[2] = {"weight", "bias"};
    for (int k = 0; k < 2; k++) {
        const float *g = ln_grad(&t, names[k]);
        const int64_t off = g - t.m.grads;
        float sum[6];
        bool nonzero = false;
        for (int j = 0; j < 6; j++) sum[j] = ga[off + j] + gb[off + j], nonzero |= ga[off + j] != 0.0f;
        char what[64];
        snprintf(what, sizeof what, "two micro-steps: d%s", names[k]);
        CHECK_CLOSE_ARR(what, g, sum, 6, 1e-6);
        CHECK_MSG(nonzero, "%s: no gradient", what);
    }
    free(ga); free(gb);
    gr_bnt_free(&t);
}

/* ---- mixed precision ---- */

static void test_bf16(void) {
    const char *layers = "[{dense: {units: 16}}, layernorm, gelu_tanh, {layernorm: {bias: false}}, flatten, "
                         "{dense: {units: 4}}]";
    const int64_t in[2] = {3, 8}, n = 4;
    model m32, m16;
    model_build(&m32, layers, in, 2, n, GR_PREC_FP32);
    model_build(&m16, layers, in, 2, n, GR_PREC_BF16);
    const gr_node *f = ln_node(&m16.g, GR_OP_LAYERNORM);
    CHECK(f && m16.g.tensors[f->out[0]].elem == GR_BF16 && m16.g.tensors[f->out[1]].elem == GR_F32);
    float *w = t_alloc(m32.g.n_params), x[4 * 24];
    gr_graph_init_params(&m32.g, w, 5);
    for (int i = 0; i < 4 * 24; i++) x[i] = 2.0f * urand();
    const int32_t y[4] = {0, 3, 1, 2};
    gr_error err = {0};
    gr_backend *be32 = NULL, *be16 = bf16_backend(false);
    CHECK(gr_backend_create("cpu", 2, &be32, &err) == GR_OK);
    run r32, r16;
    run_pass(&r32, &m32.g, be32, w, x, y, n);
    run_pass(&r16, &m16.g, be16, w, x, y, n);
    int staged = 0;
    for (int i = 0; i < r16.p.steps.n; i++) {
        const gr_kargs *a = &r16.p.steps.step[i];
        if (a->node->op != GR_OP_LAYERNORM && a->node->op != GR_OP_LAYERNORM_BWD) continue;
        staged += a->staged;
        const int k_saved = a->node->op == GR_OP_LAYERNORM ? 1 : -1;
        if (k_saved > 0) CHECK(a->eout[1] == GR_F32 && !a->stage_out[1] && a->stage_out[0]);
        else CHECK(a->ein[3] == GR_F32 && !a->stage_in[3] && a->stage_in[0]);
    }
    CHECK_MSG(staged == 4, "%d of the 4 layernorm steps staged", staged);
    const float *l32 = gr_plan_ptr(&r32.p, m32.g.loss_stats), *l16 = gr_plan_ptr(&r16.p, m16.g.loss_stats);
    CHECK_MSG(fabsf(l16[0] - l32[0]) <= 2e-2f * fabsf(l32[0]), "bf16 loss %g, fp32 %g", l16[0], l32[0]);
    CHECK_CLOSE_ARR("bf16 gradients (layernorm's among them) against fp32", r16.m.grads, r32.m.grads,
                    m32.g.n_trainable, 3e-2);
    run_free(&r32);
    run_free(&r16);
    gr_backend_free(be32);
    gr_backend_free(be16);
    free(w);
    model_free(&m32);
    model_free(&m16);
}

/* ---- the bodies against the CPU kernels ---- */

/* The warp's butterfly over its lanes' partials (norm.cu's shuffles): every
 * lane ends with the same sum, lane 0's returned. */
static double ln_warp_sum(double p[GR_LN_LANES]) {
    double q[GR_LN_LANES];
    for (int off = GR_LN_LANES / 2; off > 0; off >>= 1) {
        for (int l = 0; l < GR_LN_LANES; l++) q[l] = p[l] + p[l ^ off];
        memcpy(p, q, sizeof q);
    }
    return p[0];
}

typedef struct t_ln {
    int64_t n, t, c;        /* x [n, t, c]; t == 0: [n, c] */
    bool bias;
    double eps;
    float offset, spread;   /* x = offset + spread * U(-1, 1) */
} t_ln;

static void t_ln_args(t_args *t, const t_ln *q, gr_op op, int nin, int nout) {
    int64_t xs[3] = {q->n, q->t ? q->t : q->c, q->c}, ss[3] = {q->n, q->t ? q->t : 2, 2}, cs[1] = {q->c};
    int nd = q->t ? 3 : 2;
    t_args_init(t, op, nin, nout, q->n, true);
    t->node.attrs.eps = q->eps;
    t->node.attrs.bias = q->bias;
    if (op == GR_OP_LAYERNORM) {
        t_tensor(&t->tin[0], GR_F32, true, nd, xs);
        for (int i = 1; i < nin; i++) t_tensor(&t->tin[i], GR_F32, false, 1, cs);
        t_tensor(&t->tout[0], GR_F32, true, nd, xs);
        t_tensor(&t->tout[1], GR_F32, true, nd, ss);
    } else {
        t_tensor(&t->tin[0], GR_F32, true, nd, xs);
        t_tensor(&t->tin[1], GR_F32, true, nd, xs);
        t_tensor(&t->tin[2], GR_F32, false, 1, cs);
        t_tensor(&t->tin[3], GR_F32, true, nd, ss);
        for (int i = 0; i < nout; i++) t_tensor(&t->tout[i], GR_F32, false, 1, cs);
        if (nout > (q->bias ? 2 : 1)) t_tensor(&t->tout[nout - 1], GR_F32, true, nd, xs);
    }
}

static void test_ln_bodies(const t_ln *q) {
    const int64_t rows = q->n * (q->t ? q->t : 1), c = q->c, total = rows * c;
    char what[128], w2[200];
    snprintf(what, sizeof what, "layernorm bodies, %lld rows of %lld%s, offset %g", (long long)rows, (long long)c,
             q->bias ? "" : ", no bias", (double)q->offset);
    float *x = t_rand(total, -q->spread, q->spread), *w = t_rand(c, 0.5f, 1.5f), *b = t_rand(c, -0.5f, 0.5f);
    for (int64_t i = 0; i < total; i++) x[i] += q->offset;
    float *y = t_alloc(total), *y2 = t_alloc(total), *saved = t_alloc(2 * rows), *saved2 = t_alloc(2 * rows);
    t_args t;
    /* forward: the CPU kernel, then the warps */
    t_ln_args(&t, q, GR_OP_LAYERNORM, q->bias ? 3 : 2, 2);
    float *ins[3] = {x, w, b};
    for (int i = 0; i < 3; i++) t.a.in[i] = ins[i];
    t.a.out[0] = y;
    t.a.out[1] = saved;
    gr_cpu_layernorm(&t.a);
    for (int64_t r = 0; r < rows; r++) {
        double p[GR_LN_LANES];
        for (int l = 0; l < GR_LN_LANES; l++) p[l] = gr_body_ln_sum_part(x, r, c, l, GR_LN_LANES);
        float mean = gr_body_ln_mean(ln_warp_sum(p), c);
        for (int l = 0; l < GR_LN_LANES; l++) p[l] = gr_body_ln_sqdev_part(x, r, c, mean, l, GR_LN_LANES);
        float rstd = gr_body_ln_rstd(ln_warp_sum(p), c, q->eps);
        saved2[2 * r] = mean;
        saved2[2 * r + 1] = rstd;
        for (int l = 0; l < GR_LN_LANES; l++)
            gr_body_ln_y_part(x, w, q->bias ? b : NULL, y2, r, c, mean, rstd, l, GR_LN_LANES);
    }
    snprintf(w2, sizeof w2, "%s: saved", what);
    CHECK_CLOSE_ARR(w2, saved2, saved, 2 * rows, 1e-6);
    snprintf(w2, sizeof w2, "%s: y", what);
    CHECK_CLOSE_ARR(w2, y2, y, total, 1e-6);

    /* backward from the CPU's saved, the parameter gradients accumulating into nonzero values */
    float *dy = t_rand(total, -1.0f, 1.0f), *dw = t_rand(c, -1.0f, 1.0f), *db = t_rand(c, -1.0f, 1.0f);
    float *dw2 = t_copy(dw, c), *db2 = t_copy(db, c), *dx = t_alloc(total), *dx2 = t_alloc(total);
    gr_chan_geo g = gr_chan_geo_make(rows, c, 1);
    CHECK_MSG(g.cols && g.m == rows && (c * g.slices <= GR_CHAN_PARTS_MAX || g.slices == 1), "%s: geometry", what);
    for (int with_dx = 1; with_dx >= 0; with_dx--) {
        const int nout = (q->bias ? 2 : 1) + with_dx;
        t_ln_args(&t, q, GR_OP_LAYERNORM_BWD, 4, nout);
        float *bins[4] = {dy, x, w, saved};
        for (int i = 0; i < 4; i++) t.a.in[i] = bins[i];
        float *outs[3] = {dw, q->bias ? db : dx, dx};
        for (int i = 0; i < nout; i++) t.a.out[i] = outs[i];
        gr_cpu_layernorm_bwd(&t.a);
        if (with_dx) {
            for (int64_t r = 0; r < rows; r++) {
                double pa[GR_LN_LANES], pb[GR_LN_LANES];
                for (int l = 0; l < GR_LN_LANES; l++)
                    gr_body_ln_dx_part(dy, x, w, r, c, saved[2 * r], saved[2 * r + 1], l, GR_LN_LANES, &pa[l], &pb[l]);
                double sg = ln_warp_sum(pa), sgx = ln_warp_sum(pb);
                for (int l = 0; l < GR_LN_LANES; l++)
                    gr_body_ln_dx_apply(dy, x, w, dx2, r, c, saved[2 * r], saved[2 * r + 1], sg, sgx, l, GR_LN_LANES);
            }
            snprintf(w2, sizeof w2, "%s: dx", what);
            CHECK_CLOSE_ARR(w2, dx2, dx, total, 2e-6);
        }
        /* the columns by slices of rows, the slices' partials added in order; they cover every row once */
        int64_t covered = 0;
        for (int64_t ch = 0; ch < c; ch++) {
            double sw = 0.0, sb = 0.0;
            for (int64_t s = 0; s < g.slices; s++) {
                int64_t e0, e1, step;
                double pw, pb;
                gr_chan_span(&g, s, 0, &e0, &e1, &step);
                if (ch == 0) covered += e1 - e0;
                CHECK(step == 1 && e0 == s * g.len);
                gr_body_ln_param_part(dy, x, saved, c, ch, e0, e1, &pw, &pb);
                sw += pw;
                sb += pb;
            }
            gr_body_ln_param_finish(ch, sw, sb, dw2, q->bias ? db2 : NULL);
        }
        CHECK_MSG(covered == rows, "%s: the slices cover %lld of %lld rows", what, (long long)covered, (long long)rows);
        snprintf(w2, sizeof w2, "%s: dweight%s", what, with_dx ? "" : " (no dx)");
        CHECK_CLOSE_ARR(w2, dw2, dw, c, 1e-6);
        snprintf(w2, sizeof w2, "%s: dbias%s", what, with_dx ? "" : " (no dx)");
        CHECK_CLOSE_ARR(w2, db2, db, c, 1e-6);
    }
    free(x); free(w); free(b); free(y); free(y2); free(saved); free(saved2);
    free(dy); free(dw); free(db); free(dw2); free(db2); free(dx); free(dx2);
}

/* ---- the PyTorch parity dump (tests/ops/norm_parity_torch.py) ---- */

typedef struct ln_parity {
    const char *layers;
    int ndim;
    int64_t shape[3]; /* per sample; C the last */
    int64_t n;
    bool bias;
    double eps;
    float offset;
} ln_parity;

static const ln_parity parity_cases[] = {
    {"[layernorm, flatten]", 1, {13}, 5, true, 1e-5, 0.0f},
    {"[{layernorm: {bias: false}}, flatten]", 1, {13}, 3, false, 1e-5, 0.0f},
    {"[{layernorm: {eps: 1e-3}}, flatten]", 2, {5, 13}, 2, true, 1e-3, 0.5f},
    {"[{layernorm: {bias: false, eps: 1e-6}}, flatten]", 2, {4, 64}, 3, false, 1e-6, 0.0f},
    {"[layernorm, flatten]", 2, {3, 100}, 2, true, 1e-5, 10.0f},
    {"[layernorm, flatten]", 3, {2, 3, 16}, 2, true, 1e-5, -2.0f},
};

/* Per case: int64 {n, ndim, s0, s1, s2, bias, 0, 0}, float64 {eps, 0}, then
 * float32 x, weight, bias (zeros without), dy, y, dx, dweight, dbias (zeros
 * without): one forward and one backward plan step on the CPU (planned at a
 * micro-batch one larger than run), the grads arena zeroed before. */
static void dump_parity(const char *path) {
    FILE *f = fopen(path, "wb");
    CHECK_MSG(f != NULL, "cannot write %s", path);
    if (!f) return;
    for (size_t i = 0; i < GR_ARRAY_LEN(parity_cases); i++) {
        const ln_parity *pc = &parity_cases[i];
        gr_bnt t;
        if (!gr_bnt_init(&t, pc->layers, pc->shape, pc->ndim, pc->n + 1)) continue;
        const int64_t c = pc->shape[pc->ndim - 1];
        int64_t total = pc->n;
        for (int d = 0; d < pc->ndim; d++) total *= pc->shape[d];
        float *x = t_rand(total, -2.0f, 2.0f), *w = ln_param(&t, "weight"), *b = pc->bias ? ln_param(&t, "bias") : NULL;
        float *dy = t_rand(total, -1.0f, 1.0f), *zeros = t_alloc(c), *y = t_alloc(total), *dx = t_alloc(total);
        for (int64_t k = 0; k < total; k++) x[k] += pc->offset;
        for (int64_t j = 0; j < c; j++) {
            w[j] = 0.5f + gr_uniform(11u + i, (uint64_t)j);
            if (b) b[j] = gr_uniform(12u + i, (uint64_t)j) - 0.5f;
        }
        gr_exec_ctx train = {.training = true, .grad_scale = 1.0f};
        gr_kargs *fs = gr_bnt_step(&t.train, GR_OP_LAYERNORM), *bs = gr_bnt_step(&t.train, GR_OP_LAYERNORM_BWD);
        memcpy(fs->in[0], x, (size_t)total * sizeof *x);
        gr_bnt_run(&t, fs, pc->n, &train);
        memcpy(y, fs->out[0], (size_t)total * sizeof *y); /* dy may take its storage */
        memset(t.m.grads, 0, (size_t)t.g.n_trainable * sizeof(float));
        memcpy(bs->in[0], dy, (size_t)total * sizeof *dy);
        CHECK(bs->node->nout == (pc->bias ? 3 : 2));
        gr_bnt_run(&t, bs, pc->n, &train);
        memcpy(dx, bs->out[bs->node->nout - 1], (size_t)total * sizeof *dx);
        int64_t hdr[8] = {pc->n, pc->ndim, pc->shape[0], pc->ndim > 1 ? pc->shape[1] : 0,
                          pc->ndim > 2 ? pc->shape[2] : 0, pc->bias, 0, 0};
        double d[2] = {pc->eps, 0.0};
        CHECK(fwrite(hdr, sizeof hdr, 1, f) == 1 && fwrite(d, sizeof d, 1, f) == 1);
        const float *arrs[8] = {x, w, b ? b : zeros, dy, y, dx, ln_grad(&t, "weight"), b ? ln_grad(&t, "bias") : zeros};
        const int64_t lens[8] = {total, c, c, total, total, total, c, c};
        for (int k = 0; k < 8; k++) CHECK(fwrite(arrs[k], sizeof(float), (size_t)lens[k], f) == (size_t)lens[k]);
        free(x); free(dy); free(zeros); free(y); free(dx);
        gr_bnt_free(&t);
    }
    CHECK(fclose(f) == 0);
}

int main(int argc, char **argv) {
    int rc = gr_gc_args(argc, argv);
    if (rc) return rc;
    const char *dump = getenv("GR_NORM_DUMP");
    if (dump && dump[0] && gr_gc_on_cpu()) {
        dump_parity(dump);
        return gr_test_report();
    }
    test_gradchecks();
    if (!gr_gc_on_cpu()) return gr_test_report();
    test_shapes();
    test_errors();
    test_numerics();
    test_accumulation();
    test_bf16();

    /* n, t (0: [n, c]), c, bias, eps, offset, spread: rows shorter than a warp, C = 13, a warp, above
     * it, GPT widths, many rows (several slices of the column reduction), |mean| >> std */
    const t_ln lns[] = {
        {4, 0, 13, true, 1e-5, 0.0f, 1.0f},
        {3, 5, 13, false, 1e-5, 0.3f, 2.0f},
        {2, 3, 32, true, 1e-5, 0.0f, 1.0f},
        {2, 7, 100, true, 1e-3, -1.0f, 1.0f},
        {2, 16, 768, true, 1e-5, 0.0f, 3.0f},
        {64, 40, 48, false, 1e-5, 0.1f, 1.0f},
        {1, 1, 1, true, 1e-5, 0.0f, 1.0f},
        {3, 4, 257, true, 1e-5, 500.0f, 0.01f},
    };
    for (size_t i = 0; i < GR_ARRAY_LEN(lns); i++) test_ln_bodies(&lns[i]);
    return gr_test_report();
}
