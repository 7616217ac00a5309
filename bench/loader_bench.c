/* loader_bench.c — the loader alone, no training: how many augmented,
 * normalized samples per second gr_loader delivers from an HDF5 split.
 *
 *   gpurun_loader_bench FILE.h5 [--group /train] [--batch 256] [--workers 2]
 *                       [--prefetch 4] [--crop rrc224|pad4|none] [--batches 60]
 *                       [--cache auto|memory|none] [--decode cpu|gpu] [--device cuda:N]
 *   gpurun_loader_bench --make-jpegs DIR N   (N JPEGs of 500x375 in DIR/a, DIR/b, for
 *                                             `gpurun data imagefolder --store jpeg`)
 *
 * The options and the work match bench/torch_loader_ref.py: shuffled,
 * drop_last, the crop (rrc224: random-resized-crop to 224 with torchvision's
 * scale and ratio; pad4: random 28x28 crop of the image padded by 4; none),
 * a random horizontal flip whenever there is a crop, normalize with mean
 * 0.45 * 255 and std 0.225 * 255 (stored units: what ConvertImageDtype then
 * Normalize([0.45], [0.225]) computes). One batch warms up (threads started,
 * file open), then `batches` are timed. Prints one JSON line like the
 * reference: samples_per_s, gb_per_s (bytes of uint8 pixels delivered, as the
 * reference counts them), workers, batches, crop.
 *
 * An encoded split (`data imagefolder --store jpeg`) with --device: every
 * batch also reaches the device, so the two data.decode paths compare as a
 * job sees them: --decode cpu, the workers decode and each batch's x is
 * uploaded; --decode gpu, the workers ship the JPEG bytes and the backend's
 * image decoder (nvJPEG, kernels/cuda/nvjpeg_decode.c) decodes, crops,
 * flips and normalizes into a device tensor (the samples it gives back are
 * decoded on the host and uploaded, as runner/decode.c does). The clock
 * stops after the device is synchronized. */
#include "../dataio/dataio.h"
#include "../dataio/image.h"
#include "../kernels/backend.h"

#include <math.h>
#include <sys/stat.h>

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

/* --make-jpegs: n photo-sized JPEGs (500x375, quality 90, 4:2:0; smooth
 * shapes plus grain, so they compress as photos do) in dir/a and dir/b. */
static int make_jpegs(const char *dir, long long n) {
    char path[4096];
    mkdir(dir, 0755);
    for (int c = 0; c < 2; c++) {
        snprintf(path, sizeof path, "%s/%c", dir, 'a' + c);
        mkdir(path, 0755);
    }
    gr_image img = {.w = 500, .h = 375, .rgb = malloc(500 * 375 * 3)};
    for (long long i = 0; i < n; i++) {
        for (int64_t y = 0; y < img.h; y++)
            for (int64_t x = 0; x < img.w; x++)
                for (int c = 0; c < 3; c++) {
                    const uint64_t g = gr_hash64((uint64_t)i, (uint64_t)((y * img.w + x) * 3 + c)) % 24;
                    const double v = 120 + 80 * sin(0.013 * (double)(x * (i % 7 + 1)) + c) * cos(0.017 * (double)y) +
                                     (double)g;
                    img.rgb[(y * img.w + x) * 3 + c] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
                }
        uint8_t *buf = NULL;
        size_t len = 0;
        char why[GR_IMAGE_WHY_MAX];
        snprintf(path, sizeof path, "%s/%c/%06lld.jpg", dir, 'a' + (int)(i % 2), i);
        FILE *f = NULL;
        if (!gr_image_encode_jpeg(&img, 3, 90, &buf, &len, why) || !(f = fopen(path, "wb")) ||
            fwrite(buf, 1, len, f) != len) {
            fprintf(stderr, "gpurun_loader_bench: %s: %s\n", path, f ? "write failed" : why);
            return 1;
        }
        fclose(f);
        free(buf);
    }
    free(img.rgb);
    return 0;
}

static void *bench_host_alloc(size_t bytes, void *ctx) { return gr_backend_host_alloc(ctx, bytes); }
static void bench_host_free(void *p, void *ctx) { gr_backend_host_free(ctx, p); }

int main(int argc, char **argv) {
    if (argc == 4 && !strcmp(argv[1], "--make-jpegs")) return make_jpegs(argv[2], int_arg(argv[3], argv[1]));
    const char *path = NULL, *group = "/train", *crop = "rrc224", *cache = "auto", *decode = "cpu", *device = NULL;
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
        else if (!strcmp(a, "--decode")) decode = v;
        else if (!strcmp(a, "--device")) device = v;
        else usage("unknown option");
    }
    if (!path) usage("no file given");
    const bool gpu = !strcmp(decode, "gpu");
    if (!gpu && strcmp(decode, "cpu") != 0) usage("--decode must be cpu or gpu");
    if (gpu && !device) usage("--decode gpu needs --device cuda:N");

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
    gr_backend *be = NULL;
    char desc[640] = "";
    if (device) {
        if (gr_backend_create(device, 0, &be, &err) != GR_OK ||
            (gpu && gr_backend_decoder_open(be, desc, sizeof desc, &err) != GR_OK)) {
            fprintf(stderr, "gpurun_loader_bench: %s\n", err.msg);
            return (int)err.status;
        }
        lc.host_alloc = bench_host_alloc;
        lc.host_free = bench_host_free;
        lc.alloc_ctx = be;
        lc.encoded_payload = gpu;
        if (gpu && !gr_dataset_encoded(ds)) usage("--decode gpu needs an encoded split (data imagefolder --store jpeg)");
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
    int64_t n = 0, host = 0;
    float *dev = be ? gr_backend_alloc(be, (size_t)batch * (size_t)elems * sizeof(float)) : NULL;
    uint8_t *need = calloc((size_t)batch, 1);
    char why[256];
    if (be && !dev) {
        fprintf(stderr, "gpurun_loader_bench: out of device memory for a batch\n");
        return 4;
    }
    for (long long i = 0; i <= batches; i++) {
        if (i == 1) { /* batch 0 is the warm-up */
            if (be) gr_backend_sync(be);
            t0 = gr_now();
        }
        if (gr_loader_next(ld, &b, &err) != GR_OK ||
            (b->enc && gr_backend_decode_images(be, b->enc, dev, need, why, sizeof why, &err) != GR_OK)) {
            fprintf(stderr, "gpurun_loader_bench: %s\n", err.msg);
            return (int)err.status;
        }
        for (int64_t k = 0; b->enc && k < b->n; k++) {
            if (!b->enc->s[k].host && !need[k]) continue;
            if (need[k] && gr_loader_decode_host(ld, b, k, &err) != GR_OK) {
                fprintf(stderr, "gpurun_loader_bench: %s\n", err.msg);
                return (int)err.status;
            }
            gr_backend_upload_batch(be, dev + k * elems, b->x + k * elems, (size_t)elems * sizeof(float));
            host += i > 0;
        }
        if (be && !b->enc) gr_backend_upload_batch(be, dev, b->x, (size_t)(b->n * elems) * sizeof(float));
        if (be) gr_backend_sync(be); /* the batch is consumed: its slot goes back to the loader */
        else sink += (double)b->x[(i * 7919) % (b->n * elems)]; /* touch the batch, as a consumer would */
        if (i > 0) n += b->n;
        gr_loader_release(ld, b);
    }
    const double dt = gr_now() - t0;
    if (be) {
        printf("{\"decode\": \"%s\", \"device\": \"%s\", \"decoder\": \"%s\", \"samples_per_s\": %.1f, "
               "\"host_decoded\": %lld, \"workers\": %lld, \"batches\": %lld, \"batch\": %lld}\n", decode, device,
               gpu ? desc : "the loader's workers", (double)n / dt, (long long)host, workers, batches, batch);
        gr_loader_close(ld);
        gr_backend_dealloc(be, dev);
        gr_backend_free(be);
        gr_dataset_close(ds);
        free(need);
        return 0;
    }
    free(need);
    printf("{\"samples_per_s\": %.1f, \"gb_per_s\": %.4f, \"workers\": %lld, \"batches\": %lld, \"crop\": \"%s\", "
           "\"in_memory\": %s, \"check\": %g}\n",
           (double)n / dt, (double)n * (double)elems / dt / 1e9, workers, batches, crop,
           gr_dataset_in_memory(ds) ? "true" : "false", sink);
    gr_loader_close(ld);
    gr_dataset_close(ds);
    return 0;
}
