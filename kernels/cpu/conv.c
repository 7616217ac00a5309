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
    gr_cpu_scratch_free(cpu, cpu->col, cpu->col_cap * sizeof(float));
    cpu->col = NULL;
    cpu->col_cap = 0;
    gr_cpu_conv_onednn_free(cpu);
}

/* ---- the reference path ---- */

/* cpu's col matrix grown to at least n floats, the old one freed first
 * (capped: false when the CPU's memory limit has no room, the matrix then
 * empty). */
static bool gr_conv_col_grow(gr_cpu *cpu, size_t n, bool capped) {
    if (n <= cpu->col_cap) return true;
    gr_cpu_scratch_free(cpu, cpu->col, cpu->col_cap * sizeof(float));
    cpu->col = gr_cpu_scratch_alloc(cpu, n * sizeof(float), capped);
    cpu->col_cap = cpu->col ? n : 0;
    return cpu->col != NULL;
}

/* cpu's scratch for one col matrix: prepare sized it for the plans' shapes
 * (a shape it did not see grows it past the limit) and the step loop
 * allocates nothing once warm. */
static float *gr_conv_scratch(gr_cpu *cpu, size_t n) {
    GR_ASSERT(gr_conv_col_grow(cpu, n, false));
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

/* The conv call of step a in direction dir: its shape (at a->n samples) and
 * how its activations are stored. */
static gr_conv_shape gr_conv_call(const gr_kargs *a, gr_conv_dir dir, gr_conv_store *t) {
    switch (dir) {
    case GR_CONV_FWD: /* x, w -> y */
        *t = (gr_conv_store){a->ein[0], a->eout[0], a->tin[0]->layout, a->tout[0]->layout};
        return gr_conv_kshape(a, a->tin[0], a->tout[0], a->tin[1]);
    case GR_CONV_BWD_DATA: /* dy, w -> dx */
        *t = (gr_conv_store){a->eout[0], a->ein[0], a->tout[0]->layout, a->tin[0]->layout};
        return gr_conv_kshape(a, a->tout[0], a->tin[0], a->tin[1]);
    default: /* dy, x -> dW */
        *t = (gr_conv_store){a->ein[1], a->ein[0], a->tin[1]->layout, a->tin[0]->layout};
        return gr_conv_kshape(a, a->tin[1], a->tin[0], a->tout[0]);
    }
}

/* ---- the workspace: what prepare reserves ---- */

/* The col floats of the reference path for s (0: a 1x1 conv reads x itself). */
static size_t gr_conv_col_floats(const gr_conv_shape *s) {
    return gr_conv_is_direct(s) ? 0 : (size_t)(s->c / s->groups * s->kh * s->kw * s->ho * s->wo);
}

size_t gr_cpu_conv_workspace(gr_cpu *cpu, const gr_kargs *a, int64_t n) {
    const gr_op op = a->node->op;
    if (op != GR_OP_CONV && op != GR_OP_CONV_BWD_DATA && op != GR_OP_CONV_BWD_PARAMS) return 0;
    const gr_conv_dir dir = op == GR_OP_CONV ? GR_CONV_FWD : op == GR_OP_CONV_BWD_DATA ? GR_CONV_BWD_DATA
                                                                                        : GR_CONV_BWD_WEIGHTS;
    gr_kargs b = *a; /* the shape at n samples */
    b.n = n;
    gr_conv_store t;
    gr_conv_shape s = gr_conv_call(&b, dir, &t);
    if (cpu->conv_path == GR_CONV_REF) return gr_conv_col_floats(&s) * sizeof(float);
    const bool bias = dir == GR_CONV_FWD ? a->node->nin > 2 : dir == GR_CONV_BWD_WEIGHTS && a->node->nout > 1;
    return gr_cpu_conv_onednn_need(cpu, dir, &s, bias, &t);
}

bool gr_cpu_conv_reserve(gr_cpu *cpu, size_t bytes) {
    if (cpu->conv_path == GR_CONV_REF) return gr_conv_col_grow(cpu, (bytes + sizeof(float) - 1) / sizeof(float), true);
    return gr_cpu_conv_onednn_reserve(cpu, bytes);
}

void gr_cpu_conv(const gr_kargs *a) {
    gr_cpu *cpu = gr_cpu_of(a);
    gr_conv_store t;
    gr_conv_shape s = gr_conv_call(a, GR_CONV_FWD, &t);
    const float *b = a->node->nin > 2 ? a->in[2] : NULL;
    if (cpu->conv_path == GR_CONV_REF) gr_cpu_conv_ref_fwd(cpu, &s, a->in[0], a->in[1], b, a->out[0]);
    else gr_cpu_conv_onednn_fwd_as(cpu, &s, &t, a->in[0], a->in[1], b, a->out[0]);
}

void gr_cpu_conv_bwd_data(const gr_kargs *a) {
    gr_cpu *cpu = gr_cpu_of(a);
    gr_conv_store t;
    gr_conv_shape s = gr_conv_call(a, GR_CONV_BWD_DATA, &t);
    if (cpu->conv_path == GR_CONV_REF) gr_cpu_conv_ref_bwd_data(cpu, &s, a->in[0], a->in[1], a->out[0]);
    else gr_cpu_conv_onednn_bwd_data_as(cpu, &s, &t, a->in[0], a->in[1], a->out[0]);
}

void gr_cpu_conv_bwd_params(const gr_kargs *a) {
    gr_cpu *cpu = gr_cpu_of(a);
    gr_conv_store t;
    gr_conv_shape s = gr_conv_call(a, GR_CONV_BWD_WEIGHTS, &t);
    float *db = a->node->nout > 1 ? a->out[1] : NULL;
    if (cpu->conv_path == GR_CONV_REF) gr_cpu_conv_ref_bwd_params(cpu, &s, a->in[0], a->in[1], a->out[0], db);
    else gr_cpu_conv_onednn_bwd_params_as(cpu, &s, &t, a->in[0], a->in[1], a->out[0], db);
}
