/* backend.h — the one interface between a plan and a device.
 *
 * A backend is a table of functions behind an opaque handle (gr_backend):
 * memory (alloc/free/copy), one kernel per op (NULL = unsupported, and the
 * plan refuses it loudly at compile time — never a silent CPU fallback), and
 * the flat-array optimizer updates. The CPU backend (kernels/cpu/) is the
 * embedded default and the numerical reference; the CUDA backend fills the
 * same table.
 *
 * Kernels get a gr_kargs: resolved data pointers for the node's inputs and
 * outputs (device memory of that backend), the runtime batch n, and the
 * step's context (training or not, RNG key, gradient scale). */
#ifndef GR_BACKEND_H
#define GR_BACKEND_H

#include "../graph/graph.h"
#include "cpu/optim.h"

typedef struct gr_backend gr_backend;

/* Per-run context shared by every kernel of one plan execution. */
typedef struct gr_exec_ctx {
    bool training;       /* dropout active, BN batch statistics (issue 4) */
    uint64_t rng_key;    /* unique per (seed, step, micro-batch): dropout masks */
    float grad_scale;    /* d(loss)/d(per-sample loss): 1 / samples per optimizer step */
} gr_exec_ctx;

typedef struct gr_kargs {
    const gr_graph *g;
    const gr_node *node;
    const gr_tensor *tin[GR_MAX_IN], *tout[GR_MAX_OUT];
    void *in[GR_MAX_IN], *out[GR_MAX_OUT];
    int64_t n;           /* samples in this run (<= planned micro-batch) */
    const gr_exec_ctx *ctx;
    gr_backend *be;
} gr_kargs;

typedef void (*gr_kernel_fn)(const gr_kargs *a);

/* Creates a backend for device "cpu" (threads: 0 = all cores) or "cuda[:N]".
 * GR_ERR_DEVICE when the device is not there or this build lacks it. */
gr_status gr_backend_create(const char *device, int threads, gr_backend **out, gr_error *err);
void gr_backend_free(gr_backend *be);
const char *gr_backend_name(const gr_backend *be);
bool gr_backend_supports_op(const gr_backend *be, gr_op op);
gr_kernel_fn gr_backend_kernel(const gr_backend *be, gr_op op);

/* Device memory. alloc returns NULL on failure (the caller reports exit 4
 * with the byte counts). */
void *gr_backend_alloc(gr_backend *be, size_t bytes);
void gr_backend_dealloc(gr_backend *be, void *p);
void gr_backend_zero(gr_backend *be, void *p, size_t bytes);
void gr_backend_upload(gr_backend *be, void *dst, const void *src, size_t bytes);
void gr_backend_download(gr_backend *be, void *dst, const void *src, size_t bytes);
void gr_backend_sync(gr_backend *be);
/* Host memory for buffers that are copied to the device often (the
 * loader's batches): page-locked on a GPU, 64-byte aligned otherwise.
 * NULL on failure. */
void *gr_backend_host_alloc(gr_backend *be, size_t bytes);
void gr_backend_host_free(gr_backend *be, void *p);

/* Optimizer updates and gradient norm over flat device arrays. */
void gr_backend_sgd(gr_backend *be, float *w, const float *g, float *buf, int64_t n,
                    const gr_sgd_hparams *h);
void gr_backend_adamw(gr_backend *be, float *w, const float *g, float *m, float *v, int64_t n,
                      const gr_adamw_hparams *h);
double gr_backend_sumsq(gr_backend *be, const float *g, int64_t n);

/* ---- for backend implementations (kernels/<device>/) ---- */
typedef struct gr_backend_vtable {
    const char *name;
    const gr_kernel_fn *kernels; /* [GR_OP_COUNT] */
    void *(*alloc)(gr_backend *be, size_t bytes);
    void (*dealloc)(gr_backend *be, void *p);
    void (*zero)(gr_backend *be, void *p, size_t bytes);
    void (*upload)(gr_backend *be, void *dst, const void *src, size_t bytes);
    void (*download)(gr_backend *be, void *dst, const void *src, size_t bytes);
    void (*sync)(gr_backend *be);
    void *(*host_alloc)(gr_backend *be, size_t bytes); /* NULL: gr_aligned_alloc */
    void (*host_free)(gr_backend *be, void *p);
    void (*sgd)(gr_backend *be, float *w, const float *g, float *buf, int64_t n, const gr_sgd_hparams *h);
    void (*adamw)(gr_backend *be, float *w, const float *g, float *m, float *v, int64_t n,
                  const gr_adamw_hparams *h);
    double (*sumsq)(gr_backend *be, const float *g, int64_t n);
    void (*destroy)(gr_backend *be);
} gr_backend_vtable;

struct gr_backend {
    const gr_backend_vtable *vt;
    void *impl;
    int threads;
};

gr_status gr_cpu_backend_create(int threads, gr_backend **out, gr_error *err);
#ifdef GR_HAVE_CUDA
gr_status gr_cuda_backend_create(int device, gr_backend **out, gr_error *err);
#endif

#endif
