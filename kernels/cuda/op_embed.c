/* op_embed.c — the CUDA backend's embedding family (graph/op_embed.c):
 * embedding and pos_embedding with their backward, each reading its shapes
 * from its kargs and launching an embed.cu kernel on the compute stream;
 * pos_embedding_bwd is a view (nothing to do). The weight gradients add
 * into the grads arena, as every parameter-gradient kernel does. */
#include "cu_embed.h"
#include "cuda_backend.h"

static cudaStream_t gr_stream(const gr_kargs *a) { return gr_cuda_of(a)->stream; }

void gr_cuda_embedding(const gr_kargs *a) {
    gr_cu_embedding(gr_stream(a), a->in[0], a->in[1], a->out[0], gr_kargs_numel(a, a->tin[0]), a->tin[1]->shape[0],
                    a->tin[1]->shape[1]);
}

void gr_cuda_embedding_bwd(const gr_kargs *a) {
    gr_cu_embedding_bwd(gr_stream(a), a->in[1], a->in[0], a->out[0], gr_kargs_numel(a, a->tin[1]),
                        a->tout[0]->shape[0], a->tout[0]->shape[1]);
}

void gr_cuda_pos_embedding(const gr_kargs *a) {
    const gr_dev_ctx *decode = a->g && a->g->decode_len > 0 ? gr_cuda_of(a)->dctx : NULL; /* at ctx->pos */
    gr_cu_pos_embedding(gr_stream(a), a->in[0], a->in[1], a->out[0], a->n, gr_tensor_sample_numel(a->tin[0]), decode);
}

void gr_cuda_pos_embedding_bwd(const gr_kargs *a) { (void)a; }

void gr_cuda_pos_embedding_bwd_params(const gr_kargs *a) {
    gr_cu_pos_embedding_bwd(gr_stream(a), a->in[0], a->out[0], a->n, gr_tensor_sample_numel(a->tin[0]));
}
