/* backend.h — the one interface between the runtime (exec/) and a device.
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
 * step's context (training or not, RNG key, gradient scale). A plan's steps
 * reach the backend as a gr_steps list (prepare/release, run begin/end); the
 * steps themselves always run through exec/'s one loop.
 *
 * A device fault the run cannot recover from goes to gr_backend_fault: the
 * handler runner/ installs decides the exit; kernels/ never exits. */
#ifndef GR_BACKEND_H
#define GR_BACKEND_H

#include "../common/gr_encbatch.h"
#include "../graph/graph.h"
#include "optim.h"

typedef struct gr_backend gr_backend;

/* Sums over the processes of a data-parallel run, for a kernel whose
 * result depends on the whole global batch (batchnorm's statistics under
 * parallel.sync_batchnorm). The runner provides it; a kernel calls it from
 * the thread that called the kernel, at the same point on every process. */
typedef struct gr_xsum {
    void (*sum)(void *user, double *buf, int n); /* buf[0..n) = its sum over the processes, in place */
    void *user;
} gr_xsum;

/* Per-run context shared by every kernel of one plan execution. */
typedef struct gr_exec_ctx {
    bool training;       /* dropout active, BN batch statistics */
    uint64_t rng_key;    /* unique per (seed, step, micro-batch): dropout masks */
    float grad_scale;    /* d(loss)/d(per-sample loss): 1 / samples per optimizer step */
    const gr_xsum *xsum; /* NULL: this process's micro-batch is the batch batchnorm normalizes over */
    int64_t pos;         /* a decoding graph (gr_graph.decode_len): the position this run's inputs are at */
} gr_exec_ctx;

typedef struct gr_kargs {
    const gr_graph *g;
    const gr_node *node;
    const gr_tensor *tin[GR_MAX_IN], *tout[GR_MAX_OUT];
    void *in[GR_MAX_IN], *out[GR_MAX_OUT];
    int64_t n;           /* samples in this run (<= planned micro-batch) */
    const gr_exec_ctx *ctx;
    gr_backend *be;
    /* The storage type of in[k] / out[k] as this kernel call gets them
     * (gr_tensor.elem, or GR_F32 where the step is staged). */
    gr_elem ein[GR_MAX_IN], eout[GR_MAX_OUT];
    /* Staged: the step touches half storage its kernel does not take (the
     * backend's native_half says no). gr_backend_exec decodes each half
     * input into stage_in[k] (fp32), runs the kernel on the fp32 copies
     * and encodes stage_out[k] into out[k] (round to nearest even): the
     * numerics of half storage with fp32 compute. NULL where a tensor is
     * not half. The plan owns the buffers (one area reused by every step). */
    bool staged;
    void *stage_in[GR_MAX_IN], *stage_out[GR_MAX_OUT];
} gr_kargs;

typedef void (*gr_kernel_fn)(const gr_kargs *a);

/* Elements of tensor t in a's run (a batched tensor holds a->n samples). */
int64_t gr_kargs_numel(const gr_kargs *a, const gr_tensor *t);
/* The rows of a step over the last axis of its first input t ([n, ..., F]:
 * n times the positions a sample; n for [n, F]): dense's GEMM rows. */
int64_t gr_kargs_rows(const gr_kargs *a);

/* A plan's bound steps as the backend sees them (exec/ owns them). */
typedef struct gr_steps {
    const gr_graph *g;
    gr_kargs *step;        /* [n], in run order, pointers bound */
    int n;
    int64_t micro_batch;   /* the batch the arenas were planned for */
    size_t workspace;      /* gr_backend_workspace's bytes for these steps (0: none, or not known) */
    void *be_state;        /* the backend's per-plan state: set by prepare, freed by release */
} gr_steps;

/* How the exec loop runs one pass (gr_backend_run_begin). */
typedef enum gr_run_mode {
    GR_RUN_EAGER,     /* launch the steps now */
    GR_RUN_CAPTURE,   /* launch them; the backend records them (a CUDA Graph) and runs them at run_end */
    GR_RUN_REPLAYED,  /* the backend replayed a recorded run: the loop is skipped */
} gr_run_mode;

/* Creates a backend for device "cpu" (threads: 0 = all cores) or "cuda[:N]".
 * GR_ERR_DEVICE when the device is not there or this build lacks it. */
gr_status gr_backend_create(const char *device, int threads, gr_backend **out, gr_error *err);
void gr_backend_free(gr_backend *be);
const char *gr_backend_name(const gr_backend *be);
bool gr_backend_supports_op(const gr_backend *be, gr_op op);
gr_kernel_fn gr_backend_kernel(const gr_backend *be, gr_op op);
/* Runs one plan step: its kernel (staged: between the decoding of its
 * half inputs and the encoding of its half outputs), then the backend's
 * per-op check (the CUDA backend under GPURUN_CUDA_SYNC). exec/ calls it
 * between its hooks. */
void gr_backend_exec(const gr_kargs *a);
/* Whether the backend's kernel for a's op takes a's element types
 * (a->ein/eout) as they are; false: the step must be staged. A step with
 * no half tensor always runs as it is. */
bool gr_backend_native_half(gr_backend *be, const gr_kargs *a);
/* Which layouts the backend's kernels take, per op (GR_LAYOUT_CAP_NONE for
 * all where it says nothing): the table gr_graph_set_layout plans with,
 * as configured (the CPU takes channels-last only with native bf16). */
void gr_backend_layout_caps(gr_backend *be, gr_layout_cap caps[GR_OP_COUNT]);
/* The fusions the backend's kernels take (GR_FUSE_*, graph.h gr_graph_fuse), from its ops.def
 * column: batchnorm + relu where batchnorm and its backward are GR_CAP_RELU_AFTER, add + relu
 * where add is. */
unsigned gr_backend_fusions(gr_backend *be);
/* dst[0..n) = src[0..n) converted between fp32 and a half type (dt or st
 * is GR_F32, the other GR_BF16 or GR_F16), on the device; fp32 -> half
 * rounds to nearest even (common/gr_half.h). Ordered with the kernels. */
void gr_backend_cast(gr_backend *be, void *dst, gr_elem dt, const void *src, gr_elem st, int64_t n);
/* Whether the backend's device pointers are host memory (the CPU): the
 * caller may read them with memcpy instead of gr_backend_download. */
bool gr_backend_host_addressable(const gr_backend *be);
/* The device stream every kernel of the backend is queued on (a
 * cudaStream_t on CUDA; NULL on the CPU), for work that must be ordered
 * with them (NCCL's collectives). */
void *gr_backend_stream(gr_backend *be);
/* What the device computes with, in one line for `gpurun plan` and
 * summary.json: the CPU's oneDNN version, the instruction set oneDNN
 * dispatches to (avx2, avx512_core, avx512_core_bf16, avx512_core_amx...)
 * and the GEMM and conv paths; a GPU's name and compute capability. Written
 * into buf (n bytes), which is returned. */
const char *gr_backend_describe(gr_backend *be, char *buf, size_t n);

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

/* Batch upload: may be asynchronous (the CUDA backend copies on its copy
 * stream and makes the next kernels wait for it); src must stay unchanged
 * until the next download or sync. */
void gr_backend_upload_batch(gr_backend *be, void *dst, const void *src, size_t bytes);
/* Free and total memory of the device (the host for the CPU: gr_host_mem_info); false where unknown. */
bool gr_backend_mem_info(gr_backend *be, size_t *free_bytes, size_t *total_bytes);
/* The most bytes the backend's allocations (gr_backend_alloc, and on a GPU
 * its libraries' workspaces) held at once so far; 0 where it does not count. */
size_t gr_backend_mem_peak(gr_backend *be);
/* The machine's practical peak as this backend reaches it, measured now (a
 * second or two): GEMM GFLOP/s in fp32 and in bf16 (0: no bf16 GEMM), and
 * the memory bandwidth of a streaming copy in GB/s, on the backend's
 * threads; false where the backend does not measure it (out zeroed). The
 * roofline of the benches (bench/peak_bench.c) and --profile. */
typedef struct gr_peak {
    double f32_gflops, bf16_gflops, mem_gbs;
    int threads;
} gr_peak;
bool gr_backend_peak(gr_backend *be, gr_peak *out);

/* The device's decoder of encoded images (data.decode gpu, DESIGN 1.4): an
 * encoded split's batch as the loader ships it (gr_enc_batch: JPEG bytes,
 * stored shapes, transforms) decoded and transformed on the device.
 * gr_backend_decoder_open starts it (once; later calls answer the same):
 * GR_OK with one line saying what decodes in desc ("cuda:0 with nvJPEG
 * 13.0.1 (hardware backend, 1 engine x 5 cores)"), or GR_ERR_DEVICE with the reason
 * there is none (the CPU; a CUDA build without nvJPEG; its start failed).
 * gr_backend_decode_images then decodes e's JPEGs into dst ([e->n, 3, S, S]
 * fp32 device memory: the input tensor), ordered with the kernels and
 * asynchronous (e's bytes stay unchanged until the next download or sync):
 * training, the box resized to S x S, flipped, normalized; evaluation, the
 * short side to R and the centre crop (kernels/body_image.h: the host
 * path's arithmetic). It leaves the rows of samples marked host, and of
 * JPEGs it refuses or fails on, which it marks in need_host[i] (the caller
 * decodes those on the host and uploads their rows), the first one's reason
 * in why. GR_ERR_OOM when its device scratch does not fit. */
gr_status gr_backend_decoder_open(gr_backend *be, char *desc, size_t n, gr_error *err);
gr_status gr_backend_decode_images(gr_backend *be, const gr_enc_batch *e, float *dst, uint8_t *need_host, char *why,
                                   size_t why_n, gr_error *err);

/* Run options from the job spec. */
typedef struct gr_backend_opts {
    gr_precision precision;  /* fp32: strict IEEE fp32; tf32: tensor cores for GEMM and conv */
    bool cudnn_benchmark;    /* measure conv algorithms once per shape instead of heuristics */
    bool cuda_graph;         /* capture a plan's run once and replay it */
} gr_backend_opts;
void gr_backend_configure(gr_backend *be, const gr_backend_opts *o);

/* Per-plan preparation once its arenas exist and its steps are bound (the
 * CUDA backend chooses conv algorithms and sizes its workspace; GR_ERR_OOM
 * when that does not fit; it may set s->be_state), and its release. */
gr_status gr_backend_prepare(gr_backend *be, gr_steps *s, gr_error *err);
void gr_backend_release(gr_backend *be, gr_steps *s);
/* The scratch bytes the backend's libraries keep beyond the arenas to run
 * steps s at s->micro_batch (the CPU: its convolutions' pool, which its
 * prepare reserves and counts with the arenas); false where the backend
 * cannot say before running (a GPU's cuDNN workspace is chosen by prepare). */
bool gr_backend_workspace(gr_backend *be, const gr_steps *s, size_t *bytes);
/* Around the exec loop of one pass of n samples: begin says how the loop
 * runs (GR_RUN_EAGER where the backend has no say); end follows the loop
 * unless begin answered GR_RUN_REPLAYED (a capture is finished and run). */
gr_run_mode gr_backend_run_begin(gr_backend *be, gr_steps *s, int64_t n, const gr_exec_ctx *ctx);
void gr_backend_run_end(gr_backend *be, gr_steps *s, gr_run_mode mode);

/* Time marks on the device's timeline (the profiler). gr_backend_mark
 * records where the device is: a GPU, an event on its stream (made on the
 * mark's first use); the CPU, whose ops return finished, the monotonic
 * clock. gr_backend_mark_seconds gives the seconds between two marks once
 * both are reached (after gr_backend_sync); gr_backend_mark_free frees a
 * mark's event. */
typedef struct gr_mark {
    double t;  /* the host clock when recorded (gr_now) */
    void *ev;  /* the device's event; NULL on the CPU */
} gr_mark;
void gr_backend_mark(gr_backend *be, gr_mark *m);
double gr_backend_mark_seconds(gr_backend *be, const gr_mark *from, const gr_mark *to);
void gr_backend_mark_free(gr_backend *be, gr_mark *m);

/* The device's PCI bus id ("0000:65:00.0"), which names it to NVML (the
 * health figures, runner/health.h); false where there is none (the CPU). */
bool gr_backend_pci_bus_id(gr_backend *be, char *buf, size_t n);

/* Device faults: a failed call the run cannot recover from (a lost device,
 * an illegal address). gr_backend_fault hands what happened (one line, no
 * "gpurun: " prefix) to the installed handler, which is not expected to
 * return; without one (or if it returns) it prints "gpurun: <what>" and
 * aborts. runner/main.c installs the handler that exits 7. */
typedef void (*gr_backend_fault_fn)(const char *what);
void gr_backend_set_fault_handler(gr_backend_fault_fn fn);
_Noreturn void gr_backend_fault(const char *what);

/* Optimizer updates and gradient norm over flat device arrays. An update's
 * sumsq, when not NULL, gets gr_backend_sumsq(be, g, n) (the same bits), taken
 * in the update's pass where the backend can (the CPU). cleared, when not
 * NULL, lets the backend leave g zero as it reads it (the CPU, where its
 * values are finite: kernels/cpu/optim.h); *cleared says whether all of g
 * now is, so that the next step need not clear it. */
void gr_backend_sgd(gr_backend *be, float *w, float *g, float *buf, int64_t n,
                    const gr_sgd_hparams *h, double *sumsq, bool *cleared);
void gr_backend_adamw(gr_backend *be, float *w, float *g, float *m, float *v, int64_t n,
                      const gr_adamw_hparams *h, double *sumsq, bool *cleared);
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
    void (*sgd)(gr_backend *be, float *w, float *g, float *buf, int64_t n, const gr_sgd_hparams *h,
                double *sumsq, bool *cleared);
    void (*adamw)(gr_backend *be, float *w, float *g, float *m, float *v, int64_t n,
                  const gr_adamw_hparams *h, double *sumsq, bool *cleared);
    double (*sumsq)(gr_backend *be, const float *g, int64_t n);
    /* optional (NULL: the defaults described above) */
    void (*upload_batch)(gr_backend *be, void *dst, const void *src, size_t bytes);
    bool (*mem_info)(gr_backend *be, size_t *free_bytes, size_t *total_bytes);
    /* gr_backend_mem_peak; NULL: 0 */
    size_t (*mem_peak)(gr_backend *be);
    void (*describe)(gr_backend *be, char *buf, size_t n); /* NULL: the backend's name */
    void (*configure)(gr_backend *be, const gr_backend_opts *o);
    gr_status (*prepare)(gr_backend *be, gr_steps *s, gr_error *err);
    void (*release)(gr_backend *be, gr_steps *s);
    bool (*workspace)(gr_backend *be, const gr_steps *s, size_t *bytes); /* NULL: unknown */
    /* gr_backend_mark*: NULL, the host clock (a backend whose ops return finished) */
    void (*mark)(gr_backend *be, gr_mark *m);
    double (*mark_seconds)(gr_backend *be, const gr_mark *from, const gr_mark *to);
    void (*mark_free)(gr_backend *be, gr_mark *m);
    bool (*pci_bus_id)(gr_backend *be, char *buf, size_t n); /* NULL: none */
    gr_run_mode (*run_begin)(gr_backend *be, gr_steps *s, int64_t n, const gr_exec_ctx *ctx);
    void (*run_end)(gr_backend *be, gr_steps *s, gr_run_mode mode);
    void (*op_done)(gr_backend *be, const gr_kargs *a); /* after each step (kernel and staging) */
    bool host_addressable;       /* device pointers are host memory */
    /* gr_backend_stream; NULL: none (the CPU) */
    void *(*stream)(gr_backend *be);
    /* gr_backend_cast; required */
    void (*cast)(gr_backend *be, void *dst, gr_elem dt, const void *src, gr_elem st, int64_t n);
    /* gr_backend_peak; NULL: not measured (false) */
    bool (*peak)(gr_backend *be, gr_peak *out);
    /* gr_backend_layout_caps; NULL: NCHW only */
    void (*layout_caps)(gr_backend *be, gr_layout_cap *caps);
    /* an op's ops.def column for this backend (gr_backend_fusions); NULL: 0 for all */
    unsigned (*op_caps)(gr_backend *be, gr_op op);
    /* gr_backend_native_half; NULL: no kernel takes half storage */
    bool (*native_half)(gr_backend *be, const gr_kargs *a);
    /* gr_backend_decoder_open / gr_backend_decode_images; NULL: no image decoder (the CPU) */
    gr_status (*decoder_open)(gr_backend *be, char *desc, size_t n, gr_error *err);
    gr_status (*decode_images)(gr_backend *be, const gr_enc_batch *e, float *dst, uint8_t *need_host, char *why,
                               size_t why_n, gr_error *err);
    void (*destroy)(gr_backend *be);
} gr_backend_vtable;

struct gr_backend {
    const gr_backend_vtable *vt;
    void *impl;
    int threads;
    gr_precision precision;
};

gr_status gr_cpu_backend_create(int threads, gr_backend **out, gr_error *err);
#ifdef GR_HAVE_CUDA
gr_status gr_cuda_backend_create(int device, gr_backend **out, gr_error *err);
/* How many plan runs a CUDA backend captured into CUDA Graphs and how many
 * it replayed from them (tests/test_cuda_graph.c). */
void gr_cuda_graph_counts(const gr_backend *be, int64_t *captured, int64_t *replayed);
/* The last note a CUDA backend gave on stderr on which kernel runs
 * attention (cuDNN's fused attention or gpurun's own; "" before any), and
 * its device's compute capability major (tests/ops/test_cuda_sdpa.c). */
const char *gr_cuda_attention_note(const gr_backend *be, int *cc_major);
#endif

#endif
