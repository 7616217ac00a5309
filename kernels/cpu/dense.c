/* dense.c — CPU kernels of dense and its backward, on the backend's sgemm
 * (gemm.h; the provider is the backend's, cpu.h), or through oneDNN matmul
 * primitives (dense_onednn.c) on bf16 activations and for the fp32 forward
 * under the oneDNN provider. Row-major: x [n, F], W [U, F],
 * y [n, U]; a transposed tied use (node attrs.weight_t) stores W [F, U] and
 * multiplies by it as it is where the others take W^T (graph/op_dense.c). */
#include "cpu.h"
#include "cpu_kernels.h"
#include "half_io.h"

/* A fused relu (attrs.relu, graph/fuse.c) on y in place, by rows over the threads while the GEMM's
 * output is in cache: the relu kernel's rule (act.c, half_io.c) on each stored value, so the same bits. */
GR_ISA_CLONES static void gr_dense_relu_rows_f32(float *restrict y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = y[i] <= 0.0f ? 0.0f : y[i];
}

GR_ISA_CLONES static void gr_dense_relu_rows_bf16(uint16_t *restrict y, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        const float v = gr_bf16_decode_hd(y[i]);
        y[i] = gr_bf16_encode_hd(v <= 0.0f ? 0.0f : v);
    }
}

static void gr_dense_relu_after(const gr_kargs *a) {
    if (!a->node->attrs.relu) return;
    const int64_t n = gr_kargs_numel(a, a->tout[0]);
    const bool h = a->eout[0] == GR_BF16;
    #pragma omp parallel for schedule(static) if (n >= GR_OMP_MIN)
    for (int64_t i = 0; i < n; i += GR_HIO_CHUNK) {
        if (h) gr_dense_relu_rows_bf16((uint16_t *)a->out[0] + i, GR_MIN(GR_HIO_CHUNK, n - i));
        else gr_dense_relu_rows_f32((float *)a->out[0] + i, GR_MIN(GR_HIO_CHUNK, n - i));
    }
}

/* A relu's backward folded into dense_bwd_data (attrs.relu, graph/fuse.c): dx masked in place by the
 * relu's output y (in[2]) by rows over the threads while the GEMM's output is in cache: relu_bwd's
 * rule on each stored value (act.c, half_io.c: 0 where y <= 0, dy elsewhere, NaN included), so the
 * same bits. */
GR_ISA_CLONES static void gr_dense_mask_rows_f32(float *restrict dx, const float *restrict y, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        const float g = dx[i];
        dx[i] = y[i] <= 0.0f ? 0.0f : g;
    }
}

GR_ISA_CLONES static void gr_dense_mask_rows_bf16(uint16_t *restrict dx, const uint16_t *restrict y, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        const float g = gr_bf16_decode_hd(dx[i]);
        dx[i] = gr_bf16_encode_hd(gr_bf16_decode_hd(y[i]) <= 0.0f ? 0.0f : g);
    }
}

static void gr_dense_mask_after(const gr_kargs *a) {
    if (!a->node->attrs.relu) return;
    const int64_t n = gr_kargs_numel(a, a->tout[0]);
    const bool h = a->eout[0] == GR_BF16;
    GR_ASSERT(a->node->nin == 3 && a->ein[2] == a->eout[0]);
    #pragma omp parallel for schedule(static) if (n >= GR_OMP_MIN)
    for (int64_t i = 0; i < n; i += GR_HIO_CHUNK) {
        const int64_t len = GR_MIN(GR_HIO_CHUNK, n - i);
        if (h) gr_dense_mask_rows_bf16((uint16_t *)a->out[0] + i, (const uint16_t *)a->in[2] + i, len);
        else gr_dense_mask_rows_f32((float *)a->out[0] + i, (const float *)a->in[2] + i, len);
    }
}

static void gr_dense_gemm(const gr_kargs *a);

/* y = x W^T + b, relu'd when a relu is fused after it */
void gr_cpu_dense(const gr_kargs *a) {
    gr_dense_gemm(a);
    gr_dense_relu_after(a);
}

static void gr_dense_gemm(const gr_kargs *a) {
    if (a->ein[0] == GR_BF16 || a->eout[0] == GR_BF16) {
        gr_cpu_dense_bf16(a);
        return;
    }
    if (gr_cpu_of(a)->gemm == GR_GEMM_ONEDNN) {
        gr_cpu_dense_f32_onednn(a);
        return;
    }
    const float *x = a->in[0], *w = a->in[1], *b = a->node->nin > 2 ? a->in[2] : NULL;
    float *y = a->out[0];
    const bool t = a->node->attrs.weight_t;
    int n = (int)gr_kargs_rows(a), fin = (int)a->tin[1]->shape[t ? 0 : 1], units = (int)a->tin[1]->shape[t ? 1 : 0];
    float beta = 0.0f;
    if (b) {
        for (int i = 0; i < n; i++)
            for (int j = 0; j < units; j++) y[(int64_t)i * units + j] = b[j];
        beta = 1.0f;
    }
    if (t) gr_cpu_sgemm(gr_cpu_of(a), false, false, n, units, fin, 1.0f, x, fin, w, units, beta, y, units);
    else gr_cpu_sgemm(gr_cpu_of(a), false, true, n, units, fin, 1.0f, x, fin, w, fin, beta, y, units);
}

static void gr_dense_bwd_data_gemm(const gr_kargs *a);

/* dx = dy W  (weight_t: dy W^T), masked by a relu's output when its backward is folded in */
void gr_cpu_dense_bwd_data(const gr_kargs *a) {
    gr_dense_bwd_data_gemm(a);
    gr_dense_mask_after(a);
}

static void gr_dense_bwd_data_gemm(const gr_kargs *a) {
    if (a->ein[0] == GR_BF16 || a->eout[0] == GR_BF16) {
        gr_cpu_dense_bf16_bwd_data(a);
        return;
    }
    const float *dy = a->in[0], *w = a->in[1];
    float *dx = a->out[0];
    const bool t = a->node->attrs.weight_t;
    int n = (int)gr_kargs_rows(a), fin = (int)a->tin[1]->shape[t ? 0 : 1], units = (int)a->tin[1]->shape[t ? 1 : 0];
    if (t) gr_cpu_sgemm(gr_cpu_of(a), false, true, n, fin, units, 1.0f, dy, units, w, units, 0.0f, dx, fin);
    else gr_cpu_sgemm(gr_cpu_of(a), false, false, n, fin, units, 1.0f, dy, units, w, fin, 0.0f, dx, fin);
}

/* db += the sum over the n rows of dy [n, units], in row order for each
 * column: columns in blocks over the threads, each block's loop vectorized
 * (the same bits as one thread's) */
GR_ISA_CLONES static void gr_dense_bias_block(const float *restrict dy, float *restrict db, int64_t n, int64_t units,
                                              int64_t j0, int64_t nj) {
    for (int64_t i = 0; i < n; i++) {
        const float *row = dy + i * units + j0;
        #pragma omp simd
        for (int64_t j = 0; j < nj; j++) db[j0 + j] += row[j];
    }
}

static void gr_dense_bias_grad(const float *dy, float *db, int64_t n, int64_t units) {
    enum { BLOCK = 256 };
    #pragma omp parallel for schedule(static) if (n * units >= GR_OMP_MIN)
    for (int64_t j0 = 0; j0 < units; j0 += BLOCK) gr_dense_bias_block(dy, db, n, units, j0, GR_MIN(BLOCK, units - j0));
}

/* dW += dy^T x  (weight_t: x^T dy);  db += sum over the batch of dy */
void gr_cpu_dense_bwd_params(const gr_kargs *a) {
    if (a->ein[0] == GR_BF16) {
        gr_cpu_dense_bf16_bwd_params(a);
        return;
    }
    const float *dy = a->in[0], *x = a->in[1];
    float *dw = a->out[0], *db = a->node->nout > 1 ? a->out[1] : NULL;
    const bool t = a->node->attrs.weight_t;
    int n = (int)gr_kargs_rows(a), fin = (int)a->tout[0]->shape[t ? 0 : 1], units = (int)a->tout[0]->shape[t ? 1 : 0];
    if (t) gr_cpu_sgemm(gr_cpu_of(a), true, false, fin, units, n, 1.0f, x, fin, dy, units, 1.0f, dw, units);
    else gr_cpu_sgemm(gr_cpu_of(a), true, false, units, fin, n, 1.0f, dy, units, x, fin, 1.0f, dw, fin);
    if (db) gr_dense_bias_grad(dy, db, n, units);
}
