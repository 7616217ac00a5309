/* body.h — what every kernel body (kernels/body_*.h) shares: the
 * GR_HD qualifier (common/gr_hd.h) and the device copy of the run context.
 * They live at kernels/ level because both backends use them: kernels/cuda
 * launches them, kernels/cpu shares some (the dropout key), and the CPU
 * tests (tests/ops/test_op_*.c, tests/ops/test_optim_body.c) sweep them against the CPU kernels.
 *
 * Bodies are C11 and CUDA C++ at once: no restrict, no designated
 * initializers, no compound literals, int64_t indices, float math with the
 * same functions on both sides (expf, erff, tanhf, sqrtf, logf). */
#ifndef GR_BODY_H
#define GR_BODY_H

#include <stdint.h>

#include "../common/gr_hd.h"

/* The per-run context as kernels read it: in device memory, rewritten
 * before every run, so a captured CUDA Graph sees each step's values. */
typedef struct gr_dev_ctx {
    uint64_t rng_key;   /* gr_exec_ctx.rng_key */
    float grad_scale;   /* gr_exec_ctx.grad_scale */
    int32_t training;   /* gr_exec_ctx.training */
    int64_t pos;        /* gr_exec_ctx.pos */
} gr_dev_ctx;

/* Products and sums rounded on their own: nvcc would fuse a * b + c into
 * one FMA, while the CPU kernels (ISO C, no FP contraction) round each
 * step; these keep a body's results the same bits on both. */
GR_HD float gr_mul_rn(float a, float b) {
#ifdef __CUDA_ARCH__
    return __fmul_rn(a, b);
#else
    return a * b;
#endif
}
GR_HD float gr_add_rn(float a, float b) {
#ifdef __CUDA_ARCH__
    return __fadd_rn(a, b);
#else
    return a + b;
#endif
}
GR_HD double gr_dmul_rn(double a, double b) {
#ifdef __CUDA_ARCH__
    return __dmul_rn(a, b);
#else
    return a * b;
#endif
}
GR_HD double gr_dadd_rn(double a, double b) {
#ifdef __CUDA_ARCH__
    return __dadd_rn(a, b);
#else
    return a + b;
#endif
}

#endif
