/* backend.c — backend creation by device name, the thin dispatch
 * wrappers the runtime (exec/) and runner call, and the device-fault path. */
#include "backend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "body_half.h"

_Static_assert(GR_BODY_F32 == (int)GR_F32 && GR_BODY_BF16 == (int)GR_BF16 && GR_BODY_F16 == (int)GR_F16,
               "body_half.h's storage types must be graph.h's gr_elem values");

gr_status gr_backend_create(const char *device, int threads, gr_backend **out, gr_error *err) {
    *out = NULL;
    if (strcmp(device, "cpu") == 0) return gr_cpu_backend_create(threads, out, err);
    if (strncmp(device, "cuda", 4) == 0) {
        int dev = 0;
        if (device[4] == ':') dev = atoi(device + 5);
#ifdef GR_HAVE_CUDA
        return gr_cuda_backend_create(dev, out, err);
#else
        (void)dev;
        return gr_error_set(err, GR_ERR_DEVICE, "device '%s': this gpurun was built without CUDA "
                            "(rebuild with -DGPURUN_CUDA=ON on a machine with the CUDA toolkit)", device);
#endif
    }
    return gr_error_set(err, GR_ERR_USAGE, "device '%s': expected auto, cpu, cuda or cuda:N", device);
}

void gr_backend_free(gr_backend *be) {
    if (be) be->vt->destroy(be);
}

const char *gr_backend_name(const gr_backend *be) { return be->vt->name; }

bool gr_backend_supports_op(const gr_backend *be, gr_op op) {
    return op >= 0 && op < GR_OP_COUNT && be->vt->kernels[op] != NULL;
}

gr_kernel_fn gr_backend_kernel(const gr_backend *be, gr_op op) {
    GR_ASSERT(gr_backend_supports_op(be, op));
    return be->vt->kernels[op];
}

void *gr_backend_alloc(gr_backend *be, size_t bytes) { return be->vt->alloc(be, bytes); }
void gr_backend_dealloc(gr_backend *be, void *p) { if (p) be->vt->dealloc(be, p); }
void gr_backend_zero(gr_backend *be, void *p, size_t bytes) { be->vt->zero(be, p, bytes); }
void gr_backend_upload(gr_backend *be, void *dst, const void *src, size_t bytes) {
    be->vt->upload(be, dst, src, bytes);
}
void gr_backend_download(gr_backend *be, void *dst, const void *src, size_t bytes) {
    be->vt->download(be, dst, src, bytes);
}
void gr_backend_sync(gr_backend *be) { be->vt->sync(be); }

void *gr_backend_host_alloc(gr_backend *be, size_t bytes) {
    return be->vt->host_alloc ? be->vt->host_alloc(be, bytes) : gr_aligned_alloc(bytes);
}

void gr_backend_host_free(gr_backend *be, void *p) {
    if (!p) return;
    if (be->vt->host_free) be->vt->host_free(be, p);
    else gr_aligned_free(p);
}

void gr_backend_sgd(gr_backend *be, float *w, float *g, float *buf, int64_t n,
                    const gr_sgd_hparams *h, double *sumsq, bool *cleared) {
    be->vt->sgd(be, w, g, buf, n, h, sumsq, cleared);
}

void gr_backend_adamw(gr_backend *be, float *w, float *g, float *m, float *v, int64_t n,
                      const gr_adamw_hparams *h, double *sumsq, bool *cleared) {
    be->vt->adamw(be, w, g, m, v, n, h, sumsq, cleared);
}

double gr_backend_sumsq(gr_backend *be, const float *g, int64_t n) { return be->vt->sumsq(be, g, n); }

gr_status gr_backend_decoder_open(gr_backend *be, char *desc, size_t n, gr_error *err) {
    if (n) desc[0] = 0;
    if (!be->vt->decoder_open)
        return gr_error_set(err, GR_ERR_DEVICE, "the %s backend has no image decoder (JPEGs decode on the host)",
                            be->vt->name);
    return be->vt->decoder_open(be, desc, n, err);
}

gr_status gr_backend_decode_images(gr_backend *be, const gr_enc_batch *e, float *dst, uint8_t *need_host, char *why,
                                   size_t why_n, gr_error *err) {
    GR_ASSERT(be->vt->decode_images);
    return be->vt->decode_images(be, e, dst, need_host, why, why_n, err);
}

void gr_backend_upload_batch(gr_backend *be, void *dst, const void *src, size_t bytes) {
    if (be->vt->upload_batch) be->vt->upload_batch(be, dst, src, bytes);
    else be->vt->upload(be, dst, src, bytes);
}

const char *gr_backend_describe(gr_backend *be, char *buf, size_t n) {
    if (be->vt->describe) be->vt->describe(be, buf, n);
    else snprintf(buf, n, "%s", be->vt->name);
    return buf;
}

bool gr_backend_mem_info(gr_backend *be, size_t *free_bytes, size_t *total_bytes) {
    return be->vt->mem_info && be->vt->mem_info(be, free_bytes, total_bytes);
}

void gr_backend_configure(gr_backend *be, const gr_backend_opts *o) {
    be->precision = o->precision;
    if (be->vt->configure) be->vt->configure(be, o);
}

int64_t gr_kargs_rows(const gr_kargs *a) {
    const gr_tensor *t = a->tin[0];
    return a->n * (gr_tensor_sample_numel(t) / t->shape[t->ndim - 1]);
}

int64_t gr_kargs_numel(const gr_kargs *a, const gr_tensor *t) {
    return t->batched ? a->n * gr_tensor_sample_numel(t) : gr_tensor_numel(t);
}

bool gr_backend_native_half(gr_backend *be, const gr_kargs *a) {
    return be->vt->native_half && be->vt->native_half(be, a);
}

void gr_backend_layout_caps(gr_backend *be, gr_layout_cap caps[GR_OP_COUNT]) {
    for (int i = 0; i < GR_OP_COUNT; i++) caps[i] = GR_LAYOUT_CAP_NONE;
    if (be->vt->layout_caps) be->vt->layout_caps(be, caps);
}

unsigned gr_backend_fusions(gr_backend *be) {
    if (!be->vt->op_caps) return 0;
    const unsigned bn = be->vt->op_caps(be, GR_OP_BATCHNORM) & be->vt->op_caps(be, GR_OP_BATCHNORM_BWD);
    return (bn & GR_CAP_RELU_AFTER ? GR_FUSE_BN_RELU : 0u) |
           (be->vt->op_caps(be, GR_OP_ADD) & GR_CAP_RELU_AFTER ? GR_FUSE_ADD_RELU : 0u) |
           (be->vt->op_caps(be, GR_OP_DENSE) & GR_CAP_RELU_AFTER ? GR_FUSE_DENSE_RELU : 0u) |
           (be->vt->op_caps(be, GR_OP_DENSE_BWD_DATA) & GR_CAP_RELU_MASK ? GR_FUSE_DENSE_RELU_BWD : 0u) |
           (be->vt->op_caps(be, GR_OP_ADD) & GR_CAP_RELU_MASK ? GR_FUSE_SUM_RELU_BWD : 0u);
}

void gr_backend_cast(gr_backend *be, void *dst, gr_elem dt, const void *src, gr_elem st, int64_t n) {
    GR_ASSERT((dt == GR_F32 && gr_elem_is_half(st)) || (st == GR_F32 && gr_elem_is_half(dt)));
    if (n > 0) be->vt->cast(be, dst, dt, src, st, n);
}

/* The step on fp32 copies of its half tensors (gr_kargs.staged). */
static void gr_backend_exec_staged(const gr_kargs *a, gr_kernel_fn fn) {
    gr_kargs b = *a;
    for (int k = 0; k < a->node->nin; k++) {
        if (!a->stage_in[k]) continue;
        gr_backend_cast(a->be, a->stage_in[k], GR_F32, a->in[k], a->ein[k], gr_kargs_numel(a, a->tin[k]));
        b.in[k] = a->stage_in[k];
        b.ein[k] = GR_F32;
    }
    for (int k = 0; k < a->node->nout; k++) {
        if (!a->stage_out[k]) continue;
        b.out[k] = a->stage_out[k];
        b.eout[k] = GR_F32;
    }
    fn(&b);
    for (int k = 0; k < a->node->nout; k++)
        if (a->stage_out[k])
            gr_backend_cast(a->be, a->out[k], a->eout[k], a->stage_out[k], GR_F32, gr_kargs_numel(a, a->tout[k]));
}

void gr_backend_exec(const gr_kargs *a) {
    gr_kernel_fn fn = a->be->vt->kernels[a->node->op];
    if (a->staged) gr_backend_exec_staged(a, fn);
    else fn(a);
    if (a->be->vt->op_done) a->be->vt->op_done(a->be, a);
}

bool gr_backend_host_addressable(const gr_backend *be) { return be->vt->host_addressable; }

void *gr_backend_stream(gr_backend *be) { return be->vt->stream ? be->vt->stream(be) : NULL; }

size_t gr_backend_mem_peak(gr_backend *be) { return be->vt->mem_peak ? be->vt->mem_peak(be) : 0; }

bool gr_backend_peak(gr_backend *be, gr_peak *out) {
    if (be->vt->peak) return be->vt->peak(be, out);
    memset(out, 0, sizeof *out);
    return false;
}

gr_status gr_backend_prepare(gr_backend *be, gr_steps *s, gr_error *err) {
    return be->vt->prepare ? be->vt->prepare(be, s, err) : GR_OK;
}

void gr_backend_release(gr_backend *be, gr_steps *s) {
    if (be->vt->release) be->vt->release(be, s);
}

void gr_backend_mark(gr_backend *be, gr_mark *m) {
    m->t = gr_now();
    if (be->vt->mark) be->vt->mark(be, m);
}

double gr_backend_mark_seconds(gr_backend *be, const gr_mark *from, const gr_mark *to) {
    return be->vt->mark_seconds ? be->vt->mark_seconds(be, from, to) : to->t - from->t;
}

void gr_backend_mark_free(gr_backend *be, gr_mark *m) {
    if (be->vt->mark_free && m->ev) be->vt->mark_free(be, m);
    m->ev = NULL;
}

bool gr_backend_pci_bus_id(gr_backend *be, char *buf, size_t n) {
    return be->vt->pci_bus_id && be->vt->pci_bus_id(be, buf, n);
}

bool gr_backend_workspace(gr_backend *be, const gr_steps *s, size_t *bytes) {
    *bytes = 0;
    return be->vt->workspace && be->vt->workspace(be, s, bytes);
}

gr_run_mode gr_backend_run_begin(gr_backend *be, gr_steps *s, int64_t n, const gr_exec_ctx *ctx) {
    return be->vt->run_begin ? be->vt->run_begin(be, s, n, ctx) : GR_RUN_EAGER;
}

void gr_backend_run_end(gr_backend *be, gr_steps *s, gr_run_mode mode) {
    if (be->vt->run_end) be->vt->run_end(be, s, mode);
}

/* ---- device faults ---- */
static gr_backend_fault_fn gr_fault_handler; /* process-wide: set once by runner/main.c */

void gr_backend_set_fault_handler(gr_backend_fault_fn fn) { gr_fault_handler = fn; }

_Noreturn void gr_backend_fault(const char *what) {
    if (gr_fault_handler) gr_fault_handler(what);
    else fprintf(stderr, "gpurun: %s\n", what);
    abort();
}
