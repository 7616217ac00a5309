/* misc.c — CPU kernels of flatten (a view: nothing to do) and dropout. */
#include <string.h>

#include "../body_elem.h"
#include "cpu_kernels.h"

void gr_cpu_flatten(const gr_kargs *a) { (void)a; }
void gr_cpu_flatten_bwd(const gr_kargs *a) { (void)a; }

/* The mask stream of one dropout layer in one micro-batch: the key function
 * the CUDA kernel uses too (body_elem.h), so both backends draw one mask. */
static uint64_t gr_dropout_key(const gr_kargs *a) { return gr_dropout_key_hd(a->ctx->rng_key, a->node->layer); }

void gr_cpu_dropout(const gr_kargs *a) {
    const float *restrict x = a->in[0];
    float *restrict y = a->out[0];
    uint8_t *restrict m = a->out[1];
    int64_t n = a->n * gr_tensor_sample_numel(a->tin[0]);
    float rate = (float)a->node->attrs.rate;
    if (!a->ctx->training || rate == 0.0f) {
        memcpy(y, x, (size_t)n * sizeof *y);
        memset(m, 1, (size_t)n);
        return;
    }
    float scale = 1.0f / (1.0f - rate);
    uint64_t key = gr_dropout_key(a);
    for (int64_t i = 0; i < n; i++) {
        m[i] = gr_uniform(key, (uint64_t)i) >= rate;
        y[i] = x[i] * (m[i] ? scale : 0.0f); /* a dropped NaN stays NaN, as PyTorch's x * mask */
    }
}

void gr_cpu_dropout_bwd(const gr_kargs *a) {
    const float *restrict dy = a->in[0];
    const uint8_t *restrict m = a->in[1];
    float *restrict dx = a->out[0];
    int64_t n = a->n * gr_tensor_sample_numel(a->tin[0]);
    float scale = 1.0f / (1.0f - (float)a->node->attrs.rate);
    for (int64_t i = 0; i < n; i++) dx[i] = dy[i] * (m[i] ? scale : 0.0f);
}
