/* body_elem.h — bodies of the elementwise kernels (kernels/cuda/elem.cu): activations
 * and their backward, dropout, add, concat along axis 1, and softmax
 * cross-entropy over the last axis (the other losses: body_loss.h); the formulas of kernels/cpu/{act,misc,join,loss}.c, in the
 * same float/double types and operation order.
 *
 * tests/ops/test_op_{dense_act,misc,join,loss}.c drive them over the grids the kernels cover and
 * compares with the CPU kernels. The dropout key function is the CPU's too
 * (kernels/cpu/misc.c), so the two backends draw the same masks. */
#ifndef GR_BODY_ELEM_H
#define GR_BODY_ELEM_H

#include <math.h>
#include <stdint.h>

#include "body.h"
#include "../graph/ops.h"
#include "body_half.h"
#include "body_vmath.h"
#include "loss_math.h"

/* ---- activations ---- */

/* gelu_tanh's constants: sqrt(2/pi) and the cubic's coefficient (PyTorch's kBeta, kKappa) */
#define GR_GELU_TANH_BETA 0.7978845608028654f
#define GR_GELU_TANH_KAPPA 0.044715f

/* gelu_tanh's tanh argument u = sqrt(2/pi) (x + 0.044715 x^3). The op is
 * 0.5 x (1 + tanh u), computed as x sigma(2u) = x / (1 + e^-2u), the same
 * function: PyTorch's form rounds tanh u near -1, so for x below about -4
 * its 1 + tanh u keeps a bit or two (x = -5: 35% off); this form keeps the
 * relative precision of e^-2u (gr_vexpf, vectorized on the CPU). */
GR_HD float gr_gelu_tanh_u(float x) { return GR_GELU_TANH_BETA * (x + GR_GELU_TANH_KAPPA * (x * x * x)); }

/* y = act(x), act being the op of a GR_OPF_ACT row of ops.def (GR_OP_RELU,
 * ...); the kernels pass act as a template constant, so the switch folds
 * away. gelu is the exact erf form (PyTorch's approximate='none'), gelu_tanh
 * 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) (approximate='tanh', as
 * x sigma(2u): above; gelu_tanh(-inf) is NaN, as in PyTorch). relu(NaN)
 * = NaN, as PyTorch (fmaxf(x, 0) would drop it). A row without its case here
 * computes NaN, which every activation test (they iterate the rows) reports. */
GR_HD float gr_act_hd(int act, float x) {
    switch (act) {
    case GR_OP_RELU: return x <= 0.0f ? 0.0f : x;
    case GR_OP_SIGMOID: return 1.0f / (1.0f + expf(-x));
    case GR_OP_TANH: return tanhf(x);
    case GR_OP_GELU: return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
    case GR_OP_GELU_TANH: return x / (1.0f + gr_vexpf(-2.0f * gr_gelu_tanh_u(x)));
    default: return NAN;
    }
}

/* dx from dy and the tensor the backward saved: y, or x on a
 * GR_OPF_ACT_SAVES_X row (gelu: d/dx x Phi(x) = Phi(x) + x phi(x);
 * gelu_tanh: with u = sqrt(2/pi) (x + 0.044715 x^3) and s = sigma(2u),
 * s + 2 x s (1 - s) du/dx, du/dx = sqrt(2/pi) (1 + 3 0.044715 x^2): PyTorch's
 * 0.5 (1 + t) + 0.5 x (1 - t^2) du/dx with t = tanh u = 2s - 1). relu passes dy where y is NaN (PyTorch's
 * threshold_backward: y <= 0 ? 0 : dy). */
GR_HD float gr_act_bwd_hd(int act, float dy, float t) {
    switch (act) {
    case GR_OP_RELU: return t <= 0.0f ? 0.0f : dy;
    case GR_OP_SIGMOID: return dy * t * (1.0f - t);
    case GR_OP_TANH: return dy * (1.0f - t * t);
    case GR_OP_GELU: {
        float cdf = 0.5f * (1.0f + erff(t * 0.70710678118654752f));
        float pdf = 0.3989422804014327f * expf(-0.5f * t * t);
        return dy * (cdf + t * pdf);
    }
    case GR_OP_GELU_TANH: {
        const float s = 1.0f / (1.0f + gr_vexpf(-2.0f * gr_gelu_tanh_u(t)));
        const float du = GR_GELU_TANH_BETA * (1.0f + 3.0f * GR_GELU_TANH_KAPPA * (t * t));
        return dy * (s + 2.0f * t * (s * (1.0f - s)) * du);
    }
    default: return NAN;
    }
}

/* Element i of arrays stored as e (body_half.h): all of them, so a half
 * step's inputs and outputs share one type (the backends' native_half). */
GR_HD void gr_body_act(int act, int e, const void *x, void *y, int64_t i) {
    gr_st_hd(y, e, i, gr_act_hd(act, gr_ld_hd(x, e, i)));
}

GR_HD void gr_body_act_bwd(int act, int e, const void *dy, const void *t, void *dx, int64_t i) {
    gr_st_hd(dx, e, i, gr_act_bwd_hd(act, gr_ld_hd(dy, e, i), gr_ld_hd(t, e, i)));
}

/* ---- dropout ---- */

/* The mask stream of dropout layer `layer` in the run keyed rng_key (one
 * key per seed, step and micro-batch). */
GR_HD uint64_t gr_dropout_key_hd(uint64_t rng_key, int layer) {
    return gr_hash64_hd(rng_key, 0xD50000ull + (uint64_t)layer);
}

/* Element i keeps with probability 1 - rate; kept values are scaled by
 * scale = 1 / (1 - rate). y = x * (mask * scale), as PyTorch: a dropped
 * NaN or inf stays NaN (x * 0), forward and backward. */
GR_HD void gr_body_dropout(uint64_t key, float rate, float scale, const float *x, float *y, uint8_t *m,
                           int64_t i) {
    uint8_t keep = gr_uniform_hd(key, (uint64_t)i) >= rate;
    m[i] = keep;
    y[i] = x[i] * (keep ? scale : 0.0f);
}

GR_HD void gr_body_dropout_bwd(float scale, const float *dy, const uint8_t *m, float *dx, int64_t i) {
    dx[i] = dy[i] * (m[i] ? scale : 0.0f);
}

/* ---- add and concat (up to GR_MAX_IN inputs, passed by value) ---- */

#define GR_ELEM_MAX_IN 5

typedef struct gr_add_in {
    const void *x[GR_ELEM_MAX_IN];
    int nin;
    int e;               /* the storage type of the inputs and of y (body_half.h) */
} gr_add_in;

/* y = x0 + x1 + x2 + ..., summed left to right in fp32 as the CPU does, rounded once into y */
GR_HD void gr_body_add(const gr_add_in *in, void *y, int64_t i) {
    float v = gr_ld_hd(in->x[0], in->e, i);
    for (int k = 1; k < in->nin; k++) v += gr_ld_hd(in->x[k], in->e, i);
    gr_st_hd(y, in->e, i, v);
}

/* Input k contributes row[k] = C_k * inner floats per sample, at column
 * start[k] of the output's out_row. */
typedef struct gr_concat_in {
    const float *x[GR_ELEM_MAX_IN];
    int64_t row[GR_ELEM_MAX_IN], start[GR_ELEM_MAX_IN];
    int nin;
    int64_t out_row;
} gr_concat_in;

/* Output column c of sample s. */
GR_HD void gr_body_concat(const gr_concat_in *in, float *y, int64_t s, int64_t c) {
    int k = 0;
    for (int j = 1; j < in->nin; j++)
        if (c >= in->start[j]) k = j;
    y[s * in->out_row + c] = in->x[k][s * in->row[k] + (c - in->start[k])];
}

/* dx[s, c] = dy[s, off + c]: a row-slice of row floats from rows of in_row */
GR_HD void gr_body_concat_bwd(const float *dy, float *dx, int64_t in_row, int64_t row, int64_t off, int64_t s,
                              int64_t c) {
    dx[s * row + c] = dy[s * in_row + off + c];
}

/* ---- softmax cross-entropy ---- */

/* The forward kernel gives each row one warp of GR_SCE_LANES lanes; a
 * block holds GR_SCE_WARPS warps; there are at most GR_SCE_MAX_BLOCKS
 * blocks (their partial sums live in the backend's scratch doubles), warps
 * striding over the rows beyond. Lane l of a row handles columns l, l+L, ... */
#define GR_SCE_LANES 32
#define GR_SCE_WARPS 8
#define GR_SCE_MAX_BLOCKS 128

GR_HD int64_t gr_sce_blocks(int64_t n) {
    int64_t b = (n + GR_SCE_WARPS - 1) / GR_SCE_WARPS;
    return b < 1 ? 1 : b > GR_SCE_MAX_BLOCKS ? GR_SCE_MAX_BLOCKS : b;
}

/* A lane's maximum of row z over its columns and the first column holding
 * it; arg = -1 when the lane has no column (k < lanes). */
GR_HD void gr_body_sce_max_part(const float *z, int64_t k, int64_t lane, int64_t lanes, float *m, int64_t *arg) {
    float mv = -INFINITY;
    int64_t a = -1;
    for (int64_t j = lane; j < k; j += lanes)
        if (a < 0 || gr_sce_above(z[j], mv)) { mv = z[j]; a = j; }
    *m = mv;
    *arg = a;
}

/* Merges another lane's (m2, arg2) into (m, arg): the larger value (NaN
 * above all), on a tie (two NaNs, or equal values) the smaller column —
 * the CPU's first maximum. Symmetric, so every lane of a butterfly ends
 * with the same pair. */
GR_HD void gr_sce_max_combine(float *m, int64_t *arg, float m2, int64_t arg2) {
    if (arg2 < 0) return;
    int tie = m2 == *m || (m2 != m2 && *m != *m);
    if (*arg < 0 || gr_sce_above(m2, *m) || (tie && arg2 < *arg)) { *m = m2; *arg = arg2; }
}

/* The second stage: the blocks' (loss, count) partials summed in block
 * order into stats[0..1] (one thread: the order is fixed; the other
 * reductions of body_loss.h end here too). */
GR_HD void gr_body_sce_stats(const double *part, int64_t blocks, float *stats) {
    double l = 0.0, c = 0.0;
    for (int64_t b = 0; b < blocks; b++) {
        l += part[2 * b];
        c += part[2 * b + 1];
    }
    stats[0] = (float)l;
    stats[1] = (float)c;
}

/* A lane's part of the row: p[j] = exp(z[j] - zmax), and the sums of those
 * and of z[j] - zmax (in double, from float terms, as the CPU). */
GR_HD void gr_body_sce_exp_part(const float *z, float *p, int64_t k, float zmax, int64_t lane, int64_t lanes,
                                double *sum, double *zsum) {
    double s = 0.0, zs = 0.0;
    for (int64_t j = lane; j < k; j += lanes) {
        p[j] = gr_vexpf(z[j] - zmax);
        s += p[j];
        zs += z[j] - zmax;
    }
    *sum = s;
    *zsum = zs;
}

GR_HD float gr_sce_inv(double sum) { return (float)(1.0 / sum); }

/* A lane's part of normalizing: p[j] *= 1/sum */
GR_HD void gr_body_sce_scale_part(float *p, int64_t k, float inv, int64_t lane, int64_t lanes) {
    for (int64_t j = lane; j < k; j += lanes) p[j] *= inv;
}

/* The gradient's targets under label smoothing eps: off everywhere, on at the label. */
GR_HD void gr_sce_targets(float eps, int64_t k, float *off, float *on) {
    *off = eps / (float)k;
    *on = 1.0f - eps + *off;
}

/* dz[i] = (p[i] - target) * scale, element i of rows of k whose first kc
 * columns are the classes; 0 in a row whose target is ignore, and in the
 * padding columns (scale: gr_sce_token_scale) */
GR_HD void gr_body_sce_bwd(const float *p, const int32_t *label, float *dz, int64_t k, int64_t kc, float off,
                           float on, float scale, int64_t ignore, int64_t i) {
    int64_t r = i / k, j = i - r * k;
    dz[i] = gr_loss_ignored(label[r], ignore) || j >= kc ? 0.0f : (p[i] - (j == label[r] ? on : off)) * scale;
}

#endif
