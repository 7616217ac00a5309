/* body_norm.h — bodies of the layernorm kernels (kernels/cuda/norm.cu); the
 * semantics and the float/double types and operation order of
 * kernels/cpu/norm.c, which tests/ops/test_op_norm.c drives them against
 * (on the CPU, over the grids the kernels cover).
 *
 * Rows: one warp (GR_LN_LANES lanes) per row of c values; lane l takes the
 * row's columns l, l + lanes, ... and sums them in double; the warp adds
 * the lanes' partials (a fixed butterfly, so every lane holds the same
 * sums), then each lane writes its columns. Forward: the sum of x, the mean;
 * the sum of squared deviations from that mean, rstd; saved {mean, rstd};
 * y. Backward dx: the sums of g = weight * dy and of g * xhat, then dx.
 *
 * Parameter gradients: a column reduction over the rows of [rows][c] in
 * body_spatial.h's columns mode (gr_chan_geo with inner 1: a thread per
 * column and slice of rows, the slices' partials added in slice order). */
#ifndef GR_BODY_NORM_H
#define GR_BODY_NORM_H

#include <math.h>

#include "body.h"
#include "body_spatial.h" /* gr_chan_geo and gr_chan_span of the column reduction */

#define GR_LN_LANES 32 /* lanes per row: a warp */

/* ---- forward ---- */

/* A lane's sum of its columns of row `row` of x [rows][c]. */
GR_HD double gr_body_ln_sum_part(const float *x, int64_t row, int64_t c, int64_t lane, int64_t lanes) {
    const float *xr = x + row * c;
    double s = 0.0;
    for (int64_t j = lane; j < c; j += lanes) s += xr[j];
    return s;
}

/* The row's mean from the sum of its values. */
GR_HD float gr_body_ln_mean(double s, int64_t c) { return (float)(s / (double)c); }

/* A lane's sum of (x - mean)^2 over its columns of the row. */
GR_HD double gr_body_ln_sqdev_part(const float *x, int64_t row, int64_t c, float mean, int64_t lane,
                                   int64_t lanes) {
    const float *xr = x + row * c;
    double s = 0.0;
    for (int64_t j = lane; j < c; j += lanes) {
        double d = (double)xr[j] - (double)mean;
        s += d * d;
    }
    return s;
}

/* rstd = 1 / sqrt(var + eps), var the biased variance from the sum of squared deviations. */
GR_HD float gr_body_ln_rstd(double ss, int64_t c, double eps) { return (float)(1.0 / sqrt(ss / (double)c + eps)); }

/* y of a lane's columns: (x - mean) * rstd * weight[j] (+ bias[j]; b NULL: none). */
GR_HD void gr_body_ln_y_part(const float *x, const float *w, const float *b, float *y, int64_t row, int64_t c,
                             float mean, float rstd, int64_t lane, int64_t lanes) {
    const float *xr = x + row * c;
    float *yr = y + row * c;
    for (int64_t j = lane; j < c; j += lanes) {
        float v = gr_mul_rn(gr_mul_rn(xr[j] - mean, rstd), w[j]);
        yr[j] = b ? v + b[j] : v;
    }
}

/* ---- backward: dx ---- */

/* A lane's sums of g = weight * dy and of g * xhat, xhat = (x - mean) * rstd. */
GR_HD void gr_body_ln_dx_part(const float *dy, const float *x, const float *w, int64_t row, int64_t c, float mean,
                              float rstd, int64_t lane, int64_t lanes, double *sg, double *sgx) {
    const float *dyr = dy + row * c, *xr = x + row * c;
    double a = 0.0, b = 0.0;
    for (int64_t j = lane; j < c; j += lanes) {
        float xhat = gr_mul_rn(xr[j] - mean, rstd), g = gr_mul_rn(w[j], dyr[j]);
        a += g;
        b += (double)g * (double)xhat;
    }
    *sg = a;
    *sgx = b;
}

/* dx of a lane's columns from the row's sums: (g - mean(g) - xhat * mean(g * xhat)) * rstd. */
GR_HD void gr_body_ln_dx_apply(const float *dy, const float *x, const float *w, float *dx, int64_t row, int64_t c,
                               float mean, float rstd, double sg, double sgx, int64_t lane, int64_t lanes) {
    const float *dyr = dy + row * c, *xr = x + row * c;
    float *dxr = dx + row * c;
    const float mg = (float)(sg / (double)c), mgx = (float)(sgx / (double)c);
    for (int64_t j = lane; j < c; j += lanes) {
        float xhat = gr_mul_rn(xr[j] - mean, rstd), g = gr_mul_rn(w[j], dyr[j]);
        dxr[j] = gr_mul_rn(g - mg - gr_mul_rn(xhat, mgx), rstd);
    }
}

/* ---- backward: dweight and dbias, a column reduction over the rows ---- */

/* Column ch's sums over rows [r0, r1) of dy * xhat (sw) and dy (sb); saved
 * [rows][2] the forward's {mean, rstd}. */
GR_HD void gr_body_ln_param_part(const float *dy, const float *x, const float *saved, int64_t c, int64_t ch,
                                 int64_t r0, int64_t r1, double *sw, double *sb) {
    double a = 0.0, b = 0.0;
    for (int64_t r = r0; r < r1; r++) {
        float d = dy[r * c + ch], xhat = gr_mul_rn(x[r * c + ch] - saved[2 * r], saved[2 * r + 1]);
        a += (double)d * (double)xhat;
        b += d;
    }
    *sw = a;
    *sb = b;
}

/* Column ch: dweight and dbias (b NULL: none) accumulate (over micro-batches) its sums, rounded once. */
GR_HD void gr_body_ln_param_finish(int64_t ch, double sw, double sb, float *dw, float *db) {
    dw[ch] += (float)sw;
    if (db) db[ch] += (float)sb;
}

#endif
