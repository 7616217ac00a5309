/* test_cuda_nccl.c — the NCCL side of data parallelism (dist/comm_nccl.c) on
 * one GPU: a communicator of one process (what `parallel.backend: nccl`
 * gives a single process), so every path runs on the machine a session is
 * lent (one GPU); several ranks need several GPUs. Label `gpu`: exits 77
 * (skipped) without a device or without NCCL in the build.
 *   - gr_comm_open_gpu on the CUDA backend's stream; a started sum, a
 *     blocking sum and a broadcast of device buffers leave a communicator
 *     of one's values as they were, bit for bit, and report no error;
 *   - the gradient buckets on a CUDA train plan (a small CNN, buckets of
 *     0.001 MiB = 262 floats; a bucket closes at the parameter that takes it
 *     past that, from the last layer down: the dense layers' 85, 272 and
 *     4112 floats, then the conv and batchnorm's, make 3 buckets, as
 *     gr_buckets_new gives on the CPU backend too): two micro-steps, the second armed, give the
 *     gradients of the same steps without buckets bit for bit (each bucket
 *     is summed after the kernels that write it: the collective stream
 *     waits for the compute stream's event, and the compute stream for the
 *     collectives before the optimizer would read them). */
#include <stdlib.h>
#include <string.h>

#include "dist/comm.h"
#include "ops/cuda_cmp.h"
#include "dist/buckets.h"

#define MB 8

/* a communicator of one on be's GPU, as `parallel.backend: nccl` makes for one process */
static bool open_comm(gr_backend *be, gr_comm *c) {
    gr_error err = {0};
    gr_comm_detect(c);
    c->world = 1;
    c->rank = 0;
    gr_status st = gr_comm_open(c, GR_COMM_NONE, &err);
    if (!st) st = gr_comm_open_gpu(c, gr_backend_stream(be), &err);
    CHECK_MSG(st == GR_OK && c->nccl, "%s", err.msg);
    return st == GR_OK;
}

static void test_comm(gr_backend *be) {
    gr_comm c;
    gr_error err = {0};
    if (!open_comm(be, &c)) return;
    enum { N = 1000 };
    float h[N], back[N];
    for (int i = 0; i < N; i++) h[i] = (float)i * 0.37f - 100.0f;
    float *d = gr_backend_alloc(be, sizeof h);
    gr_backend_upload(be, d, h, sizeof h);
    CHECK(gr_comm_isum_f32(&c, d, N, "t", &err) == GR_OK && gr_comm_wait_all(&c, &err) == GR_OK);
    CHECK(gr_comm_sum_f32(&c, d + 10, N - 10, "t", &err) == GR_OK);
    CHECK(gr_comm_bcast_f32(&c, d, N, "t", &err) == GR_OK);
    gr_backend_download(be, back, d, sizeof back);
    CHECK_MSG(memcmp(h, back, sizeof h) == 0, "a communicator of one changed the values");
    CHECK(!gr_comm_gpu_failed(&c));
    gr_backend_dealloc(be, d);
    gr_comm_close(&c, 0);
}

/* two micro-steps of a CNN into the grads arena, the second with the buckets armed when b */
static float *grads_of(gr_backend *be, gr_comm *c, bool buckets, int *nb, int64_t *n) {
    gr_cmp_model cm;
    gr_error err = {0};
    const int64_t shape[3] = {3, 8, 8};
    if (gr_cmp_model_build(&cm, "[{conv: {filters: 4, kernel: 3, padding: 1}}, batchnorm, relu, flatten, "
                                "{dense: {units: 16}}, relu, {dense: {units: 16}}, relu, {dense: {units: 5}}]",
                           NULL, shape, 3, MB, 0.0, false, GR_PREC_FP32, &err)) {
        CHECK_MSG(false, "%s", err.msg);
        gr_cmp_model_free(&cm);
        return NULL;
    }
    const gr_graph *g = &cm.g;
    gr_model m;
    gr_plan p;
    memset(&m, 0, sizeof m);
    memset(&p, 0, sizeof p);
    float *out = NULL;
    if (gr_model_init(&m, g, be, 0, &err) || gr_plan_compile(&p, &m, g, GR_PLAN_TRAIN, true, &err)) {
        CHECK_MSG(false, "%s", err.msg);
        goto done;
    }
    float *host = gr_cmp_init_params(g, 11);
    gr_backend_upload(be, m.params, host, (size_t)g->n_params * sizeof(float));
    free(host);
    gr_backend_zero(be, m.grads, (size_t)g->n_trainable * sizeof(float));
    gr_buckets *bk = buckets ? gr_buckets_new(&p, c, 0.001, NULL) : NULL;
    *nb = gr_buckets_count(bk);
    const int64_t per = gr_tensor_sample_numel(&g->tensors[g->input]);
    float *xb = gr_xmalloc((size_t)(MB * per) * sizeof *xb);
    int32_t yb[MB];
    for (int s = 0; s < 2; s++) {
        gr_cmp_batch(g, MB, gr_hash64(5, (uint64_t)s), xb, yb);
        gr_batch bt = {.x = xb, .y = yb, .n = MB};
        gr_exec_ctx ctx = {.training = true, .rng_key = 1, .grad_scale = 1.0f / (2 * MB)};
        double loss = 0.0, correct = 0.0;
        if (bk) gr_buckets_arm(bk, s == 1);
        gr_train_micro_step(&p, &bt, &ctx, &loss, &correct);
    }
    if (bk) CHECK(gr_buckets_finish(bk, &err) == GR_OK);
    out = gr_cmp_fetch(be, m.grads, g->n_trainable);
    *n = g->n_trainable;
    gr_buckets_free(bk);
    free(xb);
done:
    gr_plan_free(&p);
    gr_model_free(&m);
    gr_cmp_model_free(&cm);
    return out;
}

static void test_buckets(gr_backend *be) {
    gr_comm c;
    if (!open_comm(be, &c)) return;
    int nb0 = 0, nb1 = 0;
    int64_t n0 = 0, n1 = 0;
    float *plain = grads_of(be, &c, false, &nb0, &n0), *bucketed = grads_of(be, &c, true, &nb1, &n1);
    CHECK_MSG(nb1 >= 3, "%d buckets of 0.001 MiB, want at least 3", nb1);
    if (plain && bucketed)
        CHECK_MSG(n0 == n1 && n0 > 0 && memcmp(plain, bucketed, (size_t)n0 * sizeof(float)) == 0,
                  "the bucketed micro-steps' gradients are not the plain ones");
    free(plain);
    free(bucketed);
    gr_comm_close(&c, 0);
}

int main(void) {
    gr_backend *be = NULL;
    const int skip = gr_cmp_open_nccl(&be);
    if (skip) return skip;
    test_comm(be);
    test_buckets(be);
    gr_backend_free(be);
    return gr_test_report();
}
