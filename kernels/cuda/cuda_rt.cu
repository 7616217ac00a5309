// cuda_rt.cu — CUDA runtime calls and the optimizer kernels of the CUDA
// backend (flat fp32 arrays, same semantics as kernels/cpu/optim.h).
// Kernels first, then their launchers; every runtime call goes through
// CUDA_CHECK, which reports file:line and exits 7 (device error).
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_rt.h"

#define CUDA_CHECK(call) do { \
    cudaError_t e_ = (call); \
    if (e_ != cudaSuccess) { \
        fprintf(stderr, "gpurun: CUDA error at %s:%d: %s (%s)\n", __FILE__, __LINE__, \
                cudaGetErrorString(e_), #call); \
        exit(7); \
    } \
} while (0)

__global__ void gr_sgd_kernel(float *w, const float *g, float *buf, int64_t n, float lr, float momentum,
                              float wd, float mult, int nesterov) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float gi = mult * g[i] + wd * w[i];
    float d = gi;
    if (buf) {
        float b = momentum * buf[i] + gi;
        buf[i] = b;
        d = nesterov ? gi + momentum * b : b;
    }
    w[i] -= lr * d;
}

__global__ void gr_adamw_kernel(float *w, const float *g, float *m, float *v, int64_t n, float lr, float b1,
                                float b2, float eps, float decay, float mult, float c1, float c2) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float gi = mult * g[i];
    float wi = w[i] * decay;
    float mi = b1 * m[i] + (1.0f - b1) * gi;
    float vi = b2 * v[i] + (1.0f - b2) * gi * gi;
    m[i] = mi;
    v[i] = vi;
    w[i] = wi - lr * (mi / c1) / (sqrtf(vi / c2) + eps);
}

__global__ void gr_sumsq_kernel(const float *g, int64_t n, double *out) {
    __shared__ double part[256];
    double s = 0.0;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        s += (double)g[i] * (double)g[i];
    part[threadIdx.x] = s;
    __syncthreads();
    for (unsigned k = blockDim.x / 2; k > 0; k >>= 1) {
        if (threadIdx.x < k) part[threadIdx.x] += part[threadIdx.x + k];
        __syncthreads();
    }
    if (threadIdx.x == 0) atomicAdd(out, part[0]);
}

static unsigned gr_blocks(int64_t n, int threads) { return (unsigned)((n + threads - 1) / threads); }

extern "C" int gr_cuda_device_count(int *count, char *msg, size_t msg_len) {
    cudaError_t e = cudaGetDeviceCount(count);
    if (e != cudaSuccess) {
        *count = 0;
        snprintf(msg, msg_len, "%s", cudaGetErrorString(e));
        return 1;
    }
    return 0;
}

extern "C" int gr_cuda_select(int device, char *name, size_t name_len, char *msg, size_t msg_len) {
    cudaError_t e = cudaSetDevice(device);
    if (e != cudaSuccess) {
        snprintf(msg, msg_len, "%s", cudaGetErrorString(e));
        return 1;
    }
    cudaDeviceProp prop;
    e = cudaGetDeviceProperties(&prop, device);
    if (e != cudaSuccess) {
        snprintf(msg, msg_len, "%s", cudaGetErrorString(e));
        return 1;
    }
    snprintf(name, name_len, "%s", prop.name);
    return 0;
}

extern "C" void *gr_cuda_malloc(size_t bytes) {
    void *p = NULL;
    if (cudaMalloc(&p, bytes ? bytes : 256) != cudaSuccess) {
        (void)cudaGetLastError(); // clear the sticky-free allocation error
        return NULL;
    }
    return p;
}

extern "C" void gr_cuda_free(void *p) { CUDA_CHECK(cudaFree(p)); }

// Page-locked host memory (portable: usable from any context), so the
// loader's batches copy to the device by DMA, asynchronously.
extern "C" void *gr_cuda_host_alloc(size_t bytes) {
    void *p = NULL;
    if (cudaHostAlloc(&p, bytes ? bytes : 64, cudaHostAllocPortable) != cudaSuccess) {
        (void)cudaGetLastError();
        return NULL;
    }
    return p;
}

extern "C" void gr_cuda_host_free(void *p) { CUDA_CHECK(cudaFreeHost(p)); }
extern "C" void gr_cuda_zero(void *p, size_t bytes) { CUDA_CHECK(cudaMemset(p, 0, bytes)); }
extern "C" void gr_cuda_h2d(void *dst, const void *src, size_t bytes) {
    CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
}
extern "C" void gr_cuda_d2h(void *dst, const void *src, size_t bytes) {
    CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
}
extern "C" void gr_cuda_sync(void) { CUDA_CHECK(cudaDeviceSynchronize()); }

extern "C" void gr_cuda_sgd(float *w, const float *g, float *buf, int64_t n, float lr, float momentum,
                            float weight_decay, float grad_mult, int nesterov) {
    if (n <= 0) return;
    gr_sgd_kernel<<<gr_blocks(n, 256), 256>>>(w, g, buf, n, lr, momentum, weight_decay, grad_mult, nesterov);
    CUDA_CHECK(cudaGetLastError());
}

extern "C" void gr_cuda_adamw(float *w, const float *g, float *m, float *v, int64_t n, float lr, float beta1,
                              float beta2, float eps, float weight_decay, float grad_mult, int64_t t) {
    if (n <= 0) return;
    float c1 = (float)(1.0 - pow((double)beta1, (double)t));
    float c2 = (float)(1.0 - pow((double)beta2, (double)t));
    float decay = (float)(1.0 - (double)lr * (double)weight_decay);
    gr_adamw_kernel<<<gr_blocks(n, 256), 256>>>(w, g, m, v, n, lr, beta1, beta2, eps, decay, grad_mult, c1, c2);
    CUDA_CHECK(cudaGetLastError());
}

extern "C" double gr_cuda_sumsq(const float *g, int64_t n) {
    double *d = NULL, h = 0.0;
    CUDA_CHECK(cudaMalloc(&d, sizeof *d));
    CUDA_CHECK(cudaMemset(d, 0, sizeof *d));
    unsigned blocks = gr_blocks(n, 256);
    if (blocks > 1024) blocks = 1024;
    if (n > 0) gr_sumsq_kernel<<<blocks, 256>>>(g, n, d);
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaMemcpy(&h, d, sizeof h, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaFree(d));
    return h;
}
