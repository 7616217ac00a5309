/* test_tied.c — shared (tied) dense weights (`tied: LAYER`, `transpose:
 * true`; graph/op_dense.c), on the backend named on the command line
 * (`cpu`, the default, or `cuda`: tests/ops/gradcheck.h):
 *   - finite-difference gradchecks of models whose weights are read two and
 *     three times, plain, transposed and tied to a tied layer, inside block
 *     uses and by full name from outside one, with and without bias;
 *   - the summed gradient itself: a tied model against the same model
 *     untied, every copy of a weight set to the shared one (transposed where
 *     used so): the same loss and input gradient, and the shared weight's
 *     gradient is the sum of the copies' (transposed back); biases alike.
 *     On the CPU also at bf16 through the native oneDNN path when the CPU
 *     has it (its transposed strides), to bf16's tolerance;
 *   - the graph (CPU only): the shared weight is one PARAM tensor, counted
 *     once, and the tied layer owns only its bias; the build errors, each
 *     naming the layer, the tied layer and the shapes at file:line:col;
 *   - a GPT's LM head tied to its token embedding (an embedding layer's
 *     [vocab, dim] weight read by a dense layer of vocab units, on int32 ids,
 *     tests/ops/token_graph.h): a gradcheck, the one parameter counted once,
 *     and its gradient the sum of the embedding's and the head's, against
 *     the same model untied. */
#include "ops/gradcheck.h"

/* ---- a model run once: loss and every gradient ---- */

typedef struct tt_net {
    gr_cfg *layers;
    gr_graph g;
    gr_backend *be;
    gr_model m;
    gr_plan p;
    float *w;     /* the parameters' host copy (set before tt_net_run) */
    float *gw;    /* the gradients after tt_net_run */
    float *gx;    /* the input batch's gradient (fp32 only) */
    double loss;
} tt_net;

enum { TT_N = 4 };
static const int64_t tt_shape[3] = {1, 3, 4}; /* 12 features after flatten */

static bool tt_net_init(tt_net *t, const char *layers, gr_precision prec, const char *device) {
    memset(t, 0, sizeof *t);
    gr_error err = {0};
    CHECK(gr_cfg_parse_text(layers, "tied", 1, 1, &t->layers, &err) == GR_OK);
    if (!t->layers) return false;
    gr_job_spec spec;
    memset(&spec, 0, sizeof spec);
    snprintf(spec.file, sizeof spec.file, "tied");
    spec.model.layers = t->layers;
    spec.train.micro_batch = spec.train.batch_size = TT_N;
    snprintf(spec.train.loss, sizeof spec.train.loss, "softmax_cross_entropy");
    gr_status st = gr_graph_build(&spec, tt_shape, 3, &t->g, &err);
    CHECK_MSG(st == GR_OK, "%s", err.msg);
    if (st) {
        gr_cfg_free(t->layers);
        return false;
    }
    gr_autodiff(&t->g, prec == GR_PREC_FP32);
    gr_graph_set_precision(&t->g, prec);
    CHECK(gr_backend_create(device, 2, &t->be, &err) == GR_OK);
    gr_backend_opts o = {.precision = prec};
    gr_backend_configure(t->be, &o);
    CHECK(gr_model_init(&t->m, &t->g, t->be, 0, &err) == GR_OK);
    CHECK_MSG(gr_plan_compile(&t->p, &t->m, &t->g, GR_PLAN_TRAIN, true, &err) == GR_OK, "%s", err.msg);
    t->w = calloc((size_t)t->g.n_params + 1, sizeof *t->w);
    t->gw = calloc((size_t)t->g.n_trainable + 1, sizeof *t->gw);
    t->gx = calloc((size_t)(TT_N * 12), sizeof *t->gx);
    return true;
}

static void tt_net_free(tt_net *t) {
    free(t->w);
    free(t->gw);
    free(t->gx);
    gr_plan_free(&t->p);
    gr_model_free(&t->m);
    gr_backend_free(t->be);
    gr_graph_free(&t->g);
    gr_cfg_free(t->layers);
}

/* One training micro-step on the batch from t->w; fills loss, gw, gx. */
static void tt_net_run(tt_net *t, float *x, int32_t *y) {
    const gr_graph *g = &t->g;
    gr_backend_upload(t->be, t->m.params, t->w, (size_t)g->n_params * sizeof *t->w);
    gr_backend_zero(t->be, t->m.grads, (size_t)g->n_trainable * sizeof(float));
    gr_batch b = {.x = x, .y = y, .n = TT_N};
    gr_exec_ctx ctx = {.training = true, .rng_key = 5, .grad_scale = 1.0f / TT_N};
    double correct = 0.0;
    t->loss = 0.0;
    gr_train_micro_step(&t->p, &b, &ctx, &t->loss, &correct);
    gr_backend_download(t->be, t->gw, t->m.grads, (size_t)g->n_trainable * sizeof *t->gw);
    const int gx = g->tensors[g->input].grad;
    if (gx >= 0) gr_backend_download(t->be, t->gx, gr_plan_ptr(&t->p, gx), (size_t)(TT_N * 12) * sizeof *t->gx);
}

/* The PARAM tensor called name ("enc.weight"), or -1. */
static int tt_param(const gr_graph *g, const char *name) {
    for (int i = 0; i < g->n_tensors; i++)
        if (g->tensors[i].kind == GR_TK_PARAM && strcmp(g->tensors[i].name, name) == 0) return i;
    return -1;
}

/* dst[name] = src[from] (transposed when tr): parameter values or gradients */
static void tt_copy(const gr_graph *gd, float *dst, const char *name, const gr_graph *gs, const float *src,
                    const char *from, bool tr) {
    const int d = tt_param(gd, name), s = tt_param(gs, from);
    CHECK_MSG(d >= 0 && s >= 0, "%s <- %s", name, from);
    if (d < 0 || s < 0) return;
    const gr_tensor *td = &gd->tensors[d], *ts = &gs->tensors[s];
    CHECK(gr_tensor_numel(td) == gr_tensor_numel(ts));
    const int64_t r = ts->ndim == 2 ? ts->shape[0] : 1, c = gr_tensor_numel(ts) / r;
    for (int64_t i = 0; i < r; i++)
        for (int64_t j = 0; j < c; j++)
            dst[td->param_offset + (tr ? j * r + i : i * c + j)] = src[ts->param_offset + i * c + j];
}

/* ---- the summed gradient: tied against untied ---- */

/* enc.weight [6, 12] is read by enc, by dec transposed and by re (tied to
 * dec, transposed again: enc's orientation); mid.weight [6, 6] by mid and mid2. */
static const char *tt_tied =
    "[flatten, {dense: {units: 6}, name: enc}, tanh, {dense: {units: 6}, name: mid}, tanh, "
    "{dense: {units: 6, tied: mid}, name: mid2}, sigmoid, {dense: {units: 12, tied: enc, transpose: true}, name: dec}, "
    "tanh, {dense: {units: 6, tied: dec, transpose: true}, name: re}, tanh, {dense: {units: 3}, name: head}]";
static const char *tt_untied =
    "[flatten, {dense: {units: 6}, name: enc}, tanh, {dense: {units: 6}, name: mid}, tanh, "
    "{dense: {units: 6}, name: mid2}, sigmoid, {dense: {units: 12}, name: dec}, "
    "tanh, {dense: {units: 6}, name: re}, tanh, {dense: {units: 3}, name: head}]";

/* max |a - b| over the gradient of tensor name (T's) against the sum of U's copies */
static double tt_sum_diff(const tt_net *T, const tt_net *U, const char *name, const char *const *copies,
                          const bool *tr, int nc, double *scale) {
    const int t = tt_param(&T->g, name);
    const int64_t n = gr_tensor_numel(&T->g.tensors[t]);
    float *sum = calloc((size_t)U->g.n_trainable + 1, sizeof *sum), *one = calloc((size_t)T->g.n_trainable + 1,
                                                                                    sizeof *one);
    for (int k = 0; k < nc; k++) {
        tt_copy(&T->g, one, name, &U->g, U->gw, copies[k], tr[k]);
        for (int64_t i = 0; i < n; i++) sum[i] += one[T->g.tensors[t].param_offset + i];
    }
    double diff = 0.0;
    *scale = 0.0;
    for (int64_t i = 0; i < n; i++) {
        const double a = T->gw[T->g.tensors[t].param_offset + i], b = sum[i];
        diff = fmax(diff, fabs(a - b));
        *scale = fmax(*scale, fabs(b));
    }
    free(sum);
    free(one);
    return diff;
}

static void tt_check_sum(gr_precision prec, const char *device) {
    const bool fp32 = prec == GR_PREC_FP32;
    tt_net T, U;
    if (!tt_net_init(&T, tt_tied, prec, device)) return;
    if (!tt_net_init(&U, tt_untied, prec, device)) {
        tt_net_free(&T);
        return;
    }
    gr_graph_init_params(&T.g, T.w, 11);
    static const struct { const char *to, *from; bool tr; } map[] = {
        {"enc.weight", "enc.weight", false}, {"mid.weight", "mid.weight", false},
        {"mid2.weight", "mid.weight", false}, {"dec.weight", "enc.weight", true},
        {"re.weight", "enc.weight", false}, {"head.weight", "head.weight", false},
    };
    for (size_t k = 0; k < GR_ARRAY_LEN(map); k++) tt_copy(&U.g, U.w, map[k].to, &T.g, T.w, map[k].from, map[k].tr);
    static const char *layers[] = {"enc", "mid", "mid2", "dec", "re", "head"};
    for (size_t k = 0; k < GR_ARRAY_LEN(layers); k++) {
        char b[64];
        snprintf(b, sizeof b, "%s.bias", layers[k]);
        tt_copy(&U.g, U.w, b, &T.g, T.w, b, false);
    }
    float x[TT_N * 12];
    int32_t y[TT_N] = {0, 2, 1, 2};
    for (int i = 0; i < TT_N * 12; i++) x[i] = 2.0f * gr_uniform(0x71ED, (uint64_t)i) - 1.0f;
    tt_net_run(&T, x, y);
    tt_net_run(&U, x, y);

    const double rtol = fp32 ? 1e-5 : 3e-2; /* bf16: activations rounded to 8 bits, GEMMs summed in other orders */
    CHECK_CLOSE(T.loss, U.loss, fp32 ? 1e-6 : 1e-2, 0.0);
    double scale;
    const char *enc[] = {"enc.weight", "dec.weight", "re.weight"}, *mid[] = {"mid.weight", "mid2.weight"};
    const bool enc_tr[] = {false, true, false}, mid_tr[] = {false, false};
    double d = tt_sum_diff(&T, &U, "enc.weight", enc, enc_tr, 3, &scale);
    CHECK_MSG(scale > 1e-4 && d <= rtol * scale, "%s: enc.weight's gradient off the sum of its readers' by %.3g "
              "(largest %.3g)", gr_precision_name(prec), d, scale);
    double d2 = tt_sum_diff(&T, &U, "mid.weight", mid, mid_tr, 2, &scale);
    CHECK_MSG(scale > 1e-4 && d2 <= rtol * scale, "%s: mid.weight's gradient off the sum of its readers' by %.3g "
              "(largest %.3g)", gr_precision_name(prec), d2, scale);
    /* each copy alone is not the answer (the sum is checked, not one reader's) */
    if (fp32) {
        double d3 = tt_sum_diff(&T, &U, "mid.weight", mid, mid_tr, 1, &scale);
        CHECK_MSG(d3 > 10 * rtol * scale, "mid.weight's gradient equals one reader's");
    }
    for (size_t k = 0; k < GR_ARRAY_LEN(layers); k++) {
        char b[64];
        const char *one[1] = {b};
        const bool no[1] = {false};
        snprintf(b, sizeof b, "%s.bias", layers[k]);
        double db = tt_sum_diff(&T, &U, b, one, no, 1, &scale);
        CHECK_MSG(db <= rtol * scale + 1e-7, "%s: %s's gradient off by %.3g", gr_precision_name(prec), b, db);
    }
    if (fp32) {
        double dx = 0.0, sx = 0.0;
        for (int i = 0; i < TT_N * 12; i++) dx = fmax(dx, fabs(T.gx[i] - U.gx[i])), sx = fmax(sx, fabs(U.gx[i]));
        CHECK_MSG(sx > 0 && dx <= rtol * sx, "the input's gradient off by %.3g (largest %.3g)", dx, sx);
    }
    printf("sum over readers %-6s loss %.6f / %.6f, enc.weight off %.2e, mid.weight off %.2e\n",
           gr_precision_name(prec), T.loss, U.loss, d, d2);
    tt_net_free(&T);
    tt_net_free(&U);
}

/* ---- the graph and the build errors (CPU only: no kernels run) ---- */

static gr_status tt_build(const char *layers, gr_graph *g, gr_error *err) {
    gr_cfg *l = NULL;
    CHECK(gr_cfg_parse_text(layers, "t.yaml", 1, 1, &l, err) == GR_OK);
    gr_job_spec spec;
    memset(&spec, 0, sizeof spec);
    snprintf(spec.file, sizeof spec.file, "t.yaml");
    spec.model.layers = l;
    spec.train.micro_batch = spec.train.batch_size = 2;
    snprintf(spec.train.loss, sizeof spec.train.loss, "softmax_cross_entropy");
    gr_status st = gr_graph_build(&spec, tt_shape, 3, g, err);
    gr_cfg_free(l);
    return st;
}

static void tt_check_graph(void) {
    gr_graph T, U;
    gr_error err = {0};
    CHECK(tt_build(tt_tied, &T, &err) == GR_OK);
    CHECK(tt_build(tt_untied, &U, &err) == GR_OK);
    /* the shared weights are counted once: U has three more [6, 12]/[12, 6]/[6, 6] weights */
    CHECK(T.n_weights == 165);
    CHECK(U.n_weights == T.n_weights + 72 + 72 + 36);
    CHECK(tt_param(&T, "dec.weight") < 0 && tt_param(&T, "re.weight") < 0 && tt_param(&T, "mid2.weight") < 0);
    CHECK(tt_param(&T, "dec.bias") >= 0);
    int w = tt_param(&T, "enc.weight"), readers = 0;
    for (int l = 0; l < T.n_layers; l++) {
        const gr_node *nd = &T.nodes[T.layers[l].node];
        if (nd->op != GR_OP_DENSE) continue;
        readers += nd->in[1] == w;
        const bool want_t = strcmp(T.layers[l].name, "dec") == 0;
        CHECK_MSG(nd->attrs.weight_t == want_t, "%s: weight_t %d", T.layers[l].name, nd->attrs.weight_t);
        if (strcmp(T.layers[l].name, "dec") == 0) CHECK(T.layers[l].n_params == 12);
    }
    CHECK(readers == 3);
    /* backward: one GRAD tensor for enc.weight, written by its three readers' dense_bwd_params */
    gr_autodiff(&T, false);
    int gw = T.tensors[w].grad, writers = 0, grads = 0;
    for (int i = T.n_forward; i < T.n_nodes; i++)
        writers += T.nodes[i].op == GR_OP_DENSE_BWD_PARAMS && T.nodes[i].out[0] == gw;
    for (int i = 0; i < T.n_tensors; i++) grads += T.tensors[i].kind == GR_TK_GRAD;
    CHECK(gw >= 0 && T.tensors[gw].kind == GR_TK_GRAD && writers == 3);
    CHECK(grads == 9); /* enc, mid, head: weight and bias; mid2, dec, re: bias */
    gr_graph_free(&T);
    gr_graph_free(&U);
}

static void tt_expect_error(const char *layers, const char *const *parts) {
    gr_graph g;
    gr_error err = {0};
    gr_status st = tt_build(layers, &g, &err);
    CHECK_MSG(st != GR_OK, "built: %s", layers);
    if (st == GR_OK) {
        gr_graph_free(&g);
        return;
    }
    for (int i = 0; parts[i]; i++) CHECK_STR_CONTAINS(err.msg, parts[i]);
}

static void tt_check_errors(void) {
    static const struct { const char *layers; const char *parts[6]; } cases[] = {
        {"[flatten, {dense: {units: 6}, name: enc}, {dense: {units: 10, tied: enc, transpose: true}, name: dec}]",
         {"t.yaml:1:", "model.layers[2].dense.tied", "layer 'dec' needs a weight [10, 6]", "'enc'",
          "enc.weight [6, 12] transposed, [12, 6]", NULL}},
        {"[flatten, {dense: {units: 6}, name: enc}, {dense: {units: 12, tied: enc}, name: dec}]",
         {"layer 'dec' needs a weight [12, 6]", "tied to 'enc' it uses enc.weight [6, 12]; it fits with transpose: "
          "true", NULL}},
        {"[flatten, {dense: {units: 12}, name: sq}, {dense: {units: 12, tied: sq, transpose: true}}, "
         "{dense: {units: 6, tied: sq}}]", {"dense2", "needs a weight [6, 12]", "sq.weight [12, 12]", NULL}},
        {"[flatten, {dense: {units: 6, tied: later}}, {dense: {units: 3}, name: later}]",
         {"t.yaml:1:", "model.layers[1].dense.tied", "'later' is a later layer", NULL}},
        {"[flatten, {dense: {units: 6, tied: nope}}]", {"no earlier layer is named 'nope'", NULL}},
        {"[flatten, {dense: {units: 6, tied: flatten0}}]",
         {"'flatten0' is a flatten layer; a dense layer can only be tied to a dense or embedding layer", NULL}},
        {"[flatten, {dense: {units: 6, tied: me}, name: me}]", {"a layer cannot be tied to itself ('me')", NULL}},
        {"[flatten, {dense: {units: 6, transpose: true}}]",
         {"model.layers[1].dense.transpose", "only with tied", NULL}},
        {"[flatten, {dense: {units: 6, tied: [a]}}]", {"model.layers[1].dense.tied", "expected the name of a layer",
                                                     NULL}},
        {"[flatten, {dense: {units: 6, tie: enc}}]", {"dense takes units, bias, tied, transpose", NULL}},

    };
    for (size_t i = 0; i < GR_ARRAY_LEN(cases); i++) tt_expect_error(cases[i].layers, cases[i].parts);
}

/* ---- a head tied to a token embedding ---- */

static const gr_tk_case tt_lm = {"embedding -> dense tied to it", "[{embedding: {vocab: 6, dim: 4}, name: wte}, "
                                 "tanh, {dense: {units: 6, tied: wte, bias: false}, name: head}]", 5, 6};
static const gr_tk_case tt_lm_untied = {"embedding -> dense untied", "[{embedding: {vocab: 6, dim: 4}, name: wte}, "
                                        "tanh, {dense: {units: 6, bias: false}, name: head}]", 5, 6};

/* One training pass of tm on device from parameters w (one seed's): the loss, the gradients into gw */
static double tt_lm_run(const gr_tk_model *tm, const float *w, float *gw, const int32_t *ids, const int32_t *next) {
    gr_error err = {0};
    gr_backend *be;
    gr_model m;
    gr_plan p;
    const gr_graph *g = &tm->g;
    CHECK(gr_backend_create(gr_gc_device, 1, &be, &err) == GR_OK);
    gr_backend_opts fp32 = {.precision = GR_PREC_FP32};
    gr_backend_configure(be, &fp32);
    CHECK(gr_model_init(&m, g, be, 0, &err) == GR_OK);
    CHECK(gr_plan_compile(&p, &m, g, GR_PLAN_TRAIN, true, &err) == GR_OK);
    gr_backend_upload(be, m.params, w, (size_t)g->n_params * sizeof *w);
    gr_backend_zero(be, m.grads, (size_t)g->n_trainable * sizeof(float));
    gr_exec_ctx ctx = {.training = true, .rng_key = 1, .grad_scale = 1.0f / TT_N};
    const double loss = gr_tk_run(&p, TT_N, ids, next, &ctx);
    gr_backend_download(be, gw, m.grads, (size_t)g->n_trainable * sizeof *gw);
    gr_plan_free(&p);
    gr_model_free(&m);
    gr_backend_free(be);
    return loss;
}

static void tt_check_lm(void) {
    gr_gc_token_run(&tt_lm);
    gr_tk_model T, U;
    gr_error err = {0};
    gr_status st = gr_tk_build(&T, &tt_lm, TT_N, GR_PREC_FP32, &err);
    CHECK_MSG(st == GR_OK, "%s", err.msg);
    if (!st) st = gr_tk_build(&U, &tt_lm_untied, TT_N, GR_PREC_FP32, &err);
    CHECK_MSG(st == GR_OK, "%s", err.msg);
    if (st) {
        gr_tk_free(&T);
        return;
    }
    /* one parameter, counted once, read by both layers; two nodes add into its one gradient */
    const int w = gr_tk_param(&T.g, "wte.weight");
    CHECK(w >= 0 && gr_tk_param(&T.g, "head.weight") < 0 && T.g.n_weights == 24 && U.g.n_weights == 48);
    int readers = 0, writers = 0;
    for (int i = 0; i < T.g.n_forward; i++)
        for (int k = 0; k < T.g.nodes[i].nin; k++) readers += T.g.nodes[i].in[k] == w;
    for (int i = T.g.n_forward; i < T.g.n_nodes; i++)
        writers += T.g.nodes[i].nout > 0 && T.g.nodes[i].out[0] == T.g.tensors[w].grad;
    CHECK_MSG(readers == 2 && writers == 2, "wte.weight: %d readers, %d gradient writers", readers, writers);
    /* its gradient: the untied model's wte and head gradients summed, on the same weights */
    float *wt = calloc((size_t)T.g.n_params + 1, sizeof *wt), *wu = calloc((size_t)U.g.n_params + 1, sizeof *wu);
    float *gt = calloc((size_t)T.g.n_trainable + 1, sizeof *gt), *gu = calloc((size_t)U.g.n_trainable + 1, sizeof *gu);
    gr_graph_init_params(&T.g, wt, 21);
    tt_copy(&U.g, wu, "wte.weight", &T.g, wt, "wte.weight", false);
    tt_copy(&U.g, wu, "head.weight", &T.g, wt, "wte.weight", false);
    int32_t ids[TT_N * 5], next[TT_N * 5];
    gr_tk_fill(&tt_lm, &T.g, TT_N, 0x1EAD, ids, next);
    const double lt = tt_lm_run(&T, wt, gt, ids, next), lu = tt_lm_run(&U, wu, gu, ids, next);
    CHECK_CLOSE(lt, lu, 1e-6, 0.0);
    const gr_tensor *ue = &U.g.tensors[gr_tk_param(&U.g, "wte.weight")];
    const gr_tensor *uh = &U.g.tensors[gr_tk_param(&U.g, "head.weight")];
    double d = 0.0, scale = 0.0, head = 0.0;
    for (int64_t i = 0; i < 24; i++) {
        const double sum = (double)gu[ue->param_offset + i] + (double)gu[uh->param_offset + i];
        d = fmax(d, fabs(gt[T.g.tensors[w].param_offset + i] - sum));
        scale = fmax(scale, fabs(sum));
        head = fmax(head, fabs(gu[uh->param_offset + i]));
    }
    CHECK_MSG(scale > 1e-4 && head > 1e-4 && d <= 1e-5 * scale, "wte.weight's gradient off the sum of the embedding's "
              "and the head's by %.3g (largest %.3g)", d, scale);
    printf("tied LM head    loss %.6f / %.6f, wte.weight off the sum of its readers' by %.2e\n", lt, lu, d);
    free(wt); free(wu); free(gt); free(gu);
    gr_tk_free(&T);
    gr_tk_free(&U);
}

/* the errors of a head tied to an embedding (ids [n, 5]), each at its key */
static void tt_check_lm_errors(void) {
    static const struct { const char *layers; const char *parts[4]; } cases[] = {
        /* an embedding's [vocab, dim] weight is [units, in] as used */
        {"[{embedding: {vocab: 6, dim: 4}, name: wte}, {dense: {units: 5, tied: wte}}]",
         {"tokens.yaml:1:", "model.layers[1].dense.tied: layer 'dense0' needs a weight [5, 4] ([units, in]: units 5, "
          "input [n, 4]), but tied to 'wte' it uses wte.weight [6, 4]", NULL}},
        {"[{embedding: {vocab: 6, dim: 4}, name: wte}, {dense: {units: 6}}, {dense: {units: 4, tied: wte}}]",
         {"needs a weight [4, 6]", "wte.weight [6, 4]; it fits with transpose: true", NULL}},
        {"[{embedding: {vocab: 6, dim: 4}}, {pos_embedding: {max_len: 5}, name: wpe}, {dense: {units: 4, tied: wpe}}]",
         {"model.layers[2].dense.tied: 'wpe' is a pos_embedding layer; a dense layer can only be tied to a dense or "
          "embedding layer", NULL}},
    };
    for (size_t i = 0; i < GR_ARRAY_LEN(cases); i++) {
        const gr_tk_case c = {"error", cases[i].layers, 5, 6};
        gr_tk_model tm;
        gr_error err = {0};
        CHECK_MSG(gr_tk_build(&tm, &c, 2, GR_PREC_FP32, &err) == GR_ERR_USAGE, "built: %s", c.layers);
        for (int k = 0; cases[i].parts[k]; k++) CHECK_STR_CONTAINS(err.msg, cases[i].parts[k]);
        gr_tk_free(&tm);
    }
}

int main(int argc, char **argv) {
    int rc = gr_gc_args(argc, argv);
    if (rc) return rc;
    static const gr_gc_case cases[] = {
        {"tied plain + transposed", "[flatten, {dense: {units: 6}, name: enc}, tanh, {dense: {units: 6}, name: mid}, "
         "tanh, {dense: {units: 6, tied: mid}}, sigmoid, {dense: {units: 12, tied: enc, transpose: true}, name: dec}, "
         "tanh, {dense: {units: 6, tied: dec, transpose: true}}, {dense: {units: 3}}]", 3, {1, 3, 4}, 0.0, 0.0, NULL},
        {"tied in blocks, no bias", "[flatten, {ae: {u: 5}}, {ae: {u: 3}}, {dense: {units: 5, tied: ae0.e}}, tanh, "
         "{dense: {units: 3}}]", 3, {2, 2, 2}, 0.0, 0.0,
         "{ae: {args: {u: 4}, layers: [{dense: {units: $u}, name: e}, tanh, "
         "{dense: {units: 8, tied: e, transpose: true, bias: false}}, sigmoid]}}"},
    };
    for (size_t i = 0; i < GR_ARRAY_LEN(cases); i++) gr_gc_run(&cases[i]);
    tt_check_sum(GR_PREC_FP32, gr_gc_device);
    tt_check_lm();
    if (gr_gc_on_cpu()) {
        tt_check_graph();
        tt_check_errors();
        tt_check_lm_errors();
        gr_backend *be = NULL;
        gr_error err = {0};
        CHECK(gr_backend_create("cpu", 1, &be, &err) == GR_OK);
        gr_backend_opts o = {.precision = GR_PREC_BF16};
        gr_backend_configure(be, &o);
        char d[256];
        const bool native = strstr(gr_backend_describe(be, d, sizeof d), "bf16 native") != NULL;
        gr_backend_free(be);
        if (native) tt_check_sum(GR_PREC_BF16, "cpu");
        else printf("bf16: this CPU has no native bf16 (%s); the staged path is the fp32 one\n", d);
    }
    return gr_test_report();
}
