/* op_elem.c — the CUDA backend's elementwise ops: activations, dropout,
 * add (with NumPy broadcasting: shape.cu), concat along any axis, the views
 * (flatten, add_bwd) and softmax cross-entropy over the last axis (the other
 * losses and the metric: op_loss.c). Each
 * reads shapes and attributes from its kargs and launches an elem.cu kernel
 * on the compute stream; per-step values (RNG key, gradient scale) stay on
 * the device (cu->dctx), so a captured graph replays correctly. */
#include "../shape_args.h"
#include "cu_elem.h"
#include "cu_optim.h"
#include "cu_shape.h"
#include "cuda_backend.h"

_Static_assert(GR_ELEM_MAX_IN == GR_MAX_IN, "body_elem.h's input limit must match the graph's");
_Static_assert(2 * GR_SCE_MAX_BLOCKS <= GR_SUMSQ_SCRATCH, "the loss partials must fit the scratch doubles");

static cudaStream_t gr_stream(const gr_kargs *a) { return gr_cuda_of(a)->stream; }

/* ---- activations: x -> y, and (dy, saved) -> dx ---- */

static void gr_cuda_act(const gr_kargs *a, gr_op act) {
    gr_cu_act(gr_stream(a), (int)act, (int)a->ein[0], a->in[0], a->out[0], gr_kargs_numel(a, a->tin[0]));
}

static void gr_cuda_act_bwd(const gr_kargs *a, gr_op act) {
    gr_cu_act_bwd(gr_stream(a), (int)act, (int)a->ein[0], a->in[0], a->in[1], a->out[0], gr_kargs_numel(a, a->tin[0]));
}

void gr_cuda_relu(const gr_kargs *a) { gr_cuda_act(a, GR_OP_RELU); }
void gr_cuda_relu_bwd(const gr_kargs *a) { gr_cuda_act_bwd(a, GR_OP_RELU); }
void gr_cuda_sigmoid(const gr_kargs *a) { gr_cuda_act(a, GR_OP_SIGMOID); }
void gr_cuda_sigmoid_bwd(const gr_kargs *a) { gr_cuda_act_bwd(a, GR_OP_SIGMOID); }
void gr_cuda_tanh(const gr_kargs *a) { gr_cuda_act(a, GR_OP_TANH); }
void gr_cuda_tanh_bwd(const gr_kargs *a) { gr_cuda_act_bwd(a, GR_OP_TANH); }
void gr_cuda_gelu(const gr_kargs *a) { gr_cuda_act(a, GR_OP_GELU); }
void gr_cuda_gelu_bwd(const gr_kargs *a) { gr_cuda_act_bwd(a, GR_OP_GELU); }
void gr_cuda_gelu_tanh(const gr_kargs *a) { gr_cuda_act(a, GR_OP_GELU_TANH); }
void gr_cuda_gelu_tanh_bwd(const gr_kargs *a) { gr_cuda_act_bwd(a, GR_OP_GELU_TANH); }

/* ---- views: the plan gives the output its input's storage ---- */

void gr_cuda_flatten(const gr_kargs *a) { (void)a; }
void gr_cuda_flatten_bwd(const gr_kargs *a) { (void)a; }
void gr_cuda_add_bwd(const gr_kargs *a) { (void)a; }

/* ---- dropout ---- */

/* Outside training, or at rate 0, the layer passes x through with an
 * all-ones mask, as the CPU does; a->ctx->training is fixed per captured
 * graph (the backend captures train and eval runs separately). */
void gr_cuda_dropout(const gr_kargs *a) {
    gr_cuda *cu = gr_cuda_of(a);
    const int64_t n = a->n * gr_tensor_sample_numel(a->tin[0]);
    const float rate = (float)a->node->attrs.rate;
    if (n <= 0) return;
    if (!a->ctx->training || rate == 0.0f) {
        if (a->out[0] != a->in[0])
            GR_CU(cudaMemcpyAsync(a->out[0], a->in[0], (size_t)n * sizeof(float), cudaMemcpyDeviceToDevice,
                                  cu->stream));
        GR_CU(cudaMemsetAsync(a->out[1], 1, (size_t)n, cu->stream));
        return;
    }
    gr_cu_dropout(cu->stream, cu->dctx, a->node->layer, rate, 1.0f / (1.0f - rate), a->in[0], a->out[0],
                  a->out[1], n);
}

void gr_cuda_dropout_bwd(const gr_kargs *a) {
    const int64_t n = a->n * gr_tensor_sample_numel(a->tin[0]);
    const float scale = 1.0f / (1.0f - (float)a->node->attrs.rate);
    gr_cu_dropout_bwd(gr_stream(a), scale, a->in[0], a->in[1], a->out[0], n);
}

/* ---- add (1..GR_MAX_IN inputs; also autodiff's sum of partial gradients) ---- */

void gr_cuda_add(const gr_kargs *a) {
    if (gr_shape_is_bcast(a)) { /* inputs of other shapes, stored as the output (gr_cuda_native_half) */
        gr_bcast_in b;
        gr_shape_bcast_args(a, 0, (int)a->eout[0], &b);
        gr_cu_bcast(gr_stream(a), &b, a->out[0], gr_kargs_numel(a, a->tout[0]));
        return;
    }
    gr_add_in in;
    GR_ASSERT(a->node->nin >= 1 && a->node->nin <= GR_ELEM_MAX_IN);
    in.nin = a->node->nin;
    in.e = (int)a->eout[0]; /* the inputs' too (gr_cuda_native_half) */
    for (int k = 0; k < GR_ELEM_MAX_IN; k++) in.x[k] = k < in.nin ? a->in[k] : NULL;
    gr_cu_add(gr_stream(a), &in, a->out[0], a->n * gr_tensor_sample_numel(a->tout[0]));
}

/* ---- concat along an axis and its backward slice ---- */

/* Rows along the axis (kernels/shape_args.h): outer rows, n times the axes
 * before it; each input contributes its axis-length * inner floats a row
 * (axis 1: n rows of C * H*W, or of F for [n, F]). */
void gr_cuda_concat(const gr_kargs *a) {
    int64_t outer, inner;
    const int64_t axis = a->node->attrs.axis;
    gr_shape_rows(a, a->tout[0], axis, &outer, &inner);
    gr_concat_in in;
    GR_ASSERT(a->node->nin >= 1 && a->node->nin <= GR_ELEM_MAX_IN);
    in.nin = a->node->nin;
    in.out_row = a->tout[0]->shape[axis] * inner;
    int64_t start = 0;
    for (int k = 0; k < GR_ELEM_MAX_IN; k++) {
        in.x[k] = k < in.nin ? a->in[k] : NULL;
        in.row[k] = k < in.nin ? a->tin[k]->shape[axis] * inner : 0;
        in.start[k] = start;
        start += in.row[k];
    }
    GR_ASSERT(start == in.out_row);
    gr_cu_concat(gr_stream(a), &in, a->out[0], outer);
}

void gr_cuda_concat_bwd(const gr_kargs *a) {
    int64_t outer, inner;
    const int64_t axis = a->node->attrs.axis;
    gr_shape_rows(a, a->tout[0], axis, &outer, &inner);
    gr_cu_concat_bwd(gr_stream(a), a->in[0], a->out[0], outer, a->tin[0]->shape[axis] * inner,
                     a->tout[0]->shape[axis] * inner, a->node->attrs.offset * inner);
}

/* ---- softmax cross-entropy ---- */

/* The per-block partials go through the backend's scratch doubles, which
 * only stream-ordered work uses (the gradient norm reads them after the
 * plan's run), so nothing is allocated here. */
/* rows (tokens) of a [n, ..., C] tensor in this run, and C */
static int64_t gr_sce_rows(const gr_kargs *a, int64_t *k) {
    const gr_tensor *x = a->tin[0];
    *k = x->shape[x->ndim - 1];
    return a->n * (gr_tensor_sample_numel(x) / *k);
}

void gr_cuda_softmax_cross_entropy(const gr_kargs *a) {
    gr_cuda *cu = gr_cuda_of(a);
    int64_t k, rows = gr_sce_rows(a, &k);
    gr_cu_sce(cu->stream, a->in[0], a->in[1], a->out[0], a->out[1], rows, k, gr_loss_classes(a->node->attrs.classes, k),
              a->node->attrs.label_smoothing, a->node->attrs.ignore_index, cu->scratch);
}

/* in: probabilities, labels, the forward's stats (its count) */
void gr_cuda_softmax_cross_entropy_bwd(const gr_kargs *a) {
    gr_cuda *cu = gr_cuda_of(a);
    int64_t k, rows = gr_sce_rows(a, &k);
    gr_cu_sce_bwd(cu->stream, cu->dctx, a->in[0], a->in[1], a->in[2], a->out[0], rows, k,
                  gr_loss_classes(a->node->attrs.classes, k), a->n, (float)a->node->attrs.label_smoothing,
                  a->node->attrs.ignore_index);
}
