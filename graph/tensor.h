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
/* A layer's attributes in a process's part (the builder's, gr_graph_io.tp):
 * a column layer's units and an attention's heads over t; others as they
 * are (a row layer's input is the column part's output). */
void gr_tp_part_attrs(const gr_tp_plan *tp, int layer, gr_attrs *a);
/* Between the whole model's arenas (full, of graph `whole`) and process
 * rank's part (part, of graph `pg`, built with gr_tp_part_attrs): every
 * PARAM tensor (STATE too when trainable_only is false) of the part, the
 * rank's slice of the whole one (column: its rows, for q, k, v those of its
 * heads; row: its columns; a row layer's bias: rank 0's, zeros elsewhere;
 * replicated: all of it). to_part: full -> part; else part -> full, writing
 * only what the rank owns (a row bias and replicated tensors: rank 0), so a
 * sum of the group's zero-filled full buffers is the whole model. Offsets
 * add full_base and part_base (an optimizer slot's). */
void gr_tp_copy(const gr_graph *whole, const gr_graph *pg, const gr_tp_plan *tp, int rank, float *full,
                float *part, int64_t full_base, int64_t part_base, bool to_part, bool trainable_only);
/* "replicated", "column", "column (q, k, v)", "sharded", "heads", "row" */
const char *gr_tp_role_name(gr_tp_role r);

#endif
