/* test_cuda_cublas_dl.c — kernels/cuda/cublas_dl.h: cuBLAS is not in a
 * gpurun process until a CUDA backend loads it (its constructors cost every
 * process 0.3 s at start when it was linked); loading fills every entry,
 * once; a library that is missing, or is not cuBLAS, is an error naming it.
 * Built in CUDA builds, label `gpu`, but needs no device: it runs wherever
 * the CUDA build does (bench/gpu.sh's `ctest -L gpu` too). */
#include <stdio.h>
#include <string.h>

#include "gr_test.h"

#include "kernels/cuda/cublas_dl.h"

/* whether a file whose path contains name is mapped into this process */
static bool mapped(const char *name) {
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f) return false;
    char line[4096];
    bool found = false;
    while (!found && fgets(line, sizeof line, f)) found = strstr(line, name) != NULL;
    fclose(f);
    return found;
}

int main(void) {
    /* linked to gpurun_core as gpurun is: nothing of cuBLAS yet */
    CHECK_MSG(!mapped("libcublas"), "libcublas is mapped before any CUDA backend was made");
    CHECK(gr_cublas.Create == NULL);

    gr_cublas_fns f;
    gr_error err;
    const char *none[] = {"libgr-no-such-cublas.so.0"};
    CHECK(gr_cublas_open(none, 1, &f, &err) == GR_ERR_DEVICE);
    CHECK_STR_CONTAINS(err.msg, "cuBLAS could not be loaded");
    CHECK_STR_CONTAINS(err.msg, "libgr-no-such-cublas.so.0");
    const char *other[] = {"libgr-no-such-cublas.so.0", "libm.so.6"}; /* opens, but is not cuBLAS */
    CHECK(gr_cublas_open(other, 2, &f, &err) == GR_ERR_DEVICE);
    CHECK_STR_CONTAINS(err.msg, "libm.so.6 has no cublasCreate_v2");
    CHECK(!mapped("libcublas"));

    CHECK_MSG(gr_cublas_load(&err) == GR_OK, "%s", err.msg);
    CHECK(mapped("libcublas"));
    const void *fns[] = {(void *)gr_cublas.Create,      (void *)gr_cublas.Destroy,      (void *)gr_cublas.SetStream,
                         (void *)gr_cublas.SetMathMode, (void *)gr_cublas.SetWorkspace, (void *)gr_cublas.GemmEx,
                         (void *)gr_cublas.GetStatusString};
    for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++) CHECK_MSG(fns[i] != NULL, "entry %zu is NULL", i);
    const char *s = gr_cublas.GetStatusString ? gr_cublas.GetStatusString(CUBLAS_STATUS_NOT_INITIALIZED) : NULL;
    CHECK(s && strlen(s) > 0);
    /* once: a second call keeps the same table */
    gr_cublas_fns before = gr_cublas;
    CHECK(gr_cublas_load(&err) == GR_OK);
    CHECK(memcmp(&before, &gr_cublas, sizeof before) == 0);
    return gr_test_report();
}
