/* test_op_misc.c — flatten and dropout (graph/op_misc.c):
 *   - finite-difference gradchecks through the real pipeline on the backend
 *     named on the command line (gradcheck.h: `cpu` or `cuda`);
 *   - the dropout body (body_check.h), on the CPU against the CPU kernel:
 *     masks and outputs bit for bit for several layers, keys and rates, the
 *     pass-through the CUDA op does outside training or at rate 0, and the
 *     backward; the shared key function equals the stream the CPU always
 *     drew (so old runs resume onto the same masks). With `cpu` only. */
#include "body_check.h"
#include "gradcheck.h"

/* ---- gradchecks ---- */

static void test_gradchecks(void) {
    static const gr_gc_case cases[] = {
        {"flatten", "[flatten, {dense: {units: 3}}]", 3, {2, 3, 2}, 0.0, 0.0, NULL},
        {"dropout", "[{dropout: {rate: 0.4}}, {dense: {units: 3}}]", 1, {8}, 0.0, 0.0, NULL},
    };
    for (size_t i = 0; i < GR_ARRAY_LEN(cases); i++) gr_gc_run(&cases[i]);
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

int main(int argc, char **argv) {
    int rc = gr_gc_args(argc, argv);
    if (rc) return rc;
    test_gradchecks();
    if (!gr_gc_on_cpu()) return gr_test_report();

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
    return gr_test_report();
}
