/* loss_math.h — the losses' and the accuracy metric's per-row and
 * per-element rules (graph/op_loss.c), written once for the CPU kernels
 * (kernels/cpu/loss.c) and the CUDA bodies (kernels/body_elem.h,
 * kernels/body_loss.h), so both backends rank NaN, form each loss and scale
 * each gradient alike. Host/device (GR_HD). */
#ifndef GR_LOSS_MATH_H
#define GR_LOSS_MATH_H

#include <math.h>
#include <stdint.h>

#include "../common/gr_hd.h"

/* Whether v ranks above the running maximum m, scanning in column order:
 * NaN ranks above every number (torch.argmax), and the first NaN or the
 * first maximum stays. A NaN maximum makes the row's loss NaN. */
GR_HD int gr_sce_above(float v, float m) { return v > m || (v != v && m == m); }

/* The row's loss from the whole row's sums: (1 - eps) * -log p_y + eps * -mean_j log p_j.
 * Without smoothing the second term is left out, not multiplied by 0: a -inf
 * logit makes it inf, and PyTorch's loss is then finite, not NaN. */
GR_HD double gr_sce_row_loss(double sum, double zsum, float zy_shifted, int64_t k, double eps) {
    double logsum = log(sum);
    double nll = logsum - (double)zy_shifted;
    if (eps == 0.0) return nll;
    double smooth = logsum - zsum / (double)k;
    return (1.0 - eps) * nll + eps * smooth;
}

/* The columns of a row of k that are classes (gr_attrs.classes; 0: all). */
GR_HD int64_t gr_loss_classes(int64_t classes, int64_t k) { return classes > 0 && classes < k ? classes : k; }

/* Whether a class target counts nowhere (the loss's and the metric's ignore_index). */
GR_HD int gr_loss_ignored(int32_t y, int64_t ignore_index) { return (int64_t)y == ignore_index; }

/* Softmax CE's gradient factor: grad_scale (per sample) times n samples over
 * the count of tokens the micro-batch's loss averages; 0 when none counts.
 * For [n, C] logits count == n, the ratio is exactly 1 and the factor is
 * grad_scale itself, bit for bit. */
GR_HD float gr_sce_token_scale(float grad_scale, int64_t n, float count) {
    if (!(count > 0.0f)) return 0.0f;
    return (float)((double)grad_scale * ((double)n / (double)count));
}

/* mse's and bce's gradient factor: grad_scale over per, the elements of one sample */
GR_HD float gr_loss_elem_scale(float grad_scale, int64_t per) {
    return (float)((double)grad_scale / (double)per);
}

/* Whether column j of row z ranks above the target column y: a larger value
 * (NaN above every number), or an equal one (two NaNs alike) at a lower column. */
GR_HD int gr_topk_ahead(const float *z, int64_t j, int64_t y) {
    float v = z[j], w = z[y];
    if (gr_sce_above(v, w)) return 1;
    return j < y && (v == w || (v != v && w != w));
}

/* Whether target y of row z (k columns) is among its top highest: fewer than
 * top columns rank above it. top 1: y is the argmax gr_sce_above's scan
 * picks (the first NaN, else the first maximum). A target outside [0, k)
 * is never correct. */
GR_HD int gr_topk_hit(const float *z, int64_t k, int32_t y, int64_t top) {
    if (y < 0 || (int64_t)y >= k) return 0;
    int64_t ahead = 0;
    for (int64_t j = 0; j < k && ahead < top; j++) ahead += gr_topk_ahead(z, j, y);
    return ahead < top;
}

/* mse of one element: (x - t)^2, the difference rounded to float as PyTorch's, squared in double */
GR_HD double gr_mse_term(float x, float t) {
    float d = x - t;
    return (double)d * (double)d;
}

/* d/dx of mse's element, times the factor s (gr_loss_elem_scale) */
GR_HD float gr_mse_grad(float x, float t, float s) { return 2.0f * (x - t) * s; }

/* bce with logits of one element, PyTorch's stable form max(x, 0) - x t +
 * log1p(exp(-|x|)), in double. A NaN logit gives NaN. */
GR_HD double gr_bce_term(float x, float t) {
    double xd = (double)x;
    double pos = xd > 0.0 ? xd : (xd != xd ? xd : 0.0);
    return pos - xd * (double)t + log1p(exp(-fabs(xd)));
}

/* sigmoid without overflow: exp of a non-positive number only */
GR_HD float gr_loss_sigmoid(float x) {
    if (x >= 0.0f) return 1.0f / (1.0f + expf(-x));
    float e = expf(x);
    return e / (1.0f + e);
}

/* d/dx of bce's element, (sigmoid(x) - t), times the factor s */
GR_HD float gr_bce_grad(float x, float t, float s) { return (gr_loss_sigmoid(x) - t) * s; }

#endif
