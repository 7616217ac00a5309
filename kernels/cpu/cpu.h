/* cpu.h — the CPU backend's state (gr_cpu), owned by its gr_backend as
 * be->impl: made by gr_cpu_backend_create, freed by the backend's destroy.
 *
 * Kernels reach it through their gr_kargs (gr_cpu_of(a)); code that calls
 * the CPU's GEMM or conv paths directly (tests, bench/conv_bench.c) takes it
 * from a CPU backend with gr_cpu_backend_state. One training thread uses a
 * backend at a time, so nothing here is locked. */
#ifndef GR_CPU_H
#define GR_CPU_H

#include <stddef.h>

#include "../backend.h"
#include "conv.h"
#include "gemm.h"

struct gr_cpu_dnn; /* the oneDNN conv path's engine, stream, primitives and pool (conv_onednn.c) */
struct gr_cpu_mm;  /* the oneDNN dense path's primitives and bf16 scratch (dense_onednn.c) */

struct gr_cpu {
    gr_gemm_provider gemm;   /* GPURUN_GEMM (gr_cpu_gemm_init) */
    gr_conv_path conv_path;  /* GPURUN_CONV (gr_cpu_conv_set_path) */
    float *col;              /* the reference conv's col matrix, grown to the largest */
    size_t col_cap;          /* shape met and kept: no allocation once warm */
    struct gr_cpu_dnn *dnn;  /* made at the first oneDNN conv; NULL until then */
    bool bf16_native;        /* precision bf16 with the ISA for it and GPURUN_HALF=native (configure) */
    struct gr_cpu_mm *mm;    /* the oneDNN dense path's matmul primitives (dense_onednn.c); NULL until used */
    size_t held;             /* bytes of the backend's arenas (gr_backend_alloc) and conv scratch */
    size_t held_peak;        /* the most they held at once */
    size_t cap;              /* GPURUN_MEMORY_LIMIT: the most they may hold (a smaller device); 0: none */
};

/* The conv paths' scratch (the oneDNN pool, the reference col matrix),
 * counted with the arenas. capped: NULL when cpu's memory limit has no room
 * (prepare reserves under it); uncapped growth (a shape prepare did not
 * see) is still counted. NULL cpu: the tests' backends, no accounting. */
void *gr_cpu_scratch_alloc(gr_cpu *cpu, size_t bytes, bool capped);
void gr_cpu_scratch_free(gr_cpu *cpu, void *p, size_t bytes);
/* (conv.c) The scratch bytes cpu's conv path needs for the conv step a at n samples
 * (the oneDNN path: its primitive, made and cached now, with its pool
 * share: blocked copies, scratchpad, dW; the reference path: its col
 * matrix); 0 for other steps. */
size_t gr_cpu_conv_workspace(gr_cpu *cpu, const gr_kargs *a, int64_t n);
/* Grows the path's scratch to at least bytes now (the backend's prepare):
 * false when the CPU's memory limit leaves no room for it. */
bool gr_cpu_conv_reserve(gr_cpu *cpu, size_t bytes);

/* (peak.c) gr_backend_peak on the CPU: the backend's fp32 GEMM, a oneDNN
 * bf16 matmul (where the ISA has one) and a memcpy, on its threads. */
bool gr_cpu_peak(gr_backend *be, gr_peak *out);
/* The state of a CPU backend (asserts that be is one). */
gr_cpu *gr_cpu_backend_state(gr_backend *be);
static inline gr_cpu *gr_cpu_of(const gr_kargs *a) { return gr_cpu_backend_state(a->be); }

#endif
