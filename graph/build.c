/* build.c — model section of the job spec -> forward graph + loss.
 *
 * Each item of model.layers is `- op`, or a one-op map `- op: {attrs}` with
 * optional `name:`, `input:` (an earlier layer's name; for add and concat a
 * list of them) and `repeat: N`. Each layer becomes one forward node whose
 * implementation parses its attrs and infers its output shape; errors point at
 * the YAML node.
 *
 * Blocks (model.blocks) are templates: `name: {args: {a: default}, layers:
 * [...]}`, used like an op (`- name: {a: 3}`, with repeat). A use is built
 * from a copy of the block's layers with every `$a` replaced by the
 * argument's value, in a scope of its own: inside, `input` is the use's
 * input and names refer to the block's own layers; layers are named
 * `<use>.<layer>`, the use being its `name:` or `<block><k>`. Later layers
 * can name the use, whose output is its last layer's.
 *
 * A dense layer's `tied: NAME` (a shared weight, op_dense.c) is resolved
 * here to an earlier dense or embedding layer: the scope's NAME first, then
 * the full name. */
#include "graph.h"
#include "tensor.h"
#include "split.h"
#include "names.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int gr_build_add_layer(gr_graph *g, const char *name, gr_op op) {
    GR_GROW(g->layers, g->cap_layers, g->n_layers + 1);
    gr_layer *l = &g->layers[g->n_layers];
    memset(l, 0, sizeof *l);
    snprintf(l->name, sizeof l->name, "%s", name);
    l->op = op;
    l->node = -1;
    l->recompute = -1;
    return g->n_layers++;
}

static gr_status gr_build_unknown_op(const gr_cfg *at, const char *key, const char *name,
                                     gr_error *err) {
    const char *best = NULL;
    int best_d = 3;
    char all[512] = "";
    size_t k = 0;
    for (int i = 0; i < GR_OP_COUNT; i++) {
        if (!(gr_op_flags(i) & GR_OPF_LAYER)) continue;
        int d = gr_edit_distance(name, gr_op_name(i));
        if (d < best_d) { best_d = d; best = gr_op_name(i); }
        k += (size_t)snprintf(all + k, sizeof all - k, "%s%s", k ? ", " : "", gr_op_name(i));
    }
    if (gr_edit_distance(name, "split") < best_d) best = "split"; /* the one item that is not an op (split.h) */
    if (best) return gr_cfg_error(err, at, key, "unknown op '%s' (did you mean '%s'?)", name, best);
    return gr_cfg_error(err, at, key, "unknown op '%s' (ops: %s, split)", name, all);
}

/* Splits one layer item into its op name, attrs node and options. */
typedef struct gr_layer_item {
    const char *op;
    gr_cfg op_at;           /* where to point errors about the op (its key) */
    const gr_cfg *attrs;    /* NULL = none given */
    const char *name;
    const gr_cfg *input;
    int64_t repeat;
    bool recompute;         /* a block use's `recompute: true` */
} gr_layer_item;

static gr_status gr_build_split_item(const gr_cfg *item, const char *key, gr_layer_item *li,
                                     gr_error *err) {
    memset(li, 0, sizeof *li);
    li->repeat = 1;
    if (item->kind == GR_CFG_SCALAR) {
        li->op = item->scalar;
        li->op_at = *item;
        return GR_OK;
    }
    if (item->kind != GR_CFG_MAP)
        return gr_cfg_error(err, item, key, "expected an op name or a map like '{dense: {units: 10}}'");
    for (int i = 0; i < item->n; i++) {
        const char *k = item->keys[i];
        const gr_cfg *v = item->items[i];
        char sub[720];
        snprintf(sub, sizeof sub, "%s.%s", key, k);
        if (strcmp(k, "name") == 0) {
            if (v->kind != GR_CFG_SCALAR || !v->scalar[0])
                return gr_cfg_error(err, v, sub, "expected a layer name");
            li->name = v->scalar;
        } else if (strcmp(k, "input") == 0) {
            li->input = v;
        } else if (strcmp(k, "repeat") == 0) {
            gr_status st = gr_cfg_int(v, sub, 1, 10000, &li->repeat, err);
            if (st) return st;
        } else if (strcmp(k, "recompute") == 0) {
            gr_status st = gr_cfg_bool(v, sub, &li->recompute, err);
            if (st) return st;
        } else if (li->op) {
            gr_cfg at = *item;
            at.line = item->key_line[i];
            at.col = item->key_col[i];
            return gr_cfg_error(err, &at, key, "a layer has one op, but '%s' and '%s' are both given",
                                li->op, k);
        } else {
            li->op = k;
            li->attrs = v;
            li->op_at = *item;
            li->op_at.line = item->key_line[i];
            li->op_at.col = item->key_col[i];
        }
    }
    if (!li->op) return gr_cfg_error(err, item, key, "no op given (e.g. '- relu' or '- dense: {units: 10}')");
    return GR_OK;
}

/* ---- scopes: the names `input:` can refer to ---- */

typedef struct gr_scope {
    char prefix[GR_NAME_MAX]; /* "" at the top, "bottleneck0." inside a block use */
    int input;                /* the tensor called `input`: the block's input (the model's at the top) */
    gr_names names;           /* local name -> tensor */
    int op_count[GR_OP_COUNT];/* for <op><k> names */
    int n_splits;             /* for split<k> (split.h) */
    int *block_uses;          /* per block: uses so far, for <block><k> names */
} gr_scope;

typedef struct gr_builder {
    const gr_job_spec *spec;
    gr_graph *g;
    bool infer;
    const gr_cfg *blocks;     /* model.blocks, or NULL */
    int stack[16];            /* blocks being expanded, outermost first */
    int depth;
    int recompute;            /* the recomputed block use being built (its layers' gr_layer.recompute); -1 */
    int n_recompute;          /* recomputed block uses so far */
    gr_names layer_names;     /* full layer name -> layer index, for duplicates */
    const struct gr_tp_plan *tp; /* a tensor group's part (gr_graph_io.tp); NULL: the whole model */
} gr_builder;

static void gr_scope_init(gr_scope *sc, const gr_builder *b, const char *prefix, int input) {
    memset(sc, 0, sizeof *sc);
    gr_names_init(&sc->names);
    snprintf(sc->prefix, sizeof sc->prefix, "%s", prefix);
    sc->input = input;
    sc->block_uses = gr_xcalloc((size_t)(b->blocks ? b->blocks->n : 0) + 1, sizeof *sc->block_uses);
}

static void gr_scope_free(gr_scope *sc) {
    gr_names_free(&sc->names);
    free(sc->block_uses);
}

/* Names are unique in a scope (the builder refuses duplicates first). */
static void gr_scope_add(gr_scope *sc, const char *name, int tensor) { gr_names_put(&sc->names, name, tensor); }

static int gr_scope_find(const gr_scope *sc, const char *name) {
    int t = gr_names_get(&sc->names, name);
    if (t >= 0) return t;
    return strcmp(name, "input") == 0 ? sc->input : -1;
}

/* Whether a layer of items[from..] is called name (for the message about
 * inputs that name later layers). */
static bool gr_named_later(const gr_cfg *items, int from, const char *name) {
    for (int i = from; i < items->n; i++) {
        const gr_cfg *v = items->items[i]->kind == GR_CFG_MAP ? gr_cfg_get(items->items[i], "name") : NULL;
        if (v && v->kind == GR_CFG_SCALAR && strcmp(v->scalar, name) == 0) return true;
    }
    return false;
}

/* The ops whose rows have flag into buf, the last after conj: "add, concat
 * and mul" (GR_OPF_JOIN, " and "). */
static void gr_build_ops_with(unsigned flag, const char *conj, char *buf, size_t n) {
    int m = 0, count = 0;
    for (int i = 0; i < GR_OP_COUNT; i++) count += (gr_op_flags(i) & flag) != 0;
    size_t k = 0;
    for (int i = 0; i < GR_OP_COUNT && k < n; i++) {
        if (!(gr_op_flags(i) & flag)) continue;
        const char *sep = m == 0 ? "" : m == count - 1 ? conj : ", ";
        k += (size_t)snprintf(buf + k, n - k, "%s%s", sep, gr_op_name(i));
        m++;
    }
}

/* The tensors a layer reads: the previous layer's output, or those `input:`
 * names (a name or, for the join ops, a list). */
static gr_status gr_build_inputs(const gr_scope *sc, const gr_cfg *items, int item, const gr_layer_item *li,
                                 bool join, const char *key, int prev, int *in, int *nin, gr_error *err) {
    if (!li->input) {
        in[0] = prev;
        *nin = 1;
        return GR_OK;
    }
    char sub[720];
    snprintf(sub, sizeof sub, "%s.input", key);
    const gr_cfg *v = li->input;
    if (v->kind == GR_CFG_MAP || (v->kind == GR_CFG_SEQ && !join)) {
        char joins[160] = "";
        if (v->kind == GR_CFG_SEQ) gr_build_ops_with(GR_OPF_JOIN, " and ", joins, sizeof joins);
        return gr_cfg_error(err, v, sub, "expected the name of an earlier layer%s%s%s",
                            joins[0] ? " (lists of inputs are for " : "", joins, joins[0] ? ")" : "");
    }
    int n = v->kind == GR_CFG_SEQ ? v->n : 1;
    if (n > GR_MAX_IN)
        return gr_cfg_error(err, v, sub, "%d inputs; at most %d can be joined by one layer", n, GR_MAX_IN);
    if (n == 0) return gr_cfg_error(err, v, sub, "expected a list of layer names");
    for (int k = 0; k < n; k++) {
        const gr_cfg *e = v->kind == GR_CFG_SEQ ? v->items[k] : v;
        if (e->kind != GR_CFG_SCALAR || !e->scalar[0])
            return gr_cfg_error(err, e, sub, "expected the name of an earlier layer");
        int t = gr_scope_find(sc, e->scalar);
        if (t < 0) {
            if (gr_named_later(items, item, e->scalar))
                return gr_cfg_error(err, e, sub, "'%s' is a later layer: inputs name earlier layers, so the "
                                    "model has no cycles", e->scalar);
            return gr_cfg_error(err, e, sub, "no earlier layer is named '%s'%s", e->scalar,
                                sc->prefix[0] ? " in this block (its input is called 'input')" : "");
        }
        in[k] = t;
    }
    *nin = n;
    return GR_OK;
}

static gr_status gr_build_seq(gr_builder *b, gr_scope *sc, const gr_cfg *layers, const char *key, int in,
                              int *out, gr_error *err);

/* ---- blocks ---- */

/* `$name` scalars of t that are not in args (or, when mark is given, marks
 * the args used). Returns the first unknown one, or NULL. */
static const gr_cfg *gr_block_refs(const gr_cfg *t, const gr_cfg *args, bool *mark) {
    if (t->kind == GR_CFG_SCALAR) {
        if (t->scalar[0] != '$' || t->quoted) return NULL;
        int i = args ? gr_cfg_find(args, t->scalar + 1) : -1;
        if (i < 0) return t;
        if (mark) mark[i] = true;
        return NULL;
    }
    for (int i = 0; i < t->n; i++) {
        const gr_cfg *u = gr_block_refs(t->items[i], args, mark);
        if (u) return u;
    }
    return NULL;
}

/* Checks every template once: {args: {...}, layers: [...]}, every `$x`
 * declared, every argument used. */
static gr_status gr_blocks_check(const gr_cfg *blocks, gr_error *err) {
    for (int i = 0; i < blocks->n; i++) {
        const char *name = blocks->keys[i];
        const gr_cfg *def = blocks->items[i];
        char key[300];
        snprintf(key, sizeof key, "model.blocks.%s", name);
        gr_cfg at = *blocks;
        at.line = blocks->key_line[i];
        at.col = blocks->key_col[i];
        if (gr_op_lookup(name) >= 0 || strcmp(name, "split") == 0)
            return gr_cfg_error(err, &at, key, "a block cannot take the name of the op '%s'", name);
        if (def->kind != GR_CFG_MAP)
            return gr_cfg_error(err, def, key, "expected {args: {...}, layers: [...]}");
        for (int k = 0; k < def->n; k++)
            if (strcmp(def->keys[k], "args") != 0 && strcmp(def->keys[k], "layers") != 0) {
                gr_cfg kat = *def;
                kat.line = def->key_line[k];
                kat.col = def->key_col[k];
                return gr_cfg_error(err, &kat, key, "unknown key '%s' (a block has args and layers)", def->keys[k]);
            }
        const gr_cfg *layers = gr_cfg_get(def, "layers"), *args = gr_cfg_get(def, "args");
        if (!layers || layers->kind != GR_CFG_SEQ || layers->n == 0)
            return gr_cfg_error(err, layers ? layers : def, key, "layers: expected a non-empty list of layers");
        if (args && args->kind != GR_CFG_MAP && !(args->kind == GR_CFG_SCALAR && !args->scalar[0]))
            return gr_cfg_error(err, args, key, "args: expected a map of arguments with their defaults");
        if (args && args->kind != GR_CFG_MAP) args = NULL;
        bool mark[256] = {false};
        if (args && args->n > (int)GR_ARRAY_LEN(mark))
            return gr_cfg_error(err, args, key, "args: at most %d arguments", (int)GR_ARRAY_LEN(mark));
        const gr_cfg *unknown = gr_block_refs(layers, args, mark);
        if (unknown)
            return gr_cfg_error(err, unknown, key, "%s: block '%s' has no such argument", unknown->scalar, name);
        for (int k = 0; args && k < args->n; k++)
            if (!mark[k]) {
                gr_cfg kat = *args;
                kat.line = args->key_line[k];
                kat.col = args->key_col[k];
                return gr_cfg_error(err, &kat, key, "argument '%s' is never used in the block's layers (no $%s)",
                                    args->keys[k], args->keys[k]);
            }
    }
    return GR_OK;
}

/* ---- the size of the expansion, known before anything is expanded ---- */

/* The most layers a model may expand to: 200 times ResNet-152's ~500 (conv,
 * batchnorm, relu, add), so no real model meets it, while nested repeats
 * (10,000 x 10,000 x ...) are refused in microseconds instead of building
 * 10^8 layers. */
#define GR_MAX_LAYERS 100000

/* Arguments in force while counting a block's layers: `$x` -> value. */
typedef struct gr_count_env {
    const char *const *names;
    const gr_cfg *const *values;
    int n;
} gr_count_env;

typedef struct gr_counter {
    const gr_cfg *blocks;
    int stack[16];            /* as gr_builder's: a cycle is the builder's to report */
    int depth;
} gr_counter;

static const gr_cfg *gr_count_arg(const gr_cfg *v, const gr_count_env *env) {
    if (v && v->kind == GR_CFG_SCALAR && !v->quoted && v->scalar[0] == '$')
        for (int k = 0; k < env->n; k++)
            if (strcmp(env->names[k], v->scalar + 1) == 0) return env->values[k];
    return v;
}

static gr_status gr_count_seq(gr_counter *c, const gr_cfg *seq, const gr_count_env *env, const char *key,
                              int64_t *total, gr_error *err);

/* Layers one use of block bi expands to, with the use's arguments (given,
 * NULL or a map) read in env. Malformed uses and cycles count 1: building
 * them reports the error. */
static gr_status gr_count_use(gr_counter *c, int bi, const gr_cfg *given, const gr_count_env *env,
                              int64_t *n, gr_error *err) {
    *n = 1;
    for (int d = 0; d < c->depth; d++)
        if (c->stack[d] == bi) return GR_OK;
    if (c->depth == (int)GR_ARRAY_LEN(c->stack)) return GR_OK;
    const gr_cfg *def = c->blocks->items[bi];
    const gr_cfg *layers = gr_cfg_get(def, "layers"), *args = gr_cfg_get(def, "args");
    if (args && args->kind != GR_CFG_MAP) args = NULL;
    const int na = args ? args->n : 0;
    const char **names = gr_xcalloc((size_t)na + 1, sizeof *names);
    const gr_cfg **values = gr_xcalloc((size_t)na + 1, sizeof *values);
    for (int k = 0; k < na; k++) names[k] = args->keys[k], values[k] = args->items[k];
    for (int i = 0; given && given->kind == GR_CFG_MAP && i < given->n; i++) {
        int k = args ? gr_cfg_find(args, given->keys[i]) : -1;
        if (k >= 0) values[k] = gr_count_arg(given->items[i], env);
    }
    gr_count_env inner = {names, values, na};
    char key[400];
    snprintf(key, sizeof key, "model.blocks.%s.layers", c->blocks->keys[bi]);
    c->stack[c->depth++] = bi;
    gr_status st = gr_count_seq(c, layers, &inner, key, n, err);
    c->depth--;
    free(names);
    free(values);
    return st;
}

/* Layers of the sequence `seq` (model.layers or a block's) under env, into
 * *total; an error at the item where the count passes GR_MAX_LAYERS. */
static gr_status gr_count_seq(gr_counter *c, const gr_cfg *seq, const gr_count_env *env, const char *key,
                              int64_t *total, gr_error *err) {
    *total = 0;
    if (!seq || seq->kind != GR_CFG_SEQ) return GR_OK;
    for (int i = 0; i < seq->n; i++) {
        const gr_cfg *item = seq->items[i];
        const char *op = NULL;
        const gr_cfg *attrs = NULL;
        gr_cfg at = *item;
        int64_t repeat = 1;
        if (item->kind == GR_CFG_SCALAR) {
            const gr_cfg *v = gr_count_arg(item, env);
            op = v->kind == GR_CFG_SCALAR ? v->scalar : NULL;
        } else if (item->kind == GR_CFG_MAP) {
            for (int k = 0; k < item->n; k++) {
                const char *name = item->keys[k];
                if (strcmp(name, "recompute") == 0) continue;
                if (strcmp(name, "repeat") == 0) {
                    gr_error ignored; /* a bad repeat is the builder's to report */
                    if (gr_cfg_int(gr_count_arg(item->items[k], env), "repeat", 1, 10000, &repeat, &ignored))
                        repeat = 1;
                } else if (strcmp(name, "name") != 0 && strcmp(name, "input") != 0 && !op) {
                    op = name;
                    attrs = item->items[k];
                    at.line = item->key_line[k];
                    at.col = item->key_col[k];
                }
            }
        }
        const int bi = op && c->blocks ? gr_cfg_find(c->blocks, op) : -1;
        int64_t per = op && !strcmp(op, "split") ? gr_split_count(gr_count_arg(attrs, env)) : 1;
        if (bi >= 0) {
            gr_status st = gr_count_use(c, bi, gr_count_arg(attrs, env), env, &per, err);
            if (st) return st;
        }
        *total += per * repeat; /* per <= GR_MAX_LAYERS, repeat <= 10,000: no overflow */
        if (*total > GR_MAX_LAYERS) {
            char ikey[512], before[32], each[32], cap[32], what[200];
            snprintf(ikey, sizeof ikey, "%s[%d]", key, i);
            gr_fmt_count(*total - per * repeat, before, sizeof before);
            gr_fmt_count(per, each, sizeof each);
            gr_fmt_count(GR_MAX_LAYERS, cap, sizeof cap);
            if (bi >= 0)
                snprintf(what, sizeof what, "block '%s' of %s layers%s", op, each, repeat > 1 ? "," : "");
            else
                snprintf(what, sizeof what, "'%s'%s", op ? op : "?", repeat > 1 ? "," : "");
            if (repeat > 1) {
                char tot[32];
                gr_fmt_count(per * repeat, tot, sizeof tot);
                size_t len = strlen(what);
                snprintf(what + len, sizeof what - len, " repeat %lld = %s layers", (long long)repeat, tot);
            }
            char whole[160];
            if (c->depth) snprintf(whole, sizeof whole, "block '%s'", c->blocks->keys[c->stack[c->depth - 1]]);
            else snprintf(whole, sizeof whole, "the model");
            return gr_cfg_error(err, &at, ikey, "%s grows past %s layers here (%s%s%s); a model has at most %s "
                                "layers once blocks and repeats are expanded", whole, cap,
                                *total > per * repeat ? before : "", *total > per * repeat ? " before this item, "
                                "which adds " : "this item adds ", what, cap);
        }
    }
    return GR_OK;
}

/* Replaces every `$x` scalar under t by a copy of the value of x. */
static void gr_block_subst(gr_cfg *t, const char *const *names, const gr_cfg *const *values, int n) {
    for (int i = 0; i < t->n; i++) {
        gr_cfg *c = t->items[i];
        if (c->kind == GR_CFG_SCALAR && c->scalar[0] == '$' && !c->quoted) {
            for (int k = 0; k < n; k++)
                if (strcmp(names[k], c->scalar + 1) == 0) {
                    t->items[i] = gr_cfg_clone(values[k]);
                    gr_cfg_free(c);
                    break;
                }
        } else {
            gr_block_subst(c, names, values, n);
        }
    }
}

/* One use of block bi: its layers, with the arguments substituted, built in
 * a scope of their own under the use's name. */
static gr_status gr_build_use(gr_builder *b, gr_scope *sc, int bi, const char *use, const gr_layer_item *li,
                              const char *key, int in, int *out, gr_error *err) {
    const char *bname = b->blocks->keys[bi];
    const gr_cfg *def = b->blocks->items[bi];
    const gr_cfg *layers = gr_cfg_get(def, "layers"), *args = gr_cfg_get(def, "args");
    if (args && args->kind != GR_CFG_MAP) args = NULL;
    for (int d = 0; d < b->depth; d++)
        if (b->stack[d] == bi || b->depth == (int)GR_ARRAY_LEN(b->stack)) {
            char chain[512];
            size_t k = 0;
            for (int e = d; e < b->depth && k < sizeof chain; e++)
                k += (size_t)snprintf(chain + k, sizeof chain - k, "%s -> ", b->blocks->keys[b->stack[e]]);
            return gr_cfg_error(err, &li->op_at, key, "block '%s' uses itself (%s%s): a cycle", bname, chain,
                                bname);
        }
    int n = args ? args->n : 0;
    const char **names = gr_xcalloc((size_t)n + 1, sizeof *names);
    const gr_cfg **values = gr_xcalloc((size_t)n + 1, sizeof *values);
    for (int k = 0; k < n; k++) names[k] = args->keys[k], values[k] = args->items[k];
    gr_status st = GR_OK;
    gr_cfg *copy = NULL;
    const gr_cfg *given = li->attrs;
    if (given && given->kind == GR_CFG_SCALAR && !given->scalar[0]) given = NULL;
    if (given && given->kind != GR_CFG_MAP) {
        st = gr_cfg_error(err, given, key, "block '%s' takes a map of arguments, e.g. {%s: ...}", bname,
                          n ? names[0] : "arg");
        goto done;
    }
    for (int i = 0; given && i < given->n; i++) {
        int k = args ? gr_cfg_find(args, given->keys[i]) : -1;
        if (k < 0) {
            char list[256] = "";
            size_t len = 0;
            for (int j = 0; j < n && len < sizeof list; j++)
                len += (size_t)snprintf(list + len, sizeof list - len, "%s%s", j ? ", " : "", names[j]);
            gr_cfg at = *given;
            at.line = given->key_line[i];
            at.col = given->key_col[i];
            st = gr_cfg_error(err, &at, key, "block '%s' has no argument '%s' (%s%s)", bname, given->keys[i],
                              n ? "its arguments: " : "it takes none", list);
            goto done;
        }
        values[k] = given->items[i];
    }
    copy = gr_cfg_clone(layers);
    gr_block_subst(copy, names, values, n);
    {
        char prefix[2 * GR_NAME_MAX + 2];
        snprintf(prefix, sizeof prefix, "%s%s.", sc->prefix, use);
        if (strlen(prefix) >= GR_NAME_MAX) {
            st = gr_cfg_error(err, &li->op_at, key, "the layer names under '%s' grow too long (blocks nest "
                              "too deep)", prefix);
            goto done;
        }
        gr_scope inner;
        gr_scope_init(&inner, b, prefix, in);
        char bkey[400];
        snprintf(bkey, sizeof bkey, "model.blocks.%s.layers", bname);
        b->stack[b->depth++] = bi;
        st = gr_build_seq(b, &inner, copy, bkey, in, out, err);
        b->depth--;
        gr_scope_free(&inner);
    }
done:
    gr_cfg_free(copy);
    free(names);
    free(values);
    return st;
}

/* ---- layers ---- */

/* An op's `tied: NAME` (dense): the layer NAME of this scope, else the layer
 * whose full name is NAME (one inside an earlier block use, or the model's
 * from inside a block); it must be earlier and of an op whose weight can be
 * shared (GR_OPF_TIEABLE: dense, embedding). Sets a->tied_layer; the op's
 * infer checks the shapes. */
static gr_status gr_build_tied(gr_builder *b, const gr_scope *sc, const gr_cfg *items, int item,
                               const gr_layer_item *li, int op, gr_attrs *a, const char *akey, gr_error *err) {
    const gr_cfg *v = gr_cfg_get(li->attrs, "tied");
    char sub[700], full[2 * GR_NAME_MAX];
    snprintf(sub, sizeof sub, "%s.tied", akey);
    snprintf(full, sizeof full, "%s%s", sc->prefix, a->tied);
    int l = gr_names_get(&b->layer_names, full);
    if (l < 0) l = gr_names_get(&b->layer_names, a->tied);
    if (l < 0) {
        if (li->name && strcmp(li->name, a->tied) == 0)
            return gr_cfg_error(err, v, sub, "a layer cannot be tied to itself ('%s')", a->tied);
        if (gr_named_later(items, item + 1, a->tied))
            return gr_cfg_error(err, v, sub, "'%s' is a later layer: tied names an earlier layer, whose "
                                "weight this one uses", a->tied);
        return gr_cfg_error(err, v, sub, "no earlier layer is named '%s'%s", a->tied,
                            sc->prefix[0] ? " in this block, nor has that full name" : "");
    }
    if (!(gr_op_flags(b->g->layers[l].op) & GR_OPF_TIEABLE)) {
        char ops[160] = "";
        gr_build_ops_with(GR_OPF_TIEABLE, " or ", ops, sizeof ops);
        return gr_cfg_error(err, v, sub, "'%s' is a %s layer; a %s layer can only be tied to a %s layer",
                            b->g->layers[l].name, gr_op_name(b->g->layers[l].op), gr_op_name(op), ops);
    }
    a->tied_layer = l;
    return GR_OK;
}

static gr_status gr_build_layer(gr_builder *b, gr_scope *sc, const gr_layer_item *li, int op,
                                const gr_attrs *attrs, const char *local, const char *akey, const int *in, int nin,
                                int *out, const gr_cfg *item, const char *key, gr_error *err) {
    gr_graph *g = b->g;
    char name[2 * GR_NAME_MAX];
    snprintf(name, sizeof name, "%s%s", sc->prefix, local);
    if (strlen(name) >= GR_NAME_MAX)
        return gr_cfg_error(err, item, key, "layer name '%s' is longer than %d characters", name, GR_NAME_MAX - 1);
    if (gr_names_get(&b->layer_names, name) >= 0 || gr_scope_find(sc, local) >= 0)
        return gr_cfg_error(err, item, key, "duplicate layer name '%s'", name);
    int l = gr_build_add_layer(g, name, (gr_op)op);
    g->layers[l].recompute = b->recompute;
    g->layers[l].at_set = strcmp(item->file, "--set") == 0; /* item may be a block's expanded copy */
    g->layers[l].at_line = item->line;
    g->layers[l].at_col = item->col;
    gr_names_put(&b->layer_names, name, l);
    int outs[1] = {-1};
    int nd = gr_graph_add_node(g, (gr_op)op, l, in, nin, outs, 0);
    g->nodes[nd].attrs = *attrs;
    if (b->tp) gr_tp_part_attrs(b->tp, l, &g->nodes[nd].attrs); /* a tensor group's part: units, heads */
    g->layers[l].node = nd;
    if (b->infer) {
        gr_status st = gr_op_impl_of((gr_op)op)->infer(g, nd, &li->op_at, akey, err);
        if (st) return st;
    } else {
        gr_tensor x = g->tensors[in[0]];
        const int y = gr_graph_add_tensor(g, name, GR_TK_ACT, GR_F32, x.ndim, x.shape, true); /* before indexing */
        g->nodes[nd].out[0] = y;
        g->nodes[nd].nout = 1;
    }
    *out = g->nodes[nd].out[0];
    gr_scope_add(sc, local, *out);
    return GR_OK;
}

/* A split item (split.h): one slice layer per part, named by the split;
 * *out its last part. */
static gr_status gr_build_split(gr_builder *b, gr_scope *sc, const gr_cfg *layers, int i, const gr_layer_item *li,
                                int prev, const char *ikey, int *out, gr_error *err) {
    const gr_cfg *item = layers->items[i];
    if (li->repeat > 1) return gr_cfg_error(err, item, ikey, "a split cannot be repeated");
    if (li->name)
        return gr_cfg_error(err, item, ikey, "a split names its parts: {split: {axis: -1, sizes: [...], names: "
                            "[a, b, ...]}}, not name: %s", li->name);
    int ins[GR_MAX_IN], nin = 0;
    gr_status st = gr_build_inputs(sc, layers, i + 1, li, false, ikey, prev, ins, &nin, err);
    if (st) return st;
    char akey[640], base[32];
    snprintf(akey, sizeof akey, "%s.split", ikey);
    snprintf(base, sizeof base, "split%d", sc->n_splits++);
    gr_split sp;
    if ((st = gr_split_parse(li->attrs, akey, b->infer ? &b->g->tensors[ins[0]] : NULL, base, &sp, err))) return st;
    for (int p = 0; p < sp.n && !st; p++) {
        gr_attrs a;
        memset(&a, 0, sizeof a);
        a.axis = sp.axis;
        a.start = sp.start[p];
        a.end = sp.end[p];
        st = gr_build_layer(b, sc, li, GR_OP_SLICE, &a, sp.names[p], akey, ins, 1, out, item, ikey, err);
    }
    return st;
}

static gr_status gr_build_seq(gr_builder *b, gr_scope *sc, const gr_cfg *layers, const char *key, int in,
                              int *out, gr_error *err) {
    gr_status st;
    int cur = in;
    for (int i = 0; i < layers->n; i++) {
        const gr_cfg *item = layers->items[i];
        char ikey[512];
        snprintf(ikey, sizeof ikey, "%s[%d]", key, i);
        gr_layer_item li;
        if ((st = gr_build_split_item(item, ikey, &li, err))) return st;
        if (li.name && li.repeat > 1) return gr_cfg_error(err, item, ikey, "a named layer cannot be repeated");
        if (li.name && (strchr(li.name, '.') || strcmp(li.name, "input") == 0))
            return gr_cfg_error(err, item, ikey, "'%s' cannot name a layer (no dots; 'input' is taken)", li.name);
        if (strcmp(li.op, "split") == 0) {
            if ((st = gr_build_split(b, sc, layers, i, &li, cur, ikey, &cur, err))) return st;
            continue;
        }
        const int bi = b->blocks ? gr_cfg_find(b->blocks, li.op) : -1;
        const int op = bi >= 0 ? -1 : gr_op_lookup(li.op);
        if (bi < 0 && op < 0) return gr_build_unknown_op(&li.op_at, ikey, li.op, err);
        if (li.recompute && bi < 0)
            return gr_cfg_error(err, item, ikey, "recompute: a block use's key ('%s' is an op, not a block)", li.op);
        const bool join = op >= 0 && (gr_op_flags((gr_op)op) & GR_OPF_JOIN);
        int ins[GR_MAX_IN], nin = 0;
        if ((st = gr_build_inputs(sc, layers, i + 1, &li, join, ikey, cur, ins, &nin, err))) return st;
        char akey[640];
        snprintf(akey, sizeof akey, "%s.%s", ikey, li.op);
        gr_attrs attrs;
        memset(&attrs, 0, sizeof attrs);
        if (op >= 0 && (st = gr_op_parse_attrs((gr_op)op, &attrs, li.attrs, akey, err))) return st;
        if (op >= 0 && attrs.tied[0] && (st = gr_build_tied(b, sc, layers, i, &li, op, &attrs, akey, err)))
            return st;
        for (int64_t r = 0; r < li.repeat; r++) {
            char local[GR_NAME_MAX];
            /* <op><k> and <block><k> count named layers too (DESIGN 1.4) */
            const int k = op >= 0 ? sc->op_count[op]++ : sc->block_uses[bi]++;
            if (li.name) snprintf(local, sizeof local, "%s", li.name);
            else snprintf(local, sizeof local, "%s%d", li.op, k);
            if (op >= 0) {
                st = gr_build_layer(b, sc, &li, op, &attrs, local, akey, ins, nin, &cur, item, ikey, err);
            } else {
                if (gr_scope_find(sc, local) >= 0)
                    return gr_cfg_error(err, item, ikey, "duplicate layer name '%s%s'", sc->prefix, local);
                /* recomputed: this use (each repetition its own), given or by train.recompute: blocks
                 * (top-level uses); a use nested in a recomputed one belongs to it */
                const int outer = b->recompute;
                if (outer < 0 && (li.recompute || (b->spec->train.recompute_blocks && b->depth == 0)))
                    b->recompute = b->n_recompute++;
                st = gr_build_use(b, sc, bi, local, &li, akey, ins[0], &cur, err);
                b->recompute = outer;
                if (!st && nin > 1)
                    st = gr_cfg_error(err, li.input, ikey, "a block takes one input");
                if (!st) gr_scope_add(sc, local, cur);
            }
            if (st) return st;
            ins[0] = cur; /* a repeated layer feeds the next repetition */
            nin = 1;
        }
    }
    *out = cur;
    return GR_OK;
}

/* infer = false: parse only (no shapes known); every layer's output is a
 * placeholder copy of its input so `input:` references still resolve. */
static gr_status gr_graph_build_ex(const gr_job_spec *spec, const gr_graph_io *io, bool infer, gr_graph *g,
                                   gr_error *err) {
    memset(g, 0, sizeof *g);
    g->ad_node = -1;
    g->metric_stats = -1;
    /* micro_batch auto (0): planned at the whole batch until the runner picks one that fits */
    g->micro_batch = spec->train.micro_batch > 0 ? spec->train.micro_batch : spec->train.batch_size;
    g->seed = spec->seed;
    g->decode_len = io->decode_len;
    gr_status st = GR_OK;
    gr_builder b = {.spec = spec, .g = g, .infer = infer, .recompute = -1, .tp = io->tp};
    if (spec->model.blocks && spec->model.blocks->kind == GR_CFG_MAP && spec->model.blocks->n > 0) {
        b.blocks = spec->model.blocks;
        if ((st = gr_blocks_check(b.blocks, err))) goto fail;
    }
    {
        gr_counter c = {.blocks = b.blocks};
        const gr_count_env none = {NULL, NULL, 0};
        int64_t n_layers;
        if ((st = gr_count_seq(&c, spec->model.layers, &none, "model.layers", &n_layers, err))) goto fail;
    }
    gr_names_init(&b.layer_names);
    gr_graph_add_io(g, io);

    const gr_cfg *layers = spec->model.layers;
    GR_ASSERT(layers && layers->kind == GR_CFG_SEQ);
    int cur = g->input;
    {
        gr_scope top;
        gr_scope_init(&top, &b, "", g->input);
        for (int i = 0; i < g->n_inputs; i++) /* the first is `input` too */
            if (strcmp(g->tensors[g->inputs[i]].name, "input") != 0)
                gr_scope_add(&top, g->tensors[g->inputs[i]].name, g->inputs[i]);
        st = gr_build_seq(&b, &top, layers, "model.layers", g->input, &cur, err);
        gr_scope_free(&top);
        if (st) goto fail;
    }

    /* the loss and the metrics (head.c): read only when shapes are not inferred */
    if (!infer) {
        if ((st = gr_graph_head_check(spec, err))) goto fail;
        goto done;
    }
    if ((st = gr_graph_build_head(g, spec, cur, err))) goto fail;
    g->n_forward = g->n_nodes;

    gr_graph_place_params(g);

    /* a job trains something: without parameters the optimizer has nothing
     * to update (graphs built for gradchecks of parameter-free ops, from
     * specs that no file gave, may have none) */
    if (g->n_weights == 0 && spec->root) {
        st = gr_cfg_error(err, layers, "model.layers", "the model has no trainable parameters (it needs a "
                          "dense, conv or batchnorm layer to train)");
        goto fail;
    }

    /* a layer whose output nothing reads still has its parameters updated
     * (weight decay, momentum: their gradient is zero, where PyTorch would
     * leave a parameter without .grad alone): almost surely a wrong `input:` */
    {
        bool *read = gr_xcalloc((size_t)g->n_tensors, sizeof *read);
        for (int j = 0; j < g->n_forward; j++)
            for (int k = 0; k < g->nodes[j].nin; k++) read[g->nodes[j].in[k]] = true;
        for (int i = 0; i < g->n_forward; i++) {
            const gr_node *nd = &g->nodes[i];
            if (nd->layer < 0 || read[nd->out[0]]) continue;
            fprintf(stderr, "gpurun: %s: warning: the output of layer %s is never used%s\n", spec->file,
                    g->layers[nd->layer].name, g->layers[nd->layer].n_params ? " (its parameters are still "
                    "updated: weight decay and momentum apply)" : "");
        }
        free(read);
    }
done:
    gr_names_free(&b.layer_names);
    return GR_OK;
fail:
    gr_names_free(&b.layer_names);
    gr_graph_free(g);
    return st;
}

/* One input `input` of per-sample shape in_shape (float) and the labels
 * (int32, one per sample): today's HDF5 layout. */
static gr_graph_io gr_graph_io_default(const int64_t *in_shape, int in_ndim) {
    gr_graph_io io;
    memset(&io, 0, sizeof io);
    io.n_inputs = 1;
    io.in[0] = (gr_io_tensor){.name = "input", .elem = GR_F32, .ndim = in_ndim};
    for (int i = 0; i < in_ndim && i < GR_MAX_DIMS - 1; i++) io.in[0].shape[i] = in_shape[i];
    io.target = (gr_io_tensor){.name = "label", .elem = GR_I32, .ndim = 0};
    return io;
}

gr_status gr_graph_build(const gr_job_spec *spec, const int64_t *in_shape, int in_ndim,
                         gr_graph *g, gr_error *err) {
    GR_ASSERT(in_ndim >= 0 && in_ndim < GR_MAX_DIMS);
    const gr_graph_io io = gr_graph_io_default(in_shape, in_ndim);
    return gr_graph_build_ex(spec, &io, true, g, err);
}

gr_status gr_graph_build_io(const gr_job_spec *spec, const gr_graph_io *io, gr_graph *g, gr_error *err) {
    return gr_graph_build_ex(spec, io, true, g, err);
}

gr_status gr_graph_check(const gr_job_spec *spec, gr_error *err) {
    gr_graph g;
    int64_t one[1] = {1};
    bool shapes = spec->model.n_input > 0 && !spec->model.inputs;
    gr_graph_io io = gr_graph_io_default(shapes ? spec->model.input : one, shapes ? spec->model.n_input : 1);
    gr_io_decl d[GR_MAX_IO];
    int nd = 0;
    gr_status st = gr_io_decls_read(spec, false, d, &nd, err);
    if (st) return st;
    for (int i = 0; i < nd; i++) io.in[i] = (gr_io_tensor){.name = d[i].name, .elem = GR_F32, .ndim = 1, .shape = {1}};
    if (nd) io.n_inputs = nd;
    st = gr_graph_build_ex(spec, &io, shapes, &g, err);
    if (st == GR_OK) gr_graph_free(&g);
    return st;
}
