/* norm.c — CPU kernels of layernorm and its backward (graph/op_norm.c has
 * the node layout): rows of C values over the last axis of x [n, ..., C],
 * fp32 (mixed precision stages them). The reference the CUDA bodies
 * (kernels/body_norm.h) are checked against.
 *
 * Forward, row by row (in parallel over rows): two passes over the row's
 * values, sums in double, for the mean and then the biased variance from
 * the deviations (never E[x^2] - E[x]^2, which cancels when |mean| >> std);
 * saved[2r] = mean, saved[2r + 1] = rstd = 1 / sqrt(var + eps), in fp32.
 *
 * Backward, with xhat = (x - mean) * rstd and g = weight * dy per element:
 *   dx = (g - mean(g) - xhat * mean(g * xhat)) * rstd    (row by row),
 *   dweight += sum over rows of dy * xhat, dbias += sum over rows of dy,
 * the parameter gradients accumulating (micro-batches) and summed in
 * double column by column over every row in row order, in parallel over
 * blocks of columns, so the result does not depend on the thread count. */
#include <math.h>

#include "cpu_kernels.h"

/* columns a thread sums the parameter gradients of at once (one cache line of a row per 16) */
#define GR_LN_COLS 64

/* mean and rstd of one row of c values */
static void gr_ln_row_stats(const float *xr, int64_t c, double eps, float *mean, float *rstd) {
    double s = 0.0;
    for (int64_t j = 0; j < c; j++) s += xr[j];
    const float m = (float)(s / (double)c);
    double ss = 0.0;
    for (int64_t j = 0; j < c; j++) {
        double d = (double)xr[j] - (double)m;
        ss += d * d;
    }
    *mean = m;
    *rstd = (float)(1.0 / sqrt(ss / (double)c + eps));
}

void gr_cpu_layernorm(const gr_kargs *a) {
    const gr_tensor *tx = a->tin[0];
    const int64_t c = tx->shape[tx->ndim - 1], rows = gr_kargs_rows(a);
    const float *x = a->in[0], *w = a->in[1], *b = a->node->nin > 2 ? a->in[2] : NULL;
    float *y = a->out[0], *saved = a->out[1];
    const double eps = a->node->attrs.eps;
    #pragma omp parallel for if (rows * c >= GR_OMP_MIN)
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * c;
        float *yr = y + r * c, mean, rstd;
        gr_ln_row_stats(xr, c, eps, &mean, &rstd);
        saved[2 * r] = mean;
        saved[2 * r + 1] = rstd;
        if (b) {
            for (int64_t j = 0; j < c; j++) yr[j] = (xr[j] - mean) * rstd * w[j] + b[j];
        } else {
            for (int64_t j = 0; j < c; j++) yr[j] = (xr[j] - mean) * rstd * w[j];
        }
    }
}

/* dx of one row from its saved mean and rstd */
static void gr_ln_row_dx(const float *dyr, const float *xr, const float *w, int64_t c, float mean, float rstd,
                         float *dxr) {
    double sg = 0.0, sgx = 0.0;
    for (int64_t j = 0; j < c; j++) {
        float xhat = (xr[j] - mean) * rstd, g = w[j] * dyr[j];
        sg += g;
        sgx += (double)g * (double)xhat;
    }
    const float mg = (float)(sg / (double)c), mgx = (float)(sgx / (double)c);
    for (int64_t j = 0; j < c; j++) {
        float xhat = (xr[j] - mean) * rstd, g = w[j] * dyr[j];
        dxr[j] = (g - mg - xhat * mgx) * rstd;
    }
}

/* in {dy, x, weight, saved}, out {dweight, dbias (attrs.bias), dx (when wanted)} */
void gr_cpu_layernorm_bwd(const gr_kargs *a) {
    const gr_tensor *tx = a->tin[1];
    const int64_t c = tx->shape[tx->ndim - 1], rows = gr_kargs_rows(a);
    const float *dy = a->in[0], *x = a->in[1], *w = a->in[2], *saved = a->in[3];
    const bool has_b = a->node->attrs.bias;
    float *dw = a->out[0], *db = has_b ? a->out[1] : NULL;
    float *dx = a->node->nout > (has_b ? 2 : 1) ? a->out[has_b ? 2 : 1] : NULL;
    const bool par = rows * c >= GR_OMP_MIN;
    if (dx) {
        #pragma omp parallel for if (par)
        for (int64_t r = 0; r < rows; r++)
            gr_ln_row_dx(dy + r * c, x + r * c, w, c, saved[2 * r], saved[2 * r + 1], dx + r * c);
    }
    const int64_t blocks = (c + GR_LN_COLS - 1) / GR_LN_COLS;
    #pragma omp parallel for if (par)
    for (int64_t k = 0; k < blocks; k++) {
        const int64_t j0 = k * GR_LN_COLS, nj = j0 + GR_LN_COLS < c ? GR_LN_COLS : c - j0;
        double sw[GR_LN_COLS] = {0}, sb[GR_LN_COLS] = {0};
        for (int64_t r = 0; r < rows; r++) {
            const float *dyr = dy + r * c + j0, *xr = x + r * c + j0;
            const float mean = saved[2 * r], rstd = saved[2 * r + 1];
            for (int64_t j = 0; j < nj; j++) {
                float xhat = (xr[j] - mean) * rstd;
                sw[j] += (double)dyr[j] * (double)xhat;
                sb[j] += dyr[j];
            }
        }
        for (int64_t j = 0; j < nj; j++) {
            dw[j0 + j] += (float)sw[j];
            if (db) db[j0 + j] += (float)sb[j];
        }
    }
}
