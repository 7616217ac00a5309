/* op_shape.c — the CUDA backend's shape ops and broadcasting: reshape (a
 * view), permute, slice, mul, and the backward reductions over broadcast
 * axes (add_bwd_reduce, mul_bwd); the broadcast add is gr_cuda_add's other
 * path (op_elem.c). Each reads its shapes from its kargs
 * (kernels/shape_args.h) and launches a shape.cu kernel, or elem.cu's row
 * cut for slice, on the compute stream. */
#include "../shape_args.h"
#include "cu_elem.h"
#include "cu_shape.h"
#include "cuda_backend.h"

static cudaStream_t gr_stream(const gr_kargs *a) { return gr_cuda_of(a)->stream; }

/* ---- views: the plan gives the output its input's storage ---- */

void gr_cuda_reshape(const gr_kargs *a) { (void)a; }
void gr_cuda_reshape_bwd(const gr_kargs *a) { (void)a; }

/* ---- permute, and its backward: the inverse order ---- */

static void gr_cuda_permute_run(const gr_kargs *a) {
    gr_permute_in p;
    gr_shape_permute_args(a, &p);
    gr_cu_permute(gr_stream(a), &p, a->in[0], a->out[0], gr_kargs_numel(a, a->tout[0]));
}

void gr_cuda_permute(const gr_kargs *a) { gr_cuda_permute_run(a); }
void gr_cuda_permute_bwd(const gr_kargs *a) { gr_cuda_permute_run(a); }

/* ---- slice: each row's part along the axis; backward into a zeroed row ---- */

void gr_cuda_slice(const gr_kargs *a) {
    int64_t outer, inner;
    const int64_t axis = a->node->attrs.axis;
    gr_shape_rows(a, a->tin[0], axis, &outer, &inner);
    gr_cu_concat_bwd(gr_stream(a), a->in[0], a->out[0], outer, a->tin[0]->shape[axis] * inner,
                     a->tout[0]->shape[axis] * inner, a->node->attrs.start * inner);
}

void gr_cuda_slice_bwd(const gr_kargs *a) {
    int64_t outer, inner;
    const int64_t axis = a->node->attrs.axis;
    gr_shape_rows(a, a->tout[0], axis, &outer, &inner);
    gr_cu_slice_bwd(gr_stream(a), a->in[0], a->out[0], outer, a->tout[0]->shape[axis] * inner,
                    a->tin[0]->shape[axis] * inner, a->node->attrs.offset * inner);
}

/* ---- mul, and the reductions of broadcast gradients ---- */

void gr_cuda_mul(const gr_kargs *a) {
    gr_bcast_in b;
    gr_shape_bcast_args(a, 1, GR_BODY_F32, &b);
    gr_cu_bcast(gr_stream(a), &b, a->out[0], gr_kargs_numel(a, a->tout[0]));
}

static void gr_cuda_reduce(const gr_kargs *a) {
    gr_reduce_in r;
    gr_shape_reduce_args(a, &r);
    gr_cu_reduce(gr_stream(a), &r, a->out[0], gr_kargs_numel(a, a->tout[0]));
}

void gr_cuda_mul_bwd(const gr_kargs *a) { gr_cuda_reduce(a); }
void gr_cuda_add_bwd_reduce(const gr_kargs *a) { gr_cuda_reduce(a); }
