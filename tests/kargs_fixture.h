/* kargs_fixture.h — hand-built kernel arguments for calling a CPU kernel
 * directly, with no graph and no plan: one node, its input and output
 * tensors and the run's context, on a CPU backend the test made (the
 * kernels take their state, GEMM provider and conv scratch, from it).
 * Shared by tests/test_nan.c and tests/ops/body_check.h. */
#ifndef GR_TEST_KARGS_FIXTURE_H
#define GR_TEST_KARGS_FIXTURE_H

#include <string.h>

#include "kernels/backend.h"

typedef struct kt {
    gr_tensor tin[GR_MAX_IN], tout[GR_MAX_OUT];
    gr_node node;
    gr_exec_ctx ctx;
    gr_kargs a;
} kt;

/* An activation tensor of element type e; shape[0] is the batch when batched. */
static inline void kt_tensor_of(gr_tensor *t, gr_elem e, bool batched, int ndim, const int64_t *shape) {
    memset(t, 0, sizeof *t);
    t->kind = GR_TK_ACT;
    t->elem = e;
    t->batched = batched;
    t->ndim = ndim;
    for (int d = 0; d < ndim; d++) t->shape[d] = shape[d];
    t->alias_of = t->grad = t->layer = -1;
}

/* The arguments of op with nin inputs and nout outputs, run on n samples
 * on be, gradient scale 1; the tensors are set with kt_tensor_of. */
static inline void kt_setup(kt *k, gr_backend *be, gr_op op, int nin, int nout, int64_t n, bool training) {
    memset(k, 0, sizeof *k);
    k->node.op = op;
    k->node.nin = nin;
    k->node.nout = nout;
    k->node.fwd = -1;
    k->ctx.training = training;
    k->ctx.grad_scale = 1.0f;
    k->a.node = &k->node;
    k->a.n = n;
    k->a.ctx = &k->ctx;
    k->a.be = be;
    for (int i = 0; i < GR_MAX_IN; i++) k->a.tin[i] = &k->tin[i];
    for (int i = 0; i < GR_MAX_OUT; i++) k->a.tout[i] = &k->tout[i];
}

#endif
