/* loss_math.h — softmax cross-entropy's per-row rules, written once for the
 * CPU kernel (kernels/cpu/loss.c) and the CUDA bodies (kernels/body_elem.h),
 * so both backends rank NaN and form the loss alike. Host/device (GR_HD). */
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

#endif
