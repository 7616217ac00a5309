/* op_dense.c — dense and its backward on cuBLAS. The arrays are row-major
 * (x [n, F], W [U, F], y [n, U]); cuBLAS is column-major, so each product is
 * issued on the transposes: a row-major [r, c] array is a column-major
 * [c, r] one with leading dimension c.
 *
 * Precision: fp32 computes in strict fp32 (CUBLAS_COMPUTE_32F); tf32 lets
 * cuBLAS use TF32 tensor cores (CUBLAS_COMPUTE_32F_FAST_TF32), as PyTorch's
 * allow_tf32. A native half step (bf16/fp16 activations) multiplies half
 * operands on the tensor cores with fp32 accumulation (CUBLAS_COMPUTE_32F):
 * y and dx are written in half, dW is accumulated in fp32 straight from the
 * half x and dy (cuBLAS takes half A and B with an fp32 C). The bias is a
 * separate pass (cu_spatial.h).
 *
 * A transposed tied use (node attrs.weight_t, graph/op_dense.c) stores W
 * [F, U]: y = x W, dx = dy W^T, dW [F, U] += x^T dy, the same products with
 * the other transposes and leading dimensions. */
#include "cu_spatial.h"
#include "cuda_backend.h"

static cudaDataType_t gr_cuda_dtype(gr_elem e) {
    return e == GR_BF16 ? CUDA_R_16BF : e == GR_F16 ? CUDA_R_16F : CUDA_R_32F;
}

/* c = a * b (+ c when beta is 1) with a and b stored as ab, c as ce */
static void gr_cuda_gemm(gr_cuda *cu, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                         const void *a, int lda, const void *b, int ldb, gr_elem ab, float beta, void *c, gr_elem ce,
                         int ldc) {
    const float alpha = 1.0f;
    /* fp16/bf16 staged (fp32 copies of half values) compute like tf32: their inputs carry no more bits than
     * TF32 keeps; native half operands go to the tensor cores as they are */
    cublasComputeType_t ct = cu->opts.precision == GR_PREC_FP32 || ab != GR_F32 ? CUBLAS_COMPUTE_32F
                                                                                : CUBLAS_COMPUTE_32F_FAST_TF32;
    GR_CUBLAS(gr_cublas.GemmEx(cu->blas, ta, tb, m, n, k, &alpha, a, gr_cuda_dtype(ab), lda, b, gr_cuda_dtype(ab),
                               ldb, &beta, c, gr_cuda_dtype(ce), ldc, ct, CUBLAS_GEMM_DEFAULT));
}

/* y = x W^T + b:  column-major y^T [U, n] = op_T(W as [F, U]) * (x as [F, n]) */
void gr_cuda_dense(const gr_kargs *a) {
    gr_cuda *cu = gr_cuda_of(a);
    const bool t = a->node->attrs.weight_t; /* t: W as [U, F] is op_N, ld U */
    int n = (int)gr_kargs_rows(a), fin = (int)a->tin[1]->shape[t ? 0 : 1], units = (int)a->tin[1]->shape[t ? 1 : 0];
    gr_elem e = gr_cuda_act_elem(a);
    const void *w = gr_cuda_weight_as(cu, a->in[1], gr_tensor_numel(a->tin[1]), e);
    gr_cuda_gemm(cu, t ? CUBLAS_OP_N : CUBLAS_OP_T, CUBLAS_OP_N, units, n, fin, w, t ? units : fin, a->in[0], fin, e,
                 0.0f, a->out[0], e, units);
    if (a->node->nin > 2) gr_cu_bias_add(cu->stream, (int)e, a->out[0], a->in[2], n, units, 1);
}

/* dx = dy W:  column-major dx^T [F, n] = (W as [F, U]) * (dy as [U, n]) */
void gr_cuda_dense_bwd_data(const gr_kargs *a) {
    gr_cuda *cu = gr_cuda_of(a);
    const bool t = a->node->attrs.weight_t; /* t: op_T(W as [U, F]), ld U */
    int n = (int)gr_kargs_rows(a), fin = (int)a->tin[1]->shape[t ? 0 : 1], units = (int)a->tin[1]->shape[t ? 1 : 0];
    gr_elem e = gr_cuda_act_elem(a);
    const void *w = gr_cuda_weight_as(cu, a->in[1], gr_tensor_numel(a->tin[1]), e);
    gr_cuda_gemm(cu, t ? CUBLAS_OP_T : CUBLAS_OP_N, CUBLAS_OP_N, fin, n, units, w, t ? units : fin, a->in[0], units, e,
                 0.0f, a->out[0], e, fin);
}

/* dW += dy^T x:  column-major dW^T [F, U] += (x as [F, n]) * op_T(dy as [U, n]);  db += column sums of dy */
void gr_cuda_dense_bwd_params(const gr_kargs *a) {
    gr_cuda *cu = gr_cuda_of(a);
    const bool t = a->node->attrs.weight_t;
    int n = (int)gr_kargs_rows(a), fin = (int)a->tout[0]->shape[t ? 0 : 1], units = (int)a->tout[0]->shape[t ? 1 : 0];
    gr_elem e = gr_cuda_act_elem(a);
    if (t) /* column-major dW^T [U, F] += (dy as [U, n]) * op_T(x as [F, n]) */
        gr_cuda_gemm(cu, CUBLAS_OP_N, CUBLAS_OP_T, units, fin, n, a->in[0], units, a->in[1], fin, e, 1.0f, a->out[0],
                     GR_F32, units);
    else
        gr_cuda_gemm(cu, CUBLAS_OP_N, CUBLAS_OP_T, fin, units, n, a->in[1], fin, a->in[0], units, e, 1.0f, a->out[0],
                     GR_F32, fin);
    if (a->node->nout > 1) gr_cu_bias_grad(cu->stream, (int)e, a->in[0], a->out[1], n, units, 1);
}
