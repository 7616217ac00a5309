/* gemm.h — the CPU backend's one matrix multiply, row-major:
 *   C[M,N] = alpha * op(A) op(B) + beta * C,  op(X) = X or X^T.
 *
 * Two providers behind it: oneDNN's dnnl_sgemm (the default: it picks its
 * AVX2/AVX-512 kernels from the CPU's feature flags) and OpenBLAS's
 * cblas_sgemm (kept as the reference path; OpenBLAS 0.3.21 identifies
 * unknown CPU models as Prescott and then runs SSE3 kernels, ~5x slower on
 * the MLP's shapes here). GPURUN_GEMM=openblas|onednn picks one at backend
 * creation; the choice lives in the backend's state (cpu.h). */
#ifndef GR_CPU_GEMM_H
#define GR_CPU_GEMM_H

#include <stdbool.h>
#include <stdint.h>

typedef struct gr_cpu gr_cpu;

typedef enum gr_gemm_provider { GR_GEMM_ONEDNN, GR_GEMM_OPENBLAS } gr_gemm_provider;

/* Selects cpu's provider ("onednn" or "openblas"; NULL or "" = onednn) and
 * the thread count of the libraries; returns false for an unknown name. */
bool gr_cpu_gemm_init(gr_cpu *cpu, const char *provider, int threads);

/* Makes the provider's kernels now rather than in the first product (oneDNN
 * generates its sgemm code on its first call): a plan's preparation calls it,
 * so the first training step costs what the others do. */
void gr_cpu_gemm_warm(const gr_cpu *cpu);

/* A product of this many FLOPs or fewer runs on one thread: the Fashion-MNIST
 * MLP's last layer (128 x 10 x 256, 0.65 MFLOP) took 7-12 us on 2 threads
 * of an AMD EPYC and 3.6-7 us on one, its threads' start and join costing
 * more than their share of the work saved. */
#define GR_GEMM_ONE_THREAD_FLOPS (1 << 21)

/* Before a product of `flops` FLOPs: the thread count the libraries' next
 * call takes (one under GR_GEMM_ONE_THREAD_FLOPS); returns what to give
 * gr_cpu_gemm_threads_end after it. */
int gr_cpu_gemm_threads_begin(double flops);
void gr_cpu_gemm_threads_end(int saved);

void gr_cpu_sgemm(const gr_cpu *cpu, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                  const float *a, int64_t lda, const float *b, int64_t ldb, float beta, float *c, int64_t ldc);

#endif
