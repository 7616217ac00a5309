/* body_loss.h — bodies of the CUDA kernels (kernels/cuda/loss.cu) of mse,
 * bce with logits and the accuracy metric (graph/op_loss.c); softmax
 * cross-entropy's are in body_elem.h. The per-element and per-row rules
 * are loss_math.h's, shared with the CPU kernels (kernels/cpu/loss.c).
 *
 * The forward kernels reduce to [sum, count] in a fixed order: a grid of
 * gr_loss_blocks(units) blocks of GR_LOSS_THREADS threads; thread t of
 * block b takes units u = b*T + t, u + B*T, ... (gr_body_loss_unit adds each
 * to its (sum, count) in that order); a block adds its threads' pairs in a
 * shared-memory tree (gr_loss_tree_pairs: at stride s = T/2, T/4, ..., 1
 * thread i < s adds i + s); part[2b], part[2b+1] get the block's pair, and
 * gr_body_sce_stats (body_elem.h) adds the blocks in order into the stats.
 * tests/ops/test_op_loss.c runs that schedule on the CPU against the CPU kernels. */
#ifndef GR_BODY_LOSS_H
#define GR_BODY_LOSS_H

#include <stdint.h>

#include "body.h"
#include "../graph/ops.h"
#include "loss_math.h"

#define GR_LOSS_THREADS 256
#define GR_LOSS_MAX_BLOCKS 128

/* blocks for units (elements, or rows of the metric), at least 1 */
GR_HD int64_t gr_loss_blocks(int64_t units) {
    int64_t b = (units + GR_LOSS_THREADS - 1) / GR_LOSS_THREADS;
    return b < 1 ? 1 : b > GR_LOSS_MAX_BLOCKS ? GR_LOSS_MAX_BLOCKS : b;
}

/* What a forward reduction reads: the prediction x, the target (fp32 for
 * mse and bce, int32 classes for accuracy), and for accuracy the columns k
 * of a row, top_k, ignore_index and the classes among the columns
 * (gr_loss_classes: the first kc; the rest, padding, never rank). */
typedef struct gr_loss_in {
    const float *x;
    const void *t;
    int64_t k, top_k, ignore, kc;
} gr_loss_in;

/* Adds unit u to (sum, count): op GR_OP_MSE or GR_OP_BCE_WITH_LOGITS:
 * element u's loss and 1; GR_OP_ACCURACY: row u's hit and 1, unless its
 * target is ignored. The kernels pass op as a template constant. */
GR_HD void gr_body_loss_unit(int op, const gr_loss_in *in, int64_t u, double *sum, double *count) {
    switch (op) {
    case GR_OP_MSE: *sum += gr_mse_term(in->x[u], ((const float *)in->t)[u]); *count += 1.0; break;
    case GR_OP_BCE_WITH_LOGITS: *sum += gr_bce_term(in->x[u], ((const float *)in->t)[u]); *count += 1.0; break;
    case GR_OP_ACCURACY: {
        int32_t y = ((const int32_t *)in->t)[u];
        if (gr_loss_ignored(y, in->ignore)) break;
        *sum += (double)gr_topk_hit(in->x + u * in->k, in->kc, y, in->top_k);
        *count += 1.0;
        break;
    }
    default: *sum += NAN; break;
    }
}

/* One level of a block's tree: pair i += pair i + s (a thread's step; the
 * kernel runs i < s in parallel between barriers). */
GR_HD void gr_loss_tree_pairs(double *sum, double *count, int i, int s) {
    sum[i] += sum[i + s];
    count[i] += count[i + s];
}

/* dx[i] of mse or bce with factor s (gr_loss_elem_scale) */
GR_HD void gr_body_loss_bwd(int op, const float *x, const float *t, float *dx, float s, int64_t i) {
    dx[i] = op == GR_OP_MSE ? gr_mse_grad(x[i], t[i], s) : gr_bce_grad(x[i], t[i], s);
}

#endif
