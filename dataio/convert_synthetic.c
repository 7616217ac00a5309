/* convert_synthetic.c — `gpurun data synthetic OUT.h5 --n N --shape C,H,W`:
 * a generated classification dataset for benchmarks and tests. Every value
 * is a counter-based random number of (seed, split, sample), so blocks are
 * generated on all cores in any order and the file is a pure function of the
 * config; the whole array is never in memory. */
#include "convert.h"
#include "convert_out.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SYN_MAX_DIM 65536
#define SYN_MAX_SAMPLE ((int64_t)1 << 30)
#define SYN_MAX_N ((int64_t)INT32_MAX)
#define SYN_AMPLITUDE 40.0f     /* of the class cosine */
#define SYN_OFFSET_RANGE 80.0f  /* per-channel class offsets in [-40, 40) */
#define SYN_NOISE 48.0f         /* uniform noise in [-48, 48) */
#define SYN_TWO_PI 6.28318530717958647692

/* Streams of one split: labels, noise; the class patterns are shared. */
typedef struct syn_gen {
    int64_t c, h, w, chw, classes;
    uint64_t class_key;   /* class offsets and phases */
    uint64_t label_key;   /* label of sample i */
    uint64_t noise_key;   /* 8 noise bytes per counter */
} syn_gen;

enum { SYN_STREAM_CLASS = 1, SYN_STREAM_LABEL, SYN_STREAM_NOISE };

static int32_t syn_label(const syn_gen *g, int64_t i) {
    return (int32_t)(gr_hash64(g->label_key, (uint64_t)i) % (uint64_t)g->classes);
}

/* Sample i of label k into dst (C*H*W bytes). Scratch: ca, sa (W floats),
 * noise (C*H*W bytes, rounded up to 8). The pattern of class k, channel c is
 * 128 + offset + A cos(2 pi (fx (x + 0.5) / W + fy (y + 0.5) / H) + phase),
 * fx = k mod 4, fy = (k / 4) mod 4, written as cos(a + b) = cos a cos b -
 * sin a sin b so the inner loop is two products. */
static void syn_sample(const syn_gen *g, int64_t i, int32_t k, uint8_t *dst, float *ca, float *sa,
                       uint8_t *noise) {
    const int fx = k % 4, fy = (k / 4) % 4;
    const int64_t W = g->w; /* a local: the uint8_t stores below may alias *g */
    for (int64_t x = 0; x < g->w; x++) {
        const double a = SYN_TWO_PI * fx * ((double)x + 0.5) / (double)g->w;
        ca[x] = (float)cos(a);
        sa[x] = (float)sin(a);
    }
    const uint64_t words = (uint64_t)(g->chw + 7) / 8;
    for (uint64_t q = 0; q < words; q++) {
        uint64_t r = gr_hash64(g->noise_key, (uint64_t)i * words + q);
        for (int b = 0; b < 8; b++) noise[8 * q + (uint64_t)b] = (uint8_t)(r >> (8 * b));
    }
    const float noise_scale = SYN_NOISE / 128.0f;
    for (int64_t c = 0; c < g->c; c++) {
        const uint64_t ctr = 2 * ((uint64_t)k * (uint64_t)g->c + (uint64_t)c);
        const float base = 128.0f + (gr_uniform(g->class_key, ctr) - 0.5f) * SYN_OFFSET_RANGE;
        const double phase = SYN_TWO_PI * gr_uniform(g->class_key, ctr + 1);
        for (int64_t y = 0; y < g->h; y++) {
            const double b = SYN_TWO_PI * fy * ((double)y + 0.5) / (double)g->h + phase;
            const float cb = SYN_AMPLITUDE * (float)cos(b), sb = SYN_AMPLITUDE * (float)sin(b);
            const int64_t row = (c * g->h + y) * W;
            const uint8_t *nz = noise + row;
            uint8_t *out = dst + row;
            for (int64_t x = 0; x < W; x++) {
                /* rounded, then clamped as an int: that form vectorizes */
                const int v = (int)(base + 0.5f + ca[x] * cb - sa[x] * sb + ((float)nz[x] - 128.0f) * noise_scale);
                out[x] = (uint8_t)GR_MAX(GR_MIN(v, 255), 0);
            }
        }
    }
}

/* Generates and writes one split, a block at a time; with stats, fills
 * mean/std from it. */
static gr_status syn_split(const gr_conv_out *o, const char *name, const gr_synthetic_config *cfg, int64_t n,
                           uint64_t split, bool stats, double *mean, double *std, gr_error *err) {
    syn_gen g = {.c = cfg->c, .h = cfg->h, .w = cfg->w, .chw = cfg->c * cfg->h * cfg->w, .classes = cfg->classes};
    const uint64_t skey = gr_hash64(cfg->seed, split);
    g.class_key = gr_hash64(cfg->seed, SYN_STREAM_CLASS); /* the same classes in both splits */
    g.label_key = gr_hash64(skey, SYN_STREAM_LABEL);
    g.noise_key = gr_hash64(skey, SYN_STREAM_NOISE);
    gr_conv_split s;
    gr_status st = gr_conv_split_create(o, name, n, g.c, g.h, g.w, g.classes, stats, &s, err);
    if (st != GR_OK) return st;
    /* Two buffers: the write of block b - 1 (one task, so HDF5 is called
     * from one thread at a time) runs while the others generate block b. */
    const int64_t block = gr_conv_block_samples(n, g.chw), nblocks = (n + block - 1) / block;
    uint8_t *images[2] = {gr_xmalloc((size_t)(block * g.chw)), gr_xmalloc((size_t)(block * g.chw))};
    int32_t *labels[2] = {gr_xmalloc((size_t)block * sizeof(int32_t)), gr_xmalloc((size_t)block * sizeof(int32_t))};
    #pragma omp parallel
    #pragma omp single
    for (int64_t b = 0; b < nblocks; b++) {
        const int64_t first = b * block, count = GR_MIN(block, n - first);
        uint8_t *img = images[b % 2];
        int32_t *lab = labels[b % 2];
        #pragma omp taskloop grainsize(1)
        for (int64_t i = 0; i < count; i++) {
            float *ca = gr_xmalloc((size_t)g.w * 2 * sizeof *ca);
            uint8_t *noise = gr_xmalloc((size_t)(g.chw + 8));
            lab[i] = syn_label(&g, first + i);
            syn_sample(&g, first + i, lab[i], img + i * g.chw, ca, ca + g.w, noise);
            free(ca);
            free(noise);
        }
        #pragma omp taskwait
        if (st != GR_OK) break;
        #pragma omp task
        st = gr_conv_split_write(&s, count, img, lab, err);
    }
    for (int k = 0; k < 2; k++) free(images[k]), free(labels[k]);
    return gr_conv_split_end(&s, st, NULL, 0, mean, std, err);
}

static gr_status syn_check(const gr_synthetic_config *cfg, gr_error *err) {
    if (cfg->n < 1 || cfg->n > SYN_MAX_N)
        return gr_error_set(err, GR_ERR_USAGE, "data synthetic: --n must be in [1, %lld], got %lld",
                            (long long)SYN_MAX_N, (long long)cfg->n);
    if (cfg->test != -1 && (cfg->test < 1 || cfg->test > SYN_MAX_N))
        return gr_error_set(err, GR_ERR_USAGE, "data synthetic: --test must be in [1, %lld], got %lld",
                            (long long)SYN_MAX_N, (long long)cfg->test);
    const int64_t d[3] = {cfg->c, cfg->h, cfg->w};
    for (int k = 0; k < 3; k++)
        if (d[k] < 1 || d[k] > SYN_MAX_DIM)
            return gr_error_set(err, GR_ERR_USAGE,
                                "data synthetic: --shape %lld,%lld,%lld: each of C,H,W must be in [1, %d]",
                                (long long)d[0], (long long)d[1], (long long)d[2], SYN_MAX_DIM);
    if (d[0] * d[1] * d[2] > SYN_MAX_SAMPLE)
        return gr_error_set(err, GR_ERR_USAGE,
                            "data synthetic: --shape %lld,%lld,%lld: a sample of %lld bytes is more than 1 GiB",
                            (long long)d[0], (long long)d[1], (long long)d[2], (long long)(d[0] * d[1] * d[2]));
    if (cfg->classes < 2 || cfg->classes > SYN_MAX_DIM)
        return gr_error_set(err, GR_ERR_USAGE, "data synthetic: --classes must be in [2, %d], got %lld",
                            SYN_MAX_DIM, (long long)cfg->classes);
    return GR_OK;
}

gr_status gr_data_convert_synthetic(const gr_synthetic_config *cfg, const char *out, bool force, bool progress,
                                    gr_error *err) {
    gr_status st = syn_check(cfg, err);
    if (st != GR_OK) return st;
    const int64_t test = cfg->test == -1 ? (cfg->n + 9) / 10 : cfg->test;
    gr_conv_out o;
    if ((st = gr_conv_out_begin(&o, out, force, progress, err)) != GR_OK) return st;
    double *mean = gr_xmalloc((size_t)cfg->c * sizeof *mean), *std = gr_xmalloc((size_t)cfg->c * sizeof *std);
    const double t0 = gr_now();
    st = syn_split(&o, "/train", cfg, cfg->n, 1, true, mean, std, err);
    if (st == GR_OK) st = syn_split(&o, "/test", cfg, test, 2, false, mean, std, err);
    if (st == GR_OK) st = gr_conv_out_commit(&o, err);
    if (st == GR_OK && progress) {
        const double bytes = (double)(cfg->n + test) * (double)(cfg->c * cfg->h * cfg->w), dt = gr_now() - t0;
        fprintf(stderr, "gpurun data: %s: /train %lld, /test %lld samples of %lldx%lldx%lld, %lld classes; "
                        "%.2f GB in %.1f s (%.0f MB/s)\n",
                out, (long long)cfg->n, (long long)test, (long long)cfg->c, (long long)cfg->h, (long long)cfg->w,
                (long long)cfg->classes, bytes / 1e9, dt, bytes / 1e6 / (dt > 0 ? dt : 1e-9));
    }
    gr_conv_out_abort(&o);
    free(mean);
    free(std);
    return st;
}
