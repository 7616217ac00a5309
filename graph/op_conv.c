/* op_conv.c — conv (PyTorch nn.Conv2d). STUB: being written. */
#include "graph.h"

static gr_status gr_stub_infer(gr_graph *g, int node, const gr_cfg *at, const char *key, gr_error *err) {
    return gr_cfg_error(err, at, key, "op %s is not implemented yet", gr_op_name(g->nodes[node].op));
}

const gr_op_desc gr_op_desc_conv = {"conv", GR_OPF_LAYER, NULL, gr_stub_infer, NULL};
const gr_op_desc gr_op_desc_conv_bwd_data = {"conv_bwd_data", GR_OPF_BACKWARD, NULL, NULL, NULL};
const gr_op_desc gr_op_desc_conv_bwd_params = {"conv_bwd_params", GR_OPF_BACKWARD, NULL, NULL, NULL};
