/* cuda_rt.h — the CUDA runtime side of the CUDA backend, as a plain C API
 * (implemented in cuda_rt.cu, compiled by nvcc) so the backend table in
 * cuda_backend.c stays C11. Every call is checked; failures return a
 * non-zero code and write the runtime's message into msg. */
#ifndef GR_CUDA_RT_H
#define GR_CUDA_RT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

int gr_cuda_device_count(int *count, char *msg, size_t msg_len);
int gr_cuda_select(int device, char *name, size_t name_len, char *msg, size_t msg_len);
void *gr_cuda_malloc(size_t bytes);
void gr_cuda_free(void *p);
void *gr_cuda_host_alloc(size_t bytes); /* page-locked; NULL on failure */
void gr_cuda_host_free(void *p);
void gr_cuda_zero(void *p, size_t bytes);
void gr_cuda_h2d(void *dst, const void *src, size_t bytes);
void gr_cuda_d2h(void *dst, const void *src, size_t bytes);
void gr_cuda_sync(void);
void gr_cuda_sgd(float *w, const float *g, float *buf, int64_t n, float lr, float momentum,
                 float weight_decay, float grad_mult, int nesterov);
void gr_cuda_adamw(float *w, const float *g, float *m, float *v, int64_t n, float lr, float beta1,
                   float beta2, float eps, float weight_decay, float grad_mult, int64_t t);
double gr_cuda_sumsq(const float *g, int64_t n);

#ifdef __cplusplus
}
#endif

#endif
