/* body_check.h — what the host/device body tests of tests/ops/test_op_*.c
 * share: each drives a CUDA kernel's body (kernels/body_*.h) on the CPU
 * over the whole grid the kernel covers and compares it with the CPU
 * backend's kernel on fresh random inputs. Needs no GPU and no CUDA headers.
 *   - kt_*, rand_floats, max_rel, TOL: the elementwise bodies (activations,
 *     dropout, add, concat, softmax cross-entropy);
 *   - t_*, CHECK_CLOSE_ARR, CHECK_SAME_ARR: the spatial bodies (pooling,
 *     batchnorm, bias), with t_chan_sums for the per-channel reductions.
 * The two keep their own random streams (g_key, t_key). */
#ifndef GR_TEST_BODY_CHECK_H
#define GR_TEST_BODY_CHECK_H

#include <stdlib.h>
#include <string.h>

#include "gr_test.h"
#include "kargs_fixture.h"
#include <omp.h>

#include "kernels/body_elem.h"
#include "kernels/body_spatial.h"
#include "kernels/cpu/cpu.h"
#include "kernels/cpu/cpu_kernels.h"

/* ==== the elementwise bodies ==== */

/* ---- inputs and comparisons ---- */

static uint64_t g_key = 0x7E57E1E3ull;

/* n values uniform in [lo, hi) from a fresh stream */
static inline float *rand_floats(int64_t n, float lo, float hi) {
    float *x = gr_xmalloc((size_t)(n > 0 ? n : 1) * sizeof *x);
    uint64_t key = gr_hash64(g_key++, 1);
    for (int64_t i = 0; i < n; i++) x[i] = lo + (hi - lo) * gr_uniform(key, (uint64_t)i);
    return x;
}

/* Relative tolerance: two float ulps. Both sides call the same libm and
 * round the same float/double expressions, so today they agree exactly; the
 * margin is for sums the kernels group differently (the loss's rows, a
 * row's exponentials), which may move a result by an ulp. */
#define TOL 2.5e-7

/* max_i |got - want| / (|want| + floor), its index in *at */
static inline double max_rel(const float *got, const float *want, int64_t n, double floor, int64_t *at) {
    double worst = 0.0;
    *at = -1;
    for (int64_t i = 0; i < n; i++) {
        double e = fabs((double)got[i] - (double)want[i]) / (fabs((double)want[i]) + floor);
        if (e > worst || e != e) {
            worst = e != e ? INFINITY : e;
            *at = i;
        }
    }
    return worst;
}

/* ---- hand-built kernel arguments for the CPU kernels ---- */

/* The CPU backend whose state (GEMM provider, conv scratch) the kernels use;
 * made at the first kt_init or t_args_init. */
static gr_backend *t_be;

static inline gr_backend *t_cpu(void) {
    if (!t_be) {
        gr_error err = {0};
        CHECK(gr_backend_create("cpu", omp_get_max_threads(), &t_be, &err) == GR_OK);
    }
    return t_be;
}

static inline void kt_tensor(gr_tensor *t, gr_elem e, int ndim, const int64_t *shape) {
    kt_tensor_of(t, e, true, ndim, shape);
}

/* kargs of op with nin inputs and nout outputs, run on n samples */
static inline void kt_init(kt *k, gr_op op, int nin, int nout, int64_t n) {
    kt_setup(k, t_cpu(), op, nin, nout, n, true);
}

/* ==== the spatial bodies ==== */

/* a fresh random stream per array */
static uint64_t t_key = 1000;

static inline float *t_alloc(int64_t n) { return gr_xcalloc((size_t)(n > 0 ? n : 1), sizeof(float)); }

/* lo + (hi - lo) * uniform */
static inline float *t_rand(int64_t n, float lo, float hi) {
    float *p = t_alloc(n);
    uint64_t key = t_key++;
    for (int64_t i = 0; i < n; i++) p[i] = lo + (hi - lo) * gr_uniform(key, (uint64_t)i);
    return p;
}

static inline float *t_copy(const float *src, int64_t n) {
    float *p = t_alloc(n);
    memcpy(p, src, (size_t)n * sizeof *p);
    return p;
}

/* max |got - ref| / max |ref| (NaN where only one side is NaN counts as
 * infinite); *at = the worst index. */
static inline double t_err(const float *got, const float *ref, int64_t n, int64_t *at) {
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

/* ---- the same kernel arguments, under the spatial tests' names ---- */

typedef kt t_args;

static inline void t_tensor(gr_tensor *t, gr_elem elem, bool batched, int ndim, const int64_t *shape) {
    kt_tensor_of(t, elem, batched, ndim, shape);
}

static inline void t_args_init(t_args *t, gr_op op, int nin, int nout, int64_t n, bool training) {
    kt_setup(t, t_cpu(), op, nin, nout, n, training);
}

/* The stage-1 partials of one reduction, summed per channel in slice order
 * as the stage-2 warp does (in double; the GPU's tree only reorders double
 * additions): kind 0 batchnorm statistics of a, 1 batchnorm gradient sums
 * of (dy = a, x = b, mean = saved[ch]), 2 bias gradient of a. */
static inline void t_chan_sums(const gr_chan_geo *g, int kind, const float *a, const float *b, const float *saved,
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
                if (kind == 0) gr_body_bn_stats_part(g, a, GR_BODY_F32, ch, e0, e1, step, &u, &v);
                else if (kind == 1) gr_body_bn_grad_part(g, a, b, GR_BODY_F32, saved[ch], ch, e0, e1, step, &u, &v);
                else u = gr_body_bias_grad_part(g, a, GR_BODY_F32, ch, e0, e1, step);
                p1 += u;
                p2 += v;
            }
            s1[ch] += p1;
            s2[ch] += p2;
        }
    }
}

#endif
