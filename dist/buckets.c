/* buckets.c — the gradient all-reduce in buckets (see buckets.h). */
#include "buckets.h"

#include <stdlib.h>
#include <string.h>

typedef struct gr_bucket {
    int64_t lo, hi;   /* grads[lo, hi) */
    int ready;        /* the plan step after which every gradient in it is final */
    bool started;
} gr_bucket;

struct gr_buckets {
    gr_comm *comm;
    const gr_loop_hooks *const *hooks; /* the job's loop hooks (loophooks.h), set later when profiling */
    float *grads;
    gr_bucket *b;
    int nb;
    bool armed;
    gr_status st;     /* the first failure of a hook (hooks return nothing) */
    gr_error err;
};

/* One parameter's gradient range and the last step that writes it. */
typedef struct gr_grange {
    int64_t off, n;
    int last;
} gr_grange;

static int gr_grange_cmp(const void *x, const void *y) {
    const gr_grange *a = x, *b = y;
    return a->off < b->off ? -1 : a->off > b->off;
}

/* Every gradient range the plan's steps write, sorted by offset. */
static gr_grange *gr_granges(const gr_plan *p, int *n) {
    const gr_graph *g = p->g;
    gr_grange *r = gr_xcalloc((size_t)(g->n_tensors + 1), sizeof *r);
    int *slot = gr_xmalloc((size_t)(g->n_tensors + 1) * sizeof *slot);
    for (int t = 0; t < g->n_tensors; t++) slot[t] = -1;
    *n = 0;
    for (int i = 0; i < p->steps.n; i++) {
        const gr_node *nd = p->steps.step[i].node;
        for (int k = 0; k < nd->nout; k++) {
            const int t = nd->out[k];
            if (g->tensors[t].kind != GR_TK_GRAD) continue;
            if (slot[t] < 0) {
                slot[t] = (*n)++;
                r[slot[t]].off = g->tensors[t].param_offset;
                r[slot[t]].n = gr_tensor_numel(&g->tensors[t]);
            }
            r[slot[t]].last = i;
        }
    }
    free(slot);
    qsort(r, (size_t)*n, sizeof *r, gr_grange_cmp);
    return r;
}

static void gr_buckets_after(void *user, int step, const gr_kargs *a);

gr_buckets *gr_buckets_new(gr_plan *p, gr_comm *c, double bucket_mb, const gr_loop_hooks *const *hooks) {
    gr_buckets *b = gr_xcalloc(1, sizeof *b);
    b->comm = c;
    b->hooks = hooks;
    b->grads = p->m->grads;
    const int64_t nt = p->g->n_trainable;
    int64_t cap = (int64_t)(bucket_mb * 1048576.0 / sizeof(float));
    if (cap < nt / (GR_COMM_MAX_PENDING / 2) + 1) cap = nt / (GR_COMM_MAX_PENDING / 2) + 1; /* bounded count */
    int n;
    gr_grange *r = gr_granges(p, &n);
    b->b = gr_xcalloc((size_t)(n + 1), sizeof *b->b);
    /* from the end of the arena down: a bucket takes ranges until it holds cap floats */
    int64_t hi = nt;
    for (int i = n - 1; i >= 0; i--) {
        gr_bucket *k = b->nb ? &b->b[b->nb - 1] : NULL;
        if (!k || k->hi - k->lo >= cap) {
            k = &b->b[b->nb++];
            k->hi = hi; /* the previous bucket's lo: they tile the arena */
            k->ready = -1;
        }
        k->lo = r[i].off;
        if (r[i].last > k->ready) k->ready = r[i].last;
        hi = r[i].off;
    }
    if (b->nb) b->b[b->nb - 1].lo = 0; /* anything before the first range rides with it */
    for (int i = 0; i < b->nb; i++) /* a bucket no step writes is summed at the end */
        if (b->b[i].ready < 0) b->b[i].ready = p->steps.n - 1;
    free(r);
    GR_ASSERT(b->nb <= GR_COMM_MAX_PENDING);
    gr_exec_hook h = {.after = gr_buckets_after, .user = b};
    gr_plan_add_hook(p, &h);
    return b;
}

void gr_buckets_free(gr_buckets *b) {
    if (!b) return;
    free(b->b);
    free(b);
}

int gr_buckets_count(const gr_buckets *b) { return b ? b->nb : 0; }

void gr_buckets_get(const gr_buckets *b, int i, int64_t *lo, int64_t *hi, int *ready) {
    GR_ASSERT(i >= 0 && i < b->nb);
    *lo = b->b[i].lo;
    *hi = b->b[i].hi;
    *ready = b->b[i].ready;
}

void gr_buckets_arm(gr_buckets *b, bool on) {
    b->armed = on;
    for (int i = 0; i < b->nb; i++) b->b[i].started = false;
}

static void gr_bucket_start(gr_buckets *b, gr_bucket *k) {
    k->started = true;
    if (b->st) return;
    b->st = gr_comm_isum_f32(b->comm, b->grads + k->lo, k->hi - k->lo, "a bucket of gradients", &b->err);
}

static void gr_buckets_after(void *user, int step, const gr_kargs *a) {
    (void)a;
    gr_buckets *b = user;
    if (!b->armed) return;
    const double t0 = gr_now();
    for (int i = 0; i < b->nb; i++)
        if (b->b[i].ready == step && !b->b[i].started) gr_bucket_start(b, &b->b[i]);
    if (!b->st) b->st = gr_comm_progress(b->comm, &b->err);
    gr_hooks_host(b->hooks ? *b->hooks : NULL, GR_SPAN_COMM, "starting and progressing the gradient buckets", t0,
                  gr_now());
}

gr_status gr_buckets_finish(gr_buckets *b, gr_error *err) {
    for (int i = 0; i < b->nb; i++)
        if (!b->b[i].started) gr_bucket_start(b, &b->b[i]);
    gr_status st = gr_comm_wait_all(b->comm, err);
    if (b->st) { /* the first failure, from a hook */
        st = b->st;
        *err = b->err;
    }
    b->st = GR_OK;
    b->armed = false;
    return st;
}
