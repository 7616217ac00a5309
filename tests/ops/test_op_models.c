/* test_op_models.c — finite-difference gradchecks of models that mix op
 * families (each family's own cases are in its test_op_<family>.c): an MLP
 * chaining every activation with label smoothing, blocks with arguments and
 * repeat (residual adds), and a pooling + batchnorm chain; through the real
 * pipeline on the backend named on the command line (gradcheck.h: `cpu` or
 * `cuda`). The harness runs in training mode: batchnorm normalizes with the
 * batch statistics. The chain's maxpool shape was chosen as test_op_pool.c
 * says (every window's top two values differ by more than 0.015). The
 * CUDA-vs-CPU comparison of whole models is test_cuda_vs_cpu.c. */
#include "gradcheck.h"

int main(int argc, char **argv) {
    int rc = gr_gc_args(argc, argv);
    if (rc) return rc;
    static const gr_gc_case cases[] = {
        {"mlp chain", "[flatten, {dense: {units: 7}}, gelu, {dense: {units: 6}}, tanh, {dense: {units: 5}}, "
                      "sigmoid, {dense: {units: 4}}]", 3, {1, 3, 3}, 0.05, 0.0, NULL},
        {"blocks with args and repeat", "[flatten, {dense: {units: 6}}, {res: {u: 6}, repeat: 2}, "
                                        "{res: {u: 6, act: sigmoid}}, {dense: {units: 3}}]", 3, {1, 2, 3}, 0.0, 0.0,
         "{res: {args: {u: 4, act: tanh}, layers: [{dense: {units: $u}, name: d}, {add: {}, input: [input, d]}, $act]}}"},
        {"maxpool + batchnorm chain",
         "[{maxpool: {kernel: 2}}, batchnorm, tanh, {avgpool: {kernel: 2, stride: 1}}, global_avgpool, "
         "flatten, {dense: {units: 3}}]", 3, {2, 4, 8}, 0.0, 0.05, NULL},
    };
    for (size_t i = 0; i < GR_ARRAY_LEN(cases); i++) gr_gc_run(&cases[i]);
    return gr_test_report();
}
