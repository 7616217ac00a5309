/* test_accum.c — gradient accumulation is exact: one optimizer step over a
 * batch of 128 taken as 4 micro-batches of 32 gives the same weights as the
 * same batch in one micro-batch (784-512-256-10 MLP, SGD with momentum and
 * weight decay, no dropout), to 1e-5 relative. Also: a partial last batch
 * (n < micro-batch) in eval sees only its n samples. */
#include <stdlib.h>
#include <string.h>

#include "gr_test.h"
#include "graph/graph.h"
#include "exec/exec.h"
#include "runner/train.h"

#define BATCH 128
#define PER 784

typedef struct gr_acc_run {
    gr_graph g;
    gr_backend *be;
    gr_model m;
    gr_plan p;
    gr_cfg *layers;
} gr_acc_run;

static void gr_acc_setup(gr_acc_run *r, gr_job_spec *spec, int64_t micro) {
    gr_error err = {0};
    CHECK(gr_cfg_parse_text("[flatten, {dense: {units: 512}}, relu, {dense: {units: 256}}, relu, "
                            "{dense: {units: 10}}]", "accum", 1, 1, &r->layers, &err) == GR_OK);
    memset(spec, 0, sizeof *spec);
    spec->model.layers = r->layers;
    spec->train.batch_size = BATCH;
    spec->train.micro_batch = micro;
    snprintf(spec->train.loss, sizeof spec->train.loss, "softmax_cross_entropy");
    spec->train.optimizer.type = GR_OPTIM_SGD;
    spec->train.optimizer.lr = 0.05;
    spec->train.optimizer.momentum = 0.9;
    spec->train.optimizer.weight_decay = 1e-4;
    spec->seed = 3;
    int64_t shape[3] = {1, 28, 28};
    CHECK(gr_graph_build(spec, shape, 3, &r->g, &err) == GR_OK);
    gr_autodiff(&r->g, false);
    CHECK(gr_backend_create("cpu", 0, &r->be, &err) == GR_OK);
    CHECK(gr_model_init(&r->m, &r->g, r->be, 1, &err) == GR_OK);
    gr_graph_init_params(&r->g, r->m.params, spec->seed);
    CHECK(gr_plan_compile(&r->p, &r->m, &r->g, GR_PLAN_TRAIN, true, &err) == GR_OK);
}

static void gr_acc_free(gr_acc_run *r) {
    gr_plan_free(&r->p);
    gr_model_free(&r->m);
    gr_backend_free(r->be);
    gr_graph_free(&r->g);
    gr_cfg_free(r->layers);
}

/* One optimizer step over x/y in micro-batches of `micro`; returns the mean loss. */
static double gr_acc_step(gr_acc_run *r, const gr_job_spec *spec, float *x, int32_t *y, int64_t micro) {
    memset(r->m.grads, 0, (size_t)r->g.n_trainable * sizeof(float));
    double loss = 0.0, correct = 0.0;
    for (int64_t k = 0; k < BATCH / micro; k++) {
        gr_batch b = {.x = x + k * micro * PER, .y = y + k * micro, .n = micro};
        gr_exec_ctx ctx = {.training = true, .rng_key = 1, .grad_scale = 1.0f / BATCH};
        gr_train_micro_step(&r->p, &b, &ctx, &loss, &correct);
    }
    gr_train_apply(&r->m, spec, spec->train.optimizer.lr, 0);
    return loss / BATCH;
}

int main(void) {
    float *x = malloc(BATCH * PER * sizeof *x);
    int32_t y[BATCH];
    for (int64_t i = 0; i < BATCH * PER; i++) x[i] = 2.0f * gr_uniform(42, (uint64_t)i) - 1.0f;
    for (int i = 0; i < BATCH; i++) y[i] = (int32_t)(gr_hash64(43, (uint64_t)i) % 10);

    gr_job_spec s_full, s_acc;
    gr_acc_run full, acc;
    gr_acc_setup(&full, &s_full, BATCH);
    gr_acc_setup(&acc, &s_acc, 32);
    int64_t nt = full.g.n_trainable;
    CHECK(full.g.n_weights == 535818);
    float *w0 = malloc((size_t)nt * sizeof *w0);
    memcpy(w0, full.m.params, (size_t)nt * sizeof *w0);
    CHECK(memcmp(w0, acc.m.params, (size_t)nt * sizeof *w0) == 0);

    double l_full = gr_acc_step(&full, &s_full, x, y, BATCH);
    double l_acc = gr_acc_step(&acc, &s_acc, x, y, 32);
    CHECK_CLOSE(l_acc, l_full, 1e-6, 0.0);

    /* weights element by element, and the update itself relative to its size */
    int bad_w = 0;
    double max_upd = 0.0, max_upd_diff = 0.0;
    for (int64_t i = 0; i < nt; i++) {
        double a = acc.m.params[i], b = full.m.params[i];
        if (fabs(a - b) > 1e-5 * fabs(b) + 1e-8) bad_w++;
        max_upd = fmax(max_upd, fabs(b - w0[i]));
        max_upd_diff = fmax(max_upd_diff, fabs((a - w0[i]) - (b - w0[i])));
    }
    CHECK_MSG(bad_w == 0, "%d weights differ by more than 1e-5 relative", bad_w);
    CHECK(max_upd > 1e-4); /* the step really moved the weights */
    CHECK_MSG(max_upd_diff <= 1e-3 * max_upd, "update differs by %g (max update %g)", max_upd_diff, max_upd);

    /* a second step keeps them together (momentum buffers accumulate the same) */
    gr_acc_step(&full, &s_full, x, y, BATCH);
    gr_acc_step(&acc, &s_acc, x, y, 32);
    bad_w = 0;
    for (int64_t i = 0; i < nt; i++)
        if (fabs((double)acc.m.params[i] - full.m.params[i]) > 1e-5 * fabs((double)full.m.params[i]) + 1e-8)
            bad_w++;
    CHECK_MSG(bad_w == 0, "after two steps %d weights differ", bad_w);

    /* eval on a partial batch: n = 5 of a 32-sample plan gives the loss of those 5 alone */
    gr_error err = {0};
    gr_plan ev;
    CHECK(gr_plan_compile(&ev, &acc.m, &acc.g, GR_PLAN_EVAL, true, &err) == GR_OK);
    gr_exec_ctx ectx = {.training = false};
    double l5 = 0.0, c5 = 0.0, l_each = 0.0, c_each = 0.0;
    gr_batch b5 = {.x = x, .y = y, .n = 5};
    gr_train_micro_step(&ev, &b5, &ectx, &l5, &c5);
    for (int i = 0; i < 5; i++) {
        gr_batch b1 = {.x = x + i * PER, .y = y + i, .n = 1};
        gr_train_micro_step(&ev, &b1, &ectx, &l_each, &c_each);
    }
    CHECK_CLOSE(l5, l_each, 1e-5, 0.0);
    CHECK(c5 == c_each);
    gr_plan_free(&ev);

    free(w0);
    free(x);
    gr_acc_free(&full);
    gr_acc_free(&acc);
    return gr_test_report();
}
