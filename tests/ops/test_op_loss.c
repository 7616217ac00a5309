/* test_body_elem.c — the bodies of the CUDA elementwise kernels
 * (kernels/cuda/body_elem.h), driven on the CPU over the whole grid each
 * kernel covers, against the CPU backend's kernels on fresh random inputs:
 *   - relu, sigmoid, tanh, gelu forward and backward (max relative error);
 *   - dropout: masks and outputs bit for bit for several layers, keys and
 *     rates, the pass-through the CUDA op does outside training or at rate 0,
 *     and the backward; the shared key function equals the stream the CPU
 *     always drew (so old runs resume onto the same masks);
 *   - add with 1..5 inputs, concat of 1..5 inputs ([n, C, H, W] and [n, F])
 *     and every input's concat_bwd slice, bit for bit;
 *   - softmax cross-entropy forward as the kernel runs it (warps of lanes,
 *     butterflies, fixed-order block sums; rows beyond the grid's warps;
 *     ties in the argmax), label smoothing 0 and 0.1: probabilities, loss
 *     sum and correct count; and its backward with a gradient scale.
 * Needs no GPU: only the body header and the CPU kernels. */
#include <stdlib.h>
#include <string.h>

#include "gr_test.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cuda/body_elem.h"

/* ---- inputs and comparisons ---- */

static uint64_t g_key = 0x7E57E1E3ull;

/* n values uniform in [lo, hi) from a fresh stream */
static float *rand_floats(int64_t n, float lo, float hi) {
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
static double max_rel(const float *got, const float *want, int64_t n, double floor, int64_t *at) {
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

typedef struct kt {
    gr_tensor tin[GR_MAX_IN], tout[GR_MAX_OUT];
    gr_node node;
    gr_exec_ctx ctx;
    gr_kargs a;
} kt;

static void kt_tensor(gr_tensor *t, gr_elem e, int ndim, const int64_t *shape) {
    memset(t, 0, sizeof *t);
    t->kind = GR_TK_ACT;
    t->elem = e;
    t->ndim = ndim;
    for (int d = 0; d < ndim; d++) t->shape[d] = shape[d];
    t->batched = true;
    t->alias_of = -1;
    t->grad = -1;
    t->layer = -1;
}

/* kargs of op with nin inputs and nout outputs, run on n samples */
static void kt_init(kt *k, gr_op op, int nin, int nout, int64_t n) {
    memset(k, 0, sizeof *k);
    k->node.op = op;
    k->node.nin = nin;
    k->node.nout = nout;
    k->node.fwd = -1;
    k->ctx.training = true;
    k->ctx.grad_scale = 1.0f;
    k->a.node = &k->node;
    k->a.n = n;
    k->a.ctx = &k->ctx;
    for (int i = 0; i < GR_MAX_IN; i++) k->a.tin[i] = &k->tin[i];
    for (int i = 0; i < GR_MAX_OUT; i++) k->a.tout[i] = &k->tout[i];
}

/* ---- activations ---- */

static const char *act_name[] = {"relu", "sigmoid", "tanh", "gelu"};
static const gr_kernel_fn act_fwd[] = {gr_cpu_relu, gr_cpu_sigmoid, gr_cpu_tanh, gr_cpu_gelu};
static const gr_kernel_fn act_bwd[] = {gr_cpu_relu_bwd, gr_cpu_sigmoid_bwd, gr_cpu_tanh_bwd, gr_cpu_gelu_bwd};

/* planned batch nb, run on n <= nb samples of shape s[0..ndim) */
static void test_act(int act, int64_t nb, int64_t n, int ndim, const int64_t *s) {
    int64_t shape[GR_MAX_DIMS] = {nb};
    int64_t per = 1;
    for (int d = 0; d < ndim; d++) shape[1 + d] = s[d], per *= s[d];
    const int64_t cnt = n * per;
    float *x = rand_floats(cnt, -8.0f, 8.0f), *dy = rand_floats(cnt, -2.0f, 2.0f);
    /* the edges: zero (relu's kink), saturation, tiny values */
    const float special[] = {0.0f, -0.0f, 1e-30f, -1e-30f, 20.0f, -20.0f, 90.0f, -90.0f};
    for (int64_t i = 0; i < 8 && i < cnt; i++) x[i * 7 % cnt] = special[i];
    float *y_cpu = rand_floats(cnt, 0, 1), *y_body = rand_floats(cnt, 0, 1);
    float *dx_cpu = rand_floats(cnt, 0, 1), *dx_body = rand_floats(cnt, 0, 1);

    kt k;
    kt_init(&k, GR_OP_RELU, 1, 1, n);
    kt_tensor(&k.tin[0], GR_F32, 1 + ndim, shape);
    kt_tensor(&k.tout[0], GR_F32, 1 + ndim, shape);
    k.a.in[0] = x;
    k.a.out[0] = y_cpu;
    act_fwd[act](&k.a);
    for (int64_t i = 0; i < cnt; i++) gr_body_act(act, x, y_body, i);
    int64_t at;
    double e = max_rel(y_body, y_cpu, cnt, 1e-30, &at);
    CHECK_MSG(e <= TOL, "%s forward, %lld elements: rel. error %.3g at %lld (x %.9g: body %.9g, cpu %.9g)",
              act_name[act], (long long)cnt, e, (long long)at, at >= 0 ? x[at] : 0.0, at >= 0 ? y_body[at] : 0.0,
              at >= 0 ? y_cpu[at] : 0.0);

    /* backward from dy and the saved tensor: y, or x for gelu */
    const float *saved = act == GR_ACT_GELU ? x : y_cpu;
    kt_init(&k, GR_OP_RELU_BWD, 2, 1, n);
    kt_tensor(&k.tin[0], GR_F32, 1 + ndim, shape);
    kt_tensor(&k.tin[1], GR_F32, 1 + ndim, shape);
    kt_tensor(&k.tout[0], GR_F32, 1 + ndim, shape);
    k.a.in[0] = dy;
    k.a.in[1] = (void *)saved;
    k.a.out[0] = dx_cpu;
    act_bwd[act](&k.a);
    for (int64_t i = 0; i < cnt; i++) gr_body_act_bwd(act, dy, saved, dx_body, i);
    e = max_rel(dx_body, dx_cpu, cnt, 1e-30, &at);
    CHECK_MSG(e <= TOL, "%s backward, %lld elements: rel. error %.3g at %lld (body %.9g, cpu %.9g)",
              act_name[act], (long long)cnt, e, (long long)at, at >= 0 ? dx_body[at] : 0.0,
              at >= 0 ? dx_cpu[at] : 0.0);
    free(x); free(dy); free(y_cpu); free(y_body); free(dx_cpu); free(dx_body);
}

/* ---- dropout ---- */

static void test_dropout(int64_t nb, int64_t n, int64_t c, int64_t hw, double rate, int layer, bool training) {
    int64_t shape[] = {nb, c, hw, 1};
    const int64_t cnt = n * c * hw;
    float *x = rand_floats(cnt, -3.0f, 3.0f), *dy = rand_floats(cnt, -1.0f, 1.0f);
    float *y_cpu = rand_floats(cnt, 0, 1), *y_body = rand_floats(cnt, 0, 1);
    float *dx_cpu = rand_floats(cnt, 0, 1), *dx_body = rand_floats(cnt, 0, 1);
    uint8_t *m_cpu = gr_xmalloc((size_t)cnt), *m_body = gr_xmalloc((size_t)cnt);
    memset(m_cpu, 7, (size_t)cnt);
    memset(m_body, 9, (size_t)cnt);

    kt k;
    kt_init(&k, GR_OP_DROPOUT, 1, 2, n);
    kt_tensor(&k.tin[0], GR_F32, 4, shape);
    kt_tensor(&k.tout[0], GR_F32, 4, shape);
    kt_tensor(&k.tout[1], GR_U8, 4, shape);
    k.node.layer = layer;
    k.node.attrs.rate = rate;
    k.ctx.training = training;
    k.ctx.rng_key = gr_hash64(g_key++, 2);
    k.a.in[0] = x;
    k.a.out[0] = y_cpu;
    k.a.out[1] = m_cpu;
    gr_cpu_dropout(&k.a);

    /* what the CUDA op runs: the kernel when training at rate > 0, else a
     * copy and an all-ones mask */
    const float frate = (float)rate, scale = 1.0f / (1.0f - frate);
    if (training && frate != 0.0f) {
        const uint64_t key = gr_dropout_key_hd(k.ctx.rng_key, layer);
        for (int64_t i = 0; i < cnt; i++) gr_body_dropout(key, frate, scale, x, y_body, m_body, i);
    } else {
        memcpy(y_body, x, (size_t)cnt * sizeof *x);
        memset(m_body, 1, (size_t)cnt);
    }
    CHECK_MSG(memcmp(m_body, m_cpu, (size_t)cnt) == 0, "dropout rate %g layer %d training %d: masks differ", rate,
              layer, training);
    CHECK_MSG(memcmp(y_body, y_cpu, (size_t)cnt * sizeof *x) == 0, "dropout rate %g layer %d training %d: outputs differ",
              rate, layer, training);
    int64_t kept = 0;
    for (int64_t i = 0; i < cnt; i++) kept += m_body[i];
    if (training && frate != 0.0f) {
        /* a real draw: the kept fraction within 6 sigma of 1 - rate */
        double p = 1.0 - rate, sd = sqrt(cnt * p * (1.0 - p));
        CHECK_MSG(fabs((double)kept - cnt * p) <= 6.0 * sd + 1.0, "dropout rate %g: kept %lld of %lld", rate,
                  (long long)kept, (long long)cnt);
        /* another layer of the same run draws another mask */
        const uint64_t other = gr_dropout_key_hd(k.ctx.rng_key, layer + 1);
        int64_t same = 0;
        for (int64_t i = 0; i < cnt; i++) same += (gr_uniform(other, (uint64_t)i) >= frate) == m_body[i];
        CHECK_MSG(same < cnt, "dropout layers %d and %d draw the same mask", layer, layer + 1);
    } else {
        CHECK(kept == cnt);
    }

    kt_init(&k, GR_OP_DROPOUT_BWD, 2, 1, n);
    kt_tensor(&k.tin[0], GR_F32, 4, shape);
    kt_tensor(&k.tin[1], GR_U8, 4, shape);
    kt_tensor(&k.tout[0], GR_F32, 4, shape);
    k.node.attrs.rate = rate;
    k.a.in[0] = dy;
    k.a.in[1] = m_cpu;
    k.a.out[0] = dx_cpu;
    gr_cpu_dropout_bwd(&k.a);
    for (int64_t i = 0; i < cnt; i++) gr_body_dropout_bwd(scale, dy, m_body, dx_body, i);
    CHECK_MSG(memcmp(dx_body, dx_cpu, (size_t)cnt * sizeof *dx_cpu) == 0, "dropout_bwd rate %g: gradients differ", rate);
    free(x); free(dy); free(y_cpu); free(y_body); free(dx_cpu); free(dx_body); free(m_cpu); free(m_body);
}

/* ---- add ---- */

static void test_add(int nin, int64_t nb, int64_t n, int64_t f) {
    int64_t shape[] = {nb, f};
    const int64_t cnt = n * f;
    float *x[GR_MAX_IN];
    float *y_cpu = rand_floats(cnt, 0, 1), *y_body = rand_floats(cnt, 0, 1);
    kt k;
    kt_init(&k, GR_OP_ADD, nin, 1, n);
    gr_add_in in;
    in.nin = nin;
    for (int i = 0; i < GR_ELEM_MAX_IN; i++) {
        x[i] = i < nin ? rand_floats(cnt, -4.0f, 4.0f) : NULL;
        in.x[i] = x[i];
        kt_tensor(&k.tin[i], GR_F32, 2, shape);
        k.a.in[i] = x[i];
    }
    kt_tensor(&k.tout[0], GR_F32, 2, shape);
    k.a.out[0] = y_cpu;
    gr_cpu_add(&k.a);
    for (int64_t i = 0; i < cnt; i++) gr_body_add(&in, y_body, i);
    CHECK_MSG(memcmp(y_body, y_cpu, (size_t)cnt * sizeof *y_cpu) == 0, "add of %d inputs, %lld elements: sums differ",
              nin, (long long)cnt);
    for (int i = 0; i < nin; i++) free(x[i]);
    free(y_cpu); free(y_body);
}

/* ---- concat and concat_bwd ---- */

/* nin inputs of ch[i] channels; inner = H*W (ndim 4, H = hw, W = 1) or
 * 1 (ndim 2) */
static void test_concat(int nin, const int64_t *ch, int ndim, int64_t hw, int64_t nb, int64_t n) {
    const int64_t inner = ndim == 4 ? hw : 1;
    int64_t cout = 0;
    for (int i = 0; i < nin; i++) cout += ch[i];
    const int64_t out_row = cout * inner;
    int64_t oshape[] = {nb, cout, hw, 1};
    float *x[GR_MAX_IN];
    /* unwritten outputs would keep these NaN bytes and fail the memcmp */
    float *y_cpu = gr_xmalloc((size_t)(n * out_row) * sizeof(float)), *y_body = gr_xmalloc((size_t)(n * out_row) * sizeof(float));
    memset(y_cpu, 0xFF, (size_t)(n * out_row) * sizeof(float));
    memset(y_body, 0xFF, (size_t)(n * out_row) * sizeof(float));

    kt k;
    kt_init(&k, GR_OP_CONCAT, nin, 1, n);
    kt_tensor(&k.tout[0], GR_F32, ndim, oshape);
    gr_concat_in in;
    in.nin = nin;
    in.out_row = out_row;
    int64_t start = 0;
    for (int i = 0; i < GR_ELEM_MAX_IN; i++) {
        const int64_t c = i < nin ? ch[i] : 0;
        int64_t shape[] = {nb, c, hw, 1};
        x[i] = i < nin ? rand_floats(n * c * inner, -1.0f, 1.0f) : NULL;
        kt_tensor(&k.tin[i], GR_F32, ndim, shape);
        k.a.in[i] = x[i];
        in.x[i] = x[i];
        in.row[i] = c * inner;
        in.start[i] = start;
        start += c * inner;
    }
    k.a.out[0] = y_cpu;
    gr_cpu_concat(&k.a);
    for (int64_t s = 0; s < n; s++)
        for (int64_t c = 0; c < out_row; c++) gr_body_concat(&in, y_body, s, c);
    CHECK_MSG(memcmp(y_body, y_cpu, (size_t)(n * out_row) * sizeof(float)) == 0,
              "concat of %d inputs (ndim %d, inner %lld, n %lld): outputs differ", nin, ndim, (long long)inner,
              (long long)n);

    /* each input's slice of the gradient */
    int64_t off = 0;
    for (int i = 0; i < nin; i++) {
        const int64_t row = ch[i] * inner, cnt = n * row;
        float *dx_cpu = gr_xmalloc((size_t)(cnt > 0 ? cnt : 1) * sizeof(float));
        float *dx_body = gr_xmalloc((size_t)(cnt > 0 ? cnt : 1) * sizeof(float));
        memset(dx_cpu, 0xFF, (size_t)cnt * sizeof(float));
        memset(dx_body, 0xFF, (size_t)cnt * sizeof(float));
        int64_t ishape[] = {nb, ch[i], hw, 1};
        kt kb;
        kt_init(&kb, GR_OP_CONCAT_BWD, 1, 1, n);
        kt_tensor(&kb.tin[0], GR_F32, ndim, oshape);
        kt_tensor(&kb.tout[0], GR_F32, ndim, ishape);
        kb.node.attrs.offset = off;
        kb.a.in[0] = y_cpu; /* any [n, cout, ...] tensor serves as dy */
        kb.a.out[0] = dx_cpu;
        gr_cpu_concat_bwd(&kb.a);
        for (int64_t s = 0; s < n; s++)
            for (int64_t c = 0; c < row; c++) gr_body_concat_bwd(y_cpu, dx_body, out_row, row, off * inner, s, c);
        CHECK_MSG(memcmp(dx_body, dx_cpu, (size_t)cnt * sizeof(float)) == 0,
                  "concat_bwd input %d of %d (offset %lld): slices differ", i, nin, (long long)off);
        CHECK_MSG(memcmp(dx_body, x[i], (size_t)cnt * sizeof(float)) == 0, "concat_bwd input %d: not the input back", i);
        off += ch[i];
        free(dx_cpu); free(dx_body);
    }
    for (int i = 0; i < nin; i++) free(x[i]);
    free(y_cpu); free(y_body);
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

int main(void) {
    /* activations: [n, F] and [n, C, H, W], odd sizes, runs shorter than planned */
    for (int act = GR_ACT_RELU; act <= GR_ACT_GELU; act++) {
        test_act(act, 1, 1, 1, (int64_t[]){1});
        test_act(act, 5, 3, 1, (int64_t[]){1001});
        test_act(act, 4, 4, 3, (int64_t[]){7, 13, 11});
        test_act(act, 16, 9, 3, (int64_t[]){3, 33, 65});
    }

    /* dropout: layers, rates, eval and rate 0 */
    test_dropout(4, 3, 5, 49, 0.1, 0, true);
    test_dropout(8, 8, 17, 33, 0.5, 3, true);
    test_dropout(2, 1, 1, 1001, 0.9, 17, true);
    test_dropout(7, 7, 3, 25, 0.3, 2, false);
    test_dropout(3, 2, 4, 9, 0.0, 1, true);
    /* the shared key is the stream dropout has always drawn */
    for (int layer = 0; layer < 40; layer += 13) {
        uint64_t rk = gr_hash64(99, (uint64_t)layer);
        CHECK(gr_dropout_key_hd(rk, layer) == gr_hash64(rk, 0xD50000ull + (uint64_t)layer));
    }

    /* add: 1..5 inputs */
    for (int nin = 1; nin <= GR_MAX_IN; nin++) {
        test_add(nin, 3, 3, 1001);
        test_add(nin, 9, 5, 7);
    }

    /* concat: 1..5 inputs, channels of [n, C, H, W] (H*W odd) and features of [n, F] */
    const int64_t ch[] = {3, 1, 6, 2, 5};
    for (int nin = 1; nin <= GR_MAX_IN; nin++) {
        test_concat(nin, ch, 4, 15, 4, 3);
        test_concat(nin, ch + (5 - nin), 2, 1, 5, 5);
    }

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
