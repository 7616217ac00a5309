/* loss.c — CPU kernels of the losses (softmax cross-entropy over the last
 * axis, mse, bce with logits) and the accuracy metric (see graph/op_loss.c).
 * Sums run in double, in element order. */
#include <math.h>

#include <stdlib.h>

#include "../body_vmath.h"
#include "../loss_math.h"
#include "cpu_kernels.h"

/* The rows of a [n, ..., C] prediction in this run (tokens), and C. */
static int64_t gr_cpu_rows(const gr_kargs *a, int64_t *k) {
    const gr_tensor *x = a->tin[0];
    *k = x->shape[x->ndim - 1];
    return a->n * (gr_tensor_sample_numel(x) / *k);
}

/* The row's largest logit, NaN when it has one (NaN ranks above all, as in
 * torch.argmax, and makes the row's loss NaN): a vectorized max and a NaN
 * flag, where gr_sce_above's scan was a compare and branch a logit */
GR_ISA_CLONES static float gr_sce_max(const float *restrict z, int64_t kc) {
    float m = -INFINITY;
    int nan = 0;
    #pragma omp simd reduction(max : m) reduction(| : nan)
    for (int64_t j = 0; j < kc; j++) {
        m = z[j] > m ? z[j] : m;
        nan |= z[j] != z[j];
    }
    return nan ? NAN : m;
}

/* e^(z_j - zmax) over a row's kc classes into p: the body's exp (gr_vexpf),
 * vectorized; with glibc's expf the exps were most of this kernel on a
 * vocabulary of 50k */
GR_ISA_CLONES static void gr_sce_exps(const float *restrict z, float *restrict p, float zmax, int64_t kc) {
    #pragma omp simd
    for (int64_t j = 0; j < kc; j++) p[j] = gr_vexpf(z[j] - zmax);
}

/* Row i of the softmax: its probabilities into pi (padding 0) and its loss
 * (0 for an ignored row, which counts nowhere). */
static double gr_sce_row(const float *zi, float *pi, int32_t y, int64_t k, int64_t kc, int64_t ignore, double eps) {
    const float zmax = gr_sce_max(zi, kc);
    gr_sce_exps(zi, pi, zmax, kc);
    double sum = 0.0, zsum = 0.0;
    for (int64_t j = 0; j < kc; j++) {
        sum += pi[j];
        zsum += zi[j] - zmax;
    }
    float inv = (float)(1.0 / sum);
    for (int64_t j = 0; j < kc; j++) pi[j] *= inv;
    for (int64_t j = kc; j < k; j++) pi[j] = 0.0f;
    if (gr_loss_ignored(y, ignore)) return 0.0; /* counts nowhere; its probabilities stay (predict reads them) */
    return gr_sce_row_loss(sum, zsum, zi[y] - zmax, kc, eps); /* the CUDA kernel's formula too */
}

/* Rows in parallel (each one thread's, start to end), their losses then
 * summed in row order: the same bits whatever the thread count. */
void gr_cpu_softmax_cross_entropy(const gr_kargs *a) {
    const float *z = a->in[0];
    const int32_t *label = a->in[1];
    float *p = a->out[0], *stats = a->out[1];
    int64_t k, n = gr_cpu_rows(a, &k), ignore = a->node->attrs.ignore_index;
    const int64_t kc = gr_loss_classes(a->node->attrs.classes, k); /* the rest: padding, probability 0 */
    const double eps = a->node->attrs.label_smoothing;
    double *row = gr_xmalloc((size_t)(n > 0 ? n : 1) * sizeof *row), loss = 0.0;
    #pragma omp parallel for schedule(static) if (n * k >= GR_OMP_MIN)
    for (int64_t i = 0; i < n; i++) row[i] = gr_sce_row(z + i * k, p + i * k, label[i], k, kc, ignore, eps);
    int64_t count = 0;
    for (int64_t i = 0; i < n; i++)
        if (!gr_loss_ignored(label[i], ignore)) {
            loss += row[i];
            count++;
        }
    free(row);
    stats[0] = (float)loss;
    stats[1] = (float)count;
}

/* in: probabilities, targets, the forward's stats (stats[1]: the count) */
void gr_cpu_softmax_cross_entropy_bwd(const gr_kargs *a) {
    const float *p = a->in[0], *stats = a->in[2];
    const int32_t *label = a->in[1];
    float *dz = a->out[0];
    int64_t k, n = gr_cpu_rows(a, &k), ignore = a->node->attrs.ignore_index;
    const int64_t kc = gr_loss_classes(a->node->attrs.classes, k);
    float eps = (float)a->node->attrs.label_smoothing, scale = gr_sce_token_scale(a->ctx->grad_scale, a->n, stats[1]);
    float off = eps / (float)kc, on = 1.0f - eps + off;
    #pragma omp parallel for schedule(static) if (n * k >= GR_OMP_MIN)
    for (int64_t i = 0; i < n; i++) {
        const float *pi = p + i * k;
        float *di = dz + i * k;
        if (gr_loss_ignored(label[i], ignore)) {
            for (int64_t j = 0; j < k; j++) di[j] = 0.0f;
            continue;
        }
        for (int64_t j = 0; j < kc; j++) di[j] = (pi[j] - off) * scale;
        for (int64_t j = kc; j < k; j++) di[j] = 0.0f; /* padding: no class */
        di[label[i]] = (pi[label[i]] - on) * scale;
    }
}

void gr_cpu_mse(const gr_kargs *a) {
    const float *x = a->in[0], *t = a->in[1];
    float *stats = a->out[0];
    int64_t m = gr_kargs_numel(a, a->tin[0]);
    double loss = 0.0;
    for (int64_t i = 0; i < m; i++) loss += gr_mse_term(x[i], t[i]);
    stats[0] = (float)loss;
    stats[1] = (float)m;
}

void gr_cpu_mse_bwd(const gr_kargs *a) {
    const float *x = a->in[0], *t = a->in[1];
    float *dx = a->out[0];
    int64_t m = gr_kargs_numel(a, a->tin[0]);
    float s = gr_loss_elem_scale(a->ctx->grad_scale, gr_tensor_sample_numel(a->tin[0]));
    for (int64_t i = 0; i < m; i++) dx[i] = gr_mse_grad(x[i], t[i], s);
}

void gr_cpu_bce_with_logits(const gr_kargs *a) {
    const float *x = a->in[0], *t = a->in[1];
    float *stats = a->out[0];
    int64_t m = gr_kargs_numel(a, a->tin[0]);
    double loss = 0.0;
    for (int64_t i = 0; i < m; i++) loss += gr_bce_term(x[i], t[i]);
    stats[0] = (float)loss;
    stats[1] = (float)m;
}

void gr_cpu_bce_with_logits_bwd(const gr_kargs *a) {
    const float *x = a->in[0], *t = a->in[1];
    float *dx = a->out[0];
    int64_t m = gr_kargs_numel(a, a->tin[0]);
    float s = gr_loss_elem_scale(a->ctx->grad_scale, gr_tensor_sample_numel(a->tin[0]));
    for (int64_t i = 0; i < m; i++) dx[i] = gr_bce_grad(x[i], t[i], s);
}

void gr_cpu_accuracy(const gr_kargs *a) {
    const float *z = a->in[0];
    const int32_t *label = a->in[1];
    float *stats = a->out[0];
    int64_t k, n = gr_cpu_rows(a, &k), ignore = a->node->attrs.ignore_index, top = a->node->attrs.top_k;
    const int64_t kc = gr_loss_classes(a->node->attrs.classes, k);
    int64_t correct = 0, count = 0;
    for (int64_t i = 0; i < n; i++) {
        if (gr_loss_ignored(label[i], ignore)) continue;
        correct += gr_topk_hit(z + i * k, kc, label[i], top);
        count++;
    }
    stats[0] = (float)correct;
    stats[1] = (float)count;
}
