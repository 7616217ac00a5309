/* test_optgroups.c — the optimizer's parameter groups (runner/optgroups.c,
 * config/param_groups.c): train.optimizer.decay and .groups resolved into
 * ranges of the flat arrays, and the errors of a bad group at its YAML
 * line. The updates themselves are compared with torch's param_groups by
 * tests/parity_cnn.py (cases groups and adamw). */
#include <stdio.h>
#include <string.h>

#include "gr_test.h"
#include "graph/graph.h"
#include "runner/optgroups.h"

#define SPEC GR_TEST_TMP "/optgroups.yaml"

/* Loads a spec whose train.optimizer is `optim` (flow YAML) over a small
 * MLP with batchnorm: dense0 [8, 8], batchnorm0 [8], dense1 [3, 8]. */
static gr_status load(const char *optim, gr_job_spec *spec, gr_error *err) {
    FILE *f = fopen(SPEC, "w");
    if (!f) return gr_error_set(err, GR_ERR_USAGE, "cannot write %s", SPEC);
    fprintf(f, "model:\n  input: [1, 2, 4]\n  layers: [flatten, {dense: {units: 8}}, batchnorm, relu, "
               "{dense: {units: 3}}]\ntrain:\n  batch_size: 4\n  steps: 1\n  optimizer: %s\n", optim);
    fclose(f);
    memset(err, 0, sizeof *err);
    return gr_spec_load(SPEC, NULL, 0, spec, err);
}

/* The range holding parameter `name`. */
static const gr_opt_range *range_of(const gr_opt_groups *og, const gr_graph *g, const char *name) {
    for (int i = 0; i < g->n_tensors; i++) {
        if (g->tensors[i].kind != GR_TK_PARAM || strcmp(g->tensors[i].name, name) != 0) continue;
        for (int k = 0; k < og->n; k++)
            if (g->tensors[i].param_offset >= og->r[k].off && g->tensors[i].param_offset < og->r[k].off + og->r[k].n)
                return &og->r[k];
    }
    return NULL;
}

static void expect(const gr_opt_groups *og, const gr_graph *g, const char *name, double lr_mult, double wd,
                   bool frozen) {
    const gr_opt_range *r = range_of(og, g, name);
    CHECK_MSG(r != NULL, "%s: in no range", name);
    if (!r) return;
    CHECK_MSG(r->lr_mult == lr_mult && r->weight_decay == wd && r->frozen == frozen,
              "%s: lr x%g wd %g frozen %d, expected lr x%g wd %g frozen %d", name, r->lr_mult, r->weight_decay,
              r->frozen, lr_mult, wd, frozen);
}

/* The ranges tile [0, n_trainable) in order. */
static void check_tiling(const gr_opt_groups *og, const gr_graph *g) {
    int64_t at = 0;
    for (int k = 0; k < og->n; k++) {
        CHECK_MSG(og->r[k].off == at && og->r[k].n > 0, "range %d: [%lld, +%lld), expected to start at %lld", k,
                  (long long)og->r[k].off, (long long)og->r[k].n, (long long)at);
        CHECK(og->r[k].off % GR_PARAM_ALIGN == 0);
        at = og->r[k].off + og->r[k].n;
    }
    CHECK_MSG(at == g->n_trainable, "ranges end at %lld, n_trainable %lld", (long long)at, (long long)g->n_trainable);
}

static void test_groups(const char *optim, int want_ranges, void (*check)(const gr_opt_groups *, const gr_graph *)) {
    gr_job_spec spec;
    gr_error err;
    gr_status st = load(optim, &spec, &err);
    CHECK_MSG(st == GR_OK, "%s", err.msg);
    if (st) return;
    gr_graph g;
    st = gr_graph_build(&spec, spec.model.input, spec.model.n_input, &g, &err);
    CHECK_MSG(st == GR_OK, "%s", err.msg);
    gr_opt_groups og;
    if (!st && (st = gr_opt_groups_make(&g, &spec, &og, &err)) == GR_OK) {
        check_tiling(&og, &g);
        CHECK_MSG(og.n == want_ranges, "%s: %d ranges, expected %d", optim, og.n, want_ranges);
        check(&og, &g);
        gr_opt_groups_free(&og);
    }
    CHECK_MSG(st == GR_OK, "%s", err.msg);
    if (g.tensors) gr_graph_free(&g);
    gr_spec_free(&spec);
}

static void check_default(const gr_opt_groups *og, const gr_graph *g) {
    expect(og, g, "dense0.weight", 1, 0.01, false); /* AdamW's default weight decay, on everything */
    expect(og, g, "batchnorm0.bias", 1, 0.01, false);
    CHECK(!og->any_frozen);
}

static void check_matrices(const gr_opt_groups *og, const gr_graph *g) {
    expect(og, g, "dense0.weight", 1, 0.1, false);
    expect(og, g, "dense0.bias", 1, 0, false);
    expect(og, g, "batchnorm0.weight", 1, 0, false);
    expect(og, g, "batchnorm0.bias", 1, 0, false);
    expect(og, g, "dense1.weight", 1, 0.1, false);
}

static void check_groups(const gr_opt_groups *og, const gr_graph *g) {
    expect(og, g, "dense0.weight", 1, 0.1, false);
    expect(og, g, "dense0.bias", 1, 0, true);            /* frozen (the first matching group wins) */
    expect(og, g, "batchnorm0.weight", 1, 0.5, false);   /* its own weight decay beats decay: matrices */
    expect(og, g, "batchnorm0.bias", 1, 0, true);        /* '*0.bias' too */
    expect(og, g, "dense1.weight", 0.25, 0.1, false);    /* lr x0.25, the decay rule's 0.1 */
    expect(og, g, "dense1.bias", 0.25, 0, false);
    CHECK(og->any_frozen);
}

/* A spec error at the group's line, or at the pattern's when it matches nothing. */
static void test_error(const char *optim, const char *want, bool at_graph) {
    gr_job_spec spec;
    gr_error err;
    gr_status st = load(optim, &spec, &err);
    if (at_graph && st == GR_OK) {
        gr_graph g;
        st = gr_graph_build(&spec, spec.model.input, spec.model.n_input, &g, &err);
        CHECK_MSG(st == GR_OK, "%s", err.msg);
        gr_opt_groups og;
        if (!st) {
            st = gr_opt_groups_make(&g, &spec, &og, &err);
            gr_graph_free(&g);
        }
        gr_spec_free(&spec);
    }
    CHECK_MSG(st == GR_ERR_USAGE, "%s: status %d, expected a usage error", optim, st);
    CHECK_STR_CONTAINS(err.msg, want);
}

int main(void) {
    test_groups("{type: adamw, lr: 0.001}", 1, check_default);
    test_groups("{type: sgd, lr: 0.1, weight_decay: 0.1, decay: matrices}", 4, check_matrices);
    test_groups("{type: sgd, lr: 0.1, weight_decay: 0.1, decay: matrices, groups: [{params: '*0.bias', frozen: "
                "true}, {params: dense1.*, lr_mult: 0.25}, {params: batchnorm0.weight, weight_decay: 0.5}]}", 6,
                check_groups);
    test_error("{type: sgd, lr: 0.1, groups: [{params: '*.bias'}, {params: 'fc.*', lr_mult: 2}]}",
               "optgroups.yaml:7:64: train.optimizer.groups[1].params: 'fc.*' matches no parameter of the model "
               "(they are named <layer>.<tensor>: dense0.weight, dense0.bias, batchnorm0.weight, batchnorm0.bias, "
               "...)", true);
    test_error("{type: sgd, lr: 0.1, groups: [{params: '*.bias'}, {params: 'dense1.bias', lr_mult: 2}]}",
               "optgroups.yaml:7:64: train.optimizer.groups[1].params: 'dense1.bias' takes no parameter: those it "
               "matches ('dense1.bias', ...) are taken by groups[0] ('*.bias') before it, and the first group "
               "that matches a parameter wins", true);
    test_error("{type: sgd, lr: 0.1, groups: [{params: '*.bias', lr: 2}]}",
               "train.optimizer.groups[0]: unknown key 'lr' (a group takes params, lr_mult, weight_decay, frozen)",
               false);
    test_error("{type: sgd, lr: 0.1, groups: [{params: '*.bias', lr_mult: 0}]}",
               "train.optimizer.groups[0].lr_mult: must be > 0 (freeze parameters with frozen: true)", false);
    test_error("{type: sgd, lr: 0.1, groups: [{lr_mult: 2}]}", "train.optimizer.groups[0]: params: required", false);
    test_error("{type: sgd, lr: 0.1, groups: ['*.bias']}", "train.optimizer.groups[0]: expected a map", false);
    test_error("{type: sgd, lr: 0.1, decay: some}", "train.optimizer.decay", false);
    return gr_test_report();
}
