/* test_nan.c — NaN and inf through every op, forward and backward, on the
 * CPU backend's kernels and on the CUDA kernels' host/device bodies (run on
 * the CPU), against what PyTorch gives for the same inputs (the expected
 * values below were printed by torch 2.x; a NaN must stay a NaN):
 *   - relu, sigmoid, tanh, gelu, gelu_tanh and their backward on {NaN, inf, -inf, ...};
 *     relu(NaN) = NaN and its backward passes dy where y is NaN
 *     (threshold_backward: y <= 0 ? 0 : dy);
 *   - dropout: x * mask * scale, so a dropped NaN stays NaN (forward and
 *     backward), as torch's dropout;
 *   - maxpool: a window holding a NaN yields NaN, its index the last NaN of
 *     the window in scan order; the backward routes dy there;
 *   - avgpool, global_avgpool, batchnorm (training and eval), dense and conv
 *     (both CPU paths, both GEMM providers): NaN spreads to exactly the
 *     outputs that read it;
 *   - softmax cross-entropy: a NaN or +inf logit gives a NaN loss, a -inf
 *     logit a finite one without label smoothing (inf with); the accuracy
 *     metric's top-1 and the CUDA body's argmax count a NaN as the largest
 *     value (torch.argmax);
 *   - the clip factor of a NaN norm is NaN (torch's clip_grad_norm_). */
#include <stdlib.h>
#include <string.h>

#include "gr_test.h"
#include "kargs_fixture.h"
#include "kernels/cpu/cpu.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/optim.h"
#include "kernels/body_elem.h"
#include "kernels/body_spatial.h"

/* got equals want: both NaN, or equal to a relative 1e-6 (infinities exactly) */
static bool same(float got, float want) {
    if (isnan(want)) return isnan(got);
    if (isinf(want)) return got == want;
    return fabs((double)got - (double)want) <= 1e-6 * (fabs((double)want) + 1e-30) + 1e-7;
}

#define CHECK_SAME(what, i, got, want) \
    CHECK_MSG(same((got), (want)), "%s[%d]: got %.9g, PyTorch gives %.9g", (what), (int)(i), (double)(got), \
              (double)(want))

/* ---- hand-built kernel arguments ---- */

/* The CPU backend whose state (GEMM provider, conv path) the kernels use. */
static gr_backend *kt_be;

static void kt_tensor(gr_tensor *t, int ndim, const int64_t *shape) { kt_tensor_of(t, GR_F32, true, ndim, shape); }

static void kt_init(kt *k, gr_op op, int nin, int nout, int64_t n, bool training) {
    kt_setup(k, kt_be, op, nin, nout, n, training);
}

/* ---- activations ---- */

#define NA 6
static const float act_x[NA] = {NAN, INFINITY, -INFINITY, -1.0f, 2.0f, 0.0f};
static const float act_dy[NA] = {1.0f, 2.0f, 3.0f, NAN, 5.0f, 6.0f};
/* torch: y = f(x); x.grad after y.backward(act_dy), per activation row of ops.def */
typedef struct act_want {
    bool given;
    float y[NA], dx[NA];
} act_want;
static const act_want act_wants[GR_OP_COUNT] = {
    [GR_OP_RELU] = {true, {NAN, INFINITY, 0.0f, 0.0f, 2.0f, 0.0f}, {1.0f, 2.0f, 0.0f, 0.0f, 5.0f, 0.0f}},
    [GR_OP_SIGMOID] = {true, {NAN, 1.0f, 0.0f, 0.2689414322376251f, 0.8807970285415649f, 0.5f},
                       {NAN, 0.0f, 0.0f, NAN, 0.5249680876731873f, 1.5f}},
    [GR_OP_TANH] = {true, {NAN, 1.0f, -1.0f, -0.7615941762924194f, 0.9640275835990906f, 0.0f},
                    {NAN, 0.0f, 0.0f, NAN, 0.3532540798187256f, 6.0f}},
    [GR_OP_GELU] = {true, {NAN, INFINITY, NAN, -0.1586552858352661f, 1.9544999599456787f, 0.0f},
                    {NAN, NAN, NAN, NAN, 5.426159381866455f, 3.0f}},
    /* F.gelu(x, approximate='tanh'), printed by torch 1.13 (whose gelu values above agree) */
    [GR_OP_GELU_TANH] = {true, {NAN, INFINITY, NAN, -0.15880799293518066f, 1.9545977115631104f, 0.0f},
                         {NAN, NAN, NAN, NAN, 5.4304962158203125f, 3.0f}},
};
/* The CPU kernel of every row. */
static const gr_kernel_fn cpu_kernel[GR_OP_COUNT] = {
#define X(E, name, ...) [GR_OP_##E] = gr_cpu_##name,
#include "graph/ops.def"
#undef X
};

static void test_act(int act) {
    const act_want *w = &act_wants[act];
    if (!w->given) {
        CHECK_MSG(false, "%s: an activation of ops.def without torch's NaN/inf values here", gr_op_name(act));
        return;
    }
    /* a batch large enough for the OpenMP/SIMD loops: the six values repeated */
    enum { N = 4096 };
    static float x[N], dy[N], y[N], dx[N], yb[N], dxb[N];
    for (int i = 0; i < N; i++) x[i] = act_x[i % NA], dy[i] = act_dy[i % NA];
    int64_t shape[2] = {N, 1};
    kt k;
    kt_init(&k, GR_OP_RELU, 1, 1, N, true);
    kt_tensor(&k.tin[0], 2, shape);
    kt_tensor(&k.tout[0], 2, shape);
    k.a.in[0] = x;
    k.a.out[0] = y;
    cpu_kernel[act](&k.a);
    /* backward reads y, or x on a GR_OPF_ACT_SAVES_X row (gelu) */
    const float *saved = gr_op_flags(act) & GR_OPF_ACT_SAVES_X ? x : y;
    k.a.in[0] = dy;
    k.a.in[1] = (void *)saved;
    k.a.out[0] = dx;
    cpu_kernel[gr_op_bwd(act)](&k.a);
    for (int64_t i = 0; i < N; i++) {
        gr_body_act(act, GR_BODY_F32, x, yb, i);
        gr_body_act_bwd(act, GR_BODY_F32, dy, saved, dxb, i);
    }
    char what[64];
    int bad = 0;
    for (int i = 0; i < N && bad < 4; i++) {
        int j = i % NA;
        if (!same(y[i], w->y[j]) || !same(dx[i], w->dx[j]) || !same(yb[i], w->y[j]) ||
            !same(dxb[i], w->dx[j]))
            bad++;
    }
    for (int j = 0; j < NA; j++) {
        snprintf(what, sizeof what, "cpu %s y", gr_op_name(act));
        CHECK_SAME(what, j, y[j], w->y[j]);
        snprintf(what, sizeof what, "cpu %s dx", gr_op_name(act));
        CHECK_SAME(what, j, dx[j], w->dx[j]);
        snprintf(what, sizeof what, "body %s y", gr_op_name(act));
        CHECK_SAME(what, j, yb[j], w->y[j]);
        snprintf(what, sizeof what, "body %s dx", gr_op_name(act));
        CHECK_SAME(what, j, dxb[j], w->dx[j]);
    }
    CHECK_MSG(bad == 0, "%s: the repeated values disagree somewhere in the batch", gr_op_name(act));
}

/* ---- dropout ---- */

static void test_dropout(void) {
    enum { N = 256 };
    float x[N], y[N], dy[N], dx[N], yb[N], dxb[N];
    uint8_t m[N], mb[N];
    for (int i = 0; i < N; i++) x[i] = i % 2 ? NAN : 1.0f, dy[i] = i % 3 ? NAN : 1.0f;
    int64_t shape[2] = {N, 1};
    kt k;
    kt_init(&k, GR_OP_DROPOUT, 1, 2, N, true);
    k.node.attrs.rate = 0.5;
    k.ctx.rng_key = 12345;
    kt_tensor(&k.tin[0], 2, shape);
    kt_tensor(&k.tout[0], 2, shape);
    k.a.in[0] = x;
    k.a.out[0] = y;
    k.a.out[1] = m;
    gr_cpu_dropout(&k.a);
    k.a.in[0] = dy;
    k.a.in[1] = m;
    k.a.out[0] = dx;
    gr_cpu_dropout_bwd(&k.a);
    uint64_t key = gr_dropout_key_hd(k.ctx.rng_key, k.node.layer);
    for (int64_t i = 0; i < N; i++) {
        gr_body_dropout(key, 0.5f, 2.0f, x, yb, mb, i);
        gr_body_dropout_bwd(2.0f, dy, mb, dxb, i);
    }
    int kept = 0, bad = 0;
    for (int i = 0; i < N; i++) {
        kept += m[i];
        /* torch: x * mask * 2 */
        float want = x[i] * (m[i] ? 2.0f : 0.0f), dwant = dy[i] * (m[i] ? 2.0f : 0.0f);
        if (!same(y[i], want) || !same(dx[i], dwant) || !same(yb[i], want) || !same(dxb[i], dwant) ||
            mb[i] != m[i]) {
            if (bad++ < 4)
                fprintf(stderr, "dropout[%d]: x %g mask %d: y %g body %g (want %g); dy %g: dx %g body %g (want %g)\n",
                        i, x[i], m[i], y[i], yb[i], want, dy[i], dx[i], dxb[i], dwant);
        }
    }
    CHECK_MSG(bad == 0, "dropout: %d elements differ from torch's x * mask * scale", bad);
    CHECK(kept > N / 4 && kept < 3 * N / 4);
}

/* ---- pooling ---- */

static void test_maxpool(void) {
    /* torch: x [1,1,2,4] = [[1, nan, 3, nan], [0, 2, -inf, inf]], max_pool2d(x, 2)
     * -> y [nan, nan], indices [1, 3]; y.sum().backward() -> dx 1 at 1 and 3 */
    float x[8] = {1.0f, NAN, 3.0f, NAN, 0.0f, 2.0f, -INFINITY, INFINITY};
    /* and a window [[-inf, nan], [nan, 5]] with padding: the last NaN wins */
    float x2[4] = {-INFINITY, NAN, NAN, 5.0f};
    struct { const float *x; int64_t h, w, k, pad; int no; float y[4]; int32_t idx[4]; } cases[2] = {
        {x, 2, 4, 2, 0, 2, {NAN, NAN}, {1, 3}},
        /* padding 1, kernel 2 stride 2 on 2x2: outputs (0,0)..(1,1), each one element */
        {x2, 2, 2, 2, 1, 4, {-INFINITY, NAN, NAN, 5.0f}, {0, 1, 2, 3}},
    };
    for (int c = 0; c < 2; c++) {
        int64_t h = cases[c].h, w = cases[c].w, kk = cases[c].k, pad = cases[c].pad;
        int64_t ho = (h + 2 * pad - kk) / kk + 1, wo = (w + 2 * pad - kk) / kk + 1;
        int64_t xs[4] = {1, 1, h, w}, ys[4] = {1, 1, ho, wo};
        float y[4], dy[4] = {1.0f, 1.0f, 1.0f, 1.0f}, dx[8], yb[4], dxb[8];
        int32_t idx[4], idxb[4];
        kt k;
        kt_init(&k, GR_OP_MAXPOOL, 1, 2, 1, true);
        k.node.attrs.kernel[0] = k.node.attrs.kernel[1] = kk;
        k.node.attrs.stride[0] = k.node.attrs.stride[1] = kk;
        k.node.attrs.padding[0] = k.node.attrs.padding[1] = pad;
        kt_tensor(&k.tin[0], 4, xs);
        kt_tensor(&k.tout[0], 4, ys);
        k.a.in[0] = (void *)cases[c].x;
        k.a.out[0] = y;
        k.a.out[1] = idx;
        gr_cpu_maxpool(&k.a);
        kt kb;
        kt_init(&kb, GR_OP_MAXPOOL_BWD, 2, 1, 1, true);
        kb.node.attrs = k.node.attrs;
        kt_tensor(&kb.tin[0], 4, ys);
        kt_tensor(&kb.tout[0], 4, xs);
        kb.a.in[0] = dy;
        kb.a.in[1] = idx;
        kb.a.out[0] = dx;
        gr_cpu_maxpool_bwd(&kb.a);
        gr_pool_geo g = {.planes = 1, .h = h, .w = w, .ho = ho, .wo = wo, .kh = kk, .kw = kk, .sh = kk, .sw = kk,
                         .ph = pad, .pw = pad, .include_pad = 1};
        for (int64_t oh = 0; oh < ho; oh++)
            for (int64_t ow = 0; ow < wo; ow++) gr_body_maxpool(&g, cases[c].x, yb, idxb, 0, oh, ow);
        for (int64_t ih = 0; ih < h; ih++)
            for (int64_t iw = 0; iw < w; iw++) gr_body_maxpool_bwd(&g, dy, idxb, dxb, 0, ih, iw);
        CHECK((int64_t)cases[c].no == ho * wo);
        for (int o = 0; o < cases[c].no; o++) {
            CHECK_SAME("cpu maxpool y", o, y[o], cases[c].y[o]);
            CHECK_SAME("body maxpool y", o, yb[o], cases[c].y[o]);
            CHECK_MSG(idx[o] == cases[c].idx[o] && idxb[o] == cases[c].idx[o],
                      "maxpool case %d output %d: index %d (body %d), PyTorch gives %d", c, o, idx[o], idxb[o],
                      cases[c].idx[o]);
        }
        for (int64_t i = 0; i < h * w; i++) {
            float want = 0.0f;
            for (int o = 0; o < cases[c].no; o++) want += cases[c].idx[o] == i ? 1.0f : 0.0f;
            CHECK_SAME("cpu maxpool dx", i, dx[i], want);
            CHECK_SAME("body maxpool dx", i, dxb[i], want);
        }
    }
}

static void test_avgpool(void) {
    /* x [1,1,2,4] with a NaN in the first window: y [nan, 2.5]; dy [1, nan] -> dx NaN in the second window */
    float x[8] = {1.0f, NAN, 2.0f, 3.0f, 0.0f, 1.0f, 2.0f, 3.0f}, y[2], dy[2] = {1.0f, NAN}, dx[8];
    int64_t xs[4] = {1, 1, 2, 4}, ys[4] = {1, 1, 1, 2};
    kt k;
    kt_init(&k, GR_OP_AVGPOOL, 1, 1, 1, true);
    k.node.attrs.kernel[0] = k.node.attrs.kernel[1] = 2;
    k.node.attrs.stride[0] = k.node.attrs.stride[1] = 2;
    k.node.attrs.count_include_pad = true;
    kt_tensor(&k.tin[0], 4, xs);
    kt_tensor(&k.tout[0], 4, ys);
    k.a.in[0] = x;
    k.a.out[0] = y;
    gr_cpu_avgpool(&k.a);
    CHECK_SAME("avgpool y", 0, y[0], NAN);
    CHECK_SAME("avgpool y", 1, y[1], 2.5f);
    kt kb;
    kt_init(&kb, GR_OP_AVGPOOL_BWD, 1, 1, 1, true);
    kb.node.attrs = k.node.attrs;
    kt_tensor(&kb.tin[0], 4, ys);
    kt_tensor(&kb.tout[0], 4, xs);
    kb.a.in[0] = dy;
    kb.a.out[0] = dx;
    gr_cpu_avgpool_bwd(&kb.a);
    for (int i = 0; i < 8; i++) CHECK_SAME("avgpool dx", i, dx[i], (i % 4) < 2 ? 0.25f : NAN);

    /* global: plane 0 holds an inf and a -inf (NaN mean), plane 1 is finite */
    float gx[8] = {INFINITY, 1.0f, -INFINITY, 1.0f, 1.0f, 2.0f, 3.0f, 4.0f}, gy[2], gdy[2] = {NAN, 4.0f}, gdx[8];
    int64_t gxs[4] = {1, 2, 2, 2}, gys[4] = {1, 2, 1, 1};
    kt_init(&k, GR_OP_GLOBAL_AVGPOOL, 1, 1, 1, true);
    kt_tensor(&k.tin[0], 4, gxs);
    kt_tensor(&k.tout[0], 4, gys);
    k.a.in[0] = gx;
    k.a.out[0] = gy;
    gr_cpu_global_avgpool(&k.a);
    CHECK_SAME("global_avgpool y", 0, gy[0], NAN);
    CHECK_SAME("global_avgpool y", 1, gy[1], 2.5f);
    kt_init(&kb, GR_OP_GLOBAL_AVGPOOL_BWD, 1, 1, 1, true);
    kt_tensor(&kb.tin[0], 4, gys);
    kt_tensor(&kb.tout[0], 4, gxs);
    kb.a.in[0] = gdy;
    kb.a.out[0] = gdx;
    gr_cpu_global_avgpool_bwd(&kb.a);
    for (int i = 0; i < 8; i++) CHECK_SAME("global_avgpool dx", i, gdx[i], i < 4 ? NAN : 1.0f);
}

/* ---- batchnorm ---- */

/* x [2, 2, 1, 2]: channel c of sample i at i*4 + c*2 + j */
static void bn_run(bool training, float *x, float *w, float *b, float *rm, float *rv, float *y, float *saved) {
    int64_t xs[4] = {2, 2, 1, 2};
    kt k;
    kt_init(&k, GR_OP_BATCHNORM, 5, 2, 2, training);
    k.node.attrs.momentum = 0.1;
    k.node.attrs.eps = 1e-5;
    kt_tensor(&k.tin[0], 4, xs);
    kt_tensor(&k.tout[0], 4, xs);
    k.a.in[0] = x, k.a.in[1] = w, k.a.in[2] = b, k.a.in[3] = rm, k.a.in[4] = rv;
    k.a.out[0] = y, k.a.out[1] = saved;
    gr_cpu_batchnorm(&k.a);
}

static void test_batchnorm(void) {
    float x[8] = {NAN, 1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f, 8.0f};
    float w[2] = {1.0f, 1.0f}, b[2] = {0.0f, 0.0f}, rm[2] = {0.0f, 0.0f}, rv[2] = {1.0f, 1.0f};
    float y[8], saved[4];
    bn_run(true, x, w, b, rm, rv, y, saved);
    for (int i = 0; i < 8; i++) {
        bool ch0 = (i % 4) < 2;
        CHECK_MSG(ch0 ? isnan(y[i]) : isfinite(y[i]), "batchnorm y[%d] = %g: channel %d should be %s", i, y[i],
                  ch0 ? 0 : 1, ch0 ? "NaN" : "finite");
    }
    CHECK(isnan(rm[0]) && isnan(rv[0]) && isfinite(rm[1]) && isfinite(rv[1]));
    /* eval with the NaN running stats of channel 0 */
    float xf[8] = {0.0f, 1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f, 8.0f};
    bn_run(false, xf, w, b, rm, rv, y, saved);
    for (int i = 0; i < 8; i++) CHECK_MSG(((i % 4) < 2) == (bool)isnan(y[i]), "batchnorm eval y[%d] = %g", i, y[i]);

    /* backward: a NaN dy in channel 1 -> dweight[1], dbias[1] and channel 1's dx NaN, channel 0 untouched */
    float rm2[2] = {0.0f, 0.0f}, rv2[2] = {1.0f, 1.0f};
    bn_run(true, xf, w, b, rm2, rv2, y, saved);
    float dy[8] = {1.0f, 2.0f, 3.0f, NAN, 1.0f, -1.0f, 0.5f, 0.25f}, dw[2] = {0, 0}, db[2] = {0, 0}, dx[8];
    int64_t xs[4] = {2, 2, 1, 2};
    kt k;
    kt_init(&k, GR_OP_BATCHNORM_BWD, 4, 3, 2, true);
    k.node.attrs.eps = 1e-5;
    kt_tensor(&k.tin[0], 4, xs);
    kt_tensor(&k.tin[1], 4, xs);
    kt_tensor(&k.tout[2], 4, xs);
    k.a.in[0] = dy, k.a.in[1] = xf, k.a.in[2] = w, k.a.in[3] = saved;
    k.a.out[0] = dw, k.a.out[1] = db, k.a.out[2] = dx;
    gr_cpu_batchnorm_bwd(&k.a);
    CHECK(isfinite(dw[0]) && isfinite(db[0]) && isnan(dw[1]) && isnan(db[1]));
    for (int i = 0; i < 8; i++) CHECK_MSG(((i % 4) >= 2) == (bool)isnan(dx[i]), "batchnorm dx[%d] = %g", i, dx[i]);
}

/* ---- dense and conv ---- */

static void test_dense(const char *gemm) {
    CHECK(gr_cpu_gemm_init(gr_cpu_backend_state(kt_be), gemm, 1));
    /* x [2, 3] with a NaN in sample 0; W [2, 3]; b [2] */
    float x[6] = {NAN, 1.0f, 2.0f, 1.0f, 2.0f, 3.0f}, w[6] = {1, 0, 0, 0, 1, 0}, b[2] = {0.5f, -0.5f}, y[4];
    int64_t xs[2] = {2, 3}, ws[2] = {2, 3}, ys[2] = {2, 2};
    kt k;
    kt_init(&k, GR_OP_DENSE, 3, 1, 2, true);
    kt_tensor(&k.tin[0], 2, xs);
    kt_tensor(&k.tin[1], 2, ws);
    k.tin[1].batched = false;
    kt_tensor(&k.tout[0], 2, ys);
    k.a.in[0] = x, k.a.in[1] = w, k.a.in[2] = b;
    k.a.out[0] = y;
    gr_cpu_dense(&k.a);
    /* torch: a NaN times a 0 weight is NaN, so the whole row is NaN */
    CHECK_MSG(isnan(y[0]) && isnan(y[1]) && same(y[2], 1.5f) && same(y[3], 1.5f), "%s: dense y = %g %g %g %g",
              gemm, y[0], y[1], y[2], y[3]);
    /* dx = dy W, with a NaN dy in sample 1 */
    float dy[4] = {1.0f, 1.0f, NAN, 0.0f}, dx[6], dw[6] = {0}, db[2] = {0};
    kt_init(&k, GR_OP_DENSE_BWD_DATA, 2, 1, 2, true);
    kt_tensor(&k.tin[0], 2, ys);
    kt_tensor(&k.tin[1], 2, ws);
    k.tin[1].batched = false;
    kt_tensor(&k.tout[0], 2, xs);
    k.a.in[0] = dy, k.a.in[1] = w;
    k.a.out[0] = dx;
    gr_cpu_dense_bwd_data(&k.a);
    for (int i = 0; i < 6; i++) CHECK_MSG((i >= 3) == (bool)isnan(dx[i]), "%s: dense dx[%d] = %g", gemm, i, dx[i]);
    /* dW += dy^T x, db += sum dy: finite dy, the NaN of x[0, 0] reaches column 0 of dW only */
    float dyf[4] = {1.0f, 2.0f, 3.0f, 4.0f};
    kt_init(&k, GR_OP_DENSE_BWD_PARAMS, 2, 2, 2, true);
    kt_tensor(&k.tin[0], 2, ys);
    kt_tensor(&k.tin[1], 2, xs);
    kt_tensor(&k.tout[0], 2, ws);
    k.tout[0].batched = false;
    k.a.in[0] = dyf, k.a.in[1] = x;
    k.a.out[0] = dw, k.a.out[1] = db;
    gr_cpu_dense_bwd_params(&k.a);
    for (int i = 0; i < 6; i++) CHECK_MSG((i % 3 == 0) == (bool)isnan(dw[i]), "%s: dense dW[%d] = %g", gemm, i, dw[i]);
    CHECK(same(db[0], 4.0f) && same(db[1], 6.0f));
}

static void test_conv(const char *path) {
    gr_cpu *cpu = gr_cpu_backend_state(kt_be);
    CHECK(gr_cpu_conv_set_path(cpu, path));
    /* x [1, 1, 4, 4], NaN at (1, 1); 3x3 kernel, padding 1, 2 filters of ones */
    gr_conv_shape s = {.n = 1, .c = 1, .h = 4, .w = 4, .f = 2, .ho = 4, .wo = 4, .kh = 3, .kw = 3, .sh = 1, .sw = 1,
                       .ph = 1, .pw = 1, .groups = 1};
    float x[16], w[18], b[2] = {0.0f, 1.0f}, y[32], dy[32], dx[16], dw[18] = {0}, db[2] = {0};
    for (int i = 0; i < 16; i++) x[i] = (float)i / 16.0f;
    x[1 * 4 + 1] = NAN;
    for (int i = 0; i < 18; i++) w[i] = 1.0f;
    void (*fwd)(gr_cpu *, const gr_conv_shape *, const float *, const float *, const float *, float *) =
        strcmp(path, "ref") == 0 ? gr_cpu_conv_ref_fwd : gr_cpu_conv_onednn_fwd;
    void (*bwd_data)(gr_cpu *, const gr_conv_shape *, const float *, const float *, float *) =
        strcmp(path, "ref") == 0 ? gr_cpu_conv_ref_bwd_data : gr_cpu_conv_onednn_bwd_data;
    void (*bwd_params)(gr_cpu *, const gr_conv_shape *, const float *, const float *, float *, float *) =
        strcmp(path, "ref") == 0 ? gr_cpu_conv_ref_bwd_params : gr_cpu_conv_onednn_bwd_params;
    fwd(cpu, &s, x, w, b, y);
    int bad = 0;
    for (int f = 0; f < 2; f++)
        for (int oh = 0; oh < 4; oh++)
            for (int ow = 0; ow < 4; ow++) {
                bool reads = oh <= 2 && ow <= 2; /* the window of (oh, ow) covers (1, 1) */
                if (reads != (bool)isnan(y[(f * 4 + oh) * 4 + ow])) bad++;
            }
    CHECK_MSG(bad == 0, "conv %s: %d outputs wrong about NaN", path, bad);
    /* backward data: a NaN dy at (3, 3) of filter 0 reaches inputs (2..3, 2..3) */
    for (int i = 0; i < 32; i++) dy[i] = 0.5f;
    dy[3 * 4 + 3] = NAN;
    bwd_data(cpu, &s, dy, w, dx);
    bad = 0;
    for (int ih = 0; ih < 4; ih++)
        for (int iw = 0; iw < 4; iw++)
            if ((ih >= 2 && iw >= 2) != (bool)isnan(dx[ih * 4 + iw])) bad++;
    CHECK_MSG(bad == 0, "conv %s: %d input gradients wrong about NaN", path, bad);
    /* backward params, finite dy: every tap reads x(1, 1) through some output -> all of dW NaN, db finite */
    for (int i = 0; i < 32; i++) dy[i] = 0.5f;
    bwd_params(cpu, &s, dy, x, dw, db);
    bad = 0;
    for (int i = 0; i < 18; i++) bad += !isnan(dw[i]);
    CHECK_MSG(bad == 0 && same(db[0], 8.0f) && same(db[1], 8.0f), "conv %s: dW has %d non-NaN, db %g %g", path,
              bad, db[0], db[1]);
}

/* ---- softmax cross-entropy ---- */

/* The CUDA kernel's row as elem.cu runs it: 32 lanes, xor butterflies. */
static double body_sce_row(const float *z, int64_t k, int32_t label, double eps, int64_t *arg_out) {
    enum { L = GR_SCE_LANES };
    float m[L], m0[L], p[64];
    int64_t arg[L], a0[L];
    double sum[L], zsum[L], s0[L], z0[L];
    for (int l = 0; l < L; l++) gr_body_sce_max_part(z, k, l, L, &m[l], &arg[l]);
    for (int o = L / 2; o > 0; o >>= 1) {
        memcpy(m0, m, sizeof m);
        memcpy(a0, arg, sizeof arg);
        for (int l = 0; l < L; l++) gr_sce_max_combine(&m[l], &arg[l], m0[l ^ o], a0[l ^ o]);
    }
    for (int l = 0; l < L; l++) gr_body_sce_exp_part(z, p, k, m[l], l, L, &sum[l], &zsum[l]);
    for (int o = L / 2; o > 0; o >>= 1) {
        memcpy(s0, sum, sizeof sum);
        memcpy(z0, zsum, sizeof zsum);
        for (int l = 0; l < L; l++) sum[l] += s0[l ^ o], zsum[l] += z0[l ^ o];
    }
    *arg_out = arg[0];
    return gr_sce_row_loss(sum[0], zsum[0], z[label] - m[0], k, eps);
}

/* The accuracy metric's top-1 count of one row of 3 logits (the argmax softmax CE's row picks). */
static float cpu_top1(const float *z, int32_t label) {
    float stats[2] = {-1.0f, -1.0f};
    int64_t zs[2] = {1, 3};
    kt k;
    kt_init(&k, GR_OP_ACCURACY, 2, 1, 1, false);
    k.node.attrs.top_k = 1;
    k.node.attrs.ignore_index = -100;
    kt_tensor(&k.tin[0], 2, zs);
    k.a.in[0] = (void *)z, k.a.in[1] = &label;
    k.a.out[0] = stats;
    gr_cpu_accuracy(&k.a);
    CHECK_MSG(stats[1] == 1.0f, "accuracy: count %g of one row", stats[1]);
    return stats[0];
}

static void test_sce(void) {
    /* torch: F.cross_entropy(z, [0, 0, 0], reduction='none'), label_smoothing 0 and 0.1; argmax */
    const float z[4][3] = {{1.0f, NAN, 3.0f}, {1.0f, 2.0f, -INFINITY}, {1.0f, INFINITY, 0.0f}, {NAN, 1.0f, NAN}};
    const float want[2][4] = {{NAN, 1.31326162815094f, NAN, NAN}, {NAN, INFINITY, NAN, NAN}};
    const int64_t argmax[4] = {1, 1, 1, 0};
    const double eps[2] = {0.0, 0.1};
    for (int e = 0; e < 2; e++)
        for (int r = 0; r < 4; r++) {
            int32_t label = 0;
            float p[3], stats[2];
            int64_t zs[2] = {1, 3};
            kt k;
            kt_init(&k, GR_OP_SOFTMAX_CE, 2, 2, 1, true);
            k.node.attrs.label_smoothing = eps[e];
            k.node.attrs.ignore_index = -100;
            kt_tensor(&k.tin[0], 2, zs);
            k.a.in[0] = (void *)z[r], k.a.in[1] = &label;
            k.a.out[0] = p, k.a.out[1] = stats;
            gr_cpu_softmax_cross_entropy(&k.a);
            char what[64];
            snprintf(what, sizeof what, "cpu sce loss (eps %g) row", eps[e]);
            CHECK_SAME(what, r, stats[0], want[e][r]);
            CHECK_MSG(stats[1] == 1.0f, "cpu sce row %d: count %g, not 1", r, stats[1]);
            float c = cpu_top1(z[r], label);
            CHECK_MSG(c == (argmax[r] == 0 ? 1.0f : 0.0f), "cpu accuracy row %d: correct %g, argmax should be %d",
                      r, c, (int)argmax[r]);
            /* labelled at torch's argmax, the sample counts as correct */
            int32_t at = (int32_t)argmax[r];
            CHECK_MSG(cpu_top1(z[r], at) == 1.0f, "cpu accuracy row %d: label %d (torch.argmax) is not counted "
                      "correct", r, at);
            int64_t arg;
            double lb = body_sce_row(z[r], 3, label, eps[e], &arg);
            snprintf(what, sizeof what, "body sce loss (eps %g) row", eps[e]);
            CHECK_SAME(what, r, (float)lb, want[e][r]);
            CHECK_MSG(arg == argmax[r], "body sce row %d: argmax %lld, torch.argmax gives %lld", r, (long long)arg,
                      (long long)argmax[r]);
            /* the backward of a NaN row is NaN (p - target) */
            float dz[3];
            kt kb;
            kt_init(&kb, GR_OP_SOFTMAX_CE_BWD, 3, 1, 1, true);
            kb.node.attrs.label_smoothing = eps[e];
            kb.node.attrs.ignore_index = -100;
            kt_tensor(&kb.tin[0], 2, zs);
            kb.a.in[0] = p, kb.a.in[1] = &label, kb.a.in[2] = stats;
            kb.a.out[0] = dz;
            gr_cpu_softmax_cross_entropy_bwd(&kb.a);
            if (isnan(want[e][r])) CHECK_MSG(isnan(dz[0]) && isnan(dz[1]) && isnan(dz[2]), "sce bwd row %d", r);
        }
}

/* ---- clipping ---- */

static void test_clip(void) {
    /* torch.nn.utils.clip_grad_norm_: clip_coef = max_norm / (norm + 1e-6), clamped to 1: NaN stays NaN */
    CHECK(isnan(gr_clip_factor(NAN, 1.0)));
    CHECK(gr_clip_factor(INFINITY, 1.0) == 0.0f);
    CHECK(gr_clip_factor(0.5, 1.0) == 1.0f);
    /* the global norm of gradients with a NaN or an inf is not finite */
    float g[3] = {1.0f, NAN, 2.0f}, h[3] = {1.0f, INFINITY, 2.0f};
    CHECK(!isfinite(gr_cpu_sumsq(g, 3)) && !isfinite(gr_cpu_sumsq(h, 3)));
}

int main(void) {
    gr_error err = {0};
    CHECK(gr_backend_create("cpu", 1, &kt_be, &err) == GR_OK);
    for (int act = 0; act < GR_OP_COUNT; act++) /* every activation row of ops.def */
        if (gr_op_flags(act) & GR_OPF_ACT) test_act(act);
    test_dropout();
    test_maxpool();
    test_avgpool();
    test_batchnorm();
    test_dense("onednn");
    test_dense("openblas");
    test_conv("ref");
    test_conv("onednn");
    test_sce();
    test_clip();
    gr_backend_free(kt_be);
    return gr_test_report();
}
