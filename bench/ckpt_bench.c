/* ckpt_bench.c — checkpoint save and load of a ResNet-50-sized training state
 * (25,557,032 params + BN running stats, SGD momentum: one optimizer slot,
 * about 205 MB of float32), the gpurun side of bench/ckpt.sh.
 *
 *   gpurun_ckpt_bench [--dir D] [--repeat R] [--config configs/resnet50.yaml]
 *                     [--device cpu|cuda[:N]]
 *
 * Builds the graph of the config (its model.input), fills params, state and
 * momentum with random floats, then R times, as bench/torch_ckpt_ref.py
 * does: a synchronous gr_ckpt_save (tmp, crc32c per tensor, fsync, rename,
 * directory fsync, LATEST, old ones deleted; keep 1) and a gr_ckpt_load of the
 * file just written (format, header, shapes and the crc32c of every tensor
 * verified). The load reads the page cache on both sides: each loads the file
 * it has just written and fsynced, nothing is dropped. The loaded state is
 * compared with what was saved (untimed), tensor by tensor: the arenas'
 * padding between tensors is not part of the state.
 *
 * Then R + 1 asynchronous saves through runner/saver.h as the training loop
 * makes them (runner/train.c gr_job_checkpoint_start): wait for the previous
 * save (untimed here: in training it finished long ago), then
 * gr_saver_snapshot: on the CPU backend it copies the batchnorm state and
 * starts the writer thread, which copies the weights and optimizer slots
 * itself before writing (training waits for that copy only before its next
 * optimizer update, a forward and backward pass later: reported as
 * deferred_copy_ms, not counted in the stall); on other backends it downloads
 * everything first. The training stall is the gr_saver_snapshot call; the
 * background write is timed too (gr_saver_last_s). The first async save is
 * reported on its own as stall_first_ms.
 *
 * Prints one JSON line like the reference: bytes (float32 payload), file_bytes,
 * medians save_s, load_s, save_gb_per_s, load_gb_per_s, stall_ms,
 * stall_pct_of_sync_save, async_write_s; and the per-repeat lists. */
#include "../checkpoints/ckpt.h"
#include "../config/spec.h"
#include "../kernels/backend.h"
#include "../runner/saver.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CKB_MAX_REPEAT 100

static void ckb_usage(const char *msg) {
    fprintf(stderr, "gpurun_ckpt_bench: %s\nusage: gpurun_ckpt_bench [--dir D] [--repeat R] "
                    "[--config JOB.yaml] [--device cpu|cuda[:N]]\n", msg);
    exit(2);
}

static void ckb_die(const gr_error *err) {
    fprintf(stderr, "gpurun_ckpt_bench: %s\n", err->msg);
    exit(err->status ? (int)err->status : 1);
}

static int ckb_cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double ckb_median(const double *v, int n) {
    double s[CKB_MAX_REPEAT];
    memcpy(s, v, (size_t)n * sizeof *s);
    qsort(s, (size_t)n, sizeof *s, ckb_cmp);
    return n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
}

static void ckb_list(const char *key, const double *v, int n) {
    printf(", \"%s\": [", key);
    for (int i = 0; i < n; i++) printf("%s%.6f", i ? ", " : "", v[i]);
    printf("]");
}

/* Random floats of roughly the size of trained weights, a pure function of (key, i). */
static void ckb_fill(float *x, int64_t n, uint64_t key) {
    for (int64_t i = 0; i < n; i++) x[i] = (gr_uniform(key, (uint64_t)i) - 0.5f) * 0.2f;
}

/* The first tensor whose elements differ between two host snapshots, or
 * NULL: every PARAM/STATE tensor of the params arena and each optimizer slot
 * of every PARAM tensor, element by element. Arenas are not compared whole:
 * the padding between tensors (GR_PARAM_ALIGN) is not in the file, and a
 * load leaves it as it was. */
static const char *ckb_differs(const gr_ckpt_state *a, const gr_ckpt_state *b, int slots) {
    const gr_graph *g = a->g;
    for (int i = 0; i < g->n_tensors; i++) {
        const gr_tensor *t = &g->tensors[i];
        if (t->kind != GR_TK_PARAM && t->kind != GR_TK_STATE) continue;
        const size_t n = (size_t)gr_tensor_numel(t) * sizeof(float), off = (size_t)t->param_offset;
        if (memcmp(a->params + off, b->params + off, n) != 0) return t->name;
        if (t->kind != GR_TK_PARAM) continue;
        for (int k = 0; k < slots; k++) {
            const size_t o = (size_t)k * (size_t)g->n_trainable + off;
            if (memcmp(a->optim + o, b->optim + o, n) != 0) return t->name;
        }
    }
    return NULL;
}

int main(int argc, char **argv) {
    const char *dir = "/tmp/gpurun-ckpt-bench", *config = "configs/resnet50.yaml", *device = "cpu";
    long repeat = 3;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (i + 1 >= argc) ckb_usage("an option lacks its value");
        const char *v = argv[++i];
        if (!strcmp(a, "--dir")) dir = v;
        else if (!strcmp(a, "--config")) config = v;
        else if (!strcmp(a, "--device")) device = v;
        else if (!strcmp(a, "--repeat")) {
            char *end = NULL;
            repeat = strtol(v, &end, 10);
            if (!end || *end || repeat < 1 || repeat >= CKB_MAX_REPEAT) ckb_usage("--repeat must be in [1, 99]");
        } else ckb_usage("unknown option");
    }
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "gpurun_ckpt_bench: %s: cannot create: %s\n", dir, strerror(errno));
        return 2;
    }

    gr_error err = {0};
    gr_job_spec spec;
    if (gr_spec_load(config, NULL, 0, &spec, &err)) ckb_die(&err);
    if (spec.model.n_input == 0) {
        fprintf(stderr, "gpurun_ckpt_bench: %s: model.input is needed (the graph is built without data)\n", config);
        return 2;
    }
    gr_graph g;
    if (gr_graph_build(&spec, spec.model.input, spec.model.n_input, &g, &err)) ckb_die(&err);
    const int slots = 1; /* SGD momentum, as the reference */
    const size_t n_params = (size_t)g.n_params, n_optim = (size_t)slots * (size_t)g.n_trainable;
    const double bytes = (double)(n_params + n_optim) * sizeof(float);

    char *spec_text = NULL;
    size_t spec_len = 0;
    FILE *mf = open_memstream(&spec_text, &spec_len);
    if (mf) {
        gr_spec_dump(&spec, mf);
        fclose(mf);
    }
    gr_ckpt_header h;
    memset(&h, 0, sizeof h);
    h.epoch = 1;
    h.sample_in_epoch = 256;
    h.world_size = 1;
    snprintf(h.precision, sizeof h.precision, "fp32");
    h.loss_scale = 1.0;
    h.rng[0] = 0;
    snprintf(h.optimizer, sizeof h.optimizer, "sgd");
    h.optim_slots = slots;
    h.spec = spec_text;

    float *params = gr_aligned_alloc(n_params * sizeof(float)), *optim = gr_aligned_alloc(n_optim * sizeof(float));
    float *params_in = gr_aligned_alloc(n_params * sizeof(float)), *optim_in = gr_aligned_alloc(n_optim * sizeof(float));
    GR_ASSERT(params && optim && params_in && optim_in);
    ckb_fill(params, (int64_t)n_params, 1);
    ckb_fill(optim, (int64_t)n_optim, 2);
    memset(params_in, 0, n_params * sizeof(float));
    memset(optim_in, 0, n_optim * sizeof(float));
    const gr_ckpt_state out = {&g, params, optim}, in = {&g, params_in, optim_in};

    /* synchronous save, then load of the file just written */
    double save_s[CKB_MAX_REPEAT], load_s[CKB_MAX_REPEAT];
    char name[64], path[GR_PATH_MAX + 80];
    long long file_bytes = 0;
    int64_t step = 0;
    for (long r = 0; r < repeat; r++) {
        h.step = ++step;
        h.rng[1] = (uint64_t)step;
        double t0 = gr_now();
        if (gr_ckpt_save(dir, &h, &out, 1, &err)) ckb_die(&err);
        save_s[r] = gr_now() - t0;
        gr_ckpt_filename(h.step, name, sizeof name);
        snprintf(path, sizeof path, "%s/%s", dir, name);
        gr_ckpt_header hl;
        t0 = gr_now();
        if (gr_ckpt_load(path, &hl, &in, &err)) ckb_die(&err);
        load_s[r] = gr_now() - t0;
        const char *bad = hl.step != h.step ? "the header's step" : ckb_differs(&out, &in, slots);
        if (bad) {
            fprintf(stderr, "gpurun_ckpt_bench: %s: the loaded state differs from the saved one (%s)\n", path, bad);
            return 1;
        }
        free(hl.spec);
        memset(params_in, 0, n_params * sizeof(float));
        memset(optim_in, 0, n_optim * sizeof(float));
        struct stat sb;
        if (stat(path, &sb) == 0) file_bytes = (long long)sb.st_size;
    }

    /* asynchronous saves as the training loop makes them */
    gr_backend *be = NULL;
    if (gr_backend_create(device, 0, &be, &err)) ckb_die(&err);
    float *dev_params = gr_backend_alloc(be, n_params * sizeof(float));
    float *dev_optim = gr_backend_alloc(be, n_optim * sizeof(float));
    GR_ASSERT(dev_params && dev_optim);
    gr_backend_upload(be, dev_params, params, n_params * sizeof(float));
    gr_backend_upload(be, dev_optim, optim, n_optim * sizeof(float));
    gr_backend_sync(be);
    gr_saver *sv = NULL;
    if (gr_saver_new(dir, 1, &g, slots, &sv, &err)) ckb_die(&err);
    double stall_s[CKB_MAX_REPEAT + 1], write_s[CKB_MAX_REPEAT + 1], copy_s[CKB_MAX_REPEAT + 1];
    for (long r = 0; r <= repeat; r++) {
        if (gr_saver_wait(sv, &err)) ckb_die(&err);
        h.step = ++step;
        h.rng[1] = (uint64_t)step;
        double t0 = gr_now();
        if (gr_saver_snapshot(sv, be, dev_params, dev_optim, &h, &err)) ckb_die(&err);
        stall_s[r] = gr_now() - t0;
        /* the weights' copy the writer thread makes; training waits for it
         * only before its next optimizer update, a forward and backward
         * pass later (reported, not counted in the stall) */
        t0 = gr_now();
        gr_saver_wait_copied(sv);
        copy_s[r] = gr_now() - t0;
        if (gr_saver_wait(sv, &err)) ckb_die(&err);
        write_s[r] = gr_saver_last_s(sv);
    }
    gr_saver_free(sv);
    gr_backend_dealloc(be, dev_params);
    gr_backend_dealloc(be, dev_optim);
    gr_backend_free(be);
    gr_ckpt_filename(step, name, sizeof name);
    snprintf(path, sizeof path, "%s/%s", dir, name);
    unlink(path);
    snprintf(path, sizeof path, "%s/LATEST", dir);
    unlink(path);

    const double save = ckb_median(save_s, (int)repeat), load = ckb_median(load_s, (int)repeat);
    const double stall = ckb_median(stall_s + 1, (int)repeat), wr = ckb_median(write_s + 1, (int)repeat);
    const double copy = ckb_median(copy_s + 1, (int)repeat);
    printf("{\"bytes\": %.0f, \"file_bytes\": %lld, \"trainable\": %lld, \"save_s\": %.6f, \"load_s\": %.6f, "
           "\"save_gb_per_s\": %.4f, \"load_gb_per_s\": %.4f, \"stall_ms\": %.3f, \"stall_first_ms\": %.3f, "
           "\"stall_pct_of_sync_save\": %.2f, \"deferred_copy_ms\": %.3f, \"async_write_s\": %.6f, \"device\": \"%s\", "
           "\"repeat\": %ld",
           bytes, file_bytes, (long long)g.n_weights, save, load, bytes / save / 1e9, bytes / load / 1e9,
           stall * 1e3, stall_s[0] * 1e3, 100.0 * stall / save, copy * 1e3, wr, device, repeat);
    ckb_list("save_runs_s", save_s, (int)repeat);
    ckb_list("load_runs_s", load_s, (int)repeat);
    ckb_list("stall_runs_s", stall_s + 1, (int)repeat);
    ckb_list("async_write_runs_s", write_s + 1, (int)repeat);
    printf("}\n");

    gr_aligned_free(params);
    gr_aligned_free(optim);
    gr_aligned_free(params_in);
    gr_aligned_free(optim_in);
    free(spec_text);
    gr_graph_free(&g);
    gr_spec_free(&spec);
    return 0;
}
