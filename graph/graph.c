/* graph.c — graph IR storage: tensors, nodes, layers, the op table (made
 * from ops.def's rows, checked at compile time) and the small helpers op
 * implementations build with. */
#include "graph.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* An op's row, as ops.def gives it. */
typedef struct gr_op_row {
    const char *name;
    unsigned flags;
    int bwd;
    const gr_op_impl *impl;
} gr_op_row;

/* Backward rows have no implementation (autodiff emits them; their work is
 * their kernels'): the constant condition folds, so only forward rows name
 * gr_op_impl_<name>, and one without it fails the link. */
static const gr_op_row gr_op_rows[] = {
#define X(E, name, flags, bwd, cpu, cuda) \
    [GR_OP_##E] = {#name, (flags), GR_OP_##bwd, ((flags) & GR_OPF_BACKWARD) ? NULL : &gr_op_impl_##name},
#include "ops.def"
#undef X
};
_Static_assert(GR_ARRAY_LEN(gr_op_rows) == GR_OP_COUNT, "op table out of step with ops.def");

/* The rows checked at compile time: each is exactly one of LAYER, LOSS,
 * METRIC, BACKWARD; a layer or loss row's bwd names a backward row, a
 * backward or metric row's is NONE (a metric is never differentiated);
 * the activation, running-statistics and saved-statistics flags are on
 * layer rows; each backend column has at most one half and one layout bit,
 * and none for a view. */
#define GR_CAP_HALF_MASK (GR_CAP_HALF | GR_CAP_HALF_IN0 | GR_CAP_HALF_ALL | GR_CAP_HALF_LIB)
#define GR_CAP_ONE_OF(c, m) (((c) & (m)) == 0 || (((c) & (m)) & (((c) & (m)) - 1)) == 0)
#define GR_CAPS_OK(c) (GR_CAP_ONE_OF(c, GR_CAP_HALF_MASK) && GR_CAP_ONE_OF(c, GR_CAP_NHWC_SAME | GR_CAP_NHWC_ANY))
enum {
#define X(E, name, flags, bwd, cpu, cuda) GR_OPF_OF_##E = (flags),
#include "ops.def"
#undef X
    GR_OPF_OF_NONE = 0,
};
#define X(E, name, flags, bwd, cpu, cuda)                                                             \
    _Static_assert(((flags) & GR_OPF_LAYER ? 1 : 0) + ((flags) & GR_OPF_LOSS ? 1 : 0) +               \
                   ((flags) & GR_OPF_METRIC ? 1 : 0) + ((flags) & GR_OPF_BACKWARD ? 1 : 0) == 1,      \
                   "ops.def row " #name ": flags need exactly one of LAYER, LOSS, METRIC, BACKWARD"); \
    _Static_assert((flags) & (GR_OPF_BACKWARD | GR_OPF_METRIC) ? (int)GR_OP_##bwd == GR_OP_NONE        \
                                             : (GR_OPF_OF_##bwd & GR_OPF_BACKWARD) != 0,              \
                   "ops.def row " #name ": bwd names a backward op (NONE on a backward or metric row)"); \
    _Static_assert(!((flags) & (GR_OPF_ACT | GR_OPF_RUNNING_STATS | GR_OPF_TIEABLE)) ||               \
                   ((flags) & GR_OPF_LAYER),                                                          \
                   "ops.def row " #name ": ACT, RUNNING_STATS and TIEABLE are for layer rows");      \
    _Static_assert(!((flags) & GR_OPF_FP32_SAVED) || ((flags) & (GR_OPF_LAYER | GR_OPF_BACKWARD)),    \
                   "ops.def row " #name ": FP32_SAVED is for layer and backward rows");              \
    _Static_assert(!((flags) & GR_OPF_ACT_SAVES_X) || ((flags) & GR_OPF_ACT),                         \
                   "ops.def row " #name ": ACT_SAVES_X goes with ACT");                               \
    _Static_assert(GR_CAPS_OK(cpu) && GR_CAPS_OK(cuda),                                               \
                   "ops.def row " #name ": at most one half and one layout capability per backend");  \
    _Static_assert(!((flags) & GR_OPF_VIEW) || !(((cpu) | (cuda)) & GR_CAP_HALF_MASK),               \
                   "ops.def row " #name ": a view does no work to take half storage for");
#include "ops.def"
#undef X

const char *gr_op_name(gr_op op) {
    GR_ASSERT(op >= 0 && op < GR_OP_COUNT);
    return gr_op_rows[op].name;
}

unsigned gr_op_flags(gr_op op) {
    GR_ASSERT(op >= 0 && op < GR_OP_COUNT);
    return gr_op_rows[op].flags;
}

int gr_op_bwd(gr_op op) {
    GR_ASSERT(op >= 0 && op < GR_OP_COUNT);
    return gr_op_rows[op].bwd;
}

const gr_op_impl *gr_op_impl_of(gr_op op) {
    GR_ASSERT(op >= 0 && op < GR_OP_COUNT);
    return gr_op_rows[op].impl;
}

int gr_op_lookup(const char *name) {
    for (int i = 0; i < GR_OP_COUNT; i++)
        if ((gr_op_rows[i].flags & GR_OPF_LAYER) && strcmp(gr_op_rows[i].name, name) == 0) return i;
    return -1;
}

gr_status gr_graph_set_batch(gr_graph *g, int64_t n, gr_error *err) {
    GR_ASSERT(n >= 1);
    for (int i = 0; i < g->n_nodes; i++) {
        const gr_node *nd = &g->nodes[i];
        if (n < nd->min_batch)
            return gr_error_set(err, GR_ERR_USAGE, "layer %s: %s cannot run at micro-batch %lld: it needs %lld or "
                                "more samples there", nd->layer >= 0 ? g->layers[nd->layer].name : "loss",
                                gr_op_name(nd->op), (long long)n, (long long)nd->min_batch);
    }
    for (int i = 0; i < g->n_tensors; i++)
        if (g->tensors[i].batched) g->tensors[i].shape[0] = n;
    g->micro_batch = n;
    return GR_OK;
}

int64_t gr_tensor_numel(const gr_tensor *t) {
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= t->shape[i];
    return n;
}

int64_t gr_tensor_sample_numel(const gr_tensor *t) {
    int64_t n = 1;
    for (int i = t->batched ? 1 : 0; i < t->ndim; i++) n *= t->shape[i];
    return n;
}

const char *gr_shape_str(const gr_tensor *t, char *buf, size_t n) {
    size_t k = (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < t->ndim && k < n; i++)
        k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? ", " : "", (long long)t->shape[i]);
    if (k < n) snprintf(buf + k, n - k, "]");
    return buf;
}

const char *gr_shape_str_n(const gr_tensor *t, char *buf, size_t n) {
    size_t k = (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < t->ndim && k < n; i++) {
        if (i == 0 && t->batched) k += (size_t)snprintf(buf + k, n - k, "n");
        else k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? ", " : "", (long long)t->shape[i]);
    }
    if (k < n) snprintf(buf + k, n - k, "]");
    return buf;
}

int gr_graph_add_tensor(gr_graph *g, const char *name, gr_tensor_kind kind, gr_elem elem,
                        int ndim, const int64_t *shape, bool batched) {
    GR_ASSERT(ndim >= 0 && ndim <= GR_MAX_DIMS);
    GR_GROW(g->tensors, g->cap_tensors, g->n_tensors + 1);
    gr_tensor *t = &g->tensors[g->n_tensors];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->kind = kind;
    t->elem = elem;
    t->ndim = ndim;
    for (int i = 0; i < ndim; i++) t->shape[i] = shape[i];
    t->batched = batched;
    t->alias_of = -1;
    t->grad = -1;
    t->layer = -1;
    t->param_offset = -1;
    return g->n_tensors++;
}

int gr_graph_add_param(gr_graph *g, int layer, const char *pname, int ndim, const int64_t *shape) {
    char name[GR_TNAME_MAX];
    snprintf(name, sizeof name, "%s.%s", g->layers[layer].name, pname);
    int t = gr_graph_add_tensor(g, name, GR_TK_PARAM, GR_F32, ndim, shape, false);
    gr_tensor *p = &g->tensors[t];
    p->layer = layer;
    p->requires_grad = true;
    snprintf(p->pname, sizeof p->pname, "%s", pname);
    p->init = GR_INIT_FAN_IN;
    g->layers[layer].n_params += gr_tensor_numel(p);
    return t;
}

int gr_graph_add_state(gr_graph *g, int layer, const char *pname, int ndim, const int64_t *shape) {
    char name[GR_TNAME_MAX];
    snprintf(name, sizeof name, "%s.%s", g->layers[layer].name, pname);
    int t = gr_graph_add_tensor(g, name, GR_TK_STATE, GR_F32, ndim, shape, false);
    gr_tensor *p = &g->tensors[t];
    p->layer = layer;
    snprintf(p->pname, sizeof p->pname, "%s", pname);
    p->init = GR_INIT_ZERO;
    return t;
}

int gr_graph_add_node(gr_graph *g, gr_op op, int layer, const int *in, int nin,
                      const int *out, int nout) {
    GR_ASSERT(nin <= GR_MAX_IN && nout <= GR_MAX_OUT);
    GR_GROW(g->nodes, g->cap_nodes, g->n_nodes + 1);
    gr_node *nd = &g->nodes[g->n_nodes];
    memset(nd, 0, sizeof *nd);
    nd->op = op;
    nd->layer = layer;
    nd->nin = nin;
    nd->nout = nout;
    for (int i = 0; i < nin; i++) nd->in[i] = in[i];
    for (int i = 0; i < nout; i++) nd->out[i] = out[i];
    nd->fwd = -1;
    return g->n_nodes++;
}

static bool gr_node_reads(const gr_node *nd, int t) {
    for (int k = 0; k < nd->nin; k++)
        if (nd->in[k] == t) return true;
    return false;
}

int gr_graph_grad(gr_graph *g, int t) {
    if (g->ad_node >= 0 && t < g->ad_n && g->ad_readers[t] > 1 && gr_node_reads(&g->nodes[g->ad_node], t)) {
        int k = 0;
        for (int i = 0; i < g->ad_np; i++) {
            if (g->ad_partials[i].t != t) continue;
            if (g->ad_partials[i].node == g->ad_node && g->ad_partials[i].slot == g->ad_slot)
                return g->ad_partials[i].grad;
            k++;
        }
        gr_tensor src = g->tensors[t];
        char name[GR_TNAME_MAX + 24];
        snprintf(name, sizeof name, "%s.grad.%d", src.name, k);
        int gt = gr_graph_add_tensor(g, name, GR_TK_ACT, GR_F32, src.ndim, src.shape, src.batched);
        GR_GROW(g->ad_partials, g->ad_cap, g->ad_np + 1);
        g->ad_partials[g->ad_np++] = (struct gr_partial){t, g->ad_node, g->ad_slot, gt};
        return gt;
    }
    if (g->tensors[t].grad >= 0) return g->tensors[t].grad;
    gr_tensor src = g->tensors[t]; /* copy: add_tensor may move the array */
    char name[GR_TNAME_MAX + 8];
    snprintf(name, sizeof name, "%s.grad", src.name);
    gr_tensor_kind kind = src.kind == GR_TK_PARAM ? GR_TK_GRAD : GR_TK_ACT;
    int gt = gr_graph_add_tensor(g, name, kind, GR_F32, src.ndim, src.shape, src.batched);
    g->tensors[gt].param_offset = src.param_offset;
    g->tensors[gt].layer = src.layer;
    snprintf(g->tensors[gt].pname, sizeof g->tensors[gt].pname, "%s", src.pname);
    g->tensors[t].grad = gt;
    return gt;
}

int64_t gr_graph_flops(const gr_graph *g, bool train) {
    int64_t f = 0;
    for (int i = 0; i < (train ? g->n_nodes : g->n_forward); i++) f += g->nodes[i].flops;
    return f;
}

void gr_graph_free(gr_graph *g) {
    free(g->ad_readers);
    free(g->ad_partials);
    free(g->tensors);
    free(g->nodes);
    free(g->layers);
    memset(g, 0, sizeof *g);
}

/* p[0..n) ~ N(0, std^2): Box-Muller on pairs of the stream's uniforms
 * (u1 in (0, 1], so the log is finite), both values of each pair used. */
static void gr_graph_init_normal(float *p, int64_t n, double std, uint64_t key) {
    const double two_pi = 6.283185307179586;
    for (int64_t k = 0; k < n; k += 2) {
        const double u1 = 1.0 - (double)gr_uniform(key, (uint64_t)k), u2 = (double)gr_uniform(key, (uint64_t)k + 1);
        const double r = std * sqrt(-2.0 * log(u1));
        p[k] = (float)(r * cos(two_pi * u2));
        if (k + 1 < n) p[k + 1] = (float)(r * sin(two_pi * u2));
    }
}

void gr_graph_init_params(const gr_graph *g, float *params, uint64_t seed) {
    memset(params, 0, (size_t)g->n_params * sizeof *params); /* the alignment gaps */
    for (int i = 0; i < g->n_tensors; i++) {
        const gr_tensor *t = &g->tensors[i];
        if (t->kind != GR_TK_PARAM && t->kind != GR_TK_STATE) continue;
        int64_t n = gr_tensor_numel(t);
        float *p = params + t->param_offset;
        if (t->init == GR_INIT_NORMAL) {
            gr_graph_init_normal(p, n, g->nodes[g->layers[t->layer].node].attrs.init_std,
                                 gr_hash64(seed, 0x5EED0000ull + (uint64_t)i));
            continue;
        }
        if (t->init != GR_INIT_FAN_IN) {
            float v = t->init == GR_INIT_ONE ? 1.0f : 0.0f;
            for (int64_t k = 0; k < n; k++) p[k] = v;
            continue;
        }
        /* nn.Linear / nn.Conv2d: weight and bias ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in)),
         * fan_in = the weight's elements per output (in/groups * kh * kw) */
        const gr_node *nd = &g->nodes[g->layers[t->layer].node];
        const gr_tensor *w = &g->tensors[nd->in[1]];
        /* a transposed tied dense (attrs.weight_t) reads its weight stored [in, units] */
        int64_t fan_in = nd->attrs.weight_t ? w->shape[0] : gr_tensor_numel(w) / w->shape[0];
        float bound = 1.0f / sqrtf((float)fan_in);
        uint64_t key = gr_hash64(seed, 0x5EED0000ull + (uint64_t)i);
        for (int64_t k = 0; k < n; k++) p[k] = (2.0f * gr_uniform(key, (uint64_t)k) - 1.0f) * bound;
    }
}

void gr_graph_view_out(gr_graph *g, int node, int ndim, const int64_t *shape) {
    const int xi = g->nodes[node].in[0];
    int y = gr_graph_add_tensor(g, g->layers[g->nodes[node].layer].name, GR_TK_ACT, GR_F32, ndim, shape, true);
    g->tensors[y].alias_of = xi;
    g->nodes[node].out[0] = y;
    g->nodes[node].nout = 1;
}

int gr_graph_unary_backward(gr_graph *g, int node) {
    const gr_node nd = g->nodes[node];
    if (!g->tensors[nd.in[0]].requires_grad) return -1;
    int dy = gr_graph_grad(g, nd.out[0]);
    int dx = gr_graph_grad(g, nd.in[0]);
    int in[1] = {dy}, out[1] = {dx};
    int k = gr_graph_add_node(g, gr_op_bwd(nd.op), nd.layer, in, 1, out, 1);
    g->nodes[k].fwd = node;
    return k;
}

void gr_graph_view_backward(gr_graph *g, int node) {
    const int k = gr_graph_unary_backward(g, node);
    if (k >= 0) g->tensors[g->nodes[k].out[0]].alias_of = g->nodes[k].in[0];
}

void gr_graph_place_params(gr_graph *g) {
    /* params first, then non-trainable state, so the grads arena mirrors
     * the front of the params arena */
    int64_t off = 0;
    g->n_weights = 0;
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < g->n_tensors; i++) {
            gr_tensor *t = &g->tensors[i];
            if (t->kind != (pass == 0 ? GR_TK_PARAM : GR_TK_STATE)) continue;
            t->param_offset = off;
            off = (off + gr_tensor_numel(t) + GR_PARAM_ALIGN - 1) / GR_PARAM_ALIGN * GR_PARAM_ALIGN;
            if (pass == 0) g->n_weights += gr_tensor_numel(t);
        }
        if (pass == 0) g->n_trainable = off;
    }
    g->n_params = off;
}
