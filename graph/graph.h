/* graph.h — the graph IR: tensors and nodes, built from the job spec's
 * model section (build.c), extended with backward nodes (autodiff.c).
 *
 * Building a node computes nothing: it parses the op's attrs, infers the
 * output shape at once and creates parameter tensors. Every tensor's leading
 * dimension is the batch when `batched` is set; shapes hold the planned
 * micro-batch and a run may use any n <= it (the last eval batch).
 *
 * Exports: gr_op (enum from ops.def) and its row's accessors (gr_op_name,
 * gr_op_flags, gr_op_bwd, gr_op_lookup), gr_op_impl (an op's attribute
 * table, infer and backward) with the generic attribute parser (attrs.c),
 * gr_graph_* (build/free/add helpers), gr_autodiff. */
#ifndef GR_GRAPH_H
#define GR_GRAPH_H

#include <stddef.h>

#include "../common/gr_common.h"
#include "../config/spec.h"
#include "ops.h"

#define GR_MAX_DIMS 4
#define GR_MAX_IN 5
#define GR_MAX_OUT 3
#define GR_TNAME_MAX 192
#define GR_PARAM_ALIGN 16
#define GR_MAX_METRICS 8


/* Where a tensor lives: the plan gives each class its own arena. */
typedef enum gr_tensor_kind {
    GR_TK_PARAM,  /* trainable parameter (params arena, fp32 master) */
    GR_TK_GRAD,   /* gradient of a parameter (grads arena, same layout) */
    GR_TK_STATE,  /* non-trainable layer state, e.g. BN running stats (params arena) */
    GR_TK_INPUT,  /* the batch's images */
    GR_TK_LABEL,  /* the batch's labels (int32) */
    GR_TK_ACT,    /* activations, activation gradients, saved masks (reused by liveness) */
    GR_TK_STAT,   /* small per-step results read back by the runner ([loss sum, count], [correct, count]) */
    GR_TK_CACHE,  /* a decoding graph's keys and values (attention): activation arena, alive for the whole
                     pass and never shared, so each run finds what the earlier runs left there */
} gr_tensor_kind;

/* A tensor's storage type. Graphs are built in GR_F32/GR_I32/GR_U8; the
 * precision pass (gr_graph_set_precision) stores activations in half. */
typedef enum gr_elem { GR_F32, GR_I32, GR_U8, GR_BF16, GR_F16, GR_ELEM_COUNT } gr_elem;

size_t gr_elem_size(gr_elem e);          /* bytes per element */
const char *gr_elem_name(gr_elem e);     /* "fp32", "int32", "uint8", "bf16", "fp16" */
static inline bool gr_elem_is_half(gr_elem e) { return e == GR_BF16 || e == GR_F16; }

/* The memory order of a 4-D batched activation: NCHW as built; the layout
 * pass (gr_graph_set_layout) may store some channels-last. */
typedef enum gr_layout { GR_NCHW, GR_NHWC } gr_layout;

/* What a backend's kernel of an op does with channels-last tensors (the
 * table gr_graph_set_layout reads). */
typedef enum gr_layout_cap {
    GR_LAYOUT_CAP_NONE, /* NCHW only */
    GR_LAYOUT_CAP_SAME, /* NHWC too, when all its 4-D activations share it (relu, add, batchnorm) */
    GR_LAYOUT_CAP_ANY,  /* each 4-D activation in either (conv, global_avgpool: they convert) */
} gr_layout_cap;

/* A parameter's or state's initial value; the op that creates it says which. */
typedef enum gr_init {
    GR_INIT_FAN_IN,          /* U(+-1/sqrt(fan_in)) (nn.Linear, nn.Conv2d); add_param's default */
    GR_INIT_ZERO,            /* add_state's default */
    GR_INIT_ONE,
    GR_INIT_NORMAL,          /* N(0, init_std^2), init_std its layer node's attribute (nn.Embedding: 1) */
} gr_init;

typedef struct gr_tensor {
    char name[GR_TNAME_MAX]; /* "dense0.weight", "relu1", "relu1.grad", ... */
    gr_tensor_kind kind;
    gr_elem elem;
    gr_layout layout;        /* 4-D batched activations: NCHW unless gr_graph_set_layout chose NHWC */
    int ndim;
    int64_t shape[GR_MAX_DIMS];
    bool batched;            /* shape[0] is the batch */
    int alias_of;            /* >= 0: shares that tensor's storage (views) */
    int grad;                /* id of this tensor's gradient tensor, -1 none */
    bool requires_grad;      /* a gradient flows back to it */
    int64_t param_offset;    /* PARAM/GRAD/STATE: element offset in their arena */
    int layer;               /* PARAM/STATE: index of the layer that owns it; -1 */
    char pname[32];          /* PARAM/STATE: PyTorch tensor name ("weight", "bias") */
    gr_init init;            /* PARAM/STATE: how gr_graph_init_params fills it */
} gr_tensor;

/* A list of up to GR_MAX_DIMS integers (an attribute like `shape: [3, -1]`). */
typedef struct gr_ilist {
    int64_t v[GR_MAX_DIMS];
    int n;                   /* how many were given; 0 none */
} gr_ilist;

/* Op attributes: one flat struct (ops are few and small). Spatial pairs
 * are [h, w]. */
typedef struct gr_attrs {
    int64_t units;           /* dense */
    bool bias;               /* dense, conv, layernorm */
    double rate;             /* dropout */
    double label_smoothing;  /* softmax_cross_entropy (0) */
    int64_t ignore_index;    /* softmax_cross_entropy, accuracy: a target of this value counts nowhere (-100,
                                as PyTorch; a hand-built node must set it: 0 would ignore class 0) */
    int64_t top_k;           /* accuracy: correct when the target is among the k highest logits (1) */
    int64_t classes;         /* softmax_cross_entropy, accuracy: the classes are the first `classes` columns of
                                the last axis (train.loss.classes); the rest (a vocabulary padded to a round
                                size) are no class: out of the softmax (probability 0), gradient 0, never
                                ranked. 0: every column */
    int64_t filters;         /* conv: output channels */
    int64_t kernel[2];       /* conv, maxpool, avgpool */
    int64_t stride[2];       /* conv (1), maxpool/avgpool (kernel) */
    int64_t padding[2];      /* conv, maxpool, avgpool (0) */
    int64_t groups;          /* conv (1) */
    bool count_include_pad;  /* avgpool (true) */
    double momentum, eps;    /* batchnorm (0.1, 1e-5); layernorm eps (1e-5) */
    bool stats_later;        /* batchnorm in training: the running stats are left alone here and updated by
                                its recomputation later in the pass (gr_graph_recompute), which so reads
                                them as this node did (the shift of statistics over processes) */
    int64_t axis;            /* concat (1), slice (required): an axis of the full tensor (0 the batch), negative
                                counting from the end; infer leaves it resolved (>= 1), and so do the _bwd nodes */
    int64_t offset;          /* concat_bwd, slice_bwd: first index of this slice along axis */
    gr_ilist shape;          /* reshape: the per-sample shape, one entry may be -1 */
    gr_ilist axes;           /* permute: the full tensor's axes in their new order (axes[0] = 0); permute_bwd:
                                the inverse order */
    int64_t start, end;      /* slice: [start, end) along axis, negative counting from its end (start 0) */
    char tied[GR_NAME_MAX];  /* dense: `tied:`, the earlier dense or embedding layer (GR_OPF_TIEABLE) whose
                                weight it uses ("" none) */
    bool transpose;          /* dense: `transpose: true`, that weight used transposed (with tied only) */
    int tied_layer;          /* dense with tied: that layer's index (the builder resolves the name) */
    bool weight_t;           /* dense and its backward nodes: the weight tensor is stored [in, units], the
                                transpose of nn.Linear's (a transposed tied use): y = x W + b, dx = dy W^T,
                                dW += x^T dy; false: W [units, in] as usual */
    int64_t heads;           /* attention: heads (required), each of C / heads columns */
    bool causal;             /* attention: position t attends to positions <= t only (true) */
    int64_t vocab, dim;      /* embedding: weight [vocab, dim] */
    int64_t max_len;         /* pos_embedding: weight [max_len, C], the most positions T it takes */
    double init_std;         /* embedding, pos_embedding: the weight ~ N(0, init_std^2) (1, as nn.Embedding) */
    bool relu;               /* batchnorm, add: a relu fused after it (graph/fuse.c), its output relu(y);
                                batchnorm_bwd: dy masked by that output, its in[4] (y <= 0: 0, the relu
                                backward's rule); dense_bwd_data: dx masked by a relu's output, its in[2] */
    bool relu_mask;          /* add (autodiff's sum of gradients): its last input is a relu's output, not a
                                term: the sum masked by it (a relu's backward folded in, graph/fuse.c) */
} gr_attrs;

typedef struct gr_node {
    gr_op op;
    int layer;               /* the model layer this node belongs to; -1 loss */
    int in[GR_MAX_IN], nin;
    int out[GR_MAX_OUT], nout;
    gr_attrs attrs;
    int fwd;                 /* backward nodes: the forward node; else -1 */
    int64_t min_batch;       /* the smallest micro-batch it runs at (0: any; infer sets it) */
    int64_t flops;           /* per sample */
    bool recomputed;         /* a recomputation's copy of a forward node (recompute.c), run in the backward
                                pass; the backward pass's other non-backward nodes are autodiff's gradient sums */
    bool folded;             /* fused into a neighbour (graph/fuse.c): no kernel, its output a view of what
                                that neighbour computes (a relu after a batchnorm, and its backward) */
} gr_node;


typedef struct gr_layer {
    char name[GR_NAME_MAX];  /* its `name:`, else <op><k> */
    gr_op op;
    int node;                /* forward node */
    int64_t n_params;
    int recompute;           /* the recomputed block use it is in (gr_graph_recompute); -1: none */
    /* where its YAML item is, for messages (file:line:col; a block's layer: its template's item):
     * at_set, an --set value's, else the spec's file; at_line 0 when built otherwise */
    bool at_set;
    int at_line, at_col;
} gr_layer;

typedef struct gr_graph {
    gr_tensor *tensors; int n_tensors, cap_tensors;
    gr_node *nodes; int n_nodes, cap_nodes;
    gr_layer *layers; int n_layers, cap_layers;
    int n_forward;           /* nodes [0, n_forward) are the forward pass incl. loss */
    int input, label;        /* tensor ids: the first input; the target (today's labels) */
    int inputs[GR_MAX_IO], n_inputs; /* every input (model.inputs; one, `input`, by default) */
    int logits, loss_probs, loss_stats; /* tensor ids; loss_stats = [loss sum, count averaged over] */
    int metric_stats;        /* the first metric's [correct, count] (metrics[0].stats); -1 none */
    struct gr_metric {
        char name[32];       /* how the job's metrics name it: "accuracy", "accuracy_top5" */
        int node, stats;     /* its node and [sum, count] tensor */
    } metrics[GR_MAX_METRICS];
    int n_metrics;           /* train.metrics (head.c) */
    int64_t micro_batch;
    /* > 0: a decoding graph (`gpurun generate`): its inputs are one position
     * of each sequence, each run the next one, at gr_exec_ctx.pos; attention
     * keeps the keys and values of up to decode_len positions in a cache
     * (GR_TK_CACHE), so no run recomputes the positions before it. 0: the
     * graph of whole sequences that trains and evaluates. */
    int64_t decode_len;
    /* Arena sizes in floats: every PARAM/STATE tensor starts at a multiple of
     * GR_PARAM_ALIGN floats (64 bytes), as cuDNN/cuBLAS tensor-core kernels
     * want their weight pointers aligned; the gaps hold zeros. */
    int64_t n_params;        /* the params arena (PARAM tensors, then STATE) */
    int64_t n_trainable;     /* its PARAM front (== the grads arena, one optimizer slot) */
    int64_t n_weights;       /* elements of PARAM tensors: the model's parameter count */
    int64_t n_classes;
    uint64_t seed;
    gr_precision precision;  /* what gr_graph_set_precision stored it in (fp32 before) */
    /* autodiff's bookkeeping (autodiff.c): a tensor read by several forward
     * nodes gets one partial gradient per reader, summed by an add node */
    int ad_node;             /* forward node whose backward is being emitted; -1 */
    int ad_slot;             /* which of its inputs a gradient is asked for (add, concat: a
                                layer may read one tensor twice, [a, a]: a partial each) */
    int ad_n;                /* tensors that existed when autodiff began */
    int *ad_readers;         /* [ad_n]: how many forward node inputs read each (parameters: 0; their
                                readers all add into the one GRAD tensor) */
    struct gr_partial { int t, node, slot, grad; } *ad_partials;
    int ad_np, ad_cap;
} gr_graph;

/* ---- op attributes: one table per op, read by one parser (attrs.c) ---- */

typedef enum gr_attr_kind {
    GR_ATTR_INT,             /* int64_t */
    GR_ATTR_PAIR,            /* int64_t[2]: an int for both spatial sides or a [h, w] list */
    GR_ATTR_FLOAT,           /* double */
    GR_ATTR_BOOL,            /* bool */
    GR_ATTR_NAME,            /* char[GR_NAME_MAX]: a layer name (a non-empty scalar; default "") */
    GR_ATTR_LIST,            /* gr_ilist: a list of 1..GR_MAX_DIMS integers, each in [lo, hi] */
} gr_attr_kind;

enum {
    GR_ATTR_REQUIRED = 1u << 0, /* "<key>: required attribute missing" when absent */
    GR_ATTR_POSITIVE = 1u << 1, /* FLOAT: also > 0 ("<key> must be positive") */
};

/* One attribute: its YAML key, where it goes, its bounds (inclusive; PAIR:
 * each side) and its value when not given (BOOL: nonzero = true). */
typedef struct gr_attr_def {
    const char *key;
    gr_attr_kind kind;
    size_t offset;           /* of its field in gr_attrs */
    double lo, hi;
    double def;
    unsigned opts;           /* GR_ATTR_* */
} gr_attr_def;

/* GR_ATTR("units", units, 1, 1 << 24, 0, GR_ATTR_REQUIRED): the kind comes
 * from the gr_attrs field's type, so a table cannot read a field as another. */
#define GR_ATTR(key, field, lo, hi, def, opts)                                                 \
    {key,                                                                                      \
     _Generic(((gr_attrs *)0)->field, int64_t: GR_ATTR_INT, int64_t *: GR_ATTR_PAIR,           \
              double: GR_ATTR_FLOAT, bool: GR_ATTR_BOOL, char *: GR_ATTR_NAME, gr_ilist: GR_ATTR_LIST), \
     offsetof(gr_attrs, field), lo, hi, def, opts}

/* An op's attributes. Attributes that are not a map are refused with usage
 * (always when one is required; else only when given and not empty); an
 * unknown key with "unknown attribute (<op> takes <keys><takes_note>)". */
typedef struct gr_attr_table {
    const gr_attr_def *defs;
    int n;
    const char *usage;       /* e.g. "dense needs attributes, e.g. {units: 10}" */
    const char *takes_note;  /* e.g. ", which must be 1"; NULL none */
} gr_attr_table;

#define GR_ATTR_TABLE(defs, usage, takes_note) {defs, (int)GR_ARRAY_LEN(defs), usage, takes_note}

/* Reads attrs (the YAML node after the op's key; NULL when none was given)
 * into a through table t: defaults first, then every key in the map's order.
 * op names the op in messages; key is the YAML path of attrs
 * ("model.layers[3].dense"). t NULL: the op takes none ("<op> takes no
 * attributes" unless attrs is empty). */
gr_status gr_attrs_read(const char *op, const gr_attr_table *t, gr_attrs *a, const gr_cfg *attrs,
                        const char *key, gr_error *err);

/* ---- the op table ---- */

/* What an op does beyond its ops.def row (graph/op_<family>.c defines
 * gr_op_impl_<name> for each forward row). attrs: NULL = takes none. check:
 * rules between attributes, after the table (may fill a default from another
 * attribute); NULL none. infer: the output's shape and the parameters.
 * backward: emits the nodes computing the gradients of the inputs that need
 * them (Caffe's propagate_down), through gr_graph_add_node.
 * The graph's arrays grow (GR_GROW): infer appends tensors, backward tensors
 * and nodes, so neither keeps a gr_tensor * or gr_node * across an append;
 * backward works from a copy of its node (`gr_node nd = g->nodes[node]`).
 * The sanitizer build moves an array on every append to catch one that does. */
typedef struct gr_op_impl {
    const gr_attr_table *attrs;
    gr_status (*check)(gr_attrs *a, const gr_cfg *attrs, const char *key, gr_error *err);
    gr_status (*infer)(gr_graph *g, int node, const gr_cfg *at, const char *key, gr_error *err);
    void (*backward)(gr_graph *g, int node);
} gr_op_impl;

#define X(E, name, ...) extern const gr_op_impl gr_op_impl_##name;
#include "ops.def"
#undef X

/* The row's name, flags (GR_OPF_*) and bwd column (GR_OP_NONE on backward rows). */
const char *gr_op_name(gr_op op);
unsigned gr_op_flags(gr_op op);
/* Whether a node runs a kernel: not a view op's (GR_OPF_VIEW), not folded into another. */
static inline bool gr_node_runs(const gr_node *nd) { return !(gr_op_flags(nd->op) & GR_OPF_VIEW) && !nd->folded; }
int gr_op_bwd(gr_op op);
/* LAYER ops only; -1 when name is none. */
int gr_op_lookup(const char *name);
/* A forward op's implementation (NULL for backward ops). */
const gr_op_impl *gr_op_impl_of(gr_op op);
/* Parses a LAYER op's attributes: its table (gr_attrs_read), then its check. */
gr_status gr_op_parse_attrs(gr_op op, gr_attrs *a, const gr_cfg *attrs, const char *key, gr_error *err);

/* Builds the forward graph + loss from spec->model and spec->train.loss for
 * samples of shape in_shape[0..in_ndim) at micro-batch spec->train.micro_batch.
 * Errors point at the YAML: "job.yaml:12:7: model.layers[3].dense.units: ...".
 * A model expands to at most 100,000 layers (checked before expanding, at
 * the block use or repeat that passes it); a job's model (spec->root set,
 * as gr_spec_load leaves it) must have trainable parameters, while a
 * hand-made spec (a gradcheck of pooling) may have none. (A signal during
 * a compile ends the process at once: runner/signals.c.) */
gr_status gr_graph_build(const gr_job_spec *spec, const int64_t *in_shape, int in_ndim,
                         gr_graph *g, gr_error *err);
/* The graph's head (graph/head.c), after its layers: the loss of
 * train.loss on the last layer's output `out` and the labels, and a metric
 * node per item of train.metrics (default: accuracy, top-1, for softmax
 * cross-entropy), each with its [sum, count] stats tensor. */
gr_status gr_graph_build_head(gr_graph *g, const gr_job_spec *spec, int out, gr_error *err);
/* The same items checked without shapes (gpurun validate). */
gr_status gr_graph_head_check(const gr_job_spec *spec, gr_error *err);
/* The graph's inputs and its target, as the data gives them: a name, an
 * element type (GR_F32 or GR_I32) and a per-sample shape of rank 0..3. */
typedef struct gr_io_tensor {
    const char *name;
    gr_elem elem;
    int ndim;
    int64_t shape[GR_MAX_DIMS - 1];
} gr_io_tensor;
typedef struct gr_graph_io {
    int n_inputs;
    gr_io_tensor in[GR_MAX_IO];
    gr_io_tensor target;
    int64_t decode_len;      /* > 0: build a decoding graph of that many positions (gr_graph.decode_len) */
    /* tensor parallelism (graph/tensor.h): build process tp_rank's part of the split tp made of this
     * model's whole graph (its units and heads over the group); NULL: the whole model */
    const struct gr_tp_plan *tp;
    int tp_rank;
} gr_graph_io;
/* gr_graph_build with the inputs and target of io (model.inputs and
 * model.targets bound to the data's fields). The first input is also
 * called `input` in the layers' `input:`; the others by their names. */
gr_status gr_graph_build_io(const gr_job_spec *spec, const gr_graph_io *io, gr_graph *g, gr_error *err);
/* The input and target tensors of io (head.c; the builder's first step). */
void gr_graph_add_io(gr_graph *g, const gr_graph_io *io);
/* Checks the model section without data (for `gpurun validate`): op names,
 * attributes, layer names and inputs; shapes too when model.input is given. */
gr_status gr_graph_check(const gr_job_spec *spec, gr_error *err);
/* Appends the backward pass (autodiff.c). need_input_grad also gives the
 * input batch a gradient (gradcheck uses it) when it is float (token ids
 * have none). */
void gr_autodiff(gr_graph *g, bool need_input_grad);
/* The micro-batch plans are made for: every batched tensor's leading
 * dimension (shape[0]) and g->micro_batch become n. Nothing else of the
 * graph depends on it (structure, names, parameters, per-sample FLOPs), so
 * a job builds its graph once and plans it at any micro-batch: the runner's
 * micro-batch search (runner/memfit.c) plans its candidates so. Refused
 * (GR_ERR_USAGE, naming the layer) below a node's min_batch (batchnorm
 * needs more than one value per channel), the graph then unchanged. */
gr_status gr_graph_set_batch(gr_graph *g, int64_t n, gr_error *err);
void gr_graph_free(gr_graph *g);
/* FLOPs per sample of the forward pass, or (train) of every node: forward,
 * loss, backward (and recomputation), as `gpurun plan` counts them. */
int64_t gr_graph_flops(const gr_graph *g, bool train);
/* Activation recomputation (graph/recompute.c), after gr_autodiff and
 * before the precision and layout passes: the forward nodes of every block
 * use built with `recompute: true` (or under train.recompute: blocks;
 * gr_layer.recompute) are copied, writing new tensors, just before the
 * first backward node of their layers, and backward from there on reads
 * the copies, so the memory planner frees the originals after forward.
 * Bit-identical results: the copies run the same kernels on the same
 * inputs (batchnorm copies leave the running statistics alone). */
void gr_graph_recompute(gr_graph *g);
/* The precision policy (graph/precision.c), run once after gr_autodiff:
 * under fp16/bf16, every activation and activation gradient a node writes
 * is stored in that type, except the outputs of GR_OPF_FP32_OUT ops (the
 * loss's probabilities and sums), the outputs after the first of
 * GR_OPF_FP32_SAVED ops (layernorm's per-row mean and rstd, attention's
 * log-sum-exp and its backward's row sums) and unbatched ones (batchnorm's
 * saved statistics); a view has its storage root's type. The input batch,
 * labels, masks, indices, parameters, gradients and optimizer state stay
 * as built (fp32 master weights). fp32/tf32 change nothing. Kernels that
 * compute in fp32 accumulate in fp32 whatever the storage. */
void gr_graph_set_precision(gr_graph *g, gr_precision p);
/* The layout pass (graph/layout.c), after gr_graph_set_precision: stores
 * channels-last every 4-D batched activation whose producer and readers all
 * take it (caps, per op: a backend's table, from ops.def's columns). A
 * tensor shares its layout with its gradient, its views, and the other 4-D
 * activations of every node whose op is GR_LAYOUT_CAP_SAME; such a node
 * that broadcasts or reads the input batch (which stays NCHW) keeps its
 * tensors NCHW. Shapes and sizes do not change (shape[] stays [n, C, H, W]). */
void gr_graph_set_layout(gr_graph *g, const gr_layout_cap caps[GR_OP_COUNT]);
/* Fusions as graph rewrites (graph/fuse.c), after gr_graph_set_precision and
 * before the layout pass; what: the GR_FUSE_* a backend's kernels take.
 * GR_FUSE_BN_RELU: a batchnorm whose output only a relu reads writes
 * relu(y) itself (attrs.relu) and the relu node folds into a view of it;
 * the relu's backward, when its gradient goes to that batchnorm's backward
 * alone, folds likewise, and the batchnorm's backward masks dy by the
 * batchnorm's output. GR_FUSE_ADD_RELU: the same forward fusion after an
 * add of equal shapes (the residual's); the relu's backward stays (the
 * add's is a view). GR_FUSE_DENSE_RELU: the same forward fusion after a
 * dense (its bias added in its GEMM, the relu in the pass that writes or
 * ends it); the relu's backward stays. GR_FUSE_DENSE_RELU_BWD: a relu's
 * backward whose gradient in is a dense backward's dx alone (the relu's
 * output was that dense's input) folds into it: the dense's backward masks
 * its dx by the relu's output (attrs.relu, the output its in[2]) while the
 * rows are in cache. GR_FUSE_SUM_RELU_BWD: a relu's backward whose gradient
 * in is autodiff's sum of partial gradients alone (a residual block's
 * output, read by the next block's conv and its add) folds into that add,
 * which masks the sum by the relu's output (attrs.relu_mask, its last
 * input). Results are the unfused pair's, bit for bit. Returns how many
 * pairs it fused (forward). */
enum {
    GR_FUSE_BN_RELU = 1u << 0,
    GR_FUSE_ADD_RELU = 1u << 1,
    GR_FUSE_DENSE_RELU = 1u << 2,
    GR_FUSE_DENSE_RELU_BWD = 1u << 3,
    GR_FUSE_SUM_RELU_BWD = 1u << 4,
};
int gr_graph_fuse(gr_graph *g, unsigned what);

/* Builder helpers for op implementations and tests. Each may move g->tensors,
 * g->nodes (and gr_graph_grad both): a pointer into them taken before the
 * call is stale after it; shapes and names passed in must not point there. */
int gr_graph_add_tensor(gr_graph *g, const char *name, gr_tensor_kind kind, gr_elem elem,
                        int ndim, const int64_t *shape, bool batched);
int gr_graph_add_param(gr_graph *g, int layer, const char *pname, int ndim, const int64_t *shape);
/* Non-trainable state of a layer (BN running stats): params arena, no grad. */
int gr_graph_add_state(gr_graph *g, int layer, const char *pname, int ndim, const int64_t *shape);
/* Places every parameter, then every state tensor, in the params arena
 * (param_offset, each GR_PARAM_ALIGN-aligned), so the grads arena mirrors
 * its front; sets n_weights, n_trainable and n_params. */
void gr_graph_place_params(gr_graph *g);
int gr_graph_add_node(gr_graph *g, gr_op op, int layer, const int *in, int nin,
                      const int *out, int nout);
/* A view op's (GR_OPF_VIEW: flatten, reshape) output of shape[0..ndim),
 * sharing its input's storage, set as the node's one output; and its
 * backward: dx a view of dy, through the op's bwd row. */
void gr_graph_view_out(gr_graph *g, int node, int ndim, const int64_t *shape);
/* The bwd row's node of a one-input op: dx (the gradient of the node's
 * input) from dy (its output's), returned for the caller to set its attrs;
 * -1, and nothing emitted, when the input needs no gradient. */
int gr_graph_unary_backward(gr_graph *g, int node);
void gr_graph_view_backward(gr_graph *g, int node);
/* The gradient tensor of t (created on first use with t's shape). Called
 * from a backward for one of the node's inputs that other nodes read too,
 * it is that node's partial gradient of t (autodiff sums them); a
 * parameter's is always its GRAD tensor, which each reader adds into. */
int gr_graph_grad(gr_graph *g, int t);
int64_t gr_tensor_numel(const gr_tensor *t);  /* with the planned batch */
int64_t gr_tensor_sample_numel(const gr_tensor *t); /* per sample (numel / batch if batched) */
/* Axis a of a tensor of ndim axes (negative: from the end) into *out, the
 * batch axis (0) only when batch_ok; else an error at at/key naming op
 * (op_shape.c; concat, slice and permute read their axes with it). */
gr_status gr_axis_resolve(int64_t a, int ndim, bool batch_ok, const char *op, const gr_cfg *at, const char *key,
                          int64_t *out, gr_error *err);
/* "[128, 512]" into buf */
const char *gr_shape_str(const gr_tensor *t, char *buf, size_t n);
/* "[n, 784]": the shape with a batched tensor's first dimension written n
 * (for messages about per-sample shapes). */
const char *gr_shape_str_n(const gr_tensor *t, char *buf, size_t n);
/* Deterministic PyTorch-style initialization of every parameter and state
 * tensor from seed, as its init says (nn.Linear/nn.Conv2d: weight and bias ~
 * U(+-1/sqrt(fan_in)); batchnorm: weight 1, bias 0, running_mean 0,
 * running_var 1; embeddings: N(0, init_std^2), Box-Muller on the same
 * counter-based stream, so the same seed gives the same weights anywhere). */
void gr_graph_init_params(const gr_graph *g, float *params, uint64_t seed);

#endif
