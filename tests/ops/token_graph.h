/* token_graph.h — models on int32 token ids, as a language model's job
 * declares them (model.inputs: [tokens] of an integer field, per-token
 * int32 targets; gr_graph_build_io): a layer list on the input `tokens`
 * ([n, T] ids, or [n] with T 0), ending in logits [n, T, C] (or [n, C])
 * under softmax cross-entropy. Shared by gradcheck.h (gr_gc_token_run),
 * test_op_embed.c (its bodies' and PyTorch parity's runs), test_tied.c
 * and test_cuda_vs_cpu.c. */
#ifndef GR_TEST_TOKEN_GRAPH_H
#define GR_TEST_TOKEN_GRAPH_H

#include <string.h>

#include "gr_test.h"
#include "exec/exec.h"
#include "graph/graph.h"

typedef struct gr_tk_case {
    const char *name;
    const char *layers;      /* YAML flow list */
    int64_t T;               /* tokens a sample; 0: one id a sample */
    int64_t ids;             /* ids drawn from [0, ids): fewer than the tokens makes them repeat */
} gr_tk_case;

typedef struct gr_tk_model {
    gr_cfg *layers;
    gr_job_spec spec;
    gr_graph g;
    bool built;
} gr_tk_model;

/* Builds c at micro-batch n, its backward, and stores it at precision prec. */
static inline gr_status gr_tk_build(gr_tk_model *tm, const gr_tk_case *c, int64_t n, gr_precision prec,
                                    gr_error *err) {
    memset(tm, 0, sizeof *tm);
    gr_status st = gr_cfg_parse_text(c->layers, "tokens.yaml", 1, 1, &tm->layers, err);
    if (st) return st;
    snprintf(tm->spec.file, sizeof tm->spec.file, "tokens.yaml");
    tm->spec.model.layers = tm->layers;
    tm->spec.train.micro_batch = tm->spec.train.batch_size = n;
    snprintf(tm->spec.train.loss, sizeof tm->spec.train.loss, "softmax_cross_entropy");
    tm->spec.seed = 7;
    gr_graph_io io;
    memset(&io, 0, sizeof io);
    io.n_inputs = 1;
    const int nd = c->T > 0 ? 1 : 0;
    io.in[0] = (gr_io_tensor){.name = "tokens", .elem = GR_I32, .ndim = nd, .shape = {c->T}};
    io.target = (gr_io_tensor){.name = "next", .elem = GR_I32, .ndim = nd, .shape = {c->T}};
    if ((st = gr_graph_build_io(&tm->spec, &io, &tm->g, err))) return st;
    tm->built = true;
    gr_autodiff(&tm->g, true); /* the ids get no gradient even so */
    gr_graph_set_precision(&tm->g, prec);
    return GR_OK;
}

static inline void gr_tk_free(gr_tk_model *tm) {
    if (tm->built) gr_graph_free(&tm->g);
    gr_cfg_free(tm->layers);
    memset(tm, 0, sizeof *tm);
}

/* Tokens of n samples (the input's elements, the target's alike). */
static inline int64_t gr_tk_numel(const gr_graph *g, int64_t n) {
    return n * gr_tensor_sample_numel(&g->tensors[g->input]);
}

/* ids uniform over [0, c->ids) and targets over the classes, from key */
static inline void gr_tk_fill(const gr_tk_case *c, const gr_graph *g, int64_t n, uint64_t key, int32_t *ids,
                              int32_t *next) {
    for (int64_t i = 0; i < gr_tk_numel(g, n); i++) {
        ids[i] = (int32_t)(gr_hash64(key, (uint64_t)i) % (uint64_t)c->ids);
        next[i] = (int32_t)(gr_hash64(key ^ 0x7A56ull, (uint64_t)i) % (uint64_t)g->n_classes);
    }
}

/* One pass of p on n samples of ids and targets; the mean loss, stats[0] / stats[1]. */
static inline double gr_tk_run(gr_plan *p, int64_t n, const int32_t *ids, const int32_t *next,
                               const gr_exec_ctx *ctx) {
    const gr_graph *g = p->g;
    gr_backend *be = p->m->be;
    const size_t bytes = (size_t)gr_tk_numel(g, n) * sizeof(int32_t);
    gr_backend_upload(be, gr_plan_ptr(p, g->input), ids, bytes);
    gr_backend_upload(be, gr_plan_ptr(p, g->label), next, bytes);
    gr_plan_run(p, n, ctx);
    float st[2];
    gr_backend_download(be, st, gr_plan_ptr(p, g->loss_stats), sizeof st);
    return (double)st[0] / (double)st[1];
}

/* The PARAM tensor called name ("wte.weight"), or -1. */
static inline int gr_tk_param(const gr_graph *g, const char *name) {
    for (int i = 0; i < g->n_tensors; i++)
        if (g->tensors[i].kind == GR_TK_PARAM && strcmp(g->tensors[i].name, name) == 0) return i;
    return -1;
}

#endif
