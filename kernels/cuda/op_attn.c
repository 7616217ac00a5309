/* op_attn.c — the CUDA kernels of attention (graph/op_attn.c): which one
 * runs a step. A step whose activations are bf16 or fp16 runs cuDNN's fused
 * attention where cuDNN took its shape when the plan was compiled
 * (cudnn_sdpa.h); every other step runs gpurun's own row-per-thread
 * kernels (cu_attn.h) in fp32: fp32 steps, half steps cuDNN declined
 * (staged through fp32 copies), and decoding. Which one runs, and why, is
 * said once on stderr (gr_cuda_attn_say); the README's "Attention on GPUs"
 * says the same. */
#include "cu_attn.h"
#include "cuda_backend.h"
#include "cudnn_sdpa.h"

static gr_attn_geo gr_cuda_attn_geo(const gr_kargs *a, const gr_tensor *qkv) {
    return gr_attn_geo_of(qkv->shape[1], qkv->shape[2], a->node->attrs.heads, a->node->attrs.causal);
}

/* true when cuDNN runs a (then said), else says why the own kernel does */
static bool gr_cuda_attn_cudnn(gr_cuda *cu, const gr_kargs *a) {
    /* a native half step is one cuDNN accepted (gr_cuda_native_half) */
    if (!a->staged && gr_elem_is_half(a->ein[0])) {
        gr_cuda_attn_say(cu, a->ein[0], NULL);
        return true;
    }
    const char *why = gr_cuda_sdpa_decline(cu, a, false);
    gr_cuda_attn_say(cu, GR_F32, why ? why : "the step is staged");
    return false;
}

/* in {qkv}, out {y, lse}; a decoding graph's also the cache */
void gr_cuda_attention(const gr_kargs *a) {
    const gr_attn_geo g = gr_cuda_attn_geo(a, a->tin[0]);
    gr_cuda *cu = gr_cuda_of(a);
    if (gr_cuda_attn_cudnn(cu, a)) gr_cuda_sdpa_forward(cu, a);
    else if (a->g && a->g->decode_len > 0)
        gr_cu_attention_decode(cu->stream, &g, a->n, a->g->decode_len, cu->dctx, a->in[0], a->out[2], a->out[0],
                               a->out[1]);
    else
        gr_cu_attention(cu->stream, &g, a->n, a->in[0], a->out[0], a->out[1]);
}

/* in {dy, qkv, y, lse}, out {dqkv, delta} */
void gr_cuda_attention_bwd(const gr_kargs *a) {
    const gr_attn_geo g = gr_cuda_attn_geo(a, a->tin[1]);
    gr_cuda *cu = gr_cuda_of(a);
    if (gr_cuda_attn_cudnn(cu, a)) gr_cuda_sdpa_backward(cu, a);
    else
        gr_cu_attention_bwd(cu->stream, &g, a->n, a->in[0], a->in[1], a->in[2], a->in[3], a->out[0], a->out[1]);
}
