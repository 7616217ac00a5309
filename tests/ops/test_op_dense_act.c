/* test_op_dense_act.c — the dense and activation ops (graph/op_dense.c,
 * graph/op_act.c: the GR_OPF_ACT rows of ops.def, each gradchecked):
 *   - finite-difference gradchecks through the real pipeline on the backend
 *     named on the command line (gradcheck.h: `cpu` or `cuda`);
 *   - the backward pass's structure: one ordinary node per gradient, and no
 *     input gradient where nothing needs it;
 *   - the host/device bodies (body_check.h), on the CPU against the CPU
 *     kernels: every GR_OPF_ACT row of ops.def forward and backward (max relative
 *     error); the bias add (exact) and bias gradient of [n][c][inner] that
 *     dense and conv share, against a double loop and against the db of
 *     kernels/cpu/dense.c and conv.c, one and several slices;
 *   - GR_ACT_DUMP=path (cpu): every GR_OPF_ACT row's CPU kernels, forward
 *     and backward, on one input, written there for
 *     tests/ops/act_parity_torch.py (PyTorch's torch.relu, sigmoid, tanh,
 *     F.gelu and F.gelu(approximate='tanh')).
 * The structure and body checks run with `cpu` only. Kinks are avoided by
 * construction: relu is fed inputs whose magnitude is well above h. */
#include "body_check.h"
#include "gradcheck.h"

/* ---- gradchecks ---- */

static void test_gradchecks(void) {
    static const gr_gc_case cases[] = {
        {"dense", "[{dense: {units: 5}}]", 1, {6}, 0.0, 0.0, NULL},
        {"dense (no bias)", "[{dense: {units: 5, bias: false}}]", 1, {6}, 0.0, 0.0, NULL},
        {"dense on the last axis of [n, 3, 4]", "[{dense: {units: 5}}, tanh, flatten, {dense: {units: 3}}]", 2, {3, 4},
         0.0, 0.0, NULL},
        {"dense on the last axis of [n, 2, 3, 4], no bias", "[{dense: {units: 2, bias: false}}, flatten, "
         "{dense: {units: 3}}]", 3, {2, 3, 4}, 0.0, 0.0, NULL},
    };
    for (size_t i = 0; i < GR_ARRAY_LEN(cases); i++) gr_gc_run(&cases[i]);
    /* every activation row of ops.def, inputs away from relu's kink */
    for (int op = 0; op < GR_OP_COUNT; op++) {
        if (!(gr_op_flags(op) & GR_OPF_ACT)) continue;
        char layers[96];
        snprintf(layers, sizeof layers, "[%s, {dense: {units: 3}}]", gr_op_name(op));
        const gr_gc_case c = {gr_op_name(op), layers, 1, {6}, 0.0, 0.05, NULL};
        gr_gc_run(&c);
    }
    /* a relu fused after a dense (graph/fuse.c: the dense relus its output in place), forward and backward,
     * on [n, F] and on the last axis of [n, 2, 5]; in the first the relu's backward is also folded into the
     * second dense's backward (its dx masked); these cases' pre-activations lie away from the kink */
    static const gr_gc_case fused[] = {
        {"dense + relu fused", "[{dense: {units: 5}}, relu, {dense: {units: 3}}]", 1, {6}, 0.0, 0.0, NULL},
        {"dense + relu fused on [n, 2, 5]", "[{dense: {units: 4}}, relu, flatten, {dense: {units: 3}}]", 2, {2, 5},
         0.0, 0.0, NULL},
    };
    gr_gc_fuse = true;
    for (size_t i = 0; i < GR_ARRAY_LEN(fused); i++) gr_gc_run(&fused[i]);
    gr_gc_fuse = false;
}

/* ---- autodiff structure ---- */

/* The backward pass must be a rewrite made of ordinary nodes, one per
 * gradient, and skip the input's gradient when nothing needs it. */
static void test_autodiff_structure(void) {
    gr_error err = {0};
    gr_cfg *layers = NULL;
    CHECK(gr_cfg_parse_text("[flatten, {dense: {units: 8}}, relu, {dense: {units: 3}}]", "t", 1, 1, &layers,
                            &err) == GR_OK);
    gr_job_spec spec;
    memset(&spec, 0, sizeof spec);
    spec.model.layers = layers;
    spec.train.micro_batch = 2;
    snprintf(spec.train.loss, sizeof spec.train.loss, "softmax_cross_entropy");
    int64_t shape[3] = {1, 2, 3};
    gr_graph g;
    CHECK(gr_graph_build(&spec, shape, 3, &g, &err) == GR_OK);
    gr_autodiff(&g, false);
    int counts[GR_OP_COUNT] = {0};
    for (int i = g.n_forward; i < g.n_nodes; i++) counts[g.nodes[i].op]++;
    CHECK(counts[GR_OP_SOFTMAX_CE_BWD] == 1);
    CHECK(counts[GR_OP_DENSE_BWD_PARAMS] == 2);
    CHECK(counts[GR_OP_DENSE_BWD_DATA] == 1); /* the first dense needs no input gradient */
    CHECK(counts[GR_OP_RELU_BWD] == 1);
    CHECK(counts[GR_OP_FLATTEN_BWD] == 0);
    CHECK(g.n_weights == 6 * 8 + 8 + 8 * 3 + 3);
    gr_graph_free(&g);
    gr_cfg_free(layers);
}

/* ---- activations ---- */

/* The CPU kernel of every row (each GR_OPF_ACT row is tested, with its bwd row's). */
static const gr_kernel_fn cpu_kernel[GR_OP_COUNT] = {
#define X(E, name, ...) [GR_OP_##E] = gr_cpu_##name,
#include "graph/ops.def"
#undef X
};

/* planned batch nb, run on n <= nb samples of shape s[0..ndim) */
static void test_act(int act, int64_t nb, int64_t n, int ndim, const int64_t *s) {
    int64_t shape[GR_MAX_DIMS] = {nb};
    int64_t per = 1;
    for (int d = 0; d < ndim; d++) shape[1 + d] = s[d], per *= s[d];
    const int64_t cnt = n * per;
    float *x = rand_floats(cnt, -8.0f, 8.0f), *dy = rand_floats(cnt, -2.0f, 2.0f);
    /* the edges: zero (relu's kink), saturation, tiny values */
    const float special[] = {0.0f, -0.0f, 1e-30f, -1e-30f, 20.0f, -20.0f, 90.0f, -90.0f};
    for (int64_t i = 0; i < 8 && i < cnt; i++) x[i * 7 % cnt] = special[i];
    float *y_cpu = rand_floats(cnt, 0, 1), *y_body = rand_floats(cnt, 0, 1);
    float *dx_cpu = rand_floats(cnt, 0, 1), *dx_body = rand_floats(cnt, 0, 1);

    kt k;
    kt_init(&k, GR_OP_RELU, 1, 1, n);
    kt_tensor(&k.tin[0], GR_F32, 1 + ndim, shape);
    kt_tensor(&k.tout[0], GR_F32, 1 + ndim, shape);
    k.a.in[0] = x;
    k.a.out[0] = y_cpu;
    cpu_kernel[act](&k.a);
    for (int64_t i = 0; i < cnt; i++) gr_body_act(act, GR_BODY_F32, x, y_body, i);
    int64_t at;
    double e = max_rel(y_body, y_cpu, cnt, 1e-30, &at);
    CHECK_MSG(e <= TOL, "%s forward, %lld elements: rel. error %.3g at %lld (x %.9g: body %.9g, cpu %.9g)",
              gr_op_name(act), (long long)cnt, e, (long long)at, at >= 0 ? x[at] : 0.0, at >= 0 ? y_body[at] : 0.0,
              at >= 0 ? y_cpu[at] : 0.0);

    /* backward from dy and the saved tensor: y, or x (GR_OPF_ACT_SAVES_X: gelu) */
    const float *saved = gr_op_flags(act) & GR_OPF_ACT_SAVES_X ? x : y_cpu;
    kt_init(&k, GR_OP_RELU_BWD, 2, 1, n);
    kt_tensor(&k.tin[0], GR_F32, 1 + ndim, shape);
    kt_tensor(&k.tin[1], GR_F32, 1 + ndim, shape);
    kt_tensor(&k.tout[0], GR_F32, 1 + ndim, shape);
    k.a.in[0] = dy;
    k.a.in[1] = (void *)saved;
    k.a.out[0] = dx_cpu;
    cpu_kernel[gr_op_bwd(act)](&k.a);
    for (int64_t i = 0; i < cnt; i++) gr_body_act_bwd(act, GR_BODY_F32, dy, saved, dx_body, i);
    e = max_rel(dx_body, dx_cpu, cnt, 1e-30, &at);
    CHECK_MSG(e <= TOL, "%s backward, %lld elements: rel. error %.3g at %lld (body %.9g, cpu %.9g)",
              gr_op_name(act), (long long)cnt, e, (long long)at, at >= 0 ? dx_body[at] : 0.0,
              at >= 0 ? dx_cpu[at] : 0.0);
    free(x); free(dy); free(y_cpu); free(y_body); free(dx_cpu); free(dx_body);
}

/* ---- the PyTorch parity dump (tests/ops/act_parity_torch.py) ---- */

/* Per GR_OPF_ACT row: char name[32] (NUL-padded), int64 count, then float32
 * x, dy, y = act(x) and dx (its backward from dy), count each: the CPU
 * kernels on [n, 8, 64] with x in [-6, 6) and a few fixed values. */
static void dump_parity(const char *path) {
    FILE *f = fopen(path, "wb");
    CHECK_MSG(f != NULL, "cannot write %s", path);
    if (!f) return;
    const int64_t n = 3, shape[3] = {n, 8, 64}, cnt = n * 8 * 64;
    const float fixed[] = {0.0f, -0.0f, 1e-6f, -1e-6f, 0.5f, -0.5f, 3.0f, -3.0f, 5.9f, -5.9f};
    for (int act = 0; act < GR_OP_COUNT; act++) {
        if (!(gr_op_flags(act) & GR_OPF_ACT)) continue;
        float *x = rand_floats(cnt, -6.0f, 6.0f), *dy = rand_floats(cnt, -2.0f, 2.0f);
        float *y = rand_floats(cnt, 0, 1), *dx = rand_floats(cnt, 0, 1);
        for (size_t i = 0; i < GR_ARRAY_LEN(fixed); i++) x[i * 37] = fixed[i];
        kt k;
        kt_init(&k, GR_OP_RELU, 1, 1, n);
        kt_tensor(&k.tin[0], GR_F32, 3, shape);
        kt_tensor(&k.tout[0], GR_F32, 3, shape);
        k.a.in[0] = x;
        k.a.out[0] = y;
        cpu_kernel[act](&k.a);
        kt_init(&k, GR_OP_RELU_BWD, 2, 1, n);
        for (int i = 0; i < 2; i++) kt_tensor(&k.tin[i], GR_F32, 3, shape);
        kt_tensor(&k.tout[0], GR_F32, 3, shape);
        k.a.in[0] = dy;
        k.a.in[1] = gr_op_flags(act) & GR_OPF_ACT_SAVES_X ? x : y;
        k.a.out[0] = dx;
        cpu_kernel[gr_op_bwd(act)](&k.a);
        char name[32] = {0};
        snprintf(name, sizeof name, "%s", gr_op_name(act));
        CHECK(fwrite(name, sizeof name, 1, f) == 1 && fwrite(&cnt, sizeof cnt, 1, f) == 1);
        const float *arrs[4] = {x, dy, y, dx};
        for (int i = 0; i < 4; i++) CHECK(fwrite(arrs[i], sizeof(float), (size_t)cnt, f) == (size_t)cnt);
        free(x); free(dy); free(y); free(dx);
    }
    CHECK(fclose(f) == 0);
}

/* ---- bias add and bias gradient of [n][c][inner] ---- */

static void test_bias(int64_t n, int64_t c, int64_t inner) {
    int64_t total = n * c * inner;
    gr_chan_geo g = gr_chan_geo_make(n, c, inner);
    char what[120], w2[180];
    snprintf(what, sizeof what, "bias [%lld][%lld][%lld] (%lld slices%s)", (long long)n, (long long)c,
             (long long)inner, (long long)g.slices, g.cols ? ", columns" : "");
    float *y = t_rand(total, -1.0f, 1.0f), *b = t_rand(c, -1.0f, 1.0f), *y2 = t_copy(y, total);
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < c; j++)
            for (int64_t k = 0; k < inner; k++) y[(i * c + j) * inner + k] += b[j];
    for (int64_t i = 0; i < total; i++) gr_body_bias_add(y2, GR_BODY_F32, b, i, gr_chan_of(i, inner, c));
    snprintf(w2, sizeof w2, "%s: add", what);
    CHECK_SAME_ARR(w2, y2, y, total);

    /* gradient: a double loop, and the kernel's stages (one slice finishes
     * directly, as the first stage does then) */
    float *dy = t_rand(total, -1.0f, 1.0f), *db = t_rand(c, -1.0f, 1.0f), *db2 = t_copy(db, c);
    float *db3 = t_copy(db, c);
    for (int64_t j = 0; j < c; j++) {
        double s = 0.0;
        for (int64_t i = 0; i < n; i++)
            for (int64_t k = 0; k < inner; k++) s += dy[(i * c + j) * inner + k];
        db[j] += (float)s;
    }
    double *s1 = gr_xcalloc((size_t)c, sizeof *s1), *s2 = gr_xcalloc((size_t)c, sizeof *s2);
    t_chan_sums(&g, 2, dy, NULL, NULL, s1, s2);
    for (int64_t j = 0; j < c; j++) gr_body_bias_grad_finish(j, s1[j], db2);
    snprintf(w2, sizeof w2, "%s: grad vs double loop", what);
    CHECK_CLOSE_ARR(w2, db2, db, c, 1e-6);

    /* the CPU backend's db: dense (inner 1, summed in float) or conv (a 1x1 conv) */
    float *xin = t_rand(n * 2 * inner, -1.0f, 1.0f), *dwt = t_alloc(c * 2);
    if (inner == 1) {
        t_args t;
        int64_t ws[2] = {c, 2}, xs[2] = {n, 2}, ys[2] = {n, c}, bs[1] = {c};
        t_args_init(&t, GR_OP_DENSE_BWD_PARAMS, 2, 2, n, true);
        t_tensor(&t.tin[0], GR_F32, true, 2, ys);
        t_tensor(&t.tin[1], GR_F32, true, 2, xs);
        t_tensor(&t.tout[0], GR_F32, false, 2, ws);
        t_tensor(&t.tout[1], GR_F32, false, 1, bs);
        t.a.in[0] = dy;
        t.a.in[1] = xin;
        t.a.out[0] = dwt;
        t.a.out[1] = db3;
        gr_cpu_dense_bwd_params(&t.a);
        snprintf(w2, sizeof w2, "%s: grad vs kernels/cpu/dense.c", what);
        CHECK_CLOSE_ARR(w2, db2, db3, c, 1e-5);
    } else {
        gr_conv_shape s = {.n = n, .c = 2, .h = 1, .w = inner, .f = c, .ho = 1, .wo = inner,
                           .kh = 1, .kw = 1, .sh = 1, .sw = 1, .ph = 0, .pw = 0, .groups = 1};
        gr_cpu_conv_ref_bwd_params(gr_cpu_backend_state(t_be), &s, dy, xin, dwt, db3);
        snprintf(w2, sizeof w2, "%s: grad vs kernels/cpu/conv.c", what);
        CHECK_CLOSE_ARR(w2, db2, db3, c, 1e-6);
    }
    free(y); free(b); free(y2); free(dy); free(db); free(db2); free(db3); free(s1); free(s2); free(xin); free(dwt);
}

int main(int argc, char **argv) {
    int rc = gr_gc_args(argc, argv);
    if (rc) return rc;
    const char *dump = getenv("GR_ACT_DUMP");
    if (dump && dump[0] && gr_gc_on_cpu()) {
        dump_parity(dump);
        return gr_test_report();
    }
    test_gradchecks();
    if (!gr_gc_on_cpu()) return gr_test_report();
    test_autodiff_structure();

    /* activations: [n, F] and [n, C, H, W], odd sizes, runs shorter than planned */
    int n_act = 0;
    for (int act = 0; act < GR_OP_COUNT; act++) {
        if (!(gr_op_flags(act) & GR_OPF_ACT)) continue;
        n_act++;
        test_act(act, 1, 1, 1, (int64_t[]){1});
        test_act(act, 5, 3, 1, (int64_t[]){1001});
        test_act(act, 4, 4, 3, (int64_t[]){7, 13, 11});
        test_act(act, 16, 9, 3, (int64_t[]){3, 33, 65});
    }
    CHECK_MSG(n_act >= 5, "ops.def has %d activation rows (relu, sigmoid, tanh, gelu, gelu_tanh at least)", n_act);

    /* bias: n, c, inner */
    test_bias(256, 4096, 1);   /* dense, several slices per column */
    test_bias(3, 10, 1);       /* one slice */
    test_bias(2, 70000, 1);    /* more channels than partials */
    test_bias(5, 6, 63);       /* conv, one slice */
    test_bias(4, 3, 12544);    /* conv, several slices */
    test_bias(7, 5, 49);
    return gr_test_report();
}
