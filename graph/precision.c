/* precision.c — the precision policy: which tensors mixed precision stores
 * in half (the rule: graph.h, gr_graph_set_precision). Pure planning: it
 * only sets gr_tensor.elem, which the memory planner sizes the activation
 * arena by and the runtime hands to the kernels. */
#include "graph.h"

size_t gr_elem_size(gr_elem e) {
    switch (e) {
    case GR_U8: return 1;
    case GR_BF16:
    case GR_F16: return 2;
    default: return 4;
    }
}

const char *gr_elem_name(gr_elem e) {
    static const char *const names[GR_ELEM_COUNT] = {
        [GR_F32] = "fp32", [GR_I32] = "int32", [GR_U8] = "uint8", [GR_BF16] = "bf16", [GR_F16] = "fp16"};
    return e >= 0 && e < GR_ELEM_COUNT ? names[e] : "?";
}

void gr_graph_set_precision(gr_graph *g, gr_precision p) {
    GR_ASSERT(g->precision == GR_PREC_FP32 || g->precision == p); /* once */
    g->precision = p;
    if (p != GR_PREC_FP16 && p != GR_PREC_BF16) return;
    const gr_elem half = p == GR_PREC_FP16 ? GR_F16 : GR_BF16;
    for (int i = 0; i < g->n_nodes; i++) {
        const gr_node *nd = &g->nodes[i];
        const unsigned f = gr_op_flags(nd->op);
        if (f & (GR_OPF_FP32_OUT | GR_OPF_VIEW)) continue;
        for (int k = 0; k < ((f & GR_OPF_FP32_SAVED) ? 1 : nd->nout); k++) {
            gr_tensor *t = &g->tensors[nd->out[k]];
            if (t->kind == GR_TK_ACT && t->elem == GR_F32 && t->batched && t->alias_of < 0)
                t->elem = half;
        }
    }
    /* views (flatten, add_bwd's pass-through) share their root's bytes */
    for (int t = 0; t < g->n_tensors; t++) {
        int r = t;
        while (g->tensors[r].alias_of >= 0) r = g->tensors[r].alias_of;
        if (r != t) g->tensors[t].elem = g->tensors[r].elem;
    }
}
