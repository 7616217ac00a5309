/* embed.c — CPU kernels of the embedding family (graph/op_embed.c):
 * embedding's gather (a NaN row for an id outside the weight) and its
 * scatter-add backward, pos_embedding's broadcast add, its backward's view
 * (nothing to do) and the weight gradient summed over the batch.
 *
 * Both weight gradients are deterministic: each element gets its terms in
 * one order whatever the thread count (the tokens in order; the samples in
 * order), the same sums kernels/body_embed.h computes for the GPU. */
#include <math.h>
#include <omp.h>
#include <string.h>

#include "../body_embed.h"
#include "cpu_kernels.h"

/* y[t, :] = weight[ids[t], :], or NaN when ids[t] is outside [0, vocab) */
void gr_cpu_embedding(const gr_kargs *a) {
    const int32_t *ids = a->in[0];
    const float *w = a->in[1];
    float *y = a->out[0];
    const int64_t ntok = gr_kargs_numel(a, a->tin[0]), vocab = a->tin[1]->shape[0], dim = a->tin[1]->shape[1];
    #pragma omp parallel for if (ntok * dim >= GR_OMP_MIN)
    for (int64_t t = 0; t < ntok; t++) {
        float *row = y + t * dim;
        if (gr_embed_id_ok(ids[t], vocab)) {
            memcpy(row, w + (int64_t)ids[t] * dim, (size_t)dim * sizeof *row);
        } else {
            for (int64_t j = 0; j < dim; j++) row[j] = NAN;
        }
    }
}

/* dw[id, :] += dy[t, :] for every token t, t in order: thread p of P owns
 * the rows id with id % P == p and walks every token (body_embed.h's
 * partition, whose sums do not depend on P) */
void gr_cpu_embedding_bwd(const gr_kargs *a) {
    const float *dy = a->in[0];
    const int32_t *ids = a->in[1];
    float *dw = a->out[0];
    const int64_t ntok = gr_kargs_numel(a, a->tin[1]), vocab = a->tout[0]->shape[0], dim = a->tout[0]->shape[1];
    const int64_t parts = ntok * dim >= GR_OMP_MIN ? GR_MIN((int64_t)omp_get_max_threads(), vocab) : 1;
    #pragma omp parallel for num_threads((int)parts) if (parts > 1)
    for (int64_t p = 0; p < parts; p++)
        for (int64_t t = 0; t < ntok; t++) {
            const int32_t id = ids[t];
            if (!gr_embed_id_ok(id, vocab) || (int64_t)id % parts != p) continue;
            float *restrict r = dw + (int64_t)id * dim;
            const float *restrict g = dy + t * dim;
            for (int64_t j = 0; j < dim; j++) r[j] += g[j];
        }
}

/* y[b, t, c] = x[b, t, c] + weight[t, c] */
void gr_cpu_pos_embedding(const gr_kargs *a) {
    const float *x = a->in[0], *w = a->in[1];
    float *y = a->out[0];
    const int64_t tc = gr_tensor_sample_numel(a->tin[0]), n = a->n;
    if (a->g && a->g->decode_len > 0) w += a->ctx->pos * tc; /* a decoding graph's one position */
    #pragma omp parallel for if (n * tc >= GR_OMP_MIN)
    for (int64_t b = 0; b < n; b++) {
        const float *restrict xr = x + b * tc;
        float *restrict yr = y + b * tc;
        for (int64_t k = 0; k < tc; k++) yr[k] = xr[k] + w[k];
    }
}

/* dx = dy: a view (the plan gives dx dy's storage) */
void gr_cpu_pos_embedding_bwd(const gr_kargs *a) { (void)a; }

/* dw[t, c] += sum over the samples of dy[b, t, c], each element summed in
 * double from sample 0 up (a block of columns at a time, read row by row) */
void gr_cpu_pos_embedding_bwd_params(const gr_kargs *a) {
    enum { BLOCK = 256 };
    const float *dy = a->in[0];
    float *dw = a->out[0];
    const int64_t tc = gr_tensor_sample_numel(a->tin[0]), n = a->n, blocks = (tc + BLOCK - 1) / BLOCK;
    #pragma omp parallel for if (n * tc >= GR_OMP_MIN)
    for (int64_t blk = 0; blk < blocks; blk++) {
        const int64_t k0 = blk * BLOCK, m = GR_MIN((int64_t)BLOCK, tc - k0);
        double s[BLOCK];
        for (int64_t k = 0; k < m; k++) s[k] = 0.0;
        for (int64_t b = 0; b < n; b++) {
            const float *restrict r = dy + b * tc + k0;
            for (int64_t k = 0; k < m; k++) s[k] += (double)r[k];
        }
        for (int64_t k = 0; k < m; k++) dw[k0 + k] += (float)s[k];
    }
}
