/* op_attn.c — the CUDA kernels of attention (graph/op_attn.c): gpurun's own
 * row-per-thread kernels (cu_attn.h). cuDNN's fused attention is not used
 * yet: this kernel is what runs on every GPU (the README says so). */
#include "cu_attn.h"
#include "cuda_backend.h"

static gr_attn_geo gr_cuda_attn_geo(const gr_kargs *a, const gr_tensor *qkv) {
    return gr_attn_geo_of(qkv->shape[1], qkv->shape[2], a->node->attrs.heads, a->node->attrs.causal);
}

/* in {qkv}, out {y, lse}; a decoding graph's also the cache */
void gr_cuda_attention(const gr_kargs *a) {
    const gr_attn_geo g = gr_cuda_attn_geo(a, a->tin[0]);
    gr_cuda *cu = gr_cuda_of(a);
    if (a->g && a->g->decode_len > 0)
        gr_cu_attention_decode(cu->stream, &g, a->n, a->g->decode_len, cu->dctx, a->in[0], a->out[2], a->out[0],
                               a->out[1]);
    else
        gr_cu_attention(cu->stream, &g, a->n, a->in[0], a->out[0], a->out[1]);
}

/* in {dy, qkv, y, lse}, out {dqkv, delta} */
void gr_cuda_attention_bwd(const gr_kargs *a) {
    const gr_attn_geo g = gr_cuda_attn_geo(a, a->tin[1]);
    gr_cu_attention_bwd(gr_cuda_of(a)->stream, &g, a->n, a->in[0], a->in[1], a->in[2], a->in[3], a->out[0],
                        a->out[1]);
}
