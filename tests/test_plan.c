/* test_plan.c — the planner: liveness-based reuse never lets two tensors that
 * are live at the same step share bytes, reuse really saves memory, views
 * share their source's storage, and a backend lacking a kernel is refused at
 * plan time with the op named (never a silent fallback); a model's arenas
 * start zeroed, padding and all. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gr_test.h"
#include "graph/graph.h"
#include "exec/exec.h"

static gr_cfg *layers_of(const char *yaml) {
    gr_error err = {0};
    gr_cfg *c = NULL;
    CHECK(gr_cfg_parse_text(yaml, "plan", 1, 1, &c, &err) == GR_OK);
    return c;
}

static void build(gr_graph *g, gr_cfg *layers, int64_t micro) {
    gr_job_spec spec;
    memset(&spec, 0, sizeof spec);
    spec.model.layers = layers;
    spec.train.micro_batch = micro;
    snprintf(spec.train.loss, sizeof spec.train.loss, "softmax_cross_entropy");
    int64_t shape[3] = {1, 28, 28};
    gr_error err = {0};
    CHECK(gr_graph_build(&spec, shape, 3, g, &err) == GR_OK);
    gr_autodiff(g, false);
}

static int root_of(const gr_graph *g, int t) {
    while (g->tensors[t].alias_of >= 0) t = g->tensors[t].alias_of;
    return t;
}

static void test_no_overlap(void) {
    gr_cfg *layers = layers_of("[flatten, {dense: {units: 512}}, relu, {dropout: {rate: 0.2}}, "
                               "{dense: {units: 256}}, gelu, {dense: {units: 128}}, tanh, {dense: {units: 10}}]");
    gr_graph g;
    build(&g, layers, 64);
    gr_plan p;
    gr_error err = {0};
    CHECK(gr_plan_compile(&p, NULL, &g, GR_PLAN_TRAIN, false, &err) == GR_OK);
    CHECK(p.mem.act_bytes < p.mem.act_bytes_naive);
    /* lifetimes recomputed here from the node list */
    int nt = g.n_tensors;
    int *first = malloc((size_t)nt * sizeof *first), *last = malloc((size_t)nt * sizeof *last);
    for (int t = 0; t < nt; t++) first[t] = last[t] = -1;
    for (int i = 0; i < g.n_nodes; i++) {
        const gr_node *nd = &g.nodes[i];
        for (int k = 0; k < nd->nin + nd->nout; k++) {
            int t = root_of(&g, k < nd->nin ? nd->in[k] : nd->out[k - nd->nin]);
            if (p.mem.offset[t] < 0) continue;
            if (first[t] < 0) first[t] = i;
            last[t] = i;
        }
    }
    int conflicts = 0, pairs = 0;
    for (int a = 0; a < nt; a++) {
        if (first[a] < 0) continue;
        int64_t sa = p.mem.offset[a], ea = sa + gr_tensor_numel(&g.tensors[a]) * (g.tensors[a].elem == GR_U8 ? 1 : 4);
        CHECK(ea <= (int64_t)p.mem.act_bytes);
        for (int b = a + 1; b < nt; b++) {
            if (first[b] < 0) continue;
            bool live = first[a] <= last[b] && first[b] <= last[a];
            int64_t sb = p.mem.offset[b], eb = sb + gr_tensor_numel(&g.tensors[b]) * (g.tensors[b].elem == GR_U8 ? 1 : 4);
            if (live) { pairs++; if (sa < eb && sb < ea) conflicts++; }
        }
    }
    CHECK(pairs > 10);
    CHECK_MSG(conflicts == 0, "%d pairs of live tensors share bytes", conflicts);
    /* the flatten view has no storage of its own */
    int flat = g.nodes[g.layers[0].node].out[0];
    CHECK(g.tensors[flat].alias_of == g.input && p.mem.offset[flat] == -1);
    free(first);
    free(last);
    size_t train_bytes = p.mem.act_bytes;
    gr_plan_free(&p);

    /* eval plans hold forward tensors only, so they are smaller */
    gr_plan ep;
    CHECK(gr_plan_compile(&ep, NULL, &g, GR_PLAN_EVAL, false, &err) == GR_OK);
    CHECK(ep.mem.act_bytes < train_bytes && ep.steps.n < g.n_nodes);
    gr_plan_free(&ep);
    gr_graph_free(&g);
    gr_cfg_free(layers);
}

/* A backend whose table lacks relu: the plan is refused, naming op and layer. */
static void test_missing_kernel(void) {
    gr_cfg *layers = layers_of("[flatten, {dense: {units: 8}}, relu, {dense: {units: 4}}]");
    gr_graph g;
    build(&g, layers, 4);
    gr_error err = {0};
    gr_backend *cpu;
    CHECK(gr_backend_create("cpu", 1, &cpu, &err) == GR_OK);
    gr_kernel_fn table[GR_OP_COUNT];
    for (int i = 0; i < GR_OP_COUNT; i++) table[i] = cpu->vt->kernels[i];
    table[GR_OP_RELU] = NULL;
    gr_backend_vtable vt = *cpu->vt;
    vt.name = "partial";
    vt.kernels = table;
    gr_backend fake = {.vt = &vt, .impl = NULL, .threads = 1};
    CHECK(!gr_backend_supports_op(&fake, GR_OP_RELU));
    CHECK(gr_backend_supports_op(&fake, GR_OP_DENSE));
    gr_model m;
    CHECK(gr_model_init(&m, &g, &fake, 0, &err) == GR_OK);
    gr_plan p;
    gr_status st = gr_plan_compile(&p, &m, &g, GR_PLAN_TRAIN, true, &err);
    CHECK(st == GR_ERR_DEVICE);
    CHECK_STR_CONTAINS(err.msg, "the partial backend has no kernel for op 'relu' (layer relu0)");
    gr_model_free(&m);
    gr_backend_free(cpu);
    gr_graph_free(&g);
    gr_cfg_free(layers);
}

/* A model's arenas start zeroed, the padding between tensors too: whole-arena
 * reductions (the parameters' inf/NaN check, a tensor group's sum) read it, and
 * the allocator hands back recycled memory (here poisoned with NaN first). */
static void test_zeroed_arenas(void) {
    gr_cfg *layers = layers_of("[flatten, {dense: {units: 5}}, relu, {dense: {units: 3}}]");
    gr_graph g;
    build(&g, layers, 4);
    gr_error err = {0};
    gr_backend *cpu;
    CHECK(gr_backend_create("cpu", 1, &cpu, &err) == GR_OK);
    int64_t numel = 0;
    for (int i = 0; i < g.n_tensors; i++)
        if (g.tensors[i].kind == GR_TK_PARAM || g.tensors[i].kind == GR_TK_STATE) numel += gr_tensor_numel(&g.tensors[i]);
    CHECK(g.n_params > numel); /* there is padding to check */
    const size_t pb = (size_t)g.n_params * sizeof(float);
    for (int k = 0; k < 4; k++) { /* freed NaN blocks of the arena's size */
        void *poison = gr_backend_alloc(cpu, pb);
        CHECK(poison != NULL);
        memset(poison, 0xff, pb);
        gr_backend_dealloc(cpu, poison);
    }
    gr_model m;
    CHECK(gr_model_init(&m, &g, cpu, 1, &err) == GR_OK);
    int64_t nonzero = 0;
    for (int64_t i = 0; i < g.n_params; i++) nonzero += ((const uint32_t *)m.params)[i] != 0;
    CHECK(nonzero == 0);
    CHECK(isfinite(gr_backend_sumsq(cpu, m.params, g.n_params)));
    gr_model_free(&m);
    gr_backend_free(cpu);
    gr_graph_free(&g);
    gr_cfg_free(layers);
}

/* Layer naming follows DESIGN 1.4: name:, else <op><k>, and parameters are
 * <layer>.weight / <layer>.bias in PyTorch's layouts. */
static void test_names(void) {
    gr_cfg *layers = layers_of("[flatten, {dense: {units: 8}, name: fc}, relu, {dense: {units: 4}}, "
                               "{relu: {}, repeat: 2}, {dense: {units: 3, bias: false}}]");
    gr_graph g;
    build(&g, layers, 2);
    CHECK(g.n_layers == 7);
    CHECK(strcmp(g.layers[1].name, "fc") == 0);
    CHECK(strcmp(g.layers[3].name, "dense1") == 0);
    CHECK(strcmp(g.layers[5].name, "relu2") == 0);
    CHECK(strcmp(g.layers[6].name, "dense2") == 0);
    int found = 0;
    for (int i = 0; i < g.n_tensors; i++) {
        const gr_tensor *t = &g.tensors[i];
        if (strcmp(t->name, "fc.weight") == 0) { found++; CHECK(t->shape[0] == 8 && t->shape[1] == 784); }
        if (strcmp(t->name, "fc.bias") == 0) found++;
        if (strcmp(t->name, "dense2.bias") == 0) found += 100;
    }
    CHECK(found == 2);
    CHECK(g.n_weights == 784 * 8 + 8 + 8 * 4 + 4 + 4 * 3);
    gr_graph_free(&g);
    gr_cfg_free(layers);
}

/* One graph planned at several micro-batches (gr_graph_set_batch): the
 * same plan as a graph built at that micro-batch, byte for byte; below a
 * batchnorm's smallest micro-batch it is refused, the graph unchanged. */
static void test_set_batch(void) {
    const char *yaml = "[{conv: {filters: 4, kernel: 3}}, batchnorm, relu, global_avgpool, batchnorm, flatten, "
                       "{dense: {units: 10}}]";
    gr_cfg *l1 = layers_of(yaml), *l2 = layers_of(yaml);
    gr_graph g, h;
    build(&g, l1, 32);
    build(&h, l2, 6);
    gr_error err = {0};
    CHECK_MSG(gr_graph_set_batch(&g, 6, &err) == GR_OK, "%s", err.msg);
    CHECK(g.micro_batch == 6 && g.n_tensors == h.n_tensors);
    for (int t = 0; t < g.n_tensors && t < h.n_tensors; t++)
        CHECK_MSG(g.tensors[t].ndim == h.tensors[t].ndim &&
                  !memcmp(g.tensors[t].shape, h.tensors[t].shape, sizeof g.tensors[t].shape),
                  "tensor %s: another shape than a graph built at micro-batch 6", g.tensors[t].name);
    gr_plan pg, ph;
    CHECK(gr_plan_compile(&pg, NULL, &g, GR_PLAN_TRAIN, false, &err) == GR_OK);
    CHECK(gr_plan_compile(&ph, NULL, &h, GR_PLAN_TRAIN, false, &err) == GR_OK);
    CHECK(pg.mem.act_bytes == ph.mem.act_bytes && pg.mem.act_bytes_naive == ph.mem.act_bytes_naive);
    for (int t = 0; t < g.n_tensors && t < h.n_tensors; t++) CHECK(pg.mem.offset[t] == ph.mem.offset[t]);
    gr_plan_free(&pg);
    gr_plan_free(&ph);
    /* the second batchnorm sees [n, 4, 1, 1]: one value per channel per sample, two samples at least */
    memset(&err, 0, sizeof err);
    CHECK(gr_graph_set_batch(&g, 1, &err) == GR_ERR_USAGE);
    CHECK_STR_CONTAINS(err.msg, "layer batchnorm1: batchnorm cannot run at micro-batch 1: it needs 2 or more");
    CHECK(g.micro_batch == 6 && g.tensors[g.input].shape[0] == 6);
    CHECK(gr_graph_set_batch(&g, 2, &err) == GR_OK && g.tensors[g.input].shape[0] == 2);
    gr_graph_free(&g);
    gr_graph_free(&h);
    gr_cfg_free(l1);
    gr_cfg_free(l2);
}

int main(void) {
    test_set_batch();
    test_no_overlap();
    test_missing_kernel();
    test_zeroed_arenas();
    test_names();
    return gr_test_report();
}
