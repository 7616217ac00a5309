/* autodiff.c — backward as a graph rewrite: walks the forward nodes in
 * reverse and lets each op's descriptor append ordinary nodes that compute
 * the gradients of the inputs that need one. The result runs on any backend
 * that has the kernels.
 *
 * Gradient accumulation contract: parameter-gradient nodes ADD into the
 * grads arena (the runner zeroes it once per optimizer step), activation
 * gradients are written, each by exactly one node (fan-out is refused by
 * build.c until the add op lands). */
#include "graph.h"

void gr_autodiff(gr_graph *g, bool need_input_grad) {
    GR_ASSERT(g->n_nodes == g->n_forward);
    g->tensors[g->input].requires_grad = need_input_grad;
    for (int i = 0; i < g->n_forward; i++) {
        gr_node *nd = &g->nodes[i];
        bool rg = false;
        for (int k = 0; k < nd->nin; k++)
            if (g->tensors[nd->in[k]].kind != GR_TK_LABEL) rg |= g->tensors[nd->in[k]].requires_grad;
        for (int k = 0; k < nd->nout; k++)
            if (g->tensors[nd->out[k]].elem == GR_F32) g->tensors[nd->out[k]].requires_grad = rg;
    }
    for (int i = g->n_forward - 1; i >= 0; i--) {
        const gr_node *nd = &g->nodes[i];
        const gr_op_desc *d = gr_op_descs[nd->op];
        bool is_loss = (d->flags & GR_OPF_LOSS) != 0;
        if (!is_loss && g->tensors[nd->out[0]].grad < 0) continue; /* no gradient reaches it */
        GR_ASSERT(d->backward);
        d->backward(g, i);
    }
}
