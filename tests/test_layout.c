/* test_layout.c — channels-last activations (graph/layout.c and the CPU's
 * NHWC kernels):
 *   - the pass: with a table where maxpool takes NCHW only, a residual
 *     model stores NHWC the conv, batchnorm and relu activations no maxpool
 *     or flatten touches, each with its gradient, and keeps NCHW the input
 *     batch and the groups maxpool and flatten read; with the CPU's bf16
 *     table everything from the first conv to global_avgpool is NHWC; with
 *     an empty table (fp32, or staged bf16) nothing changes; 4-D activations
 *     no conv or global_avgpool touches, relu on the input batch, and a
 *     broadcast add stay NCHW;
 *   - batchnorm (training forward with running stats, eval forward,
 *     backward) and global_avgpool (forward, backward) on NHWC against the
 *     NCHW kernels on the same values (1e-5 relative: only the summation
 *     order differs), and their bf16 storage giving the encoded fp32 result
 *     bit for bit;
 *   - maxpool (3x3 stride 2 padded, with ties and NaN) and its backward on
 *     NHWC against NCHW, bit for bit, in fp32 and bf16; and 2x2 (tiling: the
 *     backward writes dx once, a row and a column past the last window) with the
 *     input, output and indices in every mix of layouts (GR_CAP_NHWC_ANY);
 *   - the bf16 convolutions (and fp32 ones, whose reference-only nhwc shapes
 *     run blocked, counted and said) on NHWC against NCHW, some as matmuls
 *     (1x1 ones on few pixels, a strided one too; larger kernels' backward
 *     weights on im2col rows);
 *   - a training pass of the residual model in bf16 on the native backend
 *     with the NHWC plan against the NCHW plan: the same loss and gradients
 *     to bf16's precision (the convolutions and batchnorm sum in other
 *     orders), and far from a pass on transposed data would be.
 * The model pass needs native bf16 (AVX-512 BF16 or AMX); elsewhere it
 * reports skipped. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/gr_half.h"
#include "kernels/cpu/cpu.h"
#include "kernels/cpu/cpu_kernels.h"
#include "gr_test.h"
#include "kargs_fixture.h"
#include "precision_fixture.h"

static const char *RES = "[{conv: {filters: 16, kernel: 3, padding: 1}}, batchnorm, relu, {maxpool: {kernel: 2}}, "
                         "{conv: {filters: 16, kernel: 3, padding: 1}}, batchnorm, relu, "
                         "{conv: {filters: 16, kernel: 1}}, batchnorm, {add: {}, input: [maxpool0, batchnorm2]}, relu, "
                         "global_avgpool, flatten, {dense: {units: 10}}]";

static gr_layout layout_of(const gr_graph *g, const char *name) { return g->tensors[find(g, name)].layout; }

static void test_pass(void) {
    int64_t in[3] = {3, 12, 12};
    model m;
    model_build(&m, RES, in, 3, 4, GR_PREC_BF16);
    gr_graph *g = &m.g;
    gr_layout_cap none[GR_OP_COUNT] = {GR_LAYOUT_CAP_NONE};
    gr_graph_set_layout(g, none);
    for (int t = 0; t < g->n_tensors; t++) CHECK(g->tensors[t].layout == GR_NCHW);

    /* a table where maxpool takes NCHW only */
    gr_layout_cap caps[GR_OP_COUNT] = {GR_LAYOUT_CAP_NONE};
    static const gr_op any[] = {GR_OP_CONV, GR_OP_CONV_BWD_DATA, GR_OP_CONV_BWD_PARAMS, GR_OP_GLOBAL_AVGPOOL,
                                GR_OP_GLOBAL_AVGPOOL_BWD};
    static const gr_op same[] = {GR_OP_RELU, GR_OP_RELU_BWD, GR_OP_ADD, GR_OP_ADD_BWD, GR_OP_BATCHNORM,
                                 GR_OP_BATCHNORM_BWD};
    for (size_t i = 0; i < GR_ARRAY_LEN(any); i++) caps[any[i]] = GR_LAYOUT_CAP_ANY;
    for (size_t i = 0; i < GR_ARRAY_LEN(same); i++) caps[same[i]] = GR_LAYOUT_CAP_SAME;
    gr_graph_set_layout(g, caps);
    CHECK(g->tensors[g->input].layout == GR_NCHW);
    /* conv0 -> batchnorm0 -> relu0 -> maxpool0: one group, and maxpool takes NCHW only */
    CHECK(layout_of(g, "conv0") == GR_NCHW && layout_of(g, "relu0") == GR_NCHW && layout_of(g, "maxpool0") == GR_NCHW);
    /* maxpool0 is also an input of add0, so the add's group is NCHW too */
    CHECK(layout_of(g, "add0") == GR_NCHW && layout_of(g, "batchnorm2") == GR_NCHW);
    /* conv1 -> batchnorm1 -> relu1 (read by conv2): channels-last, and so are their gradients */
    CHECK(layout_of(g, "conv1") == GR_NHWC && layout_of(g, "batchnorm1") == GR_NHWC && layout_of(g, "relu1") == GR_NHWC);
    CHECK(layout_of(g, "conv1.grad") == GR_NHWC && layout_of(g, "relu1.grad") == GR_NHWC);
    CHECK(layout_of(g, "flatten0") == GR_NCHW && layout_of(g, "global_avgpool0") == GR_NCHW);
    for (int t = 0; t < g->n_tensors; t++) {
        const gr_tensor *x = &g->tensors[t];
        if (x->grad >= 0) CHECK_MSG(x->layout == g->tensors[x->grad].layout, "%s and its gradient", x->name);
        if (x->ndim != 4 || x->kind != GR_TK_ACT) CHECK(x->layout == GR_NCHW);
    }

    /* the CPU's table with native bf16: everything from the first conv to global_avgpool */
    gr_backend *be = bf16_backend(true);
    gr_backend_layout_caps(be, caps);
    gr_backend_free(be);
    if (caps[GR_OP_CONV] == GR_LAYOUT_CAP_NONE) {
        gr_test_skip("the CPU backend plans NCHW only here (no native bf16)");
        model_free(&m);
        return;
    }
    CHECK(caps[GR_OP_CONV] == GR_LAYOUT_CAP_ANY && caps[GR_OP_BATCHNORM] == GR_LAYOUT_CAP_SAME &&
          caps[GR_OP_MAXPOOL] == GR_LAYOUT_CAP_ANY && caps[GR_OP_FLATTEN] == GR_LAYOUT_CAP_NONE);
    gr_graph_set_layout(g, caps);
    CHECK(g->tensors[g->input].layout == GR_NCHW);
    static const char *nhwc[] = {"conv0", "relu0", "maxpool0", "maxpool0.argmax", "add0", "batchnorm2", "relu2",
                                 "conv1", "relu1.grad", "maxpool0.grad"};
    for (size_t i = 0; i < GR_ARRAY_LEN(nhwc); i++) CHECK_MSG(layout_of(g, nhwc[i]) == GR_NHWC, "%s", nhwc[i]);
    CHECK(layout_of(g, "flatten0") == GR_NCHW && layout_of(g, "global_avgpool0") == GR_NCHW);
    model_free(&m);
}

/* A layout table: conv and global_avgpool take either, the elementwise and
 * pooling ops NHWC when their tensors share it (the CPU's with native bf16). */
static void cpu_like_caps(gr_layout_cap caps[GR_OP_COUNT]) {
    for (int i = 0; i < GR_OP_COUNT; i++) caps[i] = GR_LAYOUT_CAP_NONE;
    static const gr_op any[] = {GR_OP_CONV, GR_OP_CONV_BWD_DATA, GR_OP_CONV_BWD_PARAMS, GR_OP_GLOBAL_AVGPOOL,
                                GR_OP_GLOBAL_AVGPOOL_BWD};
    static const gr_op same[] = {GR_OP_RELU, GR_OP_RELU_BWD, GR_OP_ADD, GR_OP_ADD_BWD, GR_OP_BATCHNORM,
                                 GR_OP_BATCHNORM_BWD, GR_OP_MAXPOOL, GR_OP_MAXPOOL_BWD};
    for (size_t i = 0; i < GR_ARRAY_LEN(any); i++) caps[any[i]] = GR_LAYOUT_CAP_ANY;
    for (size_t i = 0; i < GR_ARRAY_LEN(same); i++) caps[same[i]] = GR_LAYOUT_CAP_SAME;
}

/* Which 4-D activations are images is the ops' to say, not the rank's. */
static void test_pass_ops_decide(void) {
    gr_layout_cap caps[GR_OP_COUNT];
    cpu_like_caps(caps);
    /* 4-D activations no image op touches (a reshape's view, relu and add on it) stay NCHW */
    int64_t v[1] = {48};
    model m;
    model_build(&m, "[{reshape: {shape: [3, 4, 4]}}, relu, {add: {}, input: [relu0, reshape0]}, flatten, "
                    "{dense: {units: 5}}]", v, 1, 4, GR_PREC_BF16);
    gr_graph_set_layout(&m.g, caps);
    CHECK(m.g.tensors[find(&m.g, "relu0")].ndim == 4);
    CHECK(layout_of(&m.g, "relu0") == GR_NCHW && layout_of(&m.g, "add0") == GR_NCHW);
    model_free(&m);
    /* relu on the input batch (which stays NCHW) keeps its output NCHW for the conv after it */
    int64_t img[3] = {3, 8, 8};
    model_build(&m, "[relu, {conv: {filters: 4, kernel: 3, padding: 1}}, relu, global_avgpool, flatten, "
                    "{dense: {units: 5}}]", img, 3, 4, GR_PREC_BF16);
    gr_graph_set_layout(&m.g, caps);
    CHECK(layout_of(&m.g, "relu0") == GR_NCHW);
    CHECK(layout_of(&m.g, "conv0") == GR_NHWC && layout_of(&m.g, "relu1") == GR_NHWC);
    model_free(&m);
    /* a broadcast add ([n, 4, 8, 8] + [n, 4, 1, 1]) reads NCHW: its kernel indexes by the shapes */
    model_build(&m, "[{conv: {filters: 4, kernel: 3, padding: 1}}, global_avgpool, "
                    "{add: {}, input: [conv0, global_avgpool0]}, relu, flatten, {dense: {units: 5}}]",
                img, 3, 4, GR_PREC_BF16);
    gr_graph_set_layout(&m.g, caps);
    CHECK(m.g.tensors[find(&m.g, "global_avgpool0")].ndim == 4);
    CHECK(layout_of(&m.g, "conv0") == GR_NCHW && layout_of(&m.g, "add0") == GR_NCHW);
    CHECK(layout_of(&m.g, "global_avgpool0") == GR_NCHW && layout_of(&m.g, "relu0") == GR_NCHW);
    model_free(&m);
}

/* ---- kernels ---- */

/* [n, c, hw] <-> [n, hw, c] */
static void to_nhwc(const float *x, float *y, int64_t n, int64_t c, int64_t hw) {
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < c; j++)
            for (int64_t p = 0; p < hw; p++) y[(i * hw + p) * c + j] = x[(i * c + j) * hw + p];
}

static int close_all(const float *a, const float *b, int64_t len, double rtol) {
    int bad = 0;
    for (int64_t i = 0; i < len; i++)
        bad += !(fabs((double)a[i] - b[i]) <= rtol * (fabs((double)b[i]) + 1.0));
    return bad;
}

enum { N = 3, C = 5, H = 4, W = 6, HW = H * W, NX = N * C * HW };

/* batchnorm args: x, w, b, rmean, rvar -> y, saved (fwd); dy, x, w, saved -> dw, db, dx (bwd) */
static void bn_setup(kt *k, gr_backend *be, bool bwd, bool training, gr_layout l, bool h) {
    const int64_t xs[4] = {N, C, H, W}, cs[1] = {C}, ss[1] = {2 * C};
    kt_setup(k, be, bwd ? GR_OP_BATCHNORM_BWD : GR_OP_BATCHNORM, bwd ? 4 : 5, bwd ? 3 : 2, N, training);
    k->node.attrs.momentum = 0.1;
    k->node.attrs.eps = 1e-5;
    gr_elem e = h ? GR_BF16 : GR_F32;
    gr_tensor *x = bwd ? &k->tin[1] : &k->tin[0];
    kt_tensor_of(x, e, true, 4, xs);
    x->layout = l;
    if (bwd) {
        kt_tensor_of(&k->tin[0], e, true, 4, xs), k->tin[0].layout = l;
        kt_tensor_of(&k->tin[2], GR_F32, false, 1, cs);
        kt_tensor_of(&k->tin[3], GR_F32, false, 1, ss);
        kt_tensor_of(&k->tout[0], GR_F32, false, 1, cs);
        kt_tensor_of(&k->tout[1], GR_F32, false, 1, cs);
        kt_tensor_of(&k->tout[2], e, true, 4, xs), k->tout[2].layout = l;
        k->a.ein[0] = k->a.ein[1] = k->a.eout[2] = e;
    } else {
        for (int i = 1; i < 5; i++) kt_tensor_of(&k->tin[i], GR_F32, false, 1, cs);
        kt_tensor_of(&k->tout[0], e, true, 4, xs), k->tout[0].layout = l;
        kt_tensor_of(&k->tout[1], GR_F32, false, 1, ss);
        k->a.ein[0] = k->a.eout[0] = e;
    }
}

static void test_bn(void) {
    gr_backend *be = bf16_backend(true);
    float x[NX], xt[NX], dy[NX], dyt[NX], w[C], b[C];
    for (int i = 0; i < NX; i++) x[i] = 3.0f * urand() + 2.0f, dy[i] = urand();
    for (int j = 0; j < C; j++) w[j] = 1.0f + 0.3f * urand(), b[j] = urand();
    to_nhwc(x, xt, N, C, HW);
    to_nhwc(dy, dyt, N, C, HW);
    for (int training = 1; training >= 0; training--) {
        float rm[2][C], rv[2][C], y[2][NX], yt[NX], sv[2][2 * C];
        for (int l = 0; l < 2; l++) {
            for (int j = 0; j < C; j++) rm[l][j] = 0.1f * (float)j, rv[l][j] = 1.0f + 0.2f * (float)j;
            kt k;
            bn_setup(&k, be, false, training, l ? GR_NHWC : GR_NCHW, false);
            void *in[5] = {l ? xt : x, w, b, rm[l], rv[l]};
            memcpy(k.a.in, in, sizeof in);
            k.a.out[0] = y[l], k.a.out[1] = sv[l];
            gr_cpu_batchnorm(&k.a);
        }
        to_nhwc(y[0], yt, N, C, HW);
        CHECK_MSG(close_all(y[1], yt, NX, 1e-5) == 0, "batchnorm NHWC forward (training %d)", training);
        CHECK(close_all(sv[1], sv[0], 2 * C, 1e-6) == 0 && close_all(rm[1], rm[0], C, 1e-6) == 0 &&
              close_all(rv[1], rv[0], C, 1e-6) == 0);
        /* backward: NHWC against NCHW */
        float dw[2][C] = {{0}}, db[2][C] = {{0}}, dx[2][NX], dxt[NX];
        for (int l = 0; l < 2; l++) {
            kt k;
            bn_setup(&k, be, true, training, l ? GR_NHWC : GR_NCHW, false);
            void *in[4] = {l ? dyt : dy, l ? xt : x, w, sv[0]};
            memcpy(k.a.in, in, sizeof in);
            k.a.out[0] = dw[l], k.a.out[1] = db[l], k.a.out[2] = dx[l];
            gr_cpu_batchnorm_bwd(&k.a);
        }
        to_nhwc(dx[0], dxt, N, C, HW);
        CHECK_MSG(close_all(dx[1], dxt, NX, 1e-5) == 0 && close_all(dw[1], dw[0], C, 1e-5) == 0 &&
                      close_all(db[1], db[0], C, 1e-5) == 0,
                  "batchnorm NHWC backward (training %d)", training);
    }
    /* bf16 storage: the encoded fp32 results, bit for bit */
    uint16_t xh[NX], yh[NX], dyh[NX], dxh[NX];
    float xr[NX], dyr[NX], y32[NX], dx32[NX], rm[C] = {0}, rv[C], sv[2 * C], dw[C] = {0}, db[C] = {0};
    for (int i = 0; i < NX; i++) {
        xh[i] = gr_bf16_encode_hd(xt[i]), xr[i] = gr_bf16_decode_hd(xh[i]);
        dyh[i] = gr_bf16_encode_hd(dyt[i]), dyr[i] = gr_bf16_decode_hd(dyh[i]);
    }
    for (int h = 0; h < 2; h++) {
        kt k;
        for (int j = 0; j < C; j++) rv[j] = 1.0f;
        bn_setup(&k, be, false, true, GR_NHWC, h);
        void *in[5] = {h ? (void *)xh : xr, w, b, rm, rv};
        memcpy(k.a.in, in, sizeof in);
        k.a.out[0] = h ? (void *)yh : y32, k.a.out[1] = sv;
        gr_cpu_batchnorm(&k.a);
        bn_setup(&k, be, true, true, GR_NHWC, h);
        void *bin[4] = {h ? (void *)dyh : dyr, h ? (void *)xh : xr, w, sv};
        memcpy(k.a.in, bin, sizeof bin);
        k.a.out[0] = dw, k.a.out[1] = db, k.a.out[2] = h ? (void *)dxh : dx32;
        gr_cpu_batchnorm_bwd(&k.a);
    }
    int bad = 0;
    for (int i = 0; i < NX; i++) bad += yh[i] != gr_bf16_encode_hd(y32[i]) || dxh[i] != gr_bf16_encode_hd(dx32[i]);
    CHECK_MSG(bad == 0, "batchnorm NHWC bf16: %d values differ from the encoded fp32 ones", bad);
    gr_backend_free(be);
}

/* batchnorm on bf16 storage with channels enough for the vector blocks (32, 48: the sums of 16 channels
 * at a time in registers), with and without a fused relu: the fp32 kernel's results on the decoded
 * values, encoded, bit for bit (statistics, y, dx, dweight and dbias too) */
static void test_bn_wide(void) {
    enum { BN = 2, BH = 5, BW = 7 };
    gr_backend *be = bf16_backend(true);
    int bad = 0, runs = 0;
    for (int64_t c = 32; c <= 48; c += 16)
        for (int relu = 0; relu < 2; relu++) {
            const int64_t nx = BN * c * BH * BW, xs[4] = {BN, c, BH, BW}, cs[1] = {c}, ss[1] = {2 * c};
            uint16_t *xh = malloc((size_t)nx * 2), *dyh = malloc((size_t)nx * 2), *yh = malloc((size_t)nx * 2);
            uint16_t *dxh = malloc((size_t)nx * 2);
            float *xr = malloc((size_t)nx * 4), *dyr = malloc((size_t)nx * 4), *y32 = malloc((size_t)nx * 4);
            float *dx32 = malloc((size_t)nx * 4), *w = malloc((size_t)c * 4), *b = malloc((size_t)c * 4);
            float *st = calloc((size_t)(14 * c), 4); /* per side: rm, rv, saved (2c), dw, db */
            for (int64_t i = 0; i < nx; i++) {
                xh[i] = gr_bf16_encode_hd(3.0f * urand() + 2.0f), xr[i] = gr_bf16_decode_hd(xh[i]);
                dyh[i] = gr_bf16_encode_hd(urand()), dyr[i] = gr_bf16_decode_hd(dyh[i]);
            }
            for (int64_t j = 0; j < c; j++) w[j] = 1.0f + 0.3f * urand(), b[j] = urand();
            for (int h = 0; h < 2; h++) {
                const gr_elem e = h ? GR_BF16 : GR_F32;
                float *rm = st + h * 7 * c, *rv = rm + c, *sv = rv + c, *dw = sv + 2 * c, *db = dw + c;
                for (int64_t j = 0; j < c; j++) rv[j] = 1.0f;
                kt k;
                kt_setup(&k, be, GR_OP_BATCHNORM, 5, 2, BN, true);
                k.node.attrs.momentum = 0.1, k.node.attrs.eps = 1e-5, k.node.attrs.relu = relu;
                kt_tensor_of(&k.tin[0], e, true, 4, xs), k.tin[0].layout = GR_NHWC;
                for (int i = 1; i < 5; i++) kt_tensor_of(&k.tin[i], GR_F32, false, 1, cs);
                kt_tensor_of(&k.tout[0], e, true, 4, xs), k.tout[0].layout = GR_NHWC;
                kt_tensor_of(&k.tout[1], GR_F32, false, 1, ss);
                k.a.ein[0] = k.a.eout[0] = e;
                void *in[5] = {h ? (void *)xh : xr, w, b, rm, rv};
                memcpy(k.a.in, in, sizeof in);
                k.a.out[0] = h ? (void *)yh : y32, k.a.out[1] = sv;
                gr_cpu_batchnorm(&k.a);
                gr_attrs at = k.node.attrs;
                kt_setup(&k, be, GR_OP_BATCHNORM_BWD, relu ? 5 : 4, 3, BN, true);
                k.node.attrs = at;
                kt_tensor_of(&k.tin[0], e, true, 4, xs), k.tin[0].layout = GR_NHWC;
                kt_tensor_of(&k.tin[1], e, true, 4, xs), k.tin[1].layout = GR_NHWC;
                kt_tensor_of(&k.tin[2], GR_F32, false, 1, cs), kt_tensor_of(&k.tin[3], GR_F32, false, 1, ss);
                kt_tensor_of(&k.tin[4], e, true, 4, xs), k.tin[4].layout = GR_NHWC;
                kt_tensor_of(&k.tout[0], GR_F32, false, 1, cs), kt_tensor_of(&k.tout[1], GR_F32, false, 1, cs);
                kt_tensor_of(&k.tout[2], e, true, 4, xs), k.tout[2].layout = GR_NHWC;
                k.a.ein[0] = k.a.ein[1] = k.a.ein[4] = k.a.eout[2] = e;
                void *bin[5] = {h ? (void *)dyh : dyr, h ? (void *)xh : xr, w, sv, h ? (void *)yh : y32};
                memcpy(k.a.in, bin, sizeof bin);
                k.a.out[0] = dw, k.a.out[1] = db, k.a.out[2] = h ? (void *)dxh : dx32;
                gr_cpu_batchnorm_bwd(&k.a);
            }
            for (int64_t i = 0; i < nx; i++)
                bad += yh[i] != gr_bf16_encode_hd(y32[i]) || dxh[i] != gr_bf16_encode_hd(dx32[i]);
            bad += memcmp(st, st + 7 * c, (size_t)(7 * c) * 4) != 0;
            runs++;
            free(xh), free(dyh), free(yh), free(dxh), free(xr), free(dyr), free(y32), free(dx32), free(w), free(b);
            free(st);
        }
    CHECK_MSG(bad == 0 && runs == 4, "batchnorm on bf16, 32 and 48 channels: %d values differ from the encoded "
              "fp32 ones over %d runs", bad, runs);
    gr_backend_free(be);
}

static void test_gap(void) {
    gr_backend *be = bf16_backend(true);
    const int64_t xs[4] = {N, C, H, W}, ys[4] = {N, C, 1, 1};
    float x[NX], xt[NX], y[2][N * C], dy[N * C], dx[2][NX], dxt[NX];
    for (int i = 0; i < NX; i++) x[i] = urand();
    for (int i = 0; i < N * C; i++) dy[i] = urand();
    to_nhwc(x, xt, N, C, HW);
    for (int l = 0; l < 2; l++) {
        kt k;
        kt_setup(&k, be, GR_OP_GLOBAL_AVGPOOL, 1, 1, N, true);
        kt_tensor_of(&k.tin[0], GR_F32, true, 4, xs), k.tin[0].layout = l ? GR_NHWC : GR_NCHW;
        kt_tensor_of(&k.tout[0], GR_F32, true, 4, ys);
        k.a.in[0] = l ? xt : x, k.a.out[0] = y[l];
        gr_cpu_global_avgpool(&k.a);
        kt_setup(&k, be, GR_OP_GLOBAL_AVGPOOL_BWD, 1, 1, N, true);
        kt_tensor_of(&k.tin[0], GR_F32, true, 4, ys);
        kt_tensor_of(&k.tout[0], GR_F32, true, 4, xs), k.tout[0].layout = l ? GR_NHWC : GR_NCHW;
        k.a.in[0] = dy, k.a.out[0] = dx[l];
        gr_cpu_global_avgpool_bwd(&k.a);
    }
    to_nhwc(dx[0], dxt, N, C, HW);
    CHECK(close_all(y[1], y[0], N * C, 1e-5) == 0);
    CHECK(memcmp(dx[1], dxt, sizeof dxt) == 0);
    gr_backend_free(be);
}

/* maxpool (3x3 stride 2 padding 1, ties and NaN) and its backward on NHWC
 * against NCHW: the same maxima, indices and gradients, bit for bit, in
 * fp32 and on bf16 storage */
static void test_maxpool(void) {
    enum { MH = 7, MW = 6, MHO = 4, MWO = 3, MX = N * C * MH * MW, MY = N * C * MHO * MWO };
    const int64_t xs[4] = {N, C, MH, MW}, ys[4] = {N, C, MHO, MWO};
    static const float vals[5] = {-1.0f, 0.0f, 1.0f, 2.0f, NAN};
    float x[MX], xt[MX], y[2][MY], yt[MY], dy[MY], dyt[MY], dx[2][MX], dxt[MX];
    int32_t idx[2][MY], idxt[MY];
    gr_backend *be = bf16_backend(true);
    for (int i = 0; i < MX; i++) x[i] = vals[(i * 7 + i / 5) % 5 == 4 && i % 3 ? 1 : (i * 7 + i / 5) % 5];
    for (int i = 0; i < MY; i++) dy[i] = urand();
    to_nhwc(x, xt, N, C, MH * MW);
    to_nhwc(dy, dyt, N, C, MHO * MWO);
    for (int h = 0; h < 2; h++) {
        gr_elem e = h ? GR_BF16 : GR_F32;
        for (int l = 0; l < 2; l++) {
            kt k;
            uint16_t xb[MX], yb[MY], dyb[MY], dxb[MX];
            const float *xs_ = l ? xt : x, *dys = l ? dyt : dy;
            for (int i = 0; i < MX; i++) xb[i] = gr_bf16_encode_hd(xs_[i]);
            for (int i = 0; i < MY; i++) dyb[i] = gr_bf16_encode_hd(dys[i]);
            kt_setup(&k, be, GR_OP_MAXPOOL, 1, 2, N, true);
            k.node.attrs.kernel[0] = k.node.attrs.kernel[1] = 3;
            k.node.attrs.stride[0] = k.node.attrs.stride[1] = 2;
            k.node.attrs.padding[0] = k.node.attrs.padding[1] = 1;
            kt_tensor_of(&k.tin[0], e, true, 4, xs), k.tin[0].layout = l ? GR_NHWC : GR_NCHW;
            kt_tensor_of(&k.tout[0], e, true, 4, ys), k.tout[0].layout = k.tin[0].layout;
            kt_tensor_of(&k.tout[1], GR_I32, true, 4, ys), k.tout[1].layout = k.tin[0].layout;
            k.a.ein[0] = k.a.eout[0] = e;
            k.a.in[0] = h ? (void *)xb : (void *)xs_, k.a.out[0] = h ? (void *)yb : y[l], k.a.out[1] = idx[l];
            gr_cpu_maxpool(&k.a);
            gr_attrs at = k.node.attrs;
            kt_setup(&k, be, GR_OP_MAXPOOL_BWD, 2, 1, N, true);
            k.node.attrs = at;
            kt_tensor_of(&k.tin[0], e, true, 4, ys), k.tin[0].layout = l ? GR_NHWC : GR_NCHW;
            kt_tensor_of(&k.tin[1], GR_I32, true, 4, ys), k.tin[1].layout = k.tin[0].layout;
            kt_tensor_of(&k.tout[0], e, true, 4, xs), k.tout[0].layout = k.tin[0].layout;
            k.a.ein[0] = k.a.eout[0] = e;
            k.a.in[0] = h ? (void *)dyb : (void *)dys, k.a.in[1] = idx[l], k.a.out[0] = h ? (void *)dxb : dx[l];
            gr_cpu_maxpool_bwd(&k.a);
            if (h) {
                for (int i = 0; i < MY; i++) y[l][i] = gr_bf16_decode_hd(yb[i]);
                for (int i = 0; i < MX; i++) dx[l][i] = gr_bf16_decode_hd(dxb[i]);
            }
        }
        to_nhwc(y[0], yt, N, C, MHO * MWO);
        to_nhwc(dx[0], dxt, N, C, MH * MW);
        for (int64_t i = 0; i < N; i++)
            for (int64_t j = 0; j < C; j++)
                for (int64_t p = 0; p < MHO * MWO; p++)
                    idxt[(i * MHO * MWO + p) * C + j] = idx[0][(i * C + j) * MHO * MWO + p];
        int bad = 0, nan = 0;
        for (int i = 0; i < MY; i++) {
            bad += idx[1][i] != idxt[i] || !(y[1][i] == yt[i] || (isnan(y[1][i]) && isnan(yt[i])));
            nan += isnan(yt[i]) != 0;
        }
        for (int i = 0; i < MX; i++) bad += memcmp(&dx[1][i], &dxt[i], sizeof(float)) != 0;
        CHECK_MSG(bad == 0 && nan > 0, "maxpool NHWC vs NCHW (%s): %d differ, %d NaN maxima", gr_elem_name(e), bad, nan);
    }
    gr_backend_free(be);
}

/* maxpool with its input, output and indices in mixed layouts (the input channels-last, the
 * output channels-first before a flatten; every other mix too) against all-NCHW, bit for bit,
 * forward and backward, fp32 and bf16: a 2x2 stride-2 window (the CNN's) with ties and NaN */
static void test_maxpool_mixed(void) {
    /* 7 x 5 pooled 2 x 2: a row and a column past the last window */
    enum { MH = 7, MW = 5, MHO = 3, MWO = 2, MX = N * C * MH * MW, MY = N * C * MHO * MWO };
    const int64_t xs[4] = {N, C, MH, MW}, ys[4] = {N, C, MHO, MWO};
    static const float vals[5] = {-1.0f, 0.0f, 1.0f, 2.0f, NAN};
    float x[MX], dy[MY], y[MY], dx[MX], y0[MY], dx0[MX];
    int32_t idx[MY], idx0[MY];
    gr_backend *be = bf16_backend(true);
    for (int i = 0; i < MX; i++) x[i] = vals[(i * 7 + i / 5) % 5 == 4 && i % 3 ? 1 : (i * 7 + i / 5) % 5];
    for (int i = 0; i < MY; i++) dy[i] = urand();
    int bad = 0, runs = 0;
    for (int h = 0; h < 2; h++)
        for (int combo = 0; combo < 8; combo++) { /* bits: x, y, indices channels-last; 0 the reference */
            const gr_elem e = h ? GR_BF16 : GR_F32;
            const gr_layout lx = combo & 1 ? GR_NHWC : GR_NCHW, ly = combo & 2 ? GR_NHWC : GR_NCHW;
            const gr_layout li = combo & 4 ? GR_NHWC : GR_NCHW;
            float xin[MX], dyin[MY], yo[MY], dxo[MX];
            int32_t io[MY];
            uint16_t xb[MX], yb[MY], dyb[MY], dxb[MX];
            if (lx == GR_NHWC) to_nhwc(x, xin, N, C, MH * MW); else memcpy(xin, x, sizeof xin);
            if (ly == GR_NHWC) to_nhwc(dy, dyin, N, C, MHO * MWO); else memcpy(dyin, dy, sizeof dyin);
            for (int i = 0; i < MX; i++) xb[i] = gr_bf16_encode_hd(xin[i]);
            for (int i = 0; i < MY; i++) dyb[i] = gr_bf16_encode_hd(dyin[i]);
            kt k;
            kt_setup(&k, be, GR_OP_MAXPOOL, 1, 2, N, true);
            k.node.attrs.kernel[0] = k.node.attrs.kernel[1] = k.node.attrs.stride[0] = k.node.attrs.stride[1] = 2;
            kt_tensor_of(&k.tin[0], e, true, 4, xs), k.tin[0].layout = lx;
            kt_tensor_of(&k.tout[0], e, true, 4, ys), k.tout[0].layout = ly;
            kt_tensor_of(&k.tout[1], GR_I32, true, 4, ys), k.tout[1].layout = li;
            k.a.ein[0] = k.a.eout[0] = e;
            k.a.in[0] = h ? (void *)xb : (void *)xin, k.a.out[0] = h ? (void *)yb : yo, k.a.out[1] = io;
            gr_cpu_maxpool(&k.a);
            gr_attrs at = k.node.attrs;
            kt_setup(&k, be, GR_OP_MAXPOOL_BWD, 2, 1, N, true);
            k.node.attrs = at;
            kt_tensor_of(&k.tin[0], e, true, 4, ys), k.tin[0].layout = ly;
            kt_tensor_of(&k.tin[1], GR_I32, true, 4, ys), k.tin[1].layout = li;
            kt_tensor_of(&k.tout[0], e, true, 4, xs), k.tout[0].layout = lx;
            k.a.ein[0] = k.a.eout[0] = e;
            k.a.in[0] = h ? (void *)dyb : (void *)dyin, k.a.in[1] = io, k.a.out[0] = h ? (void *)dxb : dxo;
            gr_cpu_maxpool_bwd(&k.a);
            if (h) {
                for (int i = 0; i < MY; i++) yo[i] = gr_bf16_decode_hd(yb[i]);
                for (int i = 0; i < MX; i++) dxo[i] = gr_bf16_decode_hd(dxb[i]);
            }
            /* back to NCHW: y, the indices, dx */
            for (int64_t i = 0; i < N; i++)
                for (int64_t j = 0; j < C; j++) {
                    for (int64_t p = 0; p < MHO * MWO; p++) {
                        const int64_t nchw = (i * C + j) * MHO * MWO + p, nhwc = (i * MHO * MWO + p) * C + j;
                        y[nchw] = yo[ly == GR_NHWC ? nhwc : nchw];
                        idx[nchw] = io[li == GR_NHWC ? nhwc : nchw];
                    }
                    for (int64_t p = 0; p < MH * MW; p++) {
                        const int64_t nchw = (i * C + j) * MH * MW + p, nhwc = (i * MH * MW + p) * C + j;
                        dx[nchw] = dxo[lx == GR_NHWC ? nhwc : nchw];
                    }
                }
            if (combo == 0) {
                memcpy(y0, y, sizeof y0), memcpy(idx0, idx, sizeof idx0), memcpy(dx0, dx, sizeof dx0);
                continue;
            }
            runs++;
            for (int i = 0; i < MY; i++) bad += idx[i] != idx0[i] || memcmp(&y[i], &y0[i], sizeof(float)) != 0;
            for (int i = 0; i < MX; i++) bad += memcmp(&dx[i], &dx0[i], sizeof(float)) != 0;
        }
    int nan = 0;
    for (int i = 0; i < MY; i++) nan += isnan(y0[i]) != 0;
    CHECK_MSG(bad == 0 && runs == 14 && nan > 0, "maxpool, mixed layouts vs NCHW: %d values differ over %d runs, "
              "%d NaN maxima", bad, runs, nan);
    gr_backend_free(be);
}

/* One maxpool forward and backward of n samples, c channels, h x w pooled k x k, stride st, padding pd,
 * on storage e, the input (and dx), the output (and dy) and the indices in layouts lx, ly, li. */
typedef struct pool_case {
    int64_t n, c, h, w, ho, wo, k, st, pd;
} pool_case;

static void pool_run(gr_backend *be, const pool_case *pc, gr_elem e, gr_layout lx, gr_layout ly, gr_layout li,
                     const void *x, const void *dy, void *y, int32_t *idx, void *dx) {
    const int64_t xs[4] = {pc->n, pc->c, pc->h, pc->w}, ys[4] = {pc->n, pc->c, pc->ho, pc->wo};
    kt k;
    kt_setup(&k, be, GR_OP_MAXPOOL, 1, 2, pc->n, true);
    k.node.attrs.kernel[0] = k.node.attrs.kernel[1] = pc->k;
    k.node.attrs.stride[0] = k.node.attrs.stride[1] = pc->st;
    k.node.attrs.padding[0] = k.node.attrs.padding[1] = pc->pd;
    gr_attrs at = k.node.attrs;
    kt_tensor_of(&k.tin[0], e, true, 4, xs), k.tin[0].layout = lx;
    kt_tensor_of(&k.tout[0], e, true, 4, ys), k.tout[0].layout = ly;
    kt_tensor_of(&k.tout[1], GR_I32, true, 4, ys), k.tout[1].layout = li;
    k.a.ein[0] = k.a.eout[0] = e;
    k.a.in[0] = (void *)x, k.a.out[0] = y, k.a.out[1] = idx;
    gr_cpu_maxpool(&k.a);
    kt_setup(&k, be, GR_OP_MAXPOOL_BWD, 2, 1, pc->n, true);
    k.node.attrs = at;
    kt_tensor_of(&k.tin[0], e, true, 4, ys), k.tin[0].layout = ly;
    kt_tensor_of(&k.tin[1], GR_I32, true, 4, ys), k.tin[1].layout = li;
    kt_tensor_of(&k.tout[0], e, true, 4, xs), k.tout[0].layout = lx;
    k.a.ein[0] = k.a.eout[0] = e;
    k.a.in[0] = (void *)dy, k.a.in[1] = idx, k.a.out[0] = dx;
    gr_cpu_maxpool_bwd(&k.a);
}

/* maxpool on bf16 storage read where it lies, with channels enough for the vector blocks (16 at a time)
 * and a tail (37): the fp32 kernel's results on the decoded values, encoded, bit for bit; channels-last
 * throughout and with the output and indices channels-first (a pool before a flatten); a tiling 2x2
 * window and an overlapping padded 3x3 one (whose backward decodes), with ties and NaN */
static void test_maxpool_wide(void) {
    static const pool_case cases[2] = {{2, 37, 7, 5, 3, 2, 2, 2, 0}, {2, 37, 7, 6, 4, 3, 3, 2, 1}};
    static const float vals[6] = {-1.0f, 0.0f, 1.0f, 2.0f, NAN, -0.0f};
    gr_backend *be = bf16_backend(true);
    int bad = 0, runs = 0, nan = 0;
    for (int ci = 0; ci < 2; ci++) {
        const pool_case *pc = &cases[ci];
        const int64_t nx = pc->n * pc->c * pc->h * pc->w, ny = pc->n * pc->c * pc->ho * pc->wo;
        float *x = malloc((size_t)nx * 4), *dy = malloc((size_t)ny * 4), *y = malloc((size_t)ny * 4);
        float *dx = malloc((size_t)nx * 4);
        uint16_t *xb = malloc((size_t)nx * 2), *dyb = malloc((size_t)ny * 2), *yb = malloc((size_t)ny * 2);
        uint16_t *dxb = malloc((size_t)nx * 2);
        int32_t *idx = malloc((size_t)ny * 4), *idxb = malloc((size_t)ny * 4);
        for (int64_t i = 0; i < nx; i++) xb[i] = gr_bf16_encode_hd(vals[(i * 7 + i / 5) % 6] * (1.0f + (float)(i % 3)));
        for (int64_t i = 0; i < ny; i++) dyb[i] = i % 11 ? gr_bf16_encode_hd(urand()) : 0x8000; /* some -0 */
        for (int64_t i = 0; i < nx; i++) x[i] = gr_bf16_decode_hd(xb[i]);
        for (int64_t i = 0; i < ny; i++) dy[i] = gr_bf16_decode_hd(dyb[i]);
        for (int mix = 0; mix < 2; mix++) {
            const gr_layout lo = mix ? GR_NCHW : GR_NHWC;
            pool_run(be, pc, GR_F32, GR_NHWC, lo, lo, x, dy, y, idx, dx);
            pool_run(be, pc, GR_BF16, GR_NHWC, lo, lo, xb, dyb, yb, idxb, dxb);
            for (int64_t i = 0; i < ny; i++) {
                bad += yb[i] != gr_bf16_encode_hd(y[i]) || idxb[i] != idx[i];
                nan += isnan(y[i]) != 0;
            }
            for (int64_t i = 0; i < nx; i++) bad += dxb[i] != gr_bf16_encode_hd(dx[i]);
            runs++;
        }
        free(x), free(dy), free(y), free(dx), free(xb), free(dyb), free(yb), free(dxb), free(idx), free(idxb);
    }
    CHECK_MSG(bad == 0 && runs == 4 && nan > 0, "maxpool on bf16, 37 channels: %d values differ from the encoded "
              "fp32 ones over %d runs, %d NaN maxima", bad, runs, nan);
    gr_backend_free(be);
}

/* ---- the convolution on NHWC ---- */

/* element i of a buffer of fp32 or bf16 */
static float get(const void *p, gr_elem e, int64_t i) {
    return e == GR_BF16 ? gr_bf16_decode_hd(((const uint16_t *)p)[i]) : ((const float *)p)[i];
}
static void put(void *p, gr_elem e, int64_t i, float v) {
    if (e == GR_BF16) ((uint16_t *)p)[i] = gr_bf16_encode_hd(v);
    else ((float *)p)[i] = v;
}

/* n values of p (NCHW [n, c, hw] when nhwc, else as they are) into fp32 NHWC order */
static float *as_nhwc(const void *p, gr_elem e, bool nhwc, int64_t n, int64_t c, int64_t hw) {
    const int64_t len = n * c * hw;
    float *f = malloc((size_t)len * sizeof *f), *t = malloc((size_t)len * sizeof *t);
    for (int64_t i = 0; i < len; i++) f[i] = get(p, e, i);
    if (nhwc) {
        free(t);
        return f;
    }
    to_nhwc(f, t, n, c, hw);
    free(f);
    return t;
}

/* fwd, bwd data and bwd weights with x and y NHWC against NCHW, in e (on
 * values e holds exactly): the same results up to summation order */
static void conv_nhwc_case(gr_cpu *cpu, gr_conv_shape s, gr_elem e) {
    const int64_t nx = s.n * s.c * s.h * s.w, ny = s.n * s.f * s.ho * s.wo, nw = s.f * (s.c / s.groups) * s.kh * s.kw;
    const size_t es = e == GR_BF16 ? 2 : 4;
    float *x = malloc((size_t)nx * sizeof *x), *xt = malloc((size_t)nx * sizeof *xt), *w = malloc((size_t)nw * sizeof *w);
    float *dy = malloc((size_t)ny * sizeof *dy), *dyt = malloc((size_t)ny * sizeof *dyt), *dw[2];
    void *xb[2], *dyb[2], *yb[2], *dxb[2];
    for (int64_t i = 0; i < nx; i++) x[i] = gr_bf16_decode_hd(gr_bf16_encode_hd(urand()));
    for (int64_t i = 0; i < ny; i++) dy[i] = gr_bf16_decode_hd(gr_bf16_encode_hd(urand()));
    for (int64_t i = 0; i < nw; i++) w[i] = 0.3f * urand();
    to_nhwc(x, xt, s.n, s.c, s.h * s.w);
    to_nhwc(dy, dyt, s.n, s.f, s.ho * s.wo);
    for (int l = 0; l < 2; l++) {
        xb[l] = malloc((size_t)nx * es), dxb[l] = malloc((size_t)nx * es), dyb[l] = malloc((size_t)ny * es);
        yb[l] = malloc((size_t)ny * es), dw[l] = calloc((size_t)nw, sizeof(float));
        for (int64_t i = 0; i < nx; i++) put(xb[l], e, i, l ? xt[i] : x[i]);
        for (int64_t i = 0; i < ny; i++) put(dyb[l], e, i, l ? dyt[i] : dy[i]);
        gr_layout lay = l ? GR_NHWC : GR_NCHW;
        gr_conv_store st = {e, e, lay, lay};
        gr_cpu_conv_onednn_fwd_as(cpu, &s, &st, xb[l], w, NULL, yb[l]);
        gr_cpu_conv_onednn_bwd_data_as(cpu, &s, &st, dyb[l], w, dxb[l]);
        gr_cpu_conv_onednn_bwd_params_as(cpu, &s, &st, dyb[l], xb[l], dw[l], NULL);
    }
    const double tol = e == GR_BF16 ? 1e-2 : 1e-4;
    float *y1 = as_nhwc(yb[1], e, true, s.n, s.f, s.ho * s.wo), *y0 = as_nhwc(yb[0], e, false, s.n, s.f, s.ho * s.wo);
    float *d1 = as_nhwc(dxb[1], e, true, s.n, s.c, s.h * s.w), *d0 = as_nhwc(dxb[0], e, false, s.n, s.c, s.h * s.w);
    CHECK_MSG(close_all(y1, y0, ny, tol) == 0 && close_all(d1, d0, nx, tol) == 0 && close_all(dw[1], dw[0], nw, tol) == 0,
              "conv %s NHWC vs NCHW: c%lld f%lld k%lld s%lld g%lld", gr_elem_name(e), (long long)s.c, (long long)s.f,
              (long long)s.kh, (long long)s.sh, (long long)s.groups);
    for (int l = 0; l < 2; l++) free(xb[l]), free(dxb[l]), free(dyb[l]), free(yb[l]), free(dw[l]);
    free(x), free(xt), free(w), free(dy), free(dyt), free(y1), free(y0), free(d1), free(d0);
}

static void test_conv_nhwc(void) {
    gr_backend *be = bf16_backend(true);
    gr_cpu *cpu = gr_cpu_backend_state(be);
    /* n, c, h, w, f, ho, wo, kh, kw, sh, sw, ph, pw, groups; and how many of
     * the three directions run as matmuls: a 1x1 conv on few pixels all
     * three (a strided one on a copy of its pixels, dx scattered back), a
     * larger kernel its backward weights (on im2col rows) up to 1,024 pixels,
     * 4,096 when strided; grouped ones and those over 4,096 pixels none */
    static const struct { gr_conv_shape s; int matmuls; } cases[] = {
        {{2, 16, 8, 8, 32, 8, 8, 3, 3, 1, 1, 1, 1, 1}, 1}, {{2, 32, 9, 9, 16, 5, 5, 1, 1, 2, 2, 0, 0, 1}, 3},
        {{2, 6, 7, 7, 10, 7, 7, 3, 3, 1, 1, 1, 1, 2}, 0},  {{2, 8, 6, 6, 8, 6, 6, 3, 3, 1, 1, 1, 1, 8}, 0},
        {{2, 3, 11, 11, 5, 3, 3, 5, 5, 3, 3, 0, 0, 1}, 1}, {{3, 24, 6, 6, 40, 6, 6, 1, 1, 1, 1, 0, 0, 1}, 3},
        {{2, 5, 9, 7, 6, 5, 3, 3, 2, 2, 2, 1, 0, 1}, 1},   {{2, 8, 48, 48, 8, 48, 48, 1, 1, 1, 1, 0, 0, 1}, 0},
        {{2, 4, 24, 24, 4, 24, 24, 3, 3, 1, 1, 1, 1, 1}, 0}, {{2, 4, 48, 48, 4, 24, 24, 3, 3, 2, 2, 1, 1, 1}, 1},
    };
    for (size_t i = 0; i < GR_ARRAY_LEN(cases); i++) {
        const int64_t before = gr_cpu_conv_onednn_matmul_calls(cpu);
        conv_nhwc_case(cpu, cases[i].s, GR_BF16);
        CHECK_MSG(gr_cpu_conv_onednn_matmul_calls(cpu) - before == cases[i].matmuls, "case %zu: %lld matmuls, not %d",
                  i, (long long)(gr_cpu_conv_onednn_matmul_calls(cpu) - before), cases[i].matmuls);
    }
    int bf16_blocked = gr_cpu_conv_onednn_nhwc_fallbacks(cpu);
    /* fp32 on nhwc (not planned by the CPU, but the kernel takes it): a 1x1 on a
     * large output keeps plain oihw weights, for which oneDNN 2.6 has only its
     * reference nhwc kernel: it runs blocked instead */
    conv_nhwc_case(cpu, (gr_conv_shape){2, 32, 16, 16, 64, 16, 16, 1, 1, 1, 1, 0, 0, 1}, GR_F32);
    int fp32_blocked = gr_cpu_conv_onednn_nhwc_fallbacks(cpu) - bf16_blocked;
    printf("nhwc conv primitives made blocked: bf16 %d, fp32 %d\n", bf16_blocked, fp32_blocked);
    CHECK(fp32_blocked > 0);
    char d[256];
    CHECK_STR_CONTAINS(gr_backend_describe(be, d, sizeof d), "blocked (oneDNN has no nhwc kernel for the shape)");
    gr_backend_free(be);
}

/* ---- a model pass ---- */

static void test_model(void) {
    int64_t in[3] = {3, 12, 12};
    const int64_t n = 4;
    model a, b; /* the same graph, planned NCHW and NHWC */
    model_build(&a, RES, in, 3, n, GR_PREC_BF16);
    model_build(&b, RES, in, 3, n, GR_PREC_BF16);
    gr_backend *be = bf16_backend(true);
    gr_layout_cap caps[GR_OP_COUNT];
    gr_backend_layout_caps(be, caps);
    gr_graph_set_layout(&b.g, caps);
    int nhwc = 0;
    for (int t = 0; t < b.g.n_tensors; t++) nhwc += b.g.tensors[t].layout == GR_NHWC;
    CHECK(nhwc >= 6);
    const gr_graph *g = &a.g;
    float *w = malloc((size_t)g->n_params * sizeof *w), *x = malloc((size_t)(n * 3 * 144) * sizeof *x);
    int32_t y[4] = {1, 7, 3, 9};
    gr_graph_init_params(g, w, 5);
    for (int64_t i = 0; i < n * 3 * 144; i++) x[i] = urand();
    run ra, rb;
    run_pass(&ra, &a.g, be, w, x, y, n);
    run_pass(&rb, &b.g, be, w, x, y, n);
    double num = 0.0, den = 0.0;
    for (int64_t i = 0; i < g->n_trainable; i++) {
        double d = (double)ra.m.grads[i] - rb.m.grads[i];
        num += d * d;
        den += (double)ra.m.grads[i] * ra.m.grads[i];
    }
    const float *la = gr_plan_ptr(&ra.p, g->loss_stats), *lb = gr_plan_ptr(&rb.p, b.g.loss_stats);
    printf("NHWC vs NCHW: loss %.6f vs %.6f, gradient rel diff %.2e\n", (double)lb[0], (double)la[0], sqrt(num / den));
    CHECK(fabsf(la[0] - lb[0]) <= 1e-2f * fabsf(la[0]) && den > 0.0);
    CHECK_MSG(sqrt(num / den) < 3e-2, "gradients differ by %.2e (relative)", sqrt(num / den));
    run_free(&ra);
    run_free(&rb);
    gr_backend_free(be);
    free(w);
    free(x);
    model_free(&a);
    model_free(&b);
}

int main(void) {
    test_pass();
    test_pass_ops_decide();
    test_bn();
    test_bn_wide();
    test_gap();
    test_maxpool();
    test_maxpool_mixed();
    test_maxpool_wide();
    if (have_native_bf16()) {
        test_conv_nhwc();
        test_model();
    } else gr_test_skip("this CPU has no AVX-512 BF16 or AMX: the NHWC model pass was not run");
    return gr_test_report();
}
