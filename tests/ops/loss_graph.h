/* loss_graph.h — a graph of one loss (and the accuracy metric) built by
 * hand, for the tests of the losses the builder does not emit yet (mse,
 * bce with logits, softmax cross-entropy over the last axis of [n, T, C]
 * with ignored tokens): the input batch is the prediction, the target a
 * label tensor (fp32 for mse and bce, int32 classes for cross-entropy),
 * the node's outputs come from the op's infer (graph/op_loss.c). Shared by
 * gradcheck.h, test_op_loss.c (its PyTorch parity dump) and test_cuda_vs_cpu.c. */
#ifndef GR_TEST_LOSS_GRAPH_H
#define GR_TEST_LOSS_GRAPH_H

#include <string.h>

#include "gr_test.h"
#include "exec/exec.h"
#include "graph/graph.h"

/* One loss case: the op, the prediction's per-sample shape (the classes
 * last), label smoothing, every ignore_every-th token's target set to
 * ignore_index (0: none; cross-entropy only), and with metric an accuracy
 * node of top_k on the same logits (cross-entropy only). */
typedef struct gr_lg_case {
    const char *name;
    gr_op op;
    int ndim;
    int64_t shape[3];
    double label_smoothing;
    int64_t ignore_index;
    int ignore_every;
    int64_t top_k;           /* 0: no metric node */
} gr_lg_case;

static inline bool gr_lg_classes(gr_op op) { return op == GR_OP_SOFTMAX_CE; }

/* Builds c's forward graph at micro-batch n (the caller runs gr_autodiff). */
static inline gr_status gr_lg_build(const gr_lg_case *c, int64_t n, gr_graph *g, gr_error *err) {
    memset(g, 0, sizeof *g);
    g->ad_node = -1;
    g->metric_stats = -1;
    g->micro_batch = n;
    int64_t shape[GR_MAX_DIMS] = {n};
    for (int d = 0; d < c->ndim; d++) shape[d + 1] = c->shape[d];
    const bool cls = gr_lg_classes(c->op);
    g->input = gr_graph_add_tensor(g, "input", GR_TK_INPUT, GR_F32, c->ndim + 1, shape, true);
    g->label = gr_graph_add_tensor(g, "label", GR_TK_LABEL, cls ? GR_I32 : GR_F32, cls ? c->ndim : c->ndim + 1, shape,
                                   true);
    g->logits = g->input;
    g->n_classes = c->shape[c->ndim - 1];
    int in[2] = {g->input, g->label};
    int ln = gr_graph_add_node(g, c->op, -1, in, 2, NULL, 0);
    g->nodes[ln].attrs.label_smoothing = c->label_smoothing;
    g->nodes[ln].attrs.ignore_index = c->ignore_index;
    gr_status st = gr_op_impl_of(c->op)->infer(g, ln, NULL, c->name, err);
    if (st) return st;
    const gr_node *nd = &g->nodes[ln];
    g->loss_stats = nd->out[nd->nout - 1];
    g->loss_probs = nd->nout > 1 ? nd->out[0] : -1;
    if (c->top_k > 0) {
        int mn = gr_graph_add_node(g, GR_OP_ACCURACY, -1, in, 2, NULL, 0);
        g->nodes[mn].attrs.top_k = c->top_k;
        g->nodes[mn].attrs.ignore_index = c->ignore_index;
        if ((st = gr_op_impl_of(GR_OP_ACCURACY)->infer(g, mn, NULL, c->name, err))) return st;
        g->metric_stats = g->nodes[mn].out[0];
    }
    g->n_forward = g->n_nodes;
    return GR_OK;
}

/* Elements of the prediction and of the target for n samples. */
static inline int64_t gr_lg_x_numel(const gr_graph *g, int64_t n) {
    return n * gr_tensor_sample_numel(&g->tensors[g->input]);
}
static inline int64_t gr_lg_t_numel(const gr_graph *g, int64_t n) {
    return n * gr_tensor_sample_numel(&g->tensors[g->label]);
}

/* A prediction and target for n samples from key: x uniform in
 * [-spread, spread); mse targets in [-1, 1), bce's in [0, 1] (some exactly 0
 * or 1), classes uniform with every ignore_every-th token ignored. t holds
 * gr_lg_t_numel floats or int32s. */
static inline void gr_lg_fill(const gr_lg_case *c, const gr_graph *g, int64_t n, uint64_t key, float spread, float *x,
                       void *t) {
    const int64_t nx = gr_lg_x_numel(g, n), nt = gr_lg_t_numel(g, n);
    for (int64_t i = 0; i < nx; i++) x[i] = spread * (2.0f * gr_uniform(key, (uint64_t)i) - 1.0f);
    for (int64_t i = 0; i < nt; i++) {
        float u = gr_uniform(gr_hash64(key, 1), (uint64_t)i);
        if (c->op == GR_OP_MSE) ((float *)t)[i] = 2.0f * u - 1.0f;
        else if (c->op == GR_OP_BCE_WITH_LOGITS) ((float *)t)[i] = i % 5 == 0 ? 0.0f : i % 5 == 1 ? 1.0f : u;
        else {
            int32_t y = (int32_t)(gr_hash64(key, 2000u + (uint64_t)i) % (uint64_t)g->n_classes);
            if (c->ignore_every > 0 && i % c->ignore_every == c->ignore_every - 1) y = (int32_t)c->ignore_index;
            ((int32_t *)t)[i] = y;
        }
    }
}

/* Uploads x and t (n samples) into the plan's input and label tensors. */
static inline void gr_lg_upload(gr_plan *p, const gr_graph *g, int64_t n, const float *x, const void *t) {
    gr_backend *be = p->m->be;
    gr_backend_upload(be, gr_plan_ptr(p, g->input), x, (size_t)gr_lg_x_numel(g, n) * sizeof(float));
    gr_backend_upload(be, gr_plan_ptr(p, g->label), t, (size_t)gr_lg_t_numel(g, n) * 4u);
}

/* The run's loss stats (and the metric's, zeros without one) read back. */
static inline void gr_lg_stats(gr_plan *p, const gr_graph *g, float loss[2], float metric[2]) {
    gr_backend_download(p->m->be, loss, gr_plan_ptr(p, g->loss_stats), 2 * sizeof(float));
    metric[0] = metric[1] = 0.0f;
    if (g->metric_stats >= 0) gr_backend_download(p->m->be, metric, gr_plan_ptr(p, g->metric_stats), 2 * sizeof(float));
}

#endif
