/* op_dense.c — dense and its backward on cuBLAS. The arrays are row-major
 * (x [n, F], W [U, F], y [n, U]); cuBLAS is column-major, so each product is
 * issued on the transposes: a row-major [r, c] array is a column-major
 * [c, r] one with leading dimension c.
 *
 * Precision: fp32 computes in strict fp32 (CUBLAS_COMPUTE_32F); tf32 lets
 * cuBLAS use TF32 tensor cores (CUBLAS_COMPUTE_32F_FAST_TF32), as PyTorch's
 * allow_tf32. The bias is a separate pass (cu_spatial.h). */
#include "cu_spatial.h"
#include "cuda_backend.h"

static void gr_cuda_sgemm(gr_cuda *cu, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                          const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc) {
    const float alpha = 1.0f;
    /* fp16/bf16 (half storage, emulated) compute like tf32: their inputs carry no more bits than TF32 keeps */
    cublasComputeType_t ct = cu->opts.precision == GR_PREC_FP32 ? CUBLAS_COMPUTE_32F : CUBLAS_COMPUTE_32F_FAST_TF32;
    GR_CUBLAS(cublasGemmEx(cu->blas, ta, tb, m, n, k, &alpha, a, CUDA_R_32F, lda, b, CUDA_R_32F, ldb, &beta, c,
                           CUDA_R_32F, ldc, ct, CUBLAS_GEMM_DEFAULT));
}

/* y = x W^T + b:  column-major y^T [U, n] = op_T(W as [F, U]) * (x as [F, n]) */
void gr_cuda_dense(const gr_kargs *a) {
    gr_cuda *cu = gr_cuda_of(a);
    int n = (int)a->n, fin = (int)a->tin[1]->shape[1], units = (int)a->tin[1]->shape[0];
    gr_cuda_sgemm(cu, CUBLAS_OP_T, CUBLAS_OP_N, units, n, fin, a->in[1], fin, a->in[0], fin, 0.0f, a->out[0], units);
    if (a->node->nin > 2) gr_cu_bias_add(cu->stream, a->out[0], a->in[2], n, units, 1);
}

/* dx = dy W:  column-major dx^T [F, n] = (W as [F, U]) * (dy as [U, n]) */
void gr_cuda_dense_bwd_data(const gr_kargs *a) {
    gr_cuda *cu = gr_cuda_of(a);
    int n = (int)a->n, fin = (int)a->tin[1]->shape[1], units = (int)a->tin[1]->shape[0];
    gr_cuda_sgemm(cu, CUBLAS_OP_N, CUBLAS_OP_N, fin, n, units, a->in[1], fin, a->in[0], units, 0.0f, a->out[0], fin);
}

/* dW += dy^T x:  column-major dW^T [F, U] += (x as [F, n]) * op_T(dy as [U, n]);  db += column sums of dy */
void gr_cuda_dense_bwd_params(const gr_kargs *a) {
    gr_cuda *cu = gr_cuda_of(a);
    int n = (int)a->n, fin = (int)a->tout[0]->shape[1], units = (int)a->tout[0]->shape[0];
    gr_cuda_sgemm(cu, CUBLAS_OP_N, CUBLAS_OP_T, fin, units, n, a->in[1], fin, a->in[0], units, 1.0f, a->out[0], fin);
    if (a->node->nout > 1) gr_cu_bias_grad(cu->stream, a->in[0], a->out[1], n, units, 1);
}
