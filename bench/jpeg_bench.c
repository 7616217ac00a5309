/* jpeg_bench.c — the gpurun side of bench/jpeg.sh: JPEG training-pipeline
 * throughput, no training.
 *
 *   gpurun_jpeg_bench loader FILE.h5 [--group /train] [--batch 128] [--workers 2]
 *                            [--prefetch 4] [--batches N] [--size 224]
 *   gpurun_jpeg_bench decode LIST [--warmup 32]
 *
 * loader: gr_loader over an encoded split (`data imagefolder --store jpeg`),
 *   as a training job uses it: shuffled, drop_last, RandomResizedCrop to
 *   size x size (torchvision's scale and ratio), random horizontal flip,
 *   normalize with ImageNet's mean and std per channel; the decode workers
 *   decode only the crop box's part of each JPEG at the smallest DCT scale
 *   that still covers size x size (dataio/loader_encoded.c). The sample bytes
 *   are pread from the file per batch (an encoded split is never held in
 *   memory): from the page cache when the file was read before. Each worker
 *   makes whole batches, so the first W batches (W workers, at least 1) come
 *   at about the same time: they warm up (threads started, file open), and
 *   then `batches`, rounded down to a multiple of W, are timed, so that the
 *   window starts and ends on the same phase of the workers (default: one
 *   epoch less the warm-up, so rounded). Prints one JSON line: images_per_s,
 *   workers, batch, batches (timed), images.
 * decode: the ceiling without DCT scaling: every file named in LIST (one path
 *   a line) read into memory first (untimed), then decoded whole to RGB by
 *   libjpeg (jpeg_read_scanlines, JCS_RGB, default DCT and upsampling) on
 *   this one thread, nothing else done to the pixels. `warmup` images are
 *   decoded first, untimed. Prints one JSON line: images_per_s,
 *   megapixels_per_s, images. */
#include "../dataio/dataio.h"

#include <setjmp.h>
#include <stdio.h> /* before jpeglib.h, which uses FILE */
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>

static void usage(const char *msg) {
    fprintf(stderr,
            "gpurun_jpeg_bench: %s\nusage: gpurun_jpeg_bench loader FILE.h5 [--group G] [--batch B] [--workers W] "
            "[--prefetch P] [--batches N] [--size S]\n       gpurun_jpeg_bench decode LIST [--warmup K]\n",
            msg);
    exit(2);
}

static long long int_arg(const char *s, const char *name) {
    char *end = NULL;
    long long v = strtoll(s, &end, 10);
    if (!end || *end || v < 0) {
        fprintf(stderr, "gpurun_jpeg_bench: %s: '%s' is not a non-negative integer\n", name, s);
        exit(2);
    }
    return v;
}

/* ---- loader ---- */

static int jpeg_bench_loader(int argc, char **argv) {
    const char *path = NULL, *group = "/train";
    long long batch = 128, workers = 2, prefetch = 4, batches = -1, size = 224;
    for (int i = 0; i < argc; i++) {
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
        else if (!strcmp(a, "--size")) size = int_arg(v, a);
        else usage("unknown option");
    }
    if (!path) usage("no file given");
    if (batch < 1 || prefetch < 1 || size < 1) usage("--batch, --prefetch and --size must be >= 1");

    gr_error err = {0};
    gr_dataset *ds = NULL;
    if (gr_dataset_open(path, group, &ds, &err) != GR_OK) {
        fprintf(stderr, "gpurun_jpeg_bench: %s\n", err.msg);
        return (int)err.status;
    }
    gr_loader_config lc;
    memset(&lc, 0, sizeof lc);
    lc.batch = batch;
    lc.shuffle = true;
    lc.drop_last = true;
    lc.seed = 1;
    lc.world = 1;
    lc.n_norm = 3; /* ImageNet's, in stored units (DESIGN 1.5, encoded splits) */
    const double mean[3] = {123.675, 116.28, 103.53}, std[3] = {58.395, 57.12, 57.375};
    memcpy(lc.mean, mean, sizeof mean);
    memcpy(lc.std, std, sizeof std);
    lc.prefetch = (int)prefetch;
    lc.workers = (int)workers;
    lc.aug = (gr_augment){.crop = GR_CROP_RESIZED, .size = size, .scale = {0.08, 1.0},
                          .ratio = {3.0 / 4.0, 4.0 / 3.0}, .flip = true};
    gr_loader *ld = NULL;
    if (gr_loader_open(ds, &lc, &ld, &err) != GR_OK) {
        fprintf(stderr, "gpurun_jpeg_bench: %s\n", err.msg);
        return (int)err.status;
    }
    const long long warm = workers > 1 ? workers : 1;
    if (batches < 0) batches = gr_loader_batches_per_epoch(ld) - warm;
    batches -= batches % warm;
    if (batches < 1) {
        fprintf(stderr, "gpurun_jpeg_bench: %s%s: %lld samples make too few batches of %lld to warm up %lld and "
                        "time %lld\n", path, group, (long long)gr_dataset_len(ds), batch, warm, warm);
        return 2;
    }
    int64_t chw[3];
    gr_loader_sample_shape(ld, chw);
    const int64_t elems = chw[0] * chw[1] * chw[2];
    gr_batch *b = NULL;
    double sink = 0.0, t0 = 0.0;
    int64_t n = 0;
    for (long long i = 0; i < warm + batches; i++) {
        if (i == warm) t0 = gr_now(); /* batches 0..warm-1 are the warm-up */
        if (gr_loader_next(ld, &b, &err) != GR_OK) {
            fprintf(stderr, "gpurun_jpeg_bench: %s\n", err.msg);
            return (int)err.status;
        }
        sink += (double)b->x[(i * 7919) % (b->n * elems)]; /* touch the batch, as a consumer would */
        if (i >= warm) n += b->n;
        gr_loader_release(ld, b);
    }
    const double dt = gr_now() - t0;
    printf("{\"images_per_s\": %.1f, \"workers\": %lld, \"batch\": %lld, \"batches\": %lld, \"images\": %lld, "
           "\"check\": %g}\n",
           (double)n / dt, workers, batch, batches, (long long)n, sink);
    gr_loader_close(ld);
    gr_dataset_close(ds);
    return 0;
}

/* ---- plain libjpeg decode ---- */

typedef struct jb_file {
    unsigned char *bytes;
    size_t n;
    const char *path;
} jb_file;

typedef struct jb_err {
    struct jpeg_error_mgr mgr;
    jmp_buf jump;
} jb_err;

static void jb_error_exit(j_common_ptr cinfo) {
    jb_err *e = (jb_err *)cinfo->err;
    longjmp(e->jump, 1);
}

static unsigned char *jb_read_file(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, len = 0;
    unsigned char *buf = gr_xmalloc(cap);
    size_t got;
    while ((got = fread(buf + len, 1, cap - len, f)) > 0) {
        len += got;
        if (len == cap) buf = gr_xrealloc(buf, cap *= 2);
    }
    const int bad = ferror(f);
    fclose(f);
    if (bad || len == 0) {
        free(buf);
        return NULL;
    }
    *n = len;
    return buf;
}

/* Decodes one JPEG whole to RGB into *pix (grown as needed); returns
 * its pixel count, 0 when libjpeg refused it. */
static long long jb_decode(const jb_file *f, unsigned char **pix, size_t *cap) {
    struct jpeg_decompress_struct cinfo;
    jb_err e;
    cinfo.err = jpeg_std_error(&e.mgr);
    e.mgr.error_exit = jb_error_exit;
    if (setjmp(e.jump)) {
        jpeg_destroy_decompress(&cinfo);
        return 0;
    }
    jpeg_create_decompress(&cinfo);
    jpeg_mem_src(&cinfo, f->bytes, (unsigned long)f->n);
    jpeg_read_header(&cinfo, TRUE);
    cinfo.out_color_space = JCS_RGB;
    jpeg_start_decompress(&cinfo);
    const size_t stride = (size_t)cinfo.output_width * 3, need = stride * cinfo.output_height;
    if (need > *cap) {
        free(*pix);
        *pix = gr_xmalloc(need);
        *cap = need;
    }
    while (cinfo.output_scanline < cinfo.output_height) {
        JSAMPROW row = *pix + (size_t)cinfo.output_scanline * stride;
        jpeg_read_scanlines(&cinfo, &row, 1);
    }
    const long long px = (long long)cinfo.output_width * cinfo.output_height;
    jpeg_finish_decompress(&cinfo);
    jpeg_destroy_decompress(&cinfo);
    return px;
}

static int jpeg_bench_decode(int argc, char **argv) {
    const char *list = NULL;
    long long warmup = 32;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (a[0] != '-') {
            if (list) usage("more than one list given");
            list = a;
            continue;
        }
        if (i + 1 >= argc) usage("an option lacks its value");
        const char *v = argv[++i];
        if (!strcmp(a, "--warmup")) warmup = int_arg(v, a);
        else usage("unknown option");
    }
    if (!list) usage("no list given");
    FILE *lf = fopen(list, "r");
    if (!lf) {
        fprintf(stderr, "gpurun_jpeg_bench: %s: cannot open\n", list);
        return 3;
    }
    jb_file *files = NULL;
    size_t nf = 0, fcap = 0;
    char line[4096];
    while (fgets(line, sizeof line, lf)) {
        line[strcspn(line, "\r\n")] = 0;
        if (!line[0]) continue;
        if (nf == fcap) files = gr_xrealloc(files, (fcap = fcap ? 2 * fcap : 1024) * sizeof *files);
        jb_file *f = &files[nf];
        if (!(f->bytes = jb_read_file(line, &f->n))) {
            fprintf(stderr, "gpurun_jpeg_bench: %s (listed in %s): cannot read or empty\n", line, list);
            return 3;
        }
        f->path = gr_xstrdup(line);
        nf++;
    }
    fclose(lf);
    if (nf == 0) {
        fprintf(stderr, "gpurun_jpeg_bench: %s: no files listed\n", list);
        return 3;
    }
    unsigned char *pix = NULL;
    size_t cap = 0;
    for (size_t i = 0; i < (size_t)warmup && i < nf; i++) jb_decode(&files[i], &pix, &cap);
    long long px = 0;
    double sink = 0.0;
    const double t0 = gr_now();
    for (size_t i = 0; i < nf; i++) {
        const long long p = jb_decode(&files[i], &pix, &cap);
        if (p == 0) {
            fprintf(stderr, "gpurun_jpeg_bench: %s: libjpeg cannot decode it\n", files[i].path);
            return 3;
        }
        px += p;
        sink += pix[(i * 7919) % (size_t)(p * 3)];
    }
    const double dt = gr_now() - t0;
    printf("{\"images_per_s\": %.1f, \"megapixels_per_s\": %.2f, \"images\": %zu, \"check\": %g}\n",
           (double)nf / dt, (double)px / dt / 1e6, nf, sink);
    for (size_t i = 0; i < nf; i++) {
        free(files[i].bytes);
        free((void *)files[i].path);
    }
    free(files);
    free(pix);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) usage("no mode given");
    if (!strcmp(argv[1], "loader")) return jpeg_bench_loader(argc - 2, argv + 2);
    if (!strcmp(argv[1], "decode")) return jpeg_bench_decode(argc - 2, argv + 2);
    usage("the mode must be loader or decode");
    return 2;
}
