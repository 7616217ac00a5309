/* cu_check.h — the one macro family that checks every CUDA runtime, cuBLAS
 * and cuDNN call of the CUDA backend (C files and .cu files alike).
 *
 * A failing call is a device error the run cannot recover from (a lost
 * device, an illegal address, a driver fault): gr_cuda_die reports the call,
 * its file:line and the library's message through gr_backend_fault, whose
 * handler (runner/main.c) prints it and exits 7 (DESIGN 1.2). Calls
 * whose failure is an expected condition (cudaMalloc, device discovery)
 * are checked by hand where they are made and reported as a gr_status.
 * cuBLAS calls go through the table its loader fills (gr_cublas,
 * cublas_dl.h), which a C file using GR_CUBLAS includes. */
#ifndef GR_CU_CHECK_H
#define GR_CU_CHECK_H

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

__attribute__((noreturn)) void gr_cuda_die(const char *file, int line, const char *call, const char *msg);

#ifdef __cplusplus
}
#endif

#define GR_CU(call) do { \
    cudaError_t gr_e_ = (call); \
    if (gr_e_ != cudaSuccess) gr_cuda_die(__FILE__, __LINE__, #call, cudaGetErrorString(gr_e_)); \
} while (0)

/* after a kernel launch: a bad configuration is reported at once */
#define GR_CU_LAUNCHED() GR_CU(cudaGetLastError())

#define GR_CUBLAS(call) do { \
    cublasStatus_t gr_s_ = (call); \
    if (gr_s_ != CUBLAS_STATUS_SUCCESS) gr_cuda_die(__FILE__, __LINE__, #call, gr_cublas.GetStatusString(gr_s_)); \
} while (0)

#define GR_CUDNN(call) do { \
    cudnnStatus_t gr_s_ = (call); \
    if (gr_s_ != CUDNN_STATUS_SUCCESS) gr_cuda_die(__FILE__, __LINE__, #call, cudnnGetErrorString(gr_s_)); \
} while (0)

/* Threads per block of the custom kernels, and the grid covering n items. */
#define GR_CU_THREADS 256
#define GR_CU_BLOCKS(n) ((unsigned)(((n) + GR_CU_THREADS - 1) / GR_CU_THREADS))

#endif
