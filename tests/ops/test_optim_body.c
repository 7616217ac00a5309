/* test_optim_body.c — the bodies of the CUDA optimizer kernels
 * (kernels/body_optim.h), driven on the CPU over whole arrays of odd
 * sizes, against the CPU updates (kernels/cpu/optim.h):
 *   - SGD with momentum 0 (no buffer, as gr_cu_sgd passes), momentum, and
 *     nesterov, with and without weight decay, over several steps with fresh
 *     gradients: weights and momentum buffers;
 *   - AdamW over several steps (t = 1, 2, ...), the per-call scalars from
 *     gr_optim_adamw_k as gr_cu_adamw computes them: weights and moments;
 *   - the sum of squares as gr_sumsq_kernel + gr_sum_doubles_kernel run it
 *     (grid-strided partials, a shared-memory tree per block, the blocks in
 *     order), against gr_cpu_sumsq.
 * Needs no GPU. */
#include <stdlib.h>
#include <string.h>

#include "common/gr_common.h"
#include "gr_test.h"
#include "kernels/cpu/optim.h"
#include "kernels/body_optim.h"

/* Two float ulps: the body and the CPU loop evaluate the same float
 * expressions in the same order, so they agree exactly today. */
#define TOL 2.5e-7

static uint64_t g_key = 0x0971A1ull;

static float *rand_floats(int64_t n, float lo, float hi) {
    float *x = gr_xmalloc((size_t)(n > 0 ? n : 1) * sizeof *x);
    uint64_t key = gr_hash64(g_key++, 3);
    for (int64_t i = 0; i < n; i++) x[i] = lo + (hi - lo) * gr_uniform(key, (uint64_t)i);
    return x;
}

static float *copy_floats(const float *x, int64_t n) {
    float *y = gr_xmalloc((size_t)(n > 0 ? n : 1) * sizeof *y);
    memcpy(y, x, (size_t)n * sizeof *y);
    return y;
}

/* max_i |got - want| / (|want| + 1e-30), its index in *at */
static double max_rel(const float *got, const float *want, int64_t n, int64_t *at) {
    double worst = 0.0;
    *at = -1;
    for (int64_t i = 0; i < n; i++) {
        double e = fabs((double)got[i] - (double)want[i]) / (fabs((double)want[i]) + 1e-30);
        if (e > worst || e != e) {
            worst = e != e ? INFINITY : e;
            *at = i;
        }
    }
    return worst;
}

static void check_array(const char *what, int step, const float *got, const float *want, int64_t n) {
    int64_t at;
    double e = max_rel(got, want, n, &at);
    CHECK_MSG(e <= TOL, "%s, n %lld, step %d: rel. error %.3g at %lld (body %.9g, cpu %.9g)", what, (long long)n,
              step, e, (long long)at, at >= 0 ? got[at] : 0.0, at >= 0 ? want[at] : 0.0);
}

static void test_sgd(int64_t n, float momentum, bool nesterov, float wd) {
    char what[96];
    snprintf(what, sizeof what, "sgd momentum %g%s wd %g", momentum, nesterov ? " nesterov" : "", wd);
    float *w = rand_floats(n, -1.0f, 1.0f), *w_ref = copy_floats(w, n), *w0 = copy_floats(w, n);
    float *buf = calloc((size_t)n + 1, sizeof *buf), *buf_ref = calloc((size_t)n + 1, sizeof *buf_ref);
    for (int step = 1; step <= 4; step++) {
        float *g = rand_floats(n, -2.0f, 2.0f);
        gr_sgd_hparams h = {.lr = 0.05f * (float)step, .momentum = momentum, .weight_decay = wd,
                            .grad_mult = 0.5f, .nesterov = nesterov};
        gr_cpu_sgd_update(w_ref, g, momentum != 0.0f ? buf_ref : NULL, n, &h, NULL);
        gr_optim_k k = gr_optim_sgd_k(&h);
        float *b = h.momentum != 0.0f ? buf : NULL; /* as gr_cu_sgd chooses */
        for (int64_t i = 0; i < n; i++) gr_body_sgd(&k, w, g, b, i);
        check_array(what, step, w, w_ref, n);
        if (momentum != 0.0f) check_array(what, step, buf, buf_ref, n);
        free(g);
    }
    /* the steps moved the weights, so agreeing above meant something */
    int64_t at;
    CHECK_MSG(max_rel(w, w0, n, &at) > 1e-3, "%s: the weights did not move", what);
    free(w); free(w0); free(w_ref); free(buf); free(buf_ref);
}

static void test_adamw(int64_t n, float wd, float grad_mult) {
    char what[96];
    snprintf(what, sizeof what, "adamw wd %g grad_mult %g", wd, grad_mult);
    float *w = rand_floats(n, -1.0f, 1.0f), *w_ref = copy_floats(w, n);
    float *m = calloc((size_t)n + 1, sizeof *m), *m_ref = calloc((size_t)n + 1, sizeof *m_ref);
    float *v = calloc((size_t)n + 1, sizeof *v), *v_ref = calloc((size_t)n + 1, sizeof *v_ref);
    for (int step = 1; step <= 5; step++) {
        float *g = rand_floats(n, -3.0f, 3.0f);
        gr_adamw_hparams h = {.lr = 1e-3f * (float)step, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f,
                              .weight_decay = wd, .grad_mult = grad_mult, .t = step};
        gr_cpu_adamw_update(w_ref, g, m_ref, v_ref, n, &h, NULL);
        gr_optim_k k = gr_optim_adamw_k(&h);
        for (int64_t i = 0; i < n; i++) gr_body_adamw(&k, w, g, m, v, i);
        check_array(what, step, w, w_ref, n);
        check_array(what, step, m, m_ref, n);
        check_array(what, step, v, v_ref, n);
        free(g);
    }
    free(w); free(w_ref); free(m); free(m_ref); free(v); free(v_ref);
}

/* gr_cu_sumsq's two kernels, thread by thread: GR_SUMSQ_BLOCKS blocks of
 * 256 threads (optim.cu: GR_SUMSQ_SCRATCH, GR_CU_THREADS) */
#define SUMSQ_BLOCKS 256
#define SUMSQ_THREADS 256
static double sim_sumsq(const float *g, int64_t n) {
    static double part[SUMSQ_BLOCKS], sh[SUMSQ_THREADS];
    const int64_t T = (int64_t)SUMSQ_BLOCKS * SUMSQ_THREADS;
    for (int b = 0; b < SUMSQ_BLOCKS; b++) {
        for (int t = 0; t < SUMSQ_THREADS; t++) sh[t] = gr_body_sumsq_part(g, n, (int64_t)b * SUMSQ_THREADS + t, T);
        for (int k = SUMSQ_THREADS / 2; k > 0; k >>= 1)
            for (int t = 0; t < k; t++) sh[t] += sh[t + k];
        part[b] = sh[0];
    }
    double s = 0.0;
    for (int b = 0; b < SUMSQ_BLOCKS; b++) s += part[b];
    return s;
}

static void test_sumsq(int64_t n) {
    float *g = rand_floats(n, -2.0f, 2.0f);
    double got = sim_sumsq(g, n), want = gr_cpu_sumsq(g, n);
    CHECK_MSG(fabs(got - want) <= 1e-12 * want, "sumsq n %lld: %.17g, cpu %.17g", (long long)n, got, want);
    CHECK(n == 0 || got > 0.0);
    free(g);
}

int main(void) {
    const int64_t sizes[] = {1, 7, 1001, 65537, 100003};
    for (int s = 0; s < 5; s++) {
        const int64_t n = sizes[s];
        test_sgd(n, 0.0f, false, 0.0f);
        test_sgd(n, 0.0f, false, 1e-4f);
        test_sgd(n, 0.9f, false, 0.0f);
        test_sgd(n, 0.9f, false, 5e-4f);
        test_sgd(n, 0.9f, true, 5e-4f);
        test_adamw(n, 0.0f, 1.0f);
        test_adamw(n, 0.01f, 0.25f);
        test_sumsq(n);
    }
    test_sumsq(0);
    test_sumsq(3 * 256 * 256 + 5); /* every thread strides more than once */

    /* the AdamW scalars: t = 1 and a late step, against their definition */
    gr_adamw_hparams h = {.lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, .weight_decay = 0.1f,
                          .grad_mult = 1.0f, .t = 1};
    gr_optim_k k = gr_optim_adamw_k(&h);
    CHECK_CLOSE(k.step_size, 1e-3 / (1.0 - 0.9f), 1e-7, 0.0);
    CHECK_CLOSE(k.bc2_sqrt, sqrt(1.0 - 0.999f), 1e-7, 0.0);
    CHECK_CLOSE(k.decay, 1.0 - 1e-4, 1e-7, 0.0);
    h.t = 100000;
    k = gr_optim_adamw_k(&h);
    CHECK_CLOSE(k.step_size, 1e-3, 1e-6, 0.0);
    CHECK_CLOSE(k.bc2_sqrt, 1.0, 1e-6, 0.0);
    return gr_test_report();
}
