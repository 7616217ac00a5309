/* op_loss.c — the CUDA backend's mse, bce with logits and accuracy metric
 * (graph/op_loss.c; softmax cross-entropy is in op_elem.c). Each reads
 * shapes and attributes from its kargs and launches a loss.cu kernel on
 * the compute stream; the gradient scale stays on the device (cu->dctx). */
#include "cu_loss.h"
#include "cu_optim.h"
#include "cuda_backend.h"

_Static_assert(2 * GR_LOSS_MAX_BLOCKS <= GR_SUMSQ_SCRATCH, "the loss partials must fit the scratch doubles");

/* The reductions' partials go through the backend's scratch doubles, as
 * softmax cross-entropy's (op_elem.c). */
static void gr_cuda_loss_sum(const gr_kargs *a, gr_op op, int64_t k, int64_t units) {
    gr_cuda *cu = gr_cuda_of(a);
    gr_loss_in in = {a->in[0], a->in[1], k, a->node->attrs.top_k, a->node->attrs.ignore_index,
                     gr_loss_classes(a->node->attrs.classes, k)};
    gr_cu_loss_sum(cu->stream, (int)op, &in, units, a->out[0], cu->scratch);
}

static void gr_cuda_loss_bwd(const gr_kargs *a, gr_op op) {
    gr_cuda *cu = gr_cuda_of(a);
    gr_cu_loss_bwd(cu->stream, (int)op, cu->dctx, a->in[0], a->in[1], a->out[0], gr_kargs_numel(a, a->tin[0]),
                   gr_tensor_sample_numel(a->tin[0]));
}

void gr_cuda_mse(const gr_kargs *a) { gr_cuda_loss_sum(a, GR_OP_MSE, 1, gr_kargs_numel(a, a->tin[0])); }
void gr_cuda_mse_bwd(const gr_kargs *a) { gr_cuda_loss_bwd(a, GR_OP_MSE); }
void gr_cuda_bce_with_logits(const gr_kargs *a) {
    gr_cuda_loss_sum(a, GR_OP_BCE_WITH_LOGITS, 1, gr_kargs_numel(a, a->tin[0]));
}
void gr_cuda_bce_with_logits_bwd(const gr_kargs *a) { gr_cuda_loss_bwd(a, GR_OP_BCE_WITH_LOGITS); }

/* one unit per row of the [n, ..., C] logits */
void gr_cuda_accuracy(const gr_kargs *a) {
    const gr_tensor *x = a->tin[0];
    const int64_t k = x->shape[x->ndim - 1];
    gr_cuda_loss_sum(a, GR_OP_ACCURACY, k, a->n * (gr_tensor_sample_numel(x) / k));
}
