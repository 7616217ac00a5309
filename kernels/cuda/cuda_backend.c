/* cuda_backend.c — the CUDA backend's function table. This version holds
 * the device memory and the optimizer updates; the per-op kernels (cuBLAS,
 * cuDNN, custom) are not written yet, so every op is reported unsupported and
 * a plan refuses the device at compile time (`device: auto` then picks the
 * CPU and says so). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../backend.h"
#include "cuda_rt.h"

static const gr_kernel_fn gr_cuda_kernels[GR_OP_COUNT] = {0};

static void *gr_cuda_alloc_be(gr_backend *be, size_t bytes) { (void)be; return gr_cuda_malloc(bytes); }
static void gr_cuda_dealloc_be(gr_backend *be, void *p) { (void)be; gr_cuda_free(p); }
static void gr_cuda_zero_be(gr_backend *be, void *p, size_t bytes) { (void)be; gr_cuda_zero(p, bytes); }
static void gr_cuda_upload_be(gr_backend *be, void *dst, const void *src, size_t bytes) {
    (void)be;
    gr_cuda_h2d(dst, src, bytes);
}
static void gr_cuda_download_be(gr_backend *be, void *dst, const void *src, size_t bytes) {
    (void)be;
    gr_cuda_d2h(dst, src, bytes);
}
static void gr_cuda_sync_be(gr_backend *be) { (void)be; gr_cuda_sync(); }
static void *gr_cuda_host_alloc_be(gr_backend *be, size_t bytes) { (void)be; return gr_cuda_host_alloc(bytes); }
static void gr_cuda_host_free_be(gr_backend *be, void *p) { (void)be; gr_cuda_host_free(p); }

static void gr_cuda_sgd_be(gr_backend *be, float *w, const float *g, float *buf, int64_t n,
                           const gr_sgd_hparams *h) {
    (void)be;
    gr_cuda_sgd(w, g, buf, n, h->lr, h->momentum, h->weight_decay, h->grad_mult, h->nesterov);
}

static void gr_cuda_adamw_be(gr_backend *be, float *w, const float *g, float *m, float *v, int64_t n,
                             const gr_adamw_hparams *h) {
    (void)be;
    gr_cuda_adamw(w, g, m, v, n, h->lr, h->beta1, h->beta2, h->eps, h->weight_decay, h->grad_mult, h->t);
}

static double gr_cuda_sumsq_be(gr_backend *be, const float *g, int64_t n) {
    (void)be;
    return gr_cuda_sumsq(g, n);
}

static void gr_cuda_destroy(gr_backend *be) { free(be); }

static const gr_backend_vtable gr_cuda_vtable = {
    .name = "cuda",
    .kernels = gr_cuda_kernels,
    .alloc = gr_cuda_alloc_be,
    .dealloc = gr_cuda_dealloc_be,
    .zero = gr_cuda_zero_be,
    .upload = gr_cuda_upload_be,
    .download = gr_cuda_download_be,
    .sync = gr_cuda_sync_be,
    .host_alloc = gr_cuda_host_alloc_be,
    .host_free = gr_cuda_host_free_be,
    .sgd = gr_cuda_sgd_be,
    .adamw = gr_cuda_adamw_be,
    .sumsq = gr_cuda_sumsq_be,
    .destroy = gr_cuda_destroy,
};

gr_status gr_cuda_backend_create(int device, gr_backend **out, gr_error *err) {
    char msg[256] = "", name[256] = "";
    int count = 0;
    if (gr_cuda_device_count(&count, msg, sizeof msg) != 0 || count == 0)
        return gr_error_set(err, GR_ERR_DEVICE, "device cuda:%d: no CUDA device is available%s%s", device,
                            msg[0] ? " (" : "", msg[0] ? msg : "");
    if (device < 0 || device >= count)
        return gr_error_set(err, GR_ERR_DEVICE, "device cuda:%d: only %d CUDA device%s present", device,
                            count, count == 1 ? " is" : "s are");
    if (gr_cuda_select(device, name, sizeof name, msg, sizeof msg) != 0)
        return gr_error_set(err, GR_ERR_DEVICE, "device cuda:%d: %s", device, msg);
    gr_backend *be = gr_xcalloc(1, sizeof *be);
    be->vt = &gr_cuda_vtable;
    be->threads = 1;
    *out = be;
    return GR_OK;
}
