/* eager.c — the optimizer update of each parameter as soon as the pass is
 * done with it (see eager.h). */
#include "eager.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "train.h"

/* A range of the arenas and the plan step after which it is updated. */
typedef struct gr_eager_range {
    int64_t lo, hi;
    int ready;     /* -1: no step reaches it (updated by gr_eager_finish) */
    bool done;     /* in the armed run */
} gr_eager_range;

struct gr_eager {
    gr_model *m;
    const gr_job_spec *spec;
    const gr_opt_groups *og;
    const gr_loop_hooks *const *hooks; /* the job's loop hooks (the profiler's), read at each hook */
    gr_eager_range *r;
    int n;
    bool armed;
    double lr;
    int64_t step;
    float mult;
    gr_update_tally tally;
};

/* Whether j's updates can run as the pass goes (eager.h). */
static bool gr_eager_applies(const gr_job *j) {
    const gr_job_spec *s = j->spec;
    return strcmp(gr_backend_name(j->be), "cpu") == 0 && j->dp.comm.world == 1 && !j->pp && !j->tp &&
           !(s->train.grad_clip > 0.0) && !j->sc.dynamic && j->g.n_trainable > 0;
}

/* The plan's gradient ranges, each widened to the next one's start (the
 * padding after a parameter, graph.h), the floats before the first a range
 * of their own that no step reaches. */
static gr_eager_range *gr_eager_ranges(const gr_plan *p, int64_t nt, int *n) {
    int k;
    gr_grad_range *g = gr_plan_grad_ranges(p, true, &k);
    gr_eager_range *r = gr_xcalloc((size_t)k + 1, sizeof *r);
    *n = 0;
    if (k == 0 || g[0].off > 0) r[(*n)++] = (gr_eager_range){0, k ? g[0].off : nt, -1, false};
    for (int i = 0; i < k; i++) {
        GR_ASSERT(g[i].off + g[i].n <= (i + 1 < k ? g[i + 1].off : nt));
        r[(*n)++] = (gr_eager_range){g[i].off, i + 1 < k ? g[i + 1].off : nt, g[i].last, false};
    }
    free(g);
    return r;
}

static void gr_eager_after(void *user, int step, const gr_kargs *a);

gr_eager *gr_eager_new(gr_job *j) {
    if (!gr_eager_applies(j)) return NULL;
    gr_eager *e = gr_xcalloc(1, sizeof *e);
    e->m = &j->m;
    e->spec = j->spec;
    e->og = &j->og;
    e->hooks = &j->hooks;
    e->r = gr_eager_ranges(&j->train_plan, j->g.n_trainable, &e->n);
    gr_exec_hook h = {.after = gr_eager_after, .user = e};
    gr_plan_add_hook(&j->train_plan, &h);
    return e;
}

void gr_eager_free(gr_eager *e) {
    if (!e) return;
    free(e->r);
    free(e);
}

void gr_eager_arm(gr_eager *e, double lr, int64_t step, float mult) {
    e->armed = true;
    e->lr = lr;
    e->step = step;
    e->mult = mult;
    /* the sum of squares in the update's pass (the check that ends the run), and the gradients left zero
     * unless a range is frozen (its gradients would stay) */
    e->tally = gr_update_tally_start(true, !e->og->any_frozen);
    for (int i = 0; i < e->n; i++) e->r[i].done = false;
}

static void gr_eager_update(gr_eager *e, gr_eager_range *r) {
    gr_train_update_part(e->m, e->spec, e->og, e->lr, e->step, e->mult, r->lo, r->hi, &e->tally);
    r->done = true;
}

static void gr_eager_after(void *user, int step, const gr_kargs *a) {
    (void)a;
    gr_eager *e = user;
    if (!e->armed) return;
    const double t0 = gr_now();
    bool any = false;
    for (int i = 0; i < e->n; i++)
        if (e->r[i].ready == step) {
            gr_eager_update(e, &e->r[i]);
            any = true;
        }
    if (any) gr_hooks_host(*e->hooks, GR_SPAN_OPTIM, "the update of the parameters the pass is done with", t0,
                           gr_now());
}

bool gr_eager_finish(gr_eager *e, bool *cleared) {
    GR_ASSERT(e->armed);
    for (int i = 0; i < e->n; i++)
        if (!e->r[i].done) gr_eager_update(e, &e->r[i]);
    e->armed = false;
    *cleared = gr_update_tally_cleared(&e->tally, e->m->g->n_trainable);
    return isfinite(e->tally.total);
}
