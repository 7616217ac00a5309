/* test_body_half.c — the kernel bodies on half storage (body_half.h): the
 * bodies the CUDA backend runs natively on bf16 and fp16 activations
 * (activations and their backward, add and broadcast add, the batchnorm and bias reductions,
 * the batchnorm statistics' shift, bias add) against the staged reference
 * of kernels/backend.c: the same body on fp32 copies decoded from the half
 * arrays, its results encoded once (round to nearest even). They must agree
 * bit for bit (two NaNs of any payload count as equal): a native half
 * kernel computes in fp32 exactly as the staged one, only without the
 * copies. The bf16 activations and add are also checked against the CPU
 * backend's native bf16 spans (kernels/cpu/half_io.h), so both backends
 * store the same bits.
 *
 * Inputs: random half patterns over a wide range with zeros, ±inf and NaNs
 * mixed in. Reductions compare the doubles the bodies return; they read
 * the same decoded values in the same order, so they are equal exactly.
 * The checks have teeth: reading the bf16 arrays as fp16 fails them. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gr_test.h"
#include "common/gr_common.h"
#include "graph/graph.h"
#include "kernels/body_elem.h"
#include "kernels/body_shape.h"
#include "kernels/body_spatial.h"
#include "kernels/cpu/half_io.h"

static const int fmts[2] = {GR_BODY_BF16, GR_BODY_F16};
static const char *const fmt_name[2] = {"bf16", "fp16"};

static uint64_t rng = 0x1234567ull;
static uint32_t next_u32(void) { return (uint32_t)((rng = gr_hash64_hd(rng, 17)) >> 32); }

static uint16_t encode(int e, float v) { return e == GR_BODY_BF16 ? gr_bf16_encode_hd(v) : gr_fp16_encode_hd(v); }

/* n half patterns of values in about ±8 (±0.5 with small), with specials
 * (0, -0, ±inf, NaN) at about 1 in 64 when specials */
static uint16_t *rand_half(int e, int64_t n, bool small, bool specials) {
    static const float sp[5] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN};
    uint16_t *h = gr_xmalloc((size_t)n * sizeof *h);
    for (int64_t i = 0; i < n; i++) {
        uint32_t r = next_u32();
        float v = ((float)(r >> 8) / 16777216.0f * 2.0f - 1.0f) * (small ? 0.5f : 8.0f);
        if (specials && (r & 63u) == 0) v = sp[(r >> 6) % 5];
        h[i] = encode(e, v);
    }
    return h;
}

static float *decode_all(int e, const uint16_t *h, int64_t n) {
    float *f = gr_xmalloc((size_t)n * sizeof *f);
    for (int64_t i = 0; i < n; i++) f[i] = gr_ld_hd(h, e, i);
    return f;
}

/* the count of elements whose patterns differ (NaN matches NaN) */
static int64_t diff_half(int e, const uint16_t *a, const uint16_t *b, int64_t n, int64_t *first) {
    int64_t bad = 0;
    *first = -1;
    for (int64_t i = 0; i < n; i++) {
        float x = gr_ld_hd(a, e, i), y = gr_ld_hd(b, e, i);
        if (a[i] == b[i] || (x != x && y != y)) continue;
        if (!bad++) *first = i;
    }
    return bad;
}

#define CHECK_HALF(what, e, got, want, n) do { \
    int64_t first_; \
    int64_t bad_ = diff_half(e, got, want, n, &first_); \
    CHECK_MSG(bad_ == 0, "%s: %lld of %lld patterns differ (first at %lld: 0x%04x, want 0x%04x)", what, \
              (long long)bad_, (long long)(n), (long long)first_, first_ >= 0 ? (got)[first_] : 0, \
              first_ >= 0 ? (want)[first_] : 0); \
} while (0)

/* ---- activations ---- */

static void test_act(int f, int act, int64_t n) {
    const int e = fmts[f];
    char what[96];
    uint16_t *x = rand_half(e, n, false, true), *dy = rand_half(e, n, false, true);
    uint16_t *y = gr_xmalloc((size_t)n * 2), *dx = gr_xmalloc((size_t)n * 2);
    uint16_t *yr = gr_xmalloc((size_t)n * 2), *dxr = gr_xmalloc((size_t)n * 2);
    float *xf = decode_all(e, x, n), *dyf = decode_all(e, dy, n), *tmp = gr_xmalloc((size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; i++) gr_body_act(act, e, x, y, i);
    for (int64_t i = 0; i < n; i++) gr_body_act(act, GR_BODY_F32, xf, tmp, i);
    for (int64_t i = 0; i < n; i++) yr[i] = encode(e, tmp[i]);
    /* a row without its formula in body_elem.h computes NaN */
    CHECK_MSG(isfinite(gr_act_hd(act, 0.5f)) && isfinite(gr_act_bwd_hd(act, 1.0f, 0.5f)),
              "%s: no formula in kernels/body_elem.h", gr_op_name(act));
    snprintf(what, sizeof what, "%s %s forward", fmt_name[f], gr_op_name(act));
    CHECK_HALF(what, e, y, yr, n);

    /* backward from dy and the saved tensor (y; x on GR_OPF_ACT_SAVES_X rows), as stored */
    const uint16_t *t = gr_op_flags(act) & GR_OPF_ACT_SAVES_X ? x : y;
    float *tf = decode_all(e, t, n);
    for (int64_t i = 0; i < n; i++) gr_body_act_bwd(act, e, dy, t, dx, i);
    for (int64_t i = 0; i < n; i++) gr_body_act_bwd(act, GR_BODY_F32, dyf, tf, tmp, i);
    for (int64_t i = 0; i < n; i++) dxr[i] = encode(e, tmp[i]);
    snprintf(what, sizeof what, "%s %s backward", fmt_name[f], gr_op_name(act));
    CHECK_HALF(what, e, dx, dxr, n);

    if (e == GR_BODY_BF16 && act == GR_OP_RELU) { /* the CPU backend's native bf16 relu */
        gr_hio_relu_bf16(x, yr, n);
        CHECK_HALF("bf16 relu against the CPU's gr_hio_relu_bf16", e, y, yr, n);
        gr_hio_relu_bwd_bf16(dy, y, dxr, n);
        CHECK_HALF("bf16 relu backward against the CPU's gr_hio_relu_bwd_bf16", e, dx, dxr, n);
    }
    free(x); free(dy); free(y); free(dx); free(yr); free(dxr); free(xf); free(dyf); free(tf); free(tmp);
}

/* ---- add of 1..5 inputs ---- */

static void test_add(int f, int nin, int64_t n) {
    const int e = fmts[f];
    char what[96];
    uint16_t *x[GR_ELEM_MAX_IN];
    float *xf[GR_ELEM_MAX_IN];
    gr_add_in in, inf;
    memset(&in, 0, sizeof in);
    memset(&inf, 0, sizeof inf);
    in.nin = inf.nin = nin;
    in.e = e;
    inf.e = GR_BODY_F32;
    for (int k = 0; k < nin; k++) {
        x[k] = rand_half(e, n, false, true);
        xf[k] = decode_all(e, x[k], n);
        in.x[k] = x[k];
        inf.x[k] = xf[k];
    }
    uint16_t *y = gr_xmalloc((size_t)n * 2), *yr = gr_xmalloc((size_t)n * 2);
    float *tmp = gr_xmalloc((size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; i++) gr_body_add(&in, y, i);
    for (int64_t i = 0; i < n; i++) gr_body_add(&inf, tmp, i);
    for (int64_t i = 0; i < n; i++) yr[i] = encode(e, tmp[i]);
    snprintf(what, sizeof what, "%s add of %d inputs", fmt_name[f], nin);
    CHECK_HALF(what, e, y, yr, n);
    if (e == GR_BODY_BF16 && nin == 2) {
        gr_hio_add2_bf16(x[0], x[1], yr, n);
        CHECK_HALF("bf16 add of 2 against the CPU's gr_hio_add2_bf16", e, y, yr, n);
    }
    for (int k = 0; k < nin; k++) {
        free(x[k]);
        free(xf[k]);
    }
    free(y); free(yr); free(tmp);
}

/* ---- broadcast add: [3, 4, 5, 6] + [3, 4, 1, 1] + [3, 1, 5, 1] ---- */

static void test_bcast_add(int f) {
    const int e = fmts[f];
    static const int64_t dim[4] = {3, 4, 5, 6}, shp[3][4] = {{3, 4, 5, 6}, {3, 4, 1, 1}, {3, 1, 5, 1}};
    gr_bcast_in in, inf;
    memset(&in, 0, sizeof in);
    uint16_t *x[3];
    float *xf[3];
    for (int k = 0; k < 3; k++) {
        int64_t m = 1, step = 1;
        for (int d = 0; d < 4; d++) m *= shp[k][d];
        for (int d = 3; d >= 0; d--) { /* row-major strides, 0 on axes of 1 */
            in.xs[k][d] = shp[k][d] == 1 ? 0 : step;
            step *= shp[k][d];
        }
        x[k] = rand_half(e, m, false, true);
        xf[k] = decode_all(e, x[k], m);
        in.x[k] = x[k];
    }
    for (int d = 0; d < 4; d++) in.dim[d] = dim[d];
    in.ys[3] = 1; in.ys[2] = 6; in.ys[1] = 30; in.ys[0] = 120;
    in.nin = 3;
    in.e = e;
    inf = in;
    inf.e = GR_BODY_F32;
    for (int k = 0; k < 3; k++) inf.x[k] = xf[k];
    const int64_t n = 360;
    uint16_t *y = gr_xmalloc((size_t)n * 2), *yr = gr_xmalloc((size_t)n * 2);
    float *tmp = gr_xmalloc((size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; i++) gr_body_bcast(&in, y, i);
    for (int64_t i = 0; i < n; i++) gr_body_bcast(&inf, tmp, i);
    for (int64_t i = 0; i < n; i++) yr[i] = encode(e, tmp[i]);
    char what[64];
    snprintf(what, sizeof what, "%s broadcast add of 3", fmt_name[f]);
    CHECK_HALF(what, e, y, yr, n);
    for (int k = 0; k < 3; k++) { free(x[k]); free(xf[k]); }
    free(y); free(yr); free(tmp);
}

/* ---- per-channel reductions, batchnorm's shift, bias add ---- */

/* every thread's partial sums of every slice of every channel: the typed
 * body on half arrays against the fp32 body on their decoded copies */
static void test_chan(int f, int64_t n, int64_t c, int64_t inner) {
    const int e = fmts[f];
    const int64_t total = n * c * inner;
    char what[128];
    gr_chan_geo g = gr_chan_geo_make(n, c, inner);
    uint16_t *x = rand_half(e, total, false, false), *dy = rand_half(e, total, true, false);
    float *xf = decode_all(e, x, total), *dyf = decode_all(e, dy, total);
    int64_t threads = g.cols ? 1 : GR_CHAN_THREADS, bad[3] = {0, 0, 0};
    for (int64_t ch = 0; ch < c; ch++)
        for (int64_t s = 0; s < g.slices; s++)
            for (int64_t t = 0; t < threads; t++) {
                int64_t e0, e1, step;
                double a1, a2, b1, b2;
                gr_chan_span(&g, s, t, &e0, &e1, &step);
                gr_body_bn_stats_part(&g, x, e, ch, e0, e1, step, &a1, &a2);
                gr_body_bn_stats_part(&g, xf, GR_BODY_F32, ch, e0, e1, step, &b1, &b2);
                bad[0] += a1 != b1 || a2 != b2;
                gr_body_bn_grad_part(&g, dy, x, e, 0.25f, ch, e0, e1, step, &a1, &a2);
                gr_body_bn_grad_part(&g, dyf, xf, GR_BODY_F32, 0.25f, ch, e0, e1, step, &b1, &b2);
                bad[1] += a1 != b1 || a2 != b2;
                a1 = gr_body_bias_grad_part(&g, dy, e, ch, e0, e1, step);
                b1 = gr_body_bias_grad_part(&g, dyf, GR_BODY_F32, ch, e0, e1, step);
                bad[2] += a1 != b1;
            }
    static const char *const kind[3] = {"batchnorm statistics", "batchnorm gradient sums", "bias gradient"};
    for (int k = 0; k < 3; k++) {
        snprintf(what, sizeof what, "%s %s [%lld][%lld][%lld]", fmt_name[f], kind[k], (long long)n, (long long)c,
                 (long long)inner);
        CHECK_MSG(bad[k] == 0, "%s: %lld partials differ", what, (long long)bad[k]);
    }

    /* the statistics' finish reads each channel's first element (the shift) */
    float w[4] = {1.5f, -0.5f, 2.0f, 0.75f}, b[4] = {0.1f, 0.2f, -0.3f, 0.0f};
    float sv[2][8], rm[2][4] = {{0}}, rv[2][4] = {{1, 1, 1, 1}, {1, 1, 1, 1}}, cf[2][16];
    int64_t cc = c < 4 ? c : 4;
    gr_chan_geo g4 = gr_chan_geo_make(n, cc, inner);
    for (int64_t ch = 0; ch < cc; ch++) {
        gr_body_bn_train_finish(&g4, ch, 3.0, 40.0, x, e, 1e-5, 0.1, w, b, sv[0], rm[0], rv[0], cf[0]);
        gr_body_bn_train_finish(&g4, ch, 3.0, 40.0, xf, GR_BODY_F32, 1e-5, 0.1, w, b, sv[1], rm[1], rv[1], cf[1]);
    }
    snprintf(what, sizeof what, "%s batchnorm finish (shift by the first element)", fmt_name[f]);
    CHECK_MSG(memcmp(sv[0], sv[1], sizeof(float) * 2 * (size_t)cc) == 0 &&
              memcmp(cf[0], cf[1], sizeof(float) * 4 * (size_t)cc) == 0, "%s: results differ", what);

    /* bias add, rounded once into the half output */
    float bias[64];
    for (int k = 0; k < 64; k++) bias[k] = (float)k * 0.37f - 11.0f;
    int64_t cb = c < 64 ? c : 64, tb = n * cb * inner;
    uint16_t *y = rand_half(e, tb, false, true), *yr = gr_xmalloc((size_t)tb * 2);
    for (int64_t i = 0; i < tb; i++) yr[i] = encode(e, gr_ld_hd(y, e, i) + bias[gr_chan_of(i, inner, cb)]);
    for (int64_t i = 0; i < tb; i++) gr_body_bias_add(y, e, bias, i, gr_chan_of(i, inner, cb));
    snprintf(what, sizeof what, "%s bias add", fmt_name[f]);
    CHECK_HALF(what, e, y, yr, tb);
    free(x); free(dy); free(xf); free(dyf); free(y); free(yr);
}

/* Teeth: the bf16 patterns read as fp16 give other values, and other sums. */
static void test_teeth(void) {
    const int64_t n = 4096;
    uint16_t *x = rand_half(GR_BODY_BF16, n, false, false), *y = gr_xmalloc((size_t)n * 2);
    uint16_t *yr = gr_xmalloc((size_t)n * 2);
    for (int64_t i = 0; i < n; i++) gr_body_act(GR_OP_TANH, GR_BODY_F16, x, y, i);
    for (int64_t i = 0; i < n; i++) yr[i] = gr_bf16_encode_hd(tanhf(gr_bf16_decode_hd(x[i])));
    int64_t first;
    CHECK_MSG(diff_half(GR_BODY_BF16, y, yr, n, &first) > n / 2, "reading bf16 as fp16 went unnoticed");
    gr_chan_geo g = gr_chan_geo_make(8, 2, 64);
    double a1, a2, b1, b2;
    gr_body_bn_stats_part(&g, x, GR_BODY_BF16, 1, 0, g.m, 1, &a1, &a2);
    gr_body_bn_stats_part(&g, x, GR_BODY_F16, 1, 0, g.m, 1, &b1, &b2);
    CHECK(a1 != b1 && a2 != b2);
    free(x); free(y); free(yr);
}

int main(void) {
    for (int f = 0; f < 2; f++) {
        for (int act = 0; act < GR_OP_COUNT; act++) /* every activation row of ops.def */
            if (gr_op_flags(act) & GR_OPF_ACT) test_act(f, act, 20011);
        for (int nin = 1; nin <= GR_ELEM_MAX_IN; nin++) test_add(f, nin, 10007);
        test_bcast_add(f);
        test_chan(f, 3, 5, 49);    /* planes */
        test_chan(f, 16, 3, 300);  /* planes, several slices */
        test_chan(f, 70, 37, 1);   /* columns ([n, c]) */
    }
    test_teeth();
    return gr_test_report();
}
