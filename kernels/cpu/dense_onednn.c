/* dense_onednn.c — dense and its backward in bf16 on oneDNN matmul
 * primitives (dense.c calls these when the step is native bf16:
 * cpu_backend.c), and the fp32 forward (below). Row major: x [n, F],
 * W [U, F] (fp32 master), y [n, U].
 *
 *   forward       y  = x W^T + b          bf16 x bf16, fp32 accumulation, fp32 bias
 *   backward data dx = dy W
 *   backward W    dW += dy^T x            fp32 dW (a sum post-op adds into it)
 *                 db += sum over the batch of dy (decoded, in dense.c's order)
 *
 * A transposed tied use (node attrs.weight_t, graph/op_dense.c) stores W
 * [F, U]: the same products read it with the other strides (y = x W,
 * dx = dy W^T), and its gradient is dW [F, U] += x^T dy.
 *
 * The weights are encoded into a bf16 copy on each call (as torch.autocast
 * casts them per use), and an fp32 x or dy (the input batch of a first
 * dense layer) likewise; y and dx are written in their own storage type.
 * Primitives are made once per (direction, n, shape, types) and kept for
 * the backend's life; memory objects get their buffers on each call. */
#include <stdlib.h>
#include <string.h>

#include "cpu.h"
#include "cpu_kernels.h"
#include "half_io.h"
#include "onednn.h"

typedef enum gr_mm_dir { GR_MM_FWD, GR_MM_BWD_DATA, GR_MM_BWD_W } gr_mm_dir;

enum { GR_MM_CACHE_MAX = 128 };

typedef struct gr_mm_prim {
    gr_mm_dir dir;
    int64_t n, u, f;
    bool bias;
    bool wt;                          /* W stored [F, U] (attrs.weight_t) */
    bool acc;                         /* backward W: dW += (else dW =) */
    gr_elem in;                       /* the operands' type: bf16, or fp32 (the fp32 forward) */
    gr_elem out;                      /* y / dx storage (dW: fp32) */
    dnnl_primitive_t prim;
    dnnl_memory_t src, wei, bia, dst;
} gr_mm_prim;

struct gr_cpu_mm {
    int cached;
    gr_mm_prim cache[GR_MM_CACHE_MAX];
    uint16_t *buf;                    /* bf16 copies: the weights, then an fp32 operand's */
    size_t cap;
};

static dnnl_memory_desc_t gr_mm_md(int64_t rows, int64_t cols, int64_t rs, int64_t cs, dnnl_data_type_t t) {
    dnnl_memory_desc_t md;
    dnnl_dims_t dims = {rows, cols}, strides = {rs, cs};
    GR_DNNL_CHECK(dnnl_memory_desc_init_by_strides(&md, 2, dims, t, strides));
    return md;
}

static void gr_mm_make(gr_cpu *cpu, gr_mm_prim *e) {
    dnnl_engine_t eng;
    dnnl_stream_t stream;
    gr_cpu_onednn_handles(cpu, &eng, &stream);
    const int64_t n = e->n, u = e->u, f = e->f;
    const bool t = e->wt;
    const dnnl_data_type_t bf = e->in == GR_BF16 ? dnnl_bf16 : dnnl_f32, ot = e->out == GR_BF16 ? dnnl_bf16 : dnnl_f32;
    dnnl_memory_desc_t src, wei, bia, dst;
    switch (e->dir) {
    case GR_MM_FWD: /* x [n, F] . W^T [F, U] (W [U, F] read column-wise; t: W [F, U] as it is) */
        src = gr_mm_md(n, f, f, 1, bf), dst = gr_mm_md(n, u, u, 1, ot);
        wei = t ? gr_mm_md(f, u, u, 1, bf) : gr_mm_md(f, u, 1, f, bf);
        bia = gr_mm_md(1, u, u, 1, dnnl_f32);
        break;
    case GR_MM_BWD_DATA: /* dy [n, U] . W [U, F] (t: W [F, U] read column-wise) */
        src = gr_mm_md(n, u, u, 1, bf), dst = gr_mm_md(n, f, f, 1, ot);
        wei = t ? gr_mm_md(u, f, 1, u, bf) : gr_mm_md(u, f, f, 1, bf);
        break;
    default: /* dy^T [U, n] . x [n, F]  (t: x^T [F, n] . dy [n, U], dW [F, U]) */
        if (t) src = gr_mm_md(f, n, 1, f, bf), wei = gr_mm_md(n, u, u, 1, bf), dst = gr_mm_md(f, u, u, 1, dnnl_f32);
        else src = gr_mm_md(u, n, 1, u, bf), wei = gr_mm_md(n, f, f, 1, bf), dst = gr_mm_md(u, f, f, 1, dnnl_f32);
        break;
    }
    dnnl_matmul_desc_t md;
    GR_DNNL_CHECK(dnnl_matmul_desc_init(&md, &src, &wei, e->bias ? &bia : NULL, &dst));
    dnnl_primitive_attr_t attr;
    GR_DNNL_CHECK(dnnl_primitive_attr_create(&attr));
    if (e->dir == GR_MM_BWD_W && e->acc) gr_dnnl_attr_sum(attr); /* dW += : the grads arena accumulates */
    dnnl_primitive_desc_t pd;
    GR_DNNL_CHECK(dnnl_primitive_desc_create(&pd, &md, attr, eng, NULL));
    GR_DNNL_CHECK(dnnl_primitive_create(&e->prim, pd));
    GR_DNNL_CHECK(dnnl_primitive_desc_destroy(pd));
    GR_DNNL_CHECK(dnnl_primitive_attr_destroy(attr));
    GR_DNNL_CHECK(dnnl_memory_create(&e->src, &src, eng, DNNL_MEMORY_NONE));
    GR_DNNL_CHECK(dnnl_memory_create(&e->wei, &wei, eng, DNNL_MEMORY_NONE));
    GR_DNNL_CHECK(dnnl_memory_create(&e->dst, &dst, eng, DNNL_MEMORY_NONE));
    if (e->bias) GR_DNNL_CHECK(dnnl_memory_create(&e->bia, &bia, eng, DNNL_MEMORY_NONE));
}

static void gr_mm_prim_free(gr_mm_prim *e) {
    dnnl_primitive_destroy(e->prim);
    dnnl_memory_destroy(e->src);
    dnnl_memory_destroy(e->wei);
    dnnl_memory_destroy(e->dst);
    if (e->bia) dnnl_memory_destroy(e->bia);
}

void gr_cpu_dense_onednn_free(gr_cpu *cpu) {
    struct gr_cpu_mm *m = cpu->mm;
    if (!m) return;
    for (int i = 0; i < m->cached; i++) gr_mm_prim_free(&m->cache[i]);
    free(m->buf);
    free(m);
    cpu->mm = NULL;
}

static gr_mm_prim *gr_mm_get_acc(gr_cpu *cpu, gr_mm_dir dir, int64_t n, int64_t u, int64_t f, bool bias, bool wt,
                                 gr_elem in, gr_elem out, bool acc) {
    if (!cpu->mm) cpu->mm = gr_xcalloc(1, sizeof *cpu->mm);
    struct gr_cpu_mm *m = cpu->mm;
    for (int i = 0; i < m->cached; i++) {
        gr_mm_prim *e = &m->cache[i];
        if (e->dir == dir && e->n == n && e->u == u && e->f == f && e->bias == bias && e->wt == wt && e->in == in &&
            e->out == out && e->acc == acc)
            return e;
    }
    if (m->cached == GR_MM_CACHE_MAX) { /* odd eval batches churn: drop the older half */
        int half = GR_MM_CACHE_MAX / 2;
        for (int i = 0; i < half; i++) gr_mm_prim_free(&m->cache[i]);
        memmove(m->cache, m->cache + half, (size_t)half * sizeof m->cache[0]);
        m->cached = half;
    }
    gr_mm_prim *e = &m->cache[m->cached++];
    *e = (gr_mm_prim){.dir = dir, .n = n, .u = u, .f = f, .bias = bias, .wt = wt, .in = in, .out = out, .acc = acc};
    gr_mm_make(cpu, e);
    return e;
}

/* the cached primitive; backward W adds into dW */
static gr_mm_prim *gr_mm_get(gr_cpu *cpu, gr_mm_dir dir, int64_t n, int64_t u, int64_t f, bool bias, bool wt,
                             gr_elem in, gr_elem out) {
    return gr_mm_get_acc(cpu, dir, n, u, f, bias, wt, in, out, dir == GR_MM_BWD_W);
}

/* cpu's bf16 scratch with room for n values */
static uint16_t *gr_mm_buf(gr_cpu *cpu, size_t n) {
    struct gr_cpu_mm *m = cpu->mm;
    if (n > m->cap) {
        free(m->buf);
        m->buf = gr_xmalloc(n * sizeof *m->buf);
        m->cap = n;
    }
    return m->buf;
}

/* encode n fp32 values into dst (over the threads) */
static void gr_mm_encode(const float *src, uint16_t *dst, int64_t n) {
    #pragma omp parallel for if (n >= GR_OMP_MIN)
    for (int64_t i = 0; i < n; i += GR_HIO_CHUNK) gr_hio_encode_bf16(src + i, dst + i, GR_MIN(GR_HIO_CHUNK, n - i));
}

/* the operands in bf16: w (fp32, n_w values) always copied; a (n_a values)
 * copied after it when stored in fp32 */
static void gr_mm_operands(gr_cpu *cpu, const float *w, int64_t n_w, const void *a, gr_elem ea, int64_t n_a,
                           const void **wb, const void **ab) {
    uint16_t *buf = gr_mm_buf(cpu, (size_t)(n_w + (ea == GR_F32 ? n_a : 0)));
    if (w) gr_mm_encode(w, buf, n_w);
    *wb = buf;
    *ab = a;
    if (ea == GR_F32) {
        gr_mm_encode(a, buf + n_w, n_a);
        *ab = buf + n_w;
    }
}

static void gr_mm_run(gr_cpu *cpu, gr_mm_prim *e, const void *src, const void *wei, const float *bias, void *dst) {
    dnnl_engine_t eng;
    dnnl_stream_t stream;
    gr_cpu_onednn_handles(cpu, &eng, &stream);
    GR_DNNL_CHECK(dnnl_memory_set_data_handle(e->src, (void *)src));
    GR_DNNL_CHECK(dnnl_memory_set_data_handle(e->wei, (void *)wei));
    GR_DNNL_CHECK(dnnl_memory_set_data_handle(e->dst, dst));
    dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, e->src}, {DNNL_ARG_WEIGHTS, e->wei}, {DNNL_ARG_DST, e->dst}};
    int nargs = 3;
    if (e->bias) {
        GR_DNNL_CHECK(dnnl_memory_set_data_handle(e->bia, (void *)bias));
        args[nargs++] = (dnnl_exec_arg_t){DNNL_ARG_BIAS, e->bia};
    }
    const int saved = gr_cpu_gemm_threads_begin(2.0 * (double)e->n * (double)e->u * (double)e->f);
    GR_DNNL_CHECK(dnnl_primitive_execute(e->prim, stream, nargs, args));
    GR_DNNL_CHECK(dnnl_stream_wait(stream));
    gr_cpu_gemm_threads_end(saved);
}

void gr_cpu_mm_bf16_fwd(gr_cpu *cpu, int64_t n, int64_t u, int64_t f, bool wt, const void *x, gr_elem ex,
                        const float *w, const float *b, void *y, gr_elem ey) {
    gr_mm_prim *e = gr_mm_get(cpu, GR_MM_FWD, n, u, f, b != NULL, wt, GR_BF16, ey);
    const void *wb, *xb;
    gr_mm_operands(cpu, w, u * f, x, ex, n * f, &wb, &xb);
    gr_mm_run(cpu, e, xb, wb, b, y);
}

void gr_cpu_mm_bf16_bwd_data(gr_cpu *cpu, int64_t n, int64_t u, int64_t f, bool wt, const void *dy, gr_elem edy,
                             const float *w, void *dx, gr_elem edx) {
    gr_mm_prim *e = gr_mm_get(cpu, GR_MM_BWD_DATA, n, u, f, false, wt, GR_BF16, edx);
    const void *wb, *dyb;
    gr_mm_operands(cpu, w, u * f, dy, edy, n * u, &wb, &dyb);
    gr_mm_run(cpu, e, dyb, wb, NULL, dx);
}

void gr_cpu_mm_bf16_bwd_w(gr_cpu *cpu, int64_t n, int64_t u, int64_t f, bool wt, const uint16_t *dy, const void *x,
                          gr_elem ex, float *dw, bool acc) {
    gr_mm_prim *e = gr_mm_get_acc(cpu, GR_MM_BWD_W, n, u, f, false, wt, GR_BF16, GR_F32, acc);
    const void *none, *xb;
    gr_mm_operands(cpu, NULL, 0, x, ex, n * f, &none, &xb);
    if (wt) gr_mm_run(cpu, e, xb, dy, NULL, dw); /* x^T . dy */
    else gr_mm_run(cpu, e, dy, xb, NULL, dw);
}

void gr_cpu_dense_bf16(const gr_kargs *a) {
    const bool t = a->node->attrs.weight_t;
    const int64_t f = a->tin[1]->shape[t ? 0 : 1], u = a->tin[1]->shape[t ? 1 : 0];
    gr_cpu_mm_bf16_fwd(gr_cpu_of(a), gr_kargs_rows(a), u, f, t, a->in[0], a->ein[0], a->in[1],
                       a->node->nin > 2 ? a->in[2] : NULL, a->out[0], a->eout[0]);
}

void gr_cpu_dense_bf16_bwd_data(const gr_kargs *a) {
    const bool t = a->node->attrs.weight_t;
    const int64_t f = a->tin[1]->shape[t ? 0 : 1], u = a->tin[1]->shape[t ? 1 : 0];
    gr_cpu_mm_bf16_bwd_data(gr_cpu_of(a), gr_kargs_rows(a), u, f, t, a->in[0], a->ein[0], a->in[1], a->out[0],
                            a->eout[0]);
}

void gr_cpu_dense_bf16_bwd_params(const gr_kargs *a) {
    const bool t = a->node->attrs.weight_t;
    const int64_t n = gr_kargs_rows(a), f = a->tout[0]->shape[t ? 0 : 1], u = a->tout[0]->shape[t ? 1 : 0];
    /* dy: bf16 (an fp32 dy is the loss's: not this path); x: bf16 or the fp32 batch */
    GR_ASSERT(a->ein[0] == GR_BF16);
    gr_cpu_mm_bf16_bwd_w(gr_cpu_of(a), n, u, f, t, a->in[0], a->in[1], a->ein[1], a->out[0], true);
    float *db = a->node->nout > 1 ? a->out[1] : NULL;
    if (!db) return;
    const uint16_t *dy = a->in[0];
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < u; j++) db[j] += gr_bf16_decode_hd(dy[i * u + j]);
}

/* The fp32 forward, y = x W^T + b, on a matmul primitive (oneDNN's brgemm
 * kernels) rather than dnnl_sgemm: at GPT-2's shapes (n = 256 rows) it was
 * as fast or faster for x W^T, 9.0 -> 5.7 ms at F = 3072, U = 768 on 2
 * AVX-512 cores, while dnnl_sgemm stayed ahead on the backward's products
 * (dy W, dy^T x), which keep it (dense.c). The bias is the primitive's. */
void gr_cpu_dense_f32_onednn(const gr_kargs *a) {
    gr_cpu *cpu = gr_cpu_of(a);
    const bool t = a->node->attrs.weight_t;
    const int64_t n = gr_kargs_rows(a), f = a->tin[1]->shape[t ? 0 : 1], u = a->tin[1]->shape[t ? 1 : 0];
    const float *b = a->node->nin > 2 ? a->in[2] : NULL;
    gr_mm_prim *e = gr_mm_get(cpu, GR_MM_FWD, n, u, f, b != NULL, t, GR_F32, GR_F32);
    gr_mm_run(cpu, e, a->in[0], a->in[1], b, a->out[0]);
}
