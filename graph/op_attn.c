/* op_attn.c — attention: multi-head scaled dot-product self-attention on
 * one fused projection, as nanoGPT's CausalSelfAttention between c_attn and
 * c_proj (and llm.c's attention_forward):
 *   qkv [n, T, 3C] -> y [n, T, C]
 * q, k and v are qkv's columns [0, C), [C, 2C) and [2C, 3C); head h owns
 * columns [h*D, (h+1)*D) of each (D = C / heads), so y's head h is
 * softmax(q_h k_h^T / sqrt(D) + mask) v_h in its columns, the mask hiding
 * the positions after each query when causal (the default):
 * torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
 * on q, k, v viewed [n, heads, T, D].
 *
 * Forward also writes lse [n, heads, T], each query row's log-sum-exp of
 * its scaled scores (fp32 under mixed precision: GR_OPF_FP32_SAVED). Backward
 * recomputes the scores from qkv and lse, so no T x T matrix is kept for
 * it: in {dy, qkv, y, lse}, out {dqkv, delta [n, heads, T]}, delta being
 * each row's dy . y (the softmax gradient's correction), the kernels'
 * scratch.
 *
 * In a decoding graph (gr_graph.decode_len > 0: `gpurun generate`) qkv is
 * one position [n, 1, 3C], at gr_exec_ctx.pos, and the node has a third
 * output, cache [n, decode_len, 2C] (GR_TK_CACHE): each run writes its
 * position's k and v there (columns [0, C) and [C, 2C)) and attends to the
 * positions up to it, which earlier runs wrote. No backward. */
#include "graph.h"

#include <stdio.h>

static const gr_attr_def gr_attn_attr_defs[] = {
    GR_ATTR("heads", heads, 1, 4096, 0, GR_ATTR_REQUIRED),
    GR_ATTR("causal", causal, 0, 0, 1, 0),
};
static const gr_attr_table gr_attn_attrs =
    GR_ATTR_TABLE(gr_attn_attr_defs, "attention needs attributes, e.g. {heads: 12}", NULL);

static gr_status gr_attn_infer(gr_graph *g, int node, const gr_cfg *at, const char *key, gr_error *err) {
    gr_node *nd = &g->nodes[node];
    const gr_tensor x = g->tensors[nd->in[0]];
    const int64_t heads = nd->attrs.heads;
    char buf[96];
    if (x.ndim != 3 || !x.batched || x.elem != GR_F32)
        return gr_cfg_error(err, at, key, "attention needs a float input [batch, T, 3*C] (q, k and v side by side, "
                            "as one dense layer of 3*C units makes them), got %s", gr_shape_str_n(&x, buf, sizeof buf));
    const int64_t t = x.shape[1], c3 = x.shape[2];
    if (c3 % (3 * heads) != 0)
        return gr_cfg_error(err, at, key, "attention: the input's last axis (%lld) must be 3 * C with C divisible by "
                            "heads (%lld)", (long long)c3, (long long)heads);
    const int64_t c = c3 / 3, d = c / heads;
    if (d > GR_ATTN_MAX_HEAD)
        return gr_cfg_error(err, at, key, "attention: a head of %lld columns (C %lld / heads %lld); at most %d",
                            (long long)d, (long long)c, (long long)heads, GR_ATTN_MAX_HEAD);
    if (g->decode_len > 0 && (t != 1 || !nd->attrs.causal))
        return gr_cfg_error(err, at, key, "attention: decoding one position at a time takes %s",
                            nd->attrs.causal ? "inputs of one position" : "causal attention (causal: false sees "
                            "the positions after each one, which are not there yet)");
    const char *lname = g->layers[nd->layer].name;
    int64_t yshape[3] = {x.shape[0], t, c}, lshape[3] = {x.shape[0], heads, t};
    int y = gr_graph_add_tensor(g, lname, GR_TK_ACT, GR_F32, 3, yshape, true);
    char sname[GR_NAME_MAX + 8];
    snprintf(sname, sizeof sname, "%s.lse", lname);
    int lse = gr_graph_add_tensor(g, sname, GR_TK_ACT, GR_F32, 3, lshape, true);
    nd = &g->nodes[node];
    nd->out[0] = y;
    nd->out[1] = lse;
    nd->nout = 2;
    if (g->decode_len > 0) {
        int64_t cshape[3] = {x.shape[0], g->decode_len, 2 * c};
        snprintf(sname, sizeof sname, "%s.cache", lname);
        int cache = gr_graph_add_tensor(g, sname, GR_TK_CACHE, GR_F32, 3, cshape, true);
        nd = &g->nodes[node];
        nd->out[2] = cache;
        nd->nout = 3;
    }
    /* q.k and p.v over the (key, query) pairs a row sees: T^2 of them, about
     * half causal; 2 flops each per column of both products */
    const int64_t pairs = g->decode_len > 0 ? g->decode_len / 2 : nd->attrs.causal ? t * (t + 1) / 2 : t * t;
    nd->flops = 4 * pairs * c;
    return GR_OK;
}

static void gr_attn_backward(gr_graph *g, int node) {
    gr_node nd = g->nodes[node];
    if (!g->tensors[nd.in[0]].requires_grad || g->decode_len > 0) return;
    const gr_tensor lse = g->tensors[nd.out[1]];
    int dy = gr_graph_grad(g, nd.out[0]);
    int dx = gr_graph_grad(g, nd.in[0]);
    char dname[GR_TNAME_MAX + 8];
    snprintf(dname, sizeof dname, "%s.delta", g->layers[nd.layer].name);
    int delta = gr_graph_add_tensor(g, dname, GR_TK_ACT, GR_F32, lse.ndim, lse.shape, true);
    int in[4] = {dy, nd.in[0], nd.out[0], nd.out[1]}, out[2] = {dx, delta};
    int k = gr_graph_add_node(g, gr_op_bwd(nd.op), nd.layer, in, 4, out, 2);
    g->nodes[k].fwd = node;
    g->nodes[k].attrs = nd.attrs;
    /* the scores recomputed, then dp = dy.v, dq, dk and dv: 5 products */
    g->nodes[k].flops = nd.flops * 5 / 2;
}

const gr_op_impl gr_op_impl_attention = {&gr_attn_attrs, NULL, gr_attn_infer, gr_attn_backward};
