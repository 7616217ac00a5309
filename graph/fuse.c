/* fuse.c — fusions as graph rewrites (gr_graph_fuse, graph.h). Pure
 * planning: node attributes, the folded flag and tensor aliases.
 *
 * batchnorm + relu. Forward: a batchnorm B whose output y only a relu R
 * reads writes relu(y) into y (B.attrs.relu); R folds (no kernel) and its
 * output becomes a view of y, so the pair makes one pass over memory
 * instead of two and y's bytes serve both. Backward: the relu's backward RB
 * reads (dy, relu output) and writes dx, which only B's backward BB reads;
 * RB folds, dx becomes a view of dy, and BB masks dy by B's output (its
 * in[4]: y <= 0 gives 0, the relu backward's rule). BB reads y where RB did,
 * and RB's pass over memory is gone. Under recomputation the pairs are the
 * copies (they run in the backward pass): B's output then is the copy's.
 *
 * add + relu. The same forward fusion after an add whose inputs all have
 * its shape (a residual's): the add writes relu(sum). The relu's backward
 * stays, reading that output (the add's backward is a view: nothing to
 * fold it into).
 *
 * dense + relu. The same forward fusion after a dense: it relus its output
 * in place while the GEMM's rows are in cache, where the relu node read
 * them and wrote a tensor of its own. The relu's backward stays (the
 * dense's backward reads its dy through GEMMs, which cannot mask it).
 *
 * relu backward into the dense backward before it. A relu's backward RB
 * whose dy is a dense backward's dx D alone reads (the relu's output was
 * that dense's input: an MLP's dense, relu, dense) folds into D: D masks
 * the dx it wrote by the relu's output (its in[2], attrs.relu) while the
 * rows are in cache, and RB's dx becomes a view of D's; one pass over
 * memory and one tensor fewer. Any relu qualifies (fused forward or not).
 *
 * relu backward into a sum of gradients. A relu's backward whose dy is
 * autodiff's sum of partial gradients S alone reads (a residual block's
 * output relu, read by the next block's conv and its skip add) folds into
 * S: the add takes the relu's output as a last input that it does not add
 * but masks the sum by (attrs.relu_mask), and RB's dx becomes a view of
 * S's output. The sum is rounded as before, then masked: the same bits.
 *
 * The rewrite keeps every value the unfused pair computes (the kernels
 * round relu(y) as the relu kernel does), so the results are bit for bit
 * the same. A pair is left alone where another node (or the runner: the
 * logits) reads what would become a view or its source, where a tensor is
 * already a view, or where the storage types differ. */
#include "graph.h"

#include <stdlib.h>
#include <string.h>

/* Per tensor, gathered once (the pass stays linear in the graph's size): how many nodes read it,
 * the last of them, and the node whose out[0] it is (-1 none). The rewrites add a reader (a
 * batchnorm backward's in[4]) only to tensors whose readers no later decision counts. */
typedef struct gr_fuse_ix {
    int *readers, *last, *producer;
} gr_fuse_ix;

static void gr_fuse_ix_init(const gr_graph *g, gr_fuse_ix *ix) {
    const size_t n = (size_t)(g->n_tensors ? g->n_tensors : 1);
    ix->readers = gr_xcalloc(n, sizeof *ix->readers);
    ix->last = gr_xmalloc(n * sizeof *ix->last);
    ix->producer = gr_xmalloc(n * sizeof *ix->producer);
    for (int t = 0; t < g->n_tensors; t++) ix->last[t] = ix->producer[t] = -1;
    for (int i = 0; i < g->n_nodes; i++) {
        const gr_node *nd = &g->nodes[i];
        for (int k = 0; k < nd->nin; k++) {
            bool again = false; /* a node reading t twice counts once */
            for (int q = 0; q < k; q++) again |= nd->in[q] == nd->in[k];
            if (again) continue;
            ix->readers[nd->in[k]]++;
            ix->last[nd->in[k]] = i;
        }
        if (nd->nout > 0 && ix->producer[nd->out[0]] < 0) ix->producer[nd->out[0]] = i;
    }
}

static void gr_fuse_ix_free(gr_fuse_ix *ix) {
    free(ix->readers);
    free(ix->last);
    free(ix->producer);
}

/* Whether tensor b may become a view of a (itself a view or not): b is none yet, one storage type. */
static bool gr_fuse_viewable(const gr_graph *g, int a, int b) {
    const gr_tensor *x = &g->tensors[a], *y = &g->tensors[b];
    return y->alias_of < 0 && x->elem == y->elem && x->kind == GR_TK_ACT && y->kind == GR_TK_ACT;
}

/* Whether every input of add node a has its output's shape (no broadcast). */
static bool gr_fuse_same_shapes(const gr_graph *g, const gr_node *a) {
    const gr_tensor *y = &g->tensors[a->out[0]];
    for (int k = 0; k < a->nin; k++) {
        const gr_tensor *x = &g->tensors[a->in[k]];
        if (x->ndim != y->ndim || x->batched != y->batched ||
            memcmp(x->shape, y->shape, (size_t)y->ndim * sizeof *y->shape) != 0)
            return false;
    }
    return true;
}

/* batchnorm (or add of equal shapes) node b and the relu that alone reads its output: fused */
static bool gr_fuse_relu_fwd(gr_graph *g, const gr_fuse_ix *ix, int b, unsigned what) {
    gr_node *bn = &g->nodes[b];
    const bool ok = (bn->op == GR_OP_BATCHNORM && (what & GR_FUSE_BN_RELU)) ||
                    (bn->op == GR_OP_ADD && (what & GR_FUSE_ADD_RELU) && b < g->n_forward &&
                     gr_fuse_same_shapes(g, bn)) ||
                    (bn->op == GR_OP_DENSE && (what & GR_FUSE_DENSE_RELU) && b < g->n_forward);
    if (!ok || bn->attrs.relu || bn->out[0] == g->logits || ix->readers[bn->out[0]] != 1) return false;
    gr_node *relu = &g->nodes[ix->last[bn->out[0]]];
    if (relu->op != GR_OP_RELU || relu->folded || relu->in[0] != bn->out[0] ||
        !gr_fuse_viewable(g, bn->out[0], relu->out[0]))
        return false;
    bn->attrs.relu = true;
    relu->folded = true;
    g->tensors[relu->out[0]].alias_of = bn->out[0];
    return true;
}

/* relu_bwd node k, whose relu output is a fused batchnorm's and whose dx
 * only that batchnorm's backward reads: folded into it */
static void gr_fuse_bn_relu_bwd(gr_graph *g, const gr_fuse_ix *ix, int k) {
    const gr_node *rb = &g->nodes[k];
    int y = rb->in[1];
    while (g->tensors[y].alias_of >= 0) y = g->tensors[y].alias_of;
    const int b = ix->producer[y];
    if (b < 0 || g->nodes[b].op != GR_OP_BATCHNORM || !g->nodes[b].attrs.relu) return;
    if (ix->readers[rb->out[0]] != 1) return;
    gr_node *bwd = &g->nodes[ix->last[rb->out[0]]];
    if (bwd->op != GR_OP_BATCHNORM_BWD || bwd->attrs.relu || bwd->in[0] != rb->out[0] || bwd->nin != 4 ||
        bwd->in[3] != g->nodes[b].out[1] || !gr_fuse_viewable(g, rb->in[0], rb->out[0]))
        return;
    g->tensors[rb->out[0]].alias_of = rb->in[0];
    bwd->in[4] = y;
    bwd->nin = 5;
    bwd->attrs.relu = true;
    g->nodes[k].folded = true;
}

/* relu_bwd node k whose dy only a dense_bwd_data writes and nothing else reads: folded into it */
static void gr_fuse_dense_relu_bwd(gr_graph *g, const gr_fuse_ix *ix, int k) {
    const gr_node *rb = &g->nodes[k];
    const int dy = rb->in[0], d = ix->producer[dy];
    if (d < 0 || ix->readers[dy] != 1 || dy == g->logits) return;
    gr_node *bd = &g->nodes[d];
    if (bd->op != GR_OP_DENSE_BWD_DATA || bd->attrs.relu || bd->nin != 2 || bd->out[0] != dy ||
        g->tensors[rb->in[1]].elem != g->tensors[dy].elem || !gr_fuse_viewable(g, dy, rb->out[0]))
        return;
    g->tensors[rb->out[0]].alias_of = dy;
    bd->in[2] = rb->in[1];
    bd->nin = 3;
    bd->attrs.relu = true;
    g->nodes[k].folded = true;
}

/* relu_bwd node k whose dy only an add of equal shapes in the backward pass (a sum of gradients)
 * writes and nothing else reads: folded into it */
static void gr_fuse_sum_relu_bwd(gr_graph *g, const gr_fuse_ix *ix, int k) {
    const gr_node *rb = &g->nodes[k];
    const int dy = rb->in[0], s = ix->producer[dy], y = rb->in[1];
    if (s < g->n_forward || ix->readers[dy] != 1 || dy == g->logits) return;
    gr_node *sum = &g->nodes[s];
    if (sum->op != GR_OP_ADD || sum->attrs.relu || sum->attrs.relu_mask || sum->nin < 2 || sum->nin >= GR_MAX_IN ||
        sum->out[0] != dy || !gr_fuse_same_shapes(g, sum) || !gr_fuse_viewable(g, dy, rb->out[0]))
        return;
    for (int i = 0; i < sum->nin; i++)
        if (g->tensors[sum->in[i]].elem != g->tensors[dy].elem) return;
    const gr_tensor *yt = &g->tensors[y], *st = &g->tensors[dy];
    if (yt->elem != st->elem || yt->ndim != st->ndim || memcmp(yt->shape, st->shape, (size_t)st->ndim * sizeof *st->shape))
        return;
    g->tensors[rb->out[0]].alias_of = dy;
    sum->in[sum->nin++] = y;
    sum->attrs.relu_mask = true;
    g->nodes[k].folded = true;
}

int gr_graph_fuse(gr_graph *g, unsigned what) {
    if (!what) return 0;
    gr_fuse_ix ix;
    gr_fuse_ix_init(g, &ix);
    int n = 0;
    for (int i = 0; i < g->n_nodes; i++) n += gr_fuse_relu_fwd(g, &ix, i, what);
    for (int i = 0; i < g->n_nodes && (what & GR_FUSE_BN_RELU); i++)
        if (g->nodes[i].op == GR_OP_RELU_BWD && !g->nodes[i].folded) gr_fuse_bn_relu_bwd(g, &ix, i);
    for (int i = 0; i < g->n_nodes && (what & GR_FUSE_DENSE_RELU_BWD); i++)
        if (g->nodes[i].op == GR_OP_RELU_BWD && !g->nodes[i].folded) gr_fuse_dense_relu_bwd(g, &ix, i);
    for (int i = 0; i < g->n_nodes && (what & GR_FUSE_SUM_RELU_BWD); i++)
        if (g->nodes[i].op == GR_OP_RELU_BWD && !g->nodes[i].folded) gr_fuse_sum_relu_bwd(g, &ix, i);
    gr_fuse_ix_free(&ix);
    return n;
}
