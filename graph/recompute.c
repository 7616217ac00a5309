/* recompute.c — activation recomputation (gr_graph_recompute, graph.h).
 *
 * A recomputed block use keeps only what flows into it through the
 * backward pass: its forward nodes run a second time, as copies writing new
 * tensors, just before the first backward node of its layers, and the
 * backward nodes from there on read the copies. The originals are then
 * read by forward nodes only, so the memory planner's liveness ends them
 * after the forward pass and their bytes are reused; the copies live from
 * the recomputation to their last backward reader. Pure planning: nodes and
 * tensors only.
 *
 * The copies compute what the originals did (the same kernels on the same
 * inputs): a batchnorm's running statistics are updated once, by the copy
 * (the original has attrs.stats_later), so both read them as they were when
 * the pass began (statistics over processes shift by the running mean); a
 * dropout copy draws the same mask (it is a function of the run's key and
 * the layer). */
#include <stdlib.h>
#include <string.h>

#include "graph.h"

/* n uninitialized nodes at position at; the nodes from at on move up (no
 * node index refers to them: fwd and gr_layer.node point at forward nodes,
 * all before any backward node) */
static void gr_nodes_open(gr_graph *g, int at, int n) {
    GR_GROW(g->nodes, g->cap_nodes, g->n_nodes + n);
    memmove(&g->nodes[at + n], &g->nodes[at], (size_t)(g->n_nodes - at) * sizeof *g->nodes);
    g->n_nodes += n;
}

static bool gr_in_group(const gr_graph *g, const gr_node *nd, int group) {
    return nd->layer >= 0 && g->layers[nd->layer].recompute == group;
}

/* The copy of forward tensor t (an activation) for the recomputation. */
static int gr_recompute_tensor(gr_graph *g, int t, const int *map) {
    gr_tensor src = g->tensors[t]; /* copy: add_tensor may move the array */
    char name[GR_TNAME_MAX];
    snprintf(name, sizeof name, "%.*s@r", (int)sizeof name - 3, src.name);
    int c = gr_graph_add_tensor(g, name, src.kind, src.elem, src.ndim, src.shape, src.batched);
    gr_tensor *ct = &g->tensors[c];
    ct->layout = src.layout;
    ct->alias_of = src.alias_of >= 0 && map[src.alias_of] >= 0 ? map[src.alias_of] : src.alias_of;
    return c;
}

/* Group grp: the forward nodes whose results its backward reads, copied
 * before its first backward node. Its exits (results read by forward nodes
 * outside it: the block's output) stay as they are: they live until the
 * next layers' backward anyway. A copy is made only when a backward node or
 * another copy reads a result of it. */
static void gr_recompute_group(gr_graph *g, int grp, int **map, int *map_cap) {
    int first = -1;
    for (int i = g->n_forward; i < g->n_nodes && first < 0; i++)
        if (gr_in_group(g, &g->nodes[i], grp)) first = i;
    if (first < 0) return; /* nothing of it in backward */
    const int n_before = g->n_tensors;
    if (n_before * 2 > *map_cap) {
        *map = gr_xrealloc(*map, (size_t)n_before * 2 * sizeof **map);
        *map_cap = n_before * 2;
    }
    /* state[t]: 0 not the group's, 1 the group's, 2 an exit, 3 needed (read after the recomputation) */
    int *state = *map + n_before, *m = *map;
    for (int t = 0; t < n_before; t++) state[t] = 0, m[t] = -1;
    for (int i = 0; i < g->n_forward; i++)
        if (gr_in_group(g, &g->nodes[i], grp))
            for (int o = 0; o < g->nodes[i].nout; o++) state[g->nodes[i].out[o]] = 1;
    for (int i = 0; i < g->n_forward; i++)
        if (!gr_in_group(g, &g->nodes[i], grp))
            for (int k = 0; k < g->nodes[i].nin; k++)
                if (state[g->nodes[i].in[k]]) state[g->nodes[i].in[k]] = 2;
    for (int i = first; i < g->n_nodes; i++)
        for (int k = 0; k < g->nodes[i].nin; k++)
            if (state[g->nodes[i].in[k]] == 1) state[g->nodes[i].in[k]] = 3;
    /* the copies, last to first: a node is copied when a result of it is needed; its own inputs then are */
    int nc = 0;
    bool *copy = gr_xcalloc((size_t)g->n_forward + 1, sizeof *copy);
    for (int i = g->n_forward - 1; i >= 0; i--) {
        const gr_node *nd = &g->nodes[i];
        if (!gr_in_group(g, nd, grp)) continue;
        for (int o = 0; o < nd->nout && !copy[i]; o++) copy[i] = state[nd->out[o]] == 3;
        if (!copy[i]) continue;
        nc++;
        for (int k = 0; k < nd->nin; k++)
            if (state[nd->in[k]] == 1 || state[nd->in[k]] == 2) state[nd->in[k]] = 3;
    }
    if (nc == 0) {
        free(copy);
        return;
    }
    /* every result of a copied node gets a tensor of its own; backward reads the needed ones' copies */
    int *fw = gr_xmalloc((size_t)nc * sizeof *fw), k = 0;
    for (int i = 0; i < g->n_forward; i++)
        if (copy[i]) fw[k++] = i;
    for (int j = 0; j < nc; j++)
        for (int o = 0; o < g->nodes[fw[j]].nout; o++) {
            int t = g->nodes[fw[j]].out[o];
            int c = gr_recompute_tensor(g, t, *map); /* may move g->tensors, never *map */
            m[t] = c;
        }
    gr_nodes_open(g, first, nc); /* the forward nodes (before first) keep their indices */
    for (int j = 0; j < nc; j++) {
        gr_node c = g->nodes[fw[j]];
        c.fwd = -1;
        c.recomputed = true;
        for (int i = 0; i < c.nin; i++)
            if (m[c.in[i]] >= 0) c.in[i] = m[c.in[i]];
        for (int o = 0; o < c.nout; o++) c.out[o] = m[c.out[o]];
        if (gr_op_flags(c.op) & GR_OPF_RUNNING_STATS) /* the copy updates them */
            g->nodes[fw[j]].attrs.stats_later = true;
        g->nodes[first + j] = c;
    }
    for (int i = first + nc; i < g->n_nodes; i++) {
        gr_node *nd = &g->nodes[i];
        for (int in = 0; in < nd->nin; in++) {
            int t = nd->in[in];
            if (t < n_before && m[t] >= 0 && state[t] == 3) nd->in[in] = m[t];
        }
    }
    free(fw);
    free(copy);
}

void gr_graph_recompute(gr_graph *g) {
    GR_ASSERT(g->n_nodes > g->n_forward || g->n_forward == 0); /* after gr_autodiff */
    int groups = 0;
    for (int l = 0; l < g->n_layers; l++)
        if (g->layers[l].recompute + 1 > groups) groups = g->layers[l].recompute + 1;
    int *map = NULL, map_cap = 0;
    for (int grp = 0; grp < groups; grp++) gr_recompute_group(g, grp, &map, &map_cap);
    free(map);
}
