/* test_tensor_plan.c — graph/tensor.c, tensor parallelism's split of a built
 * graph: the column/row pairs of an MLP and of transformer blocks (attention
 * split by heads: the q, k, v projection before it, the output projection
 * after), what stays replicated (embeddings, layernorms, a tied head, a dense
 * layer without a partner, dropout between two dense layers), the figures
 * (parameters split and replicated, floats all-reduced per sample), and the
 * refusals at the layer's file:line:col: a convolution, units or heads that
 * the group does not divide, nothing to split. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gr_test.h"
#include "graph/graph.h"
#include "graph/tensor.h"

static gr_status load(const char *name, const char *model, gr_job_spec *spec, gr_error *err) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s.yaml", GR_TEST_TMP, name);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    fprintf(f, "model:\n%s\ntrain:\n  batch_size: 8\n  steps: 1\n  optimizer: {lr: 0.1}\n  metrics: []\n", model);
    fclose(f);
    return gr_spec_load(path, NULL, 0, spec, err);
}

/* Builds model (with io for token models) and plans t; *st its status, the plan in tp. */
static void plan(const char *name, const char *model, int t, gr_graph *g, gr_tp_plan *tp, gr_status *st,
                 gr_error *err) {
    gr_job_spec spec;
    gr_status ls = load(name, model, &spec, err);
    CHECK_MSG(ls == GR_OK, "%s: %s", name, err->msg);
    gr_status bs = gr_graph_build(&spec, spec.model.input, spec.model.n_input, g, err);
    CHECK_MSG(bs == GR_OK, "%s: %s", name, err->msg);
    if (ls || bs) {
        memset(tp, 0, sizeof *tp);
        *st = GR_ERR_USAGE;
        if (!ls) gr_spec_free(&spec);
        return;
    }
    gr_autodiff(g, false);
    *st = gr_tp_plan_make(g, &spec, t, tp, err);
    gr_spec_free(&spec);
}

static int layer(const gr_graph *g, const char *name) {
    for (int l = 0; l < g->n_layers; l++)
        if (strcmp(g->layers[l].name, name) == 0) return l;
    CHECK_MSG(false, "no layer %s", name);
    return 0;
}

static void test_mlp(void) {
    gr_graph g;
    gr_tp_plan tp;
    gr_status st;
    gr_error err = {0};
    plan("mlp", "  input: [16]\n  layers: [{dense: {units: 32}, name: up}, {gelu: {}, name: act}, "
         "{dense: {units: 16}, name: down}, {dense: {units: 8}, name: a}, {dropout: {rate: 0.1}, name: drop}, "
         "{dense: {units: 4}, name: b}]", 2, &g, &tp, &st, &err);
    CHECK_MSG(st == GR_OK, "%s", err.msg);
    CHECK(tp.t == 2 && tp.pairs == 1);
    CHECK(tp.role[layer(&g, "up")] == GR_TP_COLUMN && tp.role[layer(&g, "act")] == GR_TP_SHARDED);
    CHECK(tp.role[layer(&g, "down")] == GR_TP_ROW);
    /* dropout between two dense layers: no pair (its mask would not be one process's) */
    CHECK(tp.role[layer(&g, "a")] == GR_TP_REPLICATED && tp.role[layer(&g, "b")] == GR_TP_REPLICATED);
    CHECK(tp.split_params == (16 * 32 + 32) + (32 * 16 + 16));
    CHECK(tp.repl_params == (16 * 8 + 8) + (8 * 4 + 4));
    CHECK(tp.allreduce_fwd == 16 && tp.allreduce_bwd == 0); /* the input needs no gradient */
    gr_tp_plan_free(&tp);
    gr_graph_free(&g);
    /* t = 1: everything replicated, no pair needed */
    plan("mlp1", "  input: [4]\n  layers: [{dense: {units: 3}}]", 1, &g, &tp, &st, &err);
    CHECK(st == GR_OK && tp.pairs == 0 && tp.role[0] == GR_TP_REPLICATED);
    gr_tp_plan_free(&tp);
    gr_graph_free(&g);
}

static const char *GPT =
    "  input: [8]\n"
    "  blocks:\n"
    "    h:\n"
    "      layers:\n"
    "        - {layernorm: {}, name: ln_1}\n"
    "        - {dense: {units: 48}, name: c_attn}\n"
    "        - {attention: {heads: HEADS}, name: attn}\n"
    "        - {dense: {units: 16}, name: c_proj}\n"
    "        - {add: {}, input: [input, c_proj], name: res}\n"
    "        - {layernorm: {}, name: ln_2}\n"
    "        - {dense: {units: 64}, name: c_fc}\n"
    "        - {gelu_tanh: {}, name: g}\n"
    "        - {dense: {units: 16}, name: mlp_proj}\n"
    "        - {add: {}, input: [res, mlp_proj]}\n"
    "  layers:\n"
    "    - {dense: {units: 16}, name: wte}\n"
    "    - {reshape: {shape: [1, 16]}, name: seq}\n"
    "    - {h: {}, repeat: 2}\n"
    "    - {layernorm: {}, name: ln_f}\n"
    "    - flatten\n"
    "    - {dense: {units: 8}, name: head}";

static void test_blocks(void) {
    char model[2048];
    const char *at = strstr(GPT, "HEADS");
    snprintf(model, sizeof model, "%.*s4%s", (int)(at - GPT), GPT, at + 5);
    gr_graph g;
    gr_tp_plan tp;
    gr_status st;
    gr_error err = {0};
    plan("blocks", model, 2, &g, &tp, &st, &err);
    CHECK_MSG(st == GR_OK, "%s", err.msg);
    CHECK(tp.pairs == 4);
    for (int b = 0; b < 2; b++) {
        char n[64];
        const char *names[] = {"ln_1", "c_attn", "attn", "c_proj", "res", "ln_2", "c_fc", "g", "mlp_proj"};
        const gr_tp_role want[] = {GR_TP_REPLICATED, GR_TP_COLUMN_QKV, GR_TP_HEADS, GR_TP_ROW, GR_TP_REPLICATED,
                                   GR_TP_REPLICATED, GR_TP_COLUMN, GR_TP_SHARDED, GR_TP_ROW};
        for (size_t i = 0; i < GR_ARRAY_LEN(names); i++) {
            snprintf(n, sizeof n, "h%d.%s", b, names[i]);
            CHECK_MSG(tp.role[layer(&g, n)] == want[i], "%s: %s", n, gr_tp_role_name(tp.role[layer(&g, n)]));
        }
    }
    CHECK(tp.role[layer(&g, "wte")] == GR_TP_REPLICATED && tp.role[layer(&g, "ln_f")] == GR_TP_REPLICATED &&
          tp.role[layer(&g, "head")] == GR_TP_REPLICATED);
    CHECK(tp.allreduce_fwd == 2 * 2 * 16 && tp.allreduce_bwd == 2 * 2 * 16); /* 2 blocks x 2 pairs x [1, 16] */
    gr_tp_plan_free(&tp);
    gr_graph_free(&g);
    /* 4 heads over 3: refused at the attention's item */
    plan("blocks3", model, 3, &g, &tp, &st, &err);
    CHECK(st == GR_ERR_USAGE && tp.role == NULL);
    CHECK_STR_CONTAINS(err.msg, "blocks3.yaml:8:11: model: layer 'h0.attn': its 4 heads do not split over "
                       "parallel.tensor 3 processes");
    gr_graph_free(&g);
}

static void test_refused(void) {
    gr_graph g;
    gr_tp_plan tp;
    gr_status st;
    gr_error err = {0};
    plan("conv", "  input: [1, 8, 8]\n  layers:\n    - {conv: {filters: 4, kernel: 3}, name: c1}\n    - flatten\n"
         "    - {dense: {units: 8}}\n    - relu\n    - {dense: {units: 2}}", 2, &g, &tp, &st, &err);
    CHECK(st == GR_ERR_USAGE);
    CHECK_STR_CONTAINS(err.msg, "conv.yaml:4:7: model: layer 'c1': tensor parallelism splits dense layers and "
                       "attention heads; a conv layer cannot be split");
    gr_graph_free(&g);
    plan("odd", "  input: [4]\n  layers: [{dense: {units: 5}, name: u}, relu, {dense: {units: 2}}]", 2, &g, &tp,
         &st, &err);
    CHECK(st == GR_ERR_USAGE);
    CHECK_STR_CONTAINS(err.msg, "layer 'u': its 5 units do not split over parallel.tensor 2 processes");
    gr_graph_free(&g);
    plan("none", "  input: [4]\n  layers: [{dense: {units: 4}}, {layernorm: {}}, {dense: {units: 2}}]", 2, &g, &tp,
         &st, &err);
    CHECK(st == GR_ERR_USAGE);
    CHECK_STR_CONTAINS(err.msg, "parallel.tensor: 2 processes, but nothing in the model splits");
    gr_graph_free(&g);
}

int main(void) {
    test_mlp();
    test_blocks();
    test_refused();
    return gr_test_report();
}
