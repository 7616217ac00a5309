/* test_exec_hooks.c — the runtime's one step loop (exec/run.c): every op of
 * every run passes through one dispatch, so hooks added to a plan see each
 * non-view node of the pass, in order, before and after its kernel, on
 * every run; and the backend's run begin/end decide only how the launches
 * are used (eager, captured, or skipped after a replay).
 *
 * The backend is the CPU one behind a copy of its table whose kernels log
 * themselves, so the log shows hooks and kernels interleaved. */
#include <stdlib.h>
#include <string.h>

#include "gr_test.h"
#include "exec/exec.h"
#include "graph/graph.h"

#define LOG_MAX 4096

typedef struct { char what; int who, step; const gr_node *node; int64_t n; const gr_exec_ctx *ctx; } entry;
static entry log_[LOG_MAX];
static int n_log;
static const gr_backend_vtable *cpu_vt;
static gr_backend *cpu_be; /* the real CPU backend: its kernels take their state from it */

static void log_add(char what, int who, int step, const gr_kargs *a) {
    if (n_log < LOG_MAX) log_[n_log] = (entry){what, who, step, a->node, a->n, a->ctx};
    n_log++;
}

static void logged_kernel(const gr_kargs *a) {
    log_add('K', -1, -1, a);
    gr_kargs on_cpu = *a;
    on_cpu.be = cpu_be;
    cpu_vt->kernels[a->node->op](&on_cpu);
}

static void hook_before(void *user, int step, const gr_kargs *a) { log_add('B', *(int *)user, step, a); }
static void hook_after(void *user, int step, const gr_kargs *a) { log_add('A', *(int *)user, step, a); }

/* the backend's side of the loop, scripted per run */
static gr_run_mode script[8];
static int n_begin, n_end, n_op_done, n_prepare, n_release;
static gr_run_mode end_modes[8];
static gr_steps *prepared;

static gr_run_mode fake_begin(gr_backend *be, gr_steps *s, int64_t n, const gr_exec_ctx *ctx) {
    (void)be; (void)s; (void)n; (void)ctx;
    return script[n_begin++];
}
static void fake_end(gr_backend *be, gr_steps *s, gr_run_mode mode) { (void)be; (void)s; end_modes[n_end++] = mode; }
static void fake_op_done(gr_backend *be, const gr_kargs *a) { (void)be; (void)a; n_op_done++; }
static gr_status fake_prepare(gr_backend *be, gr_steps *s, gr_error *err) {
    (void)be; (void)err;
    n_prepare++;
    prepared = s;
    s->be_state = malloc(16);
    return GR_OK;
}
static void fake_release(gr_backend *be, gr_steps *s) {
    (void)be;
    n_release++;
    free(s->be_state);
    s->be_state = NULL;
}

typedef struct { gr_cfg *layers; gr_graph g; gr_backend *cpu; gr_backend_vtable vt; gr_kernel_fn k[GR_OP_COUNT];
                 gr_backend be; gr_model m; gr_plan p; } fixture;

static void fixture_init(fixture *f, bool scripted) {
    memset(f, 0, sizeof *f);
    gr_error err = {0};
    CHECK(gr_cfg_parse_text("[flatten, {dense: {units: 16}}, relu, {dropout: {rate: 0.25}}, {dense: {units: 10}}]",
                            "hooks", 1, 1, &f->layers, &err) == GR_OK);
    gr_job_spec spec;
    memset(&spec, 0, sizeof spec);
    spec.model.layers = f->layers;
    spec.train.micro_batch = 8;
    snprintf(spec.train.loss, sizeof spec.train.loss, "softmax_cross_entropy");
    int64_t shape[3] = {1, 4, 4};
    CHECK(gr_graph_build(&spec, shape, 3, &f->g, &err) == GR_OK);
    gr_autodiff(&f->g, false);
    CHECK(gr_backend_create("cpu", 1, &f->cpu, &err) == GR_OK);
    cpu_vt = f->cpu->vt;
    cpu_be = f->cpu;
    f->vt = *cpu_vt;
    for (int i = 0; i < GR_OP_COUNT; i++) f->k[i] = cpu_vt->kernels[i] ? logged_kernel : NULL;
    f->vt.kernels = f->k;
    if (scripted) {
        f->vt.run_begin = fake_begin;
        f->vt.run_end = fake_end;
        f->vt.op_done = fake_op_done;
        f->vt.prepare = fake_prepare;
        f->vt.release = fake_release;
    }
    f->be = *f->cpu;
    f->be.vt = &f->vt;
    CHECK(gr_model_init(&f->m, &f->g, &f->be, 0, &err) == GR_OK);
    CHECK_MSG(gr_plan_compile(&f->p, &f->m, &f->g, GR_PLAN_TRAIN, true, &err) == GR_OK, "%s", err.msg);
    float *w = calloc((size_t)f->g.n_params, sizeof *w);
    for (int64_t i = 0; i < f->g.n_params; i++) w[i] = 0.01f * (float)(i % 7) - 0.03f;
    gr_backend_upload(&f->be, f->m.params, w, (size_t)f->g.n_params * sizeof *w);
    free(w);
    float *x = gr_plan_ptr(&f->p, f->g.input); /* host memory on the CPU */
    int32_t *y = gr_plan_ptr(&f->p, f->g.label);
    for (int i = 0; i < 8 * 16; i++) x[i] = (float)(i % 5) - 2.0f;
    for (int i = 0; i < 8; i++) y[i] = i % 10;
}

static void fixture_free(fixture *f) {
    gr_plan_free(&f->p);
    gr_model_free(&f->m);
    gr_backend_free(f->cpu);
    gr_graph_free(&f->g);
    gr_cfg_free(f->layers);
}

/* The log of one eager run: per non-view node of the pass, in order,
 * before of hook 0 and 1, the kernel, after of hook 0 and 1. Returns the
 * index after the run's entries. */
static int check_run(const gr_graph *g, int at, int64_t n, const gr_exec_ctx *ctx) {
    static const char what[5] = {'B', 'B', 'K', 'A', 'A'};
    static const int who[5] = {0, 1, -1, 0, 1};
    int step = 0, bad = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        if (gr_op_flags(g->nodes[i].op) & GR_OPF_VIEW) continue;
        for (int k = 0; k < 5; k++, at++) {
            const entry *e = &log_[at];
            bool ok = at < n_log && e->what == what[k] && e->who == who[k] && e->node == &g->nodes[i] &&
                      e->n == n && e->ctx == ctx && (what[k] == 'K' || e->step == step);
            if (!ok && bad++ < 3)
                CHECK_MSG(false, "log entry %d: expected %c of hook %d at step %d (node %d, %s)", at, what[k],
                          who[k], step, i, gr_op_name(g->nodes[i].op));
        }
        step++;
    }
    CHECK_MSG(bad == 0, "%d log entries out of place", bad);
    return at;
}

/* Two hooks see every step of two runs, in order, around the kernel. */
static void test_hooks_see_every_step(void) {
    fixture f;
    fixture_init(&f, false);
    int id0 = 0, id1 = 1;
    gr_plan_add_hook(&f.p, &(gr_exec_hook){hook_before, hook_after, &id0, false});
    gr_plan_add_hook(&f.p, &(gr_exec_hook){hook_before, hook_after, &id1, false});
    int views = 0;
    for (int i = 0; i < f.g.n_nodes; i++) views += (gr_op_flags(f.g.nodes[i].op) & GR_OPF_VIEW) != 0;
    CHECK(views > 0 && f.p.steps.n == f.g.n_nodes - views);
    n_log = 0;
    gr_exec_ctx c1 = {.training = true, .rng_key = 1, .grad_scale = 0.125f};
    gr_exec_ctx c2 = {.training = true, .rng_key = 2, .grad_scale = 0.2f};
    gr_plan_run(&f.p, 8, &c1);
    gr_plan_run(&f.p, 5, &c2);
    CHECK_MSG(n_log == 2 * 5 * f.p.steps.n, "%d log entries for %d steps", n_log, f.p.steps.n);
    int at = check_run(&f.g, 0, 8, &c1);
    check_run(&f.g, at, 5, &c2);
    fixture_free(&f);
}

/* The backend's begin decides: eager and capture runs launch every step
 * through the dispatch (hooks and the backend's per-op check included) and
 * are followed by end; a replayed run skips the loop and end. The backend
 * prepares and releases the plan's own step list. */
static void test_run_modes(void) {
    n_begin = n_end = n_op_done = n_prepare = n_release = 0;
    script[0] = GR_RUN_EAGER;
    script[1] = GR_RUN_CAPTURE;
    script[2] = GR_RUN_REPLAYED;
    fixture f;
    fixture_init(&f, true);
    CHECK(n_prepare == 1 && prepared == &f.p.steps && f.p.steps.be_state != NULL);
    CHECK(f.p.steps.g == &f.g && f.p.steps.micro_batch == 8 && f.p.steps.step[0].be == &f.be);
    int id0 = 0, id1 = 1;
    gr_plan_add_hook(&f.p, &(gr_exec_hook){hook_before, hook_after, &id0, false});
    gr_plan_add_hook(&f.p, &(gr_exec_hook){hook_before, hook_after, &id1, false});
    n_log = 0;
    gr_exec_ctx c = {.training = true, .rng_key = 3, .grad_scale = 0.125f};
    gr_plan_run(&f.p, 8, &c);
    gr_plan_run(&f.p, 8, &c);
    gr_plan_run(&f.p, 8, &c);
    CHECK(n_begin == 3 && n_end == 2 && end_modes[0] == GR_RUN_EAGER && end_modes[1] == GR_RUN_CAPTURE);
    CHECK(n_op_done == 2 * f.p.steps.n);
    CHECK(n_log == 2 * 5 * f.p.steps.n);
    int at = check_run(&f.g, 0, 8, &c);
    check_run(&f.g, at, 8, &c);
    fixture_free(&f);
    CHECK(n_release == 1);
}

/* An inner hook (a profiler) runs closest to the kernel, whatever the order
 * the hooks were added in: outer before, inner before, kernel, inner after,
 * outer after. */
static void test_inner_hook_closest(void) {
    fixture f;
    fixture_init(&f, false);
    int id0 = 0, id1 = 1;
    gr_plan_add_hook(&f.p, &(gr_exec_hook){hook_before, hook_after, &id0, true});
    gr_plan_add_hook(&f.p, &(gr_exec_hook){hook_before, hook_after, &id1, false});
    n_log = 0;
    gr_exec_ctx c = {.training = true, .rng_key = 1, .grad_scale = 0.125f};
    gr_plan_run(&f.p, 8, &c);
    static const char what[5] = {'B', 'B', 'K', 'A', 'A'};
    static const int who[5] = {1, 0, -1, 0, 1};
    int bad = 0;
    for (int k = 0; k < 5 * f.p.steps.n && k < n_log; k++)
        bad += log_[k].what != what[k % 5] || log_[k].who != who[k % 5];
    CHECK_MSG(n_log == 5 * f.p.steps.n && bad == 0, "%d entries out of the inner/outer order", bad);
    fixture_free(&f);
}

int main(void) {
    test_hooks_see_every_step();
    test_inner_hook_closest();
    test_run_modes();
    return gr_test_report();
}
