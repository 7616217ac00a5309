/* test_op_join.c — add and concat (graph/op_join.c), and the graphs they
 * make: fan-out (partial gradients summed), a tensor read twice by one
 * layer, the model input read more than once:
 *   - finite-difference gradchecks through the real pipeline on the backend
 *     named on the command line (gradcheck.h: `cpu` or `cuda`);
 *   - the add and concat bodies (body_check.h), on the CPU against the CPU
 *     kernels: add with 1..5 inputs, concat of 1..5 inputs ([n, C, H, W]
 *     and [n, F]) and every input's concat_bwd slice, bit for bit. With
 *     `cpu` only. */
#include "body_check.h"
#include "gradcheck.h"

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
    };
    for (size_t i = 0; i < GR_ARRAY_LEN(cases); i++) gr_gc_run(&cases[i]);
}

/* ---- add ---- */

static void test_add(int nin, int64_t nb, int64_t n, int64_t f) {
    int64_t shape[] = {nb, f};
    const int64_t cnt = n * f;
    float *x[GR_MAX_IN];
    float *y_cpu = rand_floats(cnt, 0, 1), *y_body = rand_floats(cnt, 0, 1);
    kt k;
    kt_init(&k, GR_OP_ADD, nin, 1, n);
    gr_add_in in;
    in.nin = nin;
    in.e = GR_BODY_F32;
    for (int i = 0; i < GR_ELEM_MAX_IN; i++) {
        x[i] = i < nin ? rand_floats(cnt, -4.0f, 4.0f) : NULL;
        in.x[i] = x[i];
        kt_tensor(&k.tin[i], GR_F32, 2, shape);
        k.a.in[i] = x[i];
    }
    kt_tensor(&k.tout[0], GR_F32, 2, shape);
    k.a.out[0] = y_cpu;
    gr_cpu_add(&k.a);
    for (int64_t i = 0; i < cnt; i++) gr_body_add(&in, y_body, i);
    CHECK_MSG(memcmp(y_body, y_cpu, (size_t)cnt * sizeof *y_cpu) == 0, "add of %d inputs, %lld elements: sums differ",
              nin, (long long)cnt);
    for (int i = 0; i < nin; i++) free(x[i]);
    free(y_cpu); free(y_body);
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

int main(int argc, char **argv) {
    int rc = gr_gc_args(argc, argv);
    if (rc) return rc;
    test_gradchecks();
    if (!gr_gc_on_cpu()) return gr_test_report();

    /* add: 1..5 inputs */
    for (int nin = 1; nin <= GR_MAX_IN; nin++) {
        test_add(nin, 3, 3, 1001);
        test_add(nin, 9, 5, 7);
    }

    /* concat: 1..5 inputs, channels of [n, C, H, W] (H*W odd) and features of [n, F] */
    const int64_t ch[] = {3, 1, 6, 2, 5};
    for (int nin = 1; nin <= GR_MAX_IN; nin++) {
        test_concat(nin, ch, 4, 15, 4, 3);
        test_concat(nin, ch + (5 - nin), 2, 1, 5, 5);
    }
    return gr_test_report();
}
