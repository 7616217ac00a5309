/* test_op_attn.c — attention (graph/op_attn.c):
 *   - finite-difference gradchecks through the real pipeline on the backend
 *     named on the command line (gradcheck.h: `cpu` or `cuda`): causal and
 *     not, one head and several, T = 1, T past one query tile (32) and past
 *     one key tile (64), heads of 1 and of 5 columns;
 *   - the CUDA kernels' bodies (kernels/body_attn.h) on the CPU against the
 *     blocked CPU kernel, forward and backward, within 1e-5 (their sums are
 *     grouped differently), including a head of GR_ATTN_MAX_HEAD columns;
 *   - causality: rewriting the rows after position t (even with NaN) leaves
 *     the rows up to t bit for bit, forward and dq;
 *   - decoding: a sequence fed one position at a time through the CPU
 *     kernel's cache path (gr_graph.decode_len) gives the whole sequence's
 *     rows, and the body the CUDA decode kernel runs gives the same bits;
 *   - the shape errors at the layer. With `cpu` only, but the gradchecks. */
#include "attn_cpu.h"
#include "body_check.h"
#include "gradcheck.h"
#include "op_step.h"

#include "kernels/body_attn.h"

static void test_gradchecks(void) {
    static const gr_gc_case cases[] = {
        {"attention causal 2 heads", "[{attention: {heads: 2}}, flatten, {dense: {units: 3}}]", 2, {5, 12}, 0, 0, NULL},
        {"attention T=1", "[{attention: {heads: 1}}, flatten, {dense: {units: 3}}]", 2, {1, 9}, 0, 0, NULL},
        {"attention 1 head", "[{attention: {heads: 1}}, flatten, {dense: {units: 2}}]", 2, {6, 15}, 0, 0, NULL},
        {"attention not causal", "[{attention: {heads: 3, causal: false}}, flatten, {dense: {units: 2}}]", 2, {4, 9},
         0, 0, NULL},
        /* T = 37: a second, partial query tile */
        {"attention T=37", "[{dense: {units: 6}}, {attention: {heads: 2}}, flatten, {dense: {units: 2}}]", 2, {37, 2},
         0, 0, NULL},
        /* T = 70: past one key tile; heads 3 of 1 column */
        {"attention T=70", "[{dense: {units: 9}}, {attention: {heads: 3}}, flatten, {dense: {units: 2}}]", 2, {70, 1},
         0, 0, NULL},
    };
    for (size_t i = 0; i < GR_ARRAY_LEN(cases); i++) gr_gc_run(&cases[i]);
}

typedef struct attn_run {
    gr_attn_geo g;
    int64_t n, nq, ny, nr; /* samples; elements of qkv, y, lse */
} attn_run;

static attn_run attn_run_of(int64_t n, int64_t t, int64_t c, int64_t heads, bool causal) {
    attn_run r;
    r.g = gr_attn_geo_of(t, 3 * c, heads, causal);
    r.n = n;
    r.nq = n * t * 3 * c;
    r.ny = n * t * c;
    r.nr = n * heads * t;
    return r;
}

/* The bodies, one row at a time as the CUDA kernels run them, against the
 * CPU kernel. */
static void test_bodies(int64_t n, int64_t t, int64_t c, int64_t heads, bool causal) {
    const attn_run r = attn_run_of(n, t, c, heads, causal);
    float *qkv = t_rand(r.nq, -2.0f, 2.0f), *dy = t_rand(r.ny, -1.0f, 1.0f);
    float *y = t_alloc(r.ny), *lse = t_alloc(r.nr), *yb = t_alloc(r.ny), *lseb = t_alloc(r.nr);
    float *dqkv = t_rand(r.nq, 5, 6), *delta = t_alloc(r.nr), *dqkvb = t_rand(r.nq, 7, 8), *deltab = t_alloc(r.nr);
    attn_cpu_fwd(&r.g, r.n, qkv, y, lse);
    attn_cpu_bwd(&r.g, r.n, dy, qkv, y, lse, dqkv, delta);
    for (int64_t b = 0; b < n; b++)
        for (int64_t h = 0; h < heads; h++)
            for (int64_t i = 0; i < t; i++) gr_body_attn_row(qkv, yb, lseb, &r.g, b, h, i);
    for (int64_t b = 0; b < n; b++)
        for (int64_t h = 0; h < heads; h++)
            for (int64_t i = 0; i < t; i++) gr_body_attn_bwd_q(dy, qkv, y, lse, deltab, dqkvb, &r.g, b, h, i);
    for (int64_t b = 0; b < n; b++)
        for (int64_t h = 0; h < heads; h++)
            for (int64_t j = 0; j < t; j++) gr_body_attn_bwd_kv(dy, qkv, lse, deltab, dqkvb, &r.g, b, h, j);
    char what[96];
    snprintf(what, sizeof what, "attention n%lld T%lld C%lld h%lld causal %d: y", (long long)n, (long long)t,
             (long long)c, (long long)heads, causal);
    CHECK_CLOSE_ARR(what, yb, y, r.ny, 1e-5);
    CHECK_CLOSE_ARR("lse", lseb, lse, r.nr, 1e-5);
    CHECK_CLOSE_ARR("delta", deltab, delta, r.nr, 1e-5);
    CHECK_CLOSE_ARR("dqkv", dqkvb, dqkv, r.nq, 1e-5);
    free(qkv); free(dy); free(y); free(lse); free(yb); free(lseb); free(dqkv); free(delta); free(dqkvb); free(deltab);
}

/* Rows after position p rewritten (NaN in some) leave y, lse and dq of the
 * rows up to p unchanged, bit for bit. */
static void test_causality(int64_t t, int64_t c, int64_t heads, int64_t p) {
    const attn_run r = attn_run_of(2, t, c, heads, true);
    float *qkv = t_rand(r.nq, -2.0f, 2.0f), *dy = t_rand(r.ny, -1.0f, 1.0f);
    float *y = t_alloc(r.ny), *lse = t_alloc(r.nr), *dqkv = t_alloc(r.nq), *delta = t_alloc(r.nr);
    attn_cpu_fwd(&r.g, r.n, qkv, y, lse);
    attn_cpu_bwd(&r.g, r.n, dy, qkv, y, lse, dqkv, delta);
    float *qkv2 = t_copy(qkv, r.nq), *dy2 = t_copy(dy, r.ny);
    float *y2 = t_alloc(r.ny), *lse2 = t_alloc(r.nr), *dqkv2 = t_alloc(r.nq), *delta2 = t_alloc(r.nr);
    for (int64_t b = 0; b < 2; b++)
        for (int64_t i = p + 1; i < t; i++)
            for (int64_t e = 0; e < 3 * c; e++) qkv2[(b * t + i) * 3 * c + e] = e % 7 == 0 ? NAN : 9.0f - (float)e;
    attn_cpu_fwd(&r.g, r.n, qkv2, y2, lse2);
    attn_cpu_bwd(&r.g, r.n, dy2, qkv2, y2, lse2, dqkv2, delta2);
    int bad = 0;
    for (int64_t b = 0; b < 2; b++)
        for (int64_t i = 0; i <= p; i++) {
            bad += memcmp(y + (b * t + i) * c, y2 + (b * t + i) * c, (size_t)c * sizeof(float)) != 0;
            bad += memcmp(dqkv + (b * t + i) * 3 * c, dqkv2 + (b * t + i) * 3 * c, (size_t)c * sizeof(float)) != 0;
            for (int64_t h = 0; h < heads; h++) bad += lse[(b * heads + h) * t + i] != lse2[(b * heads + h) * t + i];
        }
    CHECK_MSG(bad == 0, "attention T%lld: rows after %lld changed %d rows up to it", (long long)t, (long long)p, bad);
    /* and the change did reach the later rows */
    CHECK(memcmp(y + (p + 1) * c, y2 + (p + 1) * c, (size_t)c * sizeof(float)) != 0);
    free(qkv); free(dy); free(y); free(lse); free(dqkv); free(delta);
    free(qkv2); free(dy2); free(y2); free(lse2); free(dqkv2); free(delta2);
}

/* One position at a time, as `gpurun generate` runs a decoding graph. */
static void test_decode(int64_t n, int64_t t, int64_t c, int64_t heads) {
    const attn_run r = attn_run_of(n, t, c, heads, true);
    float *qkv = t_rand(r.nq, -2.0f, 2.0f), *y = t_alloc(r.ny), *lse = t_alloc(r.nr);
    attn_cpu_fwd(&r.g, r.n, qkv, y, lse);
    gr_graph g;
    memset(&g, 0, sizeof g);
    g.decode_len = t + 3; /* room to spare: rows past the last position stay unread */
    float *cache = t_rand(n * g.decode_len * 2 * c, 50, 60), *cache_b = t_copy(cache, n * g.decode_len * 2 * c);
    float *step = t_alloc(n * 3 * c), *yd = t_alloc(n * c), *ld = t_alloc(n * heads), *yb = t_alloc(n * c);
    float *lb = t_alloc(n * heads);
    int64_t xs[3] = {n, 1, 3 * c}, ys[3] = {n, 1, c}, ls[3] = {n, heads, 1}, cs[3] = {n, g.decode_len, 2 * c};
    float *yall = t_alloc(r.ny);
    int same = 1;
    for (int64_t p = 0; p < t; p++) {
        for (int64_t b = 0; b < n; b++) memcpy(step + b * 3 * c, qkv + (b * t + p) * 3 * c, (size_t)(3 * c) * sizeof(float));
        kt k;
        kt_init(&k, GR_OP_ATTENTION, 1, 3, n);
        kt_tensor(&k.tin[0], GR_F32, 3, xs);
        kt_tensor(&k.tout[0], GR_F32, 3, ys);
        kt_tensor(&k.tout[1], GR_F32, 3, ls);
        kt_tensor(&k.tout[2], GR_F32, 3, cs);
        k.node.attrs.heads = heads;
        k.node.attrs.causal = true;
        k.a.g = &g;
        k.ctx.pos = p;
        k.a.in[0] = step;
        k.a.out[0] = yd;
        k.a.out[1] = ld;
        k.a.out[2] = cache;
        gr_cpu_attention(&k.a);
        const gr_attn_geo geo = gr_attn_geo_of(1, 3 * c, heads, true);
        for (int64_t b = 0; b < n; b++)
            for (int64_t h = 0; h < heads; h++) gr_body_attn_decode(step, cache_b, yb, lb, &geo, g.decode_len, p, b, h);
        same &= memcmp(yd, yb, (size_t)(n * c) * sizeof(float)) == 0 && memcmp(ld, lb, (size_t)(n * heads) * sizeof(float)) == 0;
        for (int64_t b = 0; b < n; b++) memcpy(yall + (b * t + p) * c, yd + b * c, (size_t)c * sizeof(float));
    }
    char what[96];
    snprintf(what, sizeof what, "attention decode n%lld T%lld C%lld h%lld against the whole sequence", (long long)n,
             (long long)t, (long long)c, (long long)heads);
    CHECK_CLOSE_ARR(what, yall, y, r.ny, 1e-5);
    CHECK_MSG(same, "attention decode: the CPU kernel and the body differ");
    free(qkv); free(y); free(lse); free(cache); free(cache_b); free(step); free(yd); free(ld); free(yb); free(lb);
    free(yall);
}

static void test_errors(void) {
    const int64_t s3[2] = {4, 12}, s1[1] = {12}, s4[2] = {4, 10};
    gr_bnt_expect_error("[{attention: {heads: 2}}]", s1, 1, 2, "attention needs a float input [batch, T, 3*C]");
    gr_bnt_expect_error("[{attention: {heads: 3}}]", s3, 2, 2, "must be 3 * C with C divisible by heads (3)");
    gr_bnt_expect_error("[{attention: {heads: 1}}]", s4, 2, 2, "must be 3 * C");
    gr_bnt_expect_error_at("[attention]", s3, 2, 2, "attention needs attributes, e.g. {heads: 12}", false);
    gr_bnt_expect_error("[{attention: {heads: 0}}]", s3, 2, 2, "heads");
    const int64_t big[2] = {2, 3 * 514};
    gr_bnt_expect_error("[{attention: {heads: 2}}]", big, 2, 2, "a head of 257 columns (C 514 / heads 2); at most 256");
}

int main(int argc, char **argv) {
    int rc = gr_gc_args(argc, argv);
    if (rc) return rc;
    test_gradchecks();
    if (!gr_gc_on_cpu()) return gr_test_report();
    test_bodies(2, 5, 8, 2, true);
    test_bodies(1, 1, 4, 1, true);
    test_bodies(3, 37, 12, 3, true);
    test_bodies(2, 100, 128, 2, true);
    test_bodies(2, 70, 20, 4, false);
    test_bodies(1, 33, GR_ATTN_MAX_HEAD, 1, true);
    test_causality(50, 16, 2, 20);
    test_causality(100, 8, 1, 63);
    test_causality(9, 6, 3, 0);
    test_decode(2, 9, 8, 2);
    test_decode(1, 70, 12, 3);
    test_errors();
    return gr_test_report();
}
