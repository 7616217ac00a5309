/* cuda_backend.c — the CUDA backend: device selection, streams, memory, the
 * kernel table, the optimizer launches, and plan runs captured once into a
 * CUDA Graph and replayed (run begin/end around exec/'s one step loop).
 *
 * Every device call goes through cu_check.h; a failing one is a device
 * fault (gr_backend_fault). Allocation failures are not fatal here: alloc
 * returns NULL and the runtime reports exit 4 with the byte counts
 * (gr_backend_mem_info gives free and total). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/env.h"
#include "cu_optim.h"
#include "cu_cast.h"
#include "cuda_backend.h"
#include "cudnn_sdpa.h"

void gr_cuda_die(const char *file, int line, const char *call, const char *msg) {
    char what[2048];
    snprintf(what, sizeof what, "CUDA error at %s:%d: %s (%s)", file, line, msg, call);
    gr_backend_fault(what);
}

static const gr_kernel_fn gr_cuda_kernels[GR_OP_COUNT] = {
#define X(E, name, ...) [GR_OP_##E] = gr_cuda_##name,
#include "../../graph/ops.def"
#undef X
};

static gr_cuda *gr_cu(gr_backend *be) { return be->impl; }

/* ---- memory: a few large blocks (the arenas), so a small table of sizes ---- */
typedef struct { void *p; size_t bytes; } gr_cuda_block;
typedef struct { gr_cuda_block *b; int n, cap; } gr_cuda_blocks;

static void gr_cuda_track(gr_cuda *cu, gr_cuda_blocks *t, void *p, size_t bytes) {
    GR_GROW(t->b, t->cap, t->n + 1);
    t->b[t->n++] = (gr_cuda_block){p, bytes};
    cu->held += bytes;
    if (cu->held > cu->held_peak) cu->held_peak = cu->held;
}

static void gr_cuda_untrack(gr_cuda *cu, gr_cuda_blocks *t, void *p) {
    for (int i = 0; i < t->n; i++)
        if (t->b[i].p == p) {
            cu->held -= t->b[i].bytes;
            t->b[i] = t->b[--t->n];
            return;
        }
}

typedef struct gr_cuda_impl {
    gr_cuda cu;               /* first: be->impl is a gr_cuda * for the op kernels */
    gr_cuda_blocks blocks;
} gr_cuda_impl;

static void *gr_cuda_malloc_raw(gr_cuda *cu, size_t bytes) {
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, bytes ? bytes : 256);
    if (e == cudaErrorMemoryAllocation) {
        (void)cudaGetLastError(); /* out of memory is not a sticky error: clear it */
        return NULL;
    }
    /* anything else is an earlier fault surfacing here (a sticky error): exit 7, not 4 */
    if (e != cudaSuccess) gr_cuda_die(__FILE__, __LINE__, "cudaMalloc", cudaGetErrorString(e));
    gr_cuda_track(cu, &((gr_cuda_impl *)cu)->blocks, p, bytes);
    return p;
}

static void gr_cuda_free_raw(gr_cuda *cu, void *p) {
    if (!p) return;
    gr_cuda_untrack(cu, &((gr_cuda_impl *)cu)->blocks, p);
    GR_CU(cudaFree(p));
}

static void *gr_cuda_alloc(gr_backend *be, size_t bytes) { return gr_cuda_malloc_raw(gr_cu(be), bytes); }
static void gr_cuda_sync(gr_backend *be);
static void gr_cuda_dealloc(gr_backend *be, void *p) {
    gr_cuda_sync(be); /* no kernel or upload may still be using it */
    gr_cuda_free_raw(gr_cu(be), p);
}

static void gr_cuda_zero(gr_backend *be, void *p, size_t bytes) {
    GR_CU(cudaMemsetAsync(p, 0, bytes, gr_cu(be)->stream));
}

/* Parameters and checkpoints: pageable host memory, ordered with the compute stream. */
static void gr_cuda_upload(gr_backend *be, void *dst, const void *src, size_t bytes) {
    gr_cuda *cu = gr_cu(be);
    GR_CU(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, cu->stream));
    GR_CU(cudaStreamSynchronize(cu->stream));
}

static void gr_cuda_download(gr_backend *be, void *dst, const void *src, size_t bytes) {
    gr_cuda *cu = gr_cu(be);
    GR_CU(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, cu->stream));
    GR_CU(cudaStreamSynchronize(cu->stream));
}

/* A batch from the loader's page-locked ring: DMA on the copy stream, which
 * first waits for the kernels still reading the arena (the previous pass),
 * and the compute stream waits for the copy. */
static void gr_cuda_upload_batch(gr_backend *be, void *dst, const void *src, size_t bytes) {
    gr_cuda *cu = gr_cu(be);
    GR_CU(cudaEventRecord(cu->computed, cu->stream));
    GR_CU(cudaStreamWaitEvent(cu->copy, cu->computed, 0));
    GR_CU(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, cu->copy));
    GR_CU(cudaEventRecord(cu->uploaded, cu->copy));
    GR_CU(cudaStreamWaitEvent(cu->stream, cu->uploaded, 0));
}

static void gr_cuda_sync(gr_backend *be) {
    gr_cuda *cu = gr_cu(be);
    GR_CU(cudaStreamSynchronize(cu->copy));
    GR_CU(cudaStreamSynchronize(cu->stream));
}

static void *gr_cuda_host_alloc(gr_backend *be, size_t bytes) {
    (void)be;
    void *p = NULL;
    cudaError_t e = cudaHostAlloc(&p, bytes ? bytes : 64, cudaHostAllocPortable);
    if (e == cudaErrorMemoryAllocation) {
        (void)cudaGetLastError();
        return NULL;
    }
    if (e != cudaSuccess) gr_cuda_die(__FILE__, __LINE__, "cudaHostAlloc", cudaGetErrorString(e));
    return p;
}

static void gr_cuda_host_free(gr_backend *be, void *p) {
    (void)be;
    GR_CU(cudaFreeHost(p));
}

static bool gr_cuda_mem_info(gr_backend *be, size_t *free_bytes, size_t *total_bytes) {
    (void)be;
    return cudaMemGetInfo(free_bytes, total_bytes) == cudaSuccess;
}

/* ---- optimizer ---- */
static double gr_cuda_sumsq(gr_backend *be, const float *g, int64_t n) {
    gr_cuda *cu = gr_cu(be);
    double s = 0.0;
    gr_cu_sumsq(cu->stream, g, n, cu->scratch);
    gr_cuda_download(be, &s, cu->scratch, sizeof s);
    return s;
}

/* An update asked for the gradients' sum of squares takes it first, in its
 * own kernel (the update does not change g: nothing is cleared here). */
static void gr_cuda_sgd(gr_backend *be, float *w, float *g, float *buf, int64_t n, const gr_sgd_hparams *h,
                        double *sumsq, bool *cleared) {
    if (sumsq) *sumsq = gr_cuda_sumsq(be, g, n);
    if (cleared) *cleared = false;
    gr_cu_sgd(gr_cu(be)->stream, w, g, buf, n, h);
}

static void gr_cuda_adamw(gr_backend *be, float *w, float *g, float *m, float *v, int64_t n,
                          const gr_adamw_hparams *h, double *sumsq, bool *cleared) {
    if (sumsq) *sumsq = gr_cuda_sumsq(be, g, n);
    if (cleared) *cleared = false;
    gr_cu_adamw(gr_cu(be)->stream, w, g, m, v, n, h);
}

/* ---- half storage ---- */

/* fp32 <-> half of the staged steps and of the weight copies */
static void gr_cuda_cast(gr_backend *be, void *dst, gr_elem dt, const void *src, gr_elem st, int64_t n) {
    bool to_half = dt != GR_F32;
    const int e = (int)(to_half ? dt : st); /* gr_elem's values are body_half.h's (kernels/backend.c) */
    if (to_half) gr_cu_cast(gr_cu(be)->stream, (float *)src, dst, n, e, 1);
    else gr_cu_cast(gr_cu(be)->stream, dst, (uint16_t *)src, n, e, 0);
}

const void *gr_cuda_weight_as(gr_cuda *cu, const float *w, int64_t n, gr_elem e) {
    if (e == GR_F32) return w;
    GR_ASSERT(cu->wh && (size_t)n * 2 <= cu->wh_bytes / 2);
    gr_cu_cast(cu->stream, (float *)w, cu->wh, n, (int)e, 1);
    return cu->wh;
}

void *gr_cuda_wgrad_half(gr_cuda *cu) { return (char *)cu->wh + cu->wh_bytes / 2; }

void gr_cuda_wgrad_add(gr_cuda *cu, float *dw, int64_t n, gr_elem e) {
    gr_cu_cast_add(cu->stream, dw, gr_cuda_wgrad_half(cu), n, (int)e);
}

/* The one half type of every batched float tensor of the step; GR_F32 when
 * one of them is fp32 or two half types meet (masks and indices aside). */
static gr_elem gr_cuda_step_half(const gr_kargs *a) {
    gr_elem h = GR_F32;
    for (int k = 0; k < a->node->nin + a->node->nout; k++) {
        bool in = k < a->node->nin;
        const gr_tensor *t = in ? a->tin[k] : a->tout[k - a->node->nin];
        gr_elem e = in ? a->ein[k] : a->eout[k - a->node->nin];
        if (!t->batched || e == GR_I32 || e == GR_U8) continue;
        if (e == GR_F32 || (h != GR_F32 && h != e)) return GR_F32;
        h = e;
    }
    return h;
}

/* What the CUDA kernel of each op takes: ops.def's cuda column. */
static const unsigned gr_cuda_caps[GR_OP_COUNT] = {
#define X(E, name, flags, bwd, cpu, cuda) [GR_OP_##E] = (cuda),
#include "../../graph/ops.def"
#undef X
};

/* The steps the CUDA kernels run on half storage as it is (bf16 or fp16,
 * every activation of the step in the one type), as the cuda column says:
 * convs (cuDNN), dense (cuBLAS GemmEx), batchnorm, the activations and add;
 * attention (its fp32 log-sum-exp aside) where cuDNN's fused attention
 * takes its shape, which is asked here (cudnn_sdpa.h: the plan is built
 * now, and a decline stages the step onto gpurun's own kernel). A step
 * with an fp32 activation (a first layer reading the input batch) and the
 * other ops (pooling, dropout, concat, the loss) are staged. */
static bool gr_cuda_native_half(gr_backend *be, const gr_kargs *a) {
    const unsigned cap = gr_cuda_caps[a->node->op];
    if (cap & GR_CAP_HALF_LIB) return gr_cuda_sdpa_decline(gr_cu(be), a, true) == NULL;
    if (!gr_cu(be)->half_native || gr_cuda_step_half(a) == GR_F32) return false;
    return (cap & (GR_CAP_HALF | GR_CAP_HALF_IN0 | GR_CAP_HALF_ALL)) != 0;
}

/* The most elements of a weight that a native half conv or GEMM of the plan reads (or writes the gradient of). */
static int64_t gr_cuda_half_weight_most(const gr_steps *s) {
    int64_t most = 0;
    for (int i = 0; i < s->n; i++) {
        const gr_kargs *a = &s->step[i];
        if (a->staged || gr_cuda_step_half(a) == GR_F32) continue;
        const gr_tensor *w = NULL;
        switch (a->node->op) {
        case GR_OP_CONV:
        case GR_OP_CONV_BWD_DATA:
        case GR_OP_DENSE:
        case GR_OP_DENSE_BWD_DATA: w = a->tin[1]; break;
        case GR_OP_CONV_BWD_PARAMS:
        case GR_OP_DENSE_BWD_PARAMS: w = a->tout[0]; break;
        default: break;
        }
        if (w && gr_tensor_numel(w) > most) most = gr_tensor_numel(w);
    }
    return most;
}

/* ---- options ---- */
static void gr_cuda_configure(gr_backend *be, const gr_backend_opts *o) {
    gr_cuda *cu = gr_cu(be);
    cu->opts = *o;
    const char *h = gr_env_str(GR_ENV_HALF);
    cu->half_native = !(h && strcmp(h, "staged") == 0);
    /* fp32 is strict: no TF32 tensor cores unless the job asks for them */
    GR_CUBLAS(gr_cublas.SetMathMode(cu->blas, o->precision == GR_PREC_FP32 ? CUBLAS_DEFAULT_MATH
                                                                           : CUBLAS_TF32_TENSOR_OP_MATH));
}

/* ---- plans: conv preparation, then runs captured into a CUDA Graph ---- */

/* A plan's captured runs: one per (n, training), for full micro-batches. */
#define GR_CUDA_GRAPHS 4
typedef struct gr_cuda_plan {
    struct {
        int64_t n;
        bool training;
        int eager_runs;        /* runs before capture (lazy library set-up happens outside it) */
        int ws_gen;            /* the cuDNN workspace the capture baked in (cu->ws_gen) */
        cudaGraphExec_t exec;
    } g[GR_CUDA_GRAPHS];
    int ng;
    int capturing;             /* the entry of g the stream is recording (GR_RUN_CAPTURE) */
} gr_cuda_plan;

/* The half weight block for the plan's native half steps (a weight copy and
 * a gradient, each of the largest weight), grown when a plan needs more. */
static gr_status gr_cuda_half_weights(gr_cuda *cu, const gr_steps *s, gr_error *err) {
    size_t half = ((size_t)gr_cuda_half_weight_most(s) * 2 + 255) & ~(size_t)255;
    if (2 * half <= cu->wh_bytes) return GR_OK;
    GR_CU(cudaStreamSynchronize(cu->stream));
    gr_cuda_free_raw(cu, cu->wh);
    cu->wh = NULL;
    cu->wh_bytes = 0;
    cu->ws_gen++; /* captured graphs read the old block */
    if (!(cu->wh = gr_cuda_malloc_raw(cu, 2 * half))) {
        size_t fr = 0, tot = 0;
        (void)cudaMemGetInfo(&fr, &tot);
        return gr_error_set(err, GR_ERR_OOM, "out of memory on cuda:%d: the half copies of a weight and its "
                            "gradient need %zu bytes; %zu free of %zu, %zu held by this run", cu->device, 2 * half,
                            fr, tot, cu->held);
    }
    cu->wh_bytes = 2 * half;
    return GR_OK;
}

static gr_status gr_cuda_prepare(gr_backend *be, gr_steps *s, gr_error *err) {
    gr_cuda *cu = gr_cu(be);
    size_t need = 0;
    gr_status st = gr_cuda_half_weights(cu, s, err);
    if (st) return st;
    st = gr_cuda_conv_prepare(cu, s, &need, err);
    if (st) return st;
    const size_t attn = gr_cuda_sdpa_workspace(cu, s); /* cuDNN's attention plans, built by native_half */
    if (attn > need) need = attn;
    if (need > cu->ws_bytes) {
        GR_CU(cudaStreamSynchronize(cu->stream));
        gr_cuda_free_raw(cu, cu->ws);
        cu->ws = NULL;
        cu->ws_bytes = 0;
        /* graphs captured with the old block must be captured again, also
         * when the new one cannot be had (they would replay on freed memory) */
        cu->ws_gen++;
        void *ws = gr_cuda_malloc_raw(cu, need);
        if (!ws) {
            size_t fr = 0, tot = 0;
            gr_cuda_mem_info(be, &fr, &tot);
            return gr_error_set(err, GR_ERR_OOM, "out of memory on cuda:%d: the cuDNN workspace needs %zu bytes; "
                                "%zu free of %zu, %zu held by this run", cu->device, need, fr, tot, cu->held);
        }
        cu->ws = ws;
        cu->ws_bytes = need;
    }
    s->be_state = gr_xcalloc(1, sizeof(gr_cuda_plan));
    return GR_OK;
}

/* ---- time marks (the profiler): events on the compute stream ---- */

static void gr_cuda_mark(gr_backend *be, gr_mark *m) {
    gr_cuda *cu = gr_cu(be);
    if (!m->ev) {
        cudaEvent_t ev;
        GR_CU(cudaEventCreate(&ev));
        m->ev = ev;
    }
    GR_CU(cudaEventRecord((cudaEvent_t)m->ev, cu->stream));
}

static double gr_cuda_mark_seconds(gr_backend *be, const gr_mark *from, const gr_mark *to) {
    (void)be;
    float ms = 0.0f;
    GR_CU(cudaEventElapsedTime(&ms, (cudaEvent_t)from->ev, (cudaEvent_t)to->ev));
    return (double)ms / 1e3;
}

static void gr_cuda_mark_free(gr_backend *be, gr_mark *m) {
    (void)be;
    GR_CU(cudaEventDestroy((cudaEvent_t)m->ev));
}

static bool gr_cuda_pci_bus_id(gr_backend *be, char *buf, size_t n) {
    return cudaDeviceGetPCIBusId(buf, (int)n, gr_cu(be)->device) == cudaSuccess;
}

static void gr_cuda_release(gr_backend *be, gr_steps *s) {
    gr_cuda *cu = gr_cu(be);
    gr_cuda_plan *cp = s->be_state;
    GR_CU(cudaStreamSynchronize(cu->stream));
    for (int i = 0; i < cp->ng; i++)
        if (cp->g[i].exec) GR_CU(cudaGraphExecDestroy(cp->g[i].exec));
    free(cp);
    s->be_state = NULL;
}

/* With GPURUN_CUDA_SYNC=1 (cu->sync_each) every op is followed by a stream
 * synchronize and an error check, so a kernel fault names its op and layer
 * instead of surfacing at the next copy (graphs are then off). */
static void gr_cuda_op_done(gr_backend *be, const gr_kargs *a) {
    gr_cuda *cu = gr_cu(be);
    if (!cu->sync_each) return;
    cudaError_t e = cudaStreamSynchronize(cu->stream);
    if (e == cudaSuccess) e = cudaGetLastError();
    if (e != cudaSuccess) {
        const gr_node *nd = a->node;
        char what[GR_NAME_MAX + 96];
        snprintf(what, sizeof what, "op %s of layer %s (GPURUN_CUDA_SYNC)", gr_op_name(nd->op),
                 nd->layer >= 0 ? a->g->layers[nd->layer].name : "loss");
        gr_cuda_die(__FILE__, __LINE__, what, cudaGetErrorString(e));
    }
}

/* Runs with full micro-batches are captured on their third call (the first
 * two run eagerly, so cuBLAS and cuDNN finish their lazy set-up outside the
 * capture) and replayed from then on; the per-run values (RNG key,
 * gradient scale) reach the kernels through cu->dctx, written before each.
 * A capture records what the exec loop launches between begin and end. */
static gr_run_mode gr_cuda_run_begin(gr_backend *be, gr_steps *s, int64_t n, const gr_exec_ctx *ctx) {
    gr_cuda *cu = gr_cu(be);
    gr_cuda_plan *cp = s->be_state;
    cu->hctx = (gr_dev_ctx){.rng_key = ctx->rng_key, .grad_scale = ctx->grad_scale, .training = ctx->training,
                            .pos = ctx->pos};
    GR_CU(cudaMemcpyAsync(cu->dctx, &cu->hctx, sizeof cu->hctx, cudaMemcpyHostToDevice, cu->stream));
    if (!cu->opts.cuda_graph || cu->sync_each || !cp || n != s->micro_batch) return GR_RUN_EAGER;
    int k = 0;
    while (k < cp->ng && !(cp->g[k].n == n && cp->g[k].training == ctx->training)) k++;
    if (k == cp->ng) {
        if (cp->ng == GR_CUDA_GRAPHS) return GR_RUN_EAGER;
        cp->g[cp->ng++].n = n;
        cp->g[k].training = ctx->training;
    }
    if (cp->g[k].exec && cp->g[k].ws_gen != cu->ws_gen) {
        GR_CU(cudaGraphExecDestroy(cp->g[k].exec));
        cp->g[k].exec = NULL;
    }
    if (cp->g[k].exec) {
        GR_CU(cudaGraphLaunch(cp->g[k].exec, cu->stream));
        cu->replayed++;
        return GR_RUN_REPLAYED;
    }
    if (cp->g[k].eager_runs < 2) {
        cp->g[k].eager_runs++;
        return GR_RUN_EAGER;
    }
    cp->capturing = k;
    GR_CU(cudaStreamBeginCapture(cu->stream, cudaStreamCaptureModeThreadLocal));
    return GR_RUN_CAPTURE;
}

static void gr_cuda_run_end(gr_backend *be, gr_steps *s, gr_run_mode mode) {
    if (mode != GR_RUN_CAPTURE) return;
    gr_cuda *cu = gr_cu(be);
    gr_cuda_plan *cp = s->be_state;
    const int k = cp->capturing;
    cudaGraph_t graph;
    GR_CU(cudaStreamEndCapture(cu->stream, &graph));
    GR_CU(cudaGraphInstantiate(&cp->g[k].exec, graph, 0));
    cp->g[k].ws_gen = cu->ws_gen;
    cu->captured++;
    GR_CU(cudaGraphDestroy(graph));
    GR_CU(cudaGraphLaunch(cp->g[k].exec, cu->stream));
}

void gr_cuda_graph_counts(const gr_backend *be, int64_t *captured, int64_t *replayed) {
    const gr_cuda *cu = be->impl;
    *captured = cu->captured;
    *replayed = cu->replayed;
}

/* ---- life cycle ---- */
static void gr_cuda_destroy(gr_backend *be) {
    gr_cuda_impl *im = be->impl;
    gr_cuda *cu = &im->cu;
    GR_CU(cudaStreamSynchronize(cu->stream));
    gr_cuda_jpeg_free(be);
    gr_cuda_conv_free_all(cu);
    gr_cuda_sdpa_free_all(cu);
    GR_CUDNN(cudnnDestroy(cu->dnn));
    GR_CUBLAS(gr_cublas.Destroy(cu->blas)); /* before its workspace goes */
    gr_cuda_free_raw(cu, cu->ws);
    gr_cuda_free_raw(cu, cu->wh);
    gr_cuda_free_raw(cu, cu->blas_ws);
    gr_cuda_free_raw(cu, cu->dctx);
    gr_cuda_free_raw(cu, cu->scratch);
    GR_CU(cudaEventDestroy(cu->uploaded));
    GR_CU(cudaEventDestroy(cu->computed));
    GR_CU(cudaStreamDestroy(cu->copy));
    GR_CU(cudaStreamDestroy(cu->stream));
    free(im->blocks.b);
    free(im);
    free(be);
}

static void *gr_cuda_stream(gr_backend *be) { return gr_cu(be)->stream; }

static size_t gr_cuda_mem_peak(gr_backend *be) { return gr_cu(be)->held_peak; }

static void gr_cuda_describe(gr_backend *be, char *buf, size_t n) {
    const gr_cuda *cu = gr_cu(be);
    bool half = cu->opts.precision == GR_PREC_BF16 || cu->opts.precision == GR_PREC_FP16;
    snprintf(buf, n, "%s, compute capability %d.%d%s", cu->name, cu->cc_major, cu->cc_minor,
             !half ? "" : cu->half_native ? "; half native (cuDNN, cuBLAS GemmEx)" : "; half staged (GPURUN_HALF)");
}

static const gr_backend_vtable gr_cuda_vtable = {
    .name = "cuda",
    .kernels = gr_cuda_kernels,
    .alloc = gr_cuda_alloc,
    .dealloc = gr_cuda_dealloc,
    .zero = gr_cuda_zero,
    .upload = gr_cuda_upload,
    .download = gr_cuda_download,
    .sync = gr_cuda_sync,
    .host_alloc = gr_cuda_host_alloc,
    .host_free = gr_cuda_host_free,
    .sgd = gr_cuda_sgd,
    .adamw = gr_cuda_adamw,
    .sumsq = gr_cuda_sumsq,
    .upload_batch = gr_cuda_upload_batch,
    .mem_info = gr_cuda_mem_info,
    .describe = gr_cuda_describe,
    .configure = gr_cuda_configure,
    .prepare = gr_cuda_prepare,
    .mark = gr_cuda_mark,
    .mark_seconds = gr_cuda_mark_seconds,
    .mark_free = gr_cuda_mark_free,
    .pci_bus_id = gr_cuda_pci_bus_id,
    .release = gr_cuda_release,
    .run_begin = gr_cuda_run_begin,
    .run_end = gr_cuda_run_end,
    .op_done = gr_cuda_op_done,
    .cast = gr_cuda_cast,
    .native_half = gr_cuda_native_half,
    .stream = gr_cuda_stream,
    .mem_peak = gr_cuda_mem_peak,
    .decoder_open = gr_cuda_decoder_open,
    .decode_images = gr_cuda_decode_images,
    .destroy = gr_cuda_destroy,
};

gr_status gr_cuda_backend_create(int device, gr_backend **out, gr_error *err) {
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0)
        return gr_error_set(err, GR_ERR_DEVICE, "device cuda:%d: no CUDA device is available (%s)", device,
                            e != cudaSuccess ? cudaGetErrorString(e) : "the driver reports 0 devices");
    if (device < 0 || device >= count)
        return gr_error_set(err, GR_ERR_DEVICE, "device cuda:%d: only %d CUDA device%s present", device,
                            count, count == 1 ? " is" : "s are");
    struct cudaDeviceProp prop;
    if ((e = cudaSetDevice(device)) != cudaSuccess || (e = cudaGetDeviceProperties(&prop, device)) != cudaSuccess)
        return gr_error_set(err, GR_ERR_DEVICE, "device cuda:%d: %s", device, cudaGetErrorString(e));
    /* the build carries sm_80 and sm_90 code and compute_90 PTX: a GPU older than
     * Ampere would fail at its first kernel; refused here, `device: auto` falls back */
    if (prop.major < 8)
        return gr_error_set(err, GR_ERR_DEVICE, "device cuda:%d (%s) is compute capability %d.%d; this build "
                            "needs 8.0 or newer (sm_80/sm_90 code)", device, prop.name, prop.major, prop.minor);
    gr_status st = gr_cublas_load(err); /* the first CUDA backend of the process loads it */
    if (st != GR_OK) return st;

    gr_cuda_impl *im = gr_xcalloc(1, sizeof *im);
    gr_cuda *cu = &im->cu;
    cu->device = device;
    snprintf(cu->name, sizeof cu->name, "%s", prop.name);
    cu->cc_major = prop.major;
    cu->cc_minor = prop.minor;
    GR_CU(cudaStreamCreateWithFlags(&cu->stream, cudaStreamNonBlocking));
    GR_CU(cudaStreamCreateWithFlags(&cu->copy, cudaStreamNonBlocking));
    GR_CU(cudaEventCreateWithFlags(&cu->uploaded, cudaEventDisableTiming));
    GR_CU(cudaEventCreateWithFlags(&cu->computed, cudaEventDisableTiming));
    GR_CUBLAS(gr_cublas.Create(&cu->blas));
    GR_CUBLAS(gr_cublas.SetStream(cu->blas, cu->stream));
    GR_CUDNN(cudnnCreate(&cu->dnn));
    GR_CUDNN(cudnnSetStream(cu->dnn, cu->stream));
    cu->blas_ws_bytes = 32u << 20; /* NVIDIA's recommendation for Hopper */
    cu->blas_ws = gr_cuda_malloc_raw(cu, cu->blas_ws_bytes);
    cu->dctx = gr_cuda_malloc_raw(cu, sizeof *cu->dctx);
    cu->scratch = gr_cuda_malloc_raw(cu, GR_SUMSQ_SCRATCH * sizeof(double));
    gr_backend *be = gr_xcalloc(1, sizeof *be);
    be->vt = &gr_cuda_vtable;
    be->impl = im;
    be->threads = 1;
    if (!cu->blas_ws || !cu->dctx || !cu->scratch) {
        size_t fr = 0, tot = 0;
        (void)cudaMemGetInfo(&fr, &tot);
        gr_cuda_destroy(be);
        return gr_error_set(err, GR_ERR_OOM, "out of memory on cuda:%d: %zu bytes for the cuBLAS workspace, "
                            "the run context and reduction scratch; %zu free of %zu", device,
                            (size_t)(32u << 20) + sizeof(gr_dev_ctx) + GR_SUMSQ_SCRATCH * sizeof(double), fr, tot);
    }
    GR_CUBLAS(gr_cublas.SetWorkspace(cu->blas, cu->blas_ws, cu->blas_ws_bytes));
    cu->opts.precision = GR_PREC_FP32;
    cu->sync_each = gr_env_bool(GR_ENV_CUDA_SYNC, false);
    cu->half_native = true;
    GR_CUBLAS(gr_cublas.SetMathMode(cu->blas, CUBLAS_DEFAULT_MATH));
    *out = be;
    return GR_OK;
}
