/* peak.c — this machine's practical peak as the CPU backend reaches it
 * (gr_backend_peak): the fastest of a few large GEMMs through the backend's
 * own fp32 GEMM (gr_cpu_sgemm: oneDNN's sgemm unless GPURUN_GEMM says
 * openblas) and through a oneDNN bf16 matmul (bf16 x bf16, fp32
 * accumulation and output, as the dense layers run in bf16), and the
 * memory bandwidth of a STREAM-style copy (memcpy: bytes read and
 * written) over arrays well past the caches, all on the backend's threads. The roofline the benches
 * and --profile measure against (issue 28). */
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "cpu.h"
#include "onednn.h"

enum { GR_PEAK_N = 1536 }; /* the GEMMs' M = N = K: 7.2 GFLOP a call, well past the caches */
static const size_t gr_peak_stream_bytes = (size_t)128 << 20; /* the copy's arrays: 2 x 128 MiB */

/* The fastest of fn's calls within about `budget` seconds (at least 3, after one to warm). */
static double gr_peak_best(void (*fn)(void *), void *ctx, double budget) {
    fn(ctx);
    double best = 1e30, t0 = gr_now();
    int reps = 0;
    do {
        double t = gr_now();
        fn(ctx);
        t = gr_now() - t;
        best = t < best ? t : best;
        reps++;
    } while (reps < 3 || (gr_now() - t0 < budget && reps < 20));
    return best;
}

typedef struct gr_peak_gemm {
    gr_cpu *cpu;
    float *a, *b, *c;
    dnnl_primitive_t prim;
    dnnl_stream_t stream;
    dnnl_memory_t src, wei, dst;
} gr_peak_gemm;

static void gr_peak_sgemm(void *ctx) {
    gr_peak_gemm *g = ctx;
    gr_cpu_sgemm(g->cpu, false, false, GR_PEAK_N, GR_PEAK_N, GR_PEAK_N, 1.0f, g->a, GR_PEAK_N, g->b, GR_PEAK_N, 0.0f,
                 g->c, GR_PEAK_N);
}

static void gr_peak_bf16(void *ctx) {
    gr_peak_gemm *g = ctx;
    dnnl_exec_arg_t args[3] = {{DNNL_ARG_SRC, g->src}, {DNNL_ARG_WEIGHTS, g->wei}, {DNNL_ARG_DST, g->dst}};
    GR_DNNL_CHECK(dnnl_primitive_execute(g->prim, g->stream, 3, args));
    GR_DNNL_CHECK(dnnl_stream_wait(g->stream));
}

/* The bf16 matmul on a's and b's first halves as bf16 bits (any values: the time does not depend
 * on them) into c; false when oneDNN has no bf16 matmul for this CPU. */
static bool gr_peak_bf16_make(gr_peak_gemm *g) {
    dnnl_engine_t eng;
    gr_cpu_onednn_handles(g->cpu, &eng, &g->stream);
    const int64_t n = GR_PEAK_N;
    dnnl_memory_desc_t s, w, d;
    dnnl_dims_t dims = {n, n};
    GR_DNNL_CHECK(dnnl_memory_desc_init_by_tag(&s, 2, dims, dnnl_bf16, dnnl_ab));
    GR_DNNL_CHECK(dnnl_memory_desc_init_by_tag(&w, 2, dims, dnnl_bf16, dnnl_ab));
    GR_DNNL_CHECK(dnnl_memory_desc_init_by_tag(&d, 2, dims, dnnl_f32, dnnl_ab));
    dnnl_matmul_desc_t md;
    GR_DNNL_CHECK(dnnl_matmul_desc_init(&md, &s, &w, NULL, &d));
    dnnl_primitive_desc_t pd;
    if (dnnl_primitive_desc_create(&pd, &md, NULL, eng, NULL) != dnnl_success) return false;
    GR_DNNL_CHECK(dnnl_primitive_create(&g->prim, pd));
    GR_DNNL_CHECK(dnnl_primitive_desc_destroy(pd));
    GR_DNNL_CHECK(dnnl_memory_create(&g->src, &s, eng, g->a));
    GR_DNNL_CHECK(dnnl_memory_create(&g->wei, &w, eng, g->b));
    GR_DNNL_CHECK(dnnl_memory_create(&g->dst, &d, eng, g->c));
    return true;
}

typedef struct gr_peak_copy {
    char *a, *b;
    size_t bytes;
    int threads;
} gr_peak_copy;

/* b = a, each thread its contiguous share by memcpy (libc's, whatever this file's build: the
 * same figure from a sanitized Debug build) */
static void gr_peak_copy_run(void *ctx) {
    gr_peak_copy *c = ctx;
    #pragma omp parallel num_threads(c->threads)
    {
        const size_t nt = (size_t)omp_get_num_threads(), t = (size_t)omp_get_thread_num();
        const size_t lo = c->bytes * t / nt, hi = c->bytes * (t + 1) / nt;
        memcpy(c->b + lo, c->a + lo, hi - lo);
    }
}

bool gr_cpu_peak(gr_backend *be, gr_peak *out) {
    gr_cpu *cpu = gr_cpu_backend_state(be);
    memset(out, 0, sizeof *out);
    out->threads = be->threads;
    const size_t nn = (size_t)GR_PEAK_N * GR_PEAK_N;
    const double flops = 2.0 * (double)nn * GR_PEAK_N;
    gr_peak_gemm g = {.cpu = cpu};
    g.a = gr_aligned_alloc(nn * sizeof(float));
    g.b = gr_aligned_alloc(nn * sizeof(float));
    g.c = gr_aligned_alloc(nn * sizeof(float));
    for (size_t i = 0; i < nn; i++) g.a[i] = (float)(i % 7) * 0.125f, g.b[i] = (float)(i % 5) * 0.25f;
    out->f32_gflops = flops / gr_peak_best(gr_peak_sgemm, &g, 0.3) / 1e9;
    if (gr_peak_bf16_make(&g)) {
        out->bf16_gflops = flops / gr_peak_best(gr_peak_bf16, &g, 0.3) / 1e9;
        dnnl_primitive_destroy(g.prim);
        dnnl_memory_destroy(g.src);
        dnnl_memory_destroy(g.wei);
        dnnl_memory_destroy(g.dst);
    }
    free(g.a);
    free(g.b);
    free(g.c);
    gr_peak_copy c = {.bytes = gr_peak_stream_bytes, .threads = be->threads};
    c.a = gr_aligned_alloc(c.bytes);
    c.b = gr_aligned_alloc(c.bytes);
    #pragma omp parallel num_threads(c.threads) /* first touch by the threads that copy */
    {
        const size_t nt = (size_t)omp_get_num_threads(), t = (size_t)omp_get_thread_num();
        const size_t lo = c.bytes * t / nt, hi = c.bytes * (t + 1) / nt;
        memset(c.a + lo, 1, hi - lo);
        memset(c.b + lo, 0, hi - lo);
    }
    out->mem_gbs = 2.0 * (double)c.bytes / gr_peak_best(gr_peak_copy_run, &c, 0.2) / 1e9; /* read + write */
    free(c.a);
    free(c.b);
    return true;
}
