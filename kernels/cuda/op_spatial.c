/* op_spatial.c — the CUDA kernels of the pooling and batchnorm ops
 * (graph/op_pool.c, graph/op_bn.c have the node layouts): shapes and
 * attributes from the kargs, the launches of cu_spatial.h on the compute
 * stream. Training vs eval is fixed per plan (the backend captures one
 * graph per mode), so it is decided here on the host. */
#include "cu_spatial.h"
#include "cuda_backend.h"

/* The geometry of x [n, C, h, w] -> y [n, C, ho, wo] (x, y: the forward's tensors). */
static gr_pool_geo gr_cuda_pool_geo(const gr_kargs *a, const gr_tensor *x, const gr_tensor *y) {
    const gr_attrs *at = &a->node->attrs;
    gr_pool_geo g;
    g.planes = a->n * x->shape[1];
    g.h = x->shape[2];
    g.w = x->shape[3];
    g.ho = y->shape[2];
    g.wo = y->shape[3];
    g.kh = at->kernel[0];
    g.kw = at->kernel[1];
    g.sh = at->stride[0];
    g.sw = at->stride[1];
    g.ph = at->padding[0];
    g.pw = at->padding[1];
    g.include_pad = at->count_include_pad;
    /* the argmax is an int32 index within a plane */
    GR_ASSERT(g.h * g.w <= INT32_MAX);
    return g;
}

/* in {x}, out {y, argmax} */
void gr_cuda_maxpool(const gr_kargs *a) {
    gr_pool_geo g = gr_cuda_pool_geo(a, a->tin[0], a->tout[0]);
    gr_cu_maxpool(gr_cuda_of(a)->stream, &g, a->in[0], a->out[0], a->out[1]);
}

/* in {dy, argmax}, out {dx} */
void gr_cuda_maxpool_bwd(const gr_kargs *a) {
    gr_pool_geo g = gr_cuda_pool_geo(a, a->tout[0], a->tin[0]);
    gr_cu_maxpool_bwd(gr_cuda_of(a)->stream, &g, a->in[0], a->in[1], a->out[0]);
}

void gr_cuda_avgpool(const gr_kargs *a) {
    gr_pool_geo g = gr_cuda_pool_geo(a, a->tin[0], a->tout[0]);
    gr_cu_avgpool(gr_cuda_of(a)->stream, &g, a->in[0], a->out[0]);
}

void gr_cuda_avgpool_bwd(const gr_kargs *a) {
    gr_pool_geo g = gr_cuda_pool_geo(a, a->tout[0], a->tin[0]);
    gr_cu_avgpool_bwd(gr_cuda_of(a)->stream, &g, a->in[0], a->out[0]);
}

void gr_cuda_global_avgpool(const gr_kargs *a) {
    const gr_tensor *x = a->tin[0];
    gr_cu_global_avgpool(gr_cuda_of(a)->stream, a->in[0], a->out[0], a->n * x->shape[1], x->shape[2] * x->shape[3]);
}

void gr_cuda_global_avgpool_bwd(const gr_kargs *a) {
    const gr_tensor *x = a->tout[0];
    gr_cu_global_avgpool_bwd(gr_cuda_of(a)->stream, a->in[0], a->out[0], a->n * x->shape[1],
                             x->shape[2] * x->shape[3]);
}

/* Values per (sample, channel): H*W of [n, C, H, W], 1 of [n, C]. */
static int64_t gr_cuda_bn_hw(const gr_tensor *x) { return x->ndim == 4 ? x->shape[2] * x->shape[3] : 1; }

/* in {x, weight, bias, running_mean, running_var}, out {y, saved}; training
 * updates the running stats in place. x and y are stored as a->ein[0]
 * (native half: one type for both, gr_cuda_native_half). */
void gr_cuda_batchnorm(const gr_kargs *a) {
    const gr_tensor *x = a->tin[0];
    int64_t c = x->shape[1], hw = gr_cuda_bn_hw(x);
    GR_ASSERT(c <= GR_CHAN_MAX);
    GR_ASSERT(!a->ctx->xsum); /* statistics over processes: not on GPUs yet (the runner refuses it) */
    cudaStream_t s = gr_cuda_of(a)->stream;
    if (a->ctx->training) {
        GR_ASSERT(a->n * hw >= 2);
        const bool rec = a->node->attrs.stats_later; /* its recomputation updates the running stats */
        gr_cu_batchnorm_train(s, (int)a->ein[0], a->in[0], a->in[1], a->in[2], rec ? NULL : a->in[3],
                              rec ? NULL : a->in[4], a->out[0], a->out[1], a->n, c, hw, a->node->attrs.eps,
                              a->node->attrs.momentum);
    } else {
        gr_cu_batchnorm_eval(s, (int)a->ein[0], a->in[0], a->in[1], a->in[2], a->in[3], a->in[4], a->out[0],
                             a->out[1], a->n, c, hw, (float)a->node->attrs.eps);
    }
}

/* in {dy, x, weight, saved}, out {dweight, dbias, dx (when x needs it)}; dy,
 * x and dx stored as a->ein[0] */
void gr_cuda_batchnorm_bwd(const gr_kargs *a) {
    const gr_tensor *x = a->tin[1];
    int64_t c = x->shape[1], hw = gr_cuda_bn_hw(x);
    GR_ASSERT(c <= GR_CHAN_MAX);
    void *dx = a->node->nout > 2 ? a->out[2] : NULL;
    gr_cu_batchnorm_bwd(gr_cuda_of(a)->stream, (int)a->ein[0], a->in[0], a->in[1], a->in[2], a->in[3], a->out[0],
                        a->out[1], dx, a->n, c, hw, a->ctx->training);
}
