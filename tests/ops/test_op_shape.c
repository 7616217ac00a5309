/* test_op_shape.c — reshape, permute and slice (graph/op_shape.c):
 *   - finite-difference gradchecks through the real pipeline on the backend
 *     named on the command line (gradcheck.h: `cpu` or `cuda`): each op
 *     alone, chained with the others and with dense, a tensor sliced twice
 *     (a split: the slices' gradients summed) and joined again along
 *     another axis;
 *   - the permute, slice and slice_bwd bodies (kernels/body_shape.h,
 *     body_elem.h's row cut) on the CPU against the CPU kernels, bit for
 *     bit, over every axis order of ranks 2 to 4 and every cut axis;
 *   - the shape errors at infer, each naming the YAML line and the shapes.
 * The CPU-only parts run with `cpu` only. */
#include "body_check.h"
#include "gradcheck.h"
#include "kernels/shape_args.h"
#include "op_step.h"

/* ---- gradchecks ---- */

static void test_gradchecks(void) {
    static const gr_gc_case cases[] = {
        {"reshape (and -1)", "[{reshape: {shape: [4, 6]}}, tanh, {reshape: {shape: [-1]}}, {dense: {units: 3}}]", 3,
         {2, 3, 4}, 0.0, 0.0, NULL},
        {"permute [0, 3, 1, 2]", "[{permute: {axes: [0, 3, 1, 2]}}, sigmoid, flatten, {dense: {units: 3}}]", 3,
         {2, 3, 4}, 0.0, 0.0, NULL},
        {"permute after dense, negative axes", "[{dense: {units: 6}}, {reshape: {shape: [2, 3]}}, "
         "{permute: {axes: [0, -1, -2]}}, tanh, flatten, {dense: {units: 3}}]", 1, {5}, 0.0, 0.0, NULL},
        {"slice along axis 2", "[{slice: {axis: 2, start: 1, end: 3}}, tanh, flatten, {dense: {units: 3}}]", 3,
         {2, 4, 3}, 0.0, 0.0, NULL},
        {"slice negative, of dense features", "[{dense: {units: 7}}, {slice: {axis: -1, start: -5, end: -1}}, gelu, "
         "{dense: {units: 3}}]", 1, {4}, 0.0, 0.0, NULL},
        /* a split: two slices of one tensor, concatenated the other way round */
        {"split and rejoin along axis 3", "[{conv: {filters: 2, kernel: 1}, name: c}, "
         "{slice: {axis: 3, start: 0, end: 1}, name: a}, {slice: {axis: 3, start: 1, end: 4}, input: c, name: b}, "
         "{concat: {axis: -1}, input: [b, a]}, tanh, flatten, {dense: {units: 3}}]", 3, {2, 3, 4}, 0.0, 0.0, NULL},
        {"reshape, permute, slice chained", "[{reshape: {shape: [3, 2, 4]}}, {permute: {axes: [0, 2, 3, 1]}}, "
         "{slice: {axis: 1, start: 0, end: 1}}, sigmoid, flatten, {dense: {units: 3}}]", 3, {2, 3, 4}, 0.0, 0.0,
         NULL},
        /* the CUDA-vs-CPU table's shape cases (tests/ops/test_cuda_vs_cpu.c), smaller */
        {"permute, slice, reshape after conv", "[{conv: {filters: 2, kernel: 3, padding: 1}}, "
         "{permute: {axes: [0, 2, 3, 1]}}, tanh, {slice: {axis: 2, start: 1, end: 3}}, {reshape: {shape: [-1, 2]}}, "
         "flatten, {dense: {units: 3}}]", 3, {2, 3, 4}, 0.0, 0.0, NULL},
        {"gating: broadcast mul and add", "[{conv: {filters: 3, kernel: 3, padding: 1}, name: x}, global_avgpool, "
         "sigmoid, {mul: {}, input: [x, sigmoid0]}, {add: {}, input: [mul0, global_avgpool0]}, tanh, flatten, "
         "{dense: {units: 3}}]", 3, {2, 3, 3}, 0.0, 0.0, NULL},
        {"features: mul, add, concat -1", "[{dense: {units: 6}}, {reshape: {shape: [3, 2]}, name: a}, "
         "{dense: {units: 2}, input: input}, {reshape: {shape: [1, 2]}, name: b}, {mul: {}, input: [a, b]}, "
         "{add: {}, input: [mul0, b]}, tanh, {concat: {axis: -1}, input: [tanh0, a]}, flatten, {dense: {units: 3}}]",
         1, {4}, 0.1, 0.0, NULL},
    };
    for (size_t i = 0; i < GR_ARRAY_LEN(cases); i++) gr_gc_run(&cases[i]);
}

/* ---- permute ---- */

/* x of shape (full tensor, ndim axes, n samples) permuted by axes: the
 * CPU kernel and the body agree, and the inverse permute gives x back */
static void test_permute(int ndim, const int64_t *shape, const int64_t *axes) {
    int64_t oshape[GR_MAX_DIMS], cnt = 1;
    for (int d = 0; d < ndim; d++) {
        oshape[d] = shape[axes[d]];
        cnt *= shape[d];
    }
    float *x = rand_floats(cnt, -1.0f, 1.0f), *y_cpu = rand_floats(cnt, 0, 1), *y_body = rand_floats(cnt, 0, 1);
    float *back = rand_floats(cnt, 0, 1);
    kt k;
    kt_init(&k, GR_OP_PERMUTE, 1, 1, shape[0]);
    kt_tensor(&k.tin[0], GR_F32, ndim, shape);
    kt_tensor(&k.tout[0], GR_F32, ndim, oshape);
    k.node.attrs.axes.n = ndim;
    for (int d = 0; d < ndim; d++) k.node.attrs.axes.v[d] = axes[d];
    k.a.in[0] = x;
    k.a.out[0] = y_cpu;
    gr_cpu_permute(&k.a);
    gr_permute_in p;
    gr_shape_permute_args(&k.a, &p);
    for (int64_t i = 0; i < cnt; i++) gr_body_permute(&p, x, y_body, i);
    CHECK_MSG(memcmp(y_body, y_cpu, (size_t)cnt * sizeof *x) == 0, "permute rank %d [0, %lld, ...]: outputs differ",
              ndim, (long long)axes[1]);
    /* the backward node's inverse order undoes it */
    kt kb;
    kt_init(&kb, GR_OP_PERMUTE_BWD, 1, 1, shape[0]);
    kt_tensor(&kb.tin[0], GR_F32, ndim, oshape);
    kt_tensor(&kb.tout[0], GR_F32, ndim, shape);
    kb.node.attrs.axes.n = ndim;
    for (int d = 0; d < ndim; d++) kb.node.attrs.axes.v[axes[d]] = d;
    kb.a.in[0] = y_cpu;
    kb.a.out[0] = back;
    gr_cpu_permute_bwd(&kb.a);
    CHECK_MSG(memcmp(back, x, (size_t)cnt * sizeof *x) == 0, "permute rank %d: the inverse is not x", ndim);
    free(x); free(y_cpu); free(y_body); free(back);
}

/* every order of the axes after the batch, ranks 2..4 */
static void test_permutes(void) {
    static const int64_t shapes[3][4] = {{3, 5}, {2, 3, 5}, {2, 3, 4, 5}};
    for (int ndim = 2; ndim <= 4; ndim++) {
        const int m = ndim - 1;
        int count = 0;
        /* the permutations of 1..m by index: m! of them */
        int total = m == 1 ? 1 : m == 2 ? 2 : 6;
        for (int q = 0; q < total; q++) {
            int64_t axes[4] = {0}, rest[3] = {1, 2, 3};
            int r = q, left = m;
            for (int i = 0; i < m; i++) {
                int f = 1;
                for (int j = 2; j < left; j++) f *= j;
                int pick = r / f;
                r %= f;
                axes[i + 1] = rest[pick];
                for (int j = pick; j < left - 1; j++) rest[j] = rest[j + 1];
                left--;
            }
            test_permute(ndim, shapes[ndim - 2], axes);
            count++;
        }
        CHECK(count == total);
    }
}

/* ---- slice and slice_bwd ---- */

/* x of shape cut to [s, e) along axis: the CPU kernels against the row
 * bodies; slice_bwd puts the slice back with zeros around it */
static void test_slice(int ndim, const int64_t *shape, int64_t axis, int64_t s, int64_t e) {
    int64_t oshape[GR_MAX_DIMS], cnt = 1;
    for (int d = 0; d < ndim; d++) {
        oshape[d] = d == axis ? e - s : shape[d];
        cnt *= shape[d];
    }
    const int64_t ocnt = cnt / shape[axis] * (e - s);
    float *x = rand_floats(cnt, -1.0f, 1.0f), *y_cpu = rand_floats(ocnt, 0, 1), *y_body = rand_floats(ocnt, 0, 1);
    float *dx_cpu = rand_floats(cnt, 0, 1), *dx_body = rand_floats(cnt, 0, 1);
    kt k;
    kt_init(&k, GR_OP_SLICE, 1, 1, shape[0]);
    kt_tensor(&k.tin[0], GR_F32, ndim, shape);
    kt_tensor(&k.tout[0], GR_F32, ndim, oshape);
    k.node.attrs.axis = axis;
    k.node.attrs.start = s;
    k.node.attrs.end = e;
    k.a.in[0] = x;
    k.a.out[0] = y_cpu;
    gr_cpu_slice(&k.a);
    int64_t outer, inner;
    gr_shape_rows(&k.a, &k.tin[0], axis, &outer, &inner);
    const int64_t in_row = shape[axis] * inner, row = (e - s) * inner;
    for (int64_t r = 0; r < outer; r++)
        for (int64_t c = 0; c < row; c++) gr_body_concat_bwd(x, y_body, in_row, row, s * inner, r, c);
    CHECK_MSG(memcmp(y_body, y_cpu, (size_t)ocnt * sizeof *x) == 0, "slice rank %d axis %lld [%lld, %lld): differ",
              ndim, (long long)axis, (long long)s, (long long)e);

    kt kb;
    kt_init(&kb, GR_OP_SLICE_BWD, 1, 1, shape[0]);
    kt_tensor(&kb.tin[0], GR_F32, ndim, oshape);
    kt_tensor(&kb.tout[0], GR_F32, ndim, shape);
    kb.node.attrs.axis = axis;
    kb.node.attrs.offset = s;
    kb.a.in[0] = y_cpu;
    kb.a.out[0] = dx_cpu;
    gr_cpu_slice_bwd(&kb.a);
    for (int64_t r = 0; r < outer; r++)
        for (int64_t c = 0; c < in_row; c++) gr_body_slice_bwd(y_cpu, dx_body, in_row, row, s * inner, r, c);
    CHECK_MSG(memcmp(dx_body, dx_cpu, (size_t)cnt * sizeof *x) == 0, "slice_bwd rank %d axis %lld: differ", ndim,
              (long long)axis);
    /* dx is x inside the slice and 0 outside */
    int bad = 0;
    for (int64_t r = 0; r < outer; r++)
        for (int64_t c = 0; c < in_row; c++) {
            float want = c >= s * inner && c < e * inner ? x[r * in_row + c] : 0.0f;
            bad += dx_cpu[r * in_row + c] != want;
        }
    CHECK_MSG(bad == 0, "slice_bwd rank %d axis %lld: %d values not the slice or 0", ndim, (long long)axis, bad);
    free(x); free(y_cpu); free(y_body); free(dx_cpu); free(dx_body);
}

static void test_slices(void) {
    static const int64_t s2[] = {3, 7}, s3[] = {2, 5, 3}, s4[] = {2, 3, 4, 5};
    test_slice(2, s2, 1, 2, 6);
    test_slice(2, s2, 1, 0, 7);
    for (int64_t axis = 1; axis < 3; axis++) test_slice(3, s3, axis, 1, s3[axis]);
    for (int64_t axis = 1; axis < 4; axis++) {
        test_slice(4, s4, axis, 0, 1);
        test_slice(4, s4, axis, 1, s4[axis] - 1 > 1 ? s4[axis] - 1 : 2);
    }
}

/* ---- errors at infer: the YAML line, the shapes ---- */

/* a build error containing want (op_step.h's, at micro-batch 2) */
static void expect_build_error(const char *layers, int ndim, const int64_t *shape, const char *want) {
    gr_bnt_expect_error_at(layers, shape, ndim, 2, want, false);
}

static void test_errors(void) {
    static const int64_t s3[] = {2, 3, 4};
    expect_build_error("[{reshape: {shape: [5, -1]}}, flatten, {dense: {units: 2}}]", 3, s3,
                       "t:1:3: model.layers[0].reshape: reshape cannot make 24 values per sample of 'input' "
                       "[n, 2, 3, 4] into the shape given");
    expect_build_error("[{reshape: {shape: [5, 5]}}]", 3, s3, "reshape cannot make 24 values");
    expect_build_error("[{permute: {axes: [1, 0, 2, 3]}}]", 3, s3, "permute: axes[0] must be 0");
    expect_build_error("[{permute: {axes: [0, 1, 2]}}]", 3, s3, "permute: 3 axes given for 'input' [n, 2, 3, 4]");
    expect_build_error("[{permute: {axes: [0, 1, 1, 2]}}]", 3, s3, "permute: axis 1 is given twice");
    expect_build_error("[{slice: {axis: 0, end: 1}}]", 3, s3, "slice: axis 0 is the batch axis");
    expect_build_error("[{slice: {axis: 3, end: 1}}]", 2, s3, "slice: axis 3 is outside a tensor of 3 axes");
    expect_build_error("[{slice: {axis: 4, end: 1}}]", 3, s3, "model.layers[0].slice.axis: must be <= 3, got 4");
    expect_build_error("[{slice: {axis: 2, start: 2, end: 5}}]", 3, s3,
                       "slice [2, 5) along axis 2 of 'input' [n, 2, 3, 4] is empty or outside [0, 3)");
    expect_build_error("[{slice: {axis: -1, start: 3, end: 3}}]", 3, s3, "is empty or outside [0, 4)");
}

int main(int argc, char **argv) {
    int rc = gr_gc_args(argc, argv);
    if (rc) return rc;
    test_gradchecks();
    if (!gr_gc_on_cpu()) return gr_test_report();
    test_permutes();
    test_slices();
    test_errors();
    return gr_test_report();
}
