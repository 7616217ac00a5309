/* body_embed.h — bodies of the embedding family's kernels
 * (kernels/cuda/embed.cu; graph/op_embed.c): the token embedding's gather
 * and its scatter-add backward, the positional embedding's broadcast add
 * and its sum over the batch.
 *
 * Determinism: every weight-gradient element is owned by one thread, which
 * adds its terms in one fixed order (embedding: the tokens in order;
 * pos_embedding: the samples in order), so there are no float atomics and
 * the result does not depend on the grid or the thread count. The CPU
 * kernels (kernels/cpu/embed.c) add the same terms in the same order and
 * types; tests/ops/test_op_embed.c sweeps these bodies against them, bit
 * for bit. fp32 storage only (the rows' backend columns take no half: mixed
 * precision stages them). */
#ifndef GR_BODY_EMBED_H
#define GR_BODY_EMBED_H

#include <math.h>
#include <stdint.h>

#include "body.h"

/* Whether id is a row of a [vocab, dim] weight. */
GR_HD int gr_embed_id_ok(int32_t id, int64_t vocab) { return id >= 0 && (int64_t)id < vocab; }

/* y[i] of the gather, i over tokens x dim: weight[ids[t], j], or NaN for
 * an id outside [0, vocab) (its whole row). */
GR_HD void gr_body_embedding(const int32_t *ids, const float *w, float *y, int64_t vocab, int64_t dim, int64_t i) {
    const int64_t t = i / dim, j = i - t * dim;
    const int32_t id = ids[t];
    y[i] = gr_embed_id_ok(id, vocab) ? w[(int64_t)id * dim + j] : NAN;
}

/* The backward of column j, rows id with id % parts == part: dw[id, j] +=
 * dy[t, j] for every token t of that id, t in order (ids outside the
 * weight add nothing: their forward row was NaN already). The thread of
 * (part, j) owns those elements of dw, so any split into parts gives the
 * same sums. */
GR_HD void gr_body_embedding_bwd(const int32_t *ids, const float *dy, float *dw, int64_t ntok, int64_t vocab,
                                 int64_t dim, int64_t parts, int64_t part, int64_t j) {
    for (int64_t t = 0; t < ntok; t++) {
        const int32_t id = ids[t];
        if (gr_embed_id_ok(id, vocab) && (int64_t)id % parts == part) dw[(int64_t)id * dim + j] += dy[t * dim + j];
    }
}

/* y[i] = x[i] + w[i mod T*C], i over [n, T, C]: the first T rows of the
 * [max_len, C] weight, one per position, broadcast over the batch. */
GR_HD void gr_body_pos_embedding(const float *x, const float *w, float *y, int64_t tc, int64_t i) {
    y[i] = x[i] + w[i % tc];
}

/* dw[k] += the sum over the n samples of dy[b, k], k over T*C: summed in
 * double from sample 0 up, added to dw once. */
GR_HD void gr_body_pos_embedding_bwd(const float *dy, float *dw, int64_t n, int64_t tc, int64_t k) {
    double s = 0.0;
    for (int64_t b = 0; b < n; b++) s += (double)dy[b * tc + k];
    dw[k] += (float)s;
}

#endif
