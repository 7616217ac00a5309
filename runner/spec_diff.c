/* spec_diff.c — see spec_diff.h. Both specs are flattened into sorted
 * "dotted.path" -> value lists (sequence items by index), then merged. */
#include "spec_diff.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../graph/spec.h"

/* Keys (or prefixes ending in '.') free to change between restarts. */
static const char *const gr_diff_free[] = {
    "name", "device", "deterministic", "cuda_graph", "cudnn_benchmark", "log.", "checkpoint.", "eval.",
    "data.workers", "data.prefetch", "data.cache", "parallel.", "train.steps", "train.epochs",
};

typedef struct gr_kv {
    char *key, *val;
} gr_kv;

typedef struct gr_flat {
    gr_kv *kv;
    int n, cap;
} gr_flat;

static void gr_flat_add(gr_flat *f, const char *key, const char *val) {
    if (f->n == f->cap) {
        f->cap = f->cap ? 2 * f->cap : 64;
        f->kv = gr_xrealloc(f->kv, (size_t)f->cap * sizeof *f->kv);
    }
    f->kv[f->n++] = (gr_kv){gr_xstrdup(key), gr_xstrdup(val)};
}

static void gr_flat_walk(gr_flat *f, const gr_cfg *node, char *path, size_t len, size_t cap) {
    if (node->kind == GR_CFG_SCALAR) {
        gr_flat_add(f, path, node->scalar ? node->scalar : "");
        return;
    }
    if (node->n == 0) gr_flat_add(f, path, node->kind == GR_CFG_MAP ? "{}" : "[]");
    for (int i = 0; i < node->n; i++) {
        int w = node->kind == GR_CFG_MAP ? snprintf(path + len, cap - len, "%s%s", len ? "." : "", node->keys[i])
                                         : snprintf(path + len, cap - len, "%s%d", len ? "." : "", i);
        size_t l2 = w > 0 && len + (size_t)w < cap ? len + (size_t)w : cap - 1;
        gr_flat_walk(f, node->items[i], path, l2, cap);
        path[len] = '\0';
    }
}

static int gr_kv_cmp(const void *a, const void *b) { return strcmp(((const gr_kv *)a)->key, ((const gr_kv *)b)->key); }

static gr_status gr_flat_make(const char *yaml, const char *file, gr_flat *f, gr_error *err) {
    memset(f, 0, sizeof *f);
    gr_cfg *root = NULL;
    gr_status st = gr_cfg_parse_text(yaml, file, 1, 1, &root, err);
    if (st) return st;
    char path[1024] = "";
    gr_flat_walk(f, root, path, 0, sizeof path);
    gr_cfg_free(root);
    if (f->n) qsort(f->kv, (size_t)f->n, sizeof *f->kv, gr_kv_cmp);
    return GR_OK;
}

static void gr_flat_free(gr_flat *f) {
    for (int i = 0; i < f->n; i++) free(f->kv[i].key), free(f->kv[i].val);
    free(f->kv);
}

static bool gr_diff_is_free(const char *key) {
    for (size_t i = 0; i < sizeof gr_diff_free / sizeof *gr_diff_free; i++) {
        const char *p = gr_diff_free[i];
        size_t n = strlen(p);
        if (p[n - 1] == '.' ? strncmp(key, p, n) == 0 : strcmp(key, p) == 0) return true;
    }
    return false;
}

int gr_spec_diff(const char *ckpt_yaml, const char *job_yaml, char *out, size_t n) {
    out[0] = '\0';
    gr_flat a, b;
    gr_error e;
    if (gr_flat_make(ckpt_yaml, "checkpoint spec", &a, &e)) {
        snprintf(out, n, "its spec does not parse: %s", e.msg);
        return -1;
    }
    if (gr_flat_make(job_yaml, "job spec", &b, &e)) {
        gr_flat_free(&a);
        snprintf(out, n, "the job's spec does not parse: %s", e.msg);
        return -1;
    }
    int diffs = 0, i = 0, k = 0;
    size_t len = 0;
    while (i < a.n || k < b.n) {
        int c = i >= a.n ? 1 : k >= b.n ? -1 : strcmp(a.kv[i].key, b.kv[k].key);
        const char *key = c <= 0 ? a.kv[i].key : b.kv[k].key;
        const char *va = c <= 0 ? a.kv[i].val : "(absent)", *vb = c >= 0 ? b.kv[k].val : "(absent)";
        if (c <= 0) i++;
        if (c >= 0) k++;
        if (gr_diff_is_free(key) || (c == 0 && strcmp(va, vb) == 0)) continue;
        if (++diffs <= 6 && len < n) {
            int w = snprintf(out + len, n - len, "%s%s (checkpoint %s, job %s)", len ? "; " : "", key, va, vb);
            if (w > 0) len += (size_t)w;
        }
    }
    if (diffs > 6 && len < n) snprintf(out + len, n - len, "; and %d more", diffs - 6);
    gr_flat_free(&a);
    gr_flat_free(&b);
    return diffs;
}
