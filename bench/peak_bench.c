/* peak_bench.c — this machine's practical peak, the roofline the benches
 * print their achieved GFLOP/s and GB/s against (gr_backend_peak, kernels/
 * cpu/peak.c): a 1536^3 GEMM through gpurun's fp32 GEMM (oneDNN's sgemm)
 * and a oneDNN bf16 matmul, and a streaming copy of 128 MiB (read +
 * write), each the fastest of several calls, on THREADS threads; the best
 * of 4 such probes (the line also says the lowest: a shared machine's
 * neighbours move it). Built with gpurun (the CMake target
 * gpurun_peak_bench).
 * Usage: gpurun_peak_bench [THREADS]   (default: the CPUs this process may use)
 * Prints one line for people, then one JSON line:
 *   {"threads": 2, "fp32_gflops": ..., "bf16_gflops": ..., "mem_gbs": ...} */
#include <stdio.h>
#include <stdlib.h>

#include "common/gr_common.h"
#include "kernels/backend.h"

enum { GR_PEAK_PROBES = 4 };

int main(int argc, char **argv) {
    const int threads = argc > 1 ? atoi(argv[1]) : gr_host_cpus();
    if (threads <= 0) {
        fprintf(stderr, "usage: gpurun_peak_bench [THREADS > 0]\n");
        return 2;
    }
    gr_backend *be;
    gr_error err;
    if (gr_backend_create("cpu", threads, &be, &err)) {
        fprintf(stderr, "gpurun_peak_bench: %s\n", err.msg);
        return 1;
    }
    /* the best of a few probes: the figures are a ceiling, and a shared machine's other tenants
     * can halve one probe (the range says how much they moved) */
    gr_peak p = {0}, lo = {0};
    for (int i = 0; i < GR_PEAK_PROBES; i++) {
        gr_peak q;
        gr_backend_peak(be, &q);
        p.threads = q.threads;
        p.f32_gflops = GR_MAX(p.f32_gflops, q.f32_gflops), p.bf16_gflops = GR_MAX(p.bf16_gflops, q.bf16_gflops);
        p.mem_gbs = GR_MAX(p.mem_gbs, q.mem_gbs);
        lo.f32_gflops = i ? GR_MIN(lo.f32_gflops, q.f32_gflops) : q.f32_gflops;
        lo.bf16_gflops = i ? GR_MIN(lo.bf16_gflops, q.bf16_gflops) : q.bf16_gflops;
        lo.mem_gbs = i ? GR_MIN(lo.mem_gbs, q.mem_gbs) : q.mem_gbs;
    }
    printf("peak on %d thread%s, the best of %d probes (their lowest): fp32 GEMM %.1f GFLOP/s (%.1f), bf16 GEMM "
           "%.1f GFLOP/s (%.1f)%s, memory %.1f GB/s (%.1f; copy)\n", p.threads, p.threads == 1 ? "" : "s",
           GR_PEAK_PROBES, p.f32_gflops, lo.f32_gflops, p.bf16_gflops, lo.bf16_gflops,
           p.bf16_gflops > 0 ? "" : " (none on this CPU)", p.mem_gbs, lo.mem_gbs);
    printf("{\"threads\": %d, \"fp32_gflops\": %.2f, \"bf16_gflops\": %.2f, \"mem_gbs\": %.2f}\n", p.threads,
           p.f32_gflops, p.bf16_gflops, p.mem_gbs);
    gr_backend_free(be);
    return 0;
}
