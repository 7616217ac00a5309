/* test_precision.c — native mixed precision on the CPU:
 *   - the precision policy (graph/precision.c): which tensors bf16/fp16
 *     store in half (activations, their gradients, a view as its root),
 *     which stay as built (the input batch, labels, masks, batchnorm's
 *     saved statistics, the loss's probabilities and sums, parameters), and
 *     the activation arena sized by them (about half of fp32's);
 *   - the plan's staging: without a native kernel every step touching half
 *     storage is staged, and its fp32 staging area is sized;
 *   - relu, add, batchnorm and global_avgpool on bf16 storage (half_io.h) give
 *     bit for bit the staged path's results (decode, fp32 kernel, encode):
 *     a training pass of a conv- and dense-free model on a native and a staged
 *     backend, same weights and batch, same gradients and running stats;
 *   - the conversion spans of kernels/cpu/half_io.c (vector clones, F16C)
 *     give the scalar encoders' and decoders' bit patterns, NaNs included;
 *   - the bf16 dense layer (oneDNN matmul; an fp32 input batch encoded),
 *     forward, backward data and backward weights (added into dW, db), in
 *     the same bound;
 *   - maxpool's 2x2 stride-2 path against a scan-order reference (ties keep
 *     the first maximum, NaN propagates, -inf), in fp32 and on bf16 storage
 *     (the same maxima and indices; the backward's dx the encoded fp32 one);
 *   - the oneDNN bf16 convolution (forward, backward data, backward
 *     weights; 3x3, strided 1x1, a 7x7 on an fp32 input, grouped, with
 *     bias) against the fp32 reference path within the format's bound:
 *     |native - fp32| <= 2^-6 * (the same conv on |x|, |w|) + 1e-6 per
 *     element (bf16 keeps 8 significant bits: x, w and the result are each
 *     rounded once, relative error 2^-8 each, fp32 accumulation).
 * The native parts need a CPU with AVX-512 BF16 or AMX (oneDNN's bf16
 * kernels); elsewhere they report skipped. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/gr_half.h"
#include "exec/exec.h"
#include "graph/graph.h"
#include "kernels/cpu/cpu.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/half_io.h"
#include "gr_test.h"
#include "kargs_fixture.h"
#include "precision_fixture.h"

static gr_elem elem_of(const gr_graph *g, const char *name) { return g->tensors[find(g, name)].elem; }

/* ---- the policy ---- */

/* gr_plan_staged_ops names each op once; with counts, an op whose steps
 * are only partly staged says how many (as a GPU run's first conv, on the
 * fp32 batch, alone is). */
static void test_staged_names(void) {
    int64_t in[3] = {3, 6, 6};
    model t;
    model_build(&t, "[{conv: {filters: 4, kernel: 3, padding: 1}}, {conv: {filters: 4, kernel: 3, padding: 1}}, "
                "{conv: {filters: 4, kernel: 3, padding: 1}}, flatten, {dense: {units: 10}}]", in, 3, 4, GR_PREC_BF16);
    gr_plan p;
    gr_error err = {0};
    CHECK(gr_plan_compile(&p, NULL, &t.g, GR_PLAN_TRAIN, false, &err) == GR_OK);
    char ops[512];
    CHECK_STR_CONTAINS(gr_plan_staged_ops(&p, true, ops, sizeof ops), "conv, dense, ");
    int convs = 0;
    for (int i = 0; i < p.steps.n; i++)
        if (p.steps.step[i].node->op == GR_OP_CONV && convs++ > 0) p.steps.step[i].staged = false;
    CHECK(convs == 3);
    CHECK_STR_CONTAINS(gr_plan_staged_ops(&p, true, ops, sizeof ops), "conv (1 of 3), dense, ");
    CHECK_STR_CONTAINS(gr_plan_staged_ops(&p, false, ops, sizeof ops), "conv, dense, ");
    for (int i = 0; i < p.steps.n; i++)
        if (p.steps.step[i].node->op == GR_OP_CONV) p.steps.step[i].staged = false;
    CHECK(strstr(gr_plan_staged_ops(&p, true, ops, sizeof ops), "conv,") == NULL);
    CHECK(strncmp(ops, "dense, ", 7) == 0);
    gr_plan_free(&p);
    model_free(&t);
}

static void test_policy(void) {
    const char *layers = "[{conv: {filters: 8, kernel: 3, padding: 1}}, batchnorm, relu, {maxpool: {kernel: 2}}, "
                         "{dropout: {rate: 0.1}}, flatten, {dense: {units: 10}}]";
    int64_t in[3] = {3, 8, 8};
    model f, b, h;
    model_build(&f, layers, in, 3, 4, GR_PREC_FP32);
    model_build(&b, layers, in, 3, 4, GR_PREC_BF16);
    model_build(&h, layers, in, 3, 4, GR_PREC_FP16);
    const gr_graph *g = &b.g;
    CHECK(g->precision == GR_PREC_BF16 && f.g.precision == GR_PREC_FP32);
    CHECK(g->tensors[g->input].elem == GR_F32 && g->tensors[g->label].elem == GR_I32);
    CHECK(elem_of(g, "conv0") == GR_BF16 && elem_of(g, "batchnorm0") == GR_BF16 && elem_of(g, "relu0") == GR_BF16);
    CHECK(elem_of(g, "conv0.grad") == GR_BF16 && elem_of(g, "relu0.grad") == GR_BF16);
    CHECK(elem_of(&h.g, "conv0") == GR_F16 && elem_of(&h.g, "relu0.grad") == GR_F16);
    CHECK(elem_of(g, "flatten0") == GR_BF16); /* a view: its root's type */
    CHECK(elem_of(g, "dense0") == GR_BF16);
    CHECK(g->tensors[g->loss_probs].elem == GR_F32 && g->tensors[g->loss_stats].elem == GR_F32);
    int saved = -1, mask = -1, idx = -1;
    for (int t = 0; t < g->n_tensors; t++) {
        const gr_tensor *x = &g->tensors[t];
        if (x->kind == GR_TK_PARAM || x->kind == GR_TK_STATE || x->kind == GR_TK_GRAD)
            CHECK_MSG(x->elem == GR_F32, "%s is %s", x->name, gr_elem_name(x->elem));
        if (x->kind == GR_TK_ACT && !x->batched) saved = t;
        if (x->elem == GR_U8) mask = t;
        if (x->elem == GR_I32 && x->kind == GR_TK_ACT) idx = t;
        /* nothing else changes: shapes, kinds, the graph itself */
        CHECK(x->kind == f.g.tensors[t].kind && gr_tensor_numel(x) == gr_tensor_numel(&f.g.tensors[t]));
    }
    CHECK(saved >= 0 && g->tensors[saved].elem == GR_F32); /* batchnorm's saved statistics */
    CHECK(mask >= 0 && idx >= 0);                           /* dropout's mask, maxpool's indices: as built */
    CHECK(g->n_nodes == f.g.n_nodes && g->n_tensors == f.g.n_tensors);

    /* the arena by the real element sizes */
    gr_memplan mf, mb;
    gr_memplan_init(&mf, &f.g, GR_PLAN_TRAIN);
    gr_memplan_init(&mb, &b.g, GR_PLAN_TRAIN);
    CHECK_MSG(mb.act_bytes < 0.65 * (double)mf.act_bytes && mb.act_bytes > 0.4 * (double)mf.act_bytes,
              "bf16 arena %zu vs fp32 %zu", mb.act_bytes, mf.act_bytes);
    size_t sum = 0;
    for (int e = 0; e < GR_ELEM_COUNT; e++) sum += mb.naive_by_elem[e];
    CHECK(sum == mb.act_bytes_naive && mb.naive_by_elem[GR_BF16] > 0 && mf.naive_by_elem[GR_BF16] == 0);
    /* what went to bf16 takes half its fp32 bytes (up to each tensor's 64-byte alignment) */
    long long moved = (long long)mf.naive_by_elem[GR_F32] - (long long)mb.naive_by_elem[GR_F32];
    CHECK_MSG(llabs(moved - 2 * (long long)mb.naive_by_elem[GR_BF16]) <= 128LL * g->n_tensors, "%lld vs 2 x %zu",
              moved, mb.naive_by_elem[GR_BF16]);
    gr_memplan_free(&mf);
    gr_memplan_free(&mb);

    /* planned without a device: every step with a half tensor is staged */
    gr_plan p;
    gr_error err = {0};
    CHECK(gr_plan_compile(&p, NULL, g, GR_PLAN_TRAIN, false, &err) == GR_OK);
    int half_steps = 0;
    for (int i = 0; i < p.steps.n; i++) {
        const gr_kargs *a = &p.steps.step[i];
        bool half = false;
        for (int k = 0; k < a->node->nin; k++) half |= gr_elem_is_half(a->ein[k]);
        for (int k = 0; k < a->node->nout; k++) half |= gr_elem_is_half(a->eout[k]);
        half_steps += half;
        CHECK(a->staged == half);
    }
    CHECK(half_steps > 0 && p.n_staged == half_steps && p.stage_bytes > 0);
    char ops[256];
    CHECK_STR_CONTAINS(gr_plan_staged_ops(&p, true, ops, sizeof ops), "conv, batchnorm, relu");
    gr_plan_free(&p);
    CHECK(gr_plan_compile(&p, NULL, &f.g, GR_PLAN_TRAIN, false, &err) == GR_OK);
    CHECK(p.n_staged == 0 && p.stage_bytes == 0);
    gr_plan_free(&p);
    model_free(&f);
    model_free(&b);
    model_free(&h);
}

/* ---- native vs staged ---- */

static bool staged_op(const gr_plan *p, gr_op op, int nth) {
    for (int i = 0; i < p->steps.n; i++)
        if (p->steps.step[i].node->op == op && nth-- == 0) return p->steps.step[i].staged;
    CHECK_MSG(0, "no step %d of %s", nth, gr_op_name(op));
    return false;
}

static void test_elementwise_bitwise(void) {
    /* batchnorm0 reads the fp32 batch (staged); relu0, batchnorm1, add0,
     * global_avgpool0 and their backward are all-bf16 (native); the loss is
     * staged; 16 channels are the 16 classes */
    const char *layers = "[batchnorm, relu, batchnorm, {add: {}, input: [relu0, batchnorm1]}, relu, global_avgpool, "
                         "flatten]";
    int64_t in[3] = {16, 6, 6};
    const int64_t n = 8;
    model b;
    model_build(&b, layers, in, 3, n, GR_PREC_BF16);
    const gr_graph *g = &b.g;
    float *w = malloc((size_t)g->n_params * sizeof *w), *x = malloc((size_t)(n * 16 * 36) * sizeof *x);
    int32_t y[8];
    gr_graph_init_params(g, w, 11);
    for (int64_t i = 0; i < g->n_params; i++) w[i] += 0.1f * urand(); /* batchnorm's 1 and 0 made generic */
    for (int64_t i = 0; i < n * 16 * 36; i++) x[i] = 3.0f * urand() + 0.5f;
    for (int i = 0; i < 8; i++) y[i] = (i * 5) % 16;

    run rn, rs;
    run_pass(&rn, g, bf16_backend(true), w, x, y, n);
    run_pass(&rs, g, bf16_backend(false), w, x, y, n);
    /* the native plan runs the all-bf16 steps as they are; the staged one none */
    CHECK(staged_op(&rn.p, GR_OP_BATCHNORM, 0) && !staged_op(&rn.p, GR_OP_BATCHNORM, 1));
    CHECK(!staged_op(&rn.p, GR_OP_RELU, 0) && !staged_op(&rn.p, GR_OP_ADD, 0) && !staged_op(&rn.p, GR_OP_RELU_BWD, 0));
    CHECK(!staged_op(&rn.p, GR_OP_BATCHNORM_BWD, 0) && !staged_op(&rn.p, GR_OP_GLOBAL_AVGPOOL, 0));
    CHECK(staged_op(&rn.p, GR_OP_SOFTMAX_CE, 0));
    CHECK(staged_op(&rs.p, GR_OP_RELU, 0) && staged_op(&rs.p, GR_OP_ADD, 0) && staged_op(&rs.p, GR_OP_BATCHNORM, 1));
    CHECK(rn.p.n_staged < rs.p.n_staged);

    /* gradients, the running statistics, the loss: bit for bit */
    CHECK(memcmp(rn.m.grads, rs.m.grads, (size_t)g->n_trainable * sizeof(float)) == 0);
    CHECK(memcmp(rn.m.params, rs.m.params, (size_t)g->n_params * sizeof(float)) == 0);
    const float *sn = gr_plan_ptr(&rn.p, g->loss_stats), *ss = gr_plan_ptr(&rs.p, g->loss_stats);
    CHECK(memcmp(sn, ss, 2 * sizeof *sn) == 0 && isfinite(sn[0]) && sn[0] > 0.0f);
    double gsum = 0.0;
    for (int64_t i = 0; i < g->n_trainable; i++) gsum += fabsf(rn.m.grads[i]);
    CHECK(gsum > 0.0); /* a pass that computed nothing would agree too */
    gr_backend *bn = rn.be, *bs = rs.be;
    run_free(&rn);
    run_free(&rs);
    gr_backend_free(bn);
    gr_backend_free(bs);
    free(w);
    free(x);
    model_free(&b);
}

/* ---- the bf16 convolution ---- */

static uint16_t *to_bf16(const float *x, int64_t n, float *rounded) {
    uint16_t *h = malloc((size_t)n * sizeof *h);
    for (int64_t i = 0; i < n; i++) {
        h[i] = gr_bf16_encode_hd(x[i]);
        rounded[i] = gr_bf16_decode_hd(h[i]);
    }
    return h;
}

static float *absf(const float *x, int64_t n) {
    float *a = malloc((size_t)n * sizeof *a);
    for (int64_t i = 0; i < n; i++) a[i] = fabsf(x[i]);
    return a;
}

static float *rnd(int64_t n, float scale) {
    float *a = malloc((size_t)n * sizeof *a);
    for (int64_t i = 0; i < n; i++) a[i] = scale * urand();
    return a;
}

/* out (bf16 or fp32 by h) within 2^-6 * bound + 1e-6 of ref; returns the worst |diff| / bound */
static double within(const char *what, const void *out, bool h, const float *ref, const float *bound, int64_t n) {
    int bad = 0;
    double worst = 0.0;
    for (int64_t i = 0; i < n; i++) {
        float v = h ? gr_bf16_decode_hd(((const uint16_t *)out)[i]) : ((const float *)out)[i];
        double d = fabs((double)v - ref[i]), lim = 0x1p-6 * bound[i] + 1e-6;
        if (bound[i] > 0 && d / bound[i] > worst) worst = d / bound[i];
        if (!(d <= lim) && bad++ < 3)
            fprintf(stderr, "  %s[%lld]: %g vs fp32 %g (bound %g)\n", what, (long long)i, (double)v, (double)ref[i],
                    lim);
    }
    CHECK_MSG(bad == 0, "%s: %d elements outside the bf16 bound", what, bad);
    return worst;
}

static void conv_case(gr_cpu *cpu, gr_conv_shape s, bool x_fp32, bool bias) {
    const int64_t nx = s.n * s.c * s.h * s.w, ny = s.n * s.f * s.ho * s.wo;
    const int64_t nw = s.f * (s.c / s.groups) * s.kh * s.kw;
    float *x = rnd(nx, 2.0f), *w = rnd(nw, 0.5f), *b = bias ? rnd(s.f, 1.0f) : NULL, *dy = rnd(ny, 1.0f);
    float *xr = malloc((size_t)nx * sizeof *xr), *dyr = malloc((size_t)ny * sizeof *dyr);
    uint16_t *xh = to_bf16(x, nx, xr), *dyh = to_bf16(dy, ny, dyr);
    if (x_fp32) memcpy(xr, x, (size_t)nx * sizeof *x); /* the input batch: read as fp32 */
    float *ax = absf(xr, nx), *aw = absf(w, nw), *ady = absf(dyr, ny), *ab = bias ? absf(b, s.f) : NULL;
    float *ref = malloc((size_t)(nx > ny ? nx : ny) * sizeof *ref), *bnd = malloc((size_t)(nx > ny ? nx : ny) * sizeof *bnd);
    uint16_t *outh = malloc((size_t)(nx > ny ? nx : ny) * sizeof *outh);
    gr_conv_store t = {x_fp32 ? GR_F32 : GR_BF16, GR_BF16, GR_NCHW, GR_NCHW};
    char what[96];
    snprintf(what, sizeof what, "%lldx%lld/%lld c%lld f%lld g%lld%s", (long long)s.kh, (long long)s.kw, (long long)s.sh,
             (long long)s.c, (long long)s.f, (long long)s.groups, x_fp32 ? " fp32-x" : "");

    gr_cpu_conv_onednn_fwd_as(cpu, &s, &t, x_fp32 ? (const void *)x : xh, w, b, outh);
    gr_cpu_conv_ref_fwd(cpu, &s, xr, w, b, ref);
    gr_cpu_conv_ref_fwd(cpu, &s, ax, aw, ab, bnd);
    double wf = within(what, outh, true, ref, bnd, ny);

    if (!x_fp32) { /* backward data: dx in bf16 */
        gr_cpu_conv_onednn_bwd_data_as(cpu, &s, &t, dyh, w, outh);
        gr_cpu_conv_ref_bwd_data(cpu, &s, dyr, w, ref);
        gr_cpu_conv_ref_bwd_data(cpu, &s, ady, aw, bnd);
        within(what, outh, true, ref, bnd, nx);
    }
    /* backward weights: fp32 dW (added to what is there) */
    float *dw = calloc((size_t)nw, sizeof *dw), *dwr = calloc((size_t)nw, sizeof *dwr), *dwb = calloc((size_t)nw, sizeof *dwb);
    float *db = bias ? calloc((size_t)s.f, sizeof *db) : NULL, *dbr = bias ? calloc((size_t)s.f, sizeof *dbr) : NULL;
    float *dbb = bias ? calloc((size_t)s.f, sizeof *dbb) : NULL;
    gr_cpu_conv_onednn_bwd_params_as(cpu, &s, &t, dyh, x_fp32 ? (const void *)x : xh, dw, db);
    gr_cpu_conv_ref_bwd_params(cpu, &s, dyr, xr, dwr, dbr);
    gr_cpu_conv_ref_bwd_params(cpu, &s, ady, ax, dwb, dbb);
    within(what, dw, false, dwr, dwb, nw);
    if (bias) within(what, db, false, dbr, dbb, s.f);
    /* it did compute in bf16: the weights' rounding shows somewhere */
    CHECK_MSG(wf > 0.0, "%s: forward identical to fp32", what);
    float *all[] = {x, w, b, dy, xr, dyr, ax, aw, ady, ab, ref, bnd, dw, dwr, dwb, db, dbr, dbb};
    for (size_t i = 0; i < GR_ARRAY_LEN(all); i++) free(all[i]);
    free(xh);
    free(dyh);
    free(outh);
}

static void test_conv(void) {
    gr_backend *be = bf16_backend(true);
    gr_cpu *cpu = gr_cpu_backend_state(be);
    /* n, c, h, w, f, ho, wo, kh, kw, sh, sw, ph, pw, groups */
    conv_case(cpu, (gr_conv_shape){2, 16, 10, 10, 32, 10, 10, 3, 3, 1, 1, 1, 1, 1}, false, false);
    conv_case(cpu, (gr_conv_shape){2, 32, 9, 9, 16, 5, 5, 1, 1, 2, 2, 0, 0, 1}, false, true);
    conv_case(cpu, (gr_conv_shape){2, 3, 20, 20, 16, 10, 10, 7, 7, 2, 2, 3, 3, 1}, true, false);
    conv_case(cpu, (gr_conv_shape){3, 32, 6, 6, 32, 6, 6, 3, 3, 1, 1, 1, 1, 2}, false, true);
    gr_backend_free(be);
}

/* ---- the conversion spans ---- */

/* kernels/cpu/half_io.c's spans (built for AVX-512/AVX2, fp16 on F16C where
 * the CPU has it) give the scalar conversions' patterns: every 16-bit
 * pattern decoded, and 2^20 float patterns (every 4096th, and NaNs, infs,
 * zeros, subnormals) encoded, at an odd length (the vector tails). */
static void test_spans(void) {
    enum { NH = 65536 + 3, NF = (1 << 20) + 5 };
    uint16_t *h = malloc(NH * sizeof *h), *e = malloc(NF * sizeof *e);
    float *f = malloc((size_t)(NF > NH ? NF : NH) * sizeof *f), *x = malloc(NF * sizeof *x);
    for (int i = 0; i < NH; i++) h[i] = (uint16_t)(i * 40503u);
    for (int i = 0; i < NF; i++) {
        uint32_t u = (uint32_t)i * 4096u + (uint32_t)(i % 4096);
        if (i % 97 == 0) u = 0x7F800000u | (uint32_t)i; /* NaNs with payloads, and inf */
        if (i % 89 == 0) u = (uint32_t)i & 0x807FFFFFu; /* fp32 subnormals and zeros */
        memcpy(&x[i], &u, sizeof u);
    }
    int bad = 0;
    gr_hio_decode_bf16(h, f, NH);
    for (int i = 0; i < NH; i++) bad += memcmp(&f[i], &(float){gr_bf16_decode_hd(h[i])}, 4) != 0;
    gr_hio_decode_fp16(h, f, NH);
    for (int i = 0; i < NH; i++) {
        float want = gr_fp16_decode_hd(h[i]);
        bad += memcmp(&f[i], &want, 4) != 0 && !(isnan(f[i]) && isnan(want));
    }
    CHECK_MSG(bad == 0, "decode spans: %d patterns differ from the scalar decoders", bad);
    bad = 0;
    gr_hio_encode_bf16(x, e, NF);
    for (int i = 0; i < NF; i++) bad += e[i] != gr_bf16_encode_hd(x[i]);
    gr_hio_encode_fp16(x, e, NF);
    for (int i = 0; i < NF; i++) bad += e[i] != gr_fp16_encode_hd(x[i]);
    CHECK_MSG(bad == 0, "encode spans: %d values differ from the scalar encoders", bad);
    free(h), free(e), free(f), free(x);
}

/* ---- the bf16 dense layer ---- */

/* y = x W^T + b (fp32 reference on the values bf16 holds), dx = dy W,
 * dW += dy^T x, db += sum dy: each within 2^-6 of the same product on
 * |values| (the bound of within()); x stored in fp32 (a first layer's
 * input batch) or bf16; dW starts nonzero (it is added to). */
static void dense_case(gr_backend *be, int64_t n, int64_t f, int64_t u, bool x_fp32) {
    gr_cpu *cpu = gr_cpu_backend_state(be);
    float *x = rnd(n * f, 2.0f), *w = rnd(u * f, 0.5f), *b = rnd(u, 1.0f), *dy = rnd(n * u, 1.0f);
    float *xr = malloc((size_t)(n * f) * sizeof *xr), *dyr = malloc((size_t)(n * u) * sizeof *dyr);
    uint16_t *xh = to_bf16(x, n * f, xr), *dyh = to_bf16(dy, n * u, dyr);
    if (x_fp32) memcpy(xr, x, (size_t)(n * f) * sizeof *x);
    float *ax = absf(xr, n * f), *aw = absf(w, u * f), *ady = absf(dyr, n * u), *ab = absf(b, u);
    const int64_t big = n * f > u * f ? n * f : u * f;
    float *ref = malloc((size_t)big * sizeof *ref), *bnd = malloc((size_t)big * sizeof *bnd);
    uint16_t *outh = malloc((size_t)big * sizeof *outh);
    const int64_t xs[2] = {n, f}, ws[2] = {u, f}, ys[2] = {n, u}, bs[1] = {u};
    kt k;
    /* forward */
    kt_setup(&k, be, GR_OP_DENSE, 3, 1, n, true);
    kt_tensor_of(&k.tin[0], x_fp32 ? GR_F32 : GR_BF16, true, 2, xs);
    kt_tensor_of(&k.tin[1], GR_F32, false, 2, ws);
    kt_tensor_of(&k.tin[2], GR_F32, false, 1, bs);
    kt_tensor_of(&k.tout[0], GR_BF16, true, 2, ys);
    k.node.nin = 3;
    k.a.ein[0] = x_fp32 ? GR_F32 : GR_BF16, k.a.eout[0] = GR_BF16;
    k.a.in[0] = x_fp32 ? (void *)x : xh, k.a.in[1] = w, k.a.in[2] = b, k.a.out[0] = outh;
    gr_cpu_dense(&k.a);
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < u; j++) ref[i * u + j] = b[j], bnd[i * u + j] = ab[j];
    gr_cpu_sgemm(cpu, false, true, n, u, f, 1.0f, xr, f, w, f, 1.0f, ref, u);
    gr_cpu_sgemm(cpu, false, true, n, u, f, 1.0f, ax, f, aw, f, 1.0f, bnd, u);
    within(x_fp32 ? "dense fp32-x" : "dense", outh, true, ref, bnd, n * u);
    /* backward data */
    if (!x_fp32) {
        kt_setup(&k, be, GR_OP_DENSE_BWD_DATA, 2, 1, n, true);
        kt_tensor_of(&k.tin[0], GR_BF16, true, 2, ys);
        kt_tensor_of(&k.tin[1], GR_F32, false, 2, ws);
        kt_tensor_of(&k.tout[0], GR_BF16, true, 2, xs);
        k.a.ein[0] = k.a.eout[0] = GR_BF16;
        k.a.in[0] = dyh, k.a.in[1] = w, k.a.out[0] = outh;
        gr_cpu_dense_bwd_data(&k.a);
        gr_cpu_sgemm(cpu, false, false, n, f, u, 1.0f, dyr, u, w, f, 0.0f, ref, f);
        gr_cpu_sgemm(cpu, false, false, n, f, u, 1.0f, ady, u, aw, f, 0.0f, bnd, f);
        within("dense backward data", outh, true, ref, bnd, n * f);
    }
    /* backward params, added to what is there */
    float *dw = malloc((size_t)(u * f) * sizeof *dw), *db = malloc((size_t)u * sizeof *db);
    float *dbr = malloc((size_t)u * sizeof *dbr), *dbb = malloc((size_t)u * sizeof *dbb);
    for (int64_t i = 0; i < u * f; i++) dw[i] = ref[i] = 0.25f, bnd[i] = 0.25f;
    for (int64_t j = 0; j < u; j++) db[j] = dbr[j] = dbb[j] = -0.5f;
    kt_setup(&k, be, GR_OP_DENSE_BWD_PARAMS, 2, 2, n, true);
    kt_tensor_of(&k.tin[0], GR_BF16, true, 2, ys);
    kt_tensor_of(&k.tin[1], x_fp32 ? GR_F32 : GR_BF16, true, 2, xs);
    kt_tensor_of(&k.tout[0], GR_F32, false, 2, ws);
    kt_tensor_of(&k.tout[1], GR_F32, false, 1, bs);
    k.a.ein[0] = GR_BF16, k.a.ein[1] = x_fp32 ? GR_F32 : GR_BF16;
    k.a.in[0] = dyh, k.a.in[1] = x_fp32 ? (void *)x : xh, k.a.out[0] = dw, k.a.out[1] = db;
    gr_cpu_dense_bwd_params(&k.a);
    gr_cpu_sgemm(cpu, true, false, u, f, n, 1.0f, dyr, u, xr, f, 1.0f, ref, f);
    gr_cpu_sgemm(cpu, true, false, u, f, n, 1.0f, ady, u, ax, f, 1.0f, bnd, f);
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < u; j++) dbr[j] += dyr[i * u + j], dbb[j] += ady[i * u + j];
    for (int64_t j = 0; j < u; j++) dbb[j] = fabsf(dbb[j]) + 1.0f;
    within("dense backward weights", dw, false, ref, bnd, u * f);
    within("dense backward bias", db, false, dbr, dbb, u);
    float *all[] = {x, w, b, dy, xr, dyr, ax, aw, ady, ab, ref, bnd, dw, db, dbr, dbb};
    for (size_t i = 0; i < GR_ARRAY_LEN(all); i++) free(all[i]);
    free(xh);
    free(dyh);
    free(outh);
}

static void test_dense(void) {
    gr_backend *be = bf16_backend(true);
    dense_case(be, 8, 40, 24, false);
    dense_case(be, 5, 33, 7, true);
    gr_backend_free(be);
}

/* ---- maxpool 2x2 stride 2 ---- */

static void maxpool_args(kt *k, gr_backend *be, bool bwd, bool h, void *x, void *y, int32_t *idx) {
    const int64_t xs[4] = {2, 3, 6, 8}, ys[4] = {2, 3, 3, 4};
    kt_setup(k, be, bwd ? GR_OP_MAXPOOL_BWD : GR_OP_MAXPOOL, bwd ? 2 : 1, bwd ? 1 : 2, 2, true);
    k->node.attrs.kernel[0] = k->node.attrs.kernel[1] = 2;
    k->node.attrs.stride[0] = k->node.attrs.stride[1] = 2;
    gr_elem e = h ? GR_BF16 : GR_F32;
    if (!bwd) {
        kt_tensor_of(&k->tin[0], e, true, 4, xs);
        kt_tensor_of(&k->tout[0], e, true, 4, ys);
        kt_tensor_of(&k->tout[1], GR_I32, true, 4, ys);
        k->a.in[0] = x, k->a.out[0] = y, k->a.out[1] = idx;
        k->a.ein[0] = k->a.eout[0] = e;
    } else { /* dy, idx -> dx */
        kt_tensor_of(&k->tin[0], e, true, 4, ys);
        kt_tensor_of(&k->tin[1], GR_I32, true, 4, ys);
        kt_tensor_of(&k->tout[0], e, true, 4, xs);
        k->a.in[0] = y, k->a.in[1] = idx, k->a.out[0] = x;
        k->a.ein[0] = k->a.eout[0] = e;
    }
}

static void test_maxpool_2x2(void) {
    enum { NX = 2 * 3 * 6 * 8, NY = 2 * 3 * 3 * 4 };
    static const float vals[6] = {-1.0f, 0.0f, 1.0f, 2.0f, NAN, -INFINITY};
    float x[NX], y[NY], dy[NY], ref[NY], dyr[NY], dxr[NX];
    uint16_t xh[NX], yh[NY], dyh[NY], dxh[NX];
    int32_t idx[NY], idxh[NY], want[NY];
    for (int i = 0; i < NX; i++) {
        rng = rng * 6364136223846793005ull + 1;
        x[i] = vals[(rng >> 33) % 6 == 4 && (rng >> 40) % 4 ? 0 : (rng >> 33) % 6]; /* a few NaNs, many ties */
        xh[i] = gr_bf16_encode_hd(x[i]);
    }
    /* the reference: scan order (kh, kw), a later value taken if greater or NaN */
    for (int p = 0; p < 6; p++)
        for (int oh = 0; oh < 3; oh++)
            for (int ow = 0; ow < 4; ow++) {
                int j = (p * 3 + oh) * 4 + ow, best = (2 * oh) * 8 + 2 * ow;
                for (int q = 1; q < 4; q++) {
                    int at = (2 * oh + q / 2) * 8 + 2 * ow + q % 2;
                    float v = x[p * 48 + at], m = x[p * 48 + best];
                    if (v > m || v != v) best = at;
                }
                want[j] = best;
                ref[j] = x[p * 48 + best];
            }
    gr_backend *be = bf16_backend(true);
    kt k;
    maxpool_args(&k, be, false, false, x, y, idx);
    gr_cpu_maxpool(&k.a);
    int bad = 0;
    for (int j = 0; j < NY; j++)
        bad += idx[j] != want[j] || !(y[j] == ref[j] || (isnan(y[j]) && isnan(ref[j])));
    CHECK_MSG(bad == 0, "maxpool 2x2 fp32: %d outputs differ from the scan-order reference", bad);
    maxpool_args(&k, be, false, true, xh, yh, idxh);
    gr_cpu_maxpool(&k.a);
    bad = 0;
    for (int j = 0; j < NY; j++) {
        float v = gr_bf16_decode_hd(yh[j]);
        bad += idxh[j] != want[j] || !(v == ref[j] || (isnan(v) && isnan(ref[j])));
    }
    CHECK_MSG(bad == 0, "maxpool 2x2 bf16: %d outputs differ", bad);
    /* backward: dx[idx] += dy, the bf16 one is the encoded fp32 one */
    for (int j = 0; j < NY; j++) {
        dyh[j] = gr_bf16_encode_hd(urand());
        dyr[j] = gr_bf16_decode_hd(dyh[j]);
        dy[j] = dyr[j];
    }
    maxpool_args(&k, be, true, false, dxr, dy, idx);
    gr_cpu_maxpool_bwd(&k.a);
    maxpool_args(&k, be, true, true, dxh, dyh, idx);
    gr_cpu_maxpool_bwd(&k.a);
    bad = 0;
    int nonzero = 0;
    for (int i = 0; i < NX; i++) {
        bad += dxh[i] != gr_bf16_encode_hd(dxr[i]);
        nonzero += dxr[i] != 0.0f;
    }
    CHECK_MSG(bad == 0 && nonzero > NY / 2, "maxpool 2x2 backward bf16: %d differ (%d nonzero)", bad, nonzero);
    gr_backend_free(be);
}

int main(void) {
    test_policy();
    test_staged_names();
    test_spans();
    test_maxpool_2x2();
    if (have_native_bf16()) {
        test_elementwise_bitwise();
        test_conv();
        test_dense();
    } else {
        gr_test_skip("this CPU has no AVX-512 BF16 or AMX: the native bf16 kernels were not tested");
    }
    return gr_test_report();
}
