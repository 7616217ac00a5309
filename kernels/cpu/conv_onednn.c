/* conv_onednn.c — the oneDNN path of conv.h: convolution primitives
 * (forward training, backward data, backward weights) on the plan's own
 * buffers in plain layouts (src/dst nchw, weights oihw or goihw, bias x),
 * so no reorders happen at the boundaries.
 *
 * Primitives are made once per (direction, shape incl. the run's n, bias)
 * and kept in a small table for the life of the process; memory objects are
 * created without data and pointed at the buffers on each call. One
 * training thread uses the table (no locking).
 *
 * Backward weights overwrites its outputs in oneDNN, so it writes into a
 * per-entry buffer that is then added to dW/db (the ADD contract). */
#include <stdio.h>
#include <string.h>

#include <oneapi/dnnl/dnnl.h>
#include <oneapi/dnnl/dnnl_debug.h>

#include "conv.h"
#include "cpu_kernels.h"

#define GR_DNNL_CHECK(call) do { \
    dnnl_status_t st_ = (call); \
    if (st_ != dnnl_success) { \
        fprintf(stderr, "oneDNN: %s: %s\n", #call, dnnl_status2str(st_)); \
        gr_assert_fail(#call, __FILE__, __LINE__); \
    } \
} while (0)

typedef enum gr_conv_dir { GR_CONV_FWD, GR_CONV_BWD_DATA, GR_CONV_BWD_WEIGHTS } gr_conv_dir;

enum { GR_CONV_CACHE_MAX = 128 };

typedef struct gr_conv_prim {
    gr_conv_dir dir;
    bool bias;
    gr_conv_shape s;
    dnnl_primitive_desc_t hint, pd; /* hint: the forward pd backward ones were made from */
    dnnl_primitive_t prim;
    dnnl_memory_t src, wei, bia, dst;  /* the diff_ tensors for backward directions */
    float *acc;                        /* backward weights: dW then db, added to the grads */
} gr_conv_prim;

static dnnl_engine_t gr_conv_engine;
static dnnl_stream_t gr_conv_stream;
static gr_conv_prim gr_conv_cache[GR_CONV_CACHE_MAX];
static int gr_conv_cached;

static void gr_conv_mds(const gr_conv_shape *s, dnnl_memory_desc_t *src, dnnl_memory_desc_t *wei,
                        dnnl_memory_desc_t *bia, dnnl_memory_desc_t *dst) {
    dnnl_dims_t sd = {s->n, s->c, s->h, s->w}, dd = {s->n, s->f, s->ho, s->wo}, bd = {s->f};
    GR_DNNL_CHECK(dnnl_memory_desc_init_by_tag(src, 4, sd, dnnl_f32, dnnl_nchw));
    GR_DNNL_CHECK(dnnl_memory_desc_init_by_tag(dst, 4, dd, dnnl_f32, dnnl_nchw));
    GR_DNNL_CHECK(dnnl_memory_desc_init_by_tag(bia, 1, bd, dnnl_f32, dnnl_x));
    if (s->groups == 1) {
        dnnl_dims_t wd = {s->f, s->c, s->kh, s->kw};
        GR_DNNL_CHECK(dnnl_memory_desc_init_by_tag(wei, 4, wd, dnnl_f32, dnnl_oihw));
    } else {
        dnnl_dims_t wd = {s->groups, s->f / s->groups, s->c / s->groups, s->kh, s->kw};
        GR_DNNL_CHECK(dnnl_memory_desc_init_by_tag(wei, 5, wd, dnnl_f32, dnnl_goihw));
    }
}

static void gr_conv_prim_make(gr_conv_prim *e) {
    if (!gr_conv_engine) {
        GR_DNNL_CHECK(dnnl_engine_create(&gr_conv_engine, dnnl_cpu, 0));
        GR_DNNL_CHECK(dnnl_stream_create(&gr_conv_stream, gr_conv_engine, dnnl_stream_default_flags));
    }
    const gr_conv_shape *s = &e->s;
    dnnl_memory_desc_t src, wei, bia, dst;
    gr_conv_mds(s, &src, &wei, &bia, &dst);
    dnnl_dims_t strides = {s->sh, s->sw}, pad = {s->ph, s->pw};
    dnnl_convolution_desc_t fd, bd;
    GR_DNNL_CHECK(dnnl_convolution_forward_desc_init(&fd, dnnl_forward_training, dnnl_convolution_direct, &src,
                                                     &wei, e->bias ? &bia : NULL, &dst, strides, pad, pad));
    if (e->dir == GR_CONV_FWD) {
        GR_DNNL_CHECK(dnnl_primitive_desc_create(&e->pd, &fd, NULL, gr_conv_engine, NULL));
    } else {
        GR_DNNL_CHECK(dnnl_primitive_desc_create(&e->hint, &fd, NULL, gr_conv_engine, NULL));
        if (e->dir == GR_CONV_BWD_DATA)
            GR_DNNL_CHECK(dnnl_convolution_backward_data_desc_init(&bd, dnnl_convolution_direct, &src, &wei, &dst,
                                                                   strides, pad, pad));
        else
            GR_DNNL_CHECK(dnnl_convolution_backward_weights_desc_init(
                &bd, dnnl_convolution_direct, &src, &wei, e->bias ? &bia : NULL, &dst, strides, pad, pad));
        GR_DNNL_CHECK(dnnl_primitive_desc_create(&e->pd, &bd, NULL, gr_conv_engine, e->hint));
    }
    GR_DNNL_CHECK(dnnl_primitive_create(&e->prim, e->pd));
    GR_DNNL_CHECK(dnnl_memory_create(&e->src, &src, gr_conv_engine, DNNL_MEMORY_NONE));
    GR_DNNL_CHECK(dnnl_memory_create(&e->wei, &wei, gr_conv_engine, DNNL_MEMORY_NONE));
    GR_DNNL_CHECK(dnnl_memory_create(&e->bia, &bia, gr_conv_engine, DNNL_MEMORY_NONE));
    GR_DNNL_CHECK(dnnl_memory_create(&e->dst, &dst, gr_conv_engine, DNNL_MEMORY_NONE));
    if (e->dir == GR_CONV_BWD_WEIGHTS) {
        e->acc = gr_aligned_alloc((size_t)(s->f * (s->c / s->groups) * s->kh * s->kw + s->f) * sizeof(float));
        GR_ASSERT(e->acc);
    }
}

/* The cached primitive for (dir, s, bias); made on first use. */
static gr_conv_prim *gr_conv_prim_get(gr_conv_dir dir, const gr_conv_shape *s, bool bias) {
    for (int i = 0; i < gr_conv_cached; i++) {
        gr_conv_prim *e = &gr_conv_cache[i];
        if (e->dir == dir && e->bias == bias && memcmp(&e->s, s, sizeof *s) == 0) return e;
    }
    /* a full table drops its oldest half: shapes churn only with odd eval batches */
    if (gr_conv_cached == GR_CONV_CACHE_MAX) {
        int half = GR_CONV_CACHE_MAX / 2;
        for (int i = 0; i < half; i++) {
            gr_conv_prim *e = &gr_conv_cache[i];
            dnnl_primitive_destroy(e->prim);
            dnnl_primitive_desc_destroy(e->pd);
            if (e->hint) dnnl_primitive_desc_destroy(e->hint);
            dnnl_memory_destroy(e->src);
            dnnl_memory_destroy(e->wei);
            dnnl_memory_destroy(e->bia);
            dnnl_memory_destroy(e->dst);
            gr_aligned_free(e->acc);
        }
        memmove(gr_conv_cache, gr_conv_cache + half, (size_t)half * sizeof gr_conv_cache[0]);
        gr_conv_cached = half;
    }
    gr_conv_prim *e = &gr_conv_cache[gr_conv_cached];
    memset(e, 0, sizeof *e);
    e->dir = dir;
    e->bias = bias;
    e->s = *s;
    gr_conv_prim_make(e);
    gr_conv_cached++;
    return e;
}

static void gr_conv_run(gr_conv_prim *e, int src_arg, const void *src, int wei_arg, const void *wei,
                        int bia_arg, const void *bia, int dst_arg, const void *dst) {
    dnnl_exec_arg_t args[4];
    int n = 0;
    GR_DNNL_CHECK(dnnl_memory_set_data_handle(e->src, (void *)src));
    args[n++] = (dnnl_exec_arg_t){src_arg, e->src};
    GR_DNNL_CHECK(dnnl_memory_set_data_handle(e->wei, (void *)wei));
    args[n++] = (dnnl_exec_arg_t){wei_arg, e->wei};
    if (bia) {
        GR_DNNL_CHECK(dnnl_memory_set_data_handle(e->bia, (void *)bia));
        args[n++] = (dnnl_exec_arg_t){bia_arg, e->bia};
    }
    GR_DNNL_CHECK(dnnl_memory_set_data_handle(e->dst, (void *)dst));
    args[n++] = (dnnl_exec_arg_t){dst_arg, e->dst};
    GR_DNNL_CHECK(dnnl_primitive_execute(e->prim, gr_conv_stream, n, args));
    GR_DNNL_CHECK(dnnl_stream_wait(gr_conv_stream));
}

void gr_cpu_conv_onednn_fwd(const gr_conv_shape *s, const float *x, const float *w, const float *b, float *y) {
    gr_conv_prim *e = gr_conv_prim_get(GR_CONV_FWD, s, b != NULL);
    gr_conv_run(e, DNNL_ARG_SRC, x, DNNL_ARG_WEIGHTS, w, DNNL_ARG_BIAS, b, DNNL_ARG_DST, y);
}

void gr_cpu_conv_onednn_bwd_data(const gr_conv_shape *s, const float *dy, const float *w, float *dx) {
    gr_conv_prim *e = gr_conv_prim_get(GR_CONV_BWD_DATA, s, false);
    gr_conv_run(e, DNNL_ARG_DIFF_SRC, dx, DNNL_ARG_WEIGHTS, w, 0, NULL, DNNL_ARG_DIFF_DST, dy);
}

void gr_cpu_conv_onednn_bwd_params(const gr_conv_shape *s, const float *dy, const float *x, float *dw,
                                   float *db) {
    gr_conv_prim *e = gr_conv_prim_get(GR_CONV_BWD_WEIGHTS, s, db != NULL);
    int64_t nw = s->f * (s->c / s->groups) * s->kh * s->kw;
    float *tw = e->acc, *tb = e->acc + nw;
    gr_conv_run(e, DNNL_ARG_SRC, x, DNNL_ARG_DIFF_WEIGHTS, tw, DNNL_ARG_DIFF_BIAS, db ? tb : NULL,
                DNNL_ARG_DIFF_DST, dy);
    #pragma omp parallel for simd if (nw >= GR_OMP_MIN)
    for (int64_t i = 0; i < nw; i++) dw[i] += tw[i];
    if (db)
        for (int64_t i = 0; i < s->f; i++) db[i] += tb[i];
}
