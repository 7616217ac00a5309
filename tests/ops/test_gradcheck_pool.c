/* test_gradcheck_pool.c — finite-difference gradient checks of maxpool,
 * avgpool, global_avgpool and batchnorm through the real pipeline (see
 * gradcheck.h), each followed by flatten + dense so the loss sees every
 * output. The harness runs in training mode: batchnorm normalizes with the
 * batch statistics, so its check covers the full backward through them.
 *
 * maxpool has a kink wherever the top two values of a window are within h
 * (1e-2) of each other. The harness's inputs are a fixed function of the
 * shape, so the maxpool shapes below were chosen (by scanning the inputs)
 * such that every window's top two values differ by more than 0.015; change
 * a maxpool shape and that margin must be checked again. Shapes, errors and
 * PyTorch parity of these ops are in test_bn.c. */
#include "gradcheck.h"

int main(void) {
    static const gr_gc_case cases[] = {
        {"maxpool 2x2", "[{maxpool: {kernel: 2}}, flatten, {dense: {units: 3}}]", 3, {2, 4, 4}, 0.0, 0.05, NULL},
        {"maxpool 3x3 s2 p1", "[{maxpool: {kernel: 3, stride: 2, padding: 1}}, flatten, {dense: {units: 3}}]",
         3, {2, 4, 5}, 0.0, 0.05, NULL},
        {"maxpool [2,3] s[1,2] p[1,1]",
         "[{maxpool: {kernel: [2, 3], stride: [1, 2], padding: [1, 1]}}, flatten, {dense: {units: 3}}]",
         3, {1, 4, 5}, 0.0, 0.05, NULL},
        {"avgpool 2x2", "[{avgpool: {kernel: 2}}, flatten, {dense: {units: 3}}]", 3, {2, 4, 4}, 0.0, 0.0, NULL},
        {"avgpool 3x3 s2 p1 incl pad",
         "[{avgpool: {kernel: 3, stride: 2, padding: 1}}, flatten, {dense: {units: 3}}]", 3, {2, 5, 5}, 0.0,
         0.0, NULL},
        {"avgpool 3x3 s2 p1 excl pad",
         "[{avgpool: {kernel: 3, stride: 2, padding: 1, count_include_pad: false}}, flatten, "
         "{dense: {units: 3}}]", 3, {2, 5, 5}, 0.0, 0.0, NULL},
        {"avgpool [3,2] s[2,1] p[1,0]",
         "[{avgpool: {kernel: [3, 2], stride: [2, 1], padding: [1, 0], count_include_pad: false}}, flatten, "
         "{dense: {units: 3}}]", 3, {1, 6, 4}, 0.0, 0.0, NULL},
        {"global_avgpool", "[global_avgpool, flatten, {dense: {units: 3}}]", 3, {3, 3, 4}, 0.0, 0.0, NULL},
        {"batchnorm 4-D", "[batchnorm, flatten, {dense: {units: 3}}]", 3, {2, 3, 3}, 0.0, 0.0, NULL},
        {"batchnorm 4-D momentum eps", "[{batchnorm: {momentum: 0.3, eps: 0.01}}, flatten, {dense: {units: 3}}]",
         3, {3, 2, 2}, 0.0, 0.0, NULL},
        {"batchnorm 2-D after dense", "[{dense: {units: 5}}, batchnorm, {dense: {units: 3}}]", 1, {6}, 0.0, 0.0,
         NULL},
        {"maxpool + batchnorm chain",
         "[{maxpool: {kernel: 2}}, batchnorm, tanh, {avgpool: {kernel: 2, stride: 1}}, global_avgpool, "
         "flatten, {dense: {units: 3}}]", 3, {2, 4, 8}, 0.0, 0.05, NULL},
    };
    for (size_t i = 0; i < GR_ARRAY_LEN(cases); i++) gr_gc_run(&cases[i]);
    return gr_test_report();
}
