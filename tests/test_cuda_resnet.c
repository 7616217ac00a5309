/* test_cuda_resnet.c — one ResNet-18 training step on the CUDA backend
 * against the CPU reference: the model of configs/resnet18-cifar10.yaml
 * (read by the runner's spec loader, micro-batch and batch 8), the same
 * initial parameters and random 3x32x32 batch on both, one forward +
 * backward, the SGD step of the job (momentum 0.9, weight decay 5e-4), then
 * an eval pass with the updated weights and running stats. Strict fp32.
 * Label `gpu`: exits 77 (skipped) without a device.
 *
 * Errors are NMSE = sum((a-b)^2) / sum(b^2), b the CPU's; all are printed.
 * For scale: the CPU's two paths (oneDNN; im2col + OpenBLAS) differ here by
 * 4e-12 in the gradients (1e-11 in the worst tensor) and 1e-14 in the
 * running stats and eval logits. Forward results are smooth functions of
 * the inputs and keep that size through 18 layers: loss 2e-5 relative,
 * running stats NMSE 1e-9 per tensor, eval logits 1e-7. Gradients are not:
 * a relu input within rounding of zero (~1e-6 relative, over ~4.5M relu
 * elements) may fall on either side on the two backends and pass a whole
 * gradient element on one only; one such flip in layer 4 (8x4x4 positions
 * per channel) moves that conv's weight gradient by NMSE ~2e-5. Hence
 * gradients NMSE 1e-5 over the whole arena and 1e-4 per tensor (a wrong
 * kernel is 1e-3 or more; ops/test_cuda_vs_cpu.c holds fp32 to 1e-8 on models too
 * small for flips). Weights after the step differ by lr times the gradient
 * error: NMSE 1e-8. */
#include "ops/cuda_cmp.h"

#define MB 8

static void resnet_config_path(char *buf, size_t n) {
    snprintf(buf, n, "%s/configs/resnet18-cifar10.yaml", GR_SOURCE_DIR);
}

/* Per-tensor NMSEs of one arena's kind-k tensors (PARAM: at param_offset in
 * a and b): prints the worst and checks each against tol. Returns the worst. */
static double resnet_per_tensor(const gr_graph *g, gr_tensor_kind k, const float *dev, const float *ref,
                                const char *what, double tol) {
    double worst = 0.0;
    const char *worst_at = "-";
    int over = 0, n = 0;
    for (int t = 0; t < g->n_tensors; t++) {
        const gr_tensor *tt = &g->tensors[t];
        if (tt->kind != k) continue;
        double e = gr_cmp_nmse(dev + tt->param_offset, ref + tt->param_offset, gr_tensor_numel(tt));
        n++;
        if (!(e <= worst)) { worst = e; worst_at = tt->name; }
        if (!(e <= tol)) {
            over++;
            fprintf(stderr, "  %s %s: NMSE %.3g > %.1g\n", what, tt->name, e, tol);
        }
    }
    printf("%-28s worst tensor NMSE %.3g (%s) of %d\n", what, worst, worst_at, n);
    CHECK_MSG(over == 0, "%s: %d tensor(s) over %.1g", what, over, tol);
    return worst;
}

static void resnet_global(const char *what, const float *dev, const float *ref, int64_t n, double tol) {
    double e = gr_cmp_nmse(dev, ref, n);
    printf("%-28s NMSE %.3g\n", what, e);
    CHECK_MSG(e <= tol, "%s: NMSE %.3g > %.1g", what, e, tol);
}

int main(void) {
    gr_error err = {0};
    gr_backend *be[2] = {NULL, NULL}; /* [0] cpu reference, [1] device */
    gr_backend_opts opts = {.precision = GR_PREC_FP32, .cudnn_benchmark = false, .cuda_graph = false};
    if (gr_cmp_open_device(&opts, &be[1], &err) != GR_OK) {
        printf("SKIP: %s\n", err.msg);
        return 77;
    }
    CHECK(gr_backend_create("cpu", 0, &be[0], &err) == GR_OK);
    if (!be[0]) return gr_test_report();

    char path[GR_PATH_MAX];
    resnet_config_path(path, sizeof path);
    static const char *const sets[] = {"train.micro_batch=8", "train.batch_size=8"};
    gr_job_spec spec;
    gr_status st = gr_spec_load(path, sets, 2, &spec, &err);
    CHECK_MSG(st == GR_OK, "%s", err.msg);
    if (st) return gr_test_report();
    CHECK(spec.model.n_input == 3 && spec.train.micro_batch == MB);
    CHECK(spec.train.optimizer.type == GR_OPTIM_SGD && spec.train.optimizer.momentum > 0.0);
    gr_graph g;
    st = gr_graph_build(&spec, spec.model.input, spec.model.n_input, &g, &err);
    CHECK_MSG(st == GR_OK, "%s", err.msg);
    if (st) return gr_test_report();
    gr_autodiff(&g, false);
    CHECK(g.n_weights == 11173962); /* the config's own claim: it is the model meant */
    const int64_t nt = g.n_trainable, np = g.n_params, k = g.n_classes;
    const int64_t per = gr_tensor_sample_numel(&g.tensors[g.input]);
    printf("resnet18-cifar10: %lld parameters, micro-batch %d, cpu vs %s\n", (long long)nt, MB,
           gr_cmp_device_name());

    float *host = gr_cmp_init_params(&g, 18);
    gr_model m[2];
    gr_plan tp[2], ep[2];
    memset(m, 0, sizeof m);
    memset(tp, 0, sizeof tp);
    memset(ep, 0, sizeof ep);
    bool ready = true;
    for (int b = 0; b < 2 && ready; b++) {
        if (gr_model_init(&m[b], &g, be[b], 1, &err) || gr_plan_compile(&tp[b], &m[b], &g, GR_PLAN_TRAIN, true, &err) ||
            gr_plan_compile(&ep[b], &m[b], &g, GR_PLAN_EVAL, true, &err)) {
            CHECK_MSG(false, "%s: %s", gr_backend_name(be[b]), err.msg);
            ready = false;
        } else {
            gr_backend_upload(be[b], m[b].params, host, (size_t)np * sizeof(float));
        }
    }
    if (!ready) goto done;

    float *x = gr_xmalloc((size_t)(MB * per) * sizeof *x);
    int32_t y[MB];
    gr_cmp_batch(&g, MB, 0x5E5E7, x, y);
    gr_batch bt = {.x = x, .y = y, .n = MB};

    /* forward + backward */
    gr_exec_ctx ctx = {.training = true, .rng_key = gr_hash64(spec.seed, 0), .grad_scale = 1.0f / MB};
    double loss[2] = {0.0, 0.0}, correct[2] = {0.0, 0.0};
    for (int b = 0; b < 2; b++) {
        gr_backend_zero(be[b], m[b].grads, (size_t)nt * sizeof(float));
        gr_cmp_poison(&tp[b]);
        double t0 = gr_now();
        gr_train_micro_step(&tp[b], &bt, &ctx, &loss[b], &correct[b]);
        printf("%-28s %.3f s\n", b ? "forward+backward, device" : "forward+backward, cpu", gr_now() - t0);
    }
    printf("%-28s %.9g, cpu %.9g; correct %g, cpu %g\n", "loss sum", loss[1], loss[0], correct[1], correct[0]);
    CHECK_MSG(fabs(loss[1] - loss[0]) <= 2e-5 * fabs(loss[0]), "loss sum %.9g, cpu %.9g", loss[1], loss[0]);
    CHECK_MSG(correct[1] == correct[0], "correct %g, cpu %g", correct[1], correct[0]);

    float *gw[2], *p0[2];
    for (int b = 0; b < 2; b++) {
        gw[b] = gr_cmp_fetch(be[b], m[b].grads, nt);
        p0[b] = gr_cmp_fetch(be[b], m[b].params, np);
    }
    resnet_global("gradients, whole arena", gw[1], gw[0], nt, 1e-5);
    resnet_per_tensor(&g, GR_TK_PARAM, gw[1], gw[0], "gradients", 1e-4);
    resnet_per_tensor(&g, GR_TK_STATE, p0[1], p0[0], "running stats", 1e-9);
    CHECK_MSG(memcmp(p0[1], host, (size_t)nt * sizeof(float)) == 0, "the pass changed the device's weights");

    /* the optimizer step */
    for (int b = 0; b < 2; b++) gr_train_apply(&m[b], &spec, spec.train.optimizer.lr, 0);
    float *p1[2], *mom[2], *upd[2];
    for (int b = 0; b < 2; b++) {
        p1[b] = gr_cmp_fetch(be[b], m[b].params, np);
        mom[b] = gr_cmp_fetch(be[b], m[b].optim, nt);
        upd[b] = gr_xmalloc((size_t)nt * sizeof(float));
        for (int64_t i = 0; i < nt; i++) upd[b][i] = p1[b][i] - host[i];
    }
    resnet_global("weights after the step", p1[1], p1[0], nt, 1e-8);
    resnet_global("update (after - before)", upd[1], upd[0], nt, 1e-5);
    resnet_global("momentum buffer", mom[1], mom[0], nt, 1e-5);
    CHECK_MSG(memcmp(p1[1] + nt, p0[1] + nt, (size_t)(np - nt) * sizeof(float)) == 0,
              "the optimizer step changed the running stats");

    /* eval with the new weights and running stats */
    {
        gr_exec_ctx ectx = {.training = false, .rng_key = 0, .grad_scale = 0.0f};
        double el[2] = {0.0, 0.0}, ec[2] = {0.0, 0.0};
        float *z[2];
        for (int b = 0; b < 2; b++) {
            gr_cmp_poison(&ep[b]);
            gr_train_micro_step(&ep[b], &bt, &ectx, &el[b], &ec[b]);
            z[b] = gr_cmp_fetch(be[b], gr_plan_ptr(&ep[b], g.logits), MB * k);
        }
        double zmax = 0.0;
        for (int64_t i = 0; i < MB * k; i++) zmax = GR_MAX(zmax, fabs((double)z[0][i]));
        resnet_global("eval logits", z[1], z[0], MB * k, 1e-7);
        printf("%-28s %.9g, cpu %.9g; correct %g, cpu %g\n", "eval loss sum", el[1], el[0], ec[1], ec[0]);
        CHECK_MSG(fabs(el[1] - el[0]) <= 1e-4 * fabs(el[0]), "eval loss sum %.9g, cpu %.9g", el[1], el[0]);
        int ties = gr_cmp_near_ties(z[0], MB, k, 1e-2 * (zmax + 1e-6));
        CHECK_MSG(fabs(ec[1] - ec[0]) <= ties, "eval correct %g, cpu %g (%d near ties)", ec[1], ec[0], ties);
        free(z[0]);
        free(z[1]);
    }

    for (int b = 0; b < 2; b++) {
        free(gw[b]);
        free(p0[b]);
        free(p1[b]);
        free(mom[b]);
        free(upd[b]);
    }
    free(x);
done:
    for (int b = 0; b < 2; b++) {
        gr_plan_free(&ep[b]);
        gr_plan_free(&tp[b]);
        gr_model_free(&m[b]);
    }
    free(host);
    gr_graph_free(&g);
    gr_spec_free(&spec);
    gr_backend_free(be[1]);
    gr_backend_free(be[0]);
    return gr_test_report();
}
