/* test_optim_cuda.c — the CUDA backend's memory and optimizer kernels agree
 * with the CPU reference (SGD nesterov + weight decay, AdamW, the gradient
 * sum of squares). Label `gpu`: exits 77 (skipped) where no CUDA device is
 * present. */
#include <stdlib.h>
#include <string.h>

#include "gr_test.h"
#include "kernels/backend.h"

#define N 100003 /* not a multiple of any block size */

int main(void) {
    gr_error err = {0};
    gr_backend *cuda = NULL, *cpu = NULL;
    if (gr_backend_create("cuda:0", 0, &cuda, &err) != GR_OK) {
        printf("SKIP: %s\n", err.msg);
        return 77;
    }
    CHECK(gr_backend_create("cpu", 1, &cpu, &err) == GR_OK);
    float *w = malloc(N * sizeof *w), *g = malloc(N * sizeof *g), *w_ref = malloc(N * sizeof *w_ref);
    float *b_ref = calloc(N, sizeof *b_ref), *m_ref = calloc(N, sizeof *m_ref), *v_ref = calloc(N, sizeof *v_ref);
    float *back = malloc(N * sizeof *back);
    for (int i = 0; i < N; i++) {
        w[i] = 2.0f * gr_uniform(1, (uint64_t)i) - 1.0f;
        g[i] = 2.0f * gr_uniform(2, (uint64_t)i) - 1.0f;
    }
    size_t bytes = N * sizeof(float);
    float *dw = gr_backend_alloc(cuda, bytes), *dg = gr_backend_alloc(cuda, bytes);
    float *db = gr_backend_alloc(cuda, bytes), *dm = gr_backend_alloc(cuda, bytes), *dv = gr_backend_alloc(cuda, bytes);
    CHECK(dw && dg && db && dm && dv);
    gr_backend_upload(cuda, dg, g, bytes);

    /* SGD, 3 steps */
    memcpy(w_ref, w, bytes);
    gr_backend_upload(cuda, dw, w, bytes);
    gr_backend_zero(cuda, db, bytes);
    gr_sgd_hparams sh = {.lr = 0.1f, .momentum = 0.9f, .weight_decay = 1e-4f, .grad_mult = 0.5f, .nesterov = true};
    for (int s = 0; s < 3; s++) {
        gr_backend_sgd(cpu, w_ref, g, b_ref, N, &sh, NULL, NULL);
        gr_backend_sgd(cuda, dw, dg, db, N, &sh, NULL, NULL);
    }
    gr_backend_download(cuda, back, dw, bytes);
    int bad = 0;
    for (int i = 0; i < N; i++) bad += fabsf(back[i] - w_ref[i]) > 1e-6f + 1e-5f * fabsf(w_ref[i]);
    CHECK_MSG(bad == 0, "sgd: %d of %d weights differ", bad, N);

    /* AdamW, 3 steps */
    memcpy(w_ref, w, bytes);
    gr_backend_upload(cuda, dw, w, bytes);
    gr_backend_zero(cuda, dm, bytes);
    gr_backend_zero(cuda, dv, bytes);
    for (int s = 0; s < 3; s++) {
        gr_adamw_hparams ah = {.lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, .weight_decay = 0.01f,
                               .grad_mult = 1.0f, .t = s + 1};
        gr_backend_adamw(cpu, w_ref, g, m_ref, v_ref, N, &ah, NULL, NULL);
        gr_backend_adamw(cuda, dw, dg, dm, dv, N, &ah, NULL, NULL);
    }
    gr_backend_download(cuda, back, dw, bytes);
    bad = 0;
    for (int i = 0; i < N; i++) bad += fabsf(back[i] - w_ref[i]) > 1e-6f + 1e-5f * fabsf(w_ref[i]);
    CHECK_MSG(bad == 0, "adamw: %d of %d weights differ", bad, N);

    CHECK_CLOSE(gr_backend_sumsq(cuda, dg, N), gr_backend_sumsq(cpu, g, N), 1e-9, 0.0);

    gr_backend_dealloc(cuda, dw);
    gr_backend_dealloc(cuda, dg);
    gr_backend_dealloc(cuda, db);
    gr_backend_dealloc(cuda, dm);
    gr_backend_dealloc(cuda, dv);
    gr_backend_free(cuda);
    gr_backend_free(cpu);
    free(w); free(g); free(w_ref); free(b_ref); free(m_ref); free(v_ref); free(back);
    return gr_test_report();
}
