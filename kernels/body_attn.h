/* body_attn.h — attention's per-row work as host/device bodies
 * (graph/op_attn.c): the CUDA kernels run one body per query or key row,
 * and tests/ops/test_op_attn.c sweeps them against the CPU kernel, whose
 * blocked loops (kernels/cpu/attn.c) compute the same sums in another order.
 *
 * qkv [n, T, 3C], y and dy [n, T, C], lse and delta [n, heads, T]; head h
 * of row (b, i) is D = C / heads columns at h*D of q (qkv's [0, C)), k
 * ([C, 2C)), v ([2C, 3C)) and y. Scores s_ij = q_i . k_j * scale
 * (1/sqrt(D)), over j <= i when causal, else every j.
 *   forward  y_i = sum_j p_ij v_j, p_ij = exp(s_ij - lse_i),
 *            lse_i = log sum_j exp(s_ij) (an online softmax: one pass);
 *   backward delta_i = dy_i . y_i; ds_ij = p_ij (dy_i . v_j - delta_i);
 *            dq_i = scale sum_j ds_ij k_j, dk_j = scale sum_i ds_ij q_i,
 *            dv_j = sum_i p_ij dy_i (p recomputed from q, k and lse).
 * The query-row body writes delta_i and dq_i; the key-row body, run after
 * every query row's, writes dk_j and dv_j: no row adds into another's, so
 * the sums are the same on every run. */
#ifndef GR_BODY_ATTN_H
#define GR_BODY_ATTN_H

#include <math.h>
#include <stdint.h>

#include "body.h"
#include "../graph/ops.h"

typedef struct gr_attn_geo {
    int64_t t, c, heads, d; /* positions, model width, heads, columns a head */
    float scale;            /* 1 / sqrt(d) */
    int32_t causal;
} gr_attn_geo;

GR_HD gr_attn_geo gr_attn_geo_of(int64_t t, int64_t c3, int64_t heads, int causal) {
    gr_attn_geo g;
    g.t = t;
    g.c = c3 / 3;
    g.heads = heads;
    g.d = g.c / heads;
    g.scale = 1.0f / sqrtf((float)g.d);
    g.causal = causal;
    return g;
}

/* Head h's q (part 0), k (1) or v (2) of row (b, i) in qkv. */
GR_HD int64_t gr_attn_qkv_at(const gr_attn_geo *g, int64_t b, int64_t i, int64_t h, int part) {
    return (b * g->t + i) * 3 * g->c + part * g->c + h * g->d;
}
/* Head h of row (b, i) in y or dy. */
GR_HD int64_t gr_attn_y_at(const gr_attn_geo *g, int64_t b, int64_t i, int64_t h) {
    return (b * g->t + i) * g->c + h * g->d;
}
/* Row i of head h of sample b in lse or delta. */
GR_HD int64_t gr_attn_row_at(const gr_attn_geo *g, int64_t b, int64_t h, int64_t i) {
    return (b * g->heads + h) * g->t + i;
}
/* One past the last key query i sees. */
GR_HD int64_t gr_attn_keys(const gr_attn_geo *g, int64_t i) { return g->causal ? i + 1 : g->t; }

GR_HD float gr_attn_dot(const float *a, const float *b, int64_t d) {
    float s = 0.0f;
    for (int64_t e = 0; e < d; e++) s += a[e] * b[e];
    return s;
}

/* Forward of query row i of head h, sample b: y's D columns and lse. */
GR_HD void gr_body_attn_row(const float *qkv, float *y, float *lse, const gr_attn_geo *g, int64_t b, int64_t h,
                            int64_t i) {
    float acc[GR_ATTN_MAX_HEAD];
    const float *q = qkv + gr_attn_qkv_at(g, b, i, h, 0);
    const int64_t d = g->d, keys = gr_attn_keys(g, i);
    for (int64_t e = 0; e < d; e++) acc[e] = 0.0f;
    float m = -INFINITY, l = 0.0f;
    for (int64_t j = 0; j < keys; j++) {
        const float s = gr_attn_dot(q, qkv + gr_attn_qkv_at(g, b, j, h, 1), d) * g->scale;
        const float *v = qkv + gr_attn_qkv_at(g, b, j, h, 2);
        if (s > m) { /* a new maximum: what was summed shrinks by exp(m - s) */
            const float corr = expf(m - s);
            l *= corr;
            for (int64_t e = 0; e < d; e++) acc[e] *= corr;
            m = s;
        }
        const float p = expf(s - m); /* NaN scores fall through here and poison the row */
        l += p;
        for (int64_t e = 0; e < d; e++) acc[e] += p * v[e];
    }
    float *yr = y + gr_attn_y_at(g, b, i, h);
    for (int64_t e = 0; e < d; e++) yr[e] = acc[e] / l;
    lse[gr_attn_row_at(g, b, h, i)] = m + logf(l);
}

/* Backward, query side, row i of head h, sample b: delta_i, and dq_i into
 * dqkv's q columns. */
GR_HD void gr_body_attn_bwd_q(const float *dy, const float *qkv, const float *y, const float *lse, float *delta,
                              float *dqkv, const gr_attn_geo *g, int64_t b, int64_t h, int64_t i) {
    float acc[GR_ATTN_MAX_HEAD];
    const int64_t d = g->d, keys = gr_attn_keys(g, i), r = gr_attn_row_at(g, b, h, i);
    const float *q = qkv + gr_attn_qkv_at(g, b, i, h, 0), *dyr = dy + gr_attn_y_at(g, b, i, h);
    const float dl = gr_attn_dot(dyr, y + gr_attn_y_at(g, b, i, h), d), li = lse[r];
    delta[r] = dl;
    for (int64_t e = 0; e < d; e++) acc[e] = 0.0f;
    for (int64_t j = 0; j < keys; j++) {
        const float *k = qkv + gr_attn_qkv_at(g, b, j, h, 1);
        const float p = expf(gr_attn_dot(q, k, d) * g->scale - li);
        const float ds = p * (gr_attn_dot(dyr, qkv + gr_attn_qkv_at(g, b, j, h, 2), d) - dl);
        for (int64_t e = 0; e < d; e++) acc[e] += ds * k[e];
    }
    float *dq = dqkv + gr_attn_qkv_at(g, b, i, h, 0);
    for (int64_t e = 0; e < d; e++) dq[e] = acc[e] * g->scale;
}

/* Backward, key side, row j of head h, sample b: dk_j and dv_j into dqkv's
 * k and v columns; reads delta, which every query row's body has written. */
GR_HD void gr_body_attn_bwd_kv(const float *dy, const float *qkv, const float *lse, const float *delta, float *dqkv,
                               const gr_attn_geo *g, int64_t b, int64_t h, int64_t j) {
    float dk[GR_ATTN_MAX_HEAD], dv[GR_ATTN_MAX_HEAD];
    const int64_t d = g->d;
    const float *k = qkv + gr_attn_qkv_at(g, b, j, h, 1), *v = qkv + gr_attn_qkv_at(g, b, j, h, 2);
    for (int64_t e = 0; e < d; e++) dk[e] = dv[e] = 0.0f;
    for (int64_t i = g->causal ? j : 0; i < g->t; i++) {
        const int64_t r = gr_attn_row_at(g, b, h, i);
        const float *q = qkv + gr_attn_qkv_at(g, b, i, h, 0), *dyr = dy + gr_attn_y_at(g, b, i, h);
        const float p = expf(gr_attn_dot(q, k, d) * g->scale - lse[r]);
        const float ds = p * (gr_attn_dot(dyr, v, d) - delta[r]) * g->scale;
        for (int64_t e = 0; e < d; e++) {
            dk[e] += ds * q[e];
            dv[e] += p * dyr[e];
        }
    }
    float *dko = dqkv + gr_attn_qkv_at(g, b, j, h, 1), *dvo = dqkv + gr_attn_qkv_at(g, b, j, h, 2);
    for (int64_t e = 0; e < d; e++) {
        dko[e] = dk[e];
        dvo[e] = dv[e];
    }
}

/* Decoding (graph/op_attn.c): head h of sample b at position pos. Its k
 * and v go into cache row pos (cache [n, tmax, 2C]: k in [0, C), v in
 * [C, 2C)), then its q attends to cache rows 0..pos; y and lse are one
 * position [n, 1, C] and [n, heads, 1]. A (b, h) touches only its own
 * columns of the cache. */
GR_HD void gr_body_attn_decode(const float *qkv, float *cache, float *y, float *lse, const gr_attn_geo *g,
                               int64_t tmax, int64_t pos, int64_t b, int64_t h) {
    float acc[GR_ATTN_MAX_HEAD];
    const int64_t d = g->d, c2 = 2 * g->c;
    const float *q = qkv + gr_attn_qkv_at(g, b, 0, h, 0), *kn = q + g->c, *vn = q + 2 * g->c;
    float *row = cache + (b * tmax + pos) * c2 + h * d;
    for (int64_t e = 0; e < d; e++) {
        row[e] = kn[e];
        row[g->c + e] = vn[e];
    }
    for (int64_t e = 0; e < d; e++) acc[e] = 0.0f;
    float m = -INFINITY, l = 0.0f;
    for (int64_t j = 0; j <= pos; j++) {
        const float *k = cache + (b * tmax + j) * c2 + h * d, *v = k + g->c;
        const float s = gr_attn_dot(q, k, d) * g->scale;
        if (s > m) {
            const float corr = expf(m - s);
            l *= corr;
            for (int64_t e = 0; e < d; e++) acc[e] *= corr;
            m = s;
        }
        const float p = expf(s - m);
        l += p;
        for (int64_t e = 0; e < d; e++) acc[e] += p * v[e];
    }
    float *yr = y + b * g->c + h * d;
    for (int64_t e = 0; e < d; e++) yr[e] = acc[e] / l;
    lse[b * g->heads + h] = m + logf(l);
}

#endif
