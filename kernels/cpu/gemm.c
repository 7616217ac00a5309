/* gemm.c — the CPU matrix multiply over oneDNN or OpenBLAS (see gemm.h). */
#include "gemm.h"

#include <cblas.h>
#include <oneapi/dnnl/dnnl.h>
#include <omp.h>
#include <pthread.h>
#include <string.h>

#include "../../common/gr_common.h"
#include "cpu.h"

bool gr_cpu_gemm_init(gr_cpu *cpu, const char *provider, int threads) {
    if (!provider || !provider[0] || strcmp(provider, "onednn") == 0) cpu->gemm = GR_GEMM_ONEDNN;
    else if (strcmp(provider, "openblas") == 0) cpu->gemm = GR_GEMM_OPENBLAS;
    else return false;
    /* Only the chosen library gets threads, so the two pools never compete
     * for the same cores. */
    omp_set_num_threads(cpu->gemm == GR_GEMM_ONEDNN ? threads : 1);
    openblas_set_num_threads(cpu->gemm == GR_GEMM_OPENBLAS ? threads : 1);
    return true;
}

/* oneDNN builds its sgemm kernels on the first call of the process (40 ms
 * on a 2-core AMD EPYC, most of a Fashion-MNIST MLP's first step); a
 * product of 8 x 8 x 8 makes them. */
static void gr_cpu_gemm_jit(void) {
    float a[64] = {0}, b[64] = {0}, c[64];
    dnnl_status_t st = dnnl_sgemm('N', 'N', 8, 8, 8, 1.0f, a, 8, b, 8, 0.0f, c, 8);
    GR_ASSERT(st == dnnl_success);
}

void gr_cpu_gemm_warm(const gr_cpu *cpu) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    if (cpu->gemm == GR_GEMM_ONEDNN) pthread_once(&once, gr_cpu_gemm_jit);
}

int gr_cpu_gemm_threads_begin(double flops) {
    if (flops > GR_GEMM_ONE_THREAD_FLOPS) return 0;
    const int saved = omp_get_max_threads();
    if (saved > 1) omp_set_num_threads(1);
    return saved;
}

void gr_cpu_gemm_threads_end(int saved) {
    if (saved > 1) omp_set_num_threads(saved);
}

void gr_cpu_sgemm(const gr_cpu *cpu, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                  const float *a, int64_t lda, const float *b, int64_t ldb, float beta, float *c, int64_t ldc) {
    if (cpu->gemm == GR_GEMM_ONEDNN) {
        const int saved = gr_cpu_gemm_threads_begin(2.0 * (double)m * (double)n * (double)k);
        dnnl_status_t st = dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, alpha, a, lda, b, ldb,
                                      beta, c, ldc);
        gr_cpu_gemm_threads_end(saved);
        GR_ASSERT(st == dnnl_success);
        return;
    }
    GR_ASSERT(m <= INT32_MAX && n <= INT32_MAX && k <= INT32_MAX);
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, (int)m,
                (int)n, (int)k, alpha, a, (int)lda, b, (int)ldb, beta, c, (int)ldc);
}
