/* cudnn_sdpa.c — attention on cuDNN's fused flash-attention engines, built
 * with the C backend API (cudnn_graph.h) as the operation graphs cuDNN's
 * frontend lowers its sdpa and sdpa_backward nodes to; cuDNN's runtime
 * recognizes these graphs and runs one fused kernel for each.
 *
 * Why these graphs and not CUDNN_BACKEND_OPERATION_SDPA_FWD/BWD_DESCRIPTOR:
 * in cuDNN 9.19 those ops take a block mask (SDPA_FWD_BLOCK_MASK_DESC)
 * but have no attribute for a causal mask, and causal is attention's
 * default; the composite graph says causal as the frontend does (row index
 * >= column index, else -inf) and runs on every cuDNN 9 on sm80 and newer.
 *
 * Layout: q, k and v are strided views of qkv [n, T, 3C] as
 * [n, heads, T, D] (strides T*3C, D, 3C, 1; k at +C, v at +2C columns), y
 * and dy of [n, T, C] (T*C, D, C, 1); dq, dk and dv go into dqkv's thirds
 * the same way. lse [n, heads, T] is the forward graph's softmax statistic,
 * max + log(sum of exp(s - max)) over the scaled, masked scores: the
 * log-sum-exp kernels/body_attn.h writes, so the forward and the backward
 * may each run either kernel. The backward graph also writes each row's
 * dy . y (cuDNN's softmax_sum) into delta, as the own kernel does, and
 * accumulates dq in fp32 in the workspace (after the plan's own part; set
 * to zero before each run, as cuDNN before 9.6 needs): its atomics make
 * dq, and so dk, dv, differ in the last bits from run to run, where the
 * own kernel repeats bit for bit.
 *
 * Plans are built for the micro-batch the arenas were planned for; a
 * smaller run (the last eval batch) runs the same plan: every sample's
 * rows are independent and each tensor's bytes hold the full micro-batch,
 * so the extra rows are computed into bytes nothing reads. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cudnn_sdpa.h"

#define GR_SDPA_DESCS 160  /* descriptors of one graph and its plan (the backward has about 110) */
#define GR_SDPA_CFGS 8     /* engine configurations tried per heuristics mode */
#define GR_SDPA_SAID 16

/* tensor ids of the variant pack; virtual tensors count from GR_UID_VIRT */
enum {
    GR_UID_Q = 1, GR_UID_K, GR_UID_V, GR_UID_O, GR_UID_STATS, GR_UID_DO, GR_UID_DQ, GR_UID_DK, GR_UID_DV,
    GR_UID_SUM, GR_UID_DQACC, GR_UID_SCALE = 20, GR_UID_NEG, GR_UID_ONE, GR_UID_VIRT = 100
};

typedef struct gr_sdpa_key {
    int32_t bwd, causal, dt;
    int64_t n, t, c, heads;
} gr_sdpa_key;

typedef struct gr_sdpa_entry {
    gr_sdpa_key k;
    bool ok;
    char why[320];
    cudnnBackendDescriptor_t desc[GR_SDPA_DESCS]; /* all of the graph's and the plan's, freed with the backend */
    int ndesc;
    cudnnBackendDescriptor_t plan;
    size_t dq_off, ws;         /* the fp32 dq accumulator's offset in cu->ws (backward), the bytes needed */
    float scale, one, neg;     /* by-value scalars: the variant pack points at them */
} gr_sdpa_entry;

struct gr_cuda_sdpas {
    gr_sdpa_entry **e;         /* pointers: an entry must not move (its scalars' addresses) */
    int n, cap;
    const char *said[GR_SDPA_SAID]; /* what gr_cuda_attn_say said: the reason, or the type's name */
    int n_said;
    char note[512];            /* the last note, for gr_cuda_attention_note */
};

static struct gr_cuda_sdpas *gr_sdpas(gr_cuda *cu) {
    if (!cu->sdpa) cu->sdpa = gr_xcalloc(1, sizeof *cu->sdpa);
    return cu->sdpa;
}

/* The one half type of the step's q/k/v, y, dy and dqkv (lse and delta are
 * fp32 scratch), from the tensors' storage: a staged step's kernel gets fp32
 * copies, but the key is its storage's. GR_F32 when one is fp32 or two types meet. */
static gr_elem gr_sdpa_elem(const gr_kargs *a) {
    const bool bwd = a->node->op == GR_OP_ATTENTION_BWD;
    const gr_tensor *t[4] = {a->tin[0], a->tout[0], bwd ? a->tin[1] : NULL, bwd ? a->tin[2] : NULL};
    const gr_elem e = t[0]->elem;
    for (int i = 0; i < 4; i++)
        if (t[i] && (t[i]->elem != e || !gr_elem_is_half(t[i]->elem))) return GR_F32;
    return e;
}

static gr_sdpa_key gr_sdpa_key_of(const gr_kargs *a) {
    gr_sdpa_key k;
    memset(&k, 0, sizeof k); /* compared with memcmp */
    k.bwd = a->node->op == GR_OP_ATTENTION_BWD;
    const gr_tensor *qkv = k.bwd ? a->tin[1] : a->tin[0];
    k.causal = a->node->attrs.causal;
    k.dt = (int32_t)gr_sdpa_elem(a);
    k.n = qkv->shape[0]; /* the planned micro-batch */
    k.t = qkv->shape[1];
    k.c = qkv->shape[2] / 3;
    k.heads = a->node->attrs.heads;
    return k;
}

static gr_sdpa_entry *gr_sdpa_lookup(gr_cuda *cu, const gr_sdpa_key *k) {
    struct gr_cuda_sdpas *s = gr_sdpas(cu);
    for (int i = 0; i < s->n; i++)
        if (memcmp(&s->e[i]->k, k, sizeof *k) == 0) return s->e[i];
    return NULL;
}

/* ---- building a graph: every call checked, the first failure kept ---- */

typedef struct gr_sdpa_b {
    gr_cuda *cu;
    gr_sdpa_entry *e;
    cudnnStatus_t st;          /* the first failure */
    char at[160];              /* what failed, as the reason's tail */
    int64_t uid;               /* the next virtual tensor's */
    cudnnBackendDescriptor_t ops[48];
    int64_t nops;
} gr_sdpa_b;

static bool sb_ok(gr_sdpa_b *b, cudnnStatus_t s, const char *call, const char *what) {
    if (s == CUDNN_STATUS_SUCCESS) return true;
    if (b->st == CUDNN_STATUS_SUCCESS) {
        b->st = s;
        snprintf(b->at, sizeof b->at, "%s from %s (%s)", cudnnGetErrorString(s), call, what);
    }
    return false;
}

static cudnnBackendDescriptor_t sb_new(gr_sdpa_b *b, cudnnBackendDescriptorType_t type, const char *what) {
    if (b->st != CUDNN_STATUS_SUCCESS) return NULL;
    GR_ASSERT(b->e->ndesc < GR_SDPA_DESCS);
    cudnnBackendDescriptor_t d = NULL;
    if (!sb_ok(b, cudnnBackendCreateDescriptor(type, &d), "cudnnBackendCreateDescriptor", what)) return NULL;
    b->e->desc[b->e->ndesc++] = d;
    return d;
}

static void sb_set(gr_sdpa_b *b, cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t attr,
                   cudnnBackendAttributeType_t type, int64_t count, const void *v, const char *what) {
    if (b->st != CUDNN_STATUS_SUCCESS) return;
    (void)sb_ok(b, cudnnBackendSetAttribute(d, attr, type, count, v), "cudnnBackendSetAttribute", what);
}

static void sb_fin(gr_sdpa_b *b, cudnnBackendDescriptor_t d, const char *what) {
    if (b->st != CUDNN_STATUS_SUCCESS) return;
    (void)sb_ok(b, cudnnBackendFinalize(d), "cudnnBackendFinalize", what);
}

/* A 4-D tensor: uid 0 makes it virtual (an intermediate the fused kernel
 * keeps on chip); by_value a host scalar the variant pack points at. */
static cudnnBackendDescriptor_t sb_tensor(gr_sdpa_b *b, int64_t uid, cudnnDataType_t dt, const int64_t dim[4],
                                          const int64_t str[4], bool by_value) {
    static const char w[] = "tensor";
    const bool virt = uid == 0, yes = true;
    const int64_t align = 16;
    if (virt) uid = b->uid++;
    cudnnBackendDescriptor_t d = sb_new(b, CUDNN_BACKEND_TENSOR_DESCRIPTOR, w);
    sb_set(b, d, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dt, w);
    sb_set(b, d, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dim, w);
    sb_set(b, d, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, str, w);
    sb_set(b, d, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid, w);
    sb_set(b, d, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align, w);
    if (virt) sb_set(b, d, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &yes, w);
    if (by_value) sb_set(b, d, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &yes, w);
    sb_fin(b, d, w);
    return d;
}

static cudnnBackendDescriptor_t sb_virt(gr_sdpa_b *b, cudnnDataType_t dt, const int64_t dim[4], const int64_t str[4]) {
    return sb_tensor(b, 0, dt, dim, str, false);
}

static cudnnBackendDescriptor_t sb_scalar(gr_sdpa_b *b, int64_t uid) {
    static const int64_t one[4] = {1, 1, 1, 1};
    return sb_tensor(b, uid, CUDNN_DATA_FLOAT, one, one, true);
}

static void sb_op(gr_sdpa_b *b, cudnnBackendDescriptor_t op) {
    if (b->st != CUDNN_STATUS_SUCCESS) return;
    GR_ASSERT(b->nops < (int64_t)GR_ARRAY_LEN(b->ops));
    b->ops[b->nops++] = op;
}

/* y = mode(x[, in1[, in2]]) computed in prec; axis for GEN_INDEX. Returns y. */
static cudnnBackendDescriptor_t sb_pw(gr_sdpa_b *b, cudnnPointwiseMode_t mode, cudnnDataType_t prec,
                                      cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t in1,
                                      cudnnBackendDescriptor_t in2, cudnnBackendDescriptor_t y, int64_t axis) {
    static const char w[] = "pointwise";
    const float alpha = 1.0f;
    cudnnBackendDescriptor_t pw = sb_new(b, CUDNN_BACKEND_POINTWISE_DESCRIPTOR, w);
    sb_set(b, pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode, w);
    sb_set(b, pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec, w);
    if (mode == CUDNN_POINTWISE_GEN_INDEX) sb_set(b, pw, CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, 1, &axis, w);
    sb_fin(b, pw, w);
    cudnnBackendDescriptor_t op = sb_new(b, CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, w);
    sb_set(b, op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &pw, w);
    sb_set(b, op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x, w);
    if (in1) sb_set(b, op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &in1, w);
    if (in2) sb_set(b, op, CUDNN_ATTR_OPERATION_POINTWISE_TDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &in2, w);
    sb_set(b, op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y, w);
    sb_set(b, op, CUDNN_ATTR_OPERATION_POINTWISE_ALPHA1, CUDNN_TYPE_FLOAT, 1, &alpha, w);
    sb_set(b, op, CUDNN_ATTR_OPERATION_POINTWISE_ALPHA2, CUDNN_TYPE_FLOAT, 1, &alpha, w);
    sb_fin(b, op, w);
    sb_op(b, op);
    return y;
}

/* The common fp32 forms: y = mode(x[, in1]). */
static cudnnBackendDescriptor_t sb_f(gr_sdpa_b *b, cudnnPointwiseMode_t mode, cudnnBackendDescriptor_t x,
                                     cudnnBackendDescriptor_t in1, cudnnBackendDescriptor_t y) {
    return sb_pw(b, mode, CUDNN_DATA_FLOAT, x, in1, NULL, y, 0);
}

static cudnnBackendDescriptor_t sb_reduce(gr_sdpa_b *b, cudnnReduceTensorOp_t how, cudnnBackendDescriptor_t x,
                                          cudnnBackendDescriptor_t y) {
    static const char w[] = "reduction";
    const cudnnDataType_t f = CUDNN_DATA_FLOAT;
    cudnnBackendDescriptor_t r = sb_new(b, CUDNN_BACKEND_REDUCTION_DESCRIPTOR, w);
    sb_set(b, r, CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &how, w);
    sb_set(b, r, CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &f, w);
    sb_fin(b, r, w);
    cudnnBackendDescriptor_t op = sb_new(b, CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR, w);
    sb_set(b, op, CUDNN_ATTR_OPERATION_REDUCTION_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x, w);
    sb_set(b, op, CUDNN_ATTR_OPERATION_REDUCTION_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y, w);
    sb_set(b, op, CUDNN_ATTR_OPERATION_REDUCTION_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &r, w);
    sb_fin(b, op, w);
    sb_op(b, op);
    return y;
}

/* c = a @ b over the last two axes, fp32 accumulation */
static cudnnBackendDescriptor_t sb_matmul(gr_sdpa_b *b, cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t y,
                                          cudnnBackendDescriptor_t c) {
    static const char w[] = "matmul";
    const cudnnDataType_t f = CUDNN_DATA_FLOAT;
    cudnnBackendDescriptor_t mm = sb_new(b, CUDNN_BACKEND_MATMUL_DESCRIPTOR, w);
    sb_set(b, mm, CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &f, w);
    sb_fin(b, mm, w);
    cudnnBackendDescriptor_t op = sb_new(b, CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR, w);
    sb_set(b, op, CUDNN_ATTR_OPERATION_MATMUL_ADESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x, w);
    sb_set(b, op, CUDNN_ATTR_OPERATION_MATMUL_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y, w);
    sb_set(b, op, CUDNN_ATTR_OPERATION_MATMUL_CDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &c, w);
    sb_set(b, op, CUDNN_ATTR_OPERATION_MATMUL_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &mm, w);
    sb_fin(b, op, w);
    sb_op(b, op);
    return c;
}

/* y: x's elements seen with other dims and strides (a transpose) */
static cudnnBackendDescriptor_t sb_reshape(gr_sdpa_b *b, cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t y) {
    static const char w[] = "reshape";
    cudnnBackendDescriptor_t op = sb_new(b, CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR, w);
    sb_set(b, op, CUDNN_ATTR_OPERATION_RESHAPE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x, w);
    sb_set(b, op, CUDNN_ATTR_OPERATION_RESHAPE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y, w);
    sb_fin(b, op, w);
    sb_op(b, op);
    return y;
}

/* The shapes of one graph: [n, heads, T, D] views, scores [n, heads, T, T], rows [n, heads, T, 1]. */
typedef struct gr_sdpa_dims {
    int64_t qd[4], qs[4];      /* q, k, v (and dq, dk, dv) in qkv */
    int64_t kd[4], ks[4];      /* k (or v) transposed: [n, heads, D, T] */
    int64_t os[4];             /* y, dy in [n, T, C] (dims qd) */
    int64_t sd[4], ss[4], st[4]; /* scores, row-major and transposed */
    int64_t rd[4], rs[4];      /* per row: lse, delta */
    int64_t ad[4];             /* dq's fp32 accumulator, packed (dims qd) */
} gr_sdpa_dims;

static gr_sdpa_dims gr_sdpa_dims_of(const gr_sdpa_key *k) {
    const int64_t n = k->n, h = k->heads, t = k->t, c = k->c, d = c / h;
    gr_sdpa_dims m = {
        {n, h, t, d}, {t * 3 * c, d, 3 * c, 1},
        {n, h, d, t}, {t * 3 * c, d, 1, 3 * c},
        {t * c, d, c, 1},
        {n, h, t, t}, {h * t * t, t * t, t, 1}, {h * t * t, t * t, 1, t},
        {n, h, t, 1}, {h * t, t, 1, 1},
        {h * t * d, t * d, d, 1},
    };
    return m;
}

/* The causal mask on scores s: kept where row >= column, else -inf. */
static cudnnBackendDescriptor_t sb_causal(gr_sdpa_b *b, const gr_sdpa_dims *m, cudnnBackendDescriptor_t s,
                                          cudnnBackendDescriptor_t neg) {
    cudnnBackendDescriptor_t row = sb_pw(b, CUDNN_POINTWISE_GEN_INDEX, CUDNN_DATA_FLOAT, s, NULL, NULL,
                                         sb_virt(b, CUDNN_DATA_INT32, m->sd, m->ss), 2);
    cudnnBackendDescriptor_t col = sb_pw(b, CUDNN_POINTWISE_GEN_INDEX, CUDNN_DATA_FLOAT, s, NULL, NULL,
                                         sb_virt(b, CUDNN_DATA_INT32, m->sd, m->ss), 3);
    cudnnBackendDescriptor_t keep = sb_pw(b, CUDNN_POINTWISE_CMP_GE, CUDNN_DATA_BOOLEAN, row, col, NULL,
                                          sb_virt(b, CUDNN_DATA_BOOLEAN, m->sd, m->ss), 0);
    return sb_pw(b, CUDNN_POINTWISE_BINARY_SELECT, CUDNN_DATA_FLOAT, s, neg, keep,
                 sb_virt(b, CUDNN_DATA_FLOAT, m->sd, m->ss), 0);
}

/* y, lse = attention(q, k, v): the frontend's sdpa with stats */
static void gr_sdpa_fwd_graph(gr_sdpa_b *b, cudnnDataType_t io, const gr_sdpa_dims *m, bool causal) {
    const cudnnDataType_t f = CUDNN_DATA_FLOAT;
    cudnnBackendDescriptor_t q = sb_tensor(b, GR_UID_Q, io, m->qd, m->qs, false);
    cudnnBackendDescriptor_t kt = sb_tensor(b, GR_UID_K, io, m->kd, m->ks, false);
    cudnnBackendDescriptor_t v = sb_tensor(b, GR_UID_V, io, m->qd, m->qs, false);
    cudnnBackendDescriptor_t o = sb_tensor(b, GR_UID_O, io, m->qd, m->os, false);
    cudnnBackendDescriptor_t lse = sb_tensor(b, GR_UID_STATS, f, m->rd, m->rs, false);
    cudnnBackendDescriptor_t s = sb_matmul(b, q, kt, sb_virt(b, f, m->sd, m->ss));
    s = sb_f(b, CUDNN_POINTWISE_MUL, s, sb_scalar(b, GR_UID_SCALE), sb_virt(b, f, m->sd, m->ss));
    if (causal) s = sb_causal(b, m, s, sb_scalar(b, GR_UID_NEG));
    cudnnBackendDescriptor_t mx = sb_reduce(b, CUDNN_REDUCE_TENSOR_MAX, s, sb_virt(b, f, m->rd, m->rs));
    cudnnBackendDescriptor_t e = sb_f(b, CUDNN_POINTWISE_SUB, s, mx, sb_virt(b, f, m->sd, m->ss));
    e = sb_f(b, CUDNN_POINTWISE_EXP, e, NULL, sb_virt(b, f, m->sd, m->ss));
    cudnnBackendDescriptor_t z = sb_reduce(b, CUDNN_REDUCE_TENSOR_ADD, e, sb_virt(b, f, m->rd, m->rs));
    cudnnBackendDescriptor_t lz = sb_f(b, CUDNN_POINTWISE_LOG, z, NULL, sb_virt(b, f, m->rd, m->rs));
    (void)sb_f(b, CUDNN_POINTWISE_ADD, mx, lz, lse);
    /* p in the inputs' type: the second matmul's A operand */
    cudnnBackendDescriptor_t p = sb_f(b, CUDNN_POINTWISE_DIV, e, z, sb_virt(b, io, m->sd, m->ss));
    (void)sb_matmul(b, p, v, o);
}

/* dq, dk, dv, delta from dy, q, k, v, y, lse: the frontend's sdpa_backward
 * (dq through an fp32 accumulator, the softmax_sum kept) */
static void gr_sdpa_bwd_graph(gr_sdpa_b *b, cudnnDataType_t io, const gr_sdpa_dims *m, bool causal) {
    const cudnnDataType_t f = CUDNN_DATA_FLOAT;
    /* dy * y before its row sum: the frontend's strides for this intermediate */
    const int64_t pd[4] = {m->qd[0], m->qd[1], m->qd[2], m->qd[3]};
    const int64_t ps[4] = {m->qd[1] * m->qd[2] * m->qd[3], m->qd[2] * m->qd[3], m->qd[1] * m->qd[3], 1};
    cudnnBackendDescriptor_t q = sb_tensor(b, GR_UID_Q, io, m->qd, m->qs, false);
    cudnnBackendDescriptor_t kt = sb_tensor(b, GR_UID_K, io, m->kd, m->ks, false);
    cudnnBackendDescriptor_t vt = sb_tensor(b, GR_UID_V, io, m->kd, m->ks, false);
    cudnnBackendDescriptor_t o = sb_tensor(b, GR_UID_O, io, m->qd, m->os, false);
    cudnnBackendDescriptor_t dout = sb_tensor(b, GR_UID_DO, io, m->qd, m->os, false);
    cudnnBackendDescriptor_t lse = sb_tensor(b, GR_UID_STATS, f, m->rd, m->rs, false);
    cudnnBackendDescriptor_t dq = sb_tensor(b, GR_UID_DQ, io, m->qd, m->qs, false);
    cudnnBackendDescriptor_t dk = sb_tensor(b, GR_UID_DK, io, m->qd, m->qs, false);
    cudnnBackendDescriptor_t dv = sb_tensor(b, GR_UID_DV, io, m->qd, m->qs, false);
    cudnnBackendDescriptor_t sum = sb_tensor(b, GR_UID_SUM, f, m->rd, m->rs, false);
    cudnnBackendDescriptor_t acc = sb_tensor(b, GR_UID_DQACC, f, m->qd, m->ad, false);
    cudnnBackendDescriptor_t scale = sb_scalar(b, GR_UID_SCALE);
    /* delta = sum(dy * y) over each row (times 1: the frontend's dropout scale) */
    cudnnBackendDescriptor_t x = sb_f(b, CUDNN_POINTWISE_MUL, dout, o, sb_virt(b, f, pd, ps));
    x = sb_reduce(b, CUDNN_REDUCE_TENSOR_ADD, x, sb_virt(b, f, m->rd, m->rs));
    (void)sb_f(b, CUDNN_POINTWISE_MUL, x, sb_scalar(b, GR_UID_ONE), sum);
    /* p = exp(s * scale - lse), masked */
    cudnnBackendDescriptor_t s = sb_matmul(b, q, kt, sb_virt(b, f, m->sd, m->ss));
    s = sb_f(b, CUDNN_POINTWISE_MUL, s, scale, sb_virt(b, f, m->sd, m->ss));
    s = sb_f(b, CUDNN_POINTWISE_SUB, s, lse, sb_virt(b, f, m->sd, m->ss));
    if (causal) s = sb_causal(b, m, s, sb_scalar(b, GR_UID_NEG));
    cudnnBackendDescriptor_t p = sb_f(b, CUDNN_POINTWISE_EXP, s, NULL, sb_virt(b, f, m->sd, m->ss));
    /* dv = p^T dy */
    (void)sb_matmul(b, sb_reshape(b, p, sb_virt(b, io, m->sd, m->st)), dout, dv);
    /* ds = p (dy v^T - delta) scale */
    cudnnBackendDescriptor_t ds = sb_matmul(b, dout, vt, sb_virt(b, f, m->sd, m->ss));
    ds = sb_f(b, CUDNN_POINTWISE_SUB, ds, sum, sb_virt(b, f, m->sd, m->ss));
    ds = sb_f(b, CUDNN_POINTWISE_MUL, ds, p, sb_virt(b, f, m->sd, m->ss));
    ds = sb_f(b, CUDNN_POINTWISE_MUL, ds, scale, sb_virt(b, f, m->sd, m->ss));
    /* dk = ds^T q; dq = ds k (k^T seen untransposed), through the accumulator */
    (void)sb_matmul(b, sb_reshape(b, ds, sb_virt(b, io, m->sd, m->st)), q, dk);
    cudnnBackendDescriptor_t k = sb_reshape(b, kt, sb_virt(b, io, m->qd, m->qs));
    (void)sb_matmul(b, ds, k, acc);
    (void)sb_f(b, CUDNN_POINTWISE_IDENTITY, acc, NULL, dq);
}

/* The operation graph, then the first engine configuration of cuDNN's
 * heuristics (mode A, then the fallback list) whose plan finalizes. */
static void gr_sdpa_plan(gr_sdpa_b *b) {
    static const char w[] = "operation graph";
    gr_sdpa_entry *e = b->e;
    cudnnBackendDescriptor_t g = sb_new(b, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, w);
    sb_set(b, g, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, b->nops, b->ops, w);
    sb_set(b, g, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &b->cu->dnn, w);
    sb_fin(b, g, w);
    static const cudnnBackendHeurMode_t modes[2] = {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK};
    int64_t offered = 0;
    for (int mi = 0; mi < 2 && b->st == CUDNN_STATUS_SUCCESS && !e->plan; mi++) {
        static const char hw[] = "engine heuristics";
        cudnnBackendDescriptor_t h = sb_new(b, CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, hw);
        sb_set(b, h, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &g, hw);
        sb_set(b, h, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &modes[mi], hw);
        sb_fin(b, h, hw);
        int64_t cnt = 0, got = 0;
        if (b->st != CUDNN_STATUS_SUCCESS ||
            !sb_ok(b, cudnnBackendGetAttribute(h, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0,
                                               &cnt, NULL), "cudnnBackendGetAttribute", hw))
            break;
        if (cnt > GR_SDPA_CFGS) cnt = GR_SDPA_CFGS;
        if (cnt <= 0) continue;
        cudnnBackendDescriptor_t cfg[GR_SDPA_CFGS];
        for (int64_t i = 0; i < cnt; i++) cfg[i] = sb_new(b, CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, "engine config");
        if (b->st != CUDNN_STATUS_SUCCESS ||
            !sb_ok(b, cudnnBackendGetAttribute(h, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, cnt,
                                               &got, cfg), "cudnnBackendGetAttribute", hw))
            break;
        offered += got;
        for (int64_t i = 0; i < got && !e->plan; i++) {
            cudnnBackendDescriptor_t p = NULL;
            if (!sb_ok(b, cudnnBackendCreateDescriptor(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, &p),
                       "cudnnBackendCreateDescriptor", "execution plan"))
                break;
            /* a configuration that does not finalize is cuDNN declining it: the next is tried */
            if (cudnnBackendSetAttribute(p, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &b->cu->dnn) ==
                    CUDNN_STATUS_SUCCESS &&
                cudnnBackendSetAttribute(p, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                                         &cfg[i]) == CUDNN_STATUS_SUCCESS &&
                cudnnBackendFinalize(p) == CUDNN_STATUS_SUCCESS) {
                GR_ASSERT(e->ndesc < GR_SDPA_DESCS);
                e->desc[e->ndesc++] = p;
                e->plan = p;
            } else {
                (void)cudnnBackendDestroyDescriptor(p);
            }
        }
    }
    if (b->st == CUDNN_STATUS_SUCCESS && !e->plan) {
        b->st = CUDNN_STATUS_NOT_SUPPORTED;
        snprintf(b->at, sizeof b->at, offered ? "every execution plan its heuristics offered (%lld) failed to finalize"
                 : "its heuristics offered no engine", (long long)offered);
    }
    int64_t ws = 0, nws = 0;
    if (e->plan)
        (void)sb_ok(b, cudnnBackendGetAttribute(e->plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1,
                                                &nws, &ws), "cudnnBackendGetAttribute", "workspace size");
    e->ws = (size_t)(ws > 0 ? ws : 0);
}

static size_t gr_align256(size_t x) { return (x + 255) & ~(size_t)255; }

/* A new entry for k with its plan, or with why cuDNN declined it. */
static gr_sdpa_entry *gr_sdpa_build(gr_cuda *cu, const gr_sdpa_key *k) {
    struct gr_cuda_sdpas *s = gr_sdpas(cu);
    gr_sdpa_entry *e = gr_xcalloc(1, sizeof *e);
    e->k = *k;
    const int64_t d = k->c / k->heads;
    e->scale = 1.0f / sqrtf((float)d); /* gr_attn_geo_of's */
    e->one = 1.0f;
    /* the mask value cuDNN's frontend passes: the lowest float before 9.10 */
    e->neg = cudnnGetVersion() >= 91000 ? -INFINITY : -FLT_MAX;
    gr_sdpa_b b;
    memset(&b, 0, sizeof b);
    b.cu = cu;
    b.e = e;
    b.uid = GR_UID_VIRT;
    const cudnnDataType_t io = k->dt == GR_BF16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_HALF;
    const gr_sdpa_dims m = gr_sdpa_dims_of(k);
    if (k->bwd) gr_sdpa_bwd_graph(&b, io, &m, k->causal);
    else gr_sdpa_fwd_graph(&b, io, &m, k->causal);
    gr_sdpa_plan(&b);
    if (b.st == CUDNN_STATUS_SUCCESS) {
        e->ok = true;
        if (k->bwd) { /* dq's fp32 accumulator after the plan's own workspace */
            e->dq_off = gr_align256(e->ws);
            e->ws = e->dq_off + (size_t)(k->n * k->t * k->c) * sizeof(float);
        }
    } else {
        const size_t v = cudnnGetVersion();
        snprintf(e->why, sizeof e->why, "cuDNN %zu.%zu.%zu declined the %s graph (T %lld, %lld head%s of %lld columns, "
                 "%s%s): %s", v / 10000, v % 10000 / 100, v % 100, k->bwd ? "backward" : "forward", (long long)k->t,
                 (long long)k->heads, k->heads == 1 ? "" : "s", (long long)d, gr_elem_name((gr_elem)k->dt),
                 k->causal ? ", causal" : "", b.at);
    }
    GR_GROW(s->e, s->cap, s->n + 1);
    s->e[s->n++] = e;
    return e;
}

const char *gr_cuda_sdpa_decline(gr_cuda *cu, const gr_kargs *a, bool build) {
    if (a->g && a->g->decode_len > 0) return "a decoding graph attends one position at a time (gpurun's decode kernel)";
    if (gr_sdpa_elem(a) == GR_F32)
        return gr_elem_is_half(a->tout[0]->elem) ? "the step's activations are not all in one half type"
                                                 : "the step is fp32 (cuDNN's fused attention takes bf16 or fp16)";
    if (!cu->half_native) return "GPURUN_HALF=staged runs every half step on fp32 copies";
    const gr_sdpa_key k = gr_sdpa_key_of(a);
    if ((k.c / k.heads) % 8 != 0) return "cuDNN's fused attention needs heads of a multiple of 8 columns";
    /* seen on an H200 with cuDNN 9.14: the backward graph's dq and dk came back non-finite at T 1 (they are 0:
     * a softmax over one position has no gradient), dv and the forward right */
    if (k.t == 1) return "T 1: cuDNN's fused backward gave non-finite dq and dk for a single position";
    gr_sdpa_entry *e = gr_sdpa_lookup(cu, &k);
    if (!e) {
        /* never at run time: a plan build is no work for a step (nor for a CUDA Graph capture) */
        if (!build) return "no cuDNN plan was built for this shape when the plan was compiled";
        e = gr_sdpa_build(cu, &k);
    }
    return e->ok ? NULL : e->why;
}

/* The entry of a step cuDNN runs. */
static gr_sdpa_entry *gr_sdpa_ready(gr_cuda *cu, const gr_kargs *a) {
    const gr_sdpa_key k = gr_sdpa_key_of(a);
    gr_sdpa_entry *e = gr_sdpa_lookup(cu, &k);
    GR_ASSERT(e && e->ok && e->ws <= cu->ws_bytes && a->n <= k.n);
    return e;
}

size_t gr_cuda_sdpa_workspace(gr_cuda *cu, const gr_steps *s) {
    size_t need = 0;
    for (int i = 0; i < s->n; i++) {
        const gr_kargs *a = &s->step[i];
        if ((a->node->op != GR_OP_ATTENTION && a->node->op != GR_OP_ATTENTION_BWD) || a->staged ||
            gr_cuda_sdpa_decline(cu, a, false))
            continue;
        const gr_sdpa_key k = gr_sdpa_key_of(a);
        const gr_sdpa_entry *e = gr_sdpa_lookup(cu, &k);
        if (e->ws > need) need = e->ws;
    }
    return need;
}

/* One run of e's plan on the tensors uids[i] at ptrs[i]. */
static void gr_sdpa_execute(gr_cuda *cu, const gr_sdpa_entry *e, int64_t n, const int64_t *uids, void **ptrs) {
    for (int64_t i = 0; i < n; i++) /* the device tensors' declared alignment (the scalars are host floats) */
        GR_ASSERT(uids[i] >= GR_UID_SCALE || ((uintptr_t)ptrs[i] & 15) == 0);
    cudnnBackendDescriptor_t vp = NULL;
    GR_CUDNN(cudnnBackendCreateDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &vp));
    GR_CUDNN(cudnnBackendSetAttribute(vp, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, n, uids));
    GR_CUDNN(cudnnBackendSetAttribute(vp, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, n, ptrs));
    GR_CUDNN(cudnnBackendSetAttribute(vp, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &cu->ws));
    GR_CUDNN(cudnnBackendFinalize(vp));
    GR_CUDNN(cudnnBackendExecute(cu->dnn, e->plan, vp));
    GR_CUDNN(cudnnBackendDestroyDescriptor(vp));
}

/* in {qkv}, out {y, lse} */
void gr_cuda_sdpa_forward(gr_cuda *cu, const gr_kargs *a) {
    gr_sdpa_entry *e = gr_sdpa_ready(cu, a);
    char *qkv = a->in[0];
    const size_t third = (size_t)e->k.c * gr_elem_size((gr_elem)e->k.dt);
    const int64_t uids[7] = {GR_UID_Q, GR_UID_K, GR_UID_V, GR_UID_O, GR_UID_STATS, GR_UID_SCALE, GR_UID_NEG};
    void *ptrs[7] = {qkv, qkv + third, qkv + 2 * third, a->out[0], a->out[1], &e->scale, &e->neg};
    gr_sdpa_execute(cu, e, e->k.causal ? 7 : 6, uids, ptrs);
}

/* in {dy, qkv, y, lse}, out {dqkv, delta} */
void gr_cuda_sdpa_backward(gr_cuda *cu, const gr_kargs *a) {
    gr_sdpa_entry *e = gr_sdpa_ready(cu, a);
    char *qkv = a->in[1], *dqkv = a->out[0], *acc = (char *)cu->ws + e->dq_off;
    const size_t third = (size_t)e->k.c * gr_elem_size((gr_elem)e->k.dt);
    GR_CU(cudaMemsetAsync(acc, 0, (size_t)(e->k.n * e->k.t * e->k.c) * sizeof(float), cu->stream));
    const int64_t uids[14] = {GR_UID_Q,  GR_UID_K,  GR_UID_V,   GR_UID_O,     GR_UID_STATS, GR_UID_DO,  GR_UID_DQ,
                              GR_UID_DK, GR_UID_DV, GR_UID_SUM, GR_UID_DQACC, GR_UID_SCALE, GR_UID_ONE, GR_UID_NEG};
    void *ptrs[14] = {qkv,           qkv + third,       qkv + 2 * third, a->in[2],   a->in[3], a->in[0], dqkv,
                      dqkv + third, dqkv + 2 * third, a->out[1],       acc,        &e->scale, &e->one, &e->neg};
    gr_sdpa_execute(cu, e, e->k.causal ? 14 : 13, uids, ptrs);
}

void gr_cuda_attn_say(gr_cuda *cu, gr_elem e, const char *why) {
    struct gr_cuda_sdpas *s = gr_sdpas(cu);
    /* the reason (or the type's name) is a string that lives as long as the backend: its address is the message's */
    const char *key = why ? why : gr_elem_name(e);
    for (int i = 0; i < s->n_said; i++)
        if (s->said[i] == key) return;
    if (s->n_said == GR_SDPA_SAID) return;
    s->said[s->n_said++] = key;
    if (why) snprintf(s->note, sizeof s->note, "attention on cuda:%d runs gpurun's own kernel: %s", cu->device, why);
    else snprintf(s->note, sizeof s->note, "attention on cuda:%d runs cuDNN's fused attention (%s)", cu->device, key);
    fprintf(stderr, "gpurun: %s\n", s->note);
}

const char *gr_cuda_attention_note(const gr_backend *be, int *cc_major) {
    const gr_cuda *cu = be->impl;
    if (cc_major) *cc_major = cu->cc_major;
    return cu->sdpa ? cu->sdpa->note : "";
}

void gr_cuda_sdpa_free_all(gr_cuda *cu) {
    struct gr_cuda_sdpas *s = cu->sdpa;
    if (!s) return;
    for (int i = 0; i < s->n; i++) {
        for (int j = s->e[i]->ndesc - 1; j >= 0; j--) GR_CUDNN(cudnnBackendDestroyDescriptor(s->e[i]->desc[j]));
        free(s->e[i]);
    }
    free(s->e);
    free(s);
    cu->sdpa = NULL;
}
