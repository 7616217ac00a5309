/* test_op_loss.c — softmax cross-entropy, the loss (graph/op_loss.c):
 *   - finite-difference gradchecks through the real pipeline on the backend
 *     named on the command line (gradcheck.h: `cpu` or `cuda`), label
 *     smoothing 0 and 0.1;
 *   - the body (body_check.h), on the CPU against the CPU kernel: the
 *     forward as the kernel runs it (warps of lanes, butterflies,
 *     fixed-order block sums; rows beyond the grid's warps; ties in the
 *     argmax), label smoothing 0 and 0.1: probabilities, loss sum and
 *     correct count; and its backward with a gradient scale. With `cpu`
 *     only. */
#include "body_check.h"
#include "gradcheck.h"

/* ---- gradchecks ---- */

static void test_gradchecks(void) {
    static const gr_gc_case cases[] = {
        {"softmax_cross_entropy", "[{dense: {units: 6}}]", 1, {5}, 0.0, 0.0, NULL},
        {"cross_entropy smoothing 0.1", "[{dense: {units: 6}}]", 1, {5}, 0.1, 0.0, NULL},
    };
    for (size_t i = 0; i < GR_ARRAY_LEN(cases); i++) gr_gc_run(&cases[i]);
}

/* ---- softmax cross-entropy ---- */

#define LANES GR_SCE_LANES

/* gr_sce_rows_kernel + gr_sce_stats_kernel of elem.cu, thread by thread:
 * lanes' parts, xor butterflies, per-warp row sums, per-block warp sums,
 * block sums in order. Each lane uses its own merged values, as on the GPU. */
static void sim_sce(const float *z, const int32_t *label, float *p, float *stats, int64_t n, int64_t k, double eps,
                    int *lanes_disagree) {
    const int64_t blocks = gr_sce_blocks(n), W = blocks * GR_SCE_WARPS;
    double part[2 * GR_SCE_MAX_BLOCKS];
    for (int64_t b = 0; b < blocks; b++) {
        double wloss[GR_SCE_WARPS], wcorrect[GR_SCE_WARPS];
        for (int w = 0; w < GR_SCE_WARPS; w++) {
            double loss = 0.0, correct = 0.0;
            for (int64_t r = b * GR_SCE_WARPS + w; r < n; r += W) {
                const float *zr = z + r * k;
                float *pr = p + r * k;
                float m[LANES], m0[LANES];
                int64_t arg[LANES], a0[LANES];
                for (int l = 0; l < LANES; l++) gr_body_sce_max_part(zr, k, l, LANES, &m[l], &arg[l]);
                for (int o = LANES / 2; o > 0; o >>= 1) {
                    memcpy(m0, m, sizeof m);
                    memcpy(a0, arg, sizeof arg);
                    for (int l = 0; l < LANES; l++) gr_sce_max_combine(&m[l], &arg[l], m0[l ^ o], a0[l ^ o]);
                }
                double sum[LANES], zsum[LANES], s0[LANES], z0[LANES];
                for (int l = 0; l < LANES; l++) gr_body_sce_exp_part(zr, pr, k, m[l], l, LANES, &sum[l], &zsum[l]);
                for (int o = LANES / 2; o > 0; o >>= 1) {
                    memcpy(s0, sum, sizeof sum);
                    memcpy(z0, zsum, sizeof zsum);
                    for (int l = 0; l < LANES; l++) {
                        sum[l] = s0[l] + s0[l ^ o];
                        zsum[l] = z0[l] + z0[l ^ o];
                    }
                }
                for (int l = 1; l < LANES; l++)
                    *lanes_disagree += m[l] != m[0] || arg[l] != arg[0] || sum[l] != sum[0] || zsum[l] != zsum[0];
                const int32_t y = label[r];
                loss += gr_sce_row_loss(sum[0], zsum[0], zr[y] - m[0], k, eps);
                correct += arg[0] == y;
                for (int l = 0; l < LANES; l++) gr_body_sce_scale_part(pr, k, gr_sce_inv(sum[l]), l, LANES);
            }
            wloss[w] = loss;
            wcorrect[w] = correct;
        }
        double l = 0.0, c = 0.0;
        for (int w = 0; w < GR_SCE_WARPS; w++) {
            l += wloss[w];
            c += wcorrect[w];
        }
        part[2 * b] = l;
        part[2 * b + 1] = c;
    }
    gr_body_sce_stats(part, blocks, stats);
}

/* ties: logits on a coarse grid, so rows often hold their maximum twice */
static void test_sce(int64_t nb, int64_t n, int64_t k, double eps, bool ties, float spread) {
    int64_t shape[] = {nb, k}, lshape[] = {nb}, sshape[] = {2};
    const int64_t cnt = n * k;
    float *z = rand_floats(cnt, -spread, spread);
    if (ties)
        for (int64_t i = 0; i < cnt; i++) z[i] = roundf(z[i]);
    int32_t *label = gr_xmalloc((size_t)(n > 0 ? n : 1) * sizeof *label);
    for (int64_t i = 0; i < n; i++) label[i] = (int32_t)(gr_hash64(g_key, (uint64_t)i) % (uint64_t)k);
    g_key++;
    /* the labels of some rows are their (first) maximum, so some count as correct */
    for (int64_t i = 0; i < n; i += 3) {
        int64_t a = 0;
        for (int64_t j = 1; j < k; j++)
            if (z[i * k + j] > z[i * k + a]) a = j;
        label[i] = (int32_t)a;
    }
    float *p_cpu = rand_floats(cnt, 0, 1), *p_body = rand_floats(cnt, 0, 1);
    float st_cpu[2] = {-1, -1}, st_body[2] = {-2, -2};

    kt k1;
    kt_init(&k1, GR_OP_SOFTMAX_CE, 2, 2, n);
    kt_tensor(&k1.tin[0], GR_F32, 2, shape);
    kt_tensor(&k1.tin[1], GR_I32, 1, lshape);
    kt_tensor(&k1.tout[0], GR_F32, 2, shape);
    kt_tensor(&k1.tout[1], GR_F32, 1, sshape);
    k1.tout[1].batched = false;
    k1.node.layer = -1;
    k1.node.attrs.label_smoothing = eps;
    k1.a.in[0] = z;
    k1.a.in[1] = label;
    k1.a.out[0] = p_cpu;
    k1.a.out[1] = st_cpu;
    gr_cpu_softmax_cross_entropy(&k1.a);
    int disagree = 0;
    sim_sce(z, label, p_body, st_body, n, k, eps, &disagree);

    char what[128];
    snprintf(what, sizeof what, "softmax_cross_entropy n %lld k %lld eps %g%s", (long long)n, (long long)k, eps,
             ties ? " (ties)" : "");
    CHECK_MSG(disagree == 0, "%s: lanes of a row disagree %d times after the butterflies", what, disagree);
    int64_t at;
    double e = max_rel(p_body, p_cpu, cnt, 1e-30, &at);
    CHECK_MSG(e <= TOL, "%s: probabilities' rel. error %.3g at row %lld col %lld (body %.9g, cpu %.9g)", what, e,
              (long long)(at / k), (long long)(at % k), at >= 0 ? p_body[at] : 0.0, at >= 0 ? p_cpu[at] : 0.0);
    CHECK_MSG(fabs((double)st_body[0] - st_cpu[0]) <= TOL * fabs((double)st_cpu[0]) + 1e-6,
              "%s: loss sum %.9g, cpu %.9g", what, st_body[0], st_cpu[0]);
    CHECK_MSG(st_body[1] == st_cpu[1], "%s: correct %g, cpu %g", what, st_body[1], st_cpu[1]);
    CHECK_MSG(n < 3 || st_cpu[1] >= 1.0f, "%s: no correct rows (the test's labels are wrong)", what);

    /* backward: dz over [n, k] from the CPU's probabilities */
    float *dz_cpu = rand_floats(cnt, 0, 1), *dz_body = rand_floats(cnt, 0, 1);
    kt k2;
    kt_init(&k2, GR_OP_SOFTMAX_CE_BWD, 2, 1, n);
    kt_tensor(&k2.tin[0], GR_F32, 2, shape);
    kt_tensor(&k2.tin[1], GR_I32, 1, lshape);
    kt_tensor(&k2.tout[0], GR_F32, 2, shape);
    k2.node.layer = -1;
    k2.node.attrs.label_smoothing = eps;
    k2.ctx.grad_scale = 1.0f / (float)(n + 7);
    k2.a.in[0] = p_cpu;
    k2.a.in[1] = label;
    k2.a.out[0] = dz_cpu;
    gr_cpu_softmax_cross_entropy_bwd(&k2.a);
    float off, on;
    gr_sce_targets((float)eps, k, &off, &on);
    for (int64_t i = 0; i < cnt; i++) gr_body_sce_bwd(p_cpu, label, dz_body, k, off, on, k2.ctx.grad_scale, i);
    e = max_rel(dz_body, dz_cpu, cnt, 1e-30, &at);
    CHECK_MSG(e <= TOL, "%s backward: rel. error %.3g at row %lld col %lld (body %.9g, cpu %.9g)", what, e,
              (long long)(at / k), (long long)(at % k), at >= 0 ? dz_body[at] : 0.0, at >= 0 ? dz_cpu[at] : 0.0);
    free(z); free(label); free(p_cpu); free(p_body); free(dz_cpu); free(dz_body);
}

int main(int argc, char **argv) {
    int rc = gr_gc_args(argc, argv);
    if (rc) return rc;
    test_gradchecks();
    if (!gr_gc_on_cpu()) return gr_test_report();

    /* softmax cross-entropy: MNIST-like, ImageNet-like, rows beyond the grid's
     * warps (n > GR_SCE_WARPS * GR_SCE_MAX_BLOCKS), k below and above a warp */
    const double eps[] = {0.0, 0.1};
    for (int e = 0; e < 2; e++) {
        test_sce(1, 1, 10, eps[e], false, 4.0f);
        test_sce(40, 37, 10, eps[e], false, 4.0f);
        test_sce(64, 64, 10, eps[e], true, 3.0f);
        test_sce(256, 256, 1000, eps[e], false, 6.0f);
        test_sce(300, 300, 1000, eps[e], true, 2.0f);
        test_sce(1100, 1100, 10, eps[e], false, 20.0f);
        test_sce(9, 5, 33, eps[e], true, 1.0f);
        test_sce(3, 3, 1, eps[e], false, 1.0f);
    }
    return gr_test_report();
}
