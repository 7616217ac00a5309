/* ops.h — the op enum and the meaning of ops.def's columns, for every
 * floor: the graph (graph.h includes this), the backends' tables and the
 * kernel bodies (kernels/body_*.h, compiled by nvcc too: this header is
 * C11 and C++ at once and includes nothing).
 *
 * Exports: gr_op (one value per ops.def row, GR_OP_COUNT of them), GR_OP_NONE,
 * the flags column's bits (GR_OPF_*) and the backend columns' bits (GR_CAP_*). */
#ifndef GR_OPS_H
#define GR_OPS_H

/* The flags column of ops.def (what each means: the comment there). */
enum {
    GR_OPF_LAYER = 1u << 0,
    GR_OPF_VIEW = 1u << 1,
    GR_OPF_BACKWARD = 1u << 2,
    GR_OPF_LOSS = 1u << 3,
    GR_OPF_JOIN = 1u << 4,
    GR_OPF_FP32_OUT = 1u << 5,
    GR_OPF_ACT = 1u << 6,
    GR_OPF_ACT_SAVES_X = 1u << 7,
    GR_OPF_RUNNING_STATS = 1u << 8,
    GR_OPF_METRIC = 1u << 9,
    GR_OPF_TIEABLE = 1u << 10,
    GR_OPF_FP32_SAVED = 1u << 11,
};

/* The cpu and cuda columns of ops.def: what that backend's kernel of the op
 * takes beyond fp32 NCHW storage (0: nothing). Half: the step's activations
 * in half as they are (the backend's native_half; otherwise mixed precision
 * stages the step through fp32 copies). Layout: channels-last 4-D
 * activations (the layout pass, graph.h gr_graph_set_layout). */
enum {
    GR_CAP_HALF = 1u << 0,      /* half storage, whatever the step's tensors are in */
    GR_CAP_HALF_IN0 = 1u << 1,  /* half when its first input is half (a weight gradient read from it) */
    GR_CAP_HALF_ALL = 1u << 2,  /* half when every activation of the step is in the one half type */
    GR_CAP_NHWC_SAME = 1u << 3, /* NHWC when all its 4-D activations share it (relu, add, batchnorm) */
    GR_CAP_NHWC_ANY = 1u << 4,  /* each 4-D activation in either layout (the convolutions convert) */
    /* half when every activation but the fp32 saved statistics (GR_OPF_FP32_SAVED) is in the one half
     * type and the backend's library takes the step's shape: the backend asks it as the plan is
     * compiled and stages the step where it declines (attention on cuDNN's fused attention) */
    GR_CAP_HALF_LIB = 1u << 5,
    GR_CAP_RELU_AFTER = 1u << 6, /* a relu fused after it (attrs.relu, graph/fuse.c): batchnorm and its backward,
                                    add of equal shapes, dense */
    /* a relu's backward folded in (graph/fuse.c): its output masked by the relu's output, its last input
     * (dense_bwd_data: attrs.relu, the relu's output the dense's input; add as autodiff's sum of
     * gradients: attrs.relu_mask) */
    GR_CAP_RELU_MASK = 1u << 7,
};

/* attention (graph/op_attn.c): the most columns a head may have; its
 * kernels hold one head's row in registers and fixed tiles. */
#define GR_ATTN_MAX_HEAD 256

typedef enum gr_op {
#define X(E, name, flags, bwd, cpu, cuda) GR_OP_##E,
#include "ops.def"
#undef X
    GR_OP_COUNT
} gr_op;
/* The bwd column of a backward row: no op. */
enum { GR_OP_NONE = -1 };

#endif
