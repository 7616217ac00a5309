/* cublas_dl.h — cuBLAS, loaded when the first CUDA backend is made instead
 * of linked into gpurun.
 *
 * Why: libcublas and the libcublasLt it needs run static constructors when
 * they are loaded, 0.32 s on this project's 2-core machines (an empty
 * main() linked with -lcublas took 0.32 s to run; linked with cudart,
 * cuDNN, NCCL, oneDNN, MPI or HDF5, under 0.01 s each). Linked, every
 * gpurun process paid it: `gpurun --version`, `validate`, every CPU run and
 * each of the test suite's invocations. Loaded here, only a process that
 * makes a CUDA backend does.
 *
 * The backend calls the few cuBLAS functions it uses through gr_cublas, a
 * table filled by gr_cublas_load (once per process; safe to call again).
 * The library is found as the dynamic linker would have found it when it
 * was linked (libcublas.so.<the headers' major version>: LD_LIBRARY_PATH,
 * gpurun's run path, the system's cache), else at the path the build
 * linked against before (GR_CUBLAS_PATH, from CMake: a toolkit's or a pip
 * wheel's). */
#ifndef GR_CUBLAS_DL_H
#define GR_CUBLAS_DL_H

#include <cublas_v2.h>

#include "../../common/gr_common.h"

/* cublas_v2.h's names are macros for the _v2 entry points: __typeof__ and
 * the symbol looked up both see the expanded name */
typedef struct gr_cublas_fns {
    __typeof__(cublasCreate) *Create;
    __typeof__(cublasDestroy) *Destroy;
    __typeof__(cublasSetStream) *SetStream;
    __typeof__(cublasSetMathMode) *SetMathMode;
    __typeof__(cublasSetWorkspace) *SetWorkspace;
    __typeof__(cublasGemmEx) *GemmEx;
    __typeof__(cublasGetStatusString) *GetStatusString;
} gr_cublas_fns;

/* the loaded table (all NULL before a successful gr_cublas_load) */
extern gr_cublas_fns gr_cublas;

/* Loads cuBLAS into gr_cublas once; every call returns that first load's
 * outcome (GR_ERR_DEVICE naming the libraries tried and dlerror's words). */
gr_status gr_cublas_load(gr_error *err);

/* The loading itself, from the first of libs that opens (tests give
 * their own): every function in fns, or an error naming each try. */
gr_status gr_cublas_open(const char *const *libs, int nlibs, gr_cublas_fns *fns, gr_error *err);

#endif
