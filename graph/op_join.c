/* op_join.c — add and concat. STUB: being written. */
#include "graph.h"

static gr_status gr_stub_infer(gr_graph *g, int node, const gr_cfg *at, const char *key, gr_error *err) {
    return gr_cfg_error(err, at, key, "op %s is not implemented yet", gr_op_name(g->nodes[node].op));
}

const gr_op_desc gr_op_desc_add = {"add", GR_OPF_LAYER, NULL, gr_stub_infer, NULL};
const gr_op_desc gr_op_desc_concat = {"concat", GR_OPF_LAYER, NULL, gr_stub_infer, NULL};
const gr_op_desc gr_op_desc_add_bwd = {"add_bwd", GR_OPF_BACKWARD | GR_OPF_VIEW, NULL, NULL, NULL};
const gr_op_desc gr_op_desc_concat_bwd = {"concat_bwd", GR_OPF_BACKWARD, NULL, NULL, NULL};
