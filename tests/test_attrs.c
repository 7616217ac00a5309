/* test_attrs.c — the op table and the generic attribute parser (graph/attrs.c):
 * ops.def's rows as gr_op_name/flags/bwd/lookup report them; a table's
 * defaults, bounds, int-or-[h, w] pairs, floats that must be positive,
 * required keys, the usage message for attributes that are not a map, and
 * the unknown-key message made from the table, each at its file:line:col;
 * then every layer op's own table through gr_op_parse_attrs (its defaults
 * and its exact "<op> takes ..." list); the losses' and the metric's tables
 * (read by the builder from train.loss) and their infer's shape errors. */
#include <string.h>

#include "gr_test.h"
#include "graph/graph.h"

/* ---- the op table ---- */

static void test_rows(void) {
    CHECK(strcmp(gr_op_name(GR_OP_DENSE), "dense") == 0);
    CHECK(strcmp(gr_op_name(GR_OP_SOFTMAX_CE), "softmax_cross_entropy") == 0);
    CHECK(gr_op_lookup("conv") == GR_OP_CONV);
    CHECK(gr_op_lookup("relu_bwd") == -1);              /* layer ops only */
    CHECK(gr_op_lookup("softmax_cross_entropy") == -1);
    CHECK(gr_op_bwd(GR_OP_RELU) == GR_OP_RELU_BWD);
    CHECK(gr_op_bwd(GR_OP_MAXPOOL) == GR_OP_MAXPOOL_BWD);
    CHECK(gr_op_bwd(GR_OP_RELU_BWD) == GR_OP_NONE);
    CHECK(gr_op_flags(GR_OP_SOFTMAX_CE) & GR_OPF_FP32_OUT);
    int joins = 0, fp32 = 0;
    for (int op = 0; op < GR_OP_COUNT; op++) {
        unsigned f = gr_op_flags((gr_op)op);
        const gr_op_impl *impl = gr_op_impl_of((gr_op)op);
        joins += (f & GR_OPF_JOIN) != 0;
        fp32 += (f & GR_OPF_FP32_OUT) != 0;
        if (f & GR_OPF_BACKWARD) {
            CHECK_MSG(!impl, "%s: a backward op has no implementation", gr_op_name((gr_op)op));
            continue;
        }
        if (f & GR_OPF_METRIC) { /* never differentiated */
            CHECK_MSG(impl && impl->infer && !impl->backward && gr_op_bwd((gr_op)op) == GR_OP_NONE, "%s: a metric",
                      gr_op_name((gr_op)op));
            continue;
        }
        CHECK_MSG(impl && impl->backward, "%s: no backward", gr_op_name((gr_op)op));
        CHECK_MSG(!(f & GR_OPF_LAYER) || (impl && impl->infer), "%s: a layer op needs infer", gr_op_name((gr_op)op));
        CHECK_MSG(gr_op_flags((gr_op)gr_op_bwd((gr_op)op)) & GR_OPF_BACKWARD, "%s: bwd", gr_op_name((gr_op)op));
    }
    CHECK(joins == 3 && (gr_op_flags(GR_OP_ADD) & GR_OPF_JOIN) && (gr_op_flags(GR_OP_CONCAT) & GR_OPF_JOIN) &&
          (gr_op_flags(GR_OP_MUL) & GR_OPF_JOIN));
    CHECK(gr_op_lookup("reshape") == GR_OP_RESHAPE && (gr_op_flags(GR_OP_RESHAPE) & GR_OPF_VIEW));
    CHECK(gr_op_bwd(GR_OP_PERMUTE) == GR_OP_PERMUTE_BWD && gr_op_bwd(GR_OP_SLICE) == GR_OP_SLICE_BWD);
    CHECK(gr_op_lookup("add_bwd_reduce") == -1 && (gr_op_flags(GR_OP_ADD_BWD_REDUCE) & GR_OPF_BACKWARD));
    CHECK(fp32 == 4); /* the losses and the metric */
    CHECK(gr_op_flags(GR_OP_MSE) & GR_OPF_LOSS && gr_op_flags(GR_OP_BCE_WITH_LOGITS) & GR_OPF_LOSS);
    CHECK(gr_op_flags(GR_OP_ACCURACY) & GR_OPF_METRIC && gr_op_lookup("accuracy") == -1 && gr_op_lookup("mse") == -1);
    CHECK(gr_op_bwd(GR_OP_MSE) == GR_OP_MSE_BWD && gr_op_bwd(GR_OP_BCE_WITH_LOGITS) == GR_OP_BCE_WITH_LOGITS_BWD);
    CHECK(strcmp(gr_op_name(GR_OP_BCE_WITH_LOGITS), "bce_with_logits") == 0);
    /* the embedding family; the ops whose weight a dense layer's tied: may name */
    CHECK(gr_op_lookup("embedding") == GR_OP_EMBEDDING && gr_op_lookup("pos_embedding") == GR_OP_POS_EMBEDDING);
    CHECK(gr_op_bwd(GR_OP_EMBEDDING) == GR_OP_EMBEDDING_BWD);
    CHECK(gr_op_bwd(GR_OP_POS_EMBEDDING) == GR_OP_POS_EMBEDDING_BWD);
    CHECK((gr_op_flags(GR_OP_POS_EMBEDDING_BWD) & GR_OPF_VIEW) && gr_op_lookup("pos_embedding_bwd_params") == -1);
    int tieable = 0;
    for (int op = 0; op < GR_OP_COUNT; op++) tieable += (gr_op_flags((gr_op)op) & GR_OPF_TIEABLE) != 0;
    CHECK(tieable == 2 && (gr_op_flags(GR_OP_DENSE) & GR_OPF_TIEABLE) &&
          (gr_op_flags(GR_OP_EMBEDDING) & GR_OPF_TIEABLE));
}

/* ---- the generic parser on a table of every kind ---- */

static const gr_attr_def t_defs[] = {
    GR_ATTR("units", units, 1, 100, 0, GR_ATTR_REQUIRED),
    GR_ATTR("kernel", kernel, 1, 8, 3, 0),
    GR_ATTR("padding", padding, 0, 8, 0, 0),
    GR_ATTR("eps", eps, 0.0, 1.0, 0.5, GR_ATTR_POSITIVE),
    GR_ATTR("bias", bias, 0, 0, 1, 0),
};
static const gr_attr_table t_table = GR_ATTR_TABLE(t_defs, "t needs attributes, e.g. {units: 1}", NULL);
static const gr_attr_def t_opt_defs[] = {
    GR_ATTR("axis", axis, 1, 1, 1, 0),
};
static const gr_attr_table t_opt = GR_ATTR_TABLE(t_opt_defs, "expected attributes like {axis: 1}",
                                                 ", which must be 1");

/* Reads text (flow YAML on line 4 of t.yaml, from column 1; "" = no
 * attributes at all) through table t; the message when it fails. */
static gr_status t_read(const gr_attr_table *t, const char *text, gr_attrs *a, gr_error *err) {
    memset(a, 0, sizeof *a);
    memset(err, 0, sizeof *err);
    gr_cfg *c = NULL;
    if (text[0] && gr_cfg_parse_text(text, "t.yaml", 4, 1, &c, err)) return GR_ERR_INTERNAL;
    gr_status st = gr_attrs_read("t", t, a, c, "model.layers[0].t", err);
    gr_cfg_free(c);
    return st;
}

static void t_expect(const gr_attr_table *t, const char *text, const char *msg) {
    gr_attrs a;
    gr_error err;
    gr_status st = t_read(t, text, &a, &err);
    CHECK_MSG(st == GR_ERR_USAGE && strcmp(err.msg, msg) == 0, "%s: status %d, message\n  %s\nwanted\n  %s", text,
              st, err.msg, msg);
}

static void test_parser(void) {
    gr_attrs a;
    gr_error err;
    /* defaults, then the given keys; a pair from one int or a [h, w] list */
    CHECK(t_read(&t_table, "{units: 7}", &a, &err) == GR_OK);
    CHECK(a.units == 7 && a.kernel[0] == 3 && a.kernel[1] == 3 && a.padding[0] == 0 && a.eps == 0.5 && a.bias);
    CHECK(t_read(&t_table, "{kernel: 5, units: 100, padding: [1, 2], eps: 1e-3, bias: false}", &a, &err) == GR_OK);
    CHECK(a.units == 100 && a.kernel[0] == 5 && a.kernel[1] == 5 && a.padding[0] == 1 && a.padding[1] == 2);
    CHECK(a.eps == 1e-3 && !a.bias);
    CHECK(t_read(&t_table, "{units: 1, kernel: [8, 1], padding: 0}", &a, &err) == GR_OK);
    CHECK(a.units == 1 && a.kernel[0] == 8 && a.kernel[1] == 1);
    /* bounds, each side of a pair its own key */
    t_expect(&t_table, "{units: 0}", "t.yaml:4:9: model.layers[0].t.units: must be >= 1, got 0");
    t_expect(&t_table, "{units: 101}",
             "t.yaml:4:9: model.layers[0].t.units: must be <= 100, got 101");
    t_expect(&t_table, "{units: 1, kernel: [2, 9]}",
             "t.yaml:4:24: model.layers[0].t.kernel[1]: must be <= 8, got 9");
    t_expect(&t_table, "{units: 1, kernel: [2, 2, 2]}",
             "t.yaml:4:20: model.layers[0].t.kernel: expected an integer or a [h, w] list of two integers");
    t_expect(&t_table, "{units: 1, eps: 2}", "t.yaml:4:17: model.layers[0].t.eps: must be in [0, 1], got 2");
    t_expect(&t_table, "{units: 1, eps: 0}", "t.yaml:4:17: model.layers[0].t.eps: eps must be positive");
    t_expect(&t_table, "{units: 1, bias: maybe}",
             "t.yaml:4:18: model.layers[0].t.bias: expected true or false, got 'maybe'");
    /* required keys, the usage of a table with one, unknown keys at the key */
    t_expect(&t_table, "{kernel: 2}", "t.yaml:4:1: model.layers[0].t: units: required attribute missing");
    t_expect(&t_table, "3", "t.yaml:4:1: model.layers[0].t: t needs attributes, e.g. {units: 1}");
    t_expect(&t_table, "{units: 1, unitz: 2}",
             "t.yaml:4:12: model.layers[0].t.unitz: unknown attribute (t takes units, kernel, padding, eps, bias)");
    /* no required key: nothing given is the defaults; the note ends the list */
    CHECK(t_read(&t_opt, "", &a, &err) == GR_OK && a.axis == 1);
    CHECK(t_read(&t_opt, "{}", &a, &err) == GR_OK && a.axis == 1);
    t_expect(&t_opt, "[1]", "t.yaml:4:1: model.layers[0].t: expected attributes like {axis: 1}");
    t_expect(&t_opt, "{axis: 2}", "t.yaml:4:8: model.layers[0].t.axis: must be <= 1, got 2");
    t_expect(&t_opt, "{dim: 1}", "t.yaml:4:2: model.layers[0].t.dim: unknown attribute (t takes axis, which must be 1)");
    /* no table: no attributes */
    CHECK(t_read(NULL, "", &a, &err) == GR_OK);
    CHECK(t_read(NULL, "{}", &a, &err) == GR_OK);
    t_expect(NULL, "{kernel: 2}", "t.yaml:4:1: model.layers[0].t: t takes no attributes");
}

/* ---- every layer op's own table ---- */

static gr_status op_read(gr_op op, const char *text, gr_attrs *a, gr_error *err) {
    memset(a, 0, sizeof *a);
    memset(err, 0, sizeof *err);
    gr_cfg *c = NULL;
    if (text[0] && gr_cfg_parse_text(text, "m.yaml", 1, 1, &c, err)) return GR_ERR_INTERNAL;
    gr_status st = gr_op_parse_attrs(op, a, c, "k", err);
    gr_cfg_free(c);
    return st;
}

static void op_unknown(gr_op op, const char *text, const char *takes) {
    gr_attrs a;
    gr_error err;
    gr_status st = op_read(op, text, &a, &err);
    char want[256];
    snprintf(want, sizeof want, "unknown attribute (%s)", takes);
    CHECK_MSG(st == GR_ERR_USAGE && strstr(err.msg, want), "%s: %s", gr_op_name(op), err.msg);
}

static void test_ops(void) {
    gr_attrs a;
    gr_error err;
    CHECK(op_read(GR_OP_DENSE, "{units: 3}", &a, &err) == GR_OK && a.units == 3 && a.bias);
    CHECK(op_read(GR_OP_CONV, "{filters: 4, kernel: 3}", &a, &err) == GR_OK);
    CHECK(a.filters == 4 && a.kernel[1] == 3 && a.stride[0] == 1 && a.stride[1] == 1 && a.padding[0] == 0);
    CHECK(a.groups == 1 && a.bias);
    CHECK(op_read(GR_OP_MAXPOOL, "{kernel: [3, 2]}", &a, &err) == GR_OK);
    CHECK(a.stride[0] == 3 && a.stride[1] == 2); /* stride: the kernel */
    CHECK(op_read(GR_OP_AVGPOOL, "{kernel: 3, stride: 1, padding: 1}", &a, &err) == GR_OK);
    CHECK(a.stride[0] == 1 && a.padding[1] == 1 && a.count_include_pad);
    CHECK(op_read(GR_OP_BATCHNORM, "", &a, &err) == GR_OK && a.momentum == 0.1 && a.eps == 1e-5);
    CHECK(op_read(GR_OP_LAYERNORM, "", &a, &err) == GR_OK && a.eps == 1e-5 && a.bias);
    CHECK(op_read(GR_OP_LAYERNORM, "{eps: 1e-6, bias: false}", &a, &err) == GR_OK && a.eps == 1e-6 && !a.bias);
    CHECK(op_read(GR_OP_LAYERNORM, "{eps: 1}", &a, &err) == GR_OK && a.eps == 1.0);
    CHECK(op_read(GR_OP_GELU_TANH, "", &a, &err) == GR_OK);
    CHECK(op_read(GR_OP_CONCAT, "", &a, &err) == GR_OK && a.axis == 1);
    CHECK(op_read(GR_OP_CONCAT, "{axis: -1}", &a, &err) == GR_OK && a.axis == -1); /* resolved at infer */
    CHECK(op_read(GR_OP_RESHAPE, "{shape: [4, -1, 2]}", &a, &err) == GR_OK && a.shape.n == 3 && a.shape.v[0] == 4 &&
          a.shape.v[1] == -1 && a.shape.v[2] == 2);
    CHECK(op_read(GR_OP_PERMUTE, "{axes: [0, 2, 1, -1]}", &a, &err) == GR_OK && a.axes.n == 4 && a.axes.v[3] == -1);
    CHECK(op_read(GR_OP_SLICE, "{axis: 2, end: -1}", &a, &err) == GR_OK && a.axis == 2 && a.start == 0 &&
          a.end == -1);
    CHECK(op_read(GR_OP_MUL, "", &a, &err) == GR_OK);
    CHECK(op_read(GR_OP_DROPOUT, "{rate: 0.25}", &a, &err) == GR_OK && a.rate == 0.25);
    CHECK(op_read(GR_OP_RELU, "", &a, &err) == GR_OK);
    CHECK(op_read(GR_OP_ATTENTION, "{heads: 4}", &a, &err) == GR_OK && a.heads == 4 && a.causal);
    CHECK(op_read(GR_OP_ATTENTION, "{heads: 1, causal: false}", &a, &err) == GR_OK && !a.causal);
    CHECK(op_read(GR_OP_ATTENTION, "{heads: 0}", &a, &err) == GR_ERR_USAGE && strstr(err.msg, "k.heads"));
    CHECK(op_read(GR_OP_EMBEDDING, "{vocab: 50304, dim: 768}", &a, &err) == GR_OK && a.vocab == 50304 &&
          a.dim == 768 && a.init_std == 1.0); /* nn.Embedding's N(0, 1) */
    CHECK(op_read(GR_OP_EMBEDDING, "{vocab: 16777216, dim: 1, init_std: 0.02}", &a, &err) == GR_OK &&
          a.init_std == 0.02);
    CHECK(op_read(GR_OP_POS_EMBEDDING, "{max_len: 1024}", &a, &err) == GR_OK && a.max_len == 1024 && a.init_std == 1.0);
    CHECK(op_read(GR_OP_POS_EMBEDDING, "{max_len: 1, init_std: 0.5}", &a, &err) == GR_OK && a.init_std == 0.5);
    op_unknown(GR_OP_DENSE, "{unitz: 1}", "dense takes units, bias, tied, transpose");
    op_unknown(GR_OP_CONV, "{x: 1}", "conv takes filters, kernel, stride, padding, groups, bias");
    op_unknown(GR_OP_MAXPOOL, "{x: 1}", "maxpool takes kernel, stride, padding");
    op_unknown(GR_OP_AVGPOOL, "{x: 1}", "avgpool takes kernel, stride, padding, count_include_pad");
    op_unknown(GR_OP_BATCHNORM, "{x: 1}", "batchnorm takes momentum, eps");
    op_unknown(GR_OP_LAYERNORM, "{elementwise_affine: true}", "layernorm takes eps, bias");
    op_unknown(GR_OP_DROPOUT, "{x: 1}", "dropout takes rate");
    op_unknown(GR_OP_ATTENTION, "{head: 1}", "attention takes heads, causal");
    op_unknown(GR_OP_CONCAT, "{x: 1}", "concat takes axis");
    op_unknown(GR_OP_RESHAPE, "{x: 1}", "reshape takes shape");
    op_unknown(GR_OP_PERMUTE, "{dims: [0, 1]}", "permute takes axes");
    op_unknown(GR_OP_SLICE, "{x: 1}", "slice takes axis, start, end");
    op_unknown(GR_OP_EMBEDDING, "{vocab: 3, dim: 2, std: 1}", "embedding takes vocab, dim, init_std");
    op_unknown(GR_OP_POS_EMBEDDING, "{max_len: 3, len: 1}", "pos_embedding takes max_len, init_std");
    CHECK(op_read(GR_OP_MUL, "{x: 1}", &a, &err) == GR_ERR_USAGE && strstr(err.msg, "k: mul takes no attributes"));
    CHECK(op_read(GR_OP_GELU_TANH, "{approximate: tanh}", &a, &err) == GR_ERR_USAGE &&
          strstr(err.msg, "k: gelu_tanh takes no attributes"));
    /* the checks between attributes, after the table */
    CHECK(op_read(GR_OP_CONV, "{filters: 6, kernel: 3, groups: 4}", &a, &err) == GR_ERR_USAGE);
    CHECK(strcmp(err.msg, "m.yaml:1:1: k: filters 6 are not divisible by groups 4") == 0);
    CHECK(op_read(GR_OP_MAXPOOL, "{kernel: 3, padding: 2}", &a, &err) == GR_ERR_USAGE);
    CHECK(strcmp(err.msg, "m.yaml:1:1: k: padding 2 is more than half the kernel 3 (it must be at most 1)") == 0);
    /* the list attributes and the shape ops' rules */
    static const struct { gr_op op; const char *text, *want; } bad[] = {
        {GR_OP_RESHAPE, "", "k: reshape needs attributes, e.g. {shape: [4, -1]} (per sample)"},
        {GR_OP_RESHAPE, "{shape: 4}", "m.yaml:1:9: k.shape: expected a list of 1 to 4 integers, e.g. [2, 3]"},
        {GR_OP_RESHAPE, "{shape: []}", "m.yaml:1:9: k.shape: expected a list of 1 to 4 integers, e.g. [2, 3]"},
        {GR_OP_RESHAPE, "{shape: [1, 2, 3, 4, 5]}", "k.shape: expected a list of 1 to 4 integers"},
        {GR_OP_RESHAPE, "{shape: [2, x]}", "m.yaml:1:13: k.shape[1]: "},
        {GR_OP_RESHAPE, "{shape: [2, -2]}", "k.shape[1]: must be >= -1, got -2"},
        {GR_OP_RESHAPE, "{shape: [2, 0]}", "m.yaml:1:1: k: reshape: shape[1] is 0"},
        {GR_OP_RESHAPE, "{shape: [-1, -1]}", "m.yaml:1:1: k: reshape: shape has more than one -1"},
        {GR_OP_RESHAPE, "{shape: [1, 2, 3, 4]}", "reshape: shape has 4 axes, at most 3 per sample (the batch axis makes 4)"},
        {GR_OP_PERMUTE, "{}", "m.yaml:1:1: k: axes: required attribute missing"},
        {GR_OP_PERMUTE, "{axes: [0, 4]}", "k.axes[1]: must be <= 3, got 4"},
        {GR_OP_SLICE, "{axis: 1}", "end: required attribute missing"},
        {GR_OP_SLICE, "{end: 1}", "axis: required attribute missing"},
        {GR_OP_CONCAT, "{axis: 4}", "k.axis: must be <= 3, got 4"},
        {GR_OP_CONCAT, "{axis: -5}", "k.axis: must be >= -4, got -5"},
        {GR_OP_EMBEDDING, "", "k: embedding needs attributes, e.g. {vocab: 50304, dim: 768}"},
        {GR_OP_EMBEDDING, "{dim: 4}", "m.yaml:1:1: k: vocab: required attribute missing"},
        {GR_OP_EMBEDDING, "{vocab: 4}", "k: dim: required attribute missing"},
        {GR_OP_EMBEDDING, "{vocab: 0, dim: 4}", "k.vocab: must be >= 1, got 0"},
        {GR_OP_EMBEDDING, "{vocab: 16777217, dim: 4}", "k.vocab: must be <= 16777216, got 16777217"},
        {GR_OP_EMBEDDING, "{vocab: 4, dim: 0}", "k.dim: must be >= 1, got 0"},
        {GR_OP_EMBEDDING, "{vocab: 4, dim: 2, init_std: 0}", "k.init_std: init_std must be positive"},
        {GR_OP_EMBEDDING, "{vocab: 4, dim: 2, init_std: -1}", "k.init_std: must be in [0, 1000000], got -1"},
        {GR_OP_POS_EMBEDDING, "", "k: pos_embedding needs attributes, e.g. {max_len: 1024}"},
        {GR_OP_POS_EMBEDDING, "{init_std: 0.02}", "k: max_len: required attribute missing"},
        {GR_OP_POS_EMBEDDING, "{max_len: 0}", "k.max_len: must be >= 1, got 0"},
        {GR_OP_POS_EMBEDDING, "{max_len: 16777217}", "k.max_len: must be <= 16777216, got 16777217"},
        {GR_OP_POS_EMBEDDING, "{max_len: 8, init_std: 0}", "k.init_std: init_std must be positive"},
        {GR_OP_LAYERNORM, "{eps: 0}", "m.yaml:1:7: k.eps: eps must be positive"},
        {GR_OP_LAYERNORM, "{eps: -1e-5}", "m.yaml:1:7: k.eps: must be in [0, 1], got -1e-5"},
        {GR_OP_LAYERNORM, "{eps: 1.01}", "m.yaml:1:7: k.eps: must be in [0, 1], got 1.01"},
        {GR_OP_LAYERNORM, "{bias: false, epsilon: 1e-5}", "m.yaml:1:15: k.epsilon: unknown attribute (layernorm takes "
         "eps, bias)"},
        {GR_OP_LAYERNORM, "[1e-5]", "m.yaml:1:1: k: expected a map of attributes, e.g. {eps: 1e-5, bias: true}"},
    };
    for (size_t i = 0; i < GR_ARRAY_LEN(bad); i++) {
        gr_status st = op_read(bad[i].op, bad[i].text, &a, &err);
        CHECK_MSG(st == GR_ERR_USAGE && strstr(err.msg, bad[i].want), "%s %s: got '%s', want '%s'",
                  gr_op_name(bad[i].op), bad[i].text, err.msg, bad[i].want);
    }
}

/* ---- the losses and the metric: attributes (from train.loss) and shapes ---- */

static gr_status loss_read(gr_op op, const char *text, gr_attrs *a, gr_error *err) {
    memset(a, 0, sizeof *a);
    memset(err, 0, sizeof *err);
    gr_cfg *c = NULL;
    if (text[0] && gr_cfg_parse_text(text, "j.yaml", 9, 9, &c, err)) return GR_ERR_INTERNAL;
    gr_status st = gr_attrs_read(gr_op_name(op), gr_op_impl_of(op)->attrs, a, c, "train.loss", err);
    gr_cfg_free(c);
    return st;
}

static void loss_expect(gr_op op, const char *text, const char *msg) {
    gr_attrs a;
    gr_error err;
    gr_status st = loss_read(op, text, &a, &err);
    CHECK_MSG(st == GR_ERR_USAGE && strcmp(err.msg, msg) == 0, "%s %s: status %d, message\n  %s\nwanted\n  %s",
              gr_op_name(op), text, st, err.msg, msg);
}

static void test_loss_attrs(void) {
    gr_attrs a;
    gr_error err;
    CHECK(loss_read(GR_OP_SOFTMAX_CE, "", &a, &err) == GR_OK && a.label_smoothing == 0.0 && a.ignore_index == -100);
    CHECK(loss_read(GR_OP_SOFTMAX_CE, "{ignore_index: 0, label_smoothing: 0.1}", &a, &err) == GR_OK);
    CHECK(a.ignore_index == 0 && a.label_smoothing == 0.1);
    CHECK(loss_read(GR_OP_ACCURACY, "", &a, &err) == GR_OK && a.top_k == 1 && a.ignore_index == -100);
    CHECK(loss_read(GR_OP_ACCURACY, "{top_k: 5, ignore_index: 3}", &a, &err) == GR_OK && a.top_k == 5 &&
          a.ignore_index == 3);
    CHECK(loss_read(GR_OP_MSE, "", &a, &err) == GR_OK && loss_read(GR_OP_BCE_WITH_LOGITS, "{}", &a, &err) == GR_OK);
    loss_expect(GR_OP_SOFTMAX_CE, "{label_smoothing: 1.5}",
                "j.yaml:9:27: train.loss.label_smoothing: must be in [0, 1], got 1.5");
    loss_expect(GR_OP_SOFTMAX_CE, "{ignore_index: 3000000000}",
                "j.yaml:9:24: train.loss.ignore_index: must be <= 2147483647, got 3000000000");
    loss_expect(GR_OP_SOFTMAX_CE, "{ignore: 1}", "j.yaml:9:10: train.loss.ignore: unknown attribute "
                "(softmax_cross_entropy takes label_smoothing, ignore_index)");
    loss_expect(GR_OP_ACCURACY, "{top_k: 0}", "j.yaml:9:17: train.loss.top_k: must be >= 1, got 0");
    loss_expect(GR_OP_ACCURACY, "{k: 5}",
                "j.yaml:9:10: train.loss.k: unknown attribute (accuracy takes top_k, ignore_index)");
    loss_expect(GR_OP_MSE, "{reduction: sum}", "j.yaml:9:9: train.loss: mse takes no attributes");
}

/* op on a prediction [4, 3, 5] and a target of tshape (ndim tn) and type te;
 * infer's status, its message in err */
static gr_status loss_infer(gr_op op, const int64_t *tshape, int tn, gr_elem te, int64_t top_k, gr_error *err) {
    gr_graph g;
    memset(&g, 0, sizeof g);
    memset(err, 0, sizeof *err);
    int64_t xs[3] = {4, 3, 5};
    int in[2];
    in[0] = gr_graph_add_tensor(&g, "input", GR_TK_INPUT, GR_F32, 3, xs, true);
    in[1] = gr_graph_add_tensor(&g, "label", GR_TK_LABEL, te, tn, tshape, true);
    int nd = gr_graph_add_node(&g, op, -1, in, 2, NULL, 0);
    g.nodes[nd].attrs.top_k = top_k;
    gr_status st = gr_op_impl_of(op)->infer(&g, nd, NULL, "train.loss", err);
    if (!st) { /* the outputs: softmax CE's probabilities, then the unbatched [2] stats */
        const gr_node *n = &g.nodes[nd];
        const gr_tensor *s = &g.tensors[n->out[n->nout - 1]];
        CHECK(n->nout == (op == GR_OP_SOFTMAX_CE ? 2 : 1) && s->kind == GR_TK_STAT && s->ndim == 1 &&
              s->shape[0] == 2 && !s->batched && s->elem == GR_F32);
        if (op == GR_OP_SOFTMAX_CE) CHECK(g.tensors[n->out[0]].ndim == 3 && g.tensors[n->out[0]].shape[2] == 5);
    }
    gr_graph_free(&g);
    return st;
}

static void test_loss_shapes(void) {
    gr_error err;
    const int64_t tok[2] = {4, 3}, same[3] = {4, 3, 5}, wrong[2] = {4, 5};
    CHECK(loss_infer(GR_OP_SOFTMAX_CE, tok, 2, GR_I32, 0, &err) == GR_OK);
    CHECK(loss_infer(GR_OP_ACCURACY, tok, 2, GR_I32, 5, &err) == GR_OK);
    CHECK(loss_infer(GR_OP_MSE, same, 3, GR_F32, 0, &err) == GR_OK);
    CHECK(loss_infer(GR_OP_BCE_WITH_LOGITS, same, 3, GR_F32, 0, &err) == GR_OK);
    CHECK(loss_infer(GR_OP_SOFTMAX_CE, wrong, 2, GR_I32, 0, &err) == GR_ERR_USAGE);
    CHECK_MSG(strcmp(err.msg, "train.loss: softmax_cross_entropy: the prediction is [n, 3, 5] and the target int32 "
                     "[n, 5]; it needs int32 class targets shaped like the prediction without its last axis (the "
                     "classes)") == 0, "%s", err.msg);
    CHECK(loss_infer(GR_OP_MSE, same, 3, GR_I32, 0, &err) == GR_ERR_USAGE);
    CHECK_MSG(strcmp(err.msg, "train.loss: mse: the prediction is [n, 3, 5] and the target int32 [n, 3, 5]; it "
                     "needs fp32 targets shaped like the prediction") == 0, "%s", err.msg);
    CHECK(loss_infer(GR_OP_ACCURACY, tok, 2, GR_I32, 6, &err) == GR_ERR_USAGE);
    CHECK_MSG(strcmp(err.msg, "train.loss: accuracy: top_k 6 is more than the 5 classes") == 0, "%s", err.msg);
}

int main(void) {
    test_rows();
    test_parser();
    test_ops();
    test_loss_attrs();
    test_loss_shapes();
    return gr_test_report();
}
