/* test_op_loss.c — the losses and the accuracy metric (graph/op_loss.c):
 *   - finite-difference gradchecks through the real pipeline on the backend
 *     named on the command line (gradcheck.h: `cpu` or `cuda`): softmax
 *     cross-entropy after a dense layer (label smoothing 0 and 0.1), and
 *     each loss alone on the input batch (loss_graph.h): mse, bce with
 *     logits, cross-entropy over the last axis of [n, T, C] with ignored
 *     tokens (ignore_index -100 and 0) and label smoothing;
 *   - with `cpu` only: softmax cross-entropy on [n, C] against the kernel as
 *     it was before the losses generalized (probabilities, loss sum and
 *     gradient bit for bit; the accuracy metric's top-1 against its correct
 *     count); the bodies (body_check.h) on the CPU against the CPU kernels:
 *     cross-entropy as elem.cu runs it (warps of lanes, butterflies,
 *     fixed-order block sums; rows beyond the grid's warps; ties; ignored
 *     rows), whose argmax the accuracy metric's top-1 must count alike; mse,
 *     bce and accuracy (top-k, ties, NaN, ignored targets) as loss.cu
 *     reduces them, and their backward; accuracy on hand-ranked rows;
 *   - GR_LOSS_DUMP=path (cpu): the PyTorch parity cases written there for
 *     tests/ops/loss_parity_torch.py. */
#include "body_check.h"
#include "gradcheck.h"
#include "kernels/body_loss.h"

/* ---- gradchecks ---- */

static const gr_lg_case gc_loss_cases[] = {
    {"mse [n, 5]", GR_OP_MSE, 1, {5}, 0.0, -100, 0, 0},
    {"mse [n, 3, 4]", GR_OP_MSE, 2, {3, 4}, 0.0, -100, 0, 0},
    {"bce_with_logits [n, 6]", GR_OP_BCE_WITH_LOGITS, 1, {6}, 0.0, -100, 0, 0},
    {"bce_with_logits [n, 2, 2, 3]", GR_OP_BCE_WITH_LOGITS, 3, {2, 2, 3}, 0.0, -100, 0, 0},
    {"ce [n, 6] ignore -100", GR_OP_SOFTMAX_CE, 1, {6}, 0.0, -100, 2, 0},
    {"ce [n, 4, 5] ignore -100", GR_OP_SOFTMAX_CE, 2, {4, 5}, 0.0, -100, 3, 0},
    {"ce [n, 4, 5] smooth 0.1 ignore 0", GR_OP_SOFTMAX_CE, 2, {4, 5}, 0.1, 0, 0, 0},
    {"ce [n, 2, 3, 4] smooth 0.2", GR_OP_SOFTMAX_CE, 3, {2, 3, 4}, 0.2, -100, 4, 0},
};

static void test_gradchecks(void) {
    static const gr_gc_case cases[] = {
        {"softmax_cross_entropy", "[{dense: {units: 6}}]", 1, {5}, 0.0, 0.0, NULL},
        {"cross_entropy smoothing 0.1", "[{dense: {units: 6}}]", 1, {5}, 0.1, 0.0, NULL},
    };
    for (size_t i = 0; i < GR_ARRAY_LEN(cases); i++) gr_gc_run(&cases[i]);
    for (size_t i = 0; i < GR_ARRAY_LEN(gc_loss_cases); i++) gr_gc_loss_run(&gc_loss_cases[i]);
}

/* ---- [n, C] cross-entropy as it always was ---- */

/* The CPU kernels of softmax cross-entropy before the losses generalized
 * (stats = [loss, correct]; dz = (p - target) * grad_scale): today's must
 * give the same bits on [n, C] logits, and accuracy top-1 the same count. */
static void legacy_sce(const float *z, const int32_t *label, float *p, float *stats, int64_t n, int64_t k,
                       double eps) {
    double loss = 0.0;
    int64_t correct = 0;
    for (int64_t i = 0; i < n; i++) {
        const float *zi = z + i * k;
        float *pi = p + i * k;
        int64_t arg = 0;
        float zmax = zi[0];
        for (int64_t j = 1; j < k; j++)
            if (gr_sce_above(zi[j], zmax)) { zmax = zi[j]; arg = j; }
        double sum = 0.0, zsum = 0.0;
        for (int64_t j = 0; j < k; j++) {
            pi[j] = gr_vexpf(zi[j] - zmax); /* expf before exp was vectorized (kernels/body_vmath.h) */
            sum += pi[j];
            zsum += zi[j] - zmax;
        }
        float inv = (float)(1.0 / sum);
        for (int64_t j = 0; j < k; j++) pi[j] *= inv;
        int32_t y = label[i];
        loss += gr_sce_row_loss(sum, zsum, zi[y] - zmax, k, eps);
        correct += arg == y;
    }
    stats[0] = (float)loss;
    stats[1] = (float)correct;
}

static void legacy_sce_bwd(const float *p, const int32_t *label, float *dz, int64_t n, int64_t k, float eps,
                           float scale) {
    float off = eps / (float)k, on = 1.0f - eps + off;
    for (int64_t i = 0; i < n; i++) {
        const float *pi = p + i * k;
        float *di = dz + i * k;
        for (int64_t j = 0; j < k; j++) di[j] = (pi[j] - off) * scale;
        di[label[i]] = (pi[label[i]] - on) * scale;
    }
}

/* The classes among a row's columns in test_sce, sim_sce and cpu_accuracy
 * (gr_attrs.classes: the first t_classes; the rest are a padded
 * vocabulary); 0: every column. */
static int64_t t_classes;

/* the CPU's accuracy kernel over rows of k (shape: the logits', ndim 2 or 3) */
static void cpu_accuracy(const float *z, const int32_t *label, const int64_t *shape, int ndim, int64_t n,
                         int64_t top, int64_t ignore, float *stats) {
    kt ka;
    kt_init(&ka, GR_OP_ACCURACY, 2, 1, n);
    kt_tensor(&ka.tin[0], GR_F32, ndim, shape);
    ka.node.attrs.top_k = top;
    ka.node.attrs.ignore_index = ignore;
    ka.node.attrs.classes = t_classes;
    ka.a.in[0] = (void *)z;
    ka.a.in[1] = (void *)label;
    ka.a.out[0] = stats;
    gr_cpu_accuracy(&ka.a);
}

static void test_sce_legacy(int64_t n, int64_t k, double eps, bool ties, float spread) {
    int64_t shape[] = {n, k}, lshape[] = {n}, sshape[] = {2};
    const int64_t cnt = n * k;
    float *z = rand_floats(cnt, -spread, spread);
    if (ties)
        for (int64_t i = 0; i < cnt; i++) z[i] = roundf(z[i]);
    if (cnt > 7) z[7] = NAN; /* a NaN row: its loss is NaN, its argmax the NaN */
    int32_t *label = gr_xmalloc((size_t)n * sizeof *label);
    for (int64_t i = 0; i < n; i++) label[i] = (int32_t)(gr_hash64(g_key, (uint64_t)i) % (uint64_t)k);
    g_key++;
    for (int64_t i = 0; i < n; i += 2) { /* half the rows labelled at their first maximum */
        int64_t a = 0;
        for (int64_t j = 1; j < k; j++)
            if (gr_sce_above(z[i * k + j], z[i * k + a])) a = j;
        label[i] = (int32_t)a;
    }
    float *p_old = rand_floats(cnt, 0, 1), *p_new = rand_floats(cnt, 0, 1);
    float st_old[2], st_new[2], acc[2];
    legacy_sce(z, label, p_old, st_old, n, k, eps);
    kt k1;
    kt_init(&k1, GR_OP_SOFTMAX_CE, 2, 2, n);
    kt_tensor(&k1.tin[0], GR_F32, 2, shape);
    kt_tensor(&k1.tin[1], GR_I32, 1, lshape);
    kt_tensor(&k1.tout[0], GR_F32, 2, shape);
    kt_tensor(&k1.tout[1], GR_F32, 1, sshape);
    k1.node.attrs.label_smoothing = eps;
    k1.node.attrs.ignore_index = -100;
    k1.a.in[0] = z;
    k1.a.in[1] = label;
    k1.a.out[0] = p_new;
    k1.a.out[1] = st_new;
    gr_cpu_softmax_cross_entropy(&k1.a);
    cpu_accuracy(z, label, shape, 2, n, 1, -100, acc);
    char what[96];
    snprintf(what, sizeof what, "[n, C] cross-entropy as before: n %lld k %lld eps %g%s", (long long)n, (long long)k,
             eps, ties ? " (ties)" : "");
    CHECK_MSG(memcmp(p_old, p_new, (size_t)cnt * sizeof *p_new) == 0, "%s: probabilities differ", what);
    CHECK_MSG(memcmp(&st_old[0], &st_new[0], sizeof(float)) == 0, "%s: loss sum %.9g, before %.9g", what, st_new[0],
              st_old[0]);
    CHECK_MSG(st_new[1] == (float)n, "%s: count %g, not n", what, st_new[1]);
    CHECK_MSG(acc[0] == st_old[1] && acc[1] == (float)n, "%s: accuracy top-1 [%g, %g], the loss counted %g correct",
              what, acc[0], acc[1], st_old[1]);
    CHECK_MSG(n < 4 || acc[0] >= 1.0f, "%s: no correct rows (the test's labels are wrong)", what);
    const float scale[] = {1.0f / (float)n, 1.0f / (float)(3 * n + 1), 0.3f};
    float *dz_old = rand_floats(cnt, 0, 1), *dz_new = rand_floats(cnt, 0, 1);
    for (size_t s = 0; s < GR_ARRAY_LEN(scale); s++) {
        legacy_sce_bwd(p_old, label, dz_old, n, k, (float)eps, scale[s]);
        kt k2;
        kt_init(&k2, GR_OP_SOFTMAX_CE_BWD, 3, 1, n);
        kt_tensor(&k2.tin[0], GR_F32, 2, shape);
        k2.node.attrs.label_smoothing = eps;
        k2.node.attrs.ignore_index = -100;
        k2.ctx.grad_scale = scale[s];
        k2.a.in[0] = p_new;
        k2.a.in[1] = label;
        k2.a.in[2] = st_new;
        k2.a.out[0] = dz_new;
        gr_cpu_softmax_cross_entropy_bwd(&k2.a);
        CHECK_MSG(memcmp(dz_old, dz_new, (size_t)cnt * sizeof *dz_new) == 0, "%s: gradient (scale %g) differs", what,
                  scale[s]);
    }
    free(z); free(label); free(p_old); free(p_new); free(dz_old); free(dz_new);
}

/* ---- softmax cross-entropy's body ---- */

#define LANES GR_SCE_LANES

/* gr_sce_rows_kernel + gr_sce_stats_kernel of elem.cu, thread by thread:
 * lanes' parts, xor butterflies, per-warp row sums, per-block warp sums,
 * block sums in order. Each lane uses its own merged values, as on the GPU.
 * *hits: the rows (not ignored) whose argmax is their label. */
static void sim_sce(const float *z, const int32_t *label, float *p, float *stats, int64_t n, int64_t k, double eps,
                    int64_t ignore, int *lanes_disagree, int64_t *hits) {
    const int64_t blocks = gr_sce_blocks(n), W = blocks * GR_SCE_WARPS, kc = gr_loss_classes(t_classes, k);
    double part[2 * GR_SCE_MAX_BLOCKS];
    *hits = 0;
    for (int64_t b = 0; b < blocks; b++) {
        double wloss[GR_SCE_WARPS], wcount[GR_SCE_WARPS];
        for (int w = 0; w < GR_SCE_WARPS; w++) {
            double loss = 0.0, count = 0.0;
            for (int64_t r = b * GR_SCE_WARPS + w; r < n; r += W) {
                const float *zr = z + r * k;
                float *pr = p + r * k;
                float m[LANES], m0[LANES];
                int64_t arg[LANES], a0[LANES];
                for (int l = 0; l < LANES; l++) gr_body_sce_max_part(zr, kc, l, LANES, &m[l], &arg[l]);
                for (int o = LANES / 2; o > 0; o >>= 1) {
                    memcpy(m0, m, sizeof m);
                    memcpy(a0, arg, sizeof arg);
                    for (int l = 0; l < LANES; l++) gr_sce_max_combine(&m[l], &arg[l], m0[l ^ o], a0[l ^ o]);
                }
                double sum[LANES], zsum[LANES], s0[LANES], z0[LANES];
                for (int l = 0; l < LANES; l++) gr_body_sce_exp_part(zr, pr, kc, m[l], l, LANES, &sum[l], &zsum[l]);
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
                if (!gr_loss_ignored(y, ignore)) {
                    loss += gr_sce_row_loss(sum[0], zsum[0], zr[y] - m[0], kc, eps);
                    count += 1.0;
                    *hits += arg[0] == y;
                }
                for (int l = 0; l < LANES; l++) {
                    gr_body_sce_scale_part(pr, kc, gr_sce_inv(sum[l]), l, LANES);
                    for (int64_t j = kc + l; j < k; j += LANES) pr[j] = 0.0f;
                }
            }
            wloss[w] = loss;
            wcount[w] = count;
        }
        double l = 0.0, c = 0.0;
        for (int w = 0; w < GR_SCE_WARPS; w++) {
            l += wloss[w];
            c += wcount[w];
        }
        part[2 * b] = l;
        part[2 * b + 1] = c;
    }
    gr_body_sce_stats(part, blocks, stats);
}

/* n samples of T tokens (T 0: [n, k] logits) of k classes; ties: logits on a
 * coarse grid, so rows often hold their maximum twice; every
 * ignore_every-th row's label is ignore (0: none) */
static void test_sce(int64_t nb, int64_t n, int64_t T, int64_t k, double eps, bool ties, float spread,
                     int64_t ignore, int ignore_every) {
    const int64_t rows = n * (T ? T : 1), cnt = rows * k;
    int64_t shape[] = {nb, T ? T : k, k}, lshape[] = {nb, T}, sshape[] = {2}; /* [nb, T, k] or [nb, k] */
    const int nd = T ? 3 : 2;
    float *z = rand_floats(cnt, -spread, spread);
    if (ties)
        for (int64_t i = 0; i < cnt; i++) z[i] = roundf(z[i]);
    int32_t *label = gr_xmalloc((size_t)(rows > 0 ? rows : 1) * sizeof *label);
    const int64_t kc = gr_loss_classes(t_classes, k);
    for (int64_t i = 0; i < cnt; i++) /* padding logits above every class's: they must not count */
        if (i % k >= kc) z[i] = 50.0f + (float)(i % 3);
    for (int64_t i = 0; i < rows; i++) label[i] = (int32_t)(gr_hash64(g_key, (uint64_t)i) % (uint64_t)kc);
    g_key++;
    /* the labels of some rows are their (first) maximum, so some count as correct */
    for (int64_t i = 0; i < rows; i += 3) {
        int64_t a = 0;
        for (int64_t j = 1; j < kc; j++)
            if (z[i * k + j] > z[i * k + a]) a = j;
        label[i] = (int32_t)a;
    }
    for (int64_t i = 0; ignore_every && i < rows; i++)
        if (i % ignore_every == ignore_every - 1) label[i] = (int32_t)ignore;
    float *p_cpu = rand_floats(cnt, 0, 1), *p_body = rand_floats(cnt, 0, 1);
    float st_cpu[2] = {-1, -1}, st_body[2] = {-2, -2}, acc[2];

    kt k1;
    kt_init(&k1, GR_OP_SOFTMAX_CE, 2, 2, n);
    kt_tensor(&k1.tin[0], GR_F32, nd, shape);
    kt_tensor(&k1.tin[1], GR_I32, nd - 1, T ? lshape : shape);
    kt_tensor(&k1.tout[0], GR_F32, nd, shape);
    kt_tensor(&k1.tout[1], GR_F32, 1, sshape);
    k1.tout[1].batched = false;
    k1.node.layer = -1;
    k1.node.attrs.label_smoothing = eps;
    k1.node.attrs.ignore_index = ignore;
    k1.node.attrs.classes = t_classes;
    k1.a.in[0] = z;
    k1.a.in[1] = label;
    k1.a.out[0] = p_cpu;
    k1.a.out[1] = st_cpu;
    gr_cpu_softmax_cross_entropy(&k1.a);
    int disagree = 0;
    int64_t hits, want = 0;
    sim_sce(z, label, p_body, st_body, rows, k, eps, ignore, &disagree, &hits);
    cpu_accuracy(z, label, shape, nd, n, 1, ignore, acc);
    for (int64_t i = 0; i < rows; i++) want += !gr_loss_ignored(label[i], ignore);

    char what[160];
    snprintf(what, sizeof what, "softmax_cross_entropy n %lld T %lld k %lld eps %g ignore %lld/%d%s", (long long)n,
             (long long)T, (long long)k, eps, (long long)ignore, ignore_every, ties ? " (ties)" : "");
    CHECK_MSG(disagree == 0, "%s: lanes of a row disagree %d times after the butterflies", what, disagree);
    int64_t at;
    double e = max_rel(p_body, p_cpu, cnt, 1e-30, &at);
    CHECK_MSG(e <= TOL, "%s: probabilities' rel. error %.3g at row %lld col %lld (body %.9g, cpu %.9g)", what, e,
              (long long)(at / k), (long long)(at % k), at >= 0 ? p_body[at] : 0.0, at >= 0 ? p_cpu[at] : 0.0);
    CHECK_MSG(fabs((double)st_body[0] - st_cpu[0]) <= TOL * fabs((double)st_cpu[0]) + 1e-6,
              "%s: loss sum %.9g, cpu %.9g", what, st_body[0], st_cpu[0]);
    CHECK_MSG(st_body[1] == st_cpu[1] && st_cpu[1] == (float)want, "%s: count %g, cpu %g, want %lld", what,
              st_body[1], st_cpu[1], (long long)want);
    CHECK_MSG(acc[0] == (float)hits && acc[1] == (float)want, "%s: accuracy top-1 [%g, %g], the CUDA body's argmax "
              "hits %lld of %lld", what, acc[0], acc[1], (long long)hits, (long long)want);
    CHECK_MSG(rows < 3 || want == 0 || hits >= 1, "%s: no correct rows (the test's labels are wrong)", what);

    /* backward: dz over [rows, k] from the CPU's probabilities and count */
    float *dz_cpu = rand_floats(cnt, 0, 1), *dz_body = rand_floats(cnt, 0, 1);
    kt k2;
    kt_init(&k2, GR_OP_SOFTMAX_CE_BWD, 3, 1, n);
    kt_tensor(&k2.tin[0], GR_F32, nd, shape);
    k2.node.layer = -1;
    k2.node.attrs.label_smoothing = eps;
    k2.node.attrs.ignore_index = ignore;
    k2.node.attrs.classes = t_classes;
    k2.ctx.grad_scale = 1.0f / (float)(n + 7);
    k2.a.in[0] = p_cpu;
    k2.a.in[1] = label;
    k2.a.in[2] = st_cpu;
    k2.a.out[0] = dz_cpu;
    gr_cpu_softmax_cross_entropy_bwd(&k2.a);
    float off, on, s = gr_sce_token_scale(k2.ctx.grad_scale, n, st_cpu[1]);
    gr_sce_targets((float)eps, kc, &off, &on);
    for (int64_t i = 0; i < cnt; i++) gr_body_sce_bwd(p_cpu, label, dz_body, k, kc, off, on, s, ignore, i);
    e = max_rel(dz_body, dz_cpu, cnt, 1e-30, &at);
    CHECK_MSG(e <= TOL, "%s backward: rel. error %.3g at row %lld col %lld (body %.9g, cpu %.9g)", what, e,
              (long long)(at / k), (long long)(at % k), at >= 0 ? dz_body[at] : 0.0, at >= 0 ? dz_cpu[at] : 0.0);
    /* an ignored row has no gradient; a counted one sums to 0 (p and the targets each sum to 1) */
    for (int64_t r = 0; r < rows && ignore_every; r++) {
        double sum = 0.0, abs = 0.0;
        for (int64_t j = 0; j < k; j++) sum += dz_cpu[r * k + j], abs += fabs(dz_cpu[r * k + j]);
        bool ig = gr_loss_ignored(label[r], ignore);
        CHECK_MSG(ig ? abs == 0.0 : fabs(sum) <= 1e-5 * (abs + 1e-30) + 1e-7, "%s backward row %lld (%s): sum %.3g",
                  what, (long long)r, ig ? "ignored" : "counted", sum);
    }
    /* padding columns: probability 0 and no gradient, on both sides */
    int64_t pad_bad = 0;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = kc; j < k; j++)
            pad_bad += p_cpu[r * k + j] != 0.0f || p_body[r * k + j] != 0.0f || dz_cpu[r * k + j] != 0.0f ||
                       dz_body[r * k + j] != 0.0f;
    CHECK_MSG(pad_bad == 0, "%s: %lld padding values nonzero (classes %lld of %lld)", what, (long long)pad_bad,
              (long long)kc, (long long)k);
    free(z); free(label); free(p_cpu); free(p_body); free(dz_cpu); free(dz_body);
}

/* ---- mse, bce and accuracy bodies: loss.cu's reduction on the CPU ---- */

/* gr_loss_sum_kernel + gr_loss_stats_kernel of loss.cu, thread by thread */
static void sim_loss_sum(int op, const gr_loss_in *in, int64_t units, float *stats) {
    const int64_t blocks = gr_loss_blocks(units), stride = blocks * GR_LOSS_THREADS;
    double part[2 * GR_LOSS_MAX_BLOCKS];
    for (int64_t b = 0; b < blocks; b++) {
        double sum[GR_LOSS_THREADS], count[GR_LOSS_THREADS];
        for (int t = 0; t < GR_LOSS_THREADS; t++) {
            sum[t] = count[t] = 0.0;
            for (int64_t u = b * GR_LOSS_THREADS + t; u < units; u += stride) gr_body_loss_unit(op, in, u, &sum[t], &count[t]);
        }
        for (int s = GR_LOSS_THREADS / 2; s > 0; s >>= 1)
            for (int t = 0; t < s; t++) gr_loss_tree_pairs(sum, count, t, s);
        part[2 * b] = sum[0];
        part[2 * b + 1] = count[0];
    }
    gr_body_sce_stats(part, blocks, stats);
}

/* mse or bce on n samples of per elements ([nb, per] planned): forward
 * stats and backward, body against CPU */
static void test_loss_elem(gr_op op, int64_t nb, int64_t n, int64_t per, float spread) {
    const int64_t cnt = n * per;
    int64_t shape[] = {nb, per}, sshape[] = {2};
    float *x = rand_floats(cnt, -spread, spread), *t = rand_floats(cnt, op == GR_OP_MSE ? -1.0f : 0.0f, 1.0f);
    if (cnt > 3) t[1] = 0.0f, t[2] = 1.0f, x[3] = -spread * 20.0f; /* hard targets, a far logit */
    float st_cpu[2] = {-1, -1}, st_body[2] = {-2, -2};
    kt k1;
    kt_init(&k1, op, 2, 1, n);
    kt_tensor(&k1.tin[0], GR_F32, 2, shape);
    kt_tensor(&k1.tin[1], GR_F32, 2, shape);
    kt_tensor(&k1.tout[0], GR_F32, 1, sshape);
    k1.tout[0].batched = false;
    k1.a.in[0] = x;
    k1.a.in[1] = t;
    k1.a.out[0] = st_cpu;
    if (op == GR_OP_MSE) gr_cpu_mse(&k1.a);
    else gr_cpu_bce_with_logits(&k1.a);
    gr_loss_in in = {x, t, 1, 0, 0, 1};
    sim_loss_sum((int)op, &in, cnt, st_body);
    char what[96];
    snprintf(what, sizeof what, "%s n %lld per %lld", gr_op_name(op), (long long)n, (long long)per);
    CHECK_MSG(fabs((double)st_body[0] - st_cpu[0]) <= TOL * fabs((double)st_cpu[0]) + 1e-6 && isfinite(st_cpu[0]),
              "%s: loss sum %.9g, cpu %.9g", what, st_body[0], st_cpu[0]);
    CHECK_MSG(st_body[1] == st_cpu[1] && st_cpu[1] == (float)cnt, "%s: count %g, cpu %g", what, st_body[1], st_cpu[1]);
    float *dx_cpu = rand_floats(cnt, 0, 1), *dx_body = rand_floats(cnt, 0, 1);
    kt k2;
    kt_init(&k2, gr_op_bwd(op), 2, 1, n);
    kt_tensor(&k2.tin[0], GR_F32, 2, shape);
    k2.ctx.grad_scale = 1.0f / (float)(n + 3);
    k2.a.in[0] = x;
    k2.a.in[1] = t;
    k2.a.out[0] = dx_cpu;
    if (op == GR_OP_MSE) gr_cpu_mse_bwd(&k2.a);
    else gr_cpu_bce_with_logits_bwd(&k2.a);
    float s = gr_loss_elem_scale(k2.ctx.grad_scale, per);
    for (int64_t i = 0; i < cnt; i++) gr_body_loss_bwd((int)op, x, t, dx_body, s, i);
    int64_t at;
    double e = max_rel(dx_body, dx_cpu, cnt, 1e-30, &at);
    CHECK_MSG(e <= TOL, "%s backward: rel. error %.3g at %lld", what, e, (long long)at);
    free(x); free(t); free(dx_cpu); free(dx_body);
}

/* accuracy top-k on n samples of T tokens of k classes: CPU against body;
 * ties, a NaN every 11th logit, every 4th target ignored */
static void test_accuracy(int64_t n, int64_t T, int64_t k, int64_t top, float spread) {
    const int64_t rows = n * T, cnt = rows * k;
    int64_t shape[] = {n, T, k};
    float *z = rand_floats(cnt, -spread, spread);
    for (int64_t i = 0; i < cnt; i++) z[i] = roundf(z[i]);
    for (int64_t i = 5; i < cnt; i += 11) z[i] = NAN;
    int32_t *label = gr_xmalloc((size_t)rows * sizeof *label);
    for (int64_t i = 0; i < rows; i++)
        label[i] = i % 4 == 3 ? -1 : (int32_t)(gr_hash64(g_key, (uint64_t)i) % (uint64_t)k);
    g_key++;
    float st_cpu[2], st_body[2];
    cpu_accuracy(z, label, shape, 3, n, top, -1, st_cpu);
    gr_loss_in in = {z, label, k, top, -1, k};
    sim_loss_sum(GR_OP_ACCURACY, &in, rows, st_body);
    int64_t want = rows - rows / 4;
    CHECK_MSG(st_cpu[0] == st_body[0] && st_cpu[1] == st_body[1] && st_cpu[1] == (float)want,
              "accuracy n %lld T %lld k %lld top %lld: cpu [%g, %g], body [%g, %g], count %lld", (long long)n,
              (long long)T, (long long)k, (long long)top, st_cpu[0], st_cpu[1], st_body[0], st_body[1], (long long)want);
    CHECK_MSG(top < k ? st_cpu[0] < st_cpu[1] : st_cpu[0] == st_cpu[1], "accuracy top %lld of %lld: %g of %g correct",
              (long long)top, (long long)k, st_cpu[0], st_cpu[1]);
    free(z); free(label);
}

/* hand-ranked rows: the columns in the order they rank */
static void test_accuracy_ranks(void) {
    static const struct { float z[4]; int32_t y; int64_t top; bool hit; } t[] = {
        {{1, 3, 3, 2}, 1, 1, true},  {{1, 3, 3, 2}, 2, 1, false}, {{1, 3, 3, 2}, 2, 2, true},
        {{1, 3, 3, 2}, 3, 2, false}, {{1, 3, 3, 2}, 3, 3, true},  {{1, 3, 3, 2}, 0, 3, false},
        {{1, 3, 3, 2}, 0, 4, true},  {{NAN, 5, 1, NAN}, 0, 1, true}, {{NAN, 5, 1, NAN}, 1, 1, false},
        {{NAN, 5, 1, NAN}, 3, 2, true}, {{NAN, 5, 1, NAN}, 1, 2, false}, {{NAN, 5, 1, NAN}, 1, 3, true},
        {{-INFINITY, -INFINITY, -INFINITY, -INFINITY}, 0, 1, true}, {{2, 2, 2, 2}, 3, 3, false},
        {{0, 1, 2, 3}, 4, 4, false}, {{0, 1, 2, 3}, -7, 4, false},
    };
    for (size_t i = 0; i < GR_ARRAY_LEN(t); i++) {
        int64_t shape[] = {1, 4};
        float st[2];
        cpu_accuracy(t[i].z, &t[i].y, shape, 2, 1, t[i].top, -100, st);
        CHECK_MSG(st[0] == (t[i].hit ? 1.0f : 0.0f) && st[1] == 1.0f, "accuracy row %zu (target %d, top %lld): [%g, %g]",
                  i, t[i].y, (long long)t[i].top, st[0], st[1]);
    }
}

/* ---- the PyTorch parity dump (tests/ops/loss_parity_torch.py) ---- */

static const gr_lg_case parity_cases[] = {
    {"mse [n, 5]", GR_OP_MSE, 1, {5}, 0.0, -100, 0, 0},
    {"mse [n, 3, 4, 2]", GR_OP_MSE, 3, {3, 4, 2}, 0.0, -100, 0, 0},
    {"bce [n, 7]", GR_OP_BCE_WITH_LOGITS, 1, {7}, 0.0, -100, 0, 0},
    {"bce [n, 2, 3, 3]", GR_OP_BCE_WITH_LOGITS, 3, {2, 3, 3}, 0.0, -100, 0, 0},
    {"ce [n, 10]", GR_OP_SOFTMAX_CE, 1, {10}, 0.0, -100, 0, 0},
    {"ce [n, 10] smoothing 0.1", GR_OP_SOFTMAX_CE, 1, {10}, 0.1, -100, 0, 0},
    {"ce [n, 6, 9] ignore -100", GR_OP_SOFTMAX_CE, 2, {6, 9}, 0.0, -100, 3, 0},
    {"ce [n, 6, 9] ignore -100 smoothing 0.1", GR_OP_SOFTMAX_CE, 2, {6, 9}, 0.1, -100, 3, 0},
    {"ce [n, 5, 7] ignore 0 smoothing 0.2", GR_OP_SOFTMAX_CE, 2, {5, 7}, 0.2, 0, 0, 0},
    {"ce [n, 2, 3, 5] ignore 4", GR_OP_SOFTMAX_CE, 3, {2, 3, 5}, 0.0, 4, 5, 0},
};

/* Per case: int64 {kind (0 mse, 1 bce, 2 cross-entropy), n, ndim, s0, s1, s2,
 * ignore_index, 0}, float64 {label_smoothing, loss = stats[0] / stats[1]},
 * float32 x [n, s...], the target (float32 of x's shape, or int32 without
 * its last axis), float32 dx: one training pass on the CPU at grad_scale 1/n. */
static void dump_parity(const char *path) {
    FILE *f = fopen(path, "wb");
    CHECK_MSG(f != NULL, "cannot write %s", path);
    if (!f) return;
    for (size_t i = 0; i < GR_ARRAY_LEN(parity_cases); i++) {
        const gr_lg_case *c = &parity_cases[i];
        const int64_t n = 4;
        gr_error err = {0};
        gr_graph g;
        gr_status st = gr_lg_build(c, n, &g, &err);
        CHECK_MSG(st == GR_OK, "%s: %s", c->name, err.msg);
        if (st) continue;
        gr_autodiff(&g, true);
        gr_backend *be;
        gr_model m;
        gr_plan p;
        CHECK(gr_backend_create("cpu", 1, &be, &err) == GR_OK);
        CHECK(gr_model_init(&m, &g, be, 0, &err) == GR_OK);
        CHECK(gr_plan_compile(&p, &m, &g, GR_PLAN_TRAIN, true, &err) == GR_OK);
        const int64_t nx = gr_lg_x_numel(&g, n), nt = gr_lg_t_numel(&g, n);
        float *x = gr_xmalloc((size_t)nx * sizeof *x), *dx = gr_xmalloc((size_t)nx * sizeof *dx);
        void *t = gr_xmalloc((size_t)nt * 4u);
        gr_lg_fill(c, &g, n, 0x9A817Eull + i, c->op == GR_OP_BCE_WITH_LOGITS ? 12.0f : 3.0f, x, t);
        gr_exec_ctx ctx = {.training = true, .rng_key = 1, .grad_scale = 1.0f / (float)n};
        gr_lg_upload(&p, &g, n, x, t);
        gr_plan_run(&p, n, &ctx);
        float ls[2], ms[2];
        gr_lg_stats(&p, &g, ls, ms);
        gr_backend_download(be, dx, gr_plan_ptr(&p, g.tensors[g.input].grad), (size_t)nx * sizeof *dx);
        int64_t hdr[8] = {c->op == GR_OP_MSE ? 0 : c->op == GR_OP_BCE_WITH_LOGITS ? 1 : 2, n, c->ndim, c->shape[0],
                          c->ndim > 1 ? c->shape[1] : 0, c->ndim > 2 ? c->shape[2] : 0, c->ignore_index, 0};
        double d[2] = {c->label_smoothing, (double)ls[0] / (double)ls[1]};
        CHECK(fwrite(hdr, sizeof hdr, 1, f) == 1 && fwrite(d, sizeof d, 1, f) == 1);
        CHECK(fwrite(x, sizeof *x, (size_t)nx, f) == (size_t)nx && fwrite(t, 4u, (size_t)nt, f) == (size_t)nt);
        CHECK(fwrite(dx, sizeof *dx, (size_t)nx, f) == (size_t)nx);
        free(x); free(dx); free(t);
        gr_plan_free(&p);
        gr_model_free(&m);
        gr_backend_free(be);
        gr_graph_free(&g);
    }
    CHECK(fclose(f) == 0);
}

int main(int argc, char **argv) {
    int rc = gr_gc_args(argc, argv);
    if (rc) return rc;
    const char *dump = getenv("GR_LOSS_DUMP");
    if (dump && dump[0] && gr_gc_on_cpu()) {
        dump_parity(dump);
        return gr_test_report();
    }
    test_gradchecks();
    if (!gr_gc_on_cpu()) return gr_test_report();

    const double eps[] = {0.0, 0.1};
    for (int e = 0; e < 2; e++) {
        test_sce_legacy(37, 10, eps[e], false, 4.0f);
        test_sce_legacy(64, 10, eps[e], true, 3.0f);
        test_sce_legacy(300, 1000, eps[e], true, 2.0f);
        test_sce_legacy(5, 1, eps[e], false, 1.0f);
        /* MNIST-like, ImageNet-like, rows beyond the grid's warps (n >
         * GR_SCE_WARPS * GR_SCE_MAX_BLOCKS), k below and above a warp; then
         * tokens ([n, T, k]) with ignored targets, -100 and a class */
        test_sce(1, 1, 0, 10, eps[e], false, 4.0f, -100, 0);
        test_sce(40, 37, 0, 10, eps[e], false, 4.0f, -100, 0);
        test_sce(64, 64, 0, 10, eps[e], true, 3.0f, -100, 0);
        test_sce(256, 256, 0, 1000, eps[e], false, 6.0f, -100, 0);
        test_sce(300, 300, 0, 1000, eps[e], true, 2.0f, -100, 0);
        test_sce(1100, 1100, 0, 10, eps[e], false, 20.0f, -100, 0);
        test_sce(9, 5, 0, 33, eps[e], true, 1.0f, -100, 0);
        test_sce(3, 3, 0, 1, eps[e], false, 1.0f, -100, 0);
        test_sce(8, 8, 16, 50, eps[e], false, 4.0f, -100, 3);
        test_sce(8, 6, 200, 7, eps[e], true, 2.0f, 2, 0);
        test_sce(4, 4, 33, 40, eps[e], false, 5.0f, -100, 1); /* every token ignored: [0, 0], no gradient */
        /* a padded vocabulary: 37 classes of 48 columns, 1 of 64; padding logits the largest */
        t_classes = 37;
        test_sce(6, 5, 9, 48, eps[e], false, 3.0f, -100, 4);
        t_classes = 1;
        test_sce(3, 3, 4, 64, eps[e], false, 3.0f, -100, 0);
        t_classes = 0;
    }
    const int64_t per[] = {1, 5, 31, 300};
    for (size_t i = 0; i < GR_ARRAY_LEN(per); i++) {
        test_loss_elem(GR_OP_MSE, 9, 7, per[i], 3.0f);
        test_loss_elem(GR_OP_BCE_WITH_LOGITS, 9, 7, per[i], 8.0f);
    }
    test_loss_elem(GR_OP_MSE, 300, 300, 400, 2.0f); /* beyond the grid's threads */
    test_loss_elem(GR_OP_BCE_WITH_LOGITS, 300, 300, 400, 30.0f);
    test_accuracy(6, 5, 10, 1, 2.0f);
    test_accuracy(6, 5, 10, 3, 2.0f);
    test_accuracy(64, 600, 12, 5, 3.0f);
    test_accuracy(3, 4, 6, 6, 1.0f);
    test_accuracy_ranks();
    return gr_test_report();
}
