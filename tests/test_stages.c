/* test_stages.c — graph/stages.c: the balanced cut against brute force on
 * synthetic cost lists and on built MLP and CNN graphs (the largest stage's
 * FLOPs is the least any cut gives), named cuts of layers and block uses,
 * and the refusals at the key's file:line:col: p above the layers, unknown
 * and out-of-order names, a wrong count, a skip connection over a stage
 * (both layers named); a weight tied across stages (listed); what each stage
 * runs and exchanges (gr_stage_io_init) and its parameter ranges. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gr_test.h"
#include "graph/graph.h"
#include "graph/stages.h"

/* The least largest part over every cut of cost[0..n) into p non-empty parts. */
static int64_t brute(const int64_t *cost, int n, int p, int from) {
    if (p == 1) {
        int64_t s = 0;
        for (int i = from; i < n; i++) s += cost[i];
        return s;
    }
    int64_t best = INT64_MAX, s = 0;
    for (int end = from; end <= n - p; end++) { /* this part is [from, end] */
        s += cost[end];
        int64_t rest = brute(cost, n, p - 1, end + 1);
        int64_t v = s > rest ? s : rest;
        if (v < best) best = v;
    }
    return best;
}

/* The largest part of the cut first[0..p) (checked contiguous, non-empty). */
static int64_t largest(const int64_t *cost, int n, int p, const int *first) {
    int64_t top = 0;
    CHECK(first[0] == 0);
    for (int s = 0; s < p; s++) {
        int end = s + 1 < p ? first[s + 1] : n;
        CHECK(end > first[s]);
        int64_t sum = 0;
        for (int i = first[s]; i < end; i++) sum += cost[i];
        if (sum > top) top = sum;
    }
    return top;
}

static void test_synthetic(void) {
    unsigned seed = 12345;
    int64_t cost[10];
    int first[10];
    for (int trial = 0; trial < 400; trial++) {
        int n = 1 + trial % 10;
        for (int i = 0; i < n; i++) {
            seed = seed * 1103515245u + 12345u;
            cost[i] = (seed >> 16) % (trial % 3 == 0 ? 5 : 1000); /* zeros and ties too */
        }
        for (int p = 1; p <= n; p++) {
            gr_stages_balance(cost, n, p, first);
            int64_t got = largest(cost, n, p, first), want = brute(cost, n, p, 0);
            CHECK_MSG(got == want, "n %d p %d: largest %lld, brute force %lld", n, p, (long long)got,
                      (long long)want);
        }
    }
    const int64_t one[] = {1, 1, 1, 1, 100, 1, 1, 1, 1};
    gr_stages_balance(one, 9, 3, first);
    CHECK(largest(one, 9, 3, first) == 100);
}

/* Writes a spec (model layers and blocks as YAML text) and loads it with sets. */
static gr_status load(const char *name, const char *model, const char *const *sets, int nsets, gr_job_spec *spec,
                      gr_error *err) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s.yaml", GR_TEST_TMP, name);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    fprintf(f, "model:\n%s\ntrain:\n  batch_size: 8\n  steps: 1\n  optimizer: {lr: 0.1}\n", model);
    fclose(f);
    return gr_spec_load(path, sets, nsets, spec, err);
}

/* Builds the spec's graph with its backward and cuts it. */
static gr_status cut(const char *name, const char *model, const char *const *sets, int nsets, gr_graph *g,
                     gr_stage_plan *sp, gr_error *err) {
    gr_job_spec spec;
    gr_status st = load(name, model, sets, nsets, &spec, err);
    CHECK_MSG(st == GR_OK, "%s: %s", name, err->msg);
    if (st) return st;
    st = gr_graph_build(&spec, spec.model.input, spec.model.n_input, g, err);
    CHECK_MSG(st == GR_OK, "%s: %s", name, err->msg);
    gr_autodiff(g, false);
    st = gr_stages_cut(g, &spec, sp, err);
    gr_spec_free(&spec);
    return st;
}

static const char *MLP = "  input: [1, 4, 4]\n  layers: [flatten, {dense: {units: 32}}, relu, {dense: {units: 16}},"
                         " relu, {dense: {units: 8}}, relu, {dense: {units: 10}}]";
static const char *CNN = "  input: [1, 8, 8]\n  layers: [{conv: {filters: 4, kernel: 3, padding: 1}}, relu, "
                         "{conv: {filters: 8, kernel: 3, padding: 1}}, relu, {maxpool: {kernel: 2}}, "
                         "{conv: {filters: 8, kernel: 3, padding: 1}}, relu, flatten, {dense: {units: 10}}]";

/* On a built graph: the balanced cut is the brute-force optimum of the
 * layers' costs, and the stages' sums are the graph's. */
static void test_graph_balanced(const char *name, const char *model) {
    for (int p = 1; p <= 5; p++) {
        char set[64];
        snprintf(set, sizeof set, "parallel.pipeline=%d", p);
        const char *sets[] = {set};
        gr_graph g;
        gr_stage_plan sp;
        gr_error err = {0};
        CHECK(cut(name, model, sets, 1, &g, &sp, &err) == GR_OK);
        int64_t *cost = calloc((size_t)g.n_layers, sizeof *cost), total = 0, sum = 0, top = 0, params = 0;
        for (int i = 0; i < g.n_nodes; i++) {
            cost[g.nodes[i].layer >= 0 ? g.nodes[i].layer : g.n_layers - 1] += g.nodes[i].flops;
            total += g.nodes[i].flops;
        }
        CHECK(sp.p == p && !sp.named && sp.stages[0].first == 0 && sp.stages[p - 1].last == g.n_layers - 1);
        for (int s = 0; s < p; s++) {
            sum += sp.stages[s].flops, params += sp.stages[s].params;
            if (sp.stages[s].flops > top) top = sp.stages[s].flops;
            if (s) CHECK(sp.stages[s].first == sp.stages[s - 1].last + 1);
        }
        CHECK(sum == total && params == g.n_weights);
        CHECK_MSG(top == brute(cost, g.n_layers, p, 0), "%s p %d: largest %lld", name, p, (long long)top);
        free(cost);
        gr_stages_free(&sp);
        gr_graph_free(&g);
    }
}

/* A refused cut: exit 2 and a message holding each of subs. */
static void expect_refused(const char *name, const char *model, const char *const *sets, int nsets,
                           const char *const *subs) {
    gr_job_spec spec;
    gr_error err = {0};
    gr_status st = load(name, model, sets, nsets, &spec, &err);
    CHECK_MSG(st == GR_OK, "%s: %s", name, err.msg);
    if (st) return;
    gr_graph g;
    CHECK(gr_graph_build(&spec, spec.model.input, spec.model.n_input, &g, &err) == GR_OK);
    gr_autodiff(&g, false);
    gr_stage_plan sp;
    st = gr_stages_cut(&g, &spec, &sp, &err);
    CHECK_MSG(st == GR_ERR_USAGE, "%s: cut accepted", name);
    for (const char *const *s = subs; *s; s++) CHECK_STR_CONTAINS(err.msg, *s);
    CHECK(sp.stages == NULL);
    gr_graph_free(&g);
    gr_spec_free(&spec);
}

static const char *RES = "  input: [8]\n  layers:\n    - {dense: {units: 8}, name: a}\n    - {relu: {}, name: b}\n"
                         "    - {dense: {units: 8}, name: c}\n    - {add: {}, input: [a, c], name: d}\n"
                         "    - {dense: {units: 4}, name: e}";

static void test_named_and_refused(void) {
    gr_graph g;
    gr_stage_plan sp;
    gr_error err = {0};
    const char *named[] = {"parallel.pipeline=3", "parallel.stages=[c, e]"};
    CHECK(cut("named", RES, named, 2, &g, &sp, &err) == GR_OK);
    CHECK(sp.named && sp.stages[0].last == 1 && sp.stages[1].first == 2 && sp.stages[2].first == 4);
    gr_stages_free(&sp);
    gr_graph_free(&g);
    /* a block use's name cuts at its first layer */
    const char *blk = "  input: [8]\n  blocks:\n    mlp: {layers: [{dense: {units: 8}, name: d}, relu]}\n"
                      "  layers: [{mlp: {}, name: one}, {mlp: {}, name: two}, {dense: {units: 3}}]";
    const char *use[] = {"parallel.pipeline=2", "parallel.stages=[two]"};
    CHECK(cut("block", blk, use, 2, &g, &sp, &err) == GR_OK);
    CHECK(strcmp(g.layers[sp.stages[1].first].name, "two.d") == 0);
    gr_stages_free(&sp);
    gr_graph_free(&g);

    /* the skip a -> d over stage 2 (c): refused, both named; two stages keep it on neighbours */
    const char *skip[] = {"parallel.pipeline=3", "parallel.stages=[b, c]"};
    expect_refused("skip", RES, skip, 2, (const char *[]){"--set:1:1: parallel.stages: layer 'd' (stage 3) "
                   "reads 'a' (stage 1)", "may not skip a stage", NULL});
    const char *near[] = {"parallel.pipeline=2", "parallel.stages=[c]"};
    CHECK(cut("near", RES, near, 2, &g, &sp, &err) == GR_OK);
    gr_stages_free(&sp);
    gr_graph_free(&g);
    const char *big[] = {"parallel.pipeline=6"};
    expect_refused("big", RES, big, 1, (const char *[]){"parallel.pipeline: 6 stages, but the model has 5 layers",
                   NULL});
    const char *unknown[] = {"parallel.pipeline=2", "parallel.stages=[zz]"};
    expect_refused("unknown", RES, unknown, 2, (const char *[]){"--set:1:2: parallel.stages[0]: no layer or block "
                   "use is named 'zz'", NULL});
    const char *order[] = {"parallel.pipeline=3", "parallel.stages=[d, b]"};
    expect_refused("order", RES, order, 2, (const char *[]){"parallel.stages[1]: 'b' (layer 2) comes before or at "
                   "'d' (layer 4)", NULL});
    const char *firstl[] = {"parallel.pipeline=2", "parallel.stages=[a]"};
    expect_refused("firstl", RES, firstl, 2, (const char *[]){"'a' is the first layer", NULL});
    const char *count[] = {"parallel.pipeline=3", "parallel.stages=[c]"};
    expect_refused("count", RES, count, 2, (const char *[]){"1 names for parallel.pipeline = 3 stages: give 2",
                   NULL});
    const char *tied = "  input: [8]\n  layers: [{dense: {units: 8}, name: a}, relu, "
                       "{dense: {units: 8, tied: a}, name: t}]";
    const char *tcut[] = {"parallel.pipeline=2", "parallel.stages=[t]"};
    /* a weight tied across stages is carried: the one tensor read on both */
    CHECK(cut("tied", tied, tcut, 2, &g, &sp, &err) == GR_OK);
    int tt[4];
    CHECK(gr_stages_tied(&g, &sp, tt) == 1 && strcmp(g.tensors[tt[0]].name, "a.weight") == 0);
    gr_stages_free(&sp);
    gr_graph_free(&g);
}

/* The index of the tensor named name (-1: none). */
static int tensor_named(const gr_graph *g, const char *name) {
    for (int t = 0; t < g->n_tensors; t++)
        if (strcmp(g->tensors[t].name, name) == 0) return t;
    return -1;
}

static bool has(const int *list, int n, int t) {
    for (int i = 0; i < n; i++)
        if (list[i] == t) return true;
    return false;
}

/* What each stage runs and exchanges: RES cut before c, so stage 2 (c, d, e and the loss) reads
 * b's output and a's (the skip into d), and stage 1 gets the gradients of both back; every node
 * runs on exactly one stage; both ends list the same tensors; the message tensors are pinned;
 * the parameter ranges are contiguous, disjoint and cover every weight. */
static void test_stage_io(void) {
    gr_graph g;
    gr_stage_plan sp;
    gr_error err = {0};
    const char *sets[] = {"parallel.pipeline=2", "parallel.stages=[c]"};
    CHECK(cut("io", RES, sets, 2, &g, &sp, &err) == GR_OK);
    gr_stage_io io[2];
    for (int s = 0; s < 2; s++) gr_stage_io_init(&g, &sp, s, &io[s]);
    for (int i = 0; i < g.n_nodes; i++) CHECK_MSG(io[0].run[i] + io[1].run[i] == 1, "node %d", i);
    const int a = tensor_named(&g, "a"), b = tensor_named(&g, "b");
    CHECK(a >= 0 && b >= 0);
    CHECK(io[0].n_recv_act == 0 && io[0].n_recv_grad == 2 && io[0].n_send_act == 2 && io[0].n_send_grad == 0);
    CHECK(io[1].n_recv_act == 2 && io[1].n_send_grad == 2 && io[1].n_send_act == 0 && io[1].n_recv_grad == 0);
    CHECK(has(io[0].send_act, 2, a) && has(io[0].send_act, 2, b));
    for (int i = 0; i < 2; i++) {
        CHECK(io[0].send_act[i] == io[1].recv_act[i] && io[1].send_grad[i] == io[0].recv_grad[i]);
        CHECK(io[1].pin[io[1].recv_act[i]] && io[0].pin[io[0].send_act[i]] && io[0].pin[io[0].recv_grad[i]]);
    }
    /* the gradients back are those of b and of a's partial from d (summed on stage 1) */
    CHECK(has(io[0].recv_grad, 2, g.tensors[b].grad));
    CHECK(!has(io[0].recv_grad, 2, g.tensors[a].grad));
    gr_stage_range r[2];
    gr_stages_ranges(&g, &sp, r);
    CHECK(r[0].param_off == 0 && r[0].param_off + r[0].param_n <= r[1].param_off);
    CHECK(r[1].param_off + r[1].param_n <= g.n_trainable && g.n_trainable - (r[1].param_off + r[1].param_n) < GR_PARAM_ALIGN);
    int64_t in0 = 0, in1 = 0;
    for (int t = 0; t < g.n_tensors; t++) {
        const gr_tensor *x = &g.tensors[t];
        if (x->kind != GR_TK_PARAM) continue;
        const int st = x->layer >= sp.stages[1].first;
        const gr_stage_range *q = &r[st];
        CHECK(x->param_offset >= q->param_off && x->param_offset + gr_tensor_numel(x) <= q->param_off + q->param_n);
        *(st ? &in1 : &in0) += gr_tensor_numel(x);
    }
    CHECK(in0 + in1 == g.n_weights && in0 == sp.stages[0].params && in1 == sp.stages[1].params);
    for (int s = 0; s < 2; s++) gr_stage_io_free(&io[s]);
    gr_stages_free(&sp);
    gr_graph_free(&g);
}

/* With train.recompute: blocks the balanced cut falls between block uses only. */
static void test_recompute_whole(void) {
    const char *blk = "  input: [8]\n  blocks:\n    b: {layers: [{dense: {units: 8}, name: d1}, relu, "
                      "{dense: {units: 8}, name: d2}]}\n  layers: [{b: {}, repeat: 4}, {dense: {units: 3}}]";
    for (int p = 2; p <= 5; p++) {
        char set[64];
        snprintf(set, sizeof set, "parallel.pipeline=%d", p);
        const char *sets[] = {set, "train.recompute=blocks"};
        gr_graph g;
        gr_stage_plan sp;
        gr_error err = {0};
        CHECK_MSG(cut("rc", blk, sets, 2, &g, &sp, &err) == GR_OK, "p %d: %s", p, err.msg);
        for (int s = 1; s < p; s++) {
            const char *name = g.layers[sp.stages[s].first].name;
            CHECK_MSG(strstr(name, ".d1") || !strchr(name, '.'), "p %d: stage %d begins at %s", p, s + 1, name);
        }
        gr_stages_free(&sp);
        gr_graph_free(&g);
    }
    const char *six[] = {"parallel.pipeline=6", "train.recompute=blocks"};
    expect_refused("rc6", blk, six, 2, (const char *[]){"6 stages, but the model has 5 layers or recomputed block "
                   "uses to cut between", NULL});
}

int main(void) {
    test_synthetic();
    test_recompute_whole();
    test_stage_io();
    test_graph_balanced("mlp", MLP);
    test_graph_balanced("cnn", CNN);
    test_named_and_refused();
    return gr_test_report();
}
