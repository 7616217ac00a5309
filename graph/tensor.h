/* tensor.h — tensor parallelism, pure planning: which layers of a built
 * graph a tensor group of t processes splits, and how (Megatron-LM's
 * layout). Nothing here runs a split: `gpurun plan` prints it (issue 27).
 *
 * A pair of dense layers with only elementwise activations between them
 * (`dense -> relu/gelu/... -> dense`, a transformer's MLP) is split column
 * then row: the first's output units (its weight's rows and its bias) in t
 * equal parts, the activations between on those parts, the second's input
 * columns in t parts, its partial outputs summed over the group (one
 * all-reduce forward) and its bias added once; the first's input gradient
 * is the sum of the parts' (one all-reduce backward). Attention between two
 * dense layers (`dense(3C) -> attention -> dense`) splits by heads: the
 * projection's q, k and v rows of heads [h t/... ) each, the attention over
 * heads/t heads, the output projection by rows as above. Every other layer
 * (embeddings, layernorm, residual adds, a head) is replicated: computed
 * alike on every process of the group, on inputs that are alike.
 *
 * What it cannot split is refused at the layer's file:line:col (exit 2):
 * convolutions (and the layers of a convolutional model: pooling,
 * batchnorm), a unit or head count that t does not divide, and a model
 * without a pair to split.
 *
 * Exports: gr_tp_plan_make / gr_tp_plan_free, gr_tp_role_name. */
#ifndef GR_TENSOR_H
#define GR_TENSOR_H

#include "graph.h"

typedef enum gr_tp_role {
    GR_TP_REPLICATED,  /* computed whole on every process of the group */
    GR_TP_COLUMN,      /* dense: its output units split in t parts (rows of the weight, the bias) */
    GR_TP_COLUMN_QKV,  /* dense(3C) before attention: the q, k and v rows of each part's heads */
    GR_TP_SHARDED,     /* elementwise between a pair: on its part of the units */
    GR_TP_HEADS,       /* attention: heads / t heads each */
    GR_TP_ROW,         /* dense: its input columns split; partial outputs summed over the group */
    GR_TP_ROLE_COUNT
} gr_tp_role;

typedef struct gr_tp_plan {
    int t;                 /* processes of the tensor group */
    gr_tp_role *role;      /* [g->n_layers] */
    int pairs;             /* column/row pairs (attention's among them) */
    int64_t split_params;  /* parameters of split layers (each process holds 1/t of them) */
    int64_t repl_params;   /* parameters of replicated layers (each holds all) */
    int64_t allreduce_fwd; /* floats all-reduced per sample: forward (the row layers' outputs) */
    int64_t allreduce_bwd; /* and backward (the column layers' input gradients) */
} gr_tp_plan;

/* The split of g's forward layers over t processes (1..4096; t = 1: all
 * replicated). Usage errors (exit 2) at the refused layer's YAML item, or
 * at parallel.tensor: see above. out is empty on error (free is safe). */
gr_status gr_tp_plan_make(const gr_graph *g, const gr_job_spec *spec, int t, gr_tp_plan *out, gr_error *err);
void gr_tp_plan_free(gr_tp_plan *tp);
/* "replicated", "column", "column (q, k, v)", "sharded", "heads", "row" */
const char *gr_tp_role_name(gr_tp_role r);

#endif
