/* loader_bench.c — the loader alone, no training: how many augmented,
 * normalized samples per second gr_loader delivers from an HDF5 split.
 *
 *   gpurun_loader_bench FILE.h5 [--group /train] [--batch 256] [--workers 2]
 *                       [--prefetch 4] [--crop rrc224|pad4|none] [--batches 60]
 *                       [--cache auto|memory|none]
 *
 * The options and the work match bench/torch_loader_ref.py: shuffled,
 * drop_last, the crop (rrc224: random-resized-crop to 224 with torchvision's
 * scale and ratio; pad4: random 28x28 crop of the image padded by 4; none),
 * a random horizontal flip whenever there is a crop, normalize with mean
 * 0.45 * 255 and std 0.225 * 255 (stored units: what ConvertImageDtype then
 * Normalize([0.45], [0.225]) computes). One batch warms up (threads started,
 * file open), then `batches` are timed. Prints one JSON line like the
 * reference: samples_per_s, gb_per_s (bytes of uint8 pixels delivered, as the
 * reference counts them), workers, batches, crop. */
#include "../dataio/dataio.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(const char *msg) {
    fprintf(stderr, "gpurun_loader_bench: %s\nusage: gpurun_loader_bench FILE.h5 [--group G] [--batch B] "
                    "[--workers W] [--prefetch P] [--crop rrc224|pad4|none] [--batches N] "
                    "[--cache auto|memory|none]\n", msg);
    exit(2);
}

static long long int_arg(const char *s, const char *name) {
    char *end = NULL;
    long long v = strtoll(s, &end, 10);
    if (!end || *end || v < 0) {
        fprintf(stderr, "gpurun_loader_bench: %s: '%s' is not a non-negative integer\n", name, s);
        exit(2);
    }
    return v;
}

int main(int argc, char **argv) {
    const char *path = NULL, *group = "/train", *crop = "rrc224", *cache = "auto";
    long long batch = 256, workers = 2, prefetch = 4, batches = 60;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (a[0] != '-') {
            if (path) usage("more than one file given");
            path = a;
            continue;
        }
        if (i + 1 >= argc) usage("an option lacks its value");
        const char *v = argv[++i];
        if (!strcmp(a, "--group")) group = v;
        else if (!strcmp(a, "--batch")) batch = int_arg(v, a);
        else if (!strcmp(a, "--workers")) workers = int_arg(v, a);
        else if (!strcmp(a, "--prefetch")) prefetch = int_arg(v, a);
        else if (!strcmp(a, "--batches")) batches = int_arg(v, a);
        else if (!strcmp(a, "--crop")) crop = v;
        else if (!strcmp(a, "--cache")) cache = v;
        else usage("unknown option");
    }
    if (!path) usage("no file given");

    gr_cache_mode cm = !strcmp(cache, "memory") ? GR_CACHE_MEMORY : !strcmp(cache, "none") ? GR_CACHE_NONE
                                                                                         : GR_CACHE_AUTO;
    gr_error err = {0};
    gr_dataset *ds = NULL;
    if (gr_dataset_open_cache(path, group, cm, &ds, &err) != GR_OK) {
        fprintf(stderr, "gpurun_loader_bench: %s\n", err.msg);
        return 3;
    }
    gr_loader_config lc;
    memset(&lc, 0, sizeof lc);
    lc.batch = batch;
    lc.shuffle = true;
    lc.drop_last = true;
    lc.seed = 1;
    lc.world = 1;
    lc.n_norm = 1;
    lc.mean[0] = 0.45 * 255.0;
    lc.std[0] = 0.225 * 255.0;
    lc.prefetch = (int)prefetch;
    lc.workers = (int)workers;
    if (!strcmp(crop, "rrc224")) {
        lc.aug = (gr_augment){.crop = GR_CROP_RESIZED, .size = 224, .scale = {0.08, 1.0},
                              .ratio = {3.0 / 4.0, 4.0 / 3.0}, .flip = true};
    } else if (!strcmp(crop, "pad4")) {
        lc.aug = (gr_augment){.crop = GR_CROP_RANDOM, .size = 28, .padding = 4, .flip = true};
    } else if (strcmp(crop, "none") != 0) {
        usage("--crop must be rrc224, pad4 or none");
    }
    gr_loader *ld = NULL;
    if (gr_loader_open(ds, &lc, &ld, &err) != GR_OK) {
        fprintf(stderr, "gpurun_loader_bench: %s\n", err.msg);
        return (int)err.status;
    }
    int64_t chw[3];
    gr_loader_sample_shape(ld, chw);
    const int64_t elems = chw[0] * chw[1] * chw[2];
    gr_batch *b = NULL;
    double sink = 0.0, t0 = 0.0;
    int64_t n = 0;
    for (long long i = 0; i <= batches; i++) {
        if (i == 1) t0 = gr_now(); /* batch 0 is the warm-up */
        if (gr_loader_next(ld, &b, &err) != GR_OK) {
            fprintf(stderr, "gpurun_loader_bench: %s\n", err.msg);
            return (int)err.status;
        }
        sink += (double)b->x[(i * 7919) % (b->n * elems)]; /* touch the batch, as a consumer would */
        if (i > 0) n += b->n;
        gr_loader_release(ld, b);
    }
    const double dt = gr_now() - t0;
    printf("{\"samples_per_s\": %.1f, \"gb_per_s\": %.4f, \"workers\": %lld, \"batches\": %lld, \"crop\": \"%s\", "
           "\"in_memory\": %s, \"check\": %g}\n",
           (double)n / dt, (double)n * (double)elems / dt / 1e9, workers, batches, crop,
           gr_dataset_in_memory(ds) ? "true" : "false", sink);
    gr_loader_close(ld);
    gr_dataset_close(ds);
    return 0;
}
