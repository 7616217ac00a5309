/* head.c — the graph's ends: its inputs and target (the builder's first
 * tensors), and its head after the layers: the loss (train.loss) on the last
 * layer's output and the target, then one metric node per item of
 * train.metrics. An item is a metric op's name (a GR_OPF_METRIC row of
 * ops.def) or a one-op map with its attributes:
 *   metrics: [accuracy, {accuracy: {top_k: 5}}]
 * Absent, the metrics are the loss's default: top-1 accuracy for softmax
 * cross-entropy, none for mse and bce_with_logits; `metrics: []` is none. A metric's name, which metrics.jsonl,
 * TensorBoard and summary.json use, is its op's, with `_top<k>` for an
 * accuracy of top_k > 1. Metric nodes have no backward: autodiff never
 * reaches them. */
#include "graph.h"

#include <stdio.h>
#include <string.h>

typedef struct gr_metric_item {
    gr_op op;
    gr_attrs attrs;
    char name[32];
    gr_cfg at;              /* the item, for messages */
    char key[64];           /* "train.metrics[1].accuracy" */
} gr_metric_item;

static gr_status gr_head_unknown(const gr_cfg *at, const char *key, const char *name, gr_error *err) {
    char ops[200] = "";
    size_t len = 0;
    for (int i = 0; i < GR_OP_COUNT; i++)
        if (gr_op_flags(i) & GR_OPF_METRIC)
            len += (size_t)snprintf(ops + len, sizeof ops - len, "%s%s", len ? ", " : "", gr_op_name(i));
    return gr_cfg_error(err, at, key, "unknown metric '%s' (metrics: %s)", name, ops);
}

/* One item into m: its op, its attributes (the op's table) and its name. */
static gr_status gr_head_item(const gr_cfg *item, int i, gr_metric_item *m, gr_error *err) {
    char key[48];
    snprintf(key, sizeof key, "train.metrics[%d]", i);
    const char *name = NULL;
    const gr_cfg *attrs = NULL;
    m->at = *item;
    if (item->kind == GR_CFG_SCALAR) {
        name = item->scalar;
    } else if (item->kind == GR_CFG_MAP && item->n == 1) {
        name = item->keys[0];
        attrs = item->items[0];
        m->at.line = item->key_line[0];
        m->at.col = item->key_col[0];
    } else {
        return gr_cfg_error(err, item, key, "expected a metric's name or a map like {accuracy: {top_k: 5}}");
    }
    int op = -1;
    for (int k = 0; k < GR_OP_COUNT; k++)
        if ((gr_op_flags(k) & GR_OPF_METRIC) && strcmp(gr_op_name(k), name) == 0) op = k;
    if (op < 0) return gr_head_unknown(&m->at, key, name, err);
    m->op = (gr_op)op;
    snprintf(m->key, sizeof m->key, "%s.%s", key, name);
    memset(&m->attrs, 0, sizeof m->attrs);
    gr_status st = gr_attrs_read(name, gr_op_impl_of(m->op)->attrs, &m->attrs, attrs, m->key, err);
    if (st) return st;
    if (m->op == GR_OP_ACCURACY && m->attrs.top_k > 1)
        snprintf(m->name, sizeof m->name, "%s_top%lld", name, (long long)m->attrs.top_k);
    else
        snprintf(m->name, sizeof m->name, "%s", name);
    return GR_OK;
}

/* train.metrics read into items[0..*n). */
static gr_status gr_head_metrics(const gr_job_spec *spec, gr_metric_item *items, int *n, gr_error *err) {
    *n = 0;
    const gr_cfg *seq = spec->train.metrics;
    if (!seq || seq->kind != GR_CFG_SEQ) { /* the loss's default: top-1 accuracy for cross-entropy */
        if (strcmp(spec->train.loss, "softmax_cross_entropy") != 0) return GR_OK;
        gr_metric_item *m = &items[(*n)++];
        memset(m, 0, sizeof *m);
        m->op = GR_OP_ACCURACY;
        m->attrs.top_k = 1;
        m->attrs.ignore_index = -100;
        snprintf(m->name, sizeof m->name, "accuracy");
        snprintf(m->key, sizeof m->key, "train.loss");
        return GR_OK;
    }
    if (seq->n > GR_MAX_METRICS)
        return gr_cfg_error(err, seq, "train.metrics", "%d metrics; at most %d", seq->n, GR_MAX_METRICS);
    for (int i = 0; i < seq->n; i++) {
        gr_status st = gr_head_item(seq->items[i], i, &items[i], err);
        if (st) return st;
        for (int k = 0; k < i; k++)
            if (strcmp(items[k].name, items[i].name) == 0)
                return gr_cfg_error(err, &items[i].at, items[i].key, "%s is already train.metrics[%d]",
                                    items[i].name, k);
        *n = i + 1;
    }
    return GR_OK;
}

void gr_graph_add_io(gr_graph *g, const gr_graph_io *io) {
    int64_t shape[GR_MAX_DIMS];
    shape[0] = g->micro_batch;
    for (int i = 0; i < io->n_inputs; i++) {
        const gr_io_tensor *t = &io->in[i];
        for (int d = 0; d < t->ndim; d++) shape[d + 1] = t->shape[d];
        g->inputs[i] = gr_graph_add_tensor(g, t->name, GR_TK_INPUT, t->elem, t->ndim + 1, shape, true);
    }
    g->n_inputs = io->n_inputs;
    g->input = g->inputs[0];
    const gr_io_tensor *t = &io->target;
    for (int d = 0; d < t->ndim; d++) shape[d + 1] = t->shape[d];
    g->label = gr_graph_add_tensor(g, t->name, GR_TK_LABEL, t->elem, t->ndim + 1, shape, true);
}

/* The loss op of train.loss.type. */
static int gr_head_loss_op(const gr_job_spec *spec) {
    for (int i = 0; i < GR_OP_COUNT; i++)
        if ((gr_op_flags(i) & GR_OPF_LOSS) && strcmp(gr_op_name(i), spec->train.loss) == 0) return i;
    return -1;
}

/* Softmax cross-entropy on [batch, classes] and one label a sample, as every
 * classifier job had it (its tensors made in this order). */
static void gr_head_classifier(gr_graph *g, const gr_job_spec *spec) {
    const gr_tensor *lt = &g->tensors[g->logits];
    g->n_classes = lt->shape[1];
    int64_t pshape[2] = {lt->shape[0], lt->shape[1]};
    g->loss_probs = gr_graph_add_tensor(g, "loss.probs", GR_TK_ACT, GR_F32, 2, pshape, true);
    int64_t sshape[1] = {2};
    g->loss_stats = gr_graph_add_tensor(g, "loss.stats", GR_TK_STAT, GR_F32, 1, sshape, false);
    int ins[2] = {g->logits, g->label}, outs[2] = {g->loss_probs, g->loss_stats};
    int ln = gr_graph_add_node(g, GR_OP_SOFTMAX_CE, -1, ins, 2, outs, 2);
    g->nodes[ln].attrs.label_smoothing = spec->train.label_smoothing;
    g->nodes[ln].attrs.ignore_index = -100;
    g->nodes[ln].attrs.classes = spec->train.loss_classes;
    g->nodes[ln].flops = 5 * g->n_classes;
    if (spec->train.loss_classes) g->n_classes = spec->train.loss_classes;
}

/* Any loss on the output and the target, shapes checked by the op. */
static gr_status gr_head_loss(gr_graph *g, const gr_job_spec *spec, gr_op op, gr_error *err) {
    int ins[2] = {g->logits, g->label};
    int ln = gr_graph_add_node(g, op, -1, ins, 2, NULL, 0);
    g->nodes[ln].attrs.label_smoothing = spec->train.label_smoothing;
    g->nodes[ln].attrs.ignore_index = -100;
    g->nodes[ln].attrs.classes = spec->train.loss_classes;
    gr_status st = gr_op_impl_of(op)->infer(g, ln, NULL, "train.loss", err);
    if (st) return st;
    const gr_node *nd = &g->nodes[ln];
    g->loss_stats = nd->out[nd->nout - 1];
    g->loss_probs = op == GR_OP_SOFTMAX_CE ? nd->out[0] : -1;
    const gr_tensor *lt = &g->tensors[g->logits];
    g->n_classes = op != GR_OP_SOFTMAX_CE ? 0 : spec->train.loss_classes ? spec->train.loss_classes
                                                                          : lt->shape[lt->ndim - 1];
    return GR_OK;
}

gr_status gr_graph_head_check(const gr_job_spec *spec, gr_error *err) {
    if (gr_head_loss_op(spec) < 0)
        return gr_spec_error(err, spec, "train.loss.type", "unknown loss '%s'", spec->train.loss);
    gr_metric_item items[GR_MAX_METRICS];
    int n;
    return gr_head_metrics(spec, items, &n, err);
}

gr_status gr_graph_build_head(gr_graph *g, const gr_job_spec *spec, int out, gr_error *err) {
    gr_status st = gr_graph_head_check(spec, err);
    if (st) return st;
    const gr_op op = (gr_op)gr_head_loss_op(spec);
    const gr_tensor *lt = &g->tensors[out], *tt = &g->tensors[g->label];
    const bool labels = tt->ndim == 1 && tt->elem == GR_I32; /* one class index a sample */
    if (op == GR_OP_SOFTMAX_CE && labels && lt->ndim != 2) {
        char buf[64];
        return gr_error_set(err, GR_ERR_USAGE, "%s: model.layers: the last layer's output is %s per batch; "
                            "softmax_cross_entropy needs [batch, classes] (end with flatten + dense)", spec->file,
                            gr_shape_str(lt, buf, sizeof buf));
    }
    if (spec->train.loss_classes) { /* a padded vocabulary: the first K logits are the classes */
        if (op != GR_OP_SOFTMAX_CE)
            return gr_spec_error(err, spec, "train.loss.classes", "only valid when train.loss.type is "
                                 "softmax_cross_entropy (it is %s)", spec->train.loss);
        if (spec->train.loss_classes > lt->shape[lt->ndim - 1])
            return gr_spec_error(err, spec, "train.loss.classes", "%lld classes, but the last layer gives %lld "
                                 "logits", (long long)spec->train.loss_classes, (long long)lt->shape[lt->ndim - 1]);
    }
    g->logits = out;
    if (op == GR_OP_SOFTMAX_CE && labels) gr_head_classifier(g, spec);
    else if ((st = gr_head_loss(g, spec, op, err))) return st;
    /* the metrics on the same output and target */
    const int ins[2] = {g->logits, g->label};
    gr_metric_item items[GR_MAX_METRICS];
    int n;
    if ((st = gr_head_metrics(spec, items, &n, err))) return st;
    for (int i = 0; i < n; i++) {
        const int mn = gr_graph_add_node(g, items[i].op, -1, ins, 2, NULL, 0);
        g->nodes[mn].attrs = items[i].attrs;
        g->nodes[mn].attrs.classes = spec->train.loss_classes; /* padding never ranks */
        if ((st = gr_op_impl_of(items[i].op)->infer(g, mn, &items[i].at, items[i].key, err))) return st;
        struct gr_metric *m = &g->metrics[i];
        snprintf(m->name, sizeof m->name, "%s", items[i].name);
        m->node = mn;
        m->stats = g->nodes[mn].out[0];
        snprintf(g->tensors[m->stats].name, sizeof g->tensors[m->stats].name, "%s.stats", m->name);
    }
    g->n_metrics = n;
    g->metric_stats = n ? g->metrics[0].stats : -1;
    return GR_OK;
}
