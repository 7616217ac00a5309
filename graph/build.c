/* build.c — model section of the job spec -> forward graph + loss.
 *
 * Each item of model.layers is `- op`, or a one-op map `- op: {attrs}` with
 * optional `name:`, `input:` (an earlier layer's name) and `repeat: N`.
 * Each layer becomes one forward node whose descriptor parses its attrs and
 * infers its output shape; errors point at the YAML node. */
#include "graph.h"

#include <stdio.h>
#include <string.h>

static int gr_build_add_layer(gr_graph *g, const char *name, gr_op op) {
    if (g->n_layers == g->cap_layers) {
        g->cap_layers = g->cap_layers ? 2 * g->cap_layers : 32;
        g->layers = gr_xrealloc(g->layers, (size_t)g->cap_layers * sizeof *g->layers);
    }
    gr_layer *l = &g->layers[g->n_layers];
    memset(l, 0, sizeof *l);
    snprintf(l->name, sizeof l->name, "%s", name);
    l->op = op;
    l->node = -1;
    return g->n_layers++;
}

static int gr_build_find_layer(const gr_graph *g, const char *name) {
    for (int i = 0; i < g->n_layers; i++)
        if (strcmp(g->layers[i].name, name) == 0) return i;
    return -1;
}

static gr_status gr_build_unknown_op(const gr_cfg *at, const char *key, const char *name,
                                     gr_error *err) {
    const char *best = NULL;
    int best_d = 3;
    char all[512] = "";
    size_t k = 0;
    for (int i = 0; i < GR_OP_COUNT; i++) {
        if (!(gr_op_descs[i]->flags & GR_OPF_LAYER)) continue;
        int d = gr_edit_distance(name, gr_op_descs[i]->name);
        if (d < best_d) { best_d = d; best = gr_op_descs[i]->name; }
        k += (size_t)snprintf(all + k, sizeof all - k, "%s%s", k ? ", " : "", gr_op_descs[i]->name);
    }
    if (best) return gr_cfg_error(err, at, key, "unknown op '%s' (did you mean '%s'?)", name, best);
    return gr_cfg_error(err, at, key, "unknown op '%s' (ops: %s)", name, all);
}

/* Splits one layer item into its op name, attrs node and options. */
typedef struct gr_layer_item {
    const char *op;
    gr_cfg op_at;           /* where to point errors about the op (its key) */
    const gr_cfg *attrs;    /* NULL = none given */
    const char *name;
    const gr_cfg *input;
    int64_t repeat;
} gr_layer_item;

static gr_status gr_build_split_item(const gr_cfg *item, const char *key, gr_layer_item *li,
                                     gr_error *err) {
    memset(li, 0, sizeof *li);
    li->repeat = 1;
    if (item->kind == GR_CFG_SCALAR) {
        li->op = item->scalar;
        li->op_at = *item;
        return GR_OK;
    }
    if (item->kind != GR_CFG_MAP)
        return gr_cfg_error(err, item, key, "expected an op name or a map like '{dense: {units: 10}}'");
    for (int i = 0; i < item->n; i++) {
        const char *k = item->keys[i];
        const gr_cfg *v = item->items[i];
        char sub[512];
        snprintf(sub, sizeof sub, "%s.%s", key, k);
        if (strcmp(k, "name") == 0) {
            if (v->kind != GR_CFG_SCALAR || !v->scalar[0])
                return gr_cfg_error(err, v, sub, "expected a layer name");
            li->name = v->scalar;
        } else if (strcmp(k, "input") == 0) {
            li->input = v;
        } else if (strcmp(k, "repeat") == 0) {
            gr_status st = gr_cfg_int(v, sub, 1, 10000, &li->repeat, err);
            if (st) return st;
        } else if (li->op) {
            gr_cfg at = *item;
            at.line = item->key_line[i];
            at.col = item->key_col[i];
            return gr_cfg_error(err, &at, key, "a layer has one op, but '%s' and '%s' are both given",
                                li->op, k);
        } else {
            li->op = k;
            li->attrs = v;
            li->op_at = *item;
            li->op_at.line = item->key_line[i];
            li->op_at.col = item->key_col[i];
        }
    }
    if (!li->op) return gr_cfg_error(err, item, key, "no op given (e.g. '- relu' or '- dense: {units: 10}')");
    return GR_OK;
}

/* The tensor a layer reads: the previous layer's output, or `input:`. */
static bool gr_build_consumed(const gr_graph *g, int t) {
    for (int i = 0; i < g->n_nodes; i++)
        for (int k = 0; k < g->nodes[i].nin; k++)
            if (g->nodes[i].in[k] == t) return true;
    return false;
}

static gr_status gr_build_input(gr_graph *g, const gr_layer_item *li, const char *key, int prev,
                                int *out, gr_error *err) {
    if (!li->input) { *out = prev; return GR_OK; }
    char sub[300];
    snprintf(sub, sizeof sub, "%s.input", key);
    if (li->input->kind != GR_CFG_SCALAR)
        return gr_cfg_error(err, li->input, sub, "expected the name of an earlier layer "
                            "(lists of inputs are for add/concat)");
    int l = gr_build_find_layer(g, li->input->scalar);
    if (l < 0) return gr_cfg_error(err, li->input, sub, "no earlier layer is named '%s'", li->input->scalar);
    int t = g->nodes[g->layers[l].node].out[0];
    if (gr_build_consumed(g, t))
        return gr_cfg_error(err, li->input, sub, "layer '%s' already feeds another layer; using one "
                            "output twice needs the add/concat ops, which this version lacks",
                            li->input->scalar);
    *out = t;
    return GR_OK;
}

/* infer = false: parse only (no shapes known); every layer's output is a
 * placeholder copy of its input so `input:` references still resolve. */
static gr_status gr_graph_build_ex(const gr_job_spec *spec, const int64_t *in_shape, int in_ndim,
                                   bool infer, gr_graph *g, gr_error *err) {
    memset(g, 0, sizeof *g);
    g->micro_batch = spec->train.micro_batch;
    g->seed = spec->seed;
    gr_status st = GR_OK;
    if (spec->model.blocks && spec->model.blocks->n > 0) {
        st = gr_cfg_error(err, spec->model.blocks, "model.blocks",
                          "block templates are not supported by this version yet");
        goto fail;
    }
    int64_t shape[GR_MAX_DIMS];
    shape[0] = g->micro_batch;
    for (int i = 0; i < in_ndim; i++) shape[i + 1] = in_shape[i];
    g->input = gr_graph_add_tensor(g, "input", GR_TK_INPUT, GR_F32, in_ndim + 1, shape, true);
    g->label = gr_graph_add_tensor(g, "label", GR_TK_LABEL, GR_I32, 1, shape, true);

    const gr_cfg *layers = spec->model.layers;
    GR_ASSERT(layers && layers->kind == GR_CFG_SEQ);
    int op_count[GR_OP_COUNT] = {0};
    int cur = g->input;
    for (int i = 0; i < layers->n; i++) {
        const gr_cfg *item = layers->items[i];
        char key[256];
        snprintf(key, sizeof key, "model.layers[%d]", i);
        gr_layer_item li;
        if ((st = gr_build_split_item(item, key, &li, err))) goto fail;
        int op = gr_op_lookup(li.op);
        if (op < 0) { st = gr_build_unknown_op(&li.op_at, key, li.op, err); goto fail; }
        const gr_op_desc *d = gr_op_descs[op];
        char akey[300];
        snprintf(akey, sizeof akey, "%s.%s", key, li.op);
        gr_attrs attrs;
        memset(&attrs, 0, sizeof attrs);
        if (d->parse) {
            if ((st = d->parse(&attrs, li.attrs, akey, err))) goto fail;
        } else if (li.attrs && !(li.attrs->kind == GR_CFG_SCALAR && !li.attrs->scalar[0]) &&
                   !(li.attrs->kind == GR_CFG_MAP && li.attrs->n == 0)) {
            st = gr_cfg_error(err, li.attrs, akey, "%s takes no attributes", li.op);
            goto fail;
        }
        if (li.name && li.repeat > 1) {
            st = gr_cfg_error(err, item, key, "a named layer cannot be repeated");
            goto fail;
        }
        int in = cur;
        if ((st = gr_build_input(g, &li, key, cur, &in, err))) goto fail;
        for (int64_t r = 0; r < li.repeat; r++) {
            char name[GR_NAME_MAX];
            if (li.name) snprintf(name, sizeof name, "%s", li.name);
            else snprintf(name, sizeof name, "%s%d", li.op, op_count[op]);
            op_count[op]++;
            if (gr_build_find_layer(g, name) >= 0) {
                st = gr_cfg_error(err, item, key, "duplicate layer name '%s'", name);
                goto fail;
            }
            int l = gr_build_add_layer(g, name, (gr_op)op);
            int outs[1] = {-1};
            int ins[1] = {in};
            int nd = gr_graph_add_node(g, (gr_op)op, l, ins, 1, outs, 0);
            g->nodes[nd].attrs = attrs;
            g->layers[l].node = nd;
            if (infer) {
                if ((st = d->infer(g, nd, &li.op_at, akey, err))) goto fail;
            } else {
                gr_tensor x = g->tensors[in];
                g->nodes[nd].out[0] = gr_graph_add_tensor(g, name, GR_TK_ACT, GR_F32, x.ndim, x.shape, true);
                g->nodes[nd].nout = 1;
            }
            in = cur = g->nodes[nd].out[0];
        }
    }

    /* the loss */
    if (strcmp(spec->train.loss, "softmax_cross_entropy") != 0) {
        st = gr_spec_error(err, spec, "train.loss.type", "unknown loss '%s'", spec->train.loss);
        goto fail;
    }
    if (!infer) return GR_OK;
    const gr_tensor *lt = &g->tensors[cur];
    if (lt->ndim != 2) {
        char buf[64];
        st = gr_error_set(err, GR_ERR_USAGE, "%s: model.layers: the last layer's output is %s per "
                          "batch; softmax_cross_entropy needs [batch, classes] (end with flatten + dense)",
                          spec->file, gr_shape_str(lt, buf, sizeof buf));
        goto fail;
    }
    g->logits = cur;
    g->n_classes = lt->shape[1];
    int64_t pshape[2] = {lt->shape[0], lt->shape[1]};
    g->loss_probs = gr_graph_add_tensor(g, "loss.probs", GR_TK_ACT, GR_F32, 2, pshape, true);
    int64_t sshape[1] = {2};
    g->loss_stats = gr_graph_add_tensor(g, "loss.stats", GR_TK_STAT, GR_F32, 1, sshape, false);
    int ins[2] = {g->logits, g->label}, outs[2] = {g->loss_probs, g->loss_stats};
    int ln = gr_graph_add_node(g, GR_OP_SOFTMAX_CE, -1, ins, 2, outs, 2);
    g->nodes[ln].attrs.label_smoothing = spec->train.label_smoothing;
    g->nodes[ln].flops = 5 * g->n_classes;
    g->n_forward = g->n_nodes;

    /* params first, then non-trainable state, so the grads arena mirrors
     * the front of the params arena */
    int64_t off = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < g->n_tensors; i++) {
            gr_tensor *t = &g->tensors[i];
            if (t->kind != (pass == 0 ? GR_TK_PARAM : GR_TK_STATE)) continue;
            t->param_offset = off;
            off += gr_tensor_numel(t);
            if (pass == 0) g->n_trainable = off;
        }
    g->n_params = off;
    return GR_OK;
fail:
    gr_graph_free(g);
    return st;
}

gr_status gr_graph_build(const gr_job_spec *spec, const int64_t *in_shape, int in_ndim,
                         gr_graph *g, gr_error *err) {
    return gr_graph_build_ex(spec, in_shape, in_ndim, true, g, err);
}

gr_status gr_graph_check(const gr_job_spec *spec, gr_error *err) {
    gr_graph g;
    int64_t one[1] = {1};
    bool shapes = spec->model.n_input > 0;
    gr_status st = gr_graph_build_ex(spec, shapes ? spec->model.input : one, shapes ? spec->model.n_input : 1,
                                     shapes, &g, err);
    if (st == GR_OK) gr_graph_free(&g);
    return st;
}
