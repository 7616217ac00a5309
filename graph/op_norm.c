/* op_norm.c — layernorm (PyTorch nn.LayerNorm(C) / F.layer_norm over the
 * last axis): each row of C values of x [batch, ..., C] (rank 2 to 4) is
 * normalized by its own mean and biased variance,
 *   y = (x - mean) * rstd * weight[j] + bias[j],  rstd = 1 / sqrt(var + eps),
 * the same in training and eval (no running statistics). weight [C] starts
 * at ones, bias [C] at zeros; `bias: false` leaves the bias out.
 *
 * Node layout:
 *   layernorm      in  {x, weight, bias (with bias)}     out {y, saved}
 *   layernorm_bwd  in  {dy, x, weight, saved}            out {dweight, dbias (with bias), dx (when x needs it)}
 * saved [batch, ..., 2] holds each row's {mean, rstd} as the forward computed
 * them (llm.c's layout), so the backward does not recompute them; it is
 * batched and, the row being GR_OPF_FP32_SAVED, stays fp32 under mixed
 * precision. The backward node carries the forward's attrs (bias says
 * whether out[1] is dbias). */
#include "graph.h"

#include <stdio.h>

static const gr_attr_def gr_ln_attr_defs[] = {
    GR_ATTR("eps", eps, 0.0, 1.0, 1e-5, GR_ATTR_POSITIVE),
    GR_ATTR("bias", bias, 0, 0, 1, 0),
};
static const gr_attr_table gr_ln_attrs =
    GR_ATTR_TABLE(gr_ln_attr_defs, "expected a map of attributes, e.g. {eps: 1e-5, bias: true}", NULL);

static gr_status gr_ln_infer(gr_graph *g, int node, const gr_cfg *at, const char *key, gr_error *err) {
    gr_node *nd = &g->nodes[node];
    const gr_tensor x = g->tensors[nd->in[0]];
    char buf[96];
    if (x.elem != GR_F32)
        return gr_cfg_error(err, at, key, "layernorm takes a float input; '%s' is %s %s", x.name,
                            gr_elem_name(x.elem), gr_shape_str_n(&x, buf, sizeof buf));
    if (!x.batched || x.ndim < 2)
        return gr_cfg_error(err, at, key, "layernorm needs [batch, ..., C] input of rank 2 to %d (it normalizes "
                            "the last axis), got %s", GR_MAX_DIMS, gr_shape_str_n(&x, buf, sizeof buf));
    const int layer = nd->layer; /* nd is read before the appends below, never after */
    const bool bias = nd->attrs.bias;
    const int64_t c = x.shape[x.ndim - 1];
    int64_t cshape[1] = {c}, sshape[GR_MAX_DIMS];
    for (int d = 0; d < x.ndim; d++) sshape[d] = x.shape[d];
    sshape[x.ndim - 1] = 2;
    int w = gr_graph_add_param(g, layer, "weight", 1, cshape);
    g->tensors[w].init = GR_INIT_ONE; /* as nn.LayerNorm */
    int b = -1;
    if (bias) {
        b = gr_graph_add_param(g, layer, "bias", 1, cshape);
        g->tensors[b].init = GR_INIT_ZERO;
    }
    const char *lname = g->layers[layer].name;
    int y = gr_graph_add_tensor(g, lname, GR_TK_ACT, GR_F32, x.ndim, x.shape, true);
    char sname[GR_NAME_MAX + 8];
    snprintf(sname, sizeof sname, "%s.saved", lname);
    int saved = gr_graph_add_tensor(g, sname, GR_TK_ACT, GR_F32, x.ndim, sshape, true);
    nd = &g->nodes[node];
    nd->in[1] = w;
    nd->nin = 2;
    if (b >= 0) nd->in[nd->nin++] = b;
    nd->out[0] = y;
    nd->out[1] = saved;
    nd->nout = 2;
    /* the mean, the squared deviations, the affine map: ~ 8 per element */
    nd->flops = 8 * gr_tensor_sample_numel(&x);
    return GR_OK;
}

static void gr_ln_backward(gr_graph *g, int node) {
    gr_node nd = g->nodes[node];
    int x = nd.in[0], w = nd.in[1], b = nd.nin > 2 ? nd.in[2] : -1;
    int dy = gr_graph_grad(g, nd.out[0]);
    int in[4] = {dy, x, w, nd.out[1]}, out[3] = {gr_graph_grad(g, w), -1, -1};
    int nout = 1;
    if (b >= 0) out[nout++] = gr_graph_grad(g, b);
    const bool dx = g->tensors[x].requires_grad;
    if (dx) out[nout++] = gr_graph_grad(g, x);
    int k = gr_graph_add_node(g, gr_op_bwd(nd.op), nd.layer, in, 4, out, nout);
    g->nodes[k].fwd = node;
    g->nodes[k].attrs = nd.attrs;
    /* dweight and dbias: ~ 5 per element; dx: two row sums and the map, ~ 10 more */
    g->nodes[k].flops = (dx ? 15 : 5) * gr_tensor_sample_numel(&g->tensors[x]);
}

const gr_op_impl gr_op_impl_layernorm = {&gr_ln_attrs, NULL, gr_ln_infer, gr_ln_backward};
