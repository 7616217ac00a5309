/* op_embed.c — the embedding family: embedding (PyTorch nn.Embedding(vocab,
 * dim)) and pos_embedding (a learned positional embedding added to its
 * input, nanoGPT's `wte(idx) + wpe(arange(T))`).
 *
 * embedding: int32 token ids [n, ...] (rank 1 to 3, the graph's typed
 * inputs) -> y [n, ..., dim] = weight[id], weight [vocab, dim] ~ N(0,
 * init_std^2). An id outside [0, vocab) at run time gives a row of NaN
 * (never a clamp, never a read outside the weight), so the loss turns NaN
 * and the run stops as diverged (the non-finite check of every step). No
 * gradient reaches the ids; backward (embedding_bwd) adds dy's rows into
 * dweight's, dweight[id] += dy[t] for every token t in order, whatever the
 * backend's threads (kernels/body_embed.h). Its weight is laid out as
 * nn.Linear's [out, in] (GR_OPF_TIEABLE): a dense layer of units vocab on
 * dim features may read it with `tied:` (a GPT's LM head), and the shared
 * weight's gradient is the sum of both readers' (autodiff.c).
 *
 * pos_embedding: x [n, T, C] -> y = x + weight[:T], broadcast over the
 * batch, weight [max_len, C]; T > max_len is refused at the layer's
 * max_len. Backward: dx = dy (pos_embedding_bwd, a view), dweight[t] +=
 * sum over the batch of dy[b, t] (pos_embedding_bwd_params, the samples
 * summed in order). In a decoding graph (gr_graph.decode_len) x is one
 * position, at gr_exec_ctx.pos: y = x + weight[pos]. */
#include "graph.h"

#include <stdio.h>

static const gr_attr_def gr_embedding_attr_defs[] = {
    GR_ATTR("vocab", vocab, 1, 1 << 24, 0, GR_ATTR_REQUIRED),
    GR_ATTR("dim", dim, 1, 1 << 24, 0, GR_ATTR_REQUIRED),
    GR_ATTR("init_std", init_std, 0.0, 1e6, 1.0, GR_ATTR_POSITIVE),
};
static const gr_attr_table gr_embedding_attrs =
    GR_ATTR_TABLE(gr_embedding_attr_defs, "embedding needs attributes, e.g. {vocab: 50304, dim: 768}", NULL);

static const gr_attr_def gr_pos_embedding_attr_defs[] = {
    GR_ATTR("max_len", max_len, 1, 1 << 24, 0, GR_ATTR_REQUIRED),
    GR_ATTR("init_std", init_std, 0.0, 1e6, 1.0, GR_ATTR_POSITIVE),
};
static const gr_attr_table gr_pos_embedding_attrs =
    GR_ATTR_TABLE(gr_pos_embedding_attr_defs, "pos_embedding needs attributes, e.g. {max_len: 1024}", NULL);

/* The layer's weight [rows, cols], initialized N(0, init_std^2). */
static int gr_embed_weight(gr_graph *g, int layer, int64_t rows, int64_t cols) {
    const int64_t shape[2] = {rows, cols};
    const int w = gr_graph_add_param(g, layer, "weight", 2, shape);
    g->tensors[w].init = GR_INIT_NORMAL;
    return w;
}

static gr_status gr_embedding_infer(gr_graph *g, int node, const gr_cfg *at, const char *key, gr_error *err) {
    const gr_node nd = g->nodes[node];
    const gr_tensor x = g->tensors[nd.in[0]];
    char buf[64];
    if (x.elem != GR_I32 || !x.batched)
        return gr_cfg_error(err, at, key, "embedding takes int32 token ids; '%s' is %s %s (declare an integer field "
                            "in model.inputs)", x.name, gr_elem_name(x.elem), gr_shape_str_n(&x, buf, sizeof buf));
    if (x.ndim >= GR_MAX_DIMS)
        return gr_cfg_error(err, at, key, "embedding adds an axis of dim to its input, but '%s' %s has %d axes "
                            "already (a tensor has at most %d)", x.name, gr_shape_str_n(&x, buf, sizeof buf), x.ndim,
                            GR_MAX_DIMS);
    int64_t yshape[GR_MAX_DIMS];
    for (int d = 0; d < x.ndim; d++) yshape[d] = x.shape[d];
    yshape[x.ndim] = nd.attrs.dim;
    const int w = gr_embed_weight(g, nd.layer, nd.attrs.vocab, nd.attrs.dim);
    const int y = gr_graph_add_tensor(g, g->layers[nd.layer].name, GR_TK_ACT, GR_F32, x.ndim + 1, yshape, true);
    gr_node *n = &g->nodes[node];
    n->in[1] = w;
    n->nin = 2;
    n->out[0] = y;
    n->nout = 1;
    n->flops = 0; /* a gather: no arithmetic */
    return GR_OK;
}

/* dweight += the rows of dy at the ids; nothing for the ids themselves */
static void gr_embedding_backward(gr_graph *g, int node) {
    const gr_node nd = g->nodes[node];
    const int dy = gr_graph_grad(g, nd.out[0]);
    const int dw = gr_graph_grad(g, nd.in[1]);
    int in[2] = {dy, nd.in[0]}, out[1] = {dw};
    const int k = gr_graph_add_node(g, gr_op_bwd(nd.op), nd.layer, in, 2, out, 1);
    g->nodes[k].fwd = node;
    g->nodes[k].attrs = nd.attrs;
    g->nodes[k].flops = gr_tensor_sample_numel(&g->tensors[nd.out[0]]);
}

/* T > max_len: the message at the layer's max_len (its value's position
 * when the item gives one: at is the item, its op's attributes under it). */
static gr_status gr_pos_embedding_too_long(const gr_graph *g, const gr_node *nd, const gr_cfg *at, const char *key,
                                           gr_error *err) {
    const gr_tensor *x = &g->tensors[nd->in[0]];
    const gr_cfg *v = gr_cfg_get(gr_cfg_get(at, gr_op_name(nd->op)), "max_len");
    char sub[700], buf[64];
    snprintf(sub, sizeof sub, "%s.max_len", key);
    return gr_cfg_error(err, v ? v : at, sub, "%lld positions, but the input has T=%lld ('%s' %s): raise max_len "
                        "or shorten the sequence", (long long)nd->attrs.max_len, (long long)x->shape[1], x->name,
                        gr_shape_str_n(x, buf, sizeof buf));
}

static gr_status gr_pos_embedding_infer(gr_graph *g, int node, const gr_cfg *at, const char *key, gr_error *err) {
    const gr_node nd = g->nodes[node];
    const gr_tensor x = g->tensors[nd.in[0]];
    char buf[64];
    if (x.elem != GR_F32 || !x.batched || x.ndim != 3)
        return gr_cfg_error(err, at, key, "pos_embedding takes a float sequence [batch, T, C]; '%s' is %s %s%s", x.name,
                            gr_elem_name(x.elem), gr_shape_str_n(&x, buf, sizeof buf),
                            x.elem == GR_I32 ? " (token ids need an embedding first)" : "");
    if (x.shape[1] > nd.attrs.max_len) return gr_pos_embedding_too_long(g, &nd, at, key, err);
    if (g->decode_len > nd.attrs.max_len) /* generate: the prompt and the tokens after it */
        return gr_cfg_error(err, at, key, "pos_embedding: %lld positions to generate through (the prompt's tokens and "
                            "the new ones), but max_len is %lld", (long long)g->decode_len, (long long)nd.attrs.max_len);
    const int w = gr_embed_weight(g, nd.layer, nd.attrs.max_len, x.shape[2]);
    const int y = gr_graph_add_tensor(g, g->layers[nd.layer].name, GR_TK_ACT, GR_F32, 3, x.shape, true);
    gr_node *n = &g->nodes[node];
    n->in[1] = w;
    n->nin = 2;
    n->out[0] = y;
    n->nout = 1;
    n->flops = x.shape[1] * x.shape[2];
    return GR_OK;
}

/* dx = dy (a view, when x needs a gradient); dweight[:T] += dy summed over the batch */
static void gr_pos_embedding_backward(gr_graph *g, int node) {
    const gr_node nd = g->nodes[node];
    const int dy = gr_graph_grad(g, nd.out[0]);
    if (g->tensors[nd.in[0]].requires_grad) {
        const int dx = gr_graph_grad(g, nd.in[0]);
        g->tensors[dx].alias_of = dy;
        int in[1] = {dy}, out[1] = {dx};
        const int k = gr_graph_add_node(g, gr_op_bwd(nd.op), nd.layer, in, 1, out, 1);
        g->nodes[k].fwd = node;
    }
    const int dw = gr_graph_grad(g, nd.in[1]);
    int in[1] = {dy}, out[1] = {dw};
    const int k = gr_graph_add_node(g, GR_OP_POS_EMBEDDING_BWD_PARAMS, nd.layer, in, 1, out, 1);
    g->nodes[k].fwd = node;
    g->nodes[k].attrs = nd.attrs;
    g->nodes[k].flops = gr_tensor_sample_numel(&g->tensors[dy]);
}

const gr_op_impl gr_op_impl_embedding = {&gr_embedding_attrs, NULL, gr_embedding_infer, gr_embedding_backward};
const gr_op_impl gr_op_impl_pos_embedding = {&gr_pos_embedding_attrs, NULL, gr_pos_embedding_infer,
                                             gr_pos_embedding_backward};
