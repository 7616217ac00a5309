/* op_pool.c — maxpool, avgpool, global_avgpool. STUB: being written. */
#include "graph.h"

static gr_status gr_stub_infer(gr_graph *g, int node, const gr_cfg *at, const char *key, gr_error *err) {
    return gr_cfg_error(err, at, key, "op %s is not implemented yet", gr_op_name(g->nodes[node].op));
}

const gr_op_desc gr_op_desc_maxpool = {"maxpool", GR_OPF_LAYER, NULL, gr_stub_infer, NULL};
const gr_op_desc gr_op_desc_avgpool = {"avgpool", GR_OPF_LAYER, NULL, gr_stub_infer, NULL};
const gr_op_desc gr_op_desc_global_avgpool = {"global_avgpool", GR_OPF_LAYER, NULL, gr_stub_infer, NULL};
const gr_op_desc gr_op_desc_maxpool_bwd = {"maxpool_bwd", GR_OPF_BACKWARD, NULL, NULL, NULL};
const gr_op_desc gr_op_desc_avgpool_bwd = {"avgpool_bwd", GR_OPF_BACKWARD, NULL, NULL, NULL};
const gr_op_desc gr_op_desc_global_avgpool_bwd = {"global_avgpool_bwd", GR_OPF_BACKWARD, NULL, NULL, NULL};
