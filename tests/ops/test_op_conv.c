/* test_op_conv.c — conv (graph/op_conv.c): finite-difference gradchecks
 * through the whole pipeline on the backend named on the command line
 * (gradcheck.h: `cpu` runs them on both CPU paths, im2col reference and
 * oneDNN; `cuda` on the CUDA backend), and with `cpu` only: the kernels of
 * both CPU paths against a direct 7-loop convolution on random odd shapes
 * with n below the planned batch (dumped for conv_parity_torch.py with
 * GR_CONV_DUMP), the oneDNN primitive cache under churn, the attribute
 * errors and the structure of a small CNN. */
#include <omp.h>

#include "gradcheck.h"
#include "kernels/cpu/cpu.h"
#include "kernels/cpu/cpu_kernels.h"

static const char *const gr_conv_paths[] = {"ref", "onednn"};

/* The CPU backend whose state (conv path, scratch, oneDNN primitives) the
 * kernels called directly here use. */
static gr_backend *gr_tc_be;

/* ---- gradchecks ---- */

static void test_gradchecks(void) {
    static const gr_gc_case cases[] = {
        {"conv 3x3", "[{conv: {filters: 3, kernel: 3}}, flatten, {dense: {units: 3}}]", 3, {2, 5, 5}, 0, 0, NULL},
        {"conv stride 2 padding 1", "[{conv: {filters: 3, kernel: 3, stride: 2, padding: 1}}, flatten, "
         "{dense: {units: 3}}]", 3, {2, 6, 5}, 0, 0, NULL},
        {"conv 1x1", "[{conv: {filters: 4, kernel: 1}}, flatten, {dense: {units: 3}}]", 3, {3, 3, 4}, 0, 0, NULL},
        {"conv 1x1 stride 2", "[{conv: {filters: 2, kernel: 1, stride: 2}}, flatten, {dense: {units: 3}}]", 3,
         {3, 5, 4}, 0, 0, NULL},
        {"conv non-square", "[{conv: {filters: 3, kernel: [3, 1], stride: [2, 1], padding: [1, 0]}}, flatten, "
         "{dense: {units: 3}}]", 3, {2, 6, 5}, 0, 0, NULL},
        {"conv non-square 2", "[{conv: {filters: 2, kernel: [2, 3], stride: [1, 2], padding: [0, 2]}}, flatten, "
         "{dense: {units: 3}}]", 3, {2, 4, 5}, 0, 0, NULL},
        {"conv groups 2", "[{conv: {filters: 4, kernel: 3, padding: 1, groups: 2}}, flatten, {dense: {units: 3}}]",
         3, {4, 4, 4}, 0, 0, NULL},
        {"conv depthwise", "[{conv: {filters: 6, kernel: 3, padding: 1, groups: 3}}, flatten, "
         "{dense: {units: 3}}]", 3, {3, 4, 5}, 0, 0, NULL},
        {"conv no bias", "[{conv: {filters: 3, kernel: 3, bias: false}}, flatten, {dense: {units: 3}}]", 3,
         {2, 4, 4}, 0, 0, NULL},
        {"conv -> conv", "[{conv: {filters: 4, kernel: 3, padding: 1}}, {conv: {filters: 3, kernel: 2, stride: 2}}, "
         "flatten, {dense: {units: 3}}]", 3, {2, 5, 5}, 0, 0, NULL},
    };
    if (!gr_gc_on_cpu()) {
        for (size_t i = 0; i < GR_ARRAY_LEN(cases); i++) gr_gc_run(&cases[i]);
        return;
    }
    for (size_t p = 0; p < GR_ARRAY_LEN(gr_conv_paths); p++) {
        gr_gc_conv_path = gr_conv_paths[p];
        printf("-- conv path %s\n", gr_conv_paths[p]);
        for (size_t i = 0; i < GR_ARRAY_LEN(cases); i++) gr_gc_run(&cases[i]);
    }
}

/* ---- kernels against a direct convolution ---- */

/* GR_CONV_DUMP=path: every kernel case is also written there for
 * tests/ops/conv_parity_torch.py, per case and path: int64 header
 * {path, n, c, h, w, f, kh, kw, sh, sw, ph, pw, groups, bias, ho, wo}, then
 * float32 x, w, b, dy (inputs) and y, dx, dW, db (outputs; dW and db started
 * from 0.5), each of its n-sample or parameter size. */
static FILE *gr_tc_dump;

static void gr_tc_dump_arr(const float *p, int64_t n) {
    if (gr_tc_dump) CHECK(fwrite(p, sizeof *p, (size_t)n, gr_tc_dump) == (size_t)n);
}

typedef struct gr_tc_shape { int64_t n, planned, c, h, w, f, kh, kw, sh, sw, ph, pw, groups; bool bias; } gr_tc_shape;

static float gr_tc_x(const float *x, const gr_tc_shape *t, int64_t i, int64_t c, int64_t y, int64_t xx) {
    if (y < 0 || y >= t->h || xx < 0 || xx >= t->w) return 0.0f;
    return x[((i * t->c + c) * t->h + y) * t->w + xx];
}

/* y, dx, dW, db of the direct definition, in double */
static void gr_tc_direct(const gr_tc_shape *t, int64_t ho, int64_t wo, const float *x, const float *w,
                         const float *b, const float *dy, double *y, double *dx, double *dw, double *db) {
    int64_t cg = t->c / t->groups, fg = t->f / t->groups;
    memset(dx, 0, (size_t)(t->n * t->c * t->h * t->w) * sizeof *dx);
    memset(dw, 0, (size_t)(t->f * cg * t->kh * t->kw) * sizeof *dw);
    memset(db, 0, (size_t)t->f * sizeof *db);
    for (int64_t i = 0; i < t->n; i++)
        for (int64_t f = 0; f < t->f; f++)
            for (int64_t oy = 0; oy < ho; oy++)
                for (int64_t ox = 0; ox < wo; ox++) {
                    int64_t o = ((i * t->f + f) * ho + oy) * wo + ox;
                    double acc = b ? b[f] : 0.0;
                    db[f] += dy[o];
                    for (int64_t c = 0; c < cg; c++)
                        for (int64_t ki = 0; ki < t->kh; ki++)
                            for (int64_t kj = 0; kj < t->kw; kj++) {
                                int64_t cin = f / fg * cg + c;
                                int64_t iy = oy * t->sh - t->ph + ki, ix = ox * t->sw - t->pw + kj;
                                int64_t wi = ((f * cg + c) * t->kh + ki) * t->kw + kj;
                                acc += (double)w[wi] * gr_tc_x(x, t, i, cin, iy, ix);
                                dw[wi] += (double)dy[o] * gr_tc_x(x, t, i, cin, iy, ix);
                                if (iy >= 0 && iy < t->h && ix >= 0 && ix < t->w)
                                    dx[((i * t->c + cin) * t->h + iy) * t->w + ix] += (double)dy[o] * w[wi];
                            }
                    y[o] = acc;
                }
}

static void gr_tc_fill(float *p, int64_t n, uint64_t key) {
    for (int64_t i = 0; i < n; i++) p[i] = 2.0f * gr_uniform(key, (uint64_t)i) - 1.0f;
}

/* max |a - b| / (1 + max |b|) */
static double gr_tc_err(const float *a, const double *b, int64_t n) {
    double d = 0.0, m = 0.0;
    for (int64_t i = 0; i < n; i++) {
        d = GR_MAX(d, fabs((double)a[i] - b[i]));
        m = GR_MAX(m, fabs(b[i]));
    }
    return d / (1.0 + m);
}

static void gr_tc_run(const gr_tc_shape *t, uint64_t seed) {
    int64_t cg = t->c / t->groups;
    int64_t ho = (t->h + 2 * t->ph - t->kh) / t->sh + 1, wo = (t->w + 2 * t->pw - t->kw) / t->sw + 1;
    gr_tensor tx = {.ndim = 4, .shape = {t->planned, t->c, t->h, t->w}, .batched = true};
    gr_tensor ty = {.ndim = 4, .shape = {t->planned, t->f, ho, wo}, .batched = true};
    gr_tensor tw = {.ndim = 4, .shape = {t->f, cg, t->kh, t->kw}};
    gr_tensor tb = {.ndim = 1, .shape = {t->f}};
    int64_t nx = t->planned * t->c * t->h * t->w, ny = t->planned * t->f * ho * wo, nw = t->f * cg * t->kh * t->kw;
    float *x = malloc((size_t)nx * sizeof *x), *w = malloc((size_t)nw * sizeof *w), *b = malloc((size_t)t->f * 4);
    float *dy = malloc((size_t)ny * sizeof *dy), *y = malloc((size_t)ny * sizeof *y);
    float *dx = malloc((size_t)nx * sizeof *dx), *dw = malloc((size_t)nw * sizeof *dw);
    float *db = malloc((size_t)t->f * sizeof *db);
    double *ry = malloc((size_t)ny * sizeof *ry), *rdx = malloc((size_t)nx * sizeof *rdx);
    double *rdw = malloc((size_t)nw * sizeof *rdw), *rdb = malloc((size_t)t->f * sizeof *rdb);
    gr_tc_fill(x, nx, seed);
    gr_tc_fill(w, nw, seed + 1);
    gr_tc_fill(b, t->f, seed + 2);
    gr_tc_fill(dy, ny, seed + 3);
    gr_tc_direct(t, ho, wo, x, w, t->bias ? b : NULL, dy, ry, rdx, rdw, rdb);
    /* ADD contract: dW and db start from 0.5 */
    for (int64_t i = 0; i < nw; i++) rdw[i] += 0.5;
    for (int64_t i = 0; i < t->f; i++) rdb[i] += 0.5;

    gr_attrs at = {.stride = {t->sh, t->sw}, .padding = {t->ph, t->pw}, .groups = t->groups};
    gr_node fwd = {.op = GR_OP_CONV, .nin = t->bias ? 3 : 2, .nout = 1, .attrs = at};
    gr_node bwd_data = {.op = GR_OP_CONV_BWD_DATA, .nin = 2, .nout = 1, .attrs = at};
    gr_node bwd_params = {.op = GR_OP_CONV_BWD_PARAMS, .nin = 2, .nout = t->bias ? 2 : 1, .attrs = at};
    char what[200];
    snprintf(what, sizeof what, "n %lld/%lld c %lld %lldx%lld f %lld k %lldx%lld s %lldx%lld p %lldx%lld g %lld%s",
             (long long)t->n, (long long)t->planned, (long long)t->c, (long long)t->h, (long long)t->w,
             (long long)t->f, (long long)t->kh, (long long)t->kw, (long long)t->sh, (long long)t->sw,
             (long long)t->ph, (long long)t->pw, (long long)t->groups, t->bias ? "" : " no bias");
    for (size_t p = 0; p < GR_ARRAY_LEN(gr_conv_paths); p++) {
        CHECK(gr_cpu_conv_set_path(gr_cpu_backend_state(gr_tc_be), gr_conv_paths[p]));
        /* sentinels past n must survive */
        for (int64_t i = 0; i < ny; i++) y[i] = 7.0f;
        for (int64_t i = 0; i < nx; i++) dx[i] = 7.0f;
        for (int64_t i = 0; i < nw; i++) dw[i] = 0.5f;
        for (int64_t i = 0; i < t->f; i++) db[i] = 0.5f;
        gr_kargs a = {.node = &fwd, .tin = {&tx, &tw, &tb}, .tout = {&ty}, .in = {x, w, b}, .out = {y}, .n = t->n,
                     .be = gr_tc_be};
        gr_cpu_conv(&a);
        a = (gr_kargs){.node = &bwd_data, .tin = {&ty, &tw}, .tout = {&tx}, .in = {dy, w}, .out = {dx}, .n = t->n,
                       .be = gr_tc_be};
        gr_cpu_conv_bwd_data(&a);
        a = (gr_kargs){.node = &bwd_params, .tin = {&ty, &tx}, .tout = {&tw, &tb}, .in = {dy, x}, .out = {dw, db},
                       .n = t->n, .be = gr_tc_be};
        gr_cpu_conv_bwd_params(&a);
        int64_t my = t->n * t->f * ho * wo, mx = t->n * t->c * t->h * t->w;
        double ey = gr_tc_err(y, ry, my), ex = gr_tc_err(dx, rdx, mx), ew = gr_tc_err(dw, rdw, nw);
        double eb = t->bias ? gr_tc_err(db, rdb, t->f) : 0.0;
        bool tail = true;
        for (int64_t i = my; i < ny; i++) tail &= y[i] == 7.0f;
        for (int64_t i = mx; i < nx; i++) tail &= dx[i] == 7.0f;
        if (!t->bias)
            for (int64_t i = 0; i < t->f; i++) tail &= db[i] == 0.5f;
        if (gr_tc_dump) {
            int64_t hdr[16] = {(int64_t)p, t->n, t->c, t->h, t->w, t->f, t->kh, t->kw, t->sh, t->sw,
                               t->ph, t->pw, t->groups, t->bias, ho, wo};
            CHECK(fwrite(hdr, sizeof hdr, 1, gr_tc_dump) == 1);
            gr_tc_dump_arr(x, mx); gr_tc_dump_arr(w, nw); gr_tc_dump_arr(b, t->f); gr_tc_dump_arr(dy, my);
            gr_tc_dump_arr(y, my); gr_tc_dump_arr(dx, mx); gr_tc_dump_arr(dw, nw); gr_tc_dump_arr(db, t->f);
        }
        const double tol = 2e-5;
        CHECK_MSG(ey < tol && ex < tol && ew < tol && eb < tol && tail,
                  "%s path %s: rel err y %.3g dx %.3g dW %.3g db %.3g, untouched tail %d", what, gr_conv_paths[p],
                  ey, ex, ew, eb, tail);
    }
    free(x); free(w); free(b); free(dy); free(y); free(dx); free(dw); free(db);
    free(ry); free(rdx); free(rdw); free(rdb);
}

static void test_kernels(void) {
    static const gr_tc_shape shapes[] = {
        /*  n  pl  c   h   w   f  kh kw sh sw ph pw  g  bias */
        {3, 3, 3, 7, 7, 4, 3, 3, 1, 1, 1, 1, 1, true},
        {2, 5, 5, 9, 11, 6, 3, 3, 2, 2, 1, 1, 1, true},
        {1, 4, 6, 8, 8, 6, 3, 3, 1, 1, 1, 1, 6, true},    /* depthwise */
        {3, 4, 4, 9, 7, 8, 3, 1, 2, 1, 1, 0, 2, false},
        {2, 2, 8, 5, 5, 16, 1, 1, 1, 1, 0, 0, 1, true},   /* 1x1 */
        {3, 7, 8, 13, 9, 4, 1, 1, 2, 2, 0, 0, 1, false},  /* 1x1 stride 2 */
        {2, 3, 3, 23, 19, 5, 7, 7, 2, 2, 3, 3, 1, true},  /* stem-like */
        {1, 2, 12, 6, 6, 9, 2, 3, 1, 2, 0, 2, 3, true},
        {5, 8, 32, 14, 14, 64, 3, 3, 1, 1, 1, 1, 1, true},
    };
    const char *dump = getenv("GR_CONV_DUMP");
    if (dump) {
        gr_tc_dump = fopen(dump, "wb");
        CHECK_MSG(gr_tc_dump != NULL, "GR_CONV_DUMP=%s: cannot write", dump);
    }
    for (size_t i = 0; i < GR_ARRAY_LEN(shapes); i++) gr_tc_run(&shapes[i], 100 + 10 * i);
    if (gr_tc_dump) CHECK(fclose(gr_tc_dump) == 0);
    gr_tc_dump = NULL;
}

/* More distinct shapes than the oneDNN path's primitive table holds: the
 * table drops its oldest entries and results stay right. */
static void test_cache_churn(void) {
    enum { MAXN = 1200 };
    static float x[MAXN * 2 * 3 * 3], y[MAXN * 3 * 3], r[MAXN * 3 * 3];
    float w[2] = {0.5f, -2.0f}, b[1] = {0.25f};
    for (size_t i = 0; i < GR_ARRAY_LEN(x); i++) x[i] = gr_uniform(5, i);
    int bad = 0;
    for (int64_t n = 1; n <= MAXN; n += 2) {
        gr_conv_shape s = {.n = n, .c = 2, .h = 3, .w = 3, .f = 1, .ho = 3, .wo = 3, .kh = 1, .kw = 1,
                           .sh = 1, .sw = 1, .groups = 1};
        gr_cpu_conv_onednn_fwd(gr_cpu_backend_state(gr_tc_be), &s, x, w, b, y);
        gr_cpu_conv_ref_fwd(gr_cpu_backend_state(gr_tc_be), &s, x, w, b, r);
        for (int64_t i = 0; i < n * 9; i++) bad += fabsf(y[i] - r[i]) > 1e-5f;
    }
    CHECK_MSG(bad == 0, "%d outputs off across %d shapes", bad, MAXN / 2);
}

/* ---- attribute and shape errors ---- */

static void gr_conv_expect_error(const char *layers, int ndim, int64_t s0, int64_t s1, int64_t s2,
                                 const char *want) {
    gr_error err = {0};
    gr_cfg *cfg = NULL;
    CHECK(gr_cfg_parse_text(layers, "job.yaml", 1, 1, &cfg, &err) == GR_OK);
    gr_job_spec spec;
    memset(&spec, 0, sizeof spec);
    snprintf(spec.file, sizeof spec.file, "job.yaml");
    spec.model.layers = cfg;
    spec.train.micro_batch = 2;
    snprintf(spec.train.loss, sizeof spec.train.loss, "softmax_cross_entropy");
    int64_t shape[3] = {s0, s1, s2};
    gr_graph g;
    gr_status st = gr_graph_build(&spec, shape, ndim, &g, &err);
    CHECK_MSG(st == GR_ERR_USAGE, "%s: expected a usage error", layers);
    if (st == GR_OK) gr_graph_free(&g);
    CHECK_STR_CONTAINS(err.msg, want);
    gr_cfg_free(cfg);
}

static void test_errors(void) {
    const char *tail = ", flatten, {dense: {units: 3}}]";
    char buf[256];
#define GR_CONV_ERR(attrs, want) \
    do { \
        snprintf(buf, sizeof buf, "[{conv: %s}%s", attrs, tail); \
        gr_conv_expect_error(buf, 3, 4, 6, 6, want); \
    } while (0)
    GR_CONV_ERR("{kernel: 3}", "model.layers[0].conv: filters: required attribute missing");
    GR_CONV_ERR("{filters: 4}", "kernel: required attribute missing");
    GR_CONV_ERR("{filters: 0, kernel: 3}", "model.layers[0].conv.filters");
    GR_CONV_ERR("{filters: 4, kernel: 3, stride: 0}", "model.layers[0].conv.stride");
    GR_CONV_ERR("{filters: 4, kernel: 3, padding: -1}", "model.layers[0].conv.padding");
    GR_CONV_ERR("{filters: 4, kernel: [3, 0]}", "model.layers[0].conv.kernel[1]");
    GR_CONV_ERR("{filters: 4, kernel: [3, 3, 3]}", "expected an integer or a [h, w] list");
    GR_CONV_ERR("{filters: 6, kernel: 3, groups: 4}", "filters 6 are not divisible by groups 4");
    GR_CONV_ERR("{filters: 6, kernel: 3, groups: 3}", "input channels 4 are not divisible by groups 3");
    GR_CONV_ERR("{filters: 4, kernel: 9}", "kernel 9x9 is larger than the padded input 6x6");
    GR_CONV_ERR("{filters: 4, kernel: 3, dilation: 2}",
                "model.layers[0].conv.dilation: unknown attribute (conv takes filters, kernel");
    GR_CONV_ERR("{filters: 4, kernel: 3, bias: maybe}", "model.layers[0].conv.bias");
    GR_CONV_ERR("3", "conv needs attributes");
#undef GR_CONV_ERR
    gr_conv_expect_error("[flatten, {conv: {filters: 4, kernel: 3}}, flatten, {dense: {units: 3}}]", 3, 4, 6, 6,
                         "conv needs [batch, C, H, W] input, got [n, 144]");
    gr_conv_expect_error("[{conv: {filters: 4, kernel: 3}}, flatten, {dense: {units: 3}}]", 1, 784, 0, 0,
                         "job.yaml:1:");
}

/* Shapes, parameter counts, flops and the backward nodes of a small CNN. */
static void test_structure(void) {
    gr_error err = {0};
    gr_cfg *layers = NULL;
    CHECK(gr_cfg_parse_text("[{conv: {filters: 8, kernel: 3, stride: 2, padding: 1}}, "
                            "{conv: {filters: 4, kernel: [3, 1], groups: 2, bias: false}}, flatten, "
                            "{dense: {units: 3}}]", "t", 1, 1, &layers, &err) == GR_OK);
    gr_job_spec spec;
    memset(&spec, 0, sizeof spec);
    spec.model.layers = layers;
    spec.train.micro_batch = 2;
    snprintf(spec.train.loss, sizeof spec.train.loss, "softmax_cross_entropy");
    int64_t shape[3] = {3, 9, 8};
    gr_graph g;
    CHECK(gr_graph_build(&spec, shape, 3, &g, &err) == GR_OK);
    const gr_tensor *y0 = &g.tensors[g.nodes[g.layers[0].node].out[0]];
    const gr_tensor *y1 = &g.tensors[g.nodes[g.layers[1].node].out[0]];
    CHECK(y0->ndim == 4 && y0->shape[0] == 2 && y0->shape[1] == 8 && y0->shape[2] == 5 && y0->shape[3] == 4);
    CHECK(y1->shape[1] == 4 && y1->shape[2] == 3 && y1->shape[3] == 4);
    CHECK(g.nodes[g.layers[0].node].flops == 2 * 8 * 3 * 9 * 5 * 4 + 8 * 5 * 4);
    CHECK(g.nodes[g.layers[1].node].flops == 2 * 4 * 4 * 3 * 3 * 4);
    CHECK(g.n_weights == (8 * 3 * 9 + 8) + (4 * 4 * 3) + (4 * 3 * 4 * 3 + 3));
    gr_autodiff(&g, false);
    int counts[GR_OP_COUNT] = {0};
    for (int i = g.n_forward; i < g.n_nodes; i++) counts[g.nodes[i].op]++;
    CHECK(counts[GR_OP_CONV_BWD_PARAMS] == 2);
    CHECK(counts[GR_OP_CONV_BWD_DATA] == 1); /* the first conv needs no input gradient */
    for (int i = g.n_forward; i < g.n_nodes; i++)
        if (g.nodes[i].op == GR_OP_CONV_BWD_PARAMS && g.nodes[i].layer == 1) {
            CHECK(g.nodes[i].nout == 1);
            CHECK(g.nodes[i].attrs.groups == 2);
        }
    gr_graph_free(&g);
    gr_cfg_free(layers);
}

int main(int argc, char **argv) {
    int rc = gr_gc_args(argc, argv);
    if (rc) return rc;
    if (gr_gc_on_cpu()) {
        gr_error err = {0};
        CHECK(gr_backend_create("cpu", omp_get_max_threads(), &gr_tc_be, &err) == GR_OK);
        test_errors();
        test_structure();
        test_kernels();
        test_cache_churn();
    }
    test_gradchecks();
    if (gr_tc_be) gr_backend_free(gr_tc_be);
    return gr_test_report();
}
