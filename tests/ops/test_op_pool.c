/* test_op_pool.c — maxpool, avgpool and global_avgpool (graph/op_pool.c):
 *   - finite-difference gradchecks through the real pipeline on the backend
 *     named on the command line (gradcheck.h: `cpu` or `cuda`), each
 *     followed by flatten + dense so the loss sees every output;
 *   - shapes and attribute/shape errors;
 *   - parity with PyTorch (bn_torch.py, run with /usr/bin/python3; without
 *     torch the test reports skipped, exit 77, after its other checks): maxpool (ties, argmax), avgpool
 *     (count_include_pad true and false, non-square, padding, wide rows),
 *     strides 1, 2 and 3, and global_avgpool forward and backward; kernels
 *     run one plan step at a time so the test controls dy (op_step.h);
 *   - the pooling bodies (body_check.h), on the CPU over the whole grid
 *     each kernel covers, against the CPU kernels: maxpool forward (values
 *     and argmax) and backward, bit for bit, with ties (the first maximum in
 *     scan order) and NaN, padding, strides unequal to the kernel, odd and
 *     non-square sizes; avgpool forward and backward, count_include_pad true
 *     and false, bit for bit (but for the CPU's reordering of rows wider than
 *     256); global_avgpool forward (the warp's lane partials and shuffle
 *     tree) and backward.
 * All but the gradchecks run with `cpu` only.
 *
 * maxpool has a kink wherever the top two values of a window are within h
 * (1e-2) of each other. The harness's inputs are a fixed function of the
 * shape, so the maxpool shapes below were chosen (by scanning the inputs)
 * such that every window's top two values differ by more than 0.015; change
 * a maxpool shape and that margin must be checked again. */
#include "body_check.h"
#include "gradcheck.h"
#include "op_step.h"

/* ---- gradchecks ---- */

static void test_gradchecks(void) {
    static const gr_gc_case cases[] = {
        {"maxpool 2x2", "[{maxpool: {kernel: 2}}, flatten, {dense: {units: 3}}]", 3, {2, 4, 4}, 0.0, 0.05, NULL},
        {"maxpool 3x3 s2 p1", "[{maxpool: {kernel: 3, stride: 2, padding: 1}}, flatten, {dense: {units: 3}}]",
         3, {2, 4, 5}, 0.0, 0.05, NULL},
        {"maxpool [2,3] s[1,2] p[1,1]",
         "[{maxpool: {kernel: [2, 3], stride: [1, 2], padding: [1, 1]}}, flatten, {dense: {units: 3}}]",
         3, {1, 4, 5}, 0.0, 0.05, NULL},
        {"avgpool 2x2", "[{avgpool: {kernel: 2}}, flatten, {dense: {units: 3}}]", 3, {2, 4, 4}, 0.0, 0.0, NULL},
        {"avgpool 3x3 s2 p1 incl pad",
         "[{avgpool: {kernel: 3, stride: 2, padding: 1}}, flatten, {dense: {units: 3}}]", 3, {2, 5, 5}, 0.0,
         0.0, NULL},
        {"avgpool 3x3 s2 p1 excl pad",
         "[{avgpool: {kernel: 3, stride: 2, padding: 1, count_include_pad: false}}, flatten, "
         "{dense: {units: 3}}]", 3, {2, 5, 5}, 0.0, 0.0, NULL},
        {"avgpool [3,2] s[2,1] p[1,0]",
         "[{avgpool: {kernel: [3, 2], stride: [2, 1], padding: [1, 0], count_include_pad: false}}, flatten, "
         "{dense: {units: 3}}]", 3, {1, 6, 4}, 0.0, 0.0, NULL},
        {"global_avgpool", "[global_avgpool, flatten, {dense: {units: 3}}]", 3, {3, 3, 4}, 0.0, 0.0, NULL},
    };
    for (size_t i = 0; i < GR_ARRAY_LEN(cases); i++) gr_gc_run(&cases[i]);
}

/* ---- shapes and errors ---- */

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
}

static void test_errors(void) {
    int64_t flat[1] = {784}, img[3] = {1, 4, 4};
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
}

/* ---- PyTorch parity ---- */

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
    if (!gr_refs_fetch("pool")) return;
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
    gr_refs_free();
}

/* ---- pooling ---- */

typedef struct t_pool {
    int64_t n, c, h, w, kh, kw, sh, sw, ph, pw;
} t_pool;

static void t_pool_attrs(t_args *t, const t_pool *q, bool include_pad) {
    t->node.attrs.kernel[0] = q->kh;
    t->node.attrs.kernel[1] = q->kw;
    t->node.attrs.stride[0] = q->sh;
    t->node.attrs.stride[1] = q->sw;
    t->node.attrs.padding[0] = q->ph;
    t->node.attrs.padding[1] = q->pw;
    t->node.attrs.count_include_pad = include_pad;
}

static gr_pool_geo t_pool_geo(const t_pool *q, bool include_pad) {
    gr_pool_geo g;
    g.planes = q->n * q->c;
    g.h = q->h;
    g.w = q->w;
    g.ho = (q->h + 2 * q->ph - q->kh) / q->sh + 1;
    g.wo = (q->w + 2 * q->pw - q->kw) / q->sw + 1;
    g.kh = q->kh;
    g.kw = q->kw;
    g.sh = q->sh;
    g.sw = q->sw;
    g.ph = q->ph;
    g.pw = q->pw;
    g.include_pad = include_pad;
    return g;
}

/* mode 0: uniform values; 1: 3 levels (many ties); 2: ties plus some NaN */
static void test_maxpool(const t_pool *q, int mode) {
    gr_pool_geo g = t_pool_geo(q, true);
    int64_t nin = g.planes * g.h * g.w, nout = g.planes * g.ho * g.wo;
    int64_t xs[4] = {q->n, q->c, q->h, q->w}, ys[4] = {q->n, q->c, g.ho, g.wo};
    float *x = t_rand(nin, -1.0f, 1.0f);
    if (mode >= 1)
        for (int64_t i = 0; i < nin; i++) x[i] = floorf(x[i] * 1.5f);
    if (mode == 2)
        for (int64_t i = 0; i < nin; i += 17) x[i] = NAN;
    char what[160];
    snprintf(what, sizeof what, "maxpool n%lld c%lld %lldx%lld k%lldx%lld s%lldx%lld p%lldx%lld mode %d",
             (long long)q->n, (long long)q->c, (long long)q->h, (long long)q->w, (long long)q->kh,
             (long long)q->kw, (long long)q->sh, (long long)q->sw, (long long)q->ph, (long long)q->pw, mode);

    /* CPU */
    float *y = t_alloc(nout);
    int32_t *idx = gr_xcalloc((size_t)nout, sizeof *idx);
    t_args t;
    t_args_init(&t, GR_OP_MAXPOOL, 1, 2, q->n, true);
    t_pool_attrs(&t, q, true);
    t_tensor(&t.tin[0], GR_F32, true, 4, xs);
    t_tensor(&t.tout[0], GR_F32, true, 4, ys);
    t_tensor(&t.tout[1], GR_I32, true, 4, ys);
    t.a.in[0] = x;
    t.a.out[0] = y;
    t.a.out[1] = idx;
    gr_cpu_maxpool(&t.a);

    /* the kernel's grid: one thread per output */
    float *y2 = t_alloc(nout);
    int32_t *idx2 = gr_xcalloc((size_t)nout, sizeof *idx2);
    for (int64_t p = 0; p < g.planes; p++)
        for (int64_t oh = 0; oh < g.ho; oh++)
            for (int64_t ow = 0; ow < g.wo; ow++) gr_body_maxpool(&g, x, y2, idx2, p, oh, ow);
    char w2[200];
    snprintf(w2, sizeof w2, "%s: y", what);
    CHECK_SAME_ARR(w2, y2, y, nout);
    snprintf(w2, sizeof w2, "%s: argmax", what);
    CHECK_SAME_ARR(w2, idx2, idx, nout);
    if (mode == 1) {
        /* the ties case must really have windows with a repeated maximum */
        int64_t tied = 0;
        for (int64_t o = 0; o < nout; o++) {
            int64_t p = o / (g.ho * g.wo), oh = o / g.wo % g.ho, ow = o % g.wo, hits = 0;
            for (int64_t ih = oh * g.sh - g.ph; ih < oh * g.sh - g.ph + g.kh; ih++)
                for (int64_t iw = ow * g.sw - g.pw; iw < ow * g.sw - g.pw + g.kw; iw++)
                    if (ih >= 0 && ih < g.h && iw >= 0 && iw < g.w && x[(p * g.h + ih) * g.w + iw] == y[o]) hits++;
            tied += hits > 1;
        }
        CHECK_MSG(tied > 0, "%s: no tied windows", what);
    }

    /* backward: CPU scatter vs the kernel's gather per input element */
    float *dy = t_rand(nout, -1.0f, 1.0f), *dx = t_alloc(nin), *dx2 = t_rand(nin, 5.0f, 6.0f);
    t_args_init(&t, GR_OP_MAXPOOL_BWD, 2, 1, q->n, true);
    t_pool_attrs(&t, q, true);
    t_tensor(&t.tin[0], GR_F32, true, 4, ys);
    t_tensor(&t.tin[1], GR_I32, true, 4, ys);
    t_tensor(&t.tout[0], GR_F32, true, 4, xs);
    t.a.in[0] = dy;
    t.a.in[1] = idx;
    t.a.out[0] = dx;
    gr_cpu_maxpool_bwd(&t.a);
    for (int64_t p = 0; p < g.planes; p++)
        for (int64_t ih = 0; ih < g.h; ih++)
            for (int64_t iw = 0; iw < g.w; iw++) gr_body_maxpool_bwd(&g, dy, idx, dx2, p, ih, iw);
    snprintf(w2, sizeof w2, "%s: dx", what);
    CHECK_SAME_ARR(w2, dx2, dx, nin);
    free(x); free(y); free(idx); free(y2); free(idx2); free(dy); free(dx); free(dx2);
}

static void test_avgpool(const t_pool *q, bool include_pad) {
    gr_pool_geo g = t_pool_geo(q, include_pad);
    int64_t nin = g.planes * g.h * g.w, nout = g.planes * g.ho * g.wo;
    int64_t xs[4] = {q->n, q->c, q->h, q->w}, ys[4] = {q->n, q->c, g.ho, g.wo};
    char what[160], w2[200];
    snprintf(what, sizeof what, "avgpool n%lld c%lld %lldx%lld k%lldx%lld s%lldx%lld p%lldx%lld include_pad %d",
             (long long)q->n, (long long)q->c, (long long)q->h, (long long)q->w, (long long)q->kh,
             (long long)q->kw, (long long)q->sh, (long long)q->sw, (long long)q->ph, (long long)q->pw,
             (int)include_pad);
    float *x = t_rand(nin, -1.0f, 1.0f), *y = t_alloc(nout), *y2 = t_alloc(nout);
    t_args t;
    t_args_init(&t, GR_OP_AVGPOOL, 1, 1, q->n, true);
    t_pool_attrs(&t, q, include_pad);
    t_tensor(&t.tin[0], GR_F32, true, 4, xs);
    t_tensor(&t.tout[0], GR_F32, true, 4, ys);
    t.a.in[0] = x;
    t.a.out[0] = y;
    gr_cpu_avgpool(&t.a);
    for (int64_t p = 0; p < g.planes; p++)
        for (int64_t oh = 0; oh < g.ho; oh++)
            for (int64_t ow = 0; ow < g.wo; ow++) gr_body_avgpool(&g, x, y2, p, oh, ow);
    /* the same additions in the same order: the same bits */
    snprintf(w2, sizeof w2, "%s: y", what);
    CHECK_SAME_ARR(w2, y2, y, nout);

    float *dy = t_rand(nout, -1.0f, 1.0f), *dx = t_alloc(nin), *dx2 = t_rand(nin, 5.0f, 6.0f);
    t_args_init(&t, GR_OP_AVGPOOL_BWD, 1, 1, q->n, true);
    t_pool_attrs(&t, q, include_pad);
    t_tensor(&t.tin[0], GR_F32, true, 4, ys);
    t_tensor(&t.tout[0], GR_F32, true, 4, xs);
    t.a.in[0] = dy;
    t.a.out[0] = dx;
    gr_cpu_avgpool_bwd(&t.a);
    for (int64_t p = 0; p < g.planes; p++)
        for (int64_t ih = 0; ih < g.h; ih++)
            for (int64_t iw = 0; iw < g.w; iw++) gr_body_avgpool_bwd(&g, dy, dx2, p, ih, iw);
    /* the same bits too, except where the CPU kernel splits rows of more
     * than 256 outputs into chunks, which reorders its additions */
    snprintf(w2, sizeof w2, "%s: dx", what);
    if (g.wo <= 256) CHECK_SAME_ARR(w2, dx2, dx, nin);
    else CHECK_CLOSE_ARR(w2, dx2, dx, nin, 1e-6);
    free(x); free(y); free(y2); free(dy); free(dx); free(dx2);
}

/* avgpool forward (x -> y) and backward (dy -> dx) with every tensor stored as e, x and dx in layout
 * lx, y and dy in ly */
static void run_avgpool(const t_pool *q, bool include_pad, gr_elem e, gr_layout lx, gr_layout ly, const void *x,
                        void *y, const void *dy, void *dx) {
    gr_pool_geo g = t_pool_geo(q, include_pad);
    int64_t xs[4] = {q->n, q->c, q->h, q->w}, ys[4] = {q->n, q->c, g.ho, g.wo};
    t_args t;
    for (int bwd = 0; bwd < 2; bwd++) {
        t_args_init(&t, bwd ? GR_OP_AVGPOOL_BWD : GR_OP_AVGPOOL, 1, 1, q->n, true);
        t_pool_attrs(&t, q, include_pad);
        t_tensor(&t.tin[0], e, true, 4, bwd ? ys : xs);
        t_tensor(&t.tout[0], e, true, 4, bwd ? xs : ys);
        t.tin[0].layout = bwd ? ly : lx;
        t.tout[0].layout = bwd ? lx : ly;
        t.a.ein[0] = t.a.eout[0] = e;
        t.a.in[0] = (void *)(bwd ? dy : x);
        t.a.out[0] = bwd ? dx : y;
        if (bwd) gr_cpu_avgpool_bwd(&t.a);
        else gr_cpu_avgpool(&t.a);
    }
}

/* [n, c, s] -> [n, s, c] of 4-byte values */
static void t_to_rows(const float *x, float *y, int64_t n, int64_t c, int64_t s) {
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < c; j++)
            for (int64_t p = 0; p < s; p++) y[(i * s + p) * c + j] = x[(i * c + j) * s + p];
}

/* avgpool and its backward on channels-last (fp32), in mixed layouts (channels-last in,
 * channels-first out, and the reverse) and on bf16 storage (every layout) against the NCHW fp32
 * kernel, bit for bit: a channels-last tensor holds its results transposed; the bf16 ones are its
 * results on the decoded inputs, encoded (the staged path's bits) */
static void test_avgpool_layouts(const t_pool *q, bool include_pad) {
    gr_pool_geo g = t_pool_geo(q, include_pad);
    const int64_t nin = g.planes * g.h * g.w, nout = g.planes * g.ho * g.wo, s_in = g.h * g.w, s_out = g.ho * g.wo;
    float *x = t_rand(nin, -3.0f, 3.0f), *dy = t_rand(nout, -3.0f, 3.0f), *y = t_alloc(nout), *dx = t_alloc(nin);
    float *xt = t_alloc(nin), *dyt = t_alloc(nout), *yt = t_alloc(nout), *dxt = t_alloc(nin);
    float *y2 = t_alloc(nout), *dx2 = t_alloc(nin);
    uint16_t *xh = gr_xcalloc((size_t)nin, 2), *dyh = gr_xcalloc((size_t)nout, 2), *yh = gr_xcalloc((size_t)nout, 2),
             *dxh = gr_xcalloc((size_t)nin, 2);
    char what[200];
    snprintf(what, sizeof what, "avgpool n%lld c%lld %lldx%lld k%lldx%lld s%lldx%lld p%lldx%lld include_pad %d",
             (long long)q->n, (long long)q->c, (long long)q->h, (long long)q->w, (long long)q->kh, (long long)q->kw,
             (long long)q->sh, (long long)q->sw, (long long)q->ph, (long long)q->pw, (int)include_pad);
    int bad[3] = {0, 0, 0};
    for (int h = 0; h < 2; h++) {
        if (h) { /* the inputs rounded to bf16, the reference on their decoded values */
            for (int64_t i = 0; i < nin; i++) xh[i] = gr_bf16_encode_hd(x[i]), x[i] = gr_bf16_decode_hd(xh[i]);
            for (int64_t i = 0; i < nout; i++) dyh[i] = gr_bf16_encode_hd(dy[i]), dy[i] = gr_bf16_decode_hd(dyh[i]);
        }
        run_avgpool(q, include_pad, GR_F32, GR_NCHW, GR_NCHW, x, y, dy, dx);
        t_to_rows(x, xt, q->n, q->c, s_in), t_to_rows(dy, dyt, q->n, q->c, s_out);
        t_to_rows(y, yt, q->n, q->c, s_out), t_to_rows(dx, dxt, q->n, q->c, s_in);
        /* l: x and dx channels-last (bit 0), y and dy channels-last (bit 1) */
        for (int l = 0; l < 4; l++) {
            const bool rx = l & 1, ry = l & 2;
            const gr_layout lx = rx ? GR_NHWC : GR_NCHW, ly = ry ? GR_NHWC : GR_NCHW;
            const float *ix = rx ? xt : x, *idy = ry ? dyt : dy, *wy = ry ? yt : y, *wdx = rx ? dxt : dx;
            if (!h) {
                if (!l) continue; /* the reference itself */
                run_avgpool(q, include_pad, GR_F32, lx, ly, ix, y2, idy, dx2);
                bad[0] += memcmp(y2, wy, (size_t)nout * 4) != 0 || memcmp(dx2, wdx, (size_t)nin * 4) != 0;
                continue;
            }
            for (int64_t i = 0; i < nin; i++) xh[i] = gr_bf16_encode_hd(ix[i]);
            for (int64_t i = 0; i < nout; i++) dyh[i] = gr_bf16_encode_hd(idy[i]);
            run_avgpool(q, include_pad, GR_BF16, lx, ly, xh, yh, dyh, dxh);
            int *b = &bad[l == 0 ? 1 : 2];
            for (int64_t i = 0; i < nout; i++) *b += yh[i] != gr_bf16_encode_hd(wy[i]);
            for (int64_t i = 0; i < nin; i++) *b += dxh[i] != gr_bf16_encode_hd(wdx[i]);
        }
    }
    CHECK_MSG(bad[0] == 0, "%s: channels-last or mixed layouts in fp32 differ from NCHW", what);
    CHECK_MSG(bad[1] == 0 && bad[2] == 0,
              "%s: bf16 NCHW %d and other layouts %d values differ from the encoded fp32", what, bad[1], bad[2]);
    free(x); free(dy); free(y); free(dx); free(xt); free(dyt); free(yt); free(dxt); free(y2); free(dx2);
    free(xh); free(dyh); free(yh); free(dxh);
}

static void test_global_avgpool(int64_t n, int64_t c, int64_t h, int64_t w) {
    int64_t planes = n * c, hw = h * w, xs[4] = {n, c, h, w}, ys[4] = {n, c, 1, 1};
    char what[120], w2[160];
    snprintf(what, sizeof what, "global_avgpool [%lld, %lld, %lld, %lld]", (long long)n, (long long)c,
             (long long)h, (long long)w);
    float *x = t_rand(planes * hw, -1.0f, 3.0f), *y = t_alloc(planes), *y2 = t_alloc(planes);
    t_args t;
    t_args_init(&t, GR_OP_GLOBAL_AVGPOOL, 1, 1, n, true);
    t_tensor(&t.tin[0], GR_F32, true, 4, xs);
    t_tensor(&t.tout[0], GR_F32, true, 4, ys);
    t.a.in[0] = x;
    t.a.out[0] = y;
    gr_cpu_global_avgpool(&t.a);
    /* one warp per plane: 32 lane partials, then the kernel's shuffle-down
     * tree (lane l adds lane l + off's value while l + off < 32) */
    for (int64_t p = 0; p < planes; p++) {
        float v[32];
        for (int l = 0; l < 32; l++) v[l] = gr_body_gap_part(x, hw, p, l, 32);
        for (int off = 16; off > 0; off >>= 1)
            for (int l = 0; l + off < 32; l++) v[l] += v[l + off];
        gr_body_gap_finish(y2, hw, p, v[0]);
    }
    snprintf(w2, sizeof w2, "%s: y", what);
    CHECK_CLOSE_ARR(w2, y2, y, planes, 5e-6); /* both sum in float: errors grow with hw */

    float *dy = t_rand(planes, -1.0f, 1.0f), *dx = t_alloc(planes * hw), *dx2 = t_alloc(planes * hw);
    t_args_init(&t, GR_OP_GLOBAL_AVGPOOL_BWD, 1, 1, n, true);
    t_tensor(&t.tin[0], GR_F32, true, 4, ys);
    t_tensor(&t.tout[0], GR_F32, true, 4, xs);
    t.a.in[0] = dy;
    t.a.out[0] = dx;
    gr_cpu_global_avgpool_bwd(&t.a);
    for (int64_t p = 0; p < planes; p++)
        for (int64_t j = 0; j < hw; j++) gr_body_gap_bwd(dy, dx2, hw, p, j);
    snprintf(w2, sizeof w2, "%s: dx", what);
    CHECK_SAME_ARR(w2, dx2, dx, planes * hw);
    free(x); free(y); free(y2); free(dy); free(dx); free(dx2);
}

int main(int argc, char **argv) {
    int rc = gr_gc_args(argc, argv);
    if (rc) return rc;
    test_gradchecks();
    if (!gr_gc_on_cpu()) return gr_test_report();
    test_shapes();
    test_errors();
    test_torch_parity();

    /* pooling bodies: n, c, h, w, kh, kw, sh, sw, ph, pw */
    const t_pool pools[] = {
        {2, 3, 13, 11, 3, 3, 2, 2, 1, 1},   /* ResNet's stem pool on odd sizes */
        {2, 2, 9, 7, 2, 2, 2, 2, 0, 0},     /* kernel = stride, a ragged edge */
        {1, 3, 10, 12, 3, 2, 1, 3, 1, 1},   /* stride 1 and 3, overlapping rows */
        {2, 1, 17, 16, 5, 5, 3, 3, 2, 2},   /* stride < kernel, wide padding */
        {1, 2, 8, 8, 3, 3, 1, 1, 1, 1},     /* every input under up to 9 windows */
        {1, 1, 4, 5, 4, 5, 1, 1, 0, 0},     /* one window per plane */
        {1, 2, 5, 600, 3, 3, 1, 2, 1, 1},   /* rows of more than 256 outputs */
        {2, 3, 28, 28, 2, 2, 2, 2, 0, 0},   /* the CNN's 2x2: 14 outputs a row (one vector, masked) */
        {1, 2, 5, 37, 2, 2, 2, 2, 0, 0},    /* 18 outputs a row (a whole vector, then 2) and a ragged edge */
    };
    for (size_t i = 0; i < sizeof pools / sizeof pools[0]; i++) {
        for (int mode = 0; mode < 3; mode++) test_maxpool(&pools[i], mode);
        test_avgpool(&pools[i], true);
        test_avgpool(&pools[i], false);
        test_avgpool_layouts(&pools[i], true);
        test_avgpool_layouts(&pools[i], false);
    }

    test_global_avgpool(2, 5, 7, 7);
    test_global_avgpool(3, 4, 1, 1);
    test_global_avgpool(2, 3, 37, 29);
    test_global_avgpool(1, 2, 112, 112);
    return gr_test_report();
}
