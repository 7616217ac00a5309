/* conv_onednn.c — the oneDNN path of conv.h: convolution primitives
 * (forward training, backward data, backward weights) on the plan's own
 * buffers, which are plain (src/dst nchw, weights oihw or goihw, bias x).
 * A primitive may run in its own (blocked) layouts, reached by reorders
 * before it reads and after it writes (see gr_conv_any_layout).
 *
 * Primitives are made once per (direction, shape incl. the run's n, bias)
 * and kept in a small table for the life of the backend (its state, cpu.h:
 * made at the first oneDNN conv, freed with the backend); memory objects are
 * created without data and pointed at the buffers on each call. The
 * primitives' own layouts and their scratchpads live in one pool shared by
 * all of them (one runs at a time), grown to the largest need on first use,
 * so caching a primitive per layer costs no activation-sized memory. The
 * backend's prepare grows it once to what the plans' convolutions need
 * (gr_cpu_conv_workspace); it is counted with the CPU's arenas. One
 * training thread uses the table and the pool (no locking).
 *
 * Backward weights overwrites its outputs in oneDNN, so it writes into the
 * front of the pool, which is then added to dW/db (the ADD contract).
 *
 * A 1x1 bf16 convolution on channels-last activations, without bias, over
 * few pixels is a matrix product of its n*ho*wo pixel rows, and runs as one
 * on oneDNN's matmul (dense_onednn.c) in every direction, a strided one on a
 * copy of the pixels it reads; a larger kernel's backward weights does the
 * same on im2col rows where the conv kernel was weak (gr_conv_mm says where,
 * with what was measured). The conv primitives' backward weights also pays
 * a reorder of dW out of a blocked layout and an add. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/env.h"
#include "conv.h"
#include "cpu.h"
#include "cpu_kernels.h"
#include "onednn.h"

/* distinct (direction, shape, n) in one process: ResNet-50 needs ~80 */
enum { GR_CONV_CACHE_MAX = 512 };

/* One argument of a primitive: the user's plain memory and, when the
 * primitive chose another layout, its own buffer and the reorder between them
 * (plain -> inner before an input is read, inner -> plain after an output). */
typedef struct gr_conv_arg {
    int arg;                  /* DNNL_ARG_* */
    bool output;
    dnnl_memory_t user, inner;
    size_t inner_bytes;       /* its slice of the pool */
    dnnl_primitive_t reorder;
} gr_conv_arg;

typedef struct gr_conv_prim {
    gr_conv_dir dir;
    bool bias;
    gr_conv_shape s;
    gr_conv_store st;                 /* how x (dx) and y (dy) are stored */
    dnnl_primitive_desc_t hint, pd; /* hint: the forward pd backward ones were made from */
    dnnl_primitive_t prim;
    gr_conv_arg args[4];              /* src, weights, bias, dst (their diff_ for backward) */
    int nargs;
    dnnl_memory_t scratch;            /* the primitive's scratchpad, in the pool */
    size_t scratch_bytes;
    size_t acc_bytes;                 /* backward weights: dW then db at the pool's front */
} gr_conv_prim;

typedef enum gr_conv_layout { GR_LAYOUT_AUTO, GR_LAYOUT_PLAIN, GR_LAYOUT_BLOCKED } gr_conv_layout;

/* The path's state in a CPU backend (gr_cpu.dnn). */
struct gr_cpu_dnn {
    dnnl_engine_t engine;
    dnnl_stream_t stream;
    gr_conv_layout layout;             /* GPURUN_CONV_LAYOUT, read once */
    int cached;
    gr_conv_prim cache[GR_CONV_CACHE_MAX];
    char *pool;
    size_t pool_cap;
    int nhwc_fallbacks;                /* primitives made blocked for want of an nhwc kernel */
    int64_t matmul_calls;              /* convolutions run as a matmul (gr_conv_mm) */
};

static size_t gr_conv_align(size_t n) { return (n + 63) & ~(size_t)63; }

/* The pool grown to at least n bytes, its contents dropped (the old block
 * is freed first, so the two are never held at once; capped: false when
 * the CPU's memory limit has no room, the pool then empty). */
static bool gr_conv_pool_grow(gr_cpu *cpu, struct gr_cpu_dnn *d, size_t n, bool capped) {
    if (n <= d->pool_cap) return true;
    gr_cpu_scratch_free(cpu, d->pool, d->pool_cap);
    d->pool = gr_cpu_scratch_alloc(cpu, n, capped);
    d->pool_cap = d->pool ? n : 0;
    return d->pool != NULL;
}

/* The bytes e takes of the pool: [acc | scratchpad | inner tensors]. */
static size_t gr_conv_pool_need(const gr_conv_prim *e) {
    size_t need = e->acc_bytes + gr_conv_align(e->scratch_bytes);
    for (int i = 0; i < e->nargs; i++) need += e->args[i].inner_bytes;
    return need;
}

/* The pool sized for e (a shape prepare did not see grows it past the limit). */
static char *gr_conv_pool_for(gr_cpu *cpu, struct gr_cpu_dnn *d, const gr_conv_prim *e) {
    GR_ASSERT(gr_conv_pool_grow(cpu, d, gr_conv_pool_need(e), false));
    return d->pool;
}

static dnnl_data_type_t gr_conv_dt(gr_elem e) { return e == GR_BF16 ? dnnl_bf16 : dnnl_f32; }

/* The descriptors of x, w, b, y in types tx, tw, ty (bias: fp32); x and y
 * in format tags fx and fy (nchw, nhwc, or `any`: the primitive's choice),
 * w plain (oihw or goihw) or left to the primitive (wany). */
static void gr_conv_mds(const gr_conv_shape *s, dnnl_format_tag_t fx, bool wany, dnnl_format_tag_t fy,
                        dnnl_data_type_t tx, dnnl_data_type_t tw, dnnl_data_type_t ty, dnnl_memory_desc_t *src,
                        dnnl_memory_desc_t *wei, dnnl_memory_desc_t *bia, dnnl_memory_desc_t *dst) {
    dnnl_dims_t sd = {s->n, s->c, s->h, s->w}, dd = {s->n, s->f, s->ho, s->wo}, bd = {s->f};
    GR_DNNL_CHECK(dnnl_memory_desc_init_by_tag(src, 4, sd, tx, fx));
    GR_DNNL_CHECK(dnnl_memory_desc_init_by_tag(dst, 4, dd, ty, fy));
    GR_DNNL_CHECK(dnnl_memory_desc_init_by_tag(bia, 1, bd, dnnl_f32, dnnl_x));
    if (s->groups == 1) {
        dnnl_dims_t wd = {s->f, s->c, s->kh, s->kw};
        GR_DNNL_CHECK(dnnl_memory_desc_init_by_tag(wei, 4, wd, tw, wany ? dnnl_format_tag_any : dnnl_oihw));
    } else {
        dnnl_dims_t wd = {s->groups, s->f / s->groups, s->c / s->groups, s->kh, s->kw};
        GR_DNNL_CHECK(dnnl_memory_desc_init_by_tag(wei, 5, wd, tw, wany ? dnnl_format_tag_any : dnnl_goihw));
    }
}

static dnnl_format_tag_t gr_conv_tag(gr_layout l) { return l == GR_NHWC ? dnnl_nhwc : dnnl_nchw; }

static void gr_conv_arg_make(dnnl_engine_t eng, gr_conv_prim *e, int arg, bool output, const dnnl_memory_desc_t *plain) {
    gr_conv_arg *a = &e->args[e->nargs++];
    a->arg = arg;
    a->output = output;
    GR_DNNL_CHECK(dnnl_memory_create(&a->user, plain, eng, DNNL_MEMORY_NONE));
    const dnnl_memory_desc_t *md = dnnl_primitive_desc_query_md(e->pd, dnnl_query_exec_arg_md, arg);
    GR_ASSERT(md);
    if (dnnl_memory_desc_equal(md, plain)) return;
    GR_DNNL_CHECK(dnnl_memory_create(&a->inner, md, eng, DNNL_MEMORY_NONE));
    a->inner_bytes = gr_conv_align(dnnl_memory_desc_get_size(md));
    dnnl_primitive_desc_t rpd;
    if (output)
        GR_DNNL_CHECK(dnnl_reorder_primitive_desc_create(&rpd, md, eng, plain, eng, NULL));
    else
        GR_DNNL_CHECK(dnnl_reorder_primitive_desc_create(&rpd, plain, eng, md, eng, NULL));
    GR_DNNL_CHECK(dnnl_primitive_create(&a->reorder, rpd));
    GR_DNNL_CHECK(dnnl_primitive_desc_destroy(rpd));
}

/* Blocked layouts (the primitive's choice, reordered at the boundaries)
 * beat oneDNN's gemm-based convolution on nchw for k x k kernels by ~2x. A
 * 1x1 conv on nchw is one GEMM per sample, which the reorders would only
 * slow down (ResNet-50's 64x56x56 -> 256 at batch 8, two cores: 10 ms vs
 * 12 ms forward + backward) — except on small outputs, where the blocked
 * kernels win (512x7x7 -> 2048: 9 ms vs 11 ms). Fixed per shape, never timed
 * at run time, so runs repeat bit for bit. GPURUN_CONV_LAYOUT=plain|blocked
 * overrides (for measurements). */
static bool gr_conv_any_layout(const struct gr_cpu_dnn *d, const gr_conv_prim *e) {
    const gr_conv_shape *s = &e->s;
    if (e->st.x == GR_BF16 || e->st.y == GR_BF16) return true; /* bf16 kernels are blocked ones */
    if (d->layout == GR_LAYOUT_PLAIN) return false;
    if (d->layout == GR_LAYOUT_BLOCKED) return true;
    return !(s->kh == 1 && s->kw == 1 && s->ho * s->wo >= 64);
}

/* e->pd (and the forward hint of a backward one) with x and y in format fx
 * (weights: the primitive's choice when wany). The implementation's name. */
static const char *gr_conv_pd_make(struct gr_cpu_dnn *d, gr_conv_prim *e, dnnl_format_tag_t fx, bool wany,
                                   const_dnnl_primitive_attr_t attr) {
    const gr_conv_shape *s = &e->s;
    /* the primitive computes in bf16 when either activation is stored in it
     * (fp32 weights and an fp32 input batch are converted by the reorders);
     * backward weights writes fp32 gradients */
    const bool half = e->st.x == GR_BF16 || e->st.y == GR_BF16;
    const dnnl_data_type_t ct = half ? dnnl_bf16 : dnnl_f32;
    dnnl_memory_desc_t src, wei, bia, dst, dwei;
    gr_conv_mds(s, fx, wany, fx, ct, ct, ct, &src, &wei, &bia, &dst);
    gr_conv_mds(s, fx, wany, fx, ct, dnnl_f32, ct, &src, &dwei, &bia, &dst);
    dnnl_dims_t strides = {s->sh, s->sw}, pad = {s->ph, s->pw};
    dnnl_convolution_desc_t fd, bd;
    GR_DNNL_CHECK(dnnl_convolution_forward_desc_init(&fd, dnnl_forward_training, dnnl_convolution_direct, &src,
                                                     &wei, e->bias ? &bia : NULL, &dst, strides, pad, pad));
    if (e->dir == GR_CONV_FWD) {
        GR_DNNL_CHECK(dnnl_primitive_desc_create(&e->pd, &fd, attr, d->engine, NULL));
    } else {
        GR_DNNL_CHECK(dnnl_primitive_desc_create(&e->hint, &fd, NULL, d->engine, NULL));
        if (e->dir == GR_CONV_BWD_DATA)
            GR_DNNL_CHECK(dnnl_convolution_backward_data_desc_init(&bd, dnnl_convolution_direct, &src, &wei, &dst,
                                                                   strides, pad, pad));
        else
            GR_DNNL_CHECK(dnnl_convolution_backward_weights_desc_init(
                &bd, dnnl_convolution_direct, &src, &dwei, e->bias ? &bia : NULL, &dst, strides, pad, pad));
        GR_DNNL_CHECK(dnnl_primitive_desc_create(&e->pd, &bd, attr, d->engine, e->hint));
    }
    const char *impl = "";
    GR_DNNL_CHECK(dnnl_primitive_desc_query(e->pd, dnnl_query_impl_info_str, 0, &impl));
    return impl;
}

/* The primitive of e, its arguments and scratchpad. With either activation
 * channels-last the primitive runs on nhwc itself (no reorder of
 * activations); where oneDNN has only its reference kernel for that (some
 * fp32 shapes, e.g. strided 1x1), on its own blocked layouts with reorders
 * (counted by gr_cpu_conv_onednn_nhwc_fallbacks). */
static void gr_conv_prim_make(struct gr_cpu_dnn *d, gr_conv_prim *e) {
    dnnl_engine_t eng = d->engine;
    const gr_conv_shape *s = &e->s;
    const bool any = gr_conv_any_layout(d, e), nhwc = e->st.lx == GR_NHWC || e->st.ly == GR_NHWC;
    dnnl_primitive_attr_t attr;
    GR_DNNL_CHECK(dnnl_primitive_attr_create(&attr));
    GR_DNNL_CHECK(dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user));
    const dnnl_format_tag_t fx = nhwc ? dnnl_nhwc : any ? dnnl_format_tag_any : dnnl_nchw;
    const char *impl = gr_conv_pd_make(d, e, fx, any, attr);
    if (nhwc && strncmp(impl, "ref", 3) == 0) {
        dnnl_primitive_desc_destroy(e->pd);
        if (e->hint) dnnl_primitive_desc_destroy(e->hint);
        e->pd = e->hint = NULL;
        d->nhwc_fallbacks++;
        gr_conv_pd_make(d, e, dnnl_format_tag_any, true, attr);
    }
    GR_DNNL_CHECK(dnnl_primitive_attr_destroy(attr));
    dnnl_memory_desc_t psrc, pwei, pbia, pdst;
    gr_conv_mds(s, gr_conv_tag(e->st.lx), false, gr_conv_tag(e->st.ly), gr_conv_dt(e->st.x), dnnl_f32,
                gr_conv_dt(e->st.y), &psrc, &pwei, &pbia, &pdst);
    switch (e->dir) {
    case GR_CONV_FWD:
        gr_conv_arg_make(eng, e, DNNL_ARG_SRC, false, &psrc);
        gr_conv_arg_make(eng, e, DNNL_ARG_WEIGHTS, false, &pwei);
        if (e->bias) gr_conv_arg_make(eng, e, DNNL_ARG_BIAS, false, &pbia);
        gr_conv_arg_make(eng, e, DNNL_ARG_DST, true, &pdst);
        break;
    case GR_CONV_BWD_DATA:
        gr_conv_arg_make(eng, e, DNNL_ARG_DIFF_DST, false, &pdst);
        gr_conv_arg_make(eng, e, DNNL_ARG_WEIGHTS, false, &pwei);
        gr_conv_arg_make(eng, e, DNNL_ARG_DIFF_SRC, true, &psrc);
        break;
    case GR_CONV_BWD_WEIGHTS:
        gr_conv_arg_make(eng, e, DNNL_ARG_SRC, false, &psrc);
        gr_conv_arg_make(eng, e, DNNL_ARG_DIFF_DST, false, &pdst);
        gr_conv_arg_make(eng, e, DNNL_ARG_DIFF_WEIGHTS, true, &pwei);
        if (e->bias) gr_conv_arg_make(eng, e, DNNL_ARG_DIFF_BIAS, true, &pbia);
        e->acc_bytes = gr_conv_align((size_t)(s->f * (s->c / s->groups) * s->kh * s->kw + s->f) * sizeof(float));
        break;
    }
    const dnnl_memory_desc_t *smd = dnnl_primitive_desc_query_md(e->pd, dnnl_query_scratchpad_md, 0);
    e->scratch_bytes = smd ? dnnl_memory_desc_get_size(smd) : 0;
    if (e->scratch_bytes) GR_DNNL_CHECK(dnnl_memory_create(&e->scratch, smd, eng, DNNL_MEMORY_NONE));
    GR_DNNL_CHECK(dnnl_primitive_create(&e->prim, e->pd));
}

static void gr_conv_prim_free(gr_conv_prim *e) {
    for (int i = 0; i < e->nargs; i++) {
        gr_conv_arg *a = &e->args[i];
        dnnl_memory_destroy(a->user);
        if (a->inner) dnnl_memory_destroy(a->inner);
        if (a->reorder) dnnl_primitive_destroy(a->reorder);
    }
    if (e->scratch) dnnl_memory_destroy(e->scratch);
    dnnl_primitive_destroy(e->prim);
    dnnl_primitive_desc_destroy(e->pd);
    if (e->hint) dnnl_primitive_desc_destroy(e->hint);
}

/* cpu's oneDNN state, made on first use. */
static struct gr_cpu_dnn *gr_conv_dnn(gr_cpu *cpu) {
    if (cpu->dnn) return cpu->dnn;
    struct gr_cpu_dnn *d = gr_xcalloc(1, sizeof *d);
    GR_DNNL_CHECK(dnnl_engine_create(&d->engine, dnnl_cpu, 0));
    GR_DNNL_CHECK(dnnl_stream_create(&d->stream, d->engine, dnnl_stream_default_flags));
    const char *v = gr_env_str(GR_ENV_CONV_LAYOUT);
    if (v && strcmp(v, "plain") == 0) d->layout = GR_LAYOUT_PLAIN;
    else if (v && strcmp(v, "blocked") == 0) d->layout = GR_LAYOUT_BLOCKED;
    cpu->dnn = d;
    return d;
}

void gr_cpu_onednn_handles(gr_cpu *cpu, dnnl_engine_t *engine, dnnl_stream_t *stream) {
    struct gr_cpu_dnn *d = gr_conv_dnn(cpu);
    *engine = d->engine;
    *stream = d->stream;
}

void gr_cpu_conv_onednn_free(gr_cpu *cpu) {
    struct gr_cpu_dnn *d = cpu->dnn;
    if (!d) return;
    for (int i = 0; i < d->cached; i++) gr_conv_prim_free(&d->cache[i]);
    dnnl_stream_destroy(d->stream);
    dnnl_engine_destroy(d->engine);
    gr_cpu_scratch_free(cpu, d->pool, d->pool_cap);
    free(d);
    cpu->dnn = NULL;
}

/* The cached primitive for (dir, s, bias); made on first use. */
static gr_conv_prim *gr_conv_prim_get(struct gr_cpu_dnn *d, gr_conv_dir dir, const gr_conv_shape *s, bool bias,
                                      const gr_conv_store *st) {
    for (int i = 0; i < d->cached; i++) {
        gr_conv_prim *e = &d->cache[i];
        if (e->dir == dir && e->bias == bias && e->st.x == st->x && e->st.y == st->y && e->st.lx == st->lx &&
            e->st.ly == st->ly && memcmp(&e->s, s, sizeof *s) == 0)
            return e;
    }
    /* a full table drops its oldest half: shapes churn only with odd eval batches */
    if (d->cached == GR_CONV_CACHE_MAX) {
        int half = GR_CONV_CACHE_MAX / 2;
        for (int i = 0; i < half; i++) gr_conv_prim_free(&d->cache[i]);
        memmove(d->cache, d->cache + half, (size_t)half * sizeof d->cache[0]);
        d->cached = half;
    }
    gr_conv_prim *e = &d->cache[d->cached];
    memset(e, 0, sizeof *e);
    e->dir = dir;
    e->bias = bias;
    e->s = *s;
    e->st = *st;
    gr_conv_prim_make(d, e);
    d->cached++;
    return e;
}

/* ---- channels-last convolutions as matrix products ---- */

/* At most this many pixel rows (n*ho*wo), on 2 AVX-512 BF16 cores (ResNet-50
 * at batch 8, --profile): a 1x1 conv's backward weights gained at 7x7 and
 * 14x14 (392 and 1,568 rows: 27-53% -> 66-75% of the bf16 peak), was even at
 * 28x28 (6,272) and lost at 56x56 (25,088); its forward and backward data
 * gained at 7x7 (53-70% -> 72-78%) but lost at 14x14, where the conv kernel
 * ran at ~96%. A 3x3 conv's backward weights as a matmul on im2col rows
 * reached 55-67% wherever it ran: better than the conv kernel at 7x7 (392
 * rows: 55% -> 64%) and strided at 14x14 (39-57% -> 55-65%), worse at 14x14
 * unstrided (~80% -> 66%), so: up to 1,024 rows, or 4,096 when strided. */
enum { GR_CONV_MM_ROWS_W = 4096, GR_CONV_MM_ROWS = 1024 };

static bool gr_conv_1x1(const gr_conv_shape *s) { return s->kh == 1 && s->kw == 1 && !s->ph && !s->pw; }

/* whether direction dir of the conv runs as a matmul: a 1x1 one in every
 * direction, another one's backward weights on its im2col rows */
static bool gr_conv_mm(gr_conv_dir dir, const gr_conv_shape *s, bool bias, const gr_conv_store *t) {
    if (s->groups != 1 || bias) return false;
    if (t->x != GR_BF16 || t->y != GR_BF16 || t->lx != GR_NHWC || t->ly != GR_NHWC) return false;
    const int64_t rows = s->n * s->ho * s->wo;
    const bool strided = s->sh != 1 || s->sw != 1;
    if (dir == GR_CONV_BWD_WEIGHTS)
        return rows <= (gr_conv_1x1(s) || strided ? GR_CONV_MM_ROWS_W : GR_CONV_MM_ROWS);
    return gr_conv_1x1(s) && rows <= GR_CONV_MM_ROWS;
}

/* The pool's parts: the rows the product reads (x's pixels, or dx's it
 * writes; none for an unstrided 1x1 conv, which reads x itself), then, for a
 * larger kernel's backward weights, dW with the kernel offset before the
 * channel ([f, kh, kw, c], fp32). */
static size_t gr_conv_mm_rows_bytes(const gr_conv_shape *s) {
    if (gr_conv_1x1(s) && s->sh == 1 && s->sw == 1) return 0;
    return gr_conv_align((size_t)(s->n * s->ho * s->wo * s->kh * s->kw * s->c) * sizeof(uint16_t));
}
static size_t gr_conv_mm_need(gr_conv_dir dir, const gr_conv_shape *s) {
    const bool dwt = dir == GR_CONV_BWD_WEIGHTS && !gr_conv_1x1(s);
    return gr_conv_mm_rows_bytes(s) + (dwt ? gr_conv_align((size_t)(s->f * s->kh * s->kw * s->c) * sizeof(float)) : 0);
}

/* x [n, h, w, c] as the product's rows [n, ho, wo][kh, kw, c]: the pixels
 * each output reads, 0 where it reads padding (a 1x1 conv: the pixels it
 * reads, every s-th) */
static void gr_conv_mm_im2col(const gr_conv_shape *s, const uint16_t *x, uint16_t *rows) {
    const int64_t c = s->c, n_rows = s->n * s->ho, kc = s->kw * c;
    #pragma omp parallel for if (n_rows * s->wo * s->kh * kc >= GR_OMP_MIN)
    for (int64_t r = 0; r < n_rows; r++) {
        const int64_t n = r / s->ho, i = r % s->ho;
        uint16_t *dst = rows + r * s->wo * s->kh * kc;
        for (int64_t j = 0; j < s->wo; j++)
            for (int64_t ki = 0; ki < s->kh; ki++, dst += kc) {
                const int64_t hi = i * s->sh - s->ph + ki, w0 = j * s->sw - s->pw;
                if (hi < 0 || hi >= s->h) {
                    memset(dst, 0, (size_t)kc * sizeof *dst);
                    continue;
                }
                const uint16_t *src = x + ((n * s->h + hi) * s->w) * c;
                for (int64_t kj = 0; kj < s->kw; kj++) {
                    const int64_t wi = w0 + kj;
                    if (wi < 0 || wi >= s->w) memset(dst + kj * c, 0, (size_t)c * sizeof *dst);
                    else memcpy(dst + kj * c, src + wi * c, (size_t)c * sizeof *dst);
                }
            }
    }
}

/* A strided 1x1 conv's dx rows [n, ho, wo, c] into dx [n, h, w, c], every
 * other pixel 0. */
static void gr_conv_mm_scatter(const gr_conv_shape *s, const uint16_t *rows, uint16_t *dx) {
    const int64_t c = s->c, n_rows = s->n * s->ho;
    memset(dx, 0, (size_t)(s->n * s->h * s->w * c) * sizeof *dx);
    #pragma omp parallel for if (n_rows * s->wo * c >= GR_OMP_MIN)
    for (int64_t r = 0; r < n_rows; r++) {
        uint16_t *full = dx + ((r / s->ho * s->h + r % s->ho * s->sh) * s->w) * c;
        for (int64_t j = 0; j < s->wo; j++) memcpy(full + j * s->sw * c, rows + (r * s->wo + j) * c, (size_t)c * sizeof *dx);
    }
}

/* The pool sized for the product (its front: the rows; NULL when it needs none). */
static char *gr_conv_mm_pool(gr_cpu *cpu, struct gr_cpu_dnn *d, gr_conv_dir dir, const gr_conv_shape *s) {
    const size_t need = gr_conv_mm_need(dir, s);
    if (!need) return NULL;
    GR_ASSERT(gr_conv_pool_grow(cpu, d, need, false));
    return d->pool;
}

/* dW [f, c, kh, kw] += dwt [f, kh, kw, c] */
static void gr_conv_mm_add_dw(const gr_conv_shape *s, const float *dwt, float *dw) {
    const int64_t kk = s->kh * s->kw, c = s->c;
    #pragma omp parallel for if (s->f * kk * c >= GR_OMP_MIN)
    for (int64_t f = 0; f < s->f; f++)
        for (int64_t ch = 0; ch < c; ch++)
            for (int64_t k = 0; k < kk; k++) dw[(f * c + ch) * kk + k] += dwt[(f * kk + k) * c + ch];
}

size_t gr_cpu_conv_onednn_need(gr_cpu *cpu, gr_conv_dir dir, const gr_conv_shape *s, bool bias,
                               const gr_conv_store *t) {
    if (gr_conv_mm(dir, s, bias, t)) return gr_conv_mm_need(dir, s);
    return gr_conv_pool_need(gr_conv_prim_get(gr_conv_dnn(cpu), dir, s, bias, t));
}

bool gr_cpu_conv_onednn_reserve(gr_cpu *cpu, size_t bytes) {
    return gr_conv_pool_grow(cpu, gr_conv_dnn(cpu), bytes, true);
}

static void gr_conv_reorder(dnnl_stream_t stream, gr_conv_arg *a, bool to_inner) {
    dnnl_exec_arg_t r[2] = {{DNNL_ARG_FROM, to_inner ? a->user : a->inner},
                            {DNNL_ARG_TO, to_inner ? a->inner : a->user}};
    GR_DNNL_CHECK(dnnl_primitive_execute(a->reorder, stream, 2, r));
}

/* ptr[i]: the user buffer of args[i], in the order they were made */
static void gr_conv_run(gr_cpu *cpu, struct gr_cpu_dnn *d, gr_conv_prim *e, const void *const *ptr) {
    dnnl_exec_arg_t args[5];
    char *pool = gr_conv_pool_for(cpu, d, e) + e->acc_bytes;
    if (e->scratch) {
        GR_DNNL_CHECK(dnnl_memory_set_data_handle(e->scratch, pool));
        pool += gr_conv_align(e->scratch_bytes);
    }
    for (int i = 0; i < e->nargs; i++) {
        gr_conv_arg *a = &e->args[i];
        GR_DNNL_CHECK(dnnl_memory_set_data_handle(a->user, (void *)ptr[i]));
        if (a->inner) {
            GR_DNNL_CHECK(dnnl_memory_set_data_handle(a->inner, pool));
            pool += a->inner_bytes;
        }
        if (a->inner && !a->output) gr_conv_reorder(d->stream, a, true);
        args[i] = (dnnl_exec_arg_t){a->arg, a->inner ? a->inner : a->user};
    }
    int nargs = e->nargs;
    if (e->scratch) args[nargs++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, e->scratch};
    GR_DNNL_CHECK(dnnl_primitive_execute(e->prim, d->stream, nargs, args));
    for (int i = 0; i < e->nargs; i++)
        if (e->args[i].inner && e->args[i].output) gr_conv_reorder(d->stream, &e->args[i], false);
    GR_DNNL_CHECK(dnnl_stream_wait(d->stream));
}

void gr_cpu_conv_onednn_fwd_as(gr_cpu *cpu, const gr_conv_shape *s, const gr_conv_store *t, const void *x,
                            const float *w, const float *b, void *y) {
    struct gr_cpu_dnn *d = gr_conv_dnn(cpu);
    if (gr_conv_mm(GR_CONV_FWD, s, b != NULL, t)) { /* y [p, f] = x [p, c] W^T */
        d->matmul_calls++;
        uint16_t *xs = (uint16_t *)gr_conv_mm_pool(cpu, d, GR_CONV_FWD, s);
        if (xs) gr_conv_mm_im2col(s, x, xs);
        gr_cpu_mm_bf16_fwd(cpu, s->n * s->ho * s->wo, s->f, s->c, false, xs ? xs : x, GR_BF16, w, NULL, y, GR_BF16);
        return;
    }
    gr_conv_prim *e = gr_conv_prim_get(d, GR_CONV_FWD, s, b != NULL, t);
    const void *with_bias[4] = {x, w, b, y}, *without[3] = {x, w, y};
    gr_conv_run(cpu, d, e, b ? with_bias : without);
}

void gr_cpu_conv_onednn_bwd_data_as(gr_cpu *cpu, const gr_conv_shape *s, const gr_conv_store *t, const void *dy,
                                 const float *w, void *dx) {
    struct gr_cpu_dnn *d = gr_conv_dnn(cpu);
    if (gr_conv_mm(GR_CONV_BWD_DATA, s, false, t)) { /* dx [p, c] = dy [p, f] W */
        d->matmul_calls++;
        uint16_t *dxs = (uint16_t *)gr_conv_mm_pool(cpu, d, GR_CONV_BWD_DATA, s);
        gr_cpu_mm_bf16_bwd_data(cpu, s->n * s->ho * s->wo, s->f, s->c, false, dy, GR_BF16, w, dxs ? dxs : dx, GR_BF16);
        if (dxs) gr_conv_mm_scatter(s, dxs, dx);
        return;
    }
    gr_conv_prim *e = gr_conv_prim_get(d, GR_CONV_BWD_DATA, s, false, t);
    const void *ptr[3] = {dy, w, dx};
    gr_conv_run(cpu, d, e, ptr);
}

void gr_cpu_conv_onednn_bwd_params_as(gr_cpu *cpu, const gr_conv_shape *s, const gr_conv_store *t, const void *dy,
                                   const void *x, float *dw, float *db) {
    struct gr_cpu_dnn *d = gr_conv_dnn(cpu);
    if (gr_conv_mm(GR_CONV_BWD_WEIGHTS, s, db != NULL, t)) { /* dW [f, k c] += dy^T [f, p] rows [p, k c] */
        d->matmul_calls++;
        char *pool = gr_conv_mm_pool(cpu, d, GR_CONV_BWD_WEIGHTS, s);
        uint16_t *rows = (uint16_t *)pool;
        if (rows) gr_conv_mm_im2col(s, x, rows);
        const int64_t p = s->n * s->ho * s->wo, kc = s->kh * s->kw * s->c;
        if (gr_conv_1x1(s)) {
            gr_cpu_mm_bf16_bwd_w(cpu, p, s->f, kc, false, dy, rows ? rows : x, GR_BF16, dw, true);
            return;
        }
        float *dwt = (float *)(pool + gr_conv_mm_rows_bytes(s));
        gr_cpu_mm_bf16_bwd_w(cpu, p, s->f, kc, false, dy, rows, GR_BF16, dwt, false);
        gr_conv_mm_add_dw(s, dwt, dw);
        return;
    }
    gr_conv_prim *e = gr_conv_prim_get(d, GR_CONV_BWD_WEIGHTS, s, db != NULL, t);
    int64_t nw = s->f * (s->c / s->groups) * s->kh * s->kw;
    float *tw = (float *)gr_conv_pool_for(cpu, d, e), *tb = tw + nw;
    const void *ptr[4] = {x, dy, tw, tb};
    gr_conv_run(cpu, d, e, ptr);
    #pragma omp parallel for simd if (nw >= GR_OMP_MIN)
    for (int64_t i = 0; i < nw; i++) dw[i] += tw[i];
    if (db)
        for (int64_t i = 0; i < s->f; i++) db[i] += tb[i];
}

/* the fp32 entry points (tests, bench/conv_bench.c) */
static const gr_conv_store gr_conv_f32 = {GR_F32, GR_F32, GR_NCHW, GR_NCHW};

void gr_cpu_conv_onednn_fwd(gr_cpu *cpu, const gr_conv_shape *s, const float *x, const float *w, const float *b,
                            float *y) {
    gr_cpu_conv_onednn_fwd_as(cpu, s, &gr_conv_f32, x, w, b, y);
}

void gr_cpu_conv_onednn_bwd_data(gr_cpu *cpu, const gr_conv_shape *s, const float *dy, const float *w, float *dx) {
    gr_cpu_conv_onednn_bwd_data_as(cpu, s, &gr_conv_f32, dy, w, dx);
}

void gr_cpu_conv_onednn_bwd_params(gr_cpu *cpu, const gr_conv_shape *s, const float *dy, const float *x, float *dw,
                                   float *db) {
    gr_cpu_conv_onednn_bwd_params_as(cpu, s, &gr_conv_f32, dy, x, dw, db);
}

int gr_cpu_conv_onednn_nhwc_fallbacks(const gr_cpu *cpu) { return cpu->dnn ? cpu->dnn->nhwc_fallbacks : 0; }

int64_t gr_cpu_conv_onednn_matmul_calls(const gr_cpu *cpu) { return cpu->dnn ? cpu->dnn->matmul_calls : 0; }
