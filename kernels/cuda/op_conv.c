/* op_conv.c — conv and its backward on cuDNN (NCHW; fp32 data, or bf16 /
 * fp16 for native half steps).
 *
 * Descriptors and algorithms are made once per conv geometry (input shape
 * with this run's batch, filter, stride, padding, groups) and kept in a
 * table on the backend: a plan's convs are set up when it is prepared, at
 * its micro-batch, and the cuDNN workspace is sized then to the largest
 * need; another batch size (the last eval batch) gets its own entry on first
 * use, with algorithms that fit the workspace already held, so no kernel
 * ever allocates.
 *
 * Algorithms: cuDNN's heuristics (the _v7 ranking), or, with
 * cudnn_benchmark, every algorithm timed once on the plan's own buffers
 * (outputs into a scratch block, so nothing of the run is overwritten).
 * Deterministic algorithms are preferred over faster nondeterministic ones
 * (runs repeat bit for bit, and a resumed run matches an uninterrupted
 * one, when both processes rank alike: the heuristics do on one GPU with
 * the same free memory, while cudnn_benchmark's timings may pick another
 * algorithm in another process, equal up to rounding). Precision: fp32
 * forbids TF32 (CUDNN_FMA_MATH), tf32 allows it. A native half step
 * (bf16/fp16 activations: gr_cuda_native_half) runs cuDNN's half
 * configuration with fp32 accumulation (CUDNN_DATA_FLOAT compute, tensor
 * cores allowed) on a half copy of the weight; its weight gradient is
 * computed in half and added to the fp32 gradient (cuda_backend.h).
 * The bias is a separate pass (cu_spatial.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../conv_shape.h"
#include "cu_spatial.h"
#include "cuda_backend.h"

/* largest workspace any algorithm may ask for */
#define GR_CONV_WS_MAX ((size_t)1 << 30)

typedef struct gr_conv_entry {
    gr_conv_shape s;
    gr_elem dt;                /* the activations' (and the weight copy's) type */
    cudnnTensorDescriptor_t x, y;
    cudnnFilterDescriptor_t w;
    cudnnConvolutionDescriptor_t conv;
    cudnnConvolutionFwdAlgo_t fwd;
    cudnnConvolutionBwdDataAlgo_t bwd_data;
    cudnnConvolutionBwdFilterAlgo_t bwd_filter;
    cudnnMathType_t fwd_math, bwd_data_math, bwd_filter_math;
    size_t ws;                 /* the most any of the three needs */
} gr_conv_entry;

struct gr_cuda_convs {
    gr_conv_entry *e;
    int n, cap;
};

static const float gr_one = 1.0f, gr_zero = 0.0f;

/* x: the forward input (or dx), y: the output (or dy), w: the weight (or dW) */
static gr_conv_shape gr_cuda_conv_shape(const gr_kargs *a, const gr_tensor *x, const gr_tensor *y,
                                        const gr_tensor *w) {
    const gr_attrs *at = &a->node->attrs;
    gr_conv_shape s;
    memset(&s, 0, sizeof s); /* compared with memcmp */
    s.n = a->n;
    s.c = x->shape[1];
    s.h = x->shape[2];
    s.w = x->shape[3];
    s.f = y->shape[1];
    s.ho = y->shape[2];
    s.wo = y->shape[3];
    s.kh = w->shape[2];
    s.kw = w->shape[3];
    s.sh = at->stride[0];
    s.sw = at->stride[1];
    s.ph = at->padding[0];
    s.pw = at->padding[1];
    s.groups = at->groups;
    return s;
}

static gr_conv_shape gr_cuda_conv_node_shape(const gr_kargs *a) {
    switch (a->node->op) {
    case GR_OP_CONV: return gr_cuda_conv_shape(a, a->tin[0], a->tout[0], a->tin[1]);
    case GR_OP_CONV_BWD_DATA: return gr_cuda_conv_shape(a, a->tout[0], a->tin[0], a->tin[1]);
    default: return gr_cuda_conv_shape(a, a->tin[1], a->tin[0], a->tout[0]);
    }
}

/* The type a step's conv runs in: its activations' (fp32 when staged: the
 * kernel then gets fp32 copies). */
static gr_elem gr_conv_elem(const gr_kargs *a) { return a->staged ? GR_F32 : a->ein[0]; }

static cudnnDataType_t gr_conv_dtype(gr_elem e) {
    return e == GR_BF16 ? CUDNN_DATA_BFLOAT16 : e == GR_F16 ? CUDNN_DATA_HALF : CUDNN_DATA_FLOAT;
}

/* strict fp32 math only for fp32 data under precision fp32 */
static bool gr_conv_strict(const gr_cuda *cu, gr_elem dt) { return cu->opts.precision == GR_PREC_FP32 && dt == GR_F32; }

static cudnnMathType_t gr_conv_math(const gr_cuda *cu, gr_elem dt) {
    return dt != GR_F32 ? CUDNN_TENSOR_OP_MATH : gr_conv_strict(cu, dt) ? CUDNN_FMA_MATH : CUDNN_DEFAULT_MATH;
}

/* The first usable result of a ranking: fits the limit, deterministic when
 * one such exists, never fp16 conversion, and no tensor-core math in strict
 * fp32: there an algorithm cuDNN reports under CUDNN_DEFAULT_MATH (which
 * permits TF32 on Ampere and later; the query ran under FMA_MATH) is taken
 * and run with FMA_MATH forced, as PyTorch does with allow_tf32 off. */
#define GR_PICK(perf, count, limit, strict, out, math, deterministic_only) do { \
    for (int i_ = 0; i_ < (count); i_++) { \
        if ((perf)[i_].status != CUDNN_STATUS_SUCCESS || (perf)[i_].memory > (limit)) continue; \
        if ((perf)[i_].mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION) continue; \
        if ((strict) && (perf)[i_].mathType == CUDNN_TENSOR_OP_MATH) continue; \
        if ((deterministic_only) && (perf)[i_].determinism != CUDNN_DETERMINISTIC) continue; \
        (out) = (perf)[i_].algo; (math) = (strict) ? CUDNN_FMA_MATH : (perf)[i_].mathType; found_ = true; break; \
    } \
} while (0)

/* Buffers for cudnn_benchmark's trial runs (NULL: heuristics only). */
typedef struct gr_conv_trial {
    const void *x, *w, *dy;
    void *out;                 /* scratch as large as the largest of y, dx, dW */
    void *ws;
    size_t ws_bytes;
} gr_conv_trial;

static void gr_conv_ws(gr_cuda *cu, gr_conv_entry *e);

/* No ranked algorithm qualified: the default one runs, said once per shape,
 * since it can be much slower than what cuDNN ranked first. */
static void gr_conv_fallback(const gr_conv_entry *e, const char *stage, size_t limit) {
    const gr_conv_shape *s = &e->s;
    fprintf(stderr, "gpurun: cuda: conv %lldx%lldx%lldx%lld -> %lld filters %lldx%lld: no cuDNN %s algorithm fits "
            "%zu bytes of workspace with this precision's math; using the default one\n", (long long)s->n,
            (long long)s->c, (long long)s->h, (long long)s->w, (long long)s->f, (long long)s->kh, (long long)s->kw,
            stage, limit);
}

static void gr_conv_choose(gr_cuda *cu, gr_conv_entry *e, size_t limit, const gr_conv_trial *t) {
    bool strict = gr_conv_strict(cu, e->dt);
    cudnnMathType_t math = gr_conv_math(cu, e->dt);
    GR_CUDNN(cudnnSetConvolutionMathType(e->conv, math));
    int cnt = 0;
    bool found_;

    cudnnConvolutionFwdAlgoPerf_t fp[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    if (t) GR_CUDNN(cudnnFindConvolutionForwardAlgorithmEx(cu->dnn, e->x, t->x, e->w, t->w, e->conv, e->y, t->out,
                                                          CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &cnt, fp, t->ws, t->ws_bytes));
    else GR_CUDNN(cudnnGetConvolutionForwardAlgorithm_v7(cu->dnn, e->x, e->w, e->conv, e->y,
                                                         CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &cnt, fp));
    found_ = false;
    e->fwd = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
    e->fwd_math = math;
    GR_PICK(fp, cnt, limit, strict, e->fwd, e->fwd_math, true);
    if (!found_) GR_PICK(fp, cnt, limit, strict, e->fwd, e->fwd_math, false);
    if (!found_) gr_conv_fallback(e, "forward", limit);

    cudnnConvolutionBwdDataAlgoPerf_t dp[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    if (t) GR_CUDNN(cudnnFindConvolutionBackwardDataAlgorithmEx(cu->dnn, e->w, t->w, e->y, t->dy, e->conv, e->x, t->out,
                                                               CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &cnt, dp, t->ws,
                                                               t->ws_bytes));
    else GR_CUDNN(cudnnGetConvolutionBackwardDataAlgorithm_v7(cu->dnn, e->w, e->y, e->conv, e->x,
                                                              CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &cnt, dp));
    found_ = false;
    e->bwd_data = CUDNN_CONVOLUTION_BWD_DATA_ALGO_1;
    e->bwd_data_math = math;
    GR_PICK(dp, cnt, limit, strict, e->bwd_data, e->bwd_data_math, true);
    if (!found_) GR_PICK(dp, cnt, limit, strict, e->bwd_data, e->bwd_data_math, false);
    if (!found_) gr_conv_fallback(e, "backward-data", limit);

    cudnnConvolutionBwdFilterAlgoPerf_t wp[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
    if (t) GR_CUDNN(cudnnFindConvolutionBackwardFilterAlgorithmEx(cu->dnn, e->x, t->x, e->y, t->dy, e->conv, e->w, t->out,
                                                                 CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &cnt, wp, t->ws,
                                                                 t->ws_bytes));
    else GR_CUDNN(cudnnGetConvolutionBackwardFilterAlgorithm_v7(cu->dnn, e->x, e->y, e->conv, e->w,
                                                                CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &cnt, wp));
    found_ = false;
    e->bwd_filter = CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1;
    e->bwd_filter_math = math;
    GR_PICK(wp, cnt, limit, strict, e->bwd_filter, e->bwd_filter_math, true);
    if (!found_) GR_PICK(wp, cnt, limit, strict, e->bwd_filter, e->bwd_filter_math, false);
    if (!found_) gr_conv_fallback(e, "backward-filter", limit);
    gr_conv_ws(cu, e);
}

/* The workspace each of the entry's algorithms needs, under the math type it runs with: e->ws. */
static void gr_conv_ws(gr_cuda *cu, gr_conv_entry *e) {
    size_t a = 0, b = 0, c = 0;
    GR_CUDNN(cudnnSetConvolutionMathType(e->conv, e->fwd_math));
    GR_CUDNN(cudnnGetConvolutionForwardWorkspaceSize(cu->dnn, e->x, e->w, e->conv, e->y, e->fwd, &a));
    GR_CUDNN(cudnnSetConvolutionMathType(e->conv, e->bwd_data_math));
    GR_CUDNN(cudnnGetConvolutionBackwardDataWorkspaceSize(cu->dnn, e->w, e->y, e->conv, e->x, e->bwd_data, &b));
    GR_CUDNN(cudnnSetConvolutionMathType(e->conv, e->bwd_filter_math));
    GR_CUDNN(cudnnGetConvolutionBackwardFilterWorkspaceSize(cu->dnn, e->x, e->y, e->conv, e->w, e->bwd_filter, &c));
    e->ws = a > b ? a : b;
    if (c > e->ws) e->ws = c;
}

static gr_conv_entry *gr_conv_lookup(gr_cuda *cu, const gr_conv_shape *s, gr_elem dt) {
    struct gr_cuda_convs *t = cu->convs;
    for (int i = 0; t && i < t->n; i++)
        if (t->e[i].dt == dt && memcmp(&t->e[i].s, s, sizeof *s) == 0) return &t->e[i];
    return NULL;
}

/* A new entry with its descriptors; algorithms are chosen by the caller. */
static gr_conv_entry *gr_conv_add(gr_cuda *cu, const gr_conv_shape *s, gr_elem dt) {
    if (!cu->convs) cu->convs = gr_xcalloc(1, sizeof *cu->convs);
    struct gr_cuda_convs *t = cu->convs;
    GR_GROW(t->e, t->cap, t->n + 1);
    gr_conv_entry *e = &t->e[t->n++];
    memset(e, 0, sizeof *e);
    e->s = *s;
    e->dt = dt;
    const cudnnDataType_t d = gr_conv_dtype(dt);
    GR_CUDNN(cudnnCreateTensorDescriptor(&e->x));
    GR_CUDNN(cudnnCreateTensorDescriptor(&e->y));
    GR_CUDNN(cudnnCreateFilterDescriptor(&e->w));
    GR_CUDNN(cudnnCreateConvolutionDescriptor(&e->conv));
    GR_CUDNN(cudnnSetTensor4dDescriptor(e->x, CUDNN_TENSOR_NCHW, d, (int)s->n, (int)s->c, (int)s->h, (int)s->w));
    GR_CUDNN(cudnnSetTensor4dDescriptor(e->y, CUDNN_TENSOR_NCHW, d, (int)s->n, (int)s->f, (int)s->ho, (int)s->wo));
    GR_CUDNN(cudnnSetFilter4dDescriptor(e->w, d, CUDNN_TENSOR_NCHW, (int)s->f, (int)(s->c / s->groups), (int)s->kh,
                                        (int)s->kw));
    GR_CUDNN(cudnnSetConvolution2dDescriptor(e->conv, (int)s->ph, (int)s->pw, (int)s->sh, (int)s->sw, 1, 1,
                                             CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    GR_CUDNN(cudnnSetConvolutionGroupCount(e->conv, (int)s->groups));
    int on, oc, oh, ow;
    GR_CUDNN(cudnnGetConvolution2dForwardOutputDim(e->conv, e->x, e->w, &on, &oc, &oh, &ow));
    GR_ASSERT(on == s->n && oc == s->f && oh == s->ho && ow == s->wo);
    return e;
}

/* The entry for a run: made on first use with algorithms that fit the
 * workspace the backend already holds. */
static gr_conv_entry *gr_conv_get(gr_cuda *cu, const gr_kargs *a) {
    gr_conv_shape s = gr_cuda_conv_node_shape(a);
    gr_conv_entry *e = gr_conv_lookup(cu, &s, gr_conv_elem(a));
    if (e) return e;
    e = gr_conv_add(cu, &s, gr_conv_elem(a));
    gr_conv_choose(cu, e, cu->ws_bytes, NULL);
    if (e->ws > cu->ws_bytes) {
        /* nothing ranked fits the workspace held (it cannot grow mid-run): the
         * algorithms that need none */
        e->fwd = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
        e->bwd_data = CUDNN_CONVOLUTION_BWD_DATA_ALGO_0;
        e->bwd_filter = CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0;
        e->fwd_math = e->bwd_data_math = e->bwd_filter_math = gr_conv_math(cu, e->dt);
        gr_conv_ws(cu, e);
        if (e->ws > cu->ws_bytes)
            gr_cuda_die(__FILE__, __LINE__, "a conv of a partial batch",
                        "no cuDNN algorithm fits the workspace prepared for the full batch");
    }
    return e;
}

static size_t gr_tensor_bytes_f32(const gr_tensor *t) { return (size_t)gr_tensor_numel(t) * sizeof(float); }

gr_status gr_cuda_conv_prepare(gr_cuda *cu, const gr_steps *st, size_t *ws_need, gr_error *err) {
    *ws_need = cu->ws_bytes;
    size_t fr = 0, tot = 0;
    GR_CU(cudaMemGetInfo(&fr, &tot));
    size_t limit = fr / 4 < GR_CONV_WS_MAX ? fr / 4 : GR_CONV_WS_MAX;
    gr_conv_trial trial = {0}, *tp = NULL;
    if (cu->opts.cudnn_benchmark) {
        size_t out = 0;
        for (int i = 0; i < st->n; i++) {
            const gr_kargs *a = &st->step[i];
            if (a->node->op != GR_OP_CONV) continue;
            size_t b[3] = {gr_tensor_bytes_f32(a->tin[0]), gr_tensor_bytes_f32(a->tin[1]), gr_tensor_bytes_f32(a->tout[0])};
            for (int k = 0; k < 3; k++) out = b[k] > out ? b[k] : out;
        }
        if (out) {
            GR_CU(cudaStreamSynchronize(cu->stream));
            if (cudaMalloc(&trial.out, out) != cudaSuccess || cudaMalloc(&trial.ws, limit) != cudaSuccess) {
                (void)cudaGetLastError();
                if (trial.out) GR_CU(cudaFree(trial.out));
                return gr_error_set(err, GR_ERR_OOM, "out of memory on cuda:%d: cudnn_benchmark needs %zu bytes of "
                                    "scratch for its trial runs; %zu free of %zu (set cudnn_benchmark: false)",
                                    cu->device, out + limit, fr, tot);
            }
            trial.ws_bytes = limit;
            tp = &trial;
        }
    }
    for (int i = 0; i < st->n; i++) {
        const gr_kargs *a = &st->step[i];
        gr_op op = a->node->op;
        if (op != GR_OP_CONV && op != GR_OP_CONV_BWD_DATA && op != GR_OP_CONV_BWD_PARAMS) continue;
        gr_kargs full = *a;
        full.n = st->micro_batch;
        gr_conv_shape s = gr_cuda_conv_node_shape(&full);
        gr_conv_entry *e = gr_conv_lookup(cu, &s, gr_conv_elem(a));
        if (!e) {
            e = gr_conv_add(cu, &s, gr_conv_elem(a));
            if (tp) { /* the forward node's own buffers: x, w, and its output as dy */
                const gr_kargs *f = a;
                for (int j = 0; j < st->n && op != GR_OP_CONV; j++)
                    if (st->step[j].node == &st->g->nodes[a->node->fwd]) f = &st->step[j];
                if (f->node->op == GR_OP_CONV && gr_conv_elem(f) == e->dt) { /* buffers of this type */
                    /* a staged step's fp32 copies (half storage is half the bytes) */
                    trial.x = f->stage_in[0] ? f->stage_in[0] : f->in[0];
                    /* a native half conv reads the weight's half copy (cu->wh, sized before) */
                    trial.w = gr_cuda_weight_as(cu, f->in[1], gr_tensor_numel(f->tin[1]), e->dt);
                    trial.dy = f->stage_out[0] ? f->stage_out[0] : f->out[0];
                    gr_conv_choose(cu, e, limit, tp);
                } else {
                    gr_conv_choose(cu, e, limit, NULL);
                }
            } else {
                gr_conv_choose(cu, e, limit, NULL);
            }
        }
        if (e->ws > *ws_need) *ws_need = e->ws;
    }
    if (tp) {
        GR_CU(cudaStreamSynchronize(cu->stream));
        GR_CU(cudaFree(trial.out));
        GR_CU(cudaFree(trial.ws));
    }
    return GR_OK;
}

void gr_cuda_conv_free_all(gr_cuda *cu) {
    struct gr_cuda_convs *t = cu->convs;
    if (!t) return;
    for (int i = 0; i < t->n; i++) {
        GR_CUDNN(cudnnDestroyTensorDescriptor(t->e[i].x));
        GR_CUDNN(cudnnDestroyTensorDescriptor(t->e[i].y));
        GR_CUDNN(cudnnDestroyFilterDescriptor(t->e[i].w));
        GR_CUDNN(cudnnDestroyConvolutionDescriptor(t->e[i].conv));
    }
    free(t->e);
    free(t);
    cu->convs = NULL;
}

void gr_cuda_conv(const gr_kargs *a) {
    gr_cuda *cu = gr_cuda_of(a);
    gr_conv_entry *e = gr_conv_get(cu, a);
    const void *w = gr_cuda_weight_as(cu, a->in[1], gr_tensor_numel(a->tin[1]), e->dt);
    GR_CUDNN(cudnnSetConvolutionMathType(e->conv, e->fwd_math));
    GR_CUDNN(cudnnConvolutionForward(cu->dnn, &gr_one, e->x, a->in[0], e->w, w, e->conv, e->fwd, cu->ws,
                                     cu->ws_bytes, &gr_zero, e->y, a->out[0]));
    if (a->node->nin > 2)
        gr_cu_bias_add(cu->stream, (int)e->dt, a->out[0], a->in[2], e->s.n, e->s.f, e->s.ho * e->s.wo);
}

void gr_cuda_conv_bwd_data(const gr_kargs *a) {
    gr_cuda *cu = gr_cuda_of(a);
    gr_conv_entry *e = gr_conv_get(cu, a);
    const void *w = gr_cuda_weight_as(cu, a->in[1], gr_tensor_numel(a->tin[1]), e->dt);
    GR_CUDNN(cudnnSetConvolutionMathType(e->conv, e->bwd_data_math));
    GR_CUDNN(cudnnConvolutionBackwardData(cu->dnn, &gr_one, e->w, w, e->y, a->in[0], e->conv, e->bwd_data, cu->ws,
                                          cu->ws_bytes, &gr_zero, e->x, a->out[0]));
}

/* dW += (beta 1: gradients accumulate over micro-batches; a half step's
 * gradient is computed into the half block, then added); db += */
void gr_cuda_conv_bwd_params(const gr_kargs *a) {
    gr_cuda *cu = gr_cuda_of(a);
    gr_conv_entry *e = gr_conv_get(cu, a);
    const bool half = e->dt != GR_F32;
    GR_CUDNN(cudnnSetConvolutionMathType(e->conv, e->bwd_filter_math));
    GR_CUDNN(cudnnConvolutionBackwardFilter(cu->dnn, &gr_one, e->x, a->in[1], e->y, a->in[0], e->conv, e->bwd_filter,
                                            cu->ws, cu->ws_bytes, half ? &gr_zero : &gr_one, e->w,
                                            half ? gr_cuda_wgrad_half(cu) : a->out[0]));
    if (half) gr_cuda_wgrad_add(cu, a->out[0], gr_tensor_numel(a->tout[0]), e->dt);
    if (a->node->nout > 1)
        gr_cu_bias_grad(cu->stream, (int)e->dt, a->in[0], a->out[1], e->s.n, e->s.f, e->s.ho * e->s.wo);
}
