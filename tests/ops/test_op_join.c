/* test_op_join.c — add, mul and concat (graph/op_join.c), and the graphs
 * they make: fan-out (partial gradients summed), a tensor read twice by one
 * layer, the model input read more than once, NumPy broadcasting:
 *   - finite-difference gradchecks through the real pipeline on the backend
 *     named on the command line (gradcheck.h: `cpu` or `cuda`);
 *   - the add and concat bodies (body_check.h), on the CPU against the CPU
 *     kernels: add with 1..5 inputs, concat of 1..5 inputs ([n, C, H, W]
 *     and [n, F], along axis 1, and along axes 2 and 3) and every input's
 *     concat_bwd slice, bit for bit;
 *   - the broadcast bodies (kernels/body_shape.h) against the CPU kernels:
 *     add (fp32, bf16, channels-last) and mul of broadcast shapes, and the
 *     reductions of their backward (add_bwd_reduce, mul_bwd), bit for bit,
 *     checked against sums written out here too;
 *   - the broadcast errors at infer (the YAML line and both shapes).
 * The CPU-only parts run with `cpu` only. */
#include "body_check.h"
#include "gradcheck.h"
#include "kernels/shape_args.h"
#include "op_step.h"

/* ---- gradchecks ---- */

static void test_gradchecks(void) {
    static const gr_gc_case cases[] = {
        /* graphs: fan-out (partial gradients summed), add, concat */
        {"add (residual)", "[flatten, {dense: {units: 6}, name: a}, tanh, {dense: {units: 6}}, "
                           "{add: {}, input: [a, dense1]}, {dense: {units: 3}}]", 3, {1, 2, 3}, 0.0, 0.0, NULL},
        {"add of three, one read thrice", "[flatten, {dense: {units: 5}, name: a}, {sigmoid: {}, input: a, name: s}, "
                                          "{tanh: {}, input: a, name: t}, {add: {}, input: [a, s, t]}, "
                                          "{dense: {units: 3}}]", 1, {6}, 0.0, 0.0, NULL},
        {"the model input read twice", "[{dense: {units: 4}, name: a}, {dense: {units: 4}, input: input}, "
                                       "{add: {}, input: [a, dense1]}, {dense: {units: 3}}]", 1, {6}, 0.0, 0.0, NULL},
        /* a layer reading one tensor twice: a partial gradient per read (this was dy, not 2 dy) */
        {"add [a, a]", "[{dense: {units: 5}, name: a}, tanh, {add: {}, input: [a, a]}, {dense: {units: 3}}]", 1, {6},
         0.0, 0.0, NULL},
        {"concat [a, a]", "[{dense: {units: 4}, name: a}, {concat: {}, input: [a, a]}, {dense: {units: 3}}]", 1, {6},
         0.0, 0.0, NULL},
        {"add [input, input, a]", "[{dense: {units: 6}, name: a}, {add: {}, input: [input, input, a]}, "
                                  "{dense: {units: 3}}]", 1, {6}, 0.0, 0.0, NULL},
        {"concat", "[flatten, {dense: {units: 4}, name: a}, {dense: {units: 3}, name: b}, gelu, "
                   "{concat: {}, input: [a, gelu0]}, {dense: {units: 3}}]", 3, {1, 2, 3}, 0.0, 0.0, NULL},
        /* concat along other axes */
        {"concat axis 2 and -1", "[{conv: {filters: 2, kernel: 1}, name: a}, {avgpool: {kernel: [2, 1], stride: 1}, "
         "input: input, name: b}, {concat: {axis: 2}, input: [a, b]}, tanh, {name: c, concat: {axis: -1}, "
         "input: [tanh0, tanh0]}, flatten, {dense: {units: 3}}]", 3, {2, 3, 2}, 0.0, 0.0, NULL},
        /* broadcasting: a per-channel factor and shift, both inputs broadcast, [a, a] */
        {"add broadcast [n,2,3,2] + [n,2,1,1]", "[{conv: {filters: 2, kernel: 1}, name: a}, global_avgpool, "
         "{add: {}, input: [a, global_avgpool0]}, tanh, flatten, {dense: {units: 3}}]", 3, {2, 3, 2}, 0.0, 0.0, NULL},
        {"add broadcast both ways, three inputs", "[{dense: {units: 3}}, {reshape: {shape: [1, 3]}, name: a}, "
         "{dense: {units: 2}, input: input}, {reshape: {shape: [2, 1]}, name: b}, {add: {}, input: [a, b, a]}, "
         "flatten, {dense: {units: 3}}]", 1, {5}, 0.0, 0.0, NULL},
        {"mul broadcast [n,2,3] * [n,1,3]", "[{dense: {units: 6}}, {reshape: {shape: [2, 3]}, name: a}, "
         "{dense: {units: 3}, input: input}, {reshape: {shape: [1, 3]}, name: b}, {mul: {}, input: [a, b]}, "
         "flatten, {dense: {units: 3}}]", 1, {5}, 0.0, 0.0, NULL},
        {"mul [a, a] and same shapes", "[{dense: {units: 5}, name: a}, tanh, {mul: {}, input: [a, a]}, "
         "{mul: {}, input: [mul0, tanh0]}, {dense: {units: 3}}]", 1, {6}, 0.0, 0.0, NULL},
        {"mul gating: sigmoid [n,3,1,1] * x", "[{conv: {filters: 3, kernel: 1}, name: a}, global_avgpool, sigmoid, "
         "{mul: {}, input: [sigmoid0, a]}, flatten, {dense: {units: 3}}]", 3, {2, 2, 3}, 0.0, 0.0, NULL},
    };
    for (size_t i = 0; i < GR_ARRAY_LEN(cases); i++) gr_gc_run(&cases[i]);
}

/* ---- add ---- */

/* relu: the fused add + relu (attrs.relu: relu of the sum, -0 and below to +0, NaN kept);
 * in_place: the output is the first input's array */
static void test_add_mode(int nin, int64_t nb, int64_t n, int64_t f, bool relu, bool in_place) {
    int64_t shape[] = {nb, f};
    const int64_t cnt = n * f;
    float *x[GR_MAX_IN];
    float *y_cpu = rand_floats(cnt, 0, 1), *y_body = rand_floats(cnt, 0, 1);
    kt k;
    kt_init(&k, GR_OP_ADD, nin, 1, n);
    k.node.attrs.relu = relu;
    gr_add_in in;
    in.nin = nin;
    in.e = GR_BODY_F32;
    for (int i = 0; i < GR_ELEM_MAX_IN; i++) {
        x[i] = i < nin ? rand_floats(cnt, -4.0f, 4.0f) : NULL;
        in.x[i] = x[i];
        kt_tensor(&k.tin[i], GR_F32, 2, shape);
        k.a.in[i] = x[i];
    }
    if (relu) { /* the relu's edge cases where the sum is exactly what they need */
        x[0][0] = -0.0f;
        x[0][1] = NAN;
        for (int i = 1; i < nin; i++) x[i][0] = -0.0f; /* a sum of -0: relu writes +0 */
        if (nin == 2) x[1][2] = -x[0][2];
    }
    kt_tensor(&k.tout[0], GR_F32, 2, shape);
    for (int64_t i = 0; i < cnt; i++) {
        gr_body_add(&in, y_body, i);
        if (relu) y_body[i] = y_body[i] <= 0.0f ? 0.0f : y_body[i];
    }
    if (in_place) {
        free(y_cpu);
        y_cpu = x[0];
    }
    k.a.out[0] = y_cpu;
    gr_cpu_add(&k.a);
    CHECK_MSG(memcmp(y_body, y_cpu, (size_t)cnt * sizeof *y_cpu) == 0,
              "add of %d inputs, %lld elements%s%s: sums differ", nin, (long long)cnt, relu ? ", relu fused" : "",
              in_place ? ", in place" : "");
    if (in_place) y_cpu = NULL;
    for (int i = 0; i < nin; i++) free(x[i]);
    free(y_cpu); free(y_body);
}

static void test_add(int nin, int64_t nb, int64_t n, int64_t f) { test_add_mode(nin, nb, n, f, false, false); }

/* e stored as fp32 or bf16: v itself, or encoded */
static void t_store(void *p, gr_elem e, int64_t i, float v) {
    if (e == GR_BF16) ((uint16_t *)p)[i] = gr_bf16_encode_hd(v);
    else ((float *)p)[i] = v;
}

/* A relu's backward folded into a sum of nin gradients (attrs.relu_mask: the add's last input is
 * the relu's output m): the unfused pair's bits, an add then relu_bwd, in fp32 and bf16, also
 * in place; m holds -0, +0, negatives and NaN */
static void test_add_mask(gr_elem e, int nin, int64_t cnt, bool in_place) {
    const size_t es = e == GR_BF16 ? 2 : 4;
    const int64_t shape[] = {cnt, 1};
    void *x[GR_MAX_IN], *s = gr_xmalloc((size_t)cnt * es), *want = gr_xmalloc((size_t)cnt * es);
    void *got = gr_xmalloc((size_t)cnt * es);
    for (int k = 0; k <= nin; k++) {
        x[k] = gr_xmalloc((size_t)cnt * es);
        float *r = rand_floats(cnt, -2.0f, 2.0f);
        for (int64_t i = 0; i < cnt; i++) t_store(x[k], e, i, r[i]);
        free(r);
    }
    void *m = x[nin];
    t_store(m, e, 0, -0.0f), t_store(m, e, 1, 0.0f), t_store(m, e, 2, NAN), t_store(m, e, 3, -1.0f);
    kt k;
    /* the unfused pair: s = x0 + ... (add), want = relu_bwd(s, m) */
    kt_init(&k, GR_OP_ADD, nin, 1, cnt);
    for (int i = 0; i < nin; i++) kt_tensor(&k.tin[i], e, 2, shape), k.a.in[i] = x[i], k.a.ein[i] = e;
    kt_tensor(&k.tout[0], e, 2, shape), k.a.out[0] = s, k.a.eout[0] = e;
    gr_cpu_add(&k.a);
    kt_init(&k, GR_OP_RELU_BWD, 2, 1, cnt);
    kt_tensor(&k.tin[0], e, 2, shape), kt_tensor(&k.tin[1], e, 2, shape), kt_tensor(&k.tout[0], e, 2, shape);
    k.a.in[0] = s, k.a.in[1] = m, k.a.out[0] = want;
    k.a.ein[0] = k.a.ein[1] = k.a.eout[0] = e;
    gr_cpu_relu_bwd(&k.a);
    /* the folded one */
    kt_init(&k, GR_OP_ADD, nin + 1, 1, cnt);
    k.node.attrs.relu_mask = true;
    for (int i = 0; i <= nin; i++) kt_tensor(&k.tin[i], e, 2, shape), k.a.in[i] = x[i], k.a.ein[i] = e;
    kt_tensor(&k.tout[0], e, 2, shape), k.a.eout[0] = e;
    k.a.out[0] = in_place ? x[0] : got;
    gr_cpu_add(&k.a);
    CHECK_MSG(memcmp(want, k.a.out[0], (size_t)cnt * es) == 0,
              "add of %d gradients masked by a relu's output (%s, %lld values%s): not the unfused pair's bits", nin,
              gr_elem_name(e), (long long)cnt, in_place ? ", in place" : "");
    for (int i = 0; i <= nin; i++) free(x[i]);
    free(s); free(want); free(got);
}

/* ---- concat and concat_bwd ---- */

/* nin inputs of ch[i] channels; inner = H*W (ndim 4, H = hw, W = 1) or
 * 1 (ndim 2) */
static void test_concat(int nin, const int64_t *ch, int ndim, int64_t hw, int64_t nb, int64_t n) {
    const int64_t inner = ndim == 4 ? hw : 1;
    int64_t cout = 0;
    for (int i = 0; i < nin; i++) cout += ch[i];
    const int64_t out_row = cout * inner;
    int64_t oshape[] = {nb, cout, hw, 1};
    float *x[GR_MAX_IN];
    /* unwritten outputs would keep these NaN bytes and fail the memcmp */
    float *y_cpu = gr_xmalloc((size_t)(n * out_row) * sizeof(float)), *y_body = gr_xmalloc((size_t)(n * out_row) * sizeof(float));
    memset(y_cpu, 0xFF, (size_t)(n * out_row) * sizeof(float));
    memset(y_body, 0xFF, (size_t)(n * out_row) * sizeof(float));

    kt k;
    kt_init(&k, GR_OP_CONCAT, nin, 1, n);
    k.node.attrs.axis = 1;
    kt_tensor(&k.tout[0], GR_F32, ndim, oshape);
    gr_concat_in in;
    in.nin = nin;
    in.out_row = out_row;
    int64_t start = 0;
    for (int i = 0; i < GR_ELEM_MAX_IN; i++) {
        const int64_t c = i < nin ? ch[i] : 0;
        int64_t shape[] = {nb, c, hw, 1};
        x[i] = i < nin ? rand_floats(n * c * inner, -1.0f, 1.0f) : NULL;
        kt_tensor(&k.tin[i], GR_F32, ndim, shape);
        k.a.in[i] = x[i];
        in.x[i] = x[i];
        in.row[i] = c * inner;
        in.start[i] = start;
        start += c * inner;
    }
    k.a.out[0] = y_cpu;
    gr_cpu_concat(&k.a);
    for (int64_t s = 0; s < n; s++)
        for (int64_t c = 0; c < out_row; c++) gr_body_concat(&in, y_body, s, c);
    CHECK_MSG(memcmp(y_body, y_cpu, (size_t)(n * out_row) * sizeof(float)) == 0,
              "concat of %d inputs (ndim %d, inner %lld, n %lld): outputs differ", nin, ndim, (long long)inner,
              (long long)n);

    /* each input's slice of the gradient */
    int64_t off = 0;
    for (int i = 0; i < nin; i++) {
        const int64_t row = ch[i] * inner, cnt = n * row;
        float *dx_cpu = gr_xmalloc((size_t)(cnt > 0 ? cnt : 1) * sizeof(float));
        float *dx_body = gr_xmalloc((size_t)(cnt > 0 ? cnt : 1) * sizeof(float));
        memset(dx_cpu, 0xFF, (size_t)cnt * sizeof(float));
        memset(dx_body, 0xFF, (size_t)cnt * sizeof(float));
        int64_t ishape[] = {nb, ch[i], hw, 1};
        kt kb;
        kt_init(&kb, GR_OP_CONCAT_BWD, 1, 1, n);
        kt_tensor(&kb.tin[0], GR_F32, ndim, oshape);
        kt_tensor(&kb.tout[0], GR_F32, ndim, ishape);
        kb.node.attrs.axis = 1;
        kb.node.attrs.offset = off;
        kb.a.in[0] = y_cpu; /* any [n, cout, ...] tensor serves as dy */
        kb.a.out[0] = dx_cpu;
        gr_cpu_concat_bwd(&kb.a);
        for (int64_t s = 0; s < n; s++)
            for (int64_t c = 0; c < row; c++) gr_body_concat_bwd(y_cpu, dx_body, out_row, row, off * inner, s, c);
        CHECK_MSG(memcmp(dx_body, dx_cpu, (size_t)cnt * sizeof(float)) == 0,
                  "concat_bwd input %d of %d (offset %lld): slices differ", i, nin, (long long)off);
        CHECK_MSG(memcmp(dx_body, x[i], (size_t)cnt * sizeof(float)) == 0, "concat_bwd input %d: not the input back", i);
        off += ch[i];
        free(dx_cpu); free(dx_body);
    }
    for (int i = 0; i < nin; i++) free(x[i]);
    free(y_cpu); free(y_body);
}

/* ---- concat along axes 2 and 3 of [n, 3, 4, 5] ---- */

/* two inputs of len[0], len[1] along axis; the output's rows cut with the
 * row bodies over outer = n * the axes before it */
static void test_concat_axis(int64_t axis) {
    const int64_t n = 3, base[4] = {n, 3, 4, 5}, len[2] = {2, base[axis]};
    int64_t shp[2][4], oshape[4], cnt[2], ocnt = 1;
    for (int d = 0; d < 4; d++) oshape[d] = d == axis ? len[0] + len[1] : base[d];
    for (int d = 0; d < 4; d++) ocnt *= oshape[d];
    float *x[2];
    kt k;
    kt_init(&k, GR_OP_CONCAT, 2, 1, n);
    k.node.attrs.axis = axis;
    kt_tensor(&k.tout[0], GR_F32, 4, oshape);
    for (int i = 0; i < 2; i++) {
        cnt[i] = 1;
        for (int d = 0; d < 4; d++) {
            shp[i][d] = d == axis ? len[i] : base[d];
            cnt[i] *= shp[i][d];
        }
        x[i] = rand_floats(cnt[i], -1.0f, 1.0f);
        kt_tensor(&k.tin[i], GR_F32, 4, shp[i]);
        k.a.in[i] = x[i];
    }
    float *y = rand_floats(ocnt, 0, 1), *yb = rand_floats(ocnt, 0, 1);
    k.a.out[0] = y;
    gr_cpu_concat(&k.a);
    int64_t outer, inner;
    gr_shape_rows(&k.a, &k.tout[0], axis, &outer, &inner);
    gr_concat_in in;
    memset(&in, 0, sizeof in);
    in.nin = 2;
    in.out_row = oshape[axis] * inner;
    for (int i = 0; i < 2; i++) {
        in.x[i] = x[i];
        in.row[i] = len[i] * inner;
        in.start[i] = i ? len[0] * inner : 0;
    }
    for (int64_t r = 0; r < outer; r++)
        for (int64_t c = 0; c < in.out_row; c++) gr_body_concat(&in, yb, r, c);
    CHECK_MSG(memcmp(y, yb, (size_t)ocnt * sizeof *y) == 0, "concat axis %lld: kernel and body differ", (long long)axis);
    /* element [1, 2, 3, 4] (in x0 or x1 by its index along axis) */
    int64_t c[4] = {1, 2, 3, 4}, xi = c[axis] < len[0] ? 0 : 1, xc[4];
    memcpy(xc, c, sizeof c);
    if (xi) xc[axis] -= len[0];
    const int64_t *s = shp[xi];
    float want = x[xi][((xc[0] * s[1] + xc[1]) * s[2] + xc[2]) * s[3] + xc[3]];
    CHECK(y[((c[0] * oshape[1] + c[1]) * oshape[2] + c[2]) * oshape[3] + c[3]] == want);
    /* the backward slices give the inputs back */
    for (int i = 0; i < 2; i++) {
        float *dx = rand_floats(cnt[i], 0, 1);
        kt kb;
        kt_init(&kb, GR_OP_CONCAT_BWD, 1, 1, n);
        kt_tensor(&kb.tin[0], GR_F32, 4, oshape);
        kt_tensor(&kb.tout[0], GR_F32, 4, shp[i]);
        kb.node.attrs.axis = axis;
        kb.node.attrs.offset = i ? len[0] : 0;
        kb.a.in[0] = y;
        kb.a.out[0] = dx;
        gr_cpu_concat_bwd(&kb.a);
        CHECK_MSG(memcmp(dx, x[i], (size_t)cnt[i] * sizeof *dx) == 0, "concat_bwd axis %lld input %d", (long long)axis, i);
        free(dx);
    }
    free(x[0]); free(x[1]); free(y); free(yb);
}

/* ---- broadcast add and mul, and their backward reductions ---- */

static int64_t numel4(const int64_t *s) { return s[0] * s[1] * s[2] * s[3]; }

/* element c of a [4]-shaped dense tensor, or of one broadcast to it */
static int64_t at4(const int64_t *s, const int64_t *c) {
    int64_t o = 0;
    for (int d = 0; d < 4; d++) o = o * s[d] + (s[d] == 1 ? 0 : c[d]);
    return o;
}

/* y = x0 op x1 for x0 of shape sa and x1 of sb (4-D, batch first, stored
 * as e, both in layout lay): the CPU kernel against the body and against
 * the sum written out; then each input's gradient reduction. */
static void test_bcast(gr_op op, gr_elem e, gr_layout lay, const int64_t *sa, const int64_t *sb) {
    int64_t so[4];
    for (int d = 0; d < 4; d++) so[d] = sa[d] > sb[d] ? sa[d] : sb[d];
    const int64_t n = so[0], cnt = numel4(so);
    const size_t es = gr_elem_size(e);
    float *xf[2] = {rand_floats(numel4(sa), -2.0f, 2.0f), rand_floats(numel4(sb), -2.0f, 2.0f)};
    void *xs[2];
    for (int i = 0; i < 2; i++) { /* stored as e; xf keeps the values the storage holds */
        const int64_t m = numel4(i ? sb : sa);
        xs[i] = gr_xmalloc((size_t)m * es);
        for (int64_t j = 0; j < m; j++) {
            gr_st_hd(xs[i], (int)e, j, xf[i][j]);
            xf[i][j] = gr_ld_hd(xs[i], (int)e, j);
        }
    }
    void *y = gr_xmalloc((size_t)cnt * es), *yb = gr_xmalloc((size_t)cnt * es);
    memset(y, 0xFF, (size_t)cnt * es);
    memset(yb, 0xFF, (size_t)cnt * es);
    kt k;
    kt_init(&k, op, 2, 1, n);
    kt_tensor(&k.tin[0], e, 4, sa);
    kt_tensor(&k.tin[1], e, 4, sb);
    kt_tensor(&k.tout[0], e, 4, so);
    for (int i = 0; i < 2; i++) {
        k.tin[i].layout = lay;
        k.a.in[i] = xs[i];
        k.a.ein[i] = e;
    }
    k.tout[0].layout = lay;
    k.a.eout[0] = e;
    k.a.out[0] = y;
    const int mul = op == GR_OP_MUL;
    if (mul) gr_cpu_mul(&k.a);
    else gr_cpu_add(&k.a);
    gr_bcast_in b;
    gr_shape_bcast_args(&k.a, mul, (int)e, &b);
    for (int64_t i = 0; i < cnt; i++) gr_body_bcast(&b, yb, i);
    CHECK_MSG(memcmp(y, yb, (size_t)cnt * es) == 0, "%s %s [%lld,%lld,%lld] (%s): kernel and body differ",
              gr_op_name(op), gr_elem_name(e), (long long)so[1], (long long)so[2], (long long)so[3],
              lay == GR_NHWC ? "NHWC" : "NCHW");
    /* written out, in logical order: y's element c sits at its layout's offset */
    int bad = 0;
    int64_t ys[4];
    gr_shape_strides(&k.a, &k.tout[0], ys);
    for (int64_t c0 = 0; c0 < so[0]; c0++)
        for (int64_t c1 = 0; c1 < so[1]; c1++)
            for (int64_t c2 = 0; c2 < so[2]; c2++)
                for (int64_t c3 = 0; c3 < so[3]; c3++) {
                    const int64_t c[4] = {c0, c1, c2, c3};
                    int64_t xa[4], xb[4];
                    int64_t ca[4], cb[4];
                    for (int d = 0; d < 4; d++) { ca[d] = c[d]; cb[d] = c[d]; }
                    gr_shape_strides(&k.a, &k.tin[0], xa);
                    gr_shape_strides(&k.a, &k.tin[1], xb);
                    int64_t oa = 0, ob = 0, oy = 0;
                    for (int d = 0; d < 4; d++) { oa += ca[d] * xa[d]; ob += cb[d] * xb[d]; oy += c[d] * ys[d]; }
                    float u = xf[0][oa], v = xf[1][ob], r = mul ? u * v : u + v;
                    float want = gr_ld_hd(&r, GR_BODY_F32, 0);
                    void *tmp = gr_xmalloc(es);
                    gr_st_hd(tmp, (int)e, 0, want);
                    bad += memcmp((char *)y + oy * (int64_t)es, tmp, es) != 0;
                    free(tmp);
                }
    CHECK_MSG(bad == 0, "%s %s: %d values are not the broadcast result", gr_op_name(op), gr_elem_name(e), bad);
    if (e == GR_F32 && lay == GR_NCHW) { /* the backward reductions: fp32 NCHW (their rows' columns are 0) */
        float *dy = rand_floats(cnt, -1.0f, 1.0f);
        for (int i = 0; i < 2; i++) {
            const int64_t *sk = i ? sb : sa, m = numel4(sk);
            float *dx = rand_floats(m, 0, 1), *dxb = rand_floats(m, 0, 1);
            kt kb;
            kt_init(&kb, mul ? GR_OP_MUL_BWD : GR_OP_ADD_BWD_REDUCE, mul ? 2 : 1, 1, n);
            kt_tensor(&kb.tin[0], GR_F32, 4, so);
            kt_tensor(&kb.tin[1], GR_F32, 4, i ? sa : sb);
            kt_tensor(&kb.tout[0], GR_F32, 4, sk);
            kb.a.in[0] = dy;
            kb.a.in[1] = xf[1 - i];
            kb.a.out[0] = dx;
            if (mul) gr_cpu_mul_bwd(&kb.a);
            else gr_cpu_add_bwd_reduce(&kb.a);
            gr_reduce_in r;
            gr_shape_reduce_args(&kb.a, &r);
            for (int64_t j = 0; j < m; j++) gr_body_reduce(&r, dxb, j);
            CHECK_MSG(memcmp(dx, dxb, (size_t)m * sizeof *dx) == 0, "%s input %d: kernel and body differ",
                      gr_op_name(kb.node.op), i);
            /* the sum written out: each output element adds into the input element it read */
            double *want = calloc((size_t)m, sizeof *want), worst = 0.0;
            for (int64_t p = 0; p < cnt; p++) {
                int64_t c[4], t = p;
                for (int d = 3; d >= 0; d--) { c[d] = t % so[d]; t /= so[d]; }
                want[at4(sk, c)] += (double)dy[p] * (mul ? (double)xf[1 - i][at4(i ? sa : sb, c)] : 1.0);
            }
            for (int64_t j = 0; j < m; j++) {
                double err = fabs(dx[j] - want[j]) / (fabs(want[j]) + 1e-3);
                worst = err > worst ? err : worst;
            }
            free(want);
            CHECK_MSG(worst < 1e-5, "%s input %d: off the written-out sum by %g", gr_op_name(kb.node.op), i, worst);
            free(dx); free(dxb);
        }
        free(dy);
    }
    for (int i = 0; i < 2; i++) { free(xf[i]); free(xs[i]); }
    free(y); free(yb);
}

static void test_bcasts(void) {
    static const int64_t a[] = {3, 4, 5, 6}, ch[] = {3, 4, 1, 1}, row[] = {3, 1, 5, 1}, col[] = {3, 1, 1, 6},
                         big[] = {2, 64, 32, 17}, bch[] = {2, 64, 1, 1};
    for (int m = 0; m < 2; m++) {
        gr_op op = m ? GR_OP_MUL : GR_OP_ADD;
        test_bcast(op, GR_F32, GR_NCHW, a, ch);
        test_bcast(op, GR_F32, GR_NCHW, row, a);
        test_bcast(op, GR_F32, GR_NCHW, row, col); /* both broadcast */
        test_bcast(op, GR_F32, GR_NCHW, a, a);     /* mul of one shape; add takes its own path */
        test_bcast(op, GR_F32, GR_NCHW, big, bch); /* the OpenMP loops */
    }
    /* add takes half storage and channels-last as it is (its ops.def columns) */
    test_bcast(GR_OP_ADD, GR_BF16, GR_NCHW, a, ch);
    test_bcast(GR_OP_ADD, GR_F16, GR_NCHW, row, col);
    test_bcast(GR_OP_ADD, GR_F32, GR_NHWC, a, ch);
    test_bcast(GR_OP_ADD, GR_BF16, GR_NHWC, row, col);
}

/* a build error containing want (op_step.h's, at micro-batch 2) */
static void expect_build_error(const char *layers, int ndim, const int64_t *shape, const char *want) {
    gr_bnt_expect_error_at(layers, shape, ndim, 2, want, false);
}

static void test_errors(void) {
    static const int64_t s3[] = {2, 3, 4}, s1[] = {6};
    expect_build_error("[{conv: {filters: 3, kernel: [1, 2]}, name: a}, {add: {}, input: [input, a]}]", 3, s3,
                       "t:1:50: model.layers[1].add: add cannot broadcast 'input' [n, 2, 3, 4] with 'a' "
                       "[n, 3, 3, 3] (NumPy's rules on the full tensors, batch first: one rank, and along each axis "
                       "equal sizes or a 1)");
    expect_build_error("[{dense: {units: 4}, name: a}, {reshape: {shape: [2, 2]}}, {mul: {}, input: [a, reshape0]}]",
                       1, s1, "mul cannot broadcast 'a' [n, 4] with 'reshape0' [n, 2, 2]");
    expect_build_error("[{dense: {units: 4}, name: a}, {mul: {}, input: [a, a, a]}]", 1, s1,
                       "mul multiplies two layers");
    expect_build_error("[{dense: {units: 4}, name: a}, {concat: {axis: 0}, input: [a, a]}]", 1, s1,
                       "concat: axis 0 is the batch axis");
    expect_build_error("[{dense: {units: 4}, name: a}, {concat: {axis: -3}, input: [a, a]}]", 1, s1,
                       "concat: axis -3 is outside a tensor of 2 axes");
    expect_build_error("[{slice: {axis: 1, end: 1}, name: a}, {concat: {axis: 2}, input: [a, input]}]", 3, s3,
                       "concat along axis 2 needs inputs that agree elsewhere, but 'a' is [2, 1, 3, 4] and "
                       "'input' is [2, 2, 3, 4]");
}

int main(int argc, char **argv) {
    int rc = gr_gc_args(argc, argv);
    if (rc) return rc;
    test_gradchecks();
    if (!gr_gc_on_cpu()) return gr_test_report();

    /* add: 1..5 inputs */
    for (int nin = 1; nin <= GR_MAX_IN; nin++) {
        test_add(nin, 3, 3, 1001);
        test_add(nin, 9, 5, 7);
        test_add_mode(nin, 3, 3, 1001, true, false);
    }
    /* two inputs, the residual add's fp32 chunks: more than one chunk and a tail, also in place */
    test_add_mode(2, 2, 2, 20011, false, false);
    test_add_mode(2, 2, 2, 20011, true, false);
    test_add_mode(2, 2, 2, 20011, true, true);
    test_add_mode(2, 40, 40, 1001, false, true);
    for (int e = 0; e < 2; e++) {
        const gr_elem el = e ? GR_BF16 : GR_F32;
        test_add_mask(el, 2, 20011, false); /* the two-term chunks: several and a tail */
        test_add_mask(el, 2, 20011, true);
        test_add_mask(el, 3, 1001, false);  /* the general loop */
    }

    /* concat: 1..5 inputs, channels of [n, C, H, W] (H*W odd) and features of [n, F] */
    const int64_t ch[] = {3, 1, 6, 2, 5};
    for (int nin = 1; nin <= GR_MAX_IN; nin++) {
        test_concat(nin, ch, 4, 15, 4, 3);
        test_concat(nin, ch + (5 - nin), 2, 1, 5, 5);
    }
    test_concat_axis(2);
    test_concat_axis(3);
    test_bcasts();
    test_errors();
    return gr_test_report();
}
