/* loader_encoded.c — one sample of an encoded image split (DESIGN 1.5,
 * `data imagefolder --store jpeg`) decoded to the crop size: the loader's
 * decode workers call it for every sample of such a split (loader.c).
 *
 * Training (crop `resized`): the box is drawn on the stored shape (the
 * `shapes` dataset: nothing decoded), so the draw is augment.c's, a pure
 * function of (seed, epoch, sample) whatever thread decodes it. The JPEG is
 * then decoded at the smallest of 1, 1/2, 1/4, 1/8 scale that keeps the box
 * at least size x size, the box scaled to the decoded image, and that resized
 * to size x size through augment.c's bilinear decoder, flip and
 * normalization included.
 * Evaluation (crop `center`): the converter's and `gpurun predict`'s rule,
 * short side to round(size * 256 / 224) (area averaging when shrinking),
 * then the centre size x size (gr_image_resize_crop), then normalized. */
#include "loader_fields.h"
#include "image.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int64_t gr_encoded_eval_short_side(int64_t size) { return (size * 256 + 112) / 224; }

void gr_enc_scratch_free(gr_enc_scratch *sc) {
    free(sc->rs);
    free(sc->planes);
    memset(sc, 0, sizeof *sc);
}

size_t gr_enc_scratch_estimate(int64_t size) {
    /* the decoded image at its reduced scale (typically near 2 x 2 crops),
     * the resize scratch for it, the centre crop's planes */
    const size_t s = (size_t)size;
    return 3 * (2 * s) * (2 * s) + gr_decoder_scratch_bytes_for(2 * size, size) + 3 * s * s;
}

/* The box t (stored-image coordinates) in an image decoded to dh x dw of a
 * stored H x W: scaled, rounded, kept inside. */
static void box_scale(gr_xform *t, int64_t H, int64_t W, int64_t dh, int64_t dw) {
    if (dh == H && dw == W) return;
    const double fy = (double)dh / (double)H, fx = (double)dw / (double)W;
    int64_t y0 = llround((double)t->y0 * fy), x0 = llround((double)t->x0 * fx);
    int64_t h = GR_MAX(1, llround((double)t->h * fy)), w = GR_MAX(1, llround((double)t->w * fx));
    y0 = GR_MAX(0, GR_MIN(y0, dh - 1));
    x0 = GR_MAX(0, GR_MIN(x0, dw - 1));
    t->y0 = y0, t->x0 = x0;
    t->h = GR_MIN(h, dh - y0), t->w = GR_MIN(w, dw - x0);
}

gr_status gr_loader_decode_encoded(const gr_decoder *dec, const gr_augment *aug, const gr_source *src, int field,
                                   const void *bytes, size_t n, const uint16_t hwc[3], uint64_t seed, int64_t epoch,
                                   int64_t sample, float *dst, gr_enc_scratch *sc, gr_error *err) {
    const int64_t H = hwc[0], W = hwc[1], S = dec->oh;
    const char *origin = src->fields[field].origin;
    char why[GR_IMAGE_WHY_MAX];
    gr_image img = {0};
    gr_decoder d = *dec; /* shares the normalization tables; sides per image */
    gr_xform t;
    if (aug->crop == GR_CROP_CENTER) {
        const int64_t R = gr_encoded_eval_short_side(S);
        if (!gr_image_decode_mem(bytes, n, R, &img, why)) goto bad;
        if (!sc->planes) sc->planes = gr_xmalloc(3 * (size_t)S * (size_t)S);
        gr_image_resize_crop(&img, R, S, sc->planes);
        gr_image_free(&img);
        d.nhwc = false;
        d.h = d.w = S;
        t = (gr_xform){.h = S, .w = S};
        gr_decode_sample(&d, sc->planes, &t, dst, NULL); /* a window: no scratch */
        return GR_OK;
    }
    gr_augment_draw(aug, H, W, seed, epoch, sample, &t);
    /* the decoded short side that keeps the box's short side >= S */
    const int64_t side = GR_MIN(H, W), box = GR_MIN(t.h, t.w);
    const int64_t need = box > S ? (side * S + box - 1) / box : side;
    if (!gr_image_decode_mem(bytes, n, need, &img, why)) goto bad;
    if (img.h > H || img.w > W || (need == side && (img.h != H || img.w != W))) {
        snprintf(why, sizeof why, "decodes to %lldx%lld (HxW) but its shapes entry says %lldx%lld",
                 (long long)img.h, (long long)img.w, (long long)H, (long long)W);
        gr_image_free(&img);
        goto bad;
    }
    box_scale(&t, H, W, img.h, img.w);
    const size_t need_rs = gr_decoder_scratch_bytes_for(img.w, S);
    if (need_rs > sc->rs_cap) {
        free(sc->rs);
        sc->rs = gr_xmalloc(sc->rs_cap = need_rs);
    }
    d.nhwc = true;
    d.h = img.h, d.w = img.w;
    gr_decode_sample(&d, img.rgb, &t, dst, sc->rs);
    gr_image_free(&img);
    return GR_OK;
bad:
    return gr_error_set(err, GR_ERR_DATA, "%s: %s: sample %lld: cannot decode: %s (the file was changed or "
                        "damaged after conversion?)", src->path, origin, (long long)sample, why);
}
