/* test_gradcheck.c — finite-difference gradient checks for every op, through
 * the real pipeline: graph build -> autodiff -> plan -> CPU kernels.
 *
 * Each case is a small model ending in softmax cross-entropy. The analytic
 * gradients (parameters and the input batch) from one backward pass are
 * compared with central differences of the mean loss, (L(w+h) - L(w-h)) / 2h.
 * Kinks are avoided by construction: ops with one (relu) are fed inputs whose
 * magnitude is well above h. */
#include "gradcheck.h"

/* The backward pass must be a rewrite made of ordinary nodes, one per
 * gradient, and skip the input's gradient when nothing needs it. */
static void test_autodiff_structure(void) {
    gr_error err = {0};
    gr_cfg *layers = NULL;
    CHECK(gr_cfg_parse_text("[flatten, {dense: {units: 8}}, relu, {dense: {units: 3}}]", "t", 1, 1, &layers,
                            &err) == GR_OK);
    gr_job_spec spec;
    memset(&spec, 0, sizeof spec);
    spec.model.layers = layers;
    spec.train.micro_batch = 2;
    snprintf(spec.train.loss, sizeof spec.train.loss, "softmax_cross_entropy");
    int64_t shape[3] = {1, 2, 3};
    gr_graph g;
    CHECK(gr_graph_build(&spec, shape, 3, &g, &err) == GR_OK);
    gr_autodiff(&g, false);
    int counts[GR_OP_COUNT] = {0};
    for (int i = g.n_forward; i < g.n_nodes; i++) counts[g.nodes[i].op]++;
    CHECK(counts[GR_OP_SOFTMAX_CE_BWD] == 1);
    CHECK(counts[GR_OP_DENSE_BWD_PARAMS] == 2);
    CHECK(counts[GR_OP_DENSE_BWD_DATA] == 1); /* the first dense needs no input gradient */
    CHECK(counts[GR_OP_RELU_BWD] == 1);
    CHECK(counts[GR_OP_FLATTEN_BWD] == 0);
    CHECK(g.n_weights == 6 * 8 + 8 + 8 * 3 + 3);
    gr_graph_free(&g);
    gr_cfg_free(layers);
}

int main(void) {
    static const gr_gc_case cases[] = {
        {"dense", "[{dense: {units: 5}}]", 1, {6}, 0.0, 0.0, NULL},
        {"dense (no bias)", "[{dense: {units: 5, bias: false}}]", 1, {6}, 0.0, 0.0, NULL},
        {"relu", "[relu, {dense: {units: 3}}]", 1, {6}, 0.0, 0.05, NULL},
        {"sigmoid", "[sigmoid, {dense: {units: 3}}]", 1, {6}, 0.0, 0.0, NULL},
        {"tanh", "[tanh, {dense: {units: 3}}]", 1, {6}, 0.0, 0.0, NULL},
        {"gelu", "[gelu, {dense: {units: 3}}]", 1, {6}, 0.0, 0.0, NULL},
        {"flatten", "[flatten, {dense: {units: 3}}]", 3, {2, 3, 2}, 0.0, 0.0, NULL},
        {"dropout", "[{dropout: {rate: 0.4}}, {dense: {units: 3}}]", 1, {8}, 0.0, 0.0, NULL},
        {"softmax_cross_entropy", "[{dense: {units: 6}}]", 1, {5}, 0.0, 0.0, NULL},
        {"cross_entropy smoothing 0.1", "[{dense: {units: 6}}]", 1, {5}, 0.1, 0.0, NULL},
        {"mlp chain", "[flatten, {dense: {units: 7}}, gelu, {dense: {units: 6}}, tanh, {dense: {units: 5}}, "
                      "sigmoid, {dense: {units: 4}}]", 3, {1, 3, 3}, 0.05, 0.0, NULL},
        /* graphs: fan-out (partial gradients summed), add, concat, blocks */
        {"add (residual)", "[flatten, {dense: {units: 6}, name: a}, tanh, {dense: {units: 6}}, "
                           "{add: {}, input: [a, dense1]}, {dense: {units: 3}}]", 3, {1, 2, 3}, 0.0, 0.0, NULL},
        {"add of three, one read thrice", "[flatten, {dense: {units: 5}, name: a}, {sigmoid: {}, input: a, name: s}, "
                                          "{tanh: {}, input: a, name: t}, {add: {}, input: [a, s, t]}, "
                                          "{dense: {units: 3}}]", 1, {6}, 0.0, 0.0, NULL},
        {"the model input read twice", "[{dense: {units: 4}, name: a}, {dense: {units: 4}, input: input}, "
                                       "{add: {}, input: [a, dense1]}, {dense: {units: 3}}]", 1, {6}, 0.0, 0.0, NULL},
        /* a layer reading one tensor twice: a partial gradient per read (this was dy, not 2 dy) */
        {"add [a, a]", "[{dense: {units: 5}, name: a}, tanh, {add: {}, input: [a, a]}, {dense: {units: 3}}]", 1, {6},
         0.0, 0.0, NULL},
        {"concat [a, a]", "[{dense: {units: 4}, name: a}, {concat: {}, input: [a, a]}, {dense: {units: 3}}]", 1, {6},
         0.0, 0.0, NULL},
        {"add [input, input, a]", "[{dense: {units: 6}, name: a}, {add: {}, input: [input, input, a]}, "
                                  "{dense: {units: 3}}]", 1, {6}, 0.0, 0.0, NULL},
        {"concat", "[flatten, {dense: {units: 4}, name: a}, {dense: {units: 3}, name: b}, gelu, "
                   "{concat: {}, input: [a, gelu0]}, {dense: {units: 3}}]", 3, {1, 2, 3}, 0.0, 0.0, NULL},
        {"blocks with args and repeat", "[flatten, {dense: {units: 6}}, {res: {u: 6}, repeat: 2}, "
                                        "{res: {u: 6, act: sigmoid}}, {dense: {units: 3}}]", 3, {1, 2, 3}, 0.0, 0.0,
         "{res: {args: {u: 4, act: tanh}, layers: [{dense: {units: $u}, name: d}, {add: {}, input: [input, d]}, $act]}}"},
    };
    for (size_t i = 0; i < GR_ARRAY_LEN(cases); i++) gr_gc_run(&cases[i]);
    test_autodiff_structure();
    return gr_test_report();
}
