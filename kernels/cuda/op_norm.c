/* op_norm.c — the CUDA kernels of layernorm and its backward
 * (graph/op_norm.c has the node layout): the rows and C from the kargs,
 * the launches of cu_norm.h on the compute stream. Storage is fp32: ops.def's
 * cuda column claims no half, so mixed precision stages these steps (the
 * saved statistics stay fp32 either way, GR_OPF_FP32_SAVED). */
#include "cu_norm.h"
#include "cuda_backend.h"

/* C, the last axis of x */
static int64_t gr_cuda_ln_c(const gr_tensor *x) { return x->shape[x->ndim - 1]; }

/* in {x, weight, bias (with bias)}, out {y, saved} */
void gr_cuda_layernorm(const gr_kargs *a) {
    GR_ASSERT(a->ein[0] == GR_F32 && a->eout[0] == GR_F32);
    const float *b = a->node->nin > 2 ? a->in[2] : NULL;
    gr_cu_layernorm(gr_cuda_of(a)->stream, a->in[0], a->in[1], b, a->out[0], a->out[1], gr_kargs_rows(a),
                    gr_cuda_ln_c(a->tin[0]), a->node->attrs.eps);
}

/* in {dy, x, weight, saved}, out {dweight, dbias (attrs.bias), dx (when wanted)} */
void gr_cuda_layernorm_bwd(const gr_kargs *a) {
    GR_ASSERT(a->ein[0] == GR_F32 && a->ein[1] == GR_F32);
    const bool has_b = a->node->attrs.bias;
    const int k_dx = has_b ? 2 : 1;
    float *db = has_b ? a->out[1] : NULL, *dx = a->node->nout > k_dx ? a->out[k_dx] : NULL;
    gr_cu_layernorm_bwd(gr_cuda_of(a)->stream, a->in[0], a->in[1], a->in[2], a->in[3], a->out[0], db, dx,
                        gr_kargs_rows(a), gr_cuda_ln_c(a->tin[1]));
}
