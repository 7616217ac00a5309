/* gpt2_fixture.h — a GPT-2-shaped gr_graph built by hand (the parameters
 * only, with the names configs/gpt2-124m.yaml gives: wte, wpe, per block use
 * h<i> ln_1, c_attn, c_proj, ln_2, c_fc, mlp_proj, then ln_f; the LM head
 * tied to wte has no tensor), for tests/test_gpt2_import.c and
 * tests/tools/gpt2_import_dump.c. No op is run: every layer is a dense
 * layer in name only, so the fixture needs none of the embedding,
 * layernorm or attention ops. */
#ifndef GR_TEST_GPT2_FIXTURE_H
#define GR_TEST_GPT2_FIXTURE_H

#include <stdio.h>
#include <string.h>

#include "graph/graph.h"

static inline int g2_layer(gr_graph *g, const char *name) {
    GR_GROW(g->layers, g->cap_layers, g->n_layers + 1);
    gr_layer *l = &g->layers[g->n_layers];
    memset(l, 0, sizeof *l);
    snprintf(l->name, sizeof l->name, "%s", name);
    l->op = GR_OP_DENSE;
    l->node = -1;
    l->recompute = -1;
    return g->n_layers++;
}

/* A layer with a weight of shape [r, c] (c 0: [r]) and, when b > 0, a bias [b]. */
static inline void g2_add(gr_graph *g, const char *name, int64_t r, int64_t c, int64_t b) {
    int l = g2_layer(g, name);
    int64_t w[2] = {r, c};
    gr_graph_add_param(g, l, "weight", c ? 2 : 1, w);
    if (b) gr_graph_add_param(g, l, "bias", 1, &b);
}

/* The arenas' offsets, as the builder gives them (graph/build.c). */
static inline void g2_finish(gr_graph *g) { gr_graph_place_params(g); }

/* GPT-2's parameters: L block uses of width C, a wte of vocab rows, a wpe
 * of maxT rows (not finished: g2_finish after adding more). */
static inline void g2_gpt2_layers(gr_graph *g, int L, int64_t C, int64_t vocab, int64_t maxT) {
    memset(g, 0, sizeof *g);
    g->input = g->label = g->logits = g->loss_probs = g->loss_stats = g->metric_stats = -1;
    g->ad_node = -1;
    g2_add(g, "wte", vocab, C, 0);
    g2_add(g, "wpe", maxT, C, 0);
    for (int i = 0; i < L; i++) {
        char n[64];
        snprintf(n, sizeof n, "h%d.ln_1", i), g2_add(g, n, C, 0, C);
        snprintf(n, sizeof n, "h%d.c_attn", i), g2_add(g, n, 3 * C, C, 3 * C);
        snprintf(n, sizeof n, "h%d.c_proj", i), g2_add(g, n, C, C, C);
        snprintf(n, sizeof n, "h%d.ln_2", i), g2_add(g, n, C, 0, C);
        snprintf(n, sizeof n, "h%d.c_fc", i), g2_add(g, n, 4 * C, C, 4 * C);
        snprintf(n, sizeof n, "h%d.mlp_proj", i), g2_add(g, n, C, 4 * C, C);
    }
    g2_add(g, "ln_f", C, 0, C);
}

static inline void g2_gpt2(gr_graph *g, int L, int64_t C, int64_t vocab, int64_t maxT) {
    g2_gpt2_layers(g, L, C, vocab, maxT);
    g2_finish(g);
}

#endif
