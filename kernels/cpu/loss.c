/* loss.c — CPU kernels of softmax cross-entropy (see graph/op_loss.c). */
#include <math.h>

#include "../loss_math.h"
#include "cpu_kernels.h"

void gr_cpu_softmax_cross_entropy(const gr_kargs *a) {
    const float *z = a->in[0];
    const int32_t *label = a->in[1];
    float *p = a->out[0], *stats = a->out[1];
    int64_t n = a->n, k = a->tin[0]->shape[1];
    double eps = a->node->attrs.label_smoothing, loss = 0.0;
    int64_t correct = 0;
    for (int64_t i = 0; i < n; i++) {
        const float *zi = z + i * k;
        float *pi = p + i * k;
        int64_t arg = 0;
        float zmax = zi[0];
        for (int64_t j = 1; j < k; j++) /* NaN ranks above all (torch.argmax) and makes the row's loss NaN */
            if (gr_sce_above(zi[j], zmax)) { zmax = zi[j]; arg = j; }
        double sum = 0.0, zsum = 0.0;
        for (int64_t j = 0; j < k; j++) {
            pi[j] = expf(zi[j] - zmax);
            sum += pi[j];
            zsum += zi[j] - zmax;
        }
        float inv = (float)(1.0 / sum);
        for (int64_t j = 0; j < k; j++) pi[j] *= inv;
        int32_t y = label[i];
        loss += gr_sce_row_loss(sum, zsum, zi[y] - zmax, k, eps); /* the CUDA kernel's formula too */
        correct += arg == y;
    }
    stats[0] = (float)loss;
    stats[1] = (float)correct;
}

void gr_cpu_softmax_cross_entropy_bwd(const gr_kargs *a) {
    const float *p = a->in[0];
    const int32_t *label = a->in[1];
    float *dz = a->out[0];
    int64_t n = a->n, k = a->tin[0]->shape[1];
    float eps = (float)a->node->attrs.label_smoothing, scale = a->ctx->grad_scale;
    float off = eps / (float)k, on = 1.0f - eps + off;
    for (int64_t i = 0; i < n; i++) {
        const float *pi = p + i * k;
        float *di = dz + i * k;
        for (int64_t j = 0; j < k; j++) di[j] = (pi[j] - off) * scale;
        di[label[i]] = (pi[label[i]] - on) * scale;
    }
}
