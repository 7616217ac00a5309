/* test_body_spatial.c — the bodies of the CUDA spatial kernels
 * (kernels/cuda/body_spatial.h), driven on the CPU over the whole grid each
 * kernel covers (and, for the reductions, in the kernels' stages: thread
 * partials per slice, per-channel finish, elementwise pass), against the CPU
 * backend's kernels on fresh random inputs:
 *   - maxpool forward (values and argmax) and backward, bit for bit, with
 *     ties (the first maximum in scan order) and NaN, padding, strides
 *     unequal to the kernel, odd and non-square sizes;
 *   - avgpool forward and backward, count_include_pad true and false, bit
 *     for bit (but for the CPU's reordering of rows wider than 256);
 *   - global_avgpool forward (the warp's lane partials and shuffle tree)
 *     and backward;
 *   - batchnorm training (y, saved, running stats over two steps with two
 *     momenta), eval, and backward in both modes (dw/db accumulate; with
 *     and without dx), 4-D (planes mode, one and several slices) and 2-D
 *     (columns mode), including a channel with |mean| >> std;
 *   - the reduction geometry: every element of a channel visited exactly
 *     once, the partials within the device scratch;
 *   - bias add (exact) and bias gradient against a double loop and against
 *     the db of kernels/cpu/dense.c and conv.c, one and several slices.
 * Needs no GPU and no CUDA headers. */
#include <stdlib.h>
#include <string.h>

#include "gr_test.h"
#include "kernels/cpu/conv.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cuda/body_spatial.h"

static uint64_t g_key = 1000; /* a fresh random stream per array */

static float *t_alloc(int64_t n) { return gr_xcalloc((size_t)(n > 0 ? n : 1), sizeof(float)); }

/* lo + (hi - lo) * uniform */
static float *t_rand(int64_t n, float lo, float hi) {
    float *p = t_alloc(n);
    uint64_t key = g_key++;
    for (int64_t i = 0; i < n; i++) p[i] = lo + (hi - lo) * gr_uniform(key, (uint64_t)i);
    return p;
}

static float *t_copy(const float *src, int64_t n) {
    float *p = t_alloc(n);
    memcpy(p, src, (size_t)n * sizeof *p);
    return p;
}

/* max |got - ref| / max |ref| (NaN where only one side is NaN counts as
 * infinite); *at = the worst index. */
static double t_err(const float *got, const float *ref, int64_t n, int64_t *at) {
    double scale = 0.0, worst = 0.0;
    *at = -1;
    for (int64_t i = 0; i < n; i++)
        if (fabs((double)ref[i]) > scale) scale = fabs((double)ref[i]);
    if (scale == 0.0) scale = 1.0;
    for (int64_t i = 0; i < n; i++) {
        double d = (isnan(got[i]) != isnan(ref[i])) ? INFINITY
                 : isnan(ref[i]) ? 0.0 : fabs((double)got[i] - (double)ref[i]) / scale;
        if (d > worst || *at < 0) {
            if (d > worst) worst = d;
            *at = i;
        }
    }
    return worst;
}

#define CHECK_CLOSE_ARR(what, got, ref, n, tol) do { \
    int64_t at_; \
    double e_ = t_err(got, ref, n, &at_); \
    CHECK_MSG(e_ <= (tol), "%s: error %.3g > %.3g at index %lld (got %.9g, want %.9g)", what, e_, (double)(tol), \
              (long long)at_, (double)(got)[at_], (double)(ref)[at_]); \
} while (0)

/* Bitwise equality of n 4-byte values; reports the first difference. */
#define CHECK_SAME_ARR(what, got, ref, n) do { \
    int64_t d_ = -1; \
    for (int64_t i_ = 0; i_ < (n) && d_ < 0; i_++) \
        if (memcmp(&(got)[i_], &(ref)[i_], 4) != 0) d_ = i_; \
    CHECK_MSG(d_ < 0, "%s: differs at index %lld (got %.9g, want %.9g)", what, (long long)d_, \
              d_ < 0 ? 0.0 : (double)(got)[d_], d_ < 0 ? 0.0 : (double)(ref)[d_]); \
} while (0)

/* ---- hand-built kernel arguments for the CPU kernels ---- */

typedef struct t_args {
    gr_node node;
    gr_tensor tin[GR_MAX_IN], tout[GR_MAX_OUT];
    gr_exec_ctx ctx;
    gr_kargs a;
} t_args;

static void t_tensor(gr_tensor *t, gr_elem elem, bool batched, int ndim, const int64_t *shape) {
    memset(t, 0, sizeof *t);
    t->elem = elem;
    t->batched = batched;
    t->ndim = ndim;
    for (int d = 0; d < ndim; d++) t->shape[d] = shape[d];
    t->alias_of = t->grad = t->layer = -1;
}

static void t_args_init(t_args *t, gr_op op, int nin, int nout, int64_t n, bool training) {
    memset(t, 0, sizeof *t);
    t->node.op = op;
    t->node.nin = nin;
    t->node.nout = nout;
    t->node.fwd = -1;
    t->ctx.training = training;
    t->a.node = &t->node;
    t->a.n = n;
    t->a.ctx = &t->ctx;
    for (int i = 0; i < GR_MAX_IN; i++) t->a.tin[i] = &t->tin[i];
    for (int i = 0; i < GR_MAX_OUT; i++) t->a.tout[i] = &t->tout[i];
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

/* The stage-1 partials of one reduction, summed per channel in slice order
 * as the stage-2 warp does (in double; the GPU's tree only reorders double
 * additions): kind 0 batchnorm statistics of a, 1 batchnorm gradient sums
 * of (dy = a, x = b, mean = saved[ch]), 2 bias gradient of a. */
static void t_chan_sums(const gr_chan_geo *g, int kind, const float *a, const float *b, const float *saved,
                        double *s1, double *s2) {
    int64_t threads = g->cols ? 1 : GR_CHAN_THREADS;
    for (int64_t ch = 0; ch < g->c; ch++) {
        s1[ch] = s2[ch] = 0.0;
        for (int64_t s = 0; s < g->slices; s++) {
            double p1 = 0.0, p2 = 0.0;
            for (int64_t t = 0; t < threads; t++) {
                int64_t e0, e1, step;
                double u = 0.0, v = 0.0;
                gr_chan_span(g, s, t, &e0, &e1, &step);
                if (kind == 0) gr_body_bn_stats_part(g, a, ch, e0, e1, step, &u, &v);
                else if (kind == 1) gr_body_bn_grad_part(g, a, b, saved[ch], ch, e0, e1, step, &u, &v);
                else u = gr_body_bias_grad_part(g, a, ch, e0, e1, step);
                p1 += u;
                p2 += v;
            }
            s1[ch] += p1;
            s2[ch] += p2;
        }
    }
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
            gr_body_bn_train_finish(&g, ch, s1[ch], s2[ch], x, q->eps, q->momentum, w, b, saved2, rm2, rv2, coef);
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
    for (int64_t i = 0; i < total; i++) gr_body_bias_add(y2, b, i, gr_chan_of(i, inner, c));
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
        gr_cpu_conv_ref_bwd_params(&s, dy, xin, dwt, db3);
        snprintf(w2, sizeof w2, "%s: grad vs kernels/cpu/conv.c", what);
        CHECK_CLOSE_ARR(w2, db2, db3, c, 1e-6);
    }
    free(y); free(b); free(y2); free(dy); free(db); free(db2); free(db3); free(s1); free(s2); free(xin); free(dwt);
}

int main(void) {
    /* pooling: n, c, h, w, kh, kw, sh, sw, ph, pw */
    const t_pool pools[] = {
        {2, 3, 13, 11, 3, 3, 2, 2, 1, 1},   /* ResNet's stem pool on odd sizes */
        {2, 2, 9, 7, 2, 2, 2, 2, 0, 0},     /* kernel = stride, a ragged edge */
        {1, 3, 10, 12, 3, 2, 1, 3, 1, 1},   /* stride 1 and 3, overlapping rows */
        {2, 1, 17, 16, 5, 5, 3, 3, 2, 2},   /* stride < kernel, wide padding */
        {1, 2, 8, 8, 3, 3, 1, 1, 1, 1},     /* every input under up to 9 windows */
        {1, 1, 4, 5, 4, 5, 1, 1, 0, 0},     /* one window per plane */
        {1, 2, 5, 600, 3, 3, 1, 2, 1, 1},   /* rows of more than 256 outputs */
    };
    for (size_t i = 0; i < sizeof pools / sizeof pools[0]; i++) {
        for (int mode = 0; mode < 3; mode++) test_maxpool(&pools[i], mode);
        test_avgpool(&pools[i], true);
        test_avgpool(&pools[i], false);
    }

    test_global_avgpool(2, 5, 7, 7);
    test_global_avgpool(3, 4, 1, 1);
    test_global_avgpool(2, 3, 37, 29);
    test_global_avgpool(1, 2, 112, 112);

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

    /* batchnorm: n, c, h, w (0: 2-D), momentum, eps, offset, spread */
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

    /* bias: n, c, inner */
    test_bias(256, 4096, 1);   /* dense, several slices per column */
    test_bias(3, 10, 1);       /* one slice */
    test_bias(2, 70000, 1);    /* more channels than partials */
    test_bias(5, 6, 63);       /* conv, one slice */
    test_bias(4, 3, 12544);    /* conv, several slices */
    test_bias(7, 5, 49);
    return gr_test_report();
}
