/* spec_diff.c — see spec_diff.h. Both specs are flattened into sorted
 * "dotted.path" -> value lists (sequence items by index), then merged. */
#include "spec_diff.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../config/spec.h"

/* Keys (or prefixes ending in '.') free to change between restarts. */
static const char *const gr_diff_free[] = {
    "name", "device", "deterministic", "cuda_graph", "cudnn_benchmark", "log.", "checkpoint.", "eval.",
    "data.workers", "data.prefetch", "data.cache", "parallel.", "train.steps", "train.epochs",
    /* a run stopped by a damaged sample (exit 3) resumes with data.on_error: skip */
    "data.on_error",
    /* the optimizer step's batch stays; a smaller device may take it in more micro-batches (micro_batch: auto) */
    "train.micro_batch",
};

/* What may differ between the ranks of one data-parallel run: only how each
 * reads its data. Everything else decides what the ranks compute together
 * (the batches, the buckets, the steps, when they evaluate and stop). */
static const char *const gr_diff_free_ranks[] = {"name", "data.workers", "data.prefetch", "data.cache"};

/* The two sides' names in the message, and the keys free to differ. */
typedef struct gr_diff_how {
    const char *a, *b;
    const char *const *free;
    size_t n_free;
} gr_diff_how;

typedef struct gr_kv {
    char *key, *val;
} gr_kv;

typedef struct gr_flat {
    gr_kv *kv;
    int n, cap;
} gr_flat;

static void gr_flat_add(gr_flat *f, const char *key, const char *val) {
    GR_GROW(f->kv, f->cap, f->n + 1);
    f->kv[f->n++] = (gr_kv){gr_xstrdup(key), gr_xstrdup(val)};
}

static void gr_flat_leaf(void *f, const char *path, const gr_cfg *leaf, const char *text) {
    (void)leaf;
    gr_flat_add(f, path, text);
}

static int gr_kv_cmp(const void *a, const void *b) { return strcmp(((const gr_kv *)a)->key, ((const gr_kv *)b)->key); }

static gr_status gr_flat_make(const char *yaml, const char *file, gr_flat *f, gr_error *err) {
    memset(f, 0, sizeof *f);
    gr_cfg *root = NULL;
    gr_status st = gr_cfg_parse_text(yaml, file, 1, 1, &root, err);
    if (st) return st;
    gr_cfg_leaves(root, false, gr_flat_leaf, f);
    gr_cfg_free(root);
    if (f->n) qsort(f->kv, (size_t)f->n, sizeof *f->kv, gr_kv_cmp);
    return GR_OK;
}

static void gr_flat_free(gr_flat *f) {
    for (int i = 0; i < f->n; i++) free(f->kv[i].key), free(f->kv[i].val);
    free(f->kv);
}

static bool gr_diff_is_free(const gr_diff_how *how, const char *key) {
    for (size_t i = 0; i < how->n_free; i++) {
        const char *p = how->free[i];
        size_t n = strlen(p);
        if (p[n - 1] == '.' ? strncmp(key, p, n) == 0 : strcmp(key, p) == 0) return true;
    }
    return false;
}

/* The group a key is reported under: a model's layer list differs in many
 * keys at once when a layer is added, so model.layers.* / model.blocks.* are
 * one entry each ("model.layers: 9 keys differ, the first ..."). */
static size_t gr_diff_group(const char *key) {
    if (strncmp(key, "model.layers.", 13) && strncmp(key, "model.blocks.", 13)) return strlen(key);
    return 12;
}

typedef struct gr_diff {
    const char *key, *a, *b;
} gr_diff;

/* Changed values first (seed 1 -> 2, optimizer sgd -> adamw), then keys
 * only one side has (adamw's betas), which a changed value often explains. */
static void gr_diff_format(const gr_diff_how *how, const gr_diff *d, int nd, char *out, size_t n) {
    size_t len = 0;
    int shown = 0, entries = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < nd;) {
            size_t g = gr_diff_group(d[i].key);
            int k = i + 1;
            while (k < nd && gr_diff_group(d[k].key) == g && strncmp(d[k].key, d[i].key, g) == 0) k++;
            bool both = strcmp(d[i].a, "(absent)") != 0 && strcmp(d[i].b, "(absent)") != 0;
            if (both == (pass == 0)) {
                entries++;
                if (shown < 6 && len < n) {
                    int w = k - i == 1
                                ? snprintf(out + len, n - len, "%s%s (%s %s, %s %s)", len ? "; " : "",
                                           d[i].key, how->a, d[i].a, how->b, d[i].b)
                                : snprintf(out + len, n - len, "%s%.*s (%d keys differ, the first: %s: "
                                           "%s %s, %s %s)", len ? "; " : "", (int)g, d[i].key, k - i,
                                           d[i].key, how->a, d[i].a, how->b, d[i].b);
                    if (w > 0) len += (size_t)w;
                    shown++;
                }
            }
            i = k;
        }
    if (entries > shown && len < n) snprintf(out + len, n - len, "; and %d more", entries - shown);
}

static int gr_spec_diff_how(const gr_diff_how *how, const char *ckpt_yaml, const char *job_yaml, char *out,
                            size_t n) {
    out[0] = '\0';
    gr_flat a, b;
    gr_error e;
    if (gr_flat_make(ckpt_yaml, "checkpoint spec", &a, &e)) {
        snprintf(out, n, "the %s's spec does not parse: %s", how->a, e.msg);
        return -1;
    }
    if (gr_flat_make(job_yaml, "job spec", &b, &e)) {
        gr_flat_free(&a);
        snprintf(out, n, "the %s's spec does not parse: %s", how->b, e.msg);
        return -1;
    }
    gr_diff *d = gr_xmalloc((size_t)(a.n + b.n + 1) * sizeof *d);
    int nd = 0, i = 0, k = 0;
    while (i < a.n || k < b.n) {
        int c = i >= a.n ? 1 : k >= b.n ? -1 : strcmp(a.kv[i].key, b.kv[k].key);
        const char *key = c <= 0 ? a.kv[i].key : b.kv[k].key;
        const char *va = c <= 0 ? a.kv[i].val : "(absent)", *vb = c >= 0 ? b.kv[k].val : "(absent)";
        if (c <= 0) i++;
        if (c >= 0) k++;
        if (!gr_diff_is_free(how, key) && (c != 0 || strcmp(va, vb) != 0)) d[nd++] = (gr_diff){key, va, vb};
    }
    gr_diff_format(how, d, nd, out, n);
    free(d);
    gr_flat_free(&a);
    gr_flat_free(&b);
    return nd;
}

int gr_spec_diff(const char *ckpt_yaml, const char *job_yaml, char *out, size_t n) {
    const gr_diff_how how = {"checkpoint", "job", gr_diff_free, sizeof gr_diff_free / sizeof *gr_diff_free};
    return gr_spec_diff_how(&how, ckpt_yaml, job_yaml, out, n);
}

int gr_spec_diff_ranks(const char *yaml0, const char *yaml, int rank, char *out, size_t n) {
    char self[32];
    snprintf(self, sizeof self, "rank %d", rank);
    const gr_diff_how how = {"rank 0", self, gr_diff_free_ranks,
                             sizeof gr_diff_free_ranks / sizeof *gr_diff_free_ranks};
    return gr_spec_diff_how(&how, yaml0, yaml, out, n);
}
