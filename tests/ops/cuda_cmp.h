/* cuda_cmp.h — what the CPU-vs-CUDA comparison tests (test_cuda_vs_cpu.c,
 * test_cuda_resnet.c, test_cuda_graph.c) share: the device under test (or a
 * skip), models built from YAML, random batches, poisoned activation arenas
 * and the normalized squared error between a result and its reference.
 *
 * GR_CUDA_TEST_DEVICE=cpu makes the "device" a second CPU backend, so the
 * harness itself can be run where no GPU is (every comparison must then
 * hold with room to spare); unset, it is cuda:0. */
#ifndef GR_TEST_CUDA_CMP_H
#define GR_TEST_CUDA_CMP_H

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../gr_test.h"
#include "common/gr_half.h"
#include "dist/comm.h"
#include "graph/graph.h"
#include "exec/exec.h"
#include "runner/train.h"

static inline const char *gr_cmp_device_name(void) {
    const char *d = getenv("GR_CUDA_TEST_DEVICE");
    return d && d[0] ? d : "cuda:0";
}

/* The device backend, configured with o; GR_ERR_DEVICE here means "skip". */
static inline gr_status gr_cmp_open_device(const gr_backend_opts *o, gr_backend **out, gr_error *err) {
    gr_status st = gr_backend_create(gr_cmp_device_name(), 1, out, err);
    if (st == GR_OK) gr_backend_configure(*out, o);
    return st;
}

/* The fp32 device backend for NCCL's tests: 0, or 77 after "SKIP: ..." (no
 * device, or a build without NCCL). */
static inline int gr_cmp_open_nccl(gr_backend **be) {
    gr_error err = {0};
    gr_backend_opts o = {.precision = GR_PREC_FP32, .cudnn_benchmark = false, .cuda_graph = false};
    if (gr_cmp_open_device(&o, be, &err) != GR_OK) {
        printf("SKIP: %s\n", err.msg);
        return 77;
    }
    if (!gr_comm_built(GR_COMM_NCCL)) {
        gr_backend_free(*be);
        printf("SKIP: this build has no NCCL\n");
        return 77;
    }
    return 0;
}

/* sum((a-b)^2) / sum(b^2) in double, b the reference. Anything non-finite
 * gives inf, so a `nmse <= tol` check fails on it; equal arrays give 0 even
 * when b is all zeros. */
static inline double gr_cmp_nmse(const float *a, const float *b, int64_t n) {
    double num = 0.0, den = 0.0;
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(a[i]) || !isfinite(b[i])) return INFINITY;
        double d = (double)a[i] - (double)b[i];
        num += d * d;
        den += (double)b[i] * (double)b[i];
    }
    if (num == 0.0) return 0.0;
    return den > 0.0 ? num / den : INFINITY;
}

/* A model from a YAML flow list of layers (and a flow map of blocks, or
 * NULL) for per-sample inputs of shape[0..ndim), ending in softmax
 * cross-entropy; the cfg trees are kept alongside the graph and freed with
 * it. */
typedef struct gr_cmp_model {
    gr_cfg *layers, *blocks;
    gr_job_spec spec;
    gr_graph g;
    bool built;
} gr_cmp_model;

static inline gr_status gr_cmp_model_build(gr_cmp_model *cm, const char *layers, const char *blocks,
                                    const int64_t *shape, int ndim, int64_t micro_batch, double label_smoothing,
                                    bool input_grad, gr_precision prec, gr_error *err) {
    memset(cm, 0, sizeof *cm);
    gr_status st = gr_cfg_parse_text(layers, "layers", 1, 1, &cm->layers, err);
    if (!st && blocks) st = gr_cfg_parse_text(blocks, "blocks", 1, 1, &cm->blocks, err);
    if (st) return st;
    snprintf(cm->spec.file, sizeof cm->spec.file, "test");
    cm->spec.model.layers = cm->layers;
    cm->spec.model.blocks = cm->blocks;
    cm->spec.train.micro_batch = micro_batch;
    cm->spec.train.batch_size = micro_batch;
    cm->spec.train.label_smoothing = label_smoothing;
    snprintf(cm->spec.train.loss, sizeof cm->spec.train.loss, "softmax_cross_entropy");
    if ((st = gr_graph_build(&cm->spec, shape, ndim, &cm->g, err))) return st;
    cm->built = true;
    gr_autodiff(&cm->g, input_grad);
    gr_graph_set_precision(&cm->g, prec); /* bf16/fp16: activations stored in half */
    return GR_OK;
}

static inline void gr_cmp_model_free(gr_cmp_model *cm) {
    if (cm->built) gr_graph_free(&cm->g); /* before the trees it was built from */
    gr_cfg_free(cm->layers);
    gr_cfg_free(cm->blocks);
    memset(cm, 0, sizeof *cm);
}

/* The host parameters both backends start from: PyTorch's init, with the
 * batchnorm tensors moved off their identity values (weight 1, bias 0,
 * running stats 0 and 1) so a kernel that ignores or swaps one of them
 * shows. */
static inline float *gr_cmp_init_params(const gr_graph *g, uint64_t seed) {
    float *h = gr_xmalloc((size_t)(g->n_params ? g->n_params : 1) * sizeof *h);
    gr_graph_init_params(g, h, seed);
    for (int i = 0; i < g->n_tensors; i++) {
        const gr_tensor *t = &g->tensors[i];
        if ((t->kind != GR_TK_PARAM && t->kind != GR_TK_STATE) || g->layers[t->layer].op != GR_OP_BATCHNORM)
            continue;
        float lo = 0.5f, span = 1.0f; /* weight and running_var stay positive */
        if (strcmp(t->pname, "bias") == 0) { lo = -0.5f; span = 1.0f; }
        if (strcmp(t->pname, "running_mean") == 0) { lo = -0.2f; span = 0.4f; }
        uint64_t key = gr_hash64(seed, 0xB0000ull + (uint64_t)i);
        for (int64_t k = 0; k < gr_tensor_numel(t); k++)
            h[t->param_offset + k] = lo + span * gr_uniform(key, (uint64_t)k);
    }
    return h;
}

/* n samples for g's input, uniform in [-2, 2), labels uniform over the
 * classes; a pure function of key. */
static inline void gr_cmp_batch(const gr_graph *g, int64_t n, uint64_t key, float *x, int32_t *y) {
    int64_t per = gr_tensor_sample_numel(&g->tensors[g->input]);
    for (int64_t i = 0; i < n * per; i++) x[i] = 4.0f * gr_uniform(key, (uint64_t)i) - 2.0f;
    for (int64_t i = 0; i < n; i++)
        y[i] = (int32_t)(gr_hash64(key ^ 0x1AB1ull, (uint64_t)i) % (uint64_t)g->n_classes);
}

/* Fills the plan's activation arena with all-ones bytes, a NaN as fp32,
 * bf16 and fp16 alike: a kernel that reads a value no earlier step of the
 * pass wrote (or accumulates into one) then makes the results NaN instead
 * of passing by luck on a zeroed arena. */
static inline void gr_cmp_poison(gr_plan *p) {
    size_t n = p->mem.act_bytes;
    if (!n) return;
    unsigned char *h = gr_xmalloc(n);
    memset(h, 0xFF, n);
    gr_backend_upload(p->m->be, p->act, h, n);
    free(h);
}

/* n floats of a device (or host) array, into a new host buffer. */
static inline float *gr_cmp_fetch(gr_backend *be, const void *src, int64_t n) {
    float *h = gr_xmalloc((size_t)(n ? n : 1) * sizeof *h);
    if (n) gr_backend_download(be, h, src, (size_t)n * sizeof *h);
    return h;
}

/* n elements of tensor storage of type e (fp32, bf16 or fp16), decoded into new host floats. */
static inline float *gr_cmp_fetch_as(gr_backend *be, const void *src, gr_elem e, int64_t n) {
    if (e == GR_F32) return gr_cmp_fetch(be, src, n);
    uint16_t *raw = gr_xmalloc((size_t)(n ? n : 1) * sizeof *raw);
    float *h = gr_xmalloc((size_t)(n ? n : 1) * sizeof *h);
    if (n) gr_backend_download(be, raw, src, (size_t)n * sizeof *raw);
    for (int64_t i = 0; i < n; i++) h[i] = e == GR_BF16 ? gr_bf16_decode_hd(raw[i]) : gr_fp16_decode_hd(raw[i]);
    free(raw);
    return h;
}

/* Samples whose two largest reference logits are within margin of each
 * other: there the two backends may each pick a different class, so their
 * correct counts may differ by up to this many. */
static inline int gr_cmp_near_ties(const float *z, int64_t n, int64_t k, double margin) {
    int ties = 0;
    for (int64_t i = 0; i < n; i++) {
        double a = -INFINITY, b = -INFINITY;
        for (int64_t j = 0; j < k; j++) {
            double v = z[i * k + j];
            if (v > a) { b = a; a = v; }
            else if (v > b) b = v;
        }
        ties += a - b < margin;
    }
    return ties;
}

#endif
