/* conv.c — CPU kernels of conv and its backward (see conv.h): the path
 * switch, the kernels of ops.def, and the reference path, im2col + sgemm.
 *
 * Reference layout, per sample i and group g (K = C/groups * kh * kw,
 * P = Ho * Wo):
 *   col[K, P]        = im2col(x[i, group g])
 *   y[i, g][Fg, P]   = W_g[Fg, K] col                       (+ b)
 *   dcol[K, P]       = W_g^T dy[i, g];  dx[i, g] = col2im(dcol)
 *   dW_g[Fg, K]     += dy[i, g] col^T;  db[f] += sum_p dy[i, f, p]
 * A 1x1 stride-1 unpadded conv uses x itself as col. The GEMMs are
 * multi-threaded inside gr_cpu_sgemm; im2col/col2im split rows/channels
 * over OpenMP. Samples run one after another, so dW accumulates with
 * beta = 1 without races. The path and the col scratch are the backend's
 * (cpu.h). */
#include <string.h>

#include "conv.h"
#include "cpu.h"
#include "cpu_kernels.h"

/* ---- path selection ---- */

bool gr_cpu_conv_set_path(gr_cpu *cpu, const char *name) {
    if (!name || !name[0] || strcmp(name, "onednn") == 0) cpu->conv_path = GR_CONV_ONEDNN;
    else if (strcmp(name, "ref") == 0) cpu->conv_path = GR_CONV_REF;
    else return false;
    return true;
}

void gr_cpu_conv_free(gr_cpu *cpu) {
    gr_aligned_free(cpu->col);
    cpu->col = NULL;
    cpu->col_cap = 0;
    gr_cpu_conv_onednn_free(cpu);
}

/* ---- the reference path ---- */

/* cpu's scratch for one col matrix, grown on first use of a larger shape and
 * kept (the step loop allocates nothing once warm). */
static float *gr_conv_scratch(gr_cpu *cpu, size_t n) {
    if (n > cpu->col_cap) {
        gr_aligned_free(cpu->col);
        cpu->col = gr_aligned_alloc(n * sizeof(float));
        GR_ASSERT(cpu->col);
        cpu->col_cap = n;
    }
    return cpu->col;
}

static bool gr_conv_is_direct(const gr_conv_shape *s) {
    return s->kh == 1 && s->kw == 1 && s->sh == 1 && s->sw == 1 && s->ph == 0 && s->pw == 0;
}

/* col[K, P] from the cg channels at xs [cg, h, w] */
static void gr_conv_im2col(const gr_conv_shape *s, int64_t cg, const float *xs, float *col) {
    int64_t kk = s->kh * s->kw, rows = cg * kk, p = s->ho * s->wo;
    #pragma omp parallel for if (rows * p >= GR_OMP_MIN)
    for (int64_t r = 0; r < rows; r++) {
        int64_t c = r / kk, ki = (r % kk) / s->kw, kj = r % s->kw;
        const float *plane = xs + c * s->h * s->w;
        float *dst = col + r * p;
        for (int64_t oy = 0; oy < s->ho; oy++) {
            int64_t iy = oy * s->sh - s->ph + ki;
            float *d = dst + oy * s->wo;
            if (iy < 0 || iy >= s->h) {
                memset(d, 0, (size_t)s->wo * sizeof *d);
                continue;
            }
            const float *row = plane + iy * s->w;
            for (int64_t ox = 0; ox < s->wo; ox++) {
                int64_t ix = ox * s->sw - s->pw + kj;
                d[ox] = ix >= 0 && ix < s->w ? row[ix] : 0.0f;
            }
        }
    }
}

/* dxs [cg, h, w] = col2im(col[K, P]); each channel is summed by one thread */
static void gr_conv_col2im(const gr_conv_shape *s, int64_t cg, const float *col, float *dxs) {
    int64_t kk = s->kh * s->kw, p = s->ho * s->wo;
    #pragma omp parallel for if (cg * kk * p >= GR_OMP_MIN)
    for (int64_t c = 0; c < cg; c++) {
        float *plane = dxs + c * s->h * s->w;
        memset(plane, 0, (size_t)(s->h * s->w) * sizeof *plane);
        for (int64_t k = 0; k < kk; k++) {
            int64_t ki = k / s->kw, kj = k % s->kw;
            const float *src = col + (c * kk + k) * p;
            for (int64_t oy = 0; oy < s->ho; oy++) {
                int64_t iy = oy * s->sh - s->ph + ki;
                if (iy < 0 || iy >= s->h) continue;
                float *row = plane + iy * s->w;
                const float *sr = src + oy * s->wo;
                for (int64_t ox = 0; ox < s->wo; ox++) {
                    int64_t ix = ox * s->sw - s->pw + kj;
                    if (ix >= 0 && ix < s->w) row[ix] += sr[ox];
                }
            }
        }
    }
}

void gr_cpu_conv_ref_fwd(gr_cpu *cpu, const gr_conv_shape *s, const float *x, const float *w, const float *b,
                         float *y) {
    int64_t cg = s->c / s->groups, fg = s->f / s->groups, k = cg * s->kh * s->kw, p = s->ho * s->wo;
    bool direct = gr_conv_is_direct(s);
    float *col = direct ? NULL : gr_conv_scratch(cpu, (size_t)(k * p));
    for (int64_t i = 0; i < s->n; i++)
        for (int64_t g = 0; g < s->groups; g++) {
            const float *xs = x + (i * s->c + g * cg) * s->h * s->w;
            float *ys = y + (i * s->f + g * fg) * p;
            float beta = 0.0f;
            if (b) {
                for (int64_t f = 0; f < fg; f++)
                    for (int64_t q = 0; q < p; q++) ys[f * p + q] = b[g * fg + f];
                beta = 1.0f;
            }
            if (!direct) gr_conv_im2col(s, cg, xs, col);
            gr_cpu_sgemm(cpu, false, false, fg, p, k, 1.0f, w + g * fg * k, k, direct ? xs : col, p, beta, ys, p);
        }
}

void gr_cpu_conv_ref_bwd_data(gr_cpu *cpu, const gr_conv_shape *s, const float *dy, const float *w, float *dx) {
    int64_t cg = s->c / s->groups, fg = s->f / s->groups, k = cg * s->kh * s->kw, p = s->ho * s->wo;
    bool direct = gr_conv_is_direct(s);
    float *col = direct ? NULL : gr_conv_scratch(cpu, (size_t)(k * p));
    for (int64_t i = 0; i < s->n; i++)
        for (int64_t g = 0; g < s->groups; g++) {
            const float *dys = dy + (i * s->f + g * fg) * p;
            float *dxs = dx + (i * s->c + g * cg) * s->h * s->w;
            gr_cpu_sgemm(cpu, true, false, k, p, fg, 1.0f, w + g * fg * k, k, dys, p, 0.0f, direct ? dxs : col, p);
            if (!direct) gr_conv_col2im(s, cg, col, dxs);
        }
}

void gr_cpu_conv_ref_bwd_params(gr_cpu *cpu, const gr_conv_shape *s, const float *dy, const float *x, float *dw,
                                float *db) {
    int64_t cg = s->c / s->groups, fg = s->f / s->groups, k = cg * s->kh * s->kw, p = s->ho * s->wo;
    bool direct = gr_conv_is_direct(s);
    float *col = direct ? NULL : gr_conv_scratch(cpu, (size_t)(k * p));
    for (int64_t i = 0; i < s->n; i++)
        for (int64_t g = 0; g < s->groups; g++) {
            const float *xs = x + (i * s->c + g * cg) * s->h * s->w;
            const float *dys = dy + (i * s->f + g * fg) * p;
            if (!direct) gr_conv_im2col(s, cg, xs, col);
            gr_cpu_sgemm(cpu, false, true, fg, k, p, 1.0f, dys, p, direct ? xs : col, p, 1.0f, dw + g * fg * k, k);
        }
    if (!db) return;
    #pragma omp parallel for if (s->n * s->f * p >= GR_OMP_MIN)
    for (int64_t f = 0; f < s->f; f++) {
        double acc = 0.0;
        for (int64_t i = 0; i < s->n; i++) {
            const float *row = dy + (i * s->f + f) * p;
            for (int64_t q = 0; q < p; q++) acc += row[q];
        }
        db[f] += (float)acc;
    }
}

/* ---- the kernels of ops.def ---- */

/* x: the forward input (or dx), y: the output (or dy), w: the weight (or dW) */
static gr_conv_shape gr_conv_kshape(const gr_kargs *a, const gr_tensor *x, const gr_tensor *y,
                                    const gr_tensor *w) {
    const gr_attrs *at = &a->node->attrs;
    gr_conv_shape s = {
        .n = a->n, .c = x->shape[1], .h = x->shape[2], .w = x->shape[3],
        .f = y->shape[1], .ho = y->shape[2], .wo = y->shape[3],
        .kh = w->shape[2], .kw = w->shape[3], .sh = at->stride[0], .sw = at->stride[1],
        .ph = at->padding[0], .pw = at->padding[1], .groups = at->groups,
    };
    GR_ASSERT(s.n <= x->shape[0] && s.groups >= 1 && w->shape[1] * s.groups == s.c && w->shape[0] == s.f);
    return s;
}

void gr_cpu_conv(const gr_kargs *a) {
    gr_cpu *cpu = gr_cpu_of(a);
    gr_conv_shape s = gr_conv_kshape(a, a->tin[0], a->tout[0], a->tin[1]);
    const float *b = a->node->nin > 2 ? a->in[2] : NULL;
    gr_conv_store t = {a->ein[0], a->eout[0], a->tin[0]->layout, a->tout[0]->layout};
    if (cpu->conv_path == GR_CONV_REF) gr_cpu_conv_ref_fwd(cpu, &s, a->in[0], a->in[1], b, a->out[0]);
    else gr_cpu_conv_onednn_fwd_as(cpu, &s, &t, a->in[0], a->in[1], b, a->out[0]);
}

void gr_cpu_conv_bwd_data(const gr_kargs *a) {
    gr_cpu *cpu = gr_cpu_of(a);
    gr_conv_shape s = gr_conv_kshape(a, a->tout[0], a->tin[0], a->tin[1]);
    gr_conv_store t = {a->eout[0], a->ein[0], a->tout[0]->layout, a->tin[0]->layout};
    if (cpu->conv_path == GR_CONV_REF) gr_cpu_conv_ref_bwd_data(cpu, &s, a->in[0], a->in[1], a->out[0]);
    else gr_cpu_conv_onednn_bwd_data_as(cpu, &s, &t, a->in[0], a->in[1], a->out[0]);
}

void gr_cpu_conv_bwd_params(const gr_kargs *a) {
    gr_cpu *cpu = gr_cpu_of(a);
    gr_conv_shape s = gr_conv_kshape(a, a->tin[1], a->tin[0], a->tout[0]);
    float *db = a->node->nout > 1 ? a->out[1] : NULL;
    gr_conv_store t = {a->ein[1], a->ein[0], a->tin[1]->layout, a->tin[0]->layout};
    if (cpu->conv_path == GR_CONV_REF) gr_cpu_conv_ref_bwd_params(cpu, &s, a->in[0], a->in[1], a->out[0], db);
    else gr_cpu_conv_onednn_bwd_params_as(cpu, &s, &t, a->in[0], a->in[1], a->out[0], db);
}
