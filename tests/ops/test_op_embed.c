/* test_op_embed.c — embedding and pos_embedding (graph/op_embed.c):
 *   - finite-difference gradchecks through the real pipeline on the backend
 *     named on the command line (gradcheck.h: `cpu` or `cuda`): dweight of
 *     token models whose ids repeat in the batch (accumulation), one id a
 *     sample, nanoGPT's wte + wpe with T < max_len and T == max_len, a head
 *     tied to the embedding; dx and dweight of pos_embedding on a float
 *     input at both lengths; two micro-batches' gradients adding up;
 *   - an id outside [0, vocab) gives a NaN row and a NaN loss, and adds
 *     nothing to the weight's gradient;
 *   - the bodies (kernels/body_embed.h) against the CPU kernels, bit for bit:
 *     the gather with ids out of range, the backward for several splits of
 *     the rows into parts, its independence of the thread count, and
 *     pos_embedding both ways, accumulating into a gradient that holds
 *     values already;
 *   - the build errors at their keys (T > max_len at max_len, the inputs'
 *     types and ranks);
 *   - GR_EMBED_DUMP=path (cpu): the PyTorch parity cases written there for
 *     tests/ops/embed_parity_torch.py.
 * The CPU-only parts run with `cpu` only. */
#include <omp.h>

#include "body_check.h"
#include "gradcheck.h"
#include "kernels/body_embed.h"
#include "op_step.h"

/* ---- gradchecks ---- */

static const gr_tk_case gc_token_cases[] = {
    {"embedding, 20 tokens of 7 ids", "[{embedding: {vocab: 7, dim: 5}}, tanh, {dense: {units: 4}}]", 5, 7},
    {"embedding, one id a sample, unused rows", "[{embedding: {vocab: 6, dim: 4, init_std: 0.5}}, "
     "{dense: {units: 3}}]", 0, 3},
    {"wte + wpe, T 5 < max_len 8", "[{embedding: {vocab: 9, dim: 6, init_std: 0.3}, name: wte}, "
     "{pos_embedding: {max_len: 8, init_std: 0.3}, name: wpe}, gelu, {dense: {units: 5}}]", 5, 4},
    {"wte + wpe, T == max_len 5", "[{embedding: {vocab: 9, dim: 6, init_std: 0.3}, name: wte}, "
     "{pos_embedding: {max_len: 5, init_std: 0.3}, name: wpe}, gelu, {dense: {units: 5}}]", 5, 4},
    {"wte + wpe, head tied to wte", "[{embedding: {vocab: 7, dim: 4}, name: wte}, {pos_embedding: {max_len: 6}}, "
     "tanh, {dense: {units: 7, tied: wte, bias: false}}]", 6, 5},
};

static void test_gradchecks(void) {
    for (size_t i = 0; i < GR_ARRAY_LEN(gc_token_cases); i++) gr_gc_token_run(&gc_token_cases[i]);
    /* dx through pos_embedding's view, and its dweight, on a float input */
    static const gr_gc_case cases[] = {
        {"pos_embedding dx, T 4 < max_len 6", "[{pos_embedding: {max_len: 6}}, tanh, flatten, {dense: {units: 3}}]",
         2, {4, 3}, 0.0, 0.0, NULL},
        {"pos_embedding dx, T == max_len 4", "[{dense: {units: 3}}, {pos_embedding: {max_len: 4, init_std: 0.5}}, "
         "sigmoid, flatten, {dense: {units: 3}}]", 2, {4, 5}, 0.0, 0.0, NULL},
    };
    for (size_t i = 0; i < GR_ARRAY_LEN(cases); i++) gr_gc_run(&cases[i]);
}

/* ---- accumulation over micro-batches: the grads arena holds their sum ---- */

/* Two passes on other ids without zeroing in between give the sum of each
 * pass's gradients alone (dense's contract: every parameter-gradient node
 * adds into the arena, which the optimizer step zeroes). */
static void test_accumulation(void) {
    static const gr_tk_case c = {"accumulation", "[{embedding: {vocab: 8, dim: 6}, name: wte}, {pos_embedding: "
                                 "{max_len: 7}, name: wpe}, tanh, {dense: {units: 8, tied: wte}}]", 7, 8};
    gr_error err = {0};
    gr_tk_model tm;
    CHECK_MSG(gr_tk_build(&tm, &c, 3, GR_PREC_FP32, &err) == GR_OK, "%s", err.msg);
    if (!tm.built) return;
    const gr_graph *g = &tm.g;
    gr_backend *be;
    gr_model m;
    gr_plan p;
    CHECK(gr_backend_create(gr_gc_device, 1, &be, &err) == GR_OK);
    gr_backend_opts fp32 = {.precision = GR_PREC_FP32};
    gr_backend_configure(be, &fp32);
    CHECK(gr_model_init(&m, g, be, 0, &err) == GR_OK);
    float *w = calloc((size_t)g->n_params + 1, sizeof *w);
    gr_graph_init_params(g, w, 5);
    gr_backend_upload(be, m.params, w, (size_t)g->n_params * sizeof *w);
    CHECK(gr_plan_compile(&p, &m, g, GR_PLAN_TRAIN, true, &err) == GR_OK);
    const int64_t nt = gr_tk_numel(g, 3), nw = g->n_trainable;
    int32_t ids[2][21], next[2][21];
    gr_tk_fill(&c, g, 3, 0xACC1, ids[0], next[0]);
    gr_tk_fill(&c, g, 3, 0xACC2, ids[1], next[1]);
    CHECK(nt == 21);
    gr_exec_ctx ctx = {.training = true, .rng_key = 1, .grad_scale = 1.0f / 6.0f};
    float *one[2], *both = calloc((size_t)nw + 1, sizeof *both);
    for (int k = 0; k < 2; k++) {
        one[k] = calloc((size_t)nw + 1, sizeof *one[k]);
        gr_backend_zero(be, m.grads, (size_t)nw * sizeof(float));
        gr_tk_run(&p, 3, ids[k], next[k], &ctx);
        gr_backend_download(be, one[k], m.grads, (size_t)nw * sizeof(float));
    }
    gr_backend_zero(be, m.grads, (size_t)nw * sizeof(float));
    for (int k = 0; k < 2; k++) gr_tk_run(&p, 3, ids[k], next[k], &ctx);
    gr_backend_download(be, both, m.grads, (size_t)nw * sizeof(float));
    double d = 0.0, scale = 0.0;
    for (int64_t i = 0; i < nw; i++) {
        d = fmax(d, fabs((double)both[i] - ((double)one[0][i] + (double)one[1][i])));
        scale = fmax(scale, fabs((double)both[i]));
    }
    CHECK_MSG(scale > 1e-3 && d <= 1e-6 * scale, "two micro-batches' gradients off their sum by %.3g (largest %.3g)", d,
              scale);
    free(w); free(one[0]); free(one[1]); free(both);
    gr_plan_free(&p);
    gr_model_free(&m);
    gr_backend_free(be);
    gr_tk_free(&tm);
}

/* ---- an id outside the vocabulary: NaN, never a clamp or a read outside ---- */

static void test_bad_id(void) {
    static const gr_tk_case c = {"bad id", "[{embedding: {vocab: 5, dim: 3}, name: wte}, {dense: {units: 4}}]", 3, 5};
    gr_error err = {0};
    gr_tk_model tm;
    CHECK_MSG(gr_tk_build(&tm, &c, 2, GR_PREC_FP32, &err) == GR_OK, "%s", err.msg);
    if (!tm.built) return;
    gr_backend *be;
    gr_model m;
    gr_plan p;
    CHECK(gr_backend_create("cpu", 2, &be, &err) == GR_OK);
    CHECK(gr_model_init(&m, &tm.g, be, 0, &err) == GR_OK);
    gr_graph_init_params(&tm.g, m.params, 3);
    CHECK(gr_plan_compile(&p, &m, &tm.g, GR_PLAN_TRAIN, true, &err) == GR_OK);
    int32_t ids[6] = {0, 4, 2, 3, 1, 0}, next[6] = {0, 1, 2, 3, 0, 1};
    gr_exec_ctx ctx = {.training = true, .rng_key = 1, .grad_scale = 0.5f};
    gr_backend_zero(be, m.grads, (size_t)tm.g.n_trainable * sizeof(float));
    CHECK(isfinite(gr_tk_run(&p, 2, ids, next, &ctx)));
    const int w = gr_tk_param(&tm.g, "wte.weight");
    const float *gw = (const float *)m.grads + tm.g.tensors[w].param_offset;
    const int32_t bad[2] = {5, -1};
    for (int b = 0; b < 2; b++) {
        ids[3] = bad[b];
        gr_backend_zero(be, m.grads, (size_t)tm.g.n_trainable * sizeof(float));
        const double loss = gr_tk_run(&p, 2, ids, next, &ctx);
        CHECK_MSG(isnan(loss), "id %d: loss %g, not NaN", bad[b], loss);
        int finite = 0;
        for (int k = 0; k < 15; k++) finite += isfinite(gw[k]) != 0;
        CHECK_MSG(finite == 15, "id %d: %d of wte.weight's 15 gradient entries finite", bad[b], finite);
        CHECK_MSG(gw[3 * 3] == 0.0f, "id %d: row 3 (no token) has gradient %g", bad[b], gw[9]);
    }
    gr_plan_free(&p);
    gr_model_free(&m);
    gr_backend_free(be);
    gr_tk_free(&tm);
}

/* ---- the bodies against the CPU kernels ---- */

/* n samples of T ids in [lo, hi) (some outside [0, vocab) when lo < 0 or hi > vocab) */
static int32_t *rand_ids(int64_t count, int32_t lo, int32_t hi) {
    int32_t *ids = gr_xmalloc((size_t)count * sizeof *ids);
    uint64_t key = gr_hash64(g_key++, 7);
    for (int64_t i = 0; i < count; i++) ids[i] = lo + (int32_t)(gr_hash64(key, (uint64_t)i) % (uint64_t)(hi - lo));
    return ids;
}

static void embed_args(kt *k, gr_op op, int64_t n, int64_t T, int64_t vocab, int64_t dim) {
    const int64_t ids[2] = {n, T}, w[2] = {vocab, dim}, y[3] = {n, T, dim};
    const bool fwd = op == GR_OP_EMBEDDING;
    kt_init(k, op, 2, 1, n);
    kt_tensor(&k->tin[fwd ? 0 : 1], GR_I32, 2, ids);
    kt_tensor(fwd ? &k->tout[0] : &k->tin[0], GR_F32, 3, y);
    kt_tensor_of(fwd ? &k->tin[1] : &k->tout[0], GR_F32, false, 2, w);
}

static void test_embedding_body(int64_t n, int64_t T, int64_t vocab, int64_t dim, int32_t lo, int32_t hi) {
    const int64_t ntok = n * T;
    int32_t *ids = rand_ids(ntok, lo, hi);
    float *w = rand_floats(vocab * dim, -1, 1), *y_cpu = rand_floats(ntok * dim, 0, 1);
    float *y_body = rand_floats(ntok * dim, 0, 1);
    kt k;
    embed_args(&k, GR_OP_EMBEDDING, n, T, vocab, dim);
    k.a.in[0] = ids;
    k.a.in[1] = w;
    k.a.out[0] = y_cpu;
    gr_cpu_embedding(&k.a);
    for (int64_t i = 0; i < ntok * dim; i++) gr_body_embedding(ids, w, y_body, vocab, dim, i);
    CHECK_SAME_ARR("embedding body", y_body, y_cpu, ntok * dim);
    int wrong = 0, nan_rows = 0;
    for (int64_t t = 0; t < ntok; t++) {
        const bool ok = ids[t] >= 0 && ids[t] < vocab;
        nan_rows += !ok;
        for (int64_t j = 0; j < dim; j++)
            wrong += ok ? y_cpu[t * dim + j] != w[ids[t] * dim + j] : !isnan(y_cpu[t * dim + j]);
    }
    CHECK_MSG(wrong == 0, "embedding [%lld, %lld] vocab %lld: %d values neither the row nor NaN", (long long)n,
              (long long)T, (long long)vocab, wrong);
    if (lo < 0 || hi > vocab) CHECK_MSG(nan_rows > 0, "no id out of range drawn");

    /* backward into a gradient holding values already (an earlier micro-batch) */
    float *dy = rand_floats(ntok * dim, -1, 1), *dw0 = rand_floats(vocab * dim, -1, 1);
    float *dw_cpu = t_copy(dw0, vocab * dim), *dw_body = t_alloc(vocab * dim);
    kt kb;
    embed_args(&kb, GR_OP_EMBEDDING_BWD, n, T, vocab, dim);
    kb.a.in[0] = dy;
    kb.a.in[1] = ids;
    kb.a.out[0] = dw_cpu;
    gr_cpu_embedding_bwd(&kb.a);
    const int64_t parts[] = {1, 3, 64};
    for (size_t p = 0; p < GR_ARRAY_LEN(parts); p++) {
        const int64_t np = GR_MIN(parts[p], vocab);
        memcpy(dw_body, dw0, (size_t)(vocab * dim) * sizeof *dw0);
        for (int64_t part = 0; part < np; part++)
            for (int64_t j = 0; j < dim; j++) gr_body_embedding_bwd(ids, dy, dw_body, ntok, vocab, dim, np, part, j);
        char what[96];
        snprintf(what, sizeof what, "embedding_bwd body, %lld parts, vocab %lld", (long long)np, (long long)vocab);
        CHECK_SAME_ARR(what, dw_body, dw_cpu, vocab * dim);
    }
    /* the same bits on one thread and on four */
    const int threads = omp_get_max_threads();
    float *dw1 = t_copy(dw0, vocab * dim), *dw4 = t_copy(dw0, vocab * dim);
    for (int r = 0; r < 2; r++) {
        omp_set_num_threads(r ? 4 : 1);
        kb.a.out[0] = r ? dw4 : dw1;
        gr_cpu_embedding_bwd(&kb.a);
    }
    omp_set_num_threads(threads);
    CHECK_SAME_ARR("embedding_bwd on 1 and 4 threads", dw4, dw1, vocab * dim);
    free(ids); free(w); free(y_cpu); free(y_body); free(dy); free(dw0); free(dw_cpu); free(dw_body);
    free(dw1); free(dw4);
}

static void test_pos_body(int64_t n, int64_t T, int64_t C, int64_t max_len) {
    const int64_t tc = T * C, xs[3] = {n, T, C}, ws[2] = {max_len, C};
    float *x = rand_floats(n * tc, -1, 1), *w = rand_floats(max_len * C, -1, 1);
    float *y_cpu = rand_floats(n * tc, 0, 1), *y_body = rand_floats(n * tc, 0, 1);
    kt k;
    kt_init(&k, GR_OP_POS_EMBEDDING, 2, 1, n);
    kt_tensor(&k.tin[0], GR_F32, 3, xs);
    kt_tensor_of(&k.tin[1], GR_F32, false, 2, ws);
    kt_tensor(&k.tout[0], GR_F32, 3, xs);
    k.a.in[0] = x;
    k.a.in[1] = w;
    k.a.out[0] = y_cpu;
    gr_cpu_pos_embedding(&k.a);
    for (int64_t i = 0; i < n * tc; i++) gr_body_pos_embedding(x, w, y_body, tc, i);
    CHECK_SAME_ARR("pos_embedding body", y_body, y_cpu, n * tc);
    int wrong = 0;
    for (int64_t b = 0; b < n; b++)
        for (int64_t i = 0; i < tc; i++) wrong += y_cpu[b * tc + i] != x[b * tc + i] + w[i];
    CHECK_MSG(wrong == 0, "pos_embedding [%lld, %lld, %lld]: %d values not x + w[t]", (long long)n, (long long)T,
              (long long)C, wrong);

    float *dy = rand_floats(n * tc, -1, 1), *dw0 = rand_floats(max_len * C, -1, 1);
    float *dw_cpu = t_copy(dw0, max_len * C), *dw_body = t_copy(dw0, max_len * C);
    kt kb;
    kt_init(&kb, GR_OP_POS_EMBEDDING_BWD_PARAMS, 1, 1, n);
    kt_tensor(&kb.tin[0], GR_F32, 3, xs);
    kt_tensor_of(&kb.tout[0], GR_F32, false, 2, ws);
    kb.a.in[0] = dy;
    kb.a.out[0] = dw_cpu;
    gr_cpu_pos_embedding_bwd_params(&kb.a);
    for (int64_t i = 0; i < tc; i++) gr_body_pos_embedding_bwd(dy, dw_body, n, tc, i);
    CHECK_SAME_ARR("pos_embedding_bwd_params body", dw_body, dw_cpu, max_len * C);
    double worst = 0.0;
    for (int64_t i = 0; i < max_len * C; i++) {
        double want = dw0[i];
        for (int64_t b = 0; i < tc && b < n; b++) want += dy[b * tc + i];
        worst = fmax(worst, fabs(dw_cpu[i] - want));
    }
    CHECK_MSG(worst < 1e-5, "pos_embedding_bwd_params: off the sum over the batch by %g (rows past T untouched)",
              worst);
    free(x); free(w); free(y_cpu); free(y_body); free(dy); free(dw0); free(dw_cpu); free(dw_body);
}

static void test_bodies(void) {
    test_embedding_body(3, 50, 40, 33, -2, 42);       /* ids out of range both ways */
    test_embedding_body(8, 64, 50, 96, 0, 50);        /* the CPU's parallel path; every id repeats */
    test_embedding_body(2, 9, 1, 5, -1, 2);           /* a vocabulary of one */
    test_embedding_body(4, 16, 300, 8, 0, 300);       /* more rows than parts */
    test_pos_body(5, 7, 9, 10);
    test_pos_body(3, 4, 5, 4);                        /* T == max_len */
    test_pos_body(4, 64, 160, 100);                   /* the CPU's parallel path, blocks of 256 columns */
}

/* ---- errors at their keys ---- */

static void expect_token_error(const char *layers, int64_t T, const char *want) {
    const gr_tk_case c = {"error", layers, T, 5};
    gr_error err = {0};
    gr_tk_model tm;
    gr_status st = gr_tk_build(&tm, &c, 2, GR_PREC_FP32, &err);
    CHECK_MSG(st == GR_ERR_USAGE, "%s: status %d", layers, st);
    CHECK_STR_CONTAINS(err.msg, want);
    gr_tk_free(&tm);
}

static void test_errors(void) {
    static const int64_t s2[] = {128, 8}, s1[] = {12}, s3[] = {2, 3, 4};
    gr_bnt_expect_error("[{pos_embedding: {max_len: 64}}, flatten, {dense: {units: 2}}]", s2, 2, 2,
                        "t:1:28: model.layers[0].pos_embedding.max_len: 64 positions, but the input has T=128 "
                        "('input' [n, 128, 8]): raise max_len or shorten the sequence");
    expect_token_error("[{embedding: {vocab: 10, dim: 4}}, {pos_embedding: {max_len: 64}}, {dense: {units: 3}}]", 128,
                       "tokens.yaml:1:62: model.layers[1].pos_embedding.max_len: 64 positions, but the input has "
                       "T=128");
    gr_bnt_expect_error("[{pos_embedding: {max_len: 8}}]", s1, 1, 2,
                        "model.layers[0].pos_embedding: pos_embedding takes a float sequence [batch, T, C]; 'input' is "
                        "fp32 [n, 12]");
    gr_bnt_expect_error("[flatten, {pos_embedding: {max_len: 8}}]", s3, 3, 2, "'flatten0' is fp32 [n, 24]");
    expect_token_error("[{pos_embedding: {max_len: 8}}]", 5,
                       "'tokens' is int32 [n, 5] (token ids need an embedding first)");
    gr_bnt_expect_error("[{embedding: {vocab: 8, dim: 4}}]", s1, 1, 2,
                        "model.layers[0].embedding: embedding takes int32 token ids; 'input' is fp32 [n, 12] (declare "
                        "an integer field in model.inputs)");
    expect_token_error("[{dense: {units: 3}}]", 5, "dense takes a float input; 'tokens' is int32 [n, 5]");
    /* ids [n, 2, 3, 4]: the output would have 5 axes */
    gr_cfg *l = NULL;
    gr_error err = {0};
    CHECK(gr_cfg_parse_text("[{embedding: {vocab: 8, dim: 4}}]", "t", 1, 1, &l, &err) == GR_OK);
    gr_job_spec spec;
    memset(&spec, 0, sizeof spec);
    snprintf(spec.file, sizeof spec.file, "t");
    spec.model.layers = l;
    spec.train.micro_batch = spec.train.batch_size = 2;
    snprintf(spec.train.loss, sizeof spec.train.loss, "softmax_cross_entropy");
    gr_graph_io io = {.n_inputs = 1};
    io.in[0] = (gr_io_tensor){.name = "ids", .elem = GR_I32, .ndim = 3, .shape = {2, 3, 4}};
    io.target = (gr_io_tensor){.name = "y", .elem = GR_I32, .ndim = 3, .shape = {2, 3, 4}};
    gr_graph g;
    gr_status st = gr_graph_build_io(&spec, &io, &g, &err);
    CHECK(st == GR_ERR_USAGE);
    if (!st) gr_graph_free(&g);
    CHECK_STR_CONTAINS(err.msg, "embedding adds an axis of dim to its input, but 'ids' [n, 2, 3, 4] has 4 axes");
    gr_cfg_free(l);
}

/* ---- PyTorch parity: the cases embed_parity_torch.py recomputes ---- */

static const gr_tk_case parity_cases[] = {
    {"nn.Embedding + Linear", "[{embedding: {vocab: 11, dim: 6}, name: wte}, {dense: {units: 5}, name: head}]", 7, 5},
    {"nanoGPT wte + wpe, head tied, T < max_len", "[{embedding: {vocab: 13, dim: 8, init_std: 0.02}, name: wte}, "
     "{pos_embedding: {max_len: 10, init_std: 0.02}, name: wpe}, {dense: {units: 13, tied: wte, bias: false}, "
     "name: head}]", 6, 13},
    {"nn.Embedding + Linear, one id a sample", "[{embedding: {vocab: 4, dim: 3}, name: wte}, {dense: {units: 2}, "
     "name: head}]", 0, 4},
    {"wte + wpe, T == max_len", "[{embedding: {vocab: 9, dim: 5, init_std: 0.5}, name: wte}, "
     "{pos_embedding: {max_len: 10}, name: wpe}, {dense: {units: 9}, name: head}]", 10, 3},
};

/* the forward output of the last embedding-family layer, kept by a hook (the arena reuses it later) */
typedef struct dump_keep {
    gr_op op;
    float *x;
    int64_t n;
} dump_keep;

static void dump_after(void *user, int step, const gr_kargs *a) {
    (void)step;
    dump_keep *k = user;
    if (a->node->op == k->op && a->node->fwd < 0)
        memcpy(k->x, a->out[0], (size_t)gr_kargs_numel(a, a->tout[0]) * sizeof(float));
}

/* Per case: int64 [n, T, vocab, dim, max_len (0: none), classes, params, 0];
 * int32 ids and targets [n*T]; float32 x, the embeddings' output [n*T*dim];
 * float64 the mean loss; per parameter: int64 [name length, numel], the
 * name, float32 its values and its gradient (one CPU training pass at
 * grad_scale 1/n: the gradient of the mean over the tokens). */
static void dump_parity(const char *path) {
    FILE *f = fopen(path, "wb");
    CHECK_MSG(f != NULL, "cannot write %s", path);
    if (!f) return;
    for (size_t i = 0; i < GR_ARRAY_LEN(parity_cases); i++) {
        const gr_tk_case *c = &parity_cases[i];
        const int64_t n = 3;
        gr_error err = {0};
        gr_tk_model tm;
        gr_status st = gr_tk_build(&tm, c, n, GR_PREC_FP32, &err);
        CHECK_MSG(st == GR_OK, "%s: %s", c->name, err.msg);
        if (st) {
            gr_tk_free(&tm);
            continue;
        }
        const gr_graph *g = &tm.g;
        gr_backend *be;
        gr_model m;
        gr_plan p;
        CHECK(gr_backend_create("cpu", 1, &be, &err) == GR_OK);
        CHECK(gr_model_init(&m, g, be, 0, &err) == GR_OK);
        gr_graph_init_params(g, m.params, 100 + i);
        CHECK(gr_plan_compile(&p, &m, g, GR_PLAN_TRAIN, true, &err) == GR_OK);
        const int wte = gr_tk_param(g, "wte.weight"), wpe = gr_tk_param(g, "wpe.weight");
        const int64_t nt = gr_tk_numel(g, n), dim = g->tensors[wte].shape[1];
        int32_t *ids = gr_xmalloc((size_t)nt * sizeof *ids), *next = gr_xmalloc((size_t)nt * sizeof *next);
        dump_keep keep = {wpe >= 0 ? GR_OP_POS_EMBEDDING : GR_OP_EMBEDDING, gr_xmalloc((size_t)(nt * dim) * 4u), n};
        gr_exec_hook hook = {NULL, dump_after, &keep, false};
        gr_plan_add_hook(&p, &hook);
        gr_tk_fill(c, g, n, 0xE3BEDull + i, ids, next);
        gr_exec_ctx ctx = {.training = true, .rng_key = 1, .grad_scale = 1.0f / (float)n};
        gr_backend_zero(be, m.grads, (size_t)g->n_trainable * sizeof(float));
        const double loss = gr_tk_run(&p, n, ids, next, &ctx);
        int64_t np = 0;
        for (int t = 0; t < g->n_tensors; t++) np += g->tensors[t].kind == GR_TK_PARAM;
        const int64_t hdr[8] = {n, c->T, g->tensors[wte].shape[0], dim, wpe >= 0 ? g->tensors[wpe].shape[0] : 0,
                                g->n_classes, np, 0};
        CHECK(fwrite(hdr, sizeof hdr, 1, f) == 1);
        CHECK(fwrite(ids, 4u, (size_t)nt, f) == (size_t)nt && fwrite(next, 4u, (size_t)nt, f) == (size_t)nt);
        CHECK(fwrite(keep.x, 4u, (size_t)(nt * dim), f) == (size_t)(nt * dim) && fwrite(&loss, 8, 1, f) == 1);
        for (int t = 0; t < g->n_tensors; t++) {
            const gr_tensor *pt = &g->tensors[t];
            if (pt->kind != GR_TK_PARAM) continue;
            const int64_t pn[2] = {(int64_t)strlen(pt->name), gr_tensor_numel(pt)};
            const float *v = (const float *)m.params + pt->param_offset;
            const float *gv = (const float *)m.grads + pt->param_offset;
            const size_t k = (size_t)pn[1];
            CHECK(fwrite(pn, sizeof pn, 1, f) == 1 && fwrite(pt->name, 1, (size_t)pn[0], f) == (size_t)pn[0]);
            CHECK(fwrite(v, 4u, k, f) == k && fwrite(gv, 4u, k, f) == k);
        }
        free(ids);
        free(next);
        free(keep.x);
        gr_plan_free(&p);
        gr_model_free(&m);
        gr_backend_free(be);
        gr_tk_free(&tm);
    }
    CHECK(fclose(f) == 0);
}

int main(int argc, char **argv) {
    int rc = gr_gc_args(argc, argv);
    if (rc) return rc;
    const char *dump = getenv("GR_EMBED_DUMP");
    if (dump && dump[0] && gr_gc_on_cpu()) {
        dump_parity(dump);
        return gr_test_report();
    }
    test_gradchecks();
    test_accumulation();
    if (!gr_gc_on_cpu()) return gr_test_report();
    test_bad_id();
    test_bodies();
    test_errors();
    return gr_test_report();
}
