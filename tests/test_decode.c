/* test_decode.c — decoding graphs (graph.h, decode_len; what `gpurun
 * generate` runs): a small GPT built twice from one spec, once over whole
 * sequences of T tokens and once as a decoding graph of T positions, the
 * same weights in both. Fed the sequence one token a run at
 * gr_exec_ctx.pos = 0, 1, ..., the decoding plan gives at each position the
 * whole-sequence plan's logits there (within 1e-5 of the largest), for two
 * sequences one after another (the second overwrites the caches the first
 * filled) — through the real plan: the memory plan keeps each attention's
 * cache between runs and shares its bytes with nothing. Also the errors:
 * a non-causal attention and a position table shorter than the decode.
 * The backend is the argument, `cpu` (default) or `cuda` (exit 77, skipped,
 * without a device). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gr_test.h"
#include "exec/exec.h"
#include "graph/graph.h"

#define T 11
#define V 24

static const char *const gpt =
    "[{embedding: {vocab: 24, dim: 16, init_std: 0.5}, name: wte}, {pos_embedding: {max_len: 16, init_std: 0.5}},"
    " {layernorm: {}, name: ln1}, {dense: {units: 48}}, {attention: {heads: 2}}, {dense: {units: 16}, name: proj},"
    " {add: {}, input: [pos_embedding0, proj], name: res}, layernorm, {dense: {units: 64}}, gelu_tanh,"
    " {dense: {units: 16}, name: mlp}, {add: {}, input: [res, mlp]}, layernorm,"
    " {dense: {units: 24, tied: wte, bias: false}}]";

static const char *device = "cpu";

typedef struct dec_model {
    gr_cfg *layers;
    gr_job_spec spec;
    gr_graph g;
    gr_model m;
    gr_plan p;
} dec_model;

/* The model of layers at one sequence: tokens [T] (decode 0), or the
 * decoding graph of decode positions; its eval plan on be, weights w. */
static gr_status dec_build(dec_model *d, const char *layers, int64_t decode, gr_backend *be, const float *w,
                           gr_error *err) {
    memset(d, 0, sizeof *d);
    gr_status st = gr_cfg_parse_text(layers, "dec.yaml", 1, 1, &d->layers, err);
    if (st) return st;
    snprintf(d->spec.file, sizeof d->spec.file, "dec.yaml");
    d->spec.model.layers = d->layers;
    d->spec.train.micro_batch = d->spec.train.batch_size = 1;
    d->spec.seed = 3;
    snprintf(d->spec.train.loss, sizeof d->spec.train.loss, "softmax_cross_entropy");
    gr_graph_io io;
    memset(&io, 0, sizeof io);
    io.n_inputs = 1;
    const int64_t t = decode ? 1 : T;
    io.in[0] = (gr_io_tensor){.name = "tokens", .elem = GR_I32, .ndim = 1, .shape = {t}};
    io.target = (gr_io_tensor){.name = "targets", .elem = GR_I32, .ndim = 1, .shape = {t}};
    io.decode_len = decode;
    if ((st = gr_graph_build_io(&d->spec, &io, &d->g, err))) return st;
    if ((st = gr_model_init(&d->m, &d->g, be, 0, err))) return st;
    if (w) gr_backend_upload(be, d->m.params, w, (size_t)d->g.n_params * sizeof(float));
    return gr_plan_compile(&d->p, &d->m, &d->g, GR_PLAN_EVAL, true, err);
}

static void dec_free(dec_model *d) {
    gr_plan_free(&d->p);
    gr_model_free(&d->m);
    gr_graph_free(&d->g);
    gr_cfg_free(d->layers);
}

/* One run of d's plan on tokens tok (T of them, or one at pos); its logits into z. */
static void dec_run(dec_model *d, const int32_t *tok, int64_t pos, float *z) {
    const int64_t t = d->g.decode_len ? 1 : T;
    int32_t zero[T] = {0};
    gr_backend_upload(d->m.be, gr_plan_ptr(&d->p, d->g.input), tok, (size_t)t * sizeof *tok);
    gr_backend_upload(d->m.be, gr_plan_ptr(&d->p, d->g.label), zero, (size_t)t * sizeof *zero);
    gr_exec_ctx ctx = {.training = false, .pos = pos};
    gr_plan_run(&d->p, 1, &ctx);
    gr_backend_download(d->m.be, z, gr_plan_ptr(&d->p, d->g.logits), (size_t)(t * V) * sizeof *z);
}

static void test_decode_matches(gr_backend *be) {
    gr_error err = {0};
    dec_model full, dec;
    gr_status st = dec_build(&full, gpt, 0, be, NULL, &err);
    CHECK_MSG(st == GR_OK, "%s", err.msg);
    if (st) return;
    float *w = calloc((size_t)full.g.n_params, sizeof *w);
    gr_graph_init_params(&full.g, w, full.spec.seed);
    gr_backend_upload(be, full.m.params, w, (size_t)full.g.n_params * sizeof *w);
    st = dec_build(&dec, gpt, T, be, w, &err);
    CHECK_MSG(st == GR_OK, "%s", err.msg);
    int caches = 0;
    for (int i = 0; !st && i < dec.g.n_tensors; i++) caches += dec.g.tensors[i].kind == GR_TK_CACHE;
    CHECK_MSG(caches == 1, "one attention, %d caches", caches);
    for (int s = 0; s < 2 && !st; s++) { /* two sequences, the second over the first's caches */
        int32_t tok[T];
        for (int i = 0; i < T; i++) tok[i] = (int32_t)((7 * i + 3 + 11 * s) % V);
        float zf[T * V], zd[V];
        dec_run(&full, tok, 0, zf);
        double worst = 0.0, scale = 0.0;
        for (int i = 0; i < T * V; i++) scale = fmax(scale, fabs(zf[i]));
        for (int p = 0; p < T; p++) {
            dec_run(&dec, tok + p, p, zd);
            for (int c = 0; c < V; c++) {
                const double e = fabs((double)zd[c] - zf[p * V + c]) / scale;
                worst = e > worst || e != e ? (e != e ? INFINITY : e) : worst;
            }
        }
        CHECK_MSG(worst <= 1e-5, "%s sequence %d: decoded logits off by %.3g of the largest", device, s, worst);
        printf("%s sequence %d: decoded logits within %.2g of the whole sequence's\n", device, s, worst);
    }
    if (!st) dec_free(&dec);
    free(w);
    dec_free(&full);
}

static void test_errors(gr_backend *be) {
    gr_error err = {0};
    dec_model d;
    gr_status st = dec_build(&d, "[{embedding: {vocab: 24, dim: 6}}, {dense: {units: 18}}, "
                             "{attention: {heads: 1, causal: false}}, {dense: {units: 24}}]", 4, be, NULL, &err);
    CHECK(st == GR_ERR_USAGE);
    CHECK_STR_CONTAINS(err.msg, "decoding one position at a time takes causal attention");
    if (!st) dec_free(&d);
    else gr_cfg_free(d.layers); /* the build failed: no graph, model or plan */
    st = dec_build(&d, "[{embedding: {vocab: 24, dim: 6}}, {pos_embedding: {max_len: 8}}, {dense: {units: 24}}]", 9,
                   be, NULL, &err);
    CHECK(st == GR_ERR_USAGE);
    CHECK_STR_CONTAINS(err.msg, "9 positions to generate through");
    CHECK_STR_CONTAINS(err.msg, "max_len is 8");
    if (!st) dec_free(&d);
    else gr_cfg_free(d.layers);
}

int main(int argc, char **argv) {
    if (argc > 1) device = strcmp(argv[1], "cuda") == 0 ? "cuda:0" : argv[1];
    gr_error err = {0};
    gr_backend *be = NULL;
    if (gr_backend_create(device, 2, &be, &err) != GR_OK) {
        if (strcmp(device, "cpu") != 0) {
            printf("SKIP: %s\n", err.msg);
            return 77;
        }
        CHECK_MSG(false, "%s", err.msg);
        return gr_test_report();
    }
    if (strcmp(device, "cpu") != 0) {
        gr_backend_opts fp32 = {.precision = GR_PREC_FP32};
        gr_backend_configure(be, &fp32);
    }
    test_decode_matches(be);
    test_errors(be);
    gr_backend_free(be);
    return gr_test_report();
}
