/* attn.c — the CPU kernels of attention (graph/op_attn.c; the formulas:
 * kernels/body_attn.h). Fused and blocked, with an online softmax: a block
 * of GR_ATTN_BQ query rows meets the keys GR_ATTN_BK at a time, its scores
 * a BQ x BK tile that is used and dropped, so neither pass holds a T x T
 * matrix; backward recomputes the tiles from qkv and the saved lse. Each
 * (sample, head) is one task on the OpenMP threads, its sums in a fixed
 * order: results do not depend on the thread count. exp is body_vmath.h's
 * (vectorized), and a task's loops are built for AVX-512 and AVX2 too
 * (GR_ISA_CLONES: none of them reassociates a sum, so the bits are the same). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../body_attn.h"
#include "../body_vmath.h"
#include "cpu_kernels.h"

#define GR_ATTN_BQ 32
#define GR_ATTN_BK 64

/* One thread's tiles: the query block (scaled) and its accumulators, a key
 * block transposed, the score tile and, in backward, dy's block, v
 * transposed and the dq accumulators. */
typedef struct attn_tiles {
    float q[GR_ATTN_BQ * GR_ATTN_MAX_HEAD], acc[GR_ATTN_BQ * GR_ATTN_MAX_HEAD];
    float kt[GR_ATTN_MAX_HEAD * GR_ATTN_BK], vt[GR_ATTN_MAX_HEAD * GR_ATTN_BK];
    float dy[GR_ATTN_BQ * GR_ATTN_MAX_HEAD];
    float s[GR_ATTN_BQ * GR_ATTN_BK], dp[GR_ATTN_BQ * GR_ATTN_BK];
    float m[GR_ATTN_BQ], l[GR_ATTN_BQ];
} attn_tiles;

/* The geometry of qkv, the forward's input. */
static gr_attn_geo attn_geo(const gr_kargs *a, const gr_tensor *x) {
    return gr_attn_geo_of(x->shape[1], x->shape[2], a->node->attrs.heads, a->node->attrs.causal);
}

/* q rows [i0, i0+nq) of head h, times scale, into t->q (row stride d). */
static void attn_load_q(attn_tiles *t, const float *qkv, const gr_attn_geo *g, int64_t b, int64_t h, int64_t i0,
                        int64_t nq) {
    for (int64_t r = 0; r < nq; r++) {
        const float *q = qkv + gr_attn_qkv_at(g, b, i0 + r, h, 0);
        for (int64_t e = 0; e < g->d; e++) t->q[r * g->d + e] = q[e] * g->scale;
    }
}

/* Part (1: k, 2: v) of rows [j0, j0+nk) transposed into dst [d][BK], the
 * columns past nk zero (attn_tile multiplies whole rows of BK). */
static void attn_load_t(float *dst, const float *qkv, const gr_attn_geo *g, int64_t b, int64_t h, int64_t j0,
                        int64_t nk, int part) {
    for (int64_t c = 0; c < nk; c++) {
        const float *k = qkv + gr_attn_qkv_at(g, b, j0 + c, h, part);
        for (int64_t e = 0; e < g->d; e++) dst[e * GR_ATTN_BK + c] = k[e];
    }
    if (nk < GR_ATTN_BK)
        for (int64_t e = 0; e < g->d; e++) memset(dst + e * GR_ATTN_BK + nk, 0, (size_t)(GR_ATTN_BK - nk) * sizeof *dst);
}

#if defined(__GNUC__)
/* out[r][c] = sum_e a[r][e] * bt[e][c] over nq rows and all BK columns (bt's
 * past the tile's keys are zero), in GCC's vector types: two rows at a time
 * keep their 2 x 64 sums in registers over the e loop, where the scalar
 * loop (#else) stores and reloads a row's sums every e. The same sums in
 * the same order: the same bits. */
typedef float attn_v16 __attribute__((vector_size(64)));
_Static_assert(GR_ATTN_BK == 64, "attn_tile's vector loop is written for tiles of 64 keys");

/* (a macro: a function returning a 64-byte vector is an ABI the baseline build warns of) */
#define ATTN_VLOAD(v, p) memcpy(&(v), (p), sizeof(v))

/* always inlined, so each of the callers' ISA clones gets its own build */
__attribute__((always_inline)) static inline void attn_tile(float *out, const float *a, const float *bt, int64_t d,
                                                            int64_t nq, int64_t nk) {
    (void)nk;
    int64_t r = 0;
    for (; r + 2 <= nq; r += 2) {
        attn_v16 s0[4] = {0}, s1[4] = {0};
        const float *a0 = a + r * d, *a1 = a0 + d;
        for (int64_t e = 0; e < d; e++) {
            const float *bv = bt + e * GR_ATTN_BK;
            for (int k = 0; k < 4; k++) {
                attn_v16 bk;
                ATTN_VLOAD(bk, bv + 16 * k);
                s0[k] += a0[e] * bk;
                s1[k] += a1[e] * bk;
            }
        }
        memcpy(out + r * GR_ATTN_BK, s0, sizeof s0);
        memcpy(out + (r + 1) * GR_ATTN_BK, s1, sizeof s1);
    }
    for (; r < nq; r++) {
        attn_v16 s0[4] = {0};
        for (int64_t e = 0; e < d; e++)
            for (int k = 0; k < 4; k++) {
                attn_v16 bk;
                ATTN_VLOAD(bk, bt + e * GR_ATTN_BK + 16 * k);
                s0[k] += a[r * d + e] * bk;
            }
        memcpy(out + r * GR_ATTN_BK, s0, sizeof s0);
    }
}
#else
/* out[r][c] = sum_e a[r][e] * bt[e][c] over an nq x nk tile. */
static void attn_tile(float *out, const float *a, const float *bt, int64_t d, int64_t nq, int64_t nk) {
    for (int64_t r = 0; r < nq; r++) {
        float *o = out + r * GR_ATTN_BK;
        for (int64_t c = 0; c < nk; c++) o[c] = 0.0f;
        for (int64_t e = 0; e < d; e++) {
            const float av = a[r * d + e];
            const float *bv = bt + e * GR_ATTN_BK;
            #pragma omp simd
            for (int64_t c = 0; c < nk; c++) o[c] += av * bv[c];
        }
    }
}
#endif

/* The keys of tile [j0, j0+nk) that query i sees: [j0, j0 + the result).
 * Keys after the query are skipped, never multiplied by a zero weight, so
 * what follows position i cannot reach its row (not even as NaN). */
static int64_t attn_seen(const gr_attn_geo *g, int64_t i, int64_t j0, int64_t nk) {
    if (!g->causal) return nk;
    const int64_t n = i - j0 + 1;
    return n < 0 ? 0 : n < nk ? n : nk;
}

/* The keys query block [i0, i0+nq) sees: [0, keys). */
static int64_t attn_block_keys(const gr_attn_geo *g, int64_t i0, int64_t nq) { return g->causal ? i0 + nq : g->t; }

GR_ISA_CLONES static void attn_fwd_head(attn_tiles *t, const float *qkv, float *y, float *lse,
                                        const gr_attn_geo *g, int64_t b, int64_t h) {
    const int64_t d = g->d;
    for (int64_t i0 = 0; i0 < g->t; i0 += GR_ATTN_BQ) {
        const int64_t nq = g->t - i0 < GR_ATTN_BQ ? g->t - i0 : GR_ATTN_BQ, keys = attn_block_keys(g, i0, nq);
        attn_load_q(t, qkv, g, b, h, i0, nq);
        memset(t->acc, 0, (size_t)(nq * d) * sizeof *t->acc);
        for (int64_t r = 0; r < nq; r++) t->m[r] = -INFINITY, t->l[r] = 0.0f;
        for (int64_t j0 = 0; j0 < keys; j0 += GR_ATTN_BK) {
            const int64_t nk = keys - j0 < GR_ATTN_BK ? keys - j0 : GR_ATTN_BK;
            attn_load_t(t->kt, qkv, g, b, h, j0, nk, 1);
            attn_tile(t->s, t->q, t->kt, d, nq, nk);
            for (int64_t r = 0; r < nq; r++) {
                const int64_t seen = attn_seen(g, i0 + r, j0, nk);
                if (seen == 0) continue;
                float *s = t->s + r * GR_ATTN_BK, mx = t->m[r], sum = 0.0f;
                for (int64_t c = 0; c < seen; c++) mx = s[c] > mx ? s[c] : mx;
                const float corr = gr_vexpf(t->m[r] - mx); /* 0 for the first block: m was -inf */
                #pragma omp simd
                for (int64_t c = 0; c < seen; c++) s[c] = gr_vexpf(s[c] - mx);
                for (int64_t c = 0; c < seen; c++) sum += s[c];
                t->l[r] = t->l[r] * corr + sum;
                t->m[r] = mx;
                float *acc = t->acc + r * d;
                for (int64_t e = 0; e < d; e++) acc[e] *= corr;
                for (int64_t c = 0; c < seen; c++) {
                    const float p = s[c], *v = qkv + gr_attn_qkv_at(g, b, j0 + c, h, 2);
                    #pragma omp simd
                    for (int64_t e = 0; e < d; e++) acc[e] += p * v[e];
                }
            }
        }
        for (int64_t r = 0; r < nq; r++) {
            float *yr = y + gr_attn_y_at(g, b, i0 + r, h);
            const float inv = 1.0f / t->l[r];
            for (int64_t e = 0; e < d; e++) yr[e] = t->acc[r * d + e] * inv;
            lse[gr_attn_row_at(g, b, h, i0 + r)] = t->m[r] + logf(t->l[r]);
        }
    }
}

/* A decoding graph's step (gr_graph.decode_len): one position against the
 * cache, a (sample, head) a task, each the body the CUDA kernel runs. */
static void attn_decode(const gr_kargs *a, const gr_attn_geo *g) {
    const int64_t tasks = a->n * g->heads, tmax = a->g->decode_len, pos = a->ctx->pos;
    GR_ASSERT(pos >= 0 && pos < tmax);
    #pragma omp parallel for if (tasks > 1)
    for (int64_t k = 0; k < tasks; k++)
        gr_body_attn_decode(a->in[0], a->out[2], a->out[0], a->out[1], g, tmax, pos, k / g->heads, k % g->heads);
}

void gr_cpu_attention(const gr_kargs *a) {
    const gr_attn_geo g = attn_geo(a, a->tin[0]);
    if (a->g && a->g->decode_len > 0) {
        attn_decode(a, &g);
        return;
    }
    const float *qkv = a->in[0];
    float *y = a->out[0], *lse = a->out[1];
    const int64_t tasks = a->n * g.heads;
    #pragma omp parallel
    {
        attn_tiles *t = malloc(sizeof *t);
        GR_ASSERT(t);
        #pragma omp for schedule(dynamic, 1)
        for (int64_t k = 0; k < tasks; k++) attn_fwd_head(t, qkv, y, lse, &g, k / g.heads, k % g.heads);
        free(t);
    }
}

/* Backward's operands: dy, qkv, y, lse in; dqkv, delta out. */
typedef struct attn_bwd_io {
    const float *dy, *qkv, *lse;
    float *dqkv, *delta;
} attn_bwd_io;

/* For query block [i0, i0+nq) and key block [j0, j0+nk) (tiles loaded: q
 * scaled, dy, k and v transposed): p into t->s, ds into t->dp; dq's sums
 * into t->acc, dk's and dv's straight into dqkv. */
__attribute__((always_inline)) static inline void attn_bwd_tile(attn_tiles *t, const attn_bwd_io *io,
                                                                const gr_attn_geo *g, int64_t b, int64_t h,
                                                                int64_t i0, int64_t nq, int64_t j0, int64_t nk) {
    const int64_t d = g->d;
    attn_tile(t->s, t->q, t->kt, d, nq, nk);
    attn_tile(t->dp, t->dy, t->vt, d, nq, nk);
    for (int64_t r = 0; r < nq; r++) {
        const int64_t row = gr_attn_row_at(g, b, h, i0 + r), seen = attn_seen(g, i0 + r, j0, nk);
        const float li = io->lse[row], dl = io->delta[row];
        float *s = t->s + r * GR_ATTN_BK, *dp = t->dp + r * GR_ATTN_BK, *acc = t->acc + r * d;
        #pragma omp simd
        for (int64_t c = 0; c < seen; c++) {
            s[c] = gr_vexpf(s[c] - li);
            dp[c] = s[c] * (dp[c] - dl);
        }
        for (int64_t c = 0; c < seen; c++) {
            const float ds = dp[c], *k = io->qkv + gr_attn_qkv_at(g, b, j0 + c, h, 1);
            #pragma omp simd
            for (int64_t e = 0; e < d; e++) acc[e] += ds * k[e];
        }
    }
    for (int64_t c = 0; c < nk; c++) {
        float *dk = io->dqkv + gr_attn_qkv_at(g, b, j0 + c, h, 1), *dv = io->dqkv + gr_attn_qkv_at(g, b, j0 + c, h, 2);
        /* the queries that see key j0 + c: from it on when causal */
        const int64_t r0 = g->causal && j0 + c > i0 ? j0 + c - i0 : 0;
        for (int64_t r = r0; r < nq; r++) {
            const float ds = t->dp[r * GR_ATTN_BK + c], p = t->s[r * GR_ATTN_BK + c];
            const float *q = t->q + r * d, *dyr = t->dy + r * d; /* q is scaled: dk = scale sum ds q */
            #pragma omp simd
            for (int64_t e = 0; e < d; e++) {
                dk[e] += ds * q[e];
                dv[e] += p * dyr[e];
            }
        }
    }
}

GR_ISA_CLONES static void attn_bwd_head(attn_tiles *t, const attn_bwd_io *io, const float *y,
                                        const gr_attn_geo *g, int64_t b, int64_t h) {
    const int64_t d = g->d;
    for (int64_t i = 0; i < g->t; i++) {
        io->delta[gr_attn_row_at(g, b, h, i)] =
            gr_attn_dot(io->dy + gr_attn_y_at(g, b, i, h), y + gr_attn_y_at(g, b, i, h), d);
        memset(io->dqkv + gr_attn_qkv_at(g, b, i, h, 1), 0, (size_t)d * sizeof(float));
        memset(io->dqkv + gr_attn_qkv_at(g, b, i, h, 2), 0, (size_t)d * sizeof(float));
    }
    for (int64_t i0 = 0; i0 < g->t; i0 += GR_ATTN_BQ) {
        const int64_t nq = g->t - i0 < GR_ATTN_BQ ? g->t - i0 : GR_ATTN_BQ, keys = attn_block_keys(g, i0, nq);
        attn_load_q(t, io->qkv, g, b, h, i0, nq);
        for (int64_t r = 0; r < nq; r++)
            memcpy(t->dy + r * d, io->dy + gr_attn_y_at(g, b, i0 + r, h), (size_t)d * sizeof(float));
        memset(t->acc, 0, (size_t)(nq * d) * sizeof *t->acc);
        for (int64_t j0 = 0; j0 < keys; j0 += GR_ATTN_BK) {
            const int64_t nk = keys - j0 < GR_ATTN_BK ? keys - j0 : GR_ATTN_BK;
            attn_load_t(t->kt, io->qkv, g, b, h, j0, nk, 1);
            attn_load_t(t->vt, io->qkv, g, b, h, j0, nk, 2);
            attn_bwd_tile(t, io, g, b, h, i0, nq, j0, nk);
        }
        for (int64_t r = 0; r < nq; r++) {
            float *dq = io->dqkv + gr_attn_qkv_at(g, b, i0 + r, h, 0);
            for (int64_t e = 0; e < d; e++) dq[e] = t->acc[r * d + e] * g->scale;
        }
    }
}

void gr_cpu_attention_bwd(const gr_kargs *a) {
    const gr_attn_geo g = attn_geo(a, a->tin[1]);
    attn_bwd_io io = {a->in[0], a->in[1], a->in[3], a->out[0], a->out[1]};
    const float *y = a->in[2];
    const int64_t tasks = a->n * g.heads;
    #pragma omp parallel
    {
        attn_tiles *t = malloc(sizeof *t);
        GR_ASSERT(t);
        #pragma omp for schedule(dynamic, 1)
        for (int64_t k = 0; k < tasks; k++) attn_bwd_head(t, &io, y, &g, k / g.heads, k % g.heads);
        free(t);
    }
}
