/* test_graph_io.c — a graph's inputs and target by name (graph/head.c,
 * gr_graph_build_io; model.inputs, model.targets, train.loss.type): a
 * regression MLP on a float target with mse, a two-input model joining its
 * inputs by name, bce_with_logits on multi-label targets, per-token
 * cross-entropy on [T] targets, and the errors: a target of the wrong shape,
 * an input named twice. */
#include <string.h>

#include "gr_test.h"
#include "exec/exec.h"
#include "graph/graph.h"

#define SPEC GR_TEST_TMP "/graph_io.yaml"

static gr_status load(const char *model, const char *loss, gr_job_spec *spec, gr_error *err) {
    FILE *f = fopen(SPEC, "w");
    if (!f) return gr_error_set(err, GR_ERR_USAGE, "cannot write %s", SPEC);
    fprintf(f, "model:\n%s\ntrain:\n  batch_size: 4\n  steps: 1\n  optimizer: {lr: 0.1}\n  loss: {type: %s}\n", model,
            loss);
    fclose(f);
    memset(err, 0, sizeof *err);
    return gr_spec_load(SPEC, NULL, 0, spec, err);
}

static int count_op(const gr_graph *g, gr_op op) {
    int n = 0;
    for (int i = 0; i < g->n_nodes; i++) n += g->nodes[i].op == op;
    return n;
}

/* Builds model (YAML lines under model:) with io; returns the status, the graph in g when GR_OK. */
static gr_status build(const char *model, const char *loss, const gr_graph_io *io, gr_graph *g, gr_error *err) {
    gr_job_spec spec;
    gr_status st = load(model, loss, &spec, err);
    CHECK_MSG(st == GR_OK, "%s", err->msg);
    if (st) return st;
    st = gr_graph_build_io(&spec, io, g, err);
    if (!st) {
        gr_autodiff(g, false);
        gr_plan p;
        gr_error e2 = {0};
        CHECK_MSG(gr_plan_compile(&p, NULL, g, GR_PLAN_TRAIN, false, &e2) == GR_OK, "%s", e2.msg);
        gr_plan_free(&p);
    }
    gr_spec_free(&spec);
    return st;
}

static gr_io_tensor io_t(const char *name, gr_elem e, int ndim, int64_t a, int64_t b) {
    return (gr_io_tensor){.name = name, .elem = e, .ndim = ndim, .shape = {a, b}};
}

static void test_regression(void) {
    gr_graph_io io = {.n_inputs = 1, .in = {io_t("features", GR_F32, 1, 8, 0)}, .target = io_t("targets", GR_F32, 1, 2, 0)};
    gr_graph g;
    gr_error err;
    gr_status st = build("  inputs: [features]\n  targets: [targets]\n  layers: [{dense: {units: 16}}, relu, "
                         "{dense: {units: 2}}]", "mse", &io, &g, &err);
    CHECK_MSG(st == GR_OK, "%s", err.msg);
    if (st) return;
    CHECK(count_op(&g, GR_OP_MSE) == 1 && count_op(&g, GR_OP_MSE_BWD) == 1 && count_op(&g, GR_OP_ACCURACY) == 0);
    CHECK(g.n_metrics == 0 && g.loss_probs == -1 && g.n_classes == 0);
    CHECK(strcmp(g.tensors[g.input].name, "features") == 0 && g.tensors[g.label].elem == GR_F32);
    CHECK(g.tensors[g.label].ndim == 2 && g.tensors[g.label].shape[1] == 2);
    gr_graph_free(&g);
}

static void test_two_inputs(void) {
    gr_graph_io io = {.n_inputs = 2, .in = {io_t("a", GR_F32, 1, 3, 0), io_t("b", GR_F32, 1, 5, 0)},
                      .target = io_t("y", GR_F32, 1, 1, 0)};
    gr_graph g;
    gr_error err;
    gr_status st = build("  inputs: [a, b]\n  targets: [y]\n  layers: [{dense: {units: 4}, input: a, name: pa}, "
                         "{dense: {units: 4}, input: b, name: pb}, {add: {}, input: [pa, pb]}, relu, "
                         "{dense: {units: 1}}]", "mse", &io, &g, &err);
    CHECK_MSG(st == GR_OK, "%s", err.msg);
    if (st) return;
    CHECK(g.n_inputs == 2 && g.input == g.inputs[0]);
    /* each input feeds its own dense: both get read */
    int reads[2] = {0, 0};
    for (int i = 0; i < g.n_forward; i++)
        for (int k = 0; k < g.nodes[i].nin; k++)
            for (int j = 0; j < 2; j++) reads[j] += g.nodes[i].in[k] == g.inputs[j];
    CHECK(reads[0] == 1 && reads[1] == 1);
    gr_graph_free(&g);
}

static void test_bce_and_tokens(void) {
    gr_graph_io io = {.n_inputs = 1, .in = {io_t("x", GR_F32, 1, 6, 0)}, .target = io_t("tags", GR_F32, 1, 3, 0)};
    gr_graph g;
    gr_error err;
    gr_status st = build("  inputs: [x]\n  targets: [tags]\n  layers: [{dense: {units: 3}}]", "bce_with_logits", &io,
                         &g, &err);
    CHECK_MSG(st == GR_OK, "%s", err.msg);
    if (!st) {
        CHECK(count_op(&g, GR_OP_BCE_WITH_LOGITS) == 1);
        gr_graph_free(&g);
    }
    /* per-token cross-entropy: [n, T, C] logits from a rank-3 dense, [n, T] int32 targets, accuracy per token */
    gr_graph_io tio = {.n_inputs = 1, .in = {io_t("x", GR_F32, 2, 5, 4)}, .target = io_t("next", GR_I32, 1, 5, 0)};
    st = build("  inputs: [x]\n  targets: [next]\n  layers: [{dense: {units: 7}}]", "softmax_cross_entropy", &tio, &g,
               &err);
    CHECK_MSG(st == GR_OK, "%s", err.msg);
    if (!st) {
        CHECK(count_op(&g, GR_OP_SOFTMAX_CE) == 1 && count_op(&g, GR_OP_ACCURACY) == 1 && g.n_classes == 7);
        gr_graph_free(&g);
    }
    /* a padded vocabulary: 5 classes among 7 logits, for the loss and the metric */
    st = build("  inputs: [x]\n  targets: [next]\n  layers: [{dense: {units: 7}}]", "softmax_cross_entropy, classes: 5",
               &tio, &g, &err);
    CHECK_MSG(st == GR_OK, "%s", err.msg);
    if (!st) {
        int seen = 0;
        for (int i = 0; i < g.n_nodes; i++)
            if (g.nodes[i].op == GR_OP_SOFTMAX_CE || g.nodes[i].op == GR_OP_ACCURACY)
                seen += g.nodes[i].attrs.classes == 5;
        CHECK(seen == 2 && g.n_classes == 5);
        gr_graph_free(&g);
    }
    st = build("  inputs: [x]\n  targets: [next]\n  layers: [{dense: {units: 7}}]", "softmax_cross_entropy, classes: 8",
               &tio, &g, &err);
    CHECK(st == GR_ERR_USAGE);
    CHECK_STR_CONTAINS(err.msg, "train.loss.classes: 8 classes, but the last layer gives 7 logits");
    if (!st) gr_graph_free(&g);
    st = build("  inputs: [x]\n  targets: [tags]\n  layers: [{dense: {units: 3}}]", "mse, classes: 2", &io, &g, &err);
    CHECK(st == GR_ERR_USAGE);
    CHECK_STR_CONTAINS(err.msg, "train.loss.classes: only valid when train.loss.type is softmax_cross_entropy");
    if (!st) gr_graph_free(&g);
}

static void test_errors(void) {
    gr_graph_io io = {.n_inputs = 1, .in = {io_t("x", GR_F32, 1, 6, 0)}, .target = io_t("y", GR_F32, 1, 2, 0)};
    gr_graph g;
    gr_error err;
    gr_status st = build("  inputs: [x]\n  targets: [y]\n  layers: [{dense: {units: 3}}]", "mse", &io, &g, &err);
    CHECK_MSG(st == GR_ERR_USAGE, "an mse target of another shape: status %d", st);
    CHECK_STR_CONTAINS(err.msg, "train.loss");
    if (!st) gr_graph_free(&g);
    gr_job_spec spec;
    st = load("  inputs: [x, {name: x, field: z}]\n  targets: [y]\n  layers: [{dense: {units: 3}}]", "mse", &spec, &err);
    CHECK(st == GR_ERR_USAGE);
    CHECK_STR_CONTAINS(err.msg, "model.inputs[1]: 'x' is already model.inputs[0]");
    if (!st) gr_spec_free(&spec);
    st = load("  inputs: [x]\n  layers: [{dense: {units: 3}}]", "mse", &spec, &err);
    CHECK(st == GR_ERR_USAGE);
    CHECK_STR_CONTAINS(err.msg, "model.inputs: declared inputs need model.targets too");
    if (!st) gr_spec_free(&spec);
}

int main(void) {
    test_regression();
    test_two_inputs();
    test_bce_and_tokens();
    test_errors();
    return gr_test_report();
}
