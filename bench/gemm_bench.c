/* gemm_bench.c — the ceiling of an MLP's training step set by its matrix
 * products alone: each dense layer's three products (forward y = x W^T,
 * backward data dx = dy W but for the first layer's, backward weights
 * dW += dy^T x) at the step's shapes, timed hot in a loop on THREADS
 * threads (one for a product of GR_GEMM_ONE_THREAD_FLOPS or fewer, as
 * gpurun runs it: kernels/cpu/gemm.h) through oneDNN's sgemm (gpurun's route
 * for the backward products, kernels/cpu/dense.c) and its matmul primitive
 * (gpurun's route for the forward, dense_onednn.c), the fastest of 5 timings of each. It says what
 * the step could reach if nothing but these products ran, cache-hot: the
 * sum on gpurun's routes and on the faster of the two for each product.
 * bench/mlp.sh prints it as a % of the fp32 GEMM peak. Built with gpurun
 * (the CMake target gpurun_gemm_bench).
 * Usage: gpurun_gemm_bench THREADS BATCH F0 F1 ... (layer widths, at least 2)
 * Prints a line per product, then one JSON line:
 *   {"flops": ..., "route_us": ..., "best_us": ...} */
#include <oneapi/dnnl/dnnl.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/gr_common.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/onednn.h"

enum { GB_TIMINGS = 5, GB_MAX_LAYERS = 32 };

/* C [m, n] (beta 1: +=) op(A) [m, k] op(B) [k, n], row major; ta / tb: A / B stored transposed */
typedef struct gb_prod {
    const char *what;
    int layer;
    bool ta, tb;
    int64_t m, n, k;
    float beta;
    bool route_mm; /* gpurun runs it on the matmul primitive */
} gb_prod;

typedef struct gb_ctx {
    dnnl_engine_t eng;
    dnnl_stream_t stream;
} gb_ctx;

static dnnl_memory_desc_t gb_md(int64_t rows, int64_t cols, int64_t rs, int64_t cs) {
    dnnl_memory_desc_t md;
    dnnl_dims_t dims = {rows, cols}, strides = {rs, cs};
    GR_DNNL_CHECK(dnnl_memory_desc_init_by_strides(&md, 2, dims, dnnl_f32, strides));
    return md;
}

static dnnl_primitive_t gb_matmul(gb_ctx *c, const gb_prod *p, dnnl_memory_t mem[3], float *a, float *b, float *out) {
    dnnl_memory_desc_t ma = p->ta ? gb_md(p->m, p->k, 1, p->m) : gb_md(p->m, p->k, p->k, 1);
    dnnl_memory_desc_t mb = p->tb ? gb_md(p->k, p->n, 1, p->k) : gb_md(p->k, p->n, p->n, 1);
    dnnl_memory_desc_t mc = gb_md(p->m, p->n, p->n, 1);
    dnnl_matmul_desc_t d;
    GR_DNNL_CHECK(dnnl_matmul_desc_init(&d, &ma, &mb, NULL, &mc));
    dnnl_primitive_attr_t attr;
    GR_DNNL_CHECK(dnnl_primitive_attr_create(&attr));
    if (p->beta != 0.0f) gr_dnnl_attr_sum(attr); /* dW += , as gpurun's bf16 backward weights adds */
    dnnl_primitive_desc_t pd;
    GR_DNNL_CHECK(dnnl_primitive_desc_create(&pd, &d, attr, c->eng, NULL));
    dnnl_primitive_t prim;
    GR_DNNL_CHECK(dnnl_primitive_create(&prim, pd));
    GR_DNNL_CHECK(dnnl_primitive_desc_destroy(pd));
    GR_DNNL_CHECK(dnnl_primitive_attr_destroy(attr));
    GR_DNNL_CHECK(dnnl_memory_create(&mem[0], &ma, c->eng, a));
    GR_DNNL_CHECK(dnnl_memory_create(&mem[1], &mb, c->eng, b));
    GR_DNNL_CHECK(dnnl_memory_create(&mem[2], &mc, c->eng, out));
    return prim;
}

/* the fastest of GB_TIMINGS timings of reps calls, in seconds a call */
static double gb_time(gb_ctx *c, const gb_prod *p, bool mm) {
    const int64_t na = p->m * p->k, nb = p->k * p->n, nc = p->m * p->n;
    float *a = gr_aligned_alloc((size_t)na * 4), *b = gr_aligned_alloc((size_t)nb * 4);
    float *out = gr_aligned_alloc((size_t)nc * 4);
    GR_ASSERT(a && b && out);
    for (int64_t i = 0; i < na; i++) a[i] = (float)(i % 7) * 0.1f;
    for (int64_t i = 0; i < nb; i++) b[i] = (float)(i % 5) * 0.1f;
    memset(out, 0, (size_t)nc * 4);
    dnnl_memory_t mem[3];
    dnnl_primitive_t prim = mm ? gb_matmul(c, p, mem, a, b, out) : NULL;
    const double flops = 2.0 * (double)p->m * (double)p->n * (double)p->k;
    const int reps = (int)GR_MAX(20, GR_MIN(2000, 4e8 / flops)); /* ~0.4 GFLOP a timing */
    double best = 1e30;
    const int saved = gr_cpu_gemm_threads_begin(flops); /* gpurun's rule: a small product on one thread */
    for (int t = 0; t < GB_TIMINGS + 1; t++) { /* the first: a warm-up */
        const double t0 = gr_now();
        for (int r = 0; r < reps; r++) {
            if (mm) {
                dnnl_exec_arg_t args[3] = {{DNNL_ARG_SRC, mem[0]}, {DNNL_ARG_WEIGHTS, mem[1]}, {DNNL_ARG_DST, mem[2]}};
                GR_DNNL_CHECK(dnnl_primitive_execute(prim, c->stream, 3, args));
                GR_DNNL_CHECK(dnnl_stream_wait(c->stream));
            } else {
                GR_DNNL_CHECK(dnnl_sgemm(p->ta ? 'T' : 'N', p->tb ? 'T' : 'N', p->m, p->n, p->k, 1.0f, a, p->ta ? p->m : p->k,
                                    b, p->tb ? p->k : p->n, p->beta, out, p->n));
            }
        }
        const double s = (gr_now() - t0) / reps;
        if (t > 0) best = GR_MIN(best, s);
    }
    gr_cpu_gemm_threads_end(saved);
    if (mm) {
        GR_DNNL_CHECK(dnnl_primitive_destroy(prim));
        for (int i = 0; i < 3; i++) GR_DNNL_CHECK(dnnl_memory_destroy(mem[i]));
    }
    gr_aligned_free(a), gr_aligned_free(b), gr_aligned_free(out);
    return best;
}

/* each layer's products as gpurun's dense runs them (kernels/cpu/dense.c): x [n, F], W [U, F], y [n, U] */
static int gb_products(int64_t batch, const int64_t *width, int layers, gb_prod *p) {
    int np = 0;
    for (int l = 0; l < layers; l++) {
        const int64_t f = width[l], u = width[l + 1];
        p[np++] = (gb_prod){"forward", l, false, true, batch, u, f, 0.0f, true};
        if (l > 0) p[np++] = (gb_prod){"backward data", l, false, false, batch, f, u, 0.0f, false};
        p[np++] = (gb_prod){"backward weights", l, true, false, u, f, batch, 1.0f, false};
    }
    return np;
}

int main(int argc, char **argv) {
    const int threads = argc > 1 ? atoi(argv[1]) : 0;
    const int64_t batch = argc > 2 ? atoll(argv[2]) : 0;
    const int layers = argc - 4;
    int64_t width[GB_MAX_LAYERS + 1];
    bool ok = threads > 0 && batch > 0 && layers >= 1 && layers <= GB_MAX_LAYERS;
    for (int i = 0; ok && i <= layers; i++) ok = (width[i] = atoll(argv[3 + i])) > 0;
    if (!ok) {
        fprintf(stderr, "usage: gpurun_gemm_bench THREADS BATCH F0 F1 ... (positive; 2 to %d widths)\n",
                GB_MAX_LAYERS + 1);
        return 2;
    }
    omp_set_num_threads(threads);
    gb_ctx c;
    GR_DNNL_CHECK(dnnl_engine_create(&c.eng, dnnl_cpu, 0));
    GR_DNNL_CHECK(dnnl_stream_create(&c.stream, c.eng, dnnl_stream_default_flags));
    gb_prod p[3 * GB_MAX_LAYERS];
    const int np = gb_products(batch, width, layers, p);
    double flops = 0.0, route = 0.0, best = 0.0;
    for (int i = 0; i < np; i++) {
        const double fl = 2.0 * (double)p[i].m * (double)p[i].n * (double)p[i].k;
        const double sg = gb_time(&c, &p[i], false), mm = gb_time(&c, &p[i], true);
        flops += fl, route += p[i].route_mm ? mm : sg, best += GR_MIN(sg, mm);
        printf("dense%d %-16s m %5lld n %5lld k %5lld   sgemm %8.1f us %6.1f GFLOP/s   matmul %8.1f us %6.1f GFLOP/s"
               "   gpurun: %s\n",
               p[i].layer, p[i].what, (long long)p[i].m, (long long)p[i].n, (long long)p[i].k, sg * 1e6, fl / sg / 1e9,
               mm * 1e6, fl / mm / 1e9, p[i].route_mm ? "matmul" : "sgemm");
    }
    printf("the products alone, cache-hot, %d threads: %.1f us a step on gpurun's routes (%.1f GFLOP/s), %.1f us on "
           "the faster of each (%.1f GFLOP/s)\n",
           threads, route * 1e6, flops / route / 1e9, best * 1e6, flops / best / 1e9);
    printf("{\"flops\": %.0f, \"route_us\": %.2f, \"best_us\": %.2f}\n", flops, route * 1e6, best * 1e6);
    dnnl_stream_destroy(c.stream);
    dnnl_engine_destroy(c.eng);
    return 0;
}
