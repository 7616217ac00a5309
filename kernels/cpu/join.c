/* join.c — CPU kernels of add (also the sum of partial gradients emitted by
 * autodiff), concat along axis 1 and its backward slice; add_bwd is a view. */
#include <string.h>

#include "cpu_kernels.h"
#include "half_io.h"

/* y = x0 + x1 + ... in bf16 storage, summed in fp32 left to right */
static void gr_cpu_add_bf16(const gr_kargs *a, int64_t total) {
    uint16_t *y = a->out[0];
    const int nin = a->node->nin;
    const uint16_t *x0 = a->in[0], *x1 = nin > 1 ? a->in[1] : NULL;
    if (nin == 2) { /* the residual add */
        #pragma omp parallel for if (total >= GR_OMP_MIN)
        for (int64_t i = 0; i < total; i += GR_HIO_CHUNK)
            gr_hio_add2_bf16(x0 + i, x1 + i, y + i, GR_MIN(GR_HIO_CHUNK, total - i));
        return;
    }
    #pragma omp parallel for if (total >= GR_OMP_MIN)
    for (int64_t i = 0; i < total; i++) {
        float v = gr_bf16_decode_hd(x0[i]);
        if (x1) v += gr_bf16_decode_hd(x1[i]);
        for (int k = 2; k < nin; k++) v += gr_bf16_decode_hd(((const uint16_t *)a->in[k])[i]);
        y[i] = gr_bf16_encode_hd(v);
    }
}

/* y = x0 + x1 + ... (nin >= 1; one input is a copy) */
void gr_cpu_add(const gr_kargs *a) {
    const int64_t total = a->n * gr_tensor_sample_numel(a->tout[0]);
    if (a->eout[0] == GR_BF16) {
        gr_cpu_add_bf16(a, total);
        return;
    }
    float *y = a->out[0];
    const int nin = a->node->nin;
    const float *x0 = a->in[0], *x1 = nin > 1 ? a->in[1] : NULL;
    #pragma omp parallel for if (total >= GR_OMP_MIN)
    for (int64_t i = 0; i < total; i++) {
        float v = x0[i];
        if (x1) v += x1[i];
        for (int k = 2; k < nin; k++) v += ((const float *)a->in[k])[i];
        y[i] = v;
    }
}

void gr_cpu_add_bwd(const gr_kargs *a) { (void)a; }

/* Rows of n: each input contributes shape[1] * inner contiguous floats per
 * sample (inner = H*W, or 1 for [n, F]). */
static int64_t gr_join_inner(const gr_tensor *t) { return gr_tensor_sample_numel(t) / t->shape[1]; }

void gr_cpu_concat(const gr_kargs *a) {
    const int64_t n = a->n, inner = gr_join_inner(a->tout[0]);
    const int64_t out_row = a->tout[0]->shape[1] * inner;
    float *y = a->out[0];
    int64_t off = 0;
    for (int k = 0; k < a->node->nin; k++) {
        const int64_t row = a->tin[k]->shape[1] * inner;
        const float *x = a->in[k];
        for (int64_t i = 0; i < n; i++) memcpy(y + i * out_row + off, x + i * row, (size_t)row * sizeof *y);
        off += row;
    }
}

/* dx = dy[:, offset : offset + C] */
void gr_cpu_concat_bwd(const gr_kargs *a) {
    const int64_t n = a->n, inner = gr_join_inner(a->tout[0]);
    const int64_t in_row = a->tin[0]->shape[1] * inner, row = a->tout[0]->shape[1] * inner;
    const int64_t off = a->node->attrs.offset * inner;
    const float *dy = a->in[0];
    float *dx = a->out[0];
    for (int64_t i = 0; i < n; i++) memcpy(dx + i * row, dy + i * in_row + off, (size_t)row * sizeof *dx);
}
