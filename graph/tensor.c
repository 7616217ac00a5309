/* tensor.c — tensor parallelism's split of a built graph (tensor.h): the
 * column/row pairs found by walking each dense layer's output to the next
 * dense layer, and the layers refused. */
#include "tensor.h"

#include <stdlib.h>
#include <string.h>

const char *gr_tp_role_name(gr_tp_role r) {
    static const char *const names[GR_TP_ROLE_COUNT] = {
        [GR_TP_REPLICATED] = "replicated", [GR_TP_COLUMN] = "column", [GR_TP_COLUMN_QKV] = "column (q, k, v)",
        [GR_TP_SHARDED] = "sharded",       [GR_TP_HEADS] = "heads",   [GR_TP_ROW] = "row",
    };
    return (unsigned)r < GR_TP_ROLE_COUNT ? names[r] : "?";
}

void gr_tp_plan_free(gr_tp_plan *tp) {
    free(tp->role);
    memset(tp, 0, sizeof *tp);
}

/* The forward nodes reading each tensor: how many, and the last one. */
typedef struct gr_tp_reads {
    int *count, *last;
} gr_tp_reads;

static void gr_tp_reads_make(const gr_graph *g, gr_tp_reads *r) {
    r->count = gr_xcalloc((size_t)(g->n_tensors ? g->n_tensors : 1), sizeof *r->count);
    r->last = gr_xcalloc((size_t)(g->n_tensors ? g->n_tensors : 1), sizeof *r->last);
    for (int i = 0; i < g->n_forward; i++)
        for (int k = 0; k < g->nodes[i].nin; k++) r->count[g->nodes[i].in[k]]++, r->last[g->nodes[i].in[k]] = i;
}

/* A dense layer a split may take: untied, its weight read by it alone. */
static bool gr_tp_dense_free(const gr_graph *g, const gr_tp_reads *r, int layer) {
    const gr_node *nd = &g->nodes[g->layers[layer].node];
    return nd->op == GR_OP_DENSE && !nd->attrs.tied[0] && !nd->attrs.weight_t && nd->nin >= 2 &&
           r->count[nd->in[1]] == 1;
}

/* From dense layer l: the layers up to the next dense one, when only
 * elementwise activations (or one attention right after l) lie between and
 * each output has one reader; their roles into role. Returns whether a pair
 * was found (role untouched otherwise). */
static bool gr_tp_pair(const gr_graph *g, const gr_tp_reads *r, int l, gr_tp_role *role) {
    int chain[64], n = 0;
    bool attn = false;
    int x = g->nodes[g->layers[l].node].out[0];
    while (n < (int)GR_ARRAY_LEN(chain)) {
        if (r->count[x] != 1) return false;
        const gr_node *nd = &g->nodes[r->last[x]];
        if (nd->layer < 0 || role[nd->layer] != GR_TP_REPLICATED) return false;
        if (gr_op_flags(nd->op) & GR_OPF_ACT) {
            chain[n++] = nd->layer;
        } else if (nd->op == GR_OP_ATTENTION && n == 0 && !attn) {
            chain[n++] = nd->layer;
            attn = true;
        } else if (nd->op == GR_OP_DENSE && nd->in[0] == x && gr_tp_dense_free(g, r, nd->layer)) {
            role[l] = attn ? GR_TP_COLUMN_QKV : GR_TP_COLUMN;
            for (int i = 0; i < n; i++) role[chain[i]] = g->layers[chain[i]].op == GR_OP_ATTENTION ? GR_TP_HEADS
                                                                                                 : GR_TP_SHARDED;
            role[nd->layer] = GR_TP_ROW;
            return true;
        } else {
            return false;
        }
        x = nd->out[0];
    }
    return false;
}

/* A layer of a convolutional model: what the split cannot take. */
static bool gr_tp_refused_op(gr_op op) {
    return op == GR_OP_CONV || op == GR_OP_BATCHNORM || op == GR_OP_MAXPOOL || op == GR_OP_AVGPOOL ||
           op == GR_OP_GLOBAL_AVGPOOL;
}

static gr_status gr_tp_layer_error(gr_error *err, const gr_graph *g, const gr_job_spec *spec, int l, int t,
                                   const char *what) {
    const gr_layer *ly = &g->layers[l];
    if (ly->at_line > 0) {
        gr_cfg at = {.file = ly->at_set ? "--set" : spec->file, .line = ly->at_line, .col = ly->at_col};
        return gr_cfg_error(err, &at, "model", "layer '%s': %s (parallel.tensor %d)", ly->name, what, t);
    }
    return gr_spec_error(err, spec, "parallel.tensor", "layer '%s': %s", ly->name, what);
}

/* The split layers' sizes against t: units (column), heads (attention). */
static gr_status gr_tp_check_sizes(const gr_graph *g, const gr_job_spec *spec, const gr_tp_plan *tp,
                                   gr_error *err) {
    char msg[256];
    for (int l = 0; l < g->n_layers; l++) {
        const gr_node *nd = &g->nodes[g->layers[l].node];
        const int64_t units = nd->attrs.units, heads = nd->attrs.heads;
        if (tp->role[l] == GR_TP_COLUMN && units % tp->t) {
            snprintf(msg, sizeof msg, "its %lld units do not split over parallel.tensor %d processes (give a "
                     "multiple of %d)", (long long)units, tp->t, tp->t);
            return gr_tp_layer_error(err, g, spec, l, tp->t, msg);
        }
        if (tp->role[l] == GR_TP_HEADS && heads % tp->t) {
            snprintf(msg, sizeof msg, "its %lld heads do not split over parallel.tensor %d processes (give a "
                     "multiple of %d)", (long long)heads, tp->t, tp->t);
            return gr_tp_layer_error(err, g, spec, l, tp->t, msg);
        }
    }
    return GR_OK;
}

/* The figures of the split: parameters split and replicated, floats all-reduced per sample. */
static void gr_tp_figures(const gr_graph *g, gr_tp_plan *tp) {
    for (int l = 0; l < g->n_layers; l++) {
        const gr_tp_role role = tp->role[l];
        const gr_node *nd = &g->nodes[g->layers[l].node];
        if (role == GR_TP_COLUMN || role == GR_TP_COLUMN_QKV || role == GR_TP_ROW)
            tp->split_params += g->layers[l].n_params;
        else
            tp->repl_params += g->layers[l].n_params;
        if (role == GR_TP_ROW) tp->allreduce_fwd += gr_tensor_sample_numel(&g->tensors[nd->out[0]]);
        if ((role == GR_TP_COLUMN || role == GR_TP_COLUMN_QKV) && g->tensors[nd->in[0]].requires_grad)
            tp->allreduce_bwd += gr_tensor_sample_numel(&g->tensors[nd->in[0]]);
        if (role == GR_TP_COLUMN || role == GR_TP_COLUMN_QKV) tp->pairs++;
    }
}

gr_status gr_tp_plan_make(const gr_graph *g, const gr_job_spec *spec, int t, gr_tp_plan *out, gr_error *err) {
    memset(out, 0, sizeof *out);
    if (t < 1 || t > 4096)
        return gr_spec_error(err, spec, "parallel.tensor", "%d processes; need 1 to 4096", t);
    gr_tp_plan tp = {.t = t, .role = gr_xcalloc((size_t)(g->n_layers ? g->n_layers : 1), sizeof *tp.role)};
    gr_status st = GR_OK;
    if (t > 1) {
        gr_tp_reads r;
        gr_tp_reads_make(g, &r);
        for (int l = 0; l < g->n_layers && !st; l++) {
            if (gr_tp_refused_op(g->layers[l].op)) {
                char msg[256];
                snprintf(msg, sizeof msg, "tensor parallelism splits dense layers and attention heads; a %s layer "
                         "cannot be split (a convolutional model: use parallel.data or parallel.pipeline)",
                         gr_op_name(g->layers[l].op));
                st = gr_tp_layer_error(err, g, spec, l, t, msg);
            } else if (tp.role[l] == GR_TP_REPLICATED && gr_tp_dense_free(g, &r, l)) {
                (void)gr_tp_pair(g, &r, l, tp.role);
            }
        }
        free(r.count);
        free(r.last);
        if (!st) st = gr_tp_check_sizes(g, spec, &tp, err);
    }
    if (!st) gr_tp_figures(g, &tp);
    if (!st && t > 1 && tp.pairs == 0)
        st = gr_spec_error(err, spec, "parallel.tensor", "%d processes, but nothing in the model splits: tensor "
                           "parallelism splits pairs of dense layers with elementwise activations between them "
                           "(dense, gelu, dense) and attention between two dense layers", t);
    if (st) {
        gr_tp_plan_free(&tp);
        return st;
    }
    *out = tp;
    return GR_OK;
}

void gr_tp_part_attrs(const gr_tp_plan *tp, int layer, gr_attrs *a) {
    if (layer < 0 || tp->t <= 1) return;
    const gr_tp_role r = tp->role[layer];
    if (r == GR_TP_COLUMN || r == GR_TP_COLUMN_QKV) a->units /= tp->t;
    if (r == GR_TP_HEADS) a->heads /= tp->t;
}

/* n floats between full + f and part + p, one way or the other */
static void gr_tp_move(float *full, int64_t f, float *part, int64_t p, int64_t n, bool to_part) {
    if (to_part) memcpy(part + p, full + f, (size_t)n * sizeof(float));
    else memcpy(full + f, part + p, (size_t)n * sizeof(float));
}

/* One tensor: whole tensor w, its part q (same index in both graphs). */
static void gr_tp_copy_tensor(const gr_tensor *w, const gr_tensor *q, gr_tp_role role, int rank, int t, float *full,
                              float *part, int64_t fb, int64_t pb, bool to_part) {
    const int64_t fo = fb + w->param_offset, po = pb + q->param_offset, n = gr_tensor_numel(q);
    const bool weight = strcmp(w->pname, "weight") == 0;
    if (role == GR_TP_COLUMN || role == GR_TP_COLUMN_QKV) {
        /* rows (weight [units, in]) or entries (bias [units]) of the rank's part; q, k, v: each third's */
        const int thirds = role == GR_TP_COLUMN_QKV ? 3 : 1;
        const int64_t rows = w->shape[0] / thirds / t, width = weight ? w->shape[1] : 1;
        for (int k = 0; k < thirds; k++)
            gr_tp_move(full, fo + (k * (w->shape[0] / thirds) + rank * rows) * width, part, po + k * rows * width,
                       rows * width, to_part);
    } else if (role == GR_TP_ROW && weight) { /* [units, in]: each row's columns of the rank */
        const int64_t units = w->shape[0], in = w->shape[1], cols = in / t;
        for (int64_t i = 0; i < units; i++)
            gr_tp_move(full, fo + i * in + rank * cols, part, po + i * cols, cols, to_part);
    } else if (rank == 0) { /* replicated, or a row layer's bias: rank 0's */
        gr_tp_move(full, fo, part, po, n, to_part);
    } else if (to_part) {
        if (role == GR_TP_ROW) memset(part + po, 0, (size_t)n * sizeof(float)); /* added once, by rank 0 */
        else memcpy(part + po, full + fo, (size_t)n * sizeof(float));
    }
}

void gr_tp_copy(const gr_graph *whole, const gr_graph *pg, const gr_tp_plan *tp, int rank, float *full,
                float *part, int64_t full_base, int64_t part_base, bool to_part, bool trainable_only) {
    GR_ASSERT(whole->n_tensors == pg->n_tensors);
    for (int i = 0; i < whole->n_tensors; i++) {
        const gr_tensor *w = &whole->tensors[i], *q = &pg->tensors[i];
        if (w->kind != GR_TK_PARAM && (trainable_only || w->kind != GR_TK_STATE)) continue;
        GR_ASSERT(q->kind == w->kind && strcmp(q->name, w->name) == 0);
        const gr_tp_role role = w->layer >= 0 ? tp->role[w->layer] : GR_TP_REPLICATED;
        gr_tp_copy_tensor(w, q, role, rank, tp->t, full, part, full_base, part_base, to_part);
    }
}
