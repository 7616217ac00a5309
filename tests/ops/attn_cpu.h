/* attn_cpu.h — the CPU attention kernels (kernels/cpu/attn.c) run on plain
 * arrays through a kernel-args fixture: the reference of test_op_attn.c's
 * body checks and of test_cuda_sdpa.c's cuDNN checks. */
#ifndef GR_TEST_ATTN_CPU_H
#define GR_TEST_ATTN_CPU_H

#include "body_check.h"

#include "kernels/body_attn.h"

/* y [n, T, C] and lse [n, heads, T] from qkv [n, T, 3C] */
static inline void attn_cpu_fwd(const gr_attn_geo *g, int64_t n, const float *qkv, float *y, float *lse) {
    int64_t xs[3] = {n, g->t, 3 * g->c}, ys[3] = {n, g->t, g->c}, ls[3] = {n, g->heads, g->t};
    kt k;
    kt_init(&k, GR_OP_ATTENTION, 1, 2, n);
    kt_tensor(&k.tin[0], GR_F32, 3, xs);
    kt_tensor(&k.tout[0], GR_F32, 3, ys);
    kt_tensor(&k.tout[1], GR_F32, 3, ls);
    k.node.attrs.heads = g->heads;
    k.node.attrs.causal = g->causal;
    k.a.in[0] = (void *)qkv;
    k.a.out[0] = y;
    k.a.out[1] = lse;
    gr_cpu_attention(&k.a);
}

/* dqkv [n, T, 3C] and delta [n, heads, T] from dy, qkv, y, lse */
static inline void attn_cpu_bwd(const gr_attn_geo *g, int64_t n, const float *dy, const float *qkv,
                                const float *y, const float *lse, float *dqkv, float *delta) {
    int64_t xs[3] = {n, g->t, 3 * g->c}, ys[3] = {n, g->t, g->c}, ls[3] = {n, g->heads, g->t};
    kt k;
    kt_init(&k, GR_OP_ATTENTION_BWD, 4, 2, n);
    kt_tensor(&k.tin[0], GR_F32, 3, ys);
    kt_tensor(&k.tin[1], GR_F32, 3, xs);
    kt_tensor(&k.tin[2], GR_F32, 3, ys);
    kt_tensor(&k.tin[3], GR_F32, 3, ls);
    kt_tensor(&k.tout[0], GR_F32, 3, xs);
    kt_tensor(&k.tout[1], GR_F32, 3, ls);
    k.node.attrs.heads = g->heads;
    k.node.attrs.causal = g->causal;
    k.a.in[0] = (void *)dy;
    k.a.in[1] = (void *)qkv;
    k.a.in[2] = (void *)y;
    k.a.in[3] = (void *)lse;
    k.a.out[0] = dqkv;
    k.a.out[1] = delta;
    gr_cpu_attention_bwd(&k.a);
}

#endif
