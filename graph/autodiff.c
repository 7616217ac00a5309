/* autodiff.c — backward as a graph rewrite: walks the forward nodes in
 * reverse and lets each op's implementation append ordinary nodes that compute
 * the gradients of the inputs that need one. The result runs on any backend
 * that has the kernels.
 *
 * Gradient accumulation contract: parameter-gradient nodes ADD into the
 * grads arena (the runner zeroes it once per optimizer step); activation
 * gradients are written, each by exactly one node. A tensor that several
 * nodes read (a residual's input) gets one partial gradient per reader
 * (gr_graph_grad), and add nodes sum them into its gradient just before its
 * producer's backward, which reads it.
 *
 * A parameter that several nodes read (a tied weight, op_dense.c; an
 * embedding's weight read by a tied dense head, op_embed.c) gets no
 * partials: each reader's backward adds its partial straight into the one
 * GRAD tensor (its grads arena slot), as the contract above has every
 * parameter-gradient node do, so the slot ends as the sum over readers, added
 * in backward order (the last reader's first), the same on every run. A
 * partial written to an activation and summed by an add node would also drop
 * the earlier micro-batches' accumulation, which the slot holds. A parameter
 * read once is counted as before and gets its gradient node as before. */
#include "graph.h"

/* Emits grad(t) = the sum of t's partial gradients, in add nodes of at most
 * GR_MAX_IN inputs each. */
static void gr_autodiff_sum(gr_graph *g, int t, int layer) {
    int parts[256], m = 0;
    for (int i = 0; i < g->ad_np && m < (int)GR_ARRAY_LEN(parts); i++)
        if (g->ad_partials[i].t == t) parts[m++] = g->ad_partials[i].grad;
    GR_ASSERT(m < (int)GR_ARRAY_LEN(parts));
    if (m == 0) return;
    const int grad = gr_graph_grad(g, t); /* ad_node is -1 here: the real gradient */
    int acc = -1, used = 0, step = 0;
    while (used < m) {
        int in[GR_MAX_IN], k = 0;
        if (acc >= 0) in[k++] = acc;
        while (k < GR_MAX_IN && used < m) in[k++] = parts[used++];
        int out = grad;
        if (used < m) {
            gr_tensor src = g->tensors[t];
            char name[GR_TNAME_MAX + 24];
            snprintf(name, sizeof name, "%s.grad.sum%d", src.name, step++);
            out = gr_graph_add_tensor(g, name, GR_TK_ACT, GR_F32, src.ndim, src.shape, src.batched);
        }
        int outs[1] = {out};
        int nd = gr_graph_add_node(g, GR_OP_ADD, layer, in, k, outs, 1);
        g->nodes[nd].flops = (k - 1) * gr_tensor_sample_numel(&g->tensors[t]);
        acc = out;
    }
}

void gr_autodiff(gr_graph *g, bool need_input_grad) {
    GR_ASSERT(g->n_nodes == g->n_forward);
    /* integer inputs (token ids) have no gradient, whatever is asked */
    g->tensors[g->input].requires_grad = need_input_grad && g->tensors[g->input].elem == GR_F32;
    for (int i = 0; i < g->n_forward; i++) {
        gr_node *nd = &g->nodes[i];
        bool rg = false;
        for (int k = 0; k < nd->nin; k++)
            if (g->tensors[nd->in[k]].kind != GR_TK_LABEL) rg |= g->tensors[nd->in[k]].requires_grad;
        for (int k = 0; k < nd->nout; k++)
            if (g->tensors[nd->out[k]].elem == GR_F32) g->tensors[nd->out[k]].requires_grad = rg;
    }
    g->ad_n = g->n_tensors;
    g->ad_readers = gr_xcalloc((size_t)g->ad_n, sizeof *g->ad_readers);
    for (int i = 0; i < g->n_forward; i++) {
        if (gr_op_bwd(g->nodes[i].op) == GR_OP_NONE) continue; /* a metric: no gradient comes from it */
        for (int k = 0; k < g->nodes[i].nin; k++) /* parameters: their readers add into the slot (above) */
            if (g->tensors[g->nodes[i].in[k]].kind != GR_TK_PARAM) g->ad_readers[g->nodes[i].in[k]]++;
    }
    g->ad_node = -1;
    for (int i = g->n_forward - 1; i >= 0; i--) {
        const gr_node nd = g->nodes[i]; /* a copy: gr_autodiff_sum appends nodes, which may move the array */
        for (int k = 0; k < nd.nout; k++) gr_autodiff_sum(g, nd.out[k], nd.layer);
        const gr_op_impl *impl = gr_op_impl_of(nd.op);
        bool is_loss = (gr_op_flags(nd.op) & GR_OPF_LOSS) != 0;
        if (!is_loss && g->tensors[nd.out[0]].grad < 0) continue; /* no gradient reaches it */
        GR_ASSERT(impl && impl->backward);
        g->ad_node = i;
        impl->backward(g, i);
        g->ad_node = -1;
    }
    if (need_input_grad) gr_autodiff_sum(g, g->input, -1);
}
