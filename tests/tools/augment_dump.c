/* augment_dump.c — runs gpurun's RandomResizedCrop path (gr_augment_draw +
 * gr_decode_sample, bilinear, antialias off, flip after the resize) on one
 * uint8 image, for tests/augment_torch.py to recompute with PyTorch.
 *
 *   augment_dump IN OUT
 *
 * IN (little-endian, written by augment_torch.py):
 *   char    magic[8] = "GRAUGIN1"
 *   int32   c, h, w, size, n_random, n_fixed
 *   int64   seed
 *   double  scale[2], ratio[2]
 *   int64   fixed[n_fixed][5]   y0, x0, h, w, flip (boxes given as is)
 *   uint8   image[c*h*w]        C,H,W
 * OUT:
 *   char    magic[8] = "GRAUGOU1"
 *   int64   count               n_random + n_fixed
 *   count x { int64 y0, x0, h, w, flip; float out[c*size*size] }
 * The first n_random transforms are gr_augment_draw(RESIZED(size, scale,
 * ratio), flip on, seed, epoch 0, sample k); outputs are normalized with
 * mean 0 / std 1, i.e. in stored units. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dataio/augment.h"

static void read_exact(FILE *f, void *p, size_t n, const char *what) {
    if (fread(p, 1, n, f) != n) {
        fprintf(stderr, "augment_dump: short input reading %s\n", what);
        exit(2);
    }
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: augment_dump IN OUT\n");
        return 2;
    }
    FILE *in = fopen(argv[1], "rb");
    if (!in) {
        perror(argv[1]);
        return 2;
    }
    char magic[8];
    int32_t hdr[6];
    int64_t seed;
    double sr[4];
    read_exact(in, magic, sizeof magic, "magic");
    if (memcmp(magic, "GRAUGIN1", 8) != 0) {
        fprintf(stderr, "augment_dump: %s: bad magic\n", argv[1]);
        return 2;
    }
    read_exact(in, hdr, sizeof hdr, "header");
    read_exact(in, &seed, sizeof seed, "seed");
    read_exact(in, sr, sizeof sr, "scale/ratio");
    const int64_t C = hdr[0], H = hdr[1], W = hdr[2], S = hdr[3], n_random = hdr[4], n_fixed = hdr[5];
    if (C < 1 || H < 1 || W < 1 || S < 1 || n_random < 0 || n_fixed < 0) {
        fprintf(stderr, "augment_dump: bad header\n");
        return 2;
    }
    int64_t *fixed = gr_xmalloc((size_t)(n_fixed ? n_fixed : 1) * 5 * sizeof *fixed);
    read_exact(in, fixed, (size_t)n_fixed * 5 * sizeof *fixed, "fixed boxes");
    uint8_t *img = gr_xmalloc((size_t)(C * H * W));
    read_exact(in, img, (size_t)(C * H * W), "image");
    fclose(in);

    const gr_augment aug = {.crop = GR_CROP_RESIZED, .size = S, .scale = {sr[0], sr[1]}, .ratio = {sr[2], sr[3]},
                            .flip = true};
    const int64_t chw[3] = {C, H, W};
    gr_decoder dec;
    gr_decoder_init(&dec, GR_DT_UINT8, chw, false, S, S, NULL, NULL);
    void *scratch = gr_xmalloc(gr_decoder_scratch_bytes(&dec));
    float *out = gr_xmalloc((size_t)(C * S * S) * sizeof *out);

    FILE *o = fopen(argv[2], "wb");
    if (!o) {
        perror(argv[2]);
        return 2;
    }
    const int64_t count = n_random + n_fixed;
    fwrite("GRAUGOU1", 1, 8, o);
    fwrite(&count, sizeof count, 1, o);
    for (int64_t k = 0; k < count; k++) {
        gr_xform t;
        if (k < n_random) {
            gr_augment_draw(&aug, H, W, (uint64_t)seed, 0, k, &t);
        } else {
            const int64_t *f = fixed + (k - n_random) * 5;
            t = (gr_xform){.y0 = f[0], .x0 = f[1], .h = f[2], .w = f[3], .flip = f[4] != 0};
        }
        gr_decode_sample(&dec, img, &t, out, scratch);
        const int64_t rec[5] = {t.y0, t.x0, t.h, t.w, t.flip};
        fwrite(rec, sizeof rec, 1, o);
        fwrite(out, sizeof *out, (size_t)(C * S * S), o);
    }
    if (fclose(o) != 0) {
        perror(argv[2]);
        return 2;
    }
    free(out);
    free(scratch);
    gr_decoder_free(&dec);
    free(img);
    free(fixed);
    return 0;
}
