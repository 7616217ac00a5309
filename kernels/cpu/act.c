/* act.c — CPU kernels of the elementwise activations and their backward.
 * NaN propagates as in PyTorch: relu(NaN) = NaN (clamp_min), and relu's
 * backward passes dy wherever y is not <= 0 (threshold_backward), NaN included. */
#include <math.h>

#include "../body_elem.h"
#include "cpu_kernels.h"
#include "half_io.h"

/* relu and its backward also on bf16 storage (every activation of the step in bf16) */
void gr_cpu_relu(const gr_kargs *a) {
    int64_t n = gr_kargs_numel(a, a->tin[0]);
    if (a->ein[0] == GR_BF16) {
        const uint16_t *hx = a->in[0];
        uint16_t *hy = a->out[0];
        #pragma omp parallel for if (n >= GR_OMP_MIN)
        for (int64_t i = 0; i < n; i += GR_HIO_CHUNK) gr_hio_relu_bf16(hx + i, hy + i, GR_MIN(GR_HIO_CHUNK, n - i));
        return;
    }
    const float *restrict x = a->in[0];
    float *restrict y = a->out[0];
    #pragma omp parallel for simd if (n >= GR_OMP_MIN)
    for (int64_t i = 0; i < n; i++) y[i] = x[i] <= 0.0f ? 0.0f : x[i];
}

void gr_cpu_relu_bwd(const gr_kargs *a) {
    int64_t n = gr_kargs_numel(a, a->tin[0]);
    if (a->ein[0] == GR_BF16) {
        const uint16_t *hdy = a->in[0], *hy = a->in[1];
        uint16_t *hdx = a->out[0];
        #pragma omp parallel for if (n >= GR_OMP_MIN)
        for (int64_t i = 0; i < n; i += GR_HIO_CHUNK)
            gr_hio_relu_bwd_bf16(hdy + i, hy + i, hdx + i, GR_MIN(GR_HIO_CHUNK, n - i));
        return;
    }
    const float *restrict dy = a->in[0], *restrict y = a->in[1];
    float *restrict dx = a->out[0];
    /* dy is loaded whatever y says: a load under the condition is a branch the compiler cannot
     * vectorize, mispredicted on half the elements (--profile showed this kernel at 2.2 ms for
     * 0.8M floats on the e2e_profile CNN, 19% of the step; 0.14 ms vectorized) */
    #pragma omp parallel for simd if (n >= GR_OMP_MIN)
    for (int64_t i = 0; i < n; i++) {
        const float g = dy[i];
        dx[i] = y[i] <= 0.0f ? 0.0f : g;
    }
}

void gr_cpu_sigmoid(const gr_kargs *a) {
    const float *restrict x = a->in[0];
    float *restrict y = a->out[0];
    int64_t n = gr_kargs_numel(a, a->tin[0]);
    #pragma omp parallel for simd if (n >= GR_OMP_MIN)
    for (int64_t i = 0; i < n; i++) y[i] = 1.0f / (1.0f + expf(-x[i]));
}

void gr_cpu_sigmoid_bwd(const gr_kargs *a) {
    const float *restrict dy = a->in[0], *restrict y = a->in[1];
    float *restrict dx = a->out[0];
    int64_t n = gr_kargs_numel(a, a->tin[0]);
    #pragma omp parallel for simd if (n >= GR_OMP_MIN)
    for (int64_t i = 0; i < n; i++) dx[i] = dy[i] * y[i] * (1.0f - y[i]);
}

void gr_cpu_tanh(const gr_kargs *a) {
    const float *restrict x = a->in[0];
    float *restrict y = a->out[0];
    int64_t n = gr_kargs_numel(a, a->tin[0]);
    #pragma omp parallel for simd if (n >= GR_OMP_MIN)
    for (int64_t i = 0; i < n; i++) y[i] = tanhf(x[i]);
}

void gr_cpu_tanh_bwd(const gr_kargs *a) {
    const float *restrict dy = a->in[0], *restrict y = a->in[1];
    float *restrict dx = a->out[0];
    int64_t n = gr_kargs_numel(a, a->tin[0]);
    #pragma omp parallel for simd if (n >= GR_OMP_MIN)
    for (int64_t i = 0; i < n; i++) dx[i] = dy[i] * (1.0f - y[i] * y[i]);
}

/* gelu(x) = x Phi(x), the exact form (PyTorch's approximate='none') */
void gr_cpu_gelu(const gr_kargs *a) {
    const float *restrict x = a->in[0];
    float *restrict y = a->out[0];
    int64_t n = gr_kargs_numel(a, a->tin[0]);
    #pragma omp parallel for simd if (n >= GR_OMP_MIN)
    for (int64_t i = 0; i < n; i++) y[i] = 0.5f * x[i] * (1.0f + erff(x[i] * 0.70710678118654752f));
}

/* d/dx x Phi(x) = Phi(x) + x phi(x) */
void gr_cpu_gelu_bwd(const gr_kargs *a) {
    const float *restrict dy = a->in[0], *restrict x = a->in[1];
    float *restrict dx = a->out[0];
    int64_t n = gr_kargs_numel(a, a->tin[0]);
    const float inv_sqrt_2pi = 0.3989422804014327f;
    #pragma omp parallel for simd if (n >= GR_OMP_MIN)
    for (int64_t i = 0; i < n; i++) {
        float cdf = 0.5f * (1.0f + erff(x[i] * 0.70710678118654752f));
        float pdf = inv_sqrt_2pi * expf(-0.5f * x[i] * x[i]);
        dx[i] = dy[i] * (cdf + x[i] * pdf);
    }
}

/* gelu_tanh: the body's formula (kernels/body_elem.h: x sigma(2u), its exp
 * vectorized; with glibc's tanhf in PyTorch's form this ran at 0.9 GFLOP/s),
 * a chunk of GR_HIO_CHUNK a call */
GR_ISA_CLONES static void gr_gelu_tanh_run(const float *restrict x, float *restrict y, int64_t n) {
    #pragma omp simd
    for (int64_t i = 0; i < n; i++) y[i] = gr_act_hd(GR_OP_GELU_TANH, x[i]);
}

void gr_cpu_gelu_tanh(const gr_kargs *a) {
    const float *x = a->in[0];
    float *y = a->out[0];
    int64_t n = gr_kargs_numel(a, a->tin[0]);
    #pragma omp parallel for if (n >= GR_OMP_MIN)
    for (int64_t i = 0; i < n; i += GR_HIO_CHUNK) gr_gelu_tanh_run(x + i, y + i, GR_MIN(GR_HIO_CHUNK, n - i));
}

GR_ISA_CLONES static void gr_gelu_tanh_bwd_run(const float *restrict dy, const float *restrict x,
                                               float *restrict dx, int64_t n) {
    #pragma omp simd
    for (int64_t i = 0; i < n; i++) dx[i] = gr_act_bwd_hd(GR_OP_GELU_TANH, dy[i], x[i]);
}

void gr_cpu_gelu_tanh_bwd(const gr_kargs *a) {
    const float *dy = a->in[0], *x = a->in[1];
    float *dx = a->out[0];
    int64_t n = gr_kargs_numel(a, a->tin[0]);
    #pragma omp parallel for if (n >= GR_OMP_MIN)
    for (int64_t i = 0; i < n; i += GR_HIO_CHUNK)
        gr_gelu_tanh_bwd_run(dy + i, x + i, dx + i, GR_MIN(GR_HIO_CHUNK, n - i));
}
