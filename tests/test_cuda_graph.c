/* test_cuda_graph.c — training with CUDA Graphs (cuda_graph: true) gives
 * what eager launches give. Label `gpu`: exits 77 (skipped) without a
 * device.
 *
 * A small CNN with batchnorm and dropout trains as runner/train.c drives
 * it: 5 optimizer steps of 2 accumulated micro-batches (grads zeroed per
 * step, a new rng_key per micro-batch, a gradient scale that changes from
 * step to step, SGD nesterov + weight decay), then a
 * step on one partial micro-batch (n < micro_batch: always eager), then one
 * more full step (replays after an eager run); then 4 eval runs and a
 * partial one. The backend captures a plan's full runs on their third call
 * per (n, training) and replays them after, so the graph run covers eager,
 * capture and many replays, each with its own key and gradient scale.
 *
 * Compared: every loss and correct count, the eval results, the final
 * weights, running stats and momentum buffers. They are expected to be
 * bit for bit equal, and are required to be when two eager runs are (the
 * kernels are then deterministic, as the conv algorithms are chosen to be).
 * Where two eager runs differ (a kernel summing with atomics), the graph
 * runs are held to what such reordering can do: losses 1e-5 relative,
 * weights and logits NMSE 1e-8, momentum buffers 1e-3 (a relu input within
 * rounding of zero moves a whole gradient element). The eager run is also
 * checked against the CPU backend, loosely (losses 1e-4, weights NMSE 1e-6
 * after 7 steps), so both cannot be wrong the same way. A fifth run asks for
 * graphs under GPURUN_CUDA_SYNC=1 (a synchronize and error check after
 * every op): it captures nothing and equals the eager run. */
#include "ops/cuda_cmp.h"

#define MB 16     /* micro-batch */
#define ACCUM 2   /* micro-batches per optimizer step */
#define STEPS 5   /* full steps before the partial one */
#define NPART 11  /* the partial micro-batch */
#define NEVAL 4   /* full eval runs; then one of NEVAL_PART */
#define NEVAL_PART 7
#define NLOSS (STEPS + 2)

static const char *const layers =
    "[{conv: {filters: 16, kernel: 3, padding: 1, bias: false}}, batchnorm, relu, {maxpool: {kernel: 2}}, "
    "{conv: {filters: 32, kernel: 3, padding: 1, bias: false}}, batchnorm, relu, {dropout: {rate: 0.25}}, "
    "global_avgpool, flatten, {dropout: {rate: 0.1}}, {dense: {units: 10}}]";
static const int64_t shape[3] = {3, 16, 16};

typedef struct graph_run {
    double loss[NLOSS], correct[NLOSS];  /* per optimizer step */
    double eval_loss[NEVAL + 1], eval_correct[NEVAL + 1];
    float *params, *optim;               /* at the end */
    float *logits, *logits_part;         /* of the last full eval run and of the partial one */
    int64_t np, nt, nz, nz_part;
} graph_run;

static void graph_run_free(graph_run *r) {
    free(r->params);
    free(r->optim);
    free(r->logits);
    free(r->logits_part);
    memset(r, 0, sizeof *r);
}

/* One optimizer step of micro-batches of n samples (accum of them). */
static void graph_step(gr_plan *tp, gr_model *m, const gr_job_spec *spec, int64_t step, int accum, int64_t n,
                       float *x, int32_t *y, double *loss, double *correct) {
    const gr_graph *g = tp->g;
    double ls = 0.0, cs = 0.0;
    gr_backend_zero(m->be, m->grads, (size_t)g->n_trainable * sizeof(float));
    for (int k = 0; k < accum; k++) {
        uint64_t micro = (uint64_t)(step * ACCUM + k);
        gr_cmp_batch(g, n, gr_hash64(0xDA7A, micro), x, y);
        gr_batch b = {.x = x, .y = y, .n = n};
        /* the gradient scale also changes from step to step (as dynamic loss
         * scaling will make it), so a replay that kept a captured value shows */
        gr_exec_ctx ctx = {.training = true, .rng_key = gr_hash64(spec->seed, micro),
                           .grad_scale = 1.0f / (float)((accum * n) << (step % 3))};
        gr_cmp_poison(tp);
        gr_train_micro_step(tp, &b, &ctx, &ls, &cs);
    }
    gr_train_apply(m, spec, spec->train.optimizer.lr, step);
    *loss = ls / (double)(accum * n);
    *correct = cs;
}

/* The whole schedule on be; false when the model cannot be set up there. */
static bool graph_train(gr_backend *be, graph_run *r) {
    memset(r, 0, sizeof *r);
    gr_error err = {0};
    gr_cmp_model cm;
    if (gr_cmp_model_build(&cm, layers, NULL, shape, 3, MB, 0.1, false, GR_PREC_FP32, &err)) {
        CHECK_MSG(false, "%s", err.msg);
        gr_cmp_model_free(&cm);
        return false;
    }
    cm.spec.seed = 11;
    cm.spec.train.optimizer = (gr_optim_spec){.type = GR_OPTIM_SGD, .lr = 0.05, .momentum = 0.9, .nesterov = true,
                                              .weight_decay = 5e-4};
    const gr_graph *g = &cm.g;
    gr_model m;
    gr_plan tp, ep;
    memset(&m, 0, sizeof m);
    memset(&tp, 0, sizeof tp);
    memset(&ep, 0, sizeof ep);
    bool ok = gr_model_init(&m, g, be, 1, &err) == GR_OK &&
              gr_plan_compile(&tp, &m, g, GR_PLAN_TRAIN, true, &err) == GR_OK &&
              gr_plan_compile(&ep, &m, g, GR_PLAN_EVAL, true, &err) == GR_OK;
    CHECK_MSG(ok, "%s: %s", gr_backend_name(be), err.msg);
    if (ok) {
        float *host = gr_cmp_init_params(g, 5);
        gr_backend_upload(be, m.params, host, (size_t)g->n_params * sizeof(float));
        free(host);
        const int64_t per = gr_tensor_sample_numel(&g->tensors[g->input]);
        float *x = gr_xmalloc((size_t)(MB * per) * sizeof *x);
        int32_t y[MB];
        for (int64_t s = 0; s < STEPS; s++)
            graph_step(&tp, &m, &cm.spec, s, ACCUM, MB, x, y, &r->loss[s], &r->correct[s]);
        graph_step(&tp, &m, &cm.spec, STEPS, 1, NPART, x, y, &r->loss[STEPS], &r->correct[STEPS]);
        graph_step(&tp, &m, &cm.spec, STEPS + 1, ACCUM, MB, x, y, &r->loss[STEPS + 1], &r->correct[STEPS + 1]);

        gr_exec_ctx ctx = {.training = false, .rng_key = 0, .grad_scale = 0.0f};
        for (int e = 0; e <= NEVAL; e++) {
            const int64_t n = e < NEVAL ? MB : NEVAL_PART;
            gr_cmp_batch(g, n, gr_hash64(0xE7A1, (uint64_t)e), x, y);
            gr_batch b = {.x = x, .y = y, .n = n};
            gr_cmp_poison(&ep);
            gr_train_micro_step(&ep, &b, &ctx, &r->eval_loss[e], &r->eval_correct[e]);
            if (e == NEVAL - 1) {
                r->nz = n * g->n_classes;
                r->logits = gr_cmp_fetch(be, gr_plan_ptr(&ep, g->logits), r->nz);
            } else if (e == NEVAL) {
                r->nz_part = n * g->n_classes;
                r->logits_part = gr_cmp_fetch(be, gr_plan_ptr(&ep, g->logits), r->nz_part);
            }
        }
        r->np = g->n_params;
        r->nt = g->n_trainable;
        r->params = gr_cmp_fetch(be, m.params, r->np);
        r->optim = gr_cmp_fetch(be, m.optim, r->nt);
        free(x);
    }
    gr_plan_free(&ep);
    gr_plan_free(&tp);
    gr_model_free(&m);
    gr_cmp_model_free(&cm);
    return ok;
}

static bool graph_same(const graph_run *a, const graph_run *b) {
    return memcmp(a->loss, b->loss, sizeof a->loss) == 0 && memcmp(a->correct, b->correct, sizeof a->correct) == 0 &&
           memcmp(a->eval_loss, b->eval_loss, sizeof a->eval_loss) == 0 &&
           memcmp(a->eval_correct, b->eval_correct, sizeof a->eval_correct) == 0 &&
           memcmp(a->params, b->params, (size_t)a->np * sizeof(float)) == 0 &&
           memcmp(a->optim, b->optim, (size_t)a->nt * sizeof(float)) == 0 &&
           memcmp(a->logits, b->logits, (size_t)a->nz * sizeof(float)) == 0 &&
           memcmp(a->logits_part, b->logits_part, (size_t)a->nz_part * sizeof(float)) == 0;
}

/* Run b against reference a within the given bounds (loss_rel: relative, the
 * rest NMSE); prints the largest differences. */
static void graph_close(const char *what, const graph_run *b, const graph_run *a, double loss_rel, double w_tol,
                        double optim_tol) {
    double worst_loss = 0.0;
    for (int s = 0; s < NLOSS; s++) {
        double rel = fabs(b->loss[s] - a->loss[s]) / GR_MAX(fabs(a->loss[s]), 1e-6);
        if (!(rel <= worst_loss)) worst_loss = rel;
        CHECK_MSG(rel <= loss_rel, "%s: step %d loss %.9g vs %.9g", what, s + 1, b->loss[s], a->loss[s]);
    }
    for (int e = 0; e <= NEVAL; e++) {
        double rel = fabs(b->eval_loss[e] - a->eval_loss[e]) / GR_MAX(fabs(a->eval_loss[e]), 1e-6);
        if (!(rel <= worst_loss)) worst_loss = rel;
        CHECK_MSG(rel <= loss_rel, "%s: eval run %d loss sum %.9g vs %.9g", what, e + 1, b->eval_loss[e],
                  a->eval_loss[e]);
    }
    double ew = gr_cmp_nmse(b->params, a->params, a->np), eo = gr_cmp_nmse(b->optim, a->optim, a->nt);
    double ez = gr_cmp_nmse(b->logits, a->logits, a->nz), ezp = gr_cmp_nmse(b->logits_part, a->logits_part, a->nz_part);
    printf("%-34s losses %.3g relative; NMSE weights+stats %.3g, momentum %.3g, logits %.3g, partial %.3g\n", what,
           worst_loss, ew, eo, ez, ezp);
    CHECK_MSG(ew <= w_tol, "%s: weights and running stats NMSE %.3g > %.1g", what, ew, w_tol);
    CHECK_MSG(eo <= optim_tol, "%s: momentum buffers NMSE %.3g > %.1g", what, eo, optim_tol);
    CHECK_MSG(ez <= w_tol && ezp <= w_tol, "%s: eval logits NMSE %.3g, partial batch %.3g > %.1g", what, ez, ezp,
              w_tol);
}

int main(void) {
    gr_error err = {0};
    gr_backend_opts eager = {.precision = GR_PREC_FP32, .cudnn_benchmark = false, .cuda_graph = false};
    gr_backend_opts graph = eager;
    graph.cuda_graph = true;
    gr_backend *be = NULL;
    if (gr_cmp_open_device(&eager, &be, &err) != GR_OK) {
        printf("SKIP: %s\n", err.msg);
        return 77;
    }
    printf("%d full steps of %d x %d samples and one of %d, then %d + 1 eval runs, on %s\n", STEPS + 1, ACCUM, MB,
           NPART, NEVAL, gr_cmp_device_name());

    /* eager, graph, eager, graph, graph under GPURUN_CUDA_SYNC: each on a backend of its own */
    enum { NRUN = 5 };
    static const char *const names[NRUN] = {"eager", "cuda graph", "eager (again)", "cuda graph (again)",
                                            "GPURUN_CUDA_SYNC=1 (graph asked)"};
    graph_run r[NRUN], cpu;
    memset(r, 0, sizeof r);
    memset(&cpu, 0, sizeof cpu);
    bool ok = true;
    for (int i = 0; i < NRUN && ok; i++) {
        if (i == 4) setenv("GPURUN_CUDA_SYNC", "1", 1); /* read when the backend is made */
        if (i > 0) {
            gr_status st = gr_cmp_open_device(i % 2 ? &graph : &eager, &be, &err);
            CHECK_MSG(st == GR_OK, "%s: %s", names[i], err.msg);
            if (st) { ok = false; break; }
        }
        double t0 = gr_now();
        ok = graph_train(be, &r[i]);
        printf("%-34s %.2f s, losses", names[i], gr_now() - t0);
        for (int s = 0; s < NLOSS; s++) printf(" %.6f", r[i].loss[s]);
        printf("\n");
        if (strcmp(gr_backend_name(be), "cuda") == 0) {
            /* the graph runs did capture (one training and one eval pass) and
             * replay the rest of their full micro-batches; the eager ones never */
            int64_t cap, rep;
            gr_cuda_graph_counts(be, &cap, &rep);
            printf("%-34s %lld captured, %lld replayed\n", names[i], (long long)cap, (long long)rep);
            if (i % 2 && i < 4) CHECK_MSG(cap == 2 && rep >= 5, "%s: %lld captures, %lld replays", names[i], (long long)cap,
                                 (long long)rep);
            else CHECK_MSG(cap == 0 && rep == 0, "%s: %lld captures, %lld replays", names[i], (long long)cap,
                           (long long)rep);
        }
        gr_backend_free(be);
        be = NULL;
        if (i == 4) unsetenv("GPURUN_CUDA_SYNC");
    }
    if (ok) {
        for (int s = 0; s < NLOSS; s++) CHECK_MSG(isfinite(r[0].loss[s]), "step %d: loss %g", s + 1, r[0].loss[s]);
        if (graph_same(&r[0], &r[2])) {
            printf("the eager runs are bit for bit equal: the graph runs must be too\n");
            CHECK_MSG(graph_same(&r[0], &r[1]), "the cuda graph run differs from the eager runs (see below)");
            CHECK_MSG(graph_same(&r[0], &r[3]), "the second cuda graph run differs from the eager runs (see below)");
            CHECK_MSG(graph_same(&r[0], &r[4]), "the GPURUN_CUDA_SYNC run differs from the eager runs");
            if (!graph_same(&r[0], &r[1]) || !graph_same(&r[0], &r[3])) {
                graph_close("cuda graph vs eager", &r[1], &r[0], INFINITY, INFINITY, INFINITY);
                graph_close("cuda graph (again) vs eager", &r[3], &r[0], INFINITY, INFINITY, INFINITY);
            }
        } else {
            printf("note: two eager runs differ (nondeterministic kernels): comparing within bounds\n");
            graph_close("eager (again) vs eager", &r[2], &r[0], 1e-5, 1e-8, 1e-3);
            graph_close("cuda graph vs eager", &r[1], &r[0], 1e-5, 1e-8, 1e-3);
            graph_close("cuda graph (again) vs eager", &r[3], &r[0], 1e-5, 1e-8, 1e-3);
            graph_close("GPURUN_CUDA_SYNC vs eager", &r[4], &r[0], 1e-5, 1e-8, 1e-3);
        }
        /* the device against the reference */
        gr_backend *cpu_be = NULL;
        CHECK(gr_backend_create("cpu", 0, &cpu_be, &err) == GR_OK);
        if (cpu_be && graph_train(cpu_be, &cpu)) graph_close("eager vs cpu", &r[0], &cpu, 1e-4, 1e-6, 1e-2);
        gr_backend_free(cpu_be);
    }
    for (int i = 0; i < NRUN; i++) graph_run_free(&r[i]);
    graph_run_free(&cpu);
    return gr_test_report();
}
