/* test_cuda_sdpa.c — attention on cuDNN's fused attention
 * (kernels/cuda/cudnn_sdpa.c) against the CPU reference kernel
 * (kernels/cpu/attn.c). Label `gpu`: exits 77 (skipped) without a CUDA
 * device.
 *
 * Each case is a model [dense 3C, attention, flatten, dense] compiled on
 * the device in bf16 (or fp16), heads of 64 columns, so its attention
 * steps are native half steps cuDNN takes. Their two steps are run alone
 * on inputs the test writes: q, k, v and dy random, rounded to the type;
 * the CPU runs the same (decoded) values in fp32, its backward on the
 * device's y and lse (the outputs the device's backward reads). Cases:
 * causal and not, T = 70 (not a multiple of cuDNN's 64-row tiles), T = 1,
 * T = 128, one head and several; a partial batch (fewer samples than the
 * plan's micro-batch) runs the same plan.
 *
 * Which kernel ran must have been said: cuDNN's fused attention, or
 * gpurun's own kernel and why. A decline fails the test on sm80 and newer
 * (where cuDNN's fused attention must run; the backend refuses older
 * GPUs), after the comparisons, which then check the own kernel; except at
 * T = 1, where gpurun's own kernel must run (on fp32 copies) and say so
 * (cuDNN 9.14's backward gave non-finite dq and dk there on an H200). An fp32 model must
 * say that gpurun's own kernel runs, and why.
 *
 * Errors are sum((a-b)^2) / (sum(b^2) + n * 1e-6), b the CPU's (the floor
 * keeps an all-zero reference, T = 1's dq and dk, from dividing by zero):
 *   y <= 1e-4: stored in bf16 (relative rounding up to 2^-9: about 1.3e-6
 *     alone) from probabilities cuDNN rounds to bf16 before p.v (as much
 *     again); a wrong scale, mask or transpose is 1e-2 or more;
 *   dq, dk, dv <= 1e-3: bf16 outputs from p and ds rounded to bf16 for
 *     their products, and dq accumulated in another order (atomics);
 *   lse, delta <= 1e-7: fp32 sums over the same rounded inputs, in other
 *     orders (about 1e-12 apart). */
#include "attn_cpu.h"
#include "body_check.h"
#include "cuda_cmp.h"

#include "kernels/body_attn.h"

typedef struct sdpa_case {
    const char *name;
    int64_t n, t, heads;
    bool causal;
    gr_precision prec;
} sdpa_case;

#define D 64 /* columns a head */

static void sdpa_expect(const sdpa_case *c, const char *what, const float *got, const float *want, int64_t n,
                        double tol) {
    const double e = gr_cmp_nmse(got, want, n);
    CHECK_MSG(e <= tol, "%s: %s error %.3g > %.3g", c->name, what, e, tol);
}

/* Column third p (q 0, k 1, v 2) of x [n, T, 3C], packed [n, T, C]. */
static float *sdpa_third(const float *x, int64_t rows, int64_t c, int p) {
    float *o = gr_xmalloc((size_t)(rows * c) * sizeof *o);
    for (int64_t r = 0; r < rows; r++) memcpy(o + r * c, x + r * 3 * c + p * c, (size_t)c * sizeof *o);
    return o;
}

/* n values uniform in [lo, hi) rounded to e, as raw bits (into raw) and decoded (returned) */
static float *sdpa_rand(int64_t n, float lo, float hi, gr_elem e, uint16_t *raw) {
    float *x = rand_floats(n, lo, hi);
    for (int64_t i = 0; i < n; i++) {
        raw[i] = e == GR_BF16 ? gr_bf16_encode_hd(x[i]) : gr_fp16_encode_hd(x[i]);
        x[i] = e == GR_BF16 ? gr_bf16_decode_hd(raw[i]) : gr_fp16_decode_hd(raw[i]);
    }
    return x;
}

static gr_kargs *sdpa_step(gr_plan *p, gr_op op) {
    for (int i = 0; i < p->steps.n; i++)
        if (p->steps.step[i].node->op == op) return &p->steps.step[i];
    return NULL;
}

/* The device backend for precision p, or NULL after "SKIP: ..." */
static gr_backend *sdpa_device(gr_precision p) {
    gr_error err = {0};
    gr_backend *be = NULL;
    gr_backend_opts o = {.precision = p, .cudnn_benchmark = false, .cuda_graph = false};
    if (gr_cmp_open_device(&o, &be, &err) != GR_OK) {
        printf("SKIP: %s\n", err.msg);
        return NULL;
    }
    if (strcmp(gr_backend_name(be), "cuda") != 0) { /* GR_CUDA_TEST_DEVICE=cpu: no cuDNN to test */
        gr_backend_free(be);
        printf("SKIP: cuDNN's fused attention needs a CUDA device\n");
        return NULL;
    }
    return be;
}

/* The model of case c on be, its train plan compiled; false after a failed check. */
static bool sdpa_model(const sdpa_case *c, gr_backend *be, gr_cmp_model *cm, gr_model *m, gr_plan *tp) {
    char layers[256];
    snprintf(layers, sizeof layers, "[{dense: {units: %lld}}, {attention: {heads: %lld, causal: %s}}, flatten, "
             "{dense: {units: 2}}]", (long long)(3 * c->heads * D), (long long)c->heads, c->causal ? "true" : "false");
    const int64_t shape[2] = {c->t, 4};
    gr_error err = {0};
    memset(m, 0, sizeof *m);
    memset(tp, 0, sizeof *tp);
    bool ok = gr_cmp_model_build(cm, layers, NULL, shape, 2, c->n, 0.0, false, c->prec, &err) == GR_OK &&
              gr_model_init(m, &cm->g, be, 0, &err) == GR_OK &&
              gr_plan_compile(tp, m, &cm->g, GR_PLAN_TRAIN, true, &err) == GR_OK;
    CHECK_MSG(ok, "%s: %s", c->name, err.msg);
    return ok;
}

static void test_case(const sdpa_case *c) {
    gr_backend *be = sdpa_device(c->prec);
    if (!be) return;
    gr_cmp_model cm;
    gr_model m;
    gr_plan tp;
    if (!sdpa_model(c, be, &cm, &m, &tp)) goto done;
    gr_kargs *f = sdpa_step(&tp, GR_OP_ATTENTION), *b = sdpa_step(&tp, GR_OP_ATTENTION_BWD);
    CHECK(f && b);
    if (!f || !b) goto done;
    const gr_elem e = f->tin[0]->elem;
    const gr_attn_geo g = gr_attn_geo_of(c->t, 3 * c->heads * D, c->heads, c->causal);
    const int64_t n = c->n, nq = n * g.t * 3 * g.c, ny = n * g.t * g.c, nr = n * g.heads * g.t;
    uint16_t *raw = gr_xmalloc((size_t)nq * sizeof *raw);
    float *qkv = sdpa_rand(nq, -2.0f, 2.0f, e, raw);
    gr_backend_upload(be, f->in[0], raw, (size_t)nq * 2);
    gr_exec_ctx ctx = {.training = true, .rng_key = 1, .grad_scale = 1.0f};
    f->n = b->n = n;
    f->ctx = b->ctx = &ctx;
    gr_backend_exec(f);
    float *y = gr_cmp_fetch_as(be, f->out[0], e, ny), *lse = gr_cmp_fetch(be, f->out[1], nr);
    float *dy = sdpa_rand(ny, -1.0f, 1.0f, e, raw); /* dy's bytes are written after the forward: it may share dead ones */
    gr_backend_upload(be, b->in[0], raw, (size_t)ny * 2);
    gr_backend_exec(b);
    float *dqkv = gr_cmp_fetch_as(be, b->out[0], e, nq), *delta = gr_cmp_fetch(be, b->out[1], nr);

    float *ry = gr_xmalloc((size_t)ny * sizeof *ry), *rl = gr_xmalloc((size_t)nr * sizeof *rl);
    float *rd = gr_xmalloc((size_t)nq * sizeof *rd), *rdl = gr_xmalloc((size_t)nr * sizeof *rdl);
    attn_cpu_fwd(&g, n, qkv, ry, rl);
    attn_cpu_bwd(&g, n, dy, qkv, y, lse, rd, rdl);
    sdpa_expect(c, "y", y, ry, ny, 1e-4);
    sdpa_expect(c, "lse", lse, rl, nr, 1e-7);
    sdpa_expect(c, "delta", delta, rdl, nr, 1e-7);
    static const char *const part[3] = {"dq", "dk", "dv"};
    for (int p = 0; p < 3; p++) {
        float *got = sdpa_third(dqkv, n * g.t, g.c, p), *want = sdpa_third(rd, n * g.t, g.c, p);
        sdpa_expect(c, part[p], got, want, ny, 1e-3);
        free(got);
        free(want);
    }
    /* a partial batch runs the plan built for the full one: its samples come out the same */
    if (n > 1) {
        gr_backend_zero(be, f->out[0], (size_t)ny * 2);
        f->n = n - 1;
        gr_backend_exec(f);
        float *yp = gr_cmp_fetch_as(be, f->out[0], e, ny - ny / n);
        sdpa_expect(c, "y of a partial batch", yp, ry, ny - ny / n, 1e-4);
        free(yp);
    }

    int cc = 0;
    const char *note = gr_cuda_attention_note(be, &cc);
    char want[64];
    snprintf(want, sizeof want, "runs cuDNN's fused attention (%s)", gr_elem_name(e));
    CHECK_MSG(strstr(note, "attention on cuda:") != NULL, "%s: which attention kernel runs was not said", c->name);
    if (c->t == 1) /* declined by the backend (its backward is wrong there): the own kernel, staged */
        CHECK_MSG(strstr(note, "runs gpurun's own kernel: T 1") != NULL,
                  "%s: want gpurun's own kernel at T 1, got: %s", c->name, note);
    else if (!strstr(note, want) || f->staged || b->staged) {
        fprintf(stderr, "  %s: cuDNN's fused attention did not run (compute capability %d.x): %s\n", c->name, cc, note);
        CHECK_MSG(cc < 8, "%s: on sm80 and newer cuDNN's fused attention must run", c->name);
    }
    free(raw);
    free(qkv);
    free(y);
    free(lse);
    free(dy);
    free(dqkv);
    free(delta);
    free(ry);
    free(rl);
    free(rd);
    free(rdl);
done:
    gr_plan_free(&tp);
    gr_model_free(&m);
    gr_cmp_model_free(&cm);
    gr_backend_free(be);
}

/* fp32: gpurun's own kernel runs, and says why */
static void test_fp32_says(void) {
    gr_backend *be = sdpa_device(GR_PREC_FP32);
    if (!be) return;
    const sdpa_case c = {"fp32", 2, 9, 2, true, GR_PREC_FP32};
    gr_cmp_model cm;
    gr_model m;
    gr_plan tp;
    if (sdpa_model(&c, be, &cm, &m, &tp)) {
        gr_kargs *f = sdpa_step(&tp, GR_OP_ATTENTION);
        gr_exec_ctx ctx = {.training = true, .grad_scale = 1.0f};
        f->n = c.n;
        f->ctx = &ctx;
        gr_backend_exec(f);
        gr_backend_sync(be);
        CHECK_STR_CONTAINS(gr_cuda_attention_note(be, NULL), "runs gpurun's own kernel: the step is fp32");
    }
    gr_plan_free(&tp);
    gr_model_free(&m);
    gr_cmp_model_free(&cm);
    gr_backend_free(be);
}

int main(void) {
    static const sdpa_case cases[] = {
        {"causal, T 70, 1 head", 2, 70, 1, true, GR_PREC_BF16},
        {"not causal, T 70, 3 heads", 2, 70, 3, false, GR_PREC_BF16},
        {"causal, T 1, 2 heads", 3, 1, 2, true, GR_PREC_BF16},
        {"not causal, T 1, 1 head", 2, 1, 1, false, GR_PREC_BF16},
        {"causal, T 128, 2 heads", 2, 128, 2, true, GR_PREC_BF16},
        {"causal, T 33, 2 heads, fp16", 2, 33, 2, true, GR_PREC_FP16},
    };
    gr_backend *probe = sdpa_device(GR_PREC_BF16); /* one skip for all without a device */
    if (!probe) return GR_TEST_SKIP_CODE;
    gr_backend_free(probe);
    test_fp32_says();
    for (size_t i = 0; i < GR_ARRAY_LEN(cases); i++) test_case(&cases[i]);
    return gr_test_report();
}
