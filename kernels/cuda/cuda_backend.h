/* cuda_backend.h — the CUDA backend's state, shared by its op kernels.
 *
 * One compute stream runs every kernel, cuBLAS and cuDNN call of a plan, in
 * order; batches are uploaded on a second (copy) stream and fenced with an
 * event, so nothing else ever runs on the legacy default stream. Op kernels
 * (kernels/cuda/op_*.c) are C11 and reach the state through gr_cuda_of(a);
 * the custom kernels they launch live in .cu files behind plain C launchers
 * (cu_*.h) that take the stream. */
#ifndef GR_CUDA_BACKEND_H
#define GR_CUDA_BACKEND_H

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include "../backend.h"
#include "../body.h"
#include "cu_check.h"
#include "cublas_dl.h"

typedef struct gr_cuda {
    int device;
    char name[256];
    int cc_major, cc_minor;   /* compute capability */
    cudaStream_t stream;      /* compute */
    cudaStream_t copy;        /* batch uploads */
    cudaEvent_t uploaded;     /* recorded on copy after an upload, waited on by stream */
    cudaEvent_t computed;     /* recorded on stream before an upload, waited on by copy */
    cublasHandle_t blas;
    cudnnHandle_t dnn;
    void *blas_ws;            /* cuBLAS workspace (set once, so captured GEMMs allocate nothing) */
    size_t blas_ws_bytes;
    void *ws;                 /* cuDNN workspace: the largest need of any prepared plan */
    size_t ws_bytes;
    int ws_gen;               /* bumped whenever ws or wh moves */
    void *wh;                 /* native half convs and GEMMs: the half copy of one weight, then its half gradient */
    size_t wh_bytes;
    bool half_native;         /* convs, GEMMs, batchnorm and the activations take half storage (GPURUN_HALF) */
    gr_dev_ctx *dctx;         /* device copy of the run's context */
    gr_dev_ctx hctx;          /* its host side, the source of each run's copy */
    double *scratch;          /* device doubles for reductions read back by the host */
    gr_backend_opts opts;     /* precision, cudnn_benchmark, cuda_graph */
    bool sync_each;           /* GPURUN_CUDA_SYNC: synchronize and check after every op, no graphs */
    size_t held;              /* bytes this backend holds in cudaMalloc'ed blocks */
    size_t held_peak;         /* the most it held at once */
    int64_t captured, replayed; /* plan runs captured into CUDA Graphs / replayed from them */
    struct gr_cuda_convs *convs; /* conv descriptors and algorithms per shape (op_conv.c) */
    struct gr_cuda_sdpas *sdpa;  /* cuDNN's attention plans per shape, and what was said (cudnn_sdpa.c) */
    struct gr_cuda_jpeg *jpeg;   /* the image decoder, from its first decoder_open (nvjpeg_decode.c) */
} gr_cuda;

static inline gr_cuda *gr_cuda_of(const gr_kargs *a) { return (gr_cuda *)a->be->impl; }

/* Kernel table entries: gr_cuda_<name> for every op of graph/ops.def. */
#define X(E, name, ...) void gr_cuda_##name(const gr_kargs *a);
#include "../../graph/ops.def"
#undef X

/* The conv kernels' set-up for every conv step of a plan at its micro-batch
 * (descriptors, algorithms by heuristics or measured when cudnn_benchmark),
 * and the cuDNN workspace they need (op_conv.c); freed with the backend. */
gr_status gr_cuda_conv_prepare(gr_cuda *cu, const gr_steps *st, size_t *ws_need, gr_error *err);
void gr_cuda_conv_free_all(gr_cuda *cu);

/* The image decoder (nvjpeg_decode.c; a stub saying so without nvJPEG):
 * the table's decoder_open and decode_images, and its release with the
 * backend. */
gr_status gr_cuda_decoder_open(gr_backend *be, char *desc, size_t n, gr_error *err);
gr_status gr_cuda_decode_images(gr_backend *be, const gr_enc_batch *e, float *dst, uint8_t *need_host, char *why,
                                size_t why_n, gr_error *err);
void gr_cuda_jpeg_free(gr_backend *be);

/* ---- native half (gr_cuda_native_half) ----
 * A step that stores its activations in bf16 or fp16 runs its conv or GEMM
 * in that type with fp32 accumulation; the weights stay fp32 (the master
 * copy the optimizer updates), so the step reads a half copy made just
 * before it (one cast kernel: the weight is rounded as PyTorch's autocast
 * rounds it) and its weight gradient is computed in half and added to the
 * fp32 gradient (as autocast's cast backward does). */

/* The storage type of a step's activations: a->ein[0] (every batched float
 * tensor of a native half step has it; GR_F32 for a staged one). */
static inline gr_elem gr_cuda_act_elem(const gr_kargs *a) { return a->ein[0]; }
/* The weight w (fp32, n elements) as a step with activations in e reads it:
 * w itself for fp32, else its half copy in cu->wh, cast on the stream. */
const void *gr_cuda_weight_as(gr_cuda *cu, const float *w, int64_t n, gr_elem e);
/* Where a half weight gradient goes (after the weight copy in cu->wh), and
 * its accumulation into the fp32 gradient dw (n elements). */
void *gr_cuda_wgrad_half(gr_cuda *cu);
void gr_cuda_wgrad_add(gr_cuda *cu, float *dw, int64_t n, gr_elem e);

#endif
