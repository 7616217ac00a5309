/* cudnn_sdpa.h — cuDNN's fused attention (flash attention) for the
 * attention op's half steps (graph/op_attn.c), and the choice between it
 * and gpurun's own kernel (cu_attn.h) that kernels/cuda/op_attn.c
 * dispatches on.
 *
 * cuDNN takes bf16 or fp16 q, k, v (sm80 and newer, a head of at most 128
 * columns for the backward on Ampere, 256 on Hopper): a step whose
 * activations are in one half type asks here, when its plan is compiled
 * (gr_cuda_native_half), whether cuDNN builds an execution plan for its
 * shape; if so the step runs natively on its half storage, else it is
 * staged through fp32 copies and gpurun's own kernel runs. Plans are built
 * once per (direction, micro-batch, T, C, heads, causal, type) and kept on
 * the backend. Which one runs is said once on stderr (gr_cuda_attn_say). */
#ifndef GR_CUDNN_SDPA_H
#define GR_CUDNN_SDPA_H

#include "cuda_backend.h"

/* NULL when cuDNN runs step a (attention or attention_bwd) on its half
 * storage, else why gpurun's own kernel runs it: the step is fp32 or
 * decodes, GPURUN_HALF=staged, or cuDNN declined the shape. Builds the
 * step's execution plan the first time its shape is asked for; with
 * build false (at run time) only looks it up. The string lives as long
 * as the backend. */
const char *gr_cuda_sdpa_decline(gr_cuda *cu, const gr_kargs *a, bool build);
/* The cuDNN workspace bytes the plan's steps that cuDNN runs need. */
size_t gr_cuda_sdpa_workspace(gr_cuda *cu, const gr_steps *s);
/* Runs a step gr_cuda_sdpa_decline accepted, on cu->stream with cu->ws:
 * forward y and lse; backward dqkv and delta. */
void gr_cuda_sdpa_forward(gr_cuda *cu, const gr_kargs *a);
void gr_cuda_sdpa_backward(gr_cuda *cu, const gr_kargs *a);
/* Says, once per backend and message, which kernel runs attention:
 * why NULL for cuDNN's fused attention in type e, else gpurun's own
 * kernel and why. */
void gr_cuda_attn_say(gr_cuda *cu, gr_elem e, const char *why);
void gr_cuda_sdpa_free_all(gr_cuda *cu);

#endif
