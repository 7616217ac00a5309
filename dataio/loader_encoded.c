/* loader_encoded.c — one sample of an encoded image split (DESIGN 1.5,
 * `data imagefolder --store jpeg`) decoded to the crop size: the loader's
 * decode workers call it for every sample of such a split (loader.c).
 *
 * Training (crop `resized`): the box is drawn on the stored shape (the
 * `shapes` dataset: nothing decoded), so the draw is augment.c's, a pure
 * function of (seed, epoch, sample) whatever thread decodes it. Only the
 * box's part of the JPEG is then decoded, at the smallest DCT scale N/8
 * (N = 1, 2, 4, 8) that keeps the box at least size x size
 * (gr_image_decode_roi: its rows, and its columns widened to whole iMCU
 * columns), the box mapped into that region with its fractional edges, and
 * resized from there to size x size through augment.c's bilinear decoder
 * (gr_decode_sample_sub), flip and normalization included. Under
 * data.on_error skip a sample that does not decode gets a stand-in
 * (gr_loader_stand_in). A PNG decodes whole and the box is cut from it.
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

/* The box t (stored-image coordinates) in the region r of the image decoded
 * at scale N/8: pixel edges x map to x N/8 there (DCT scaling turns each 8
 * pixels into N), so the box is fbox = {y, x, h, w} in the region's
 * coordinates, not on whole pixels; t becomes the integer box holding it,
 * kept inside the region. */
static void box_in_region(gr_xform *t, const gr_image_roi *r, double fbox[4]) {
    const double k = r->scale_num / 8.0;
    const int64_t rh = r->img.h, rw = r->img.w;
    fbox[0] = GR_MAX(0.0, (double)t->y0 * k - (double)r->y0);
    fbox[1] = GR_MAX(0.0, (double)t->x0 * k - (double)r->x0);
    fbox[2] = GR_MIN((double)t->h * k, (double)rh - fbox[0]);
    fbox[3] = GR_MIN((double)t->w * k, (double)rw - fbox[1]);
    const int64_t y0 = GR_MIN((int64_t)floor(fbox[0]), rh - 1), x0 = GR_MIN((int64_t)floor(fbox[1]), rw - 1);
    const int64_t y1 = GR_MIN((int64_t)ceil(fbox[0] + fbox[2]), rh), x1 = GR_MIN((int64_t)ceil(fbox[1] + fbox[3]), rw);
    t->y0 = y0, t->x0 = x0;
    t->h = GR_MAX(1, y1 - y0), t->w = GR_MAX(1, x1 - x0);
}

gr_status gr_loader_stand_in(const gr_decoder *dec, const gr_augment *aug, gr_source *src, const gr_enc_fields *f,
                             gr_source_reader *rd, uint64_t seed, gr_batch *b, int64_t s, const gr_error *first,
                             float *dst, int32_t *label, gr_enc_scratch *sc, gr_error *err) {
    const int64_t tries = GR_MIN(GR_LOADER_SKIP_MAX, src->n);
    for (int64_t k = 1; k < tries; k++) {
        const int64_t at = (s + k) % src->n;
        gr_status st = gr_source_fetch(rd, &at, 1, err);
        if (st != GR_OK) return st;
        size_t bytes, sb;
        const void *p = gr_source_view(rd, at, f->enc, &bytes);
        const uint16_t *hwc = gr_source_view(rd, at, f->shape, &sb);
        gr_error e;
        st = gr_loader_decode_encoded(dec, aug, src, f->enc, p, bytes, hwc, seed, b->epoch, at, dst, sc, &e);
        if (st == GR_OK) {
            memcpy(label, gr_source_view(rd, at, f->label, &bytes), sizeof *label);
            if (b->skipped++ == 0)
                gr_error_set(&b->skip_first, GR_ERR_DATA, "%s; sample %lld took its place", first->msg, (long long)at);
            return GR_OK;
        }
        if (st != GR_ERR_DATA) {
            *err = e;
            return st;
        }
    }
    return gr_error_set(err, GR_ERR_DATA, "%s (data.on_error skip: the %lld samples from %lld on in file order do not "
                        "decode either; the split looks damaged as a whole)", first->msg, (long long)tries,
                        (long long)s);
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
    /* only the box's part of the file, at the smallest N/8 (N = 1, 2, 4, 8) that keeps it >= S x S (image.h) */
    gr_image_roi r;
    const int64_t box[6] = {t.x0, t.y0, t.w, t.h, S, S};
    if (!gr_image_decode_roi(bytes, n, box, &r, why)) goto bad;
    if (r.sw != (W * r.scale_num + 7) / 8 || r.sh != (H * r.scale_num + 7) / 8) {
        snprintf(why, sizeof why, "decodes to %lldx%lld (HxW) at scale %d/8 but its shapes entry says %lldx%lld",
                 (long long)r.sh, (long long)r.sw, r.scale_num, (long long)H, (long long)W);
        gr_image_free(&r.img);
        goto bad;
    }
    img = r.img;
    /* at 8/8 the box is whole pixels of the region; scaled, a sub-pixel box in it */
    double fbox[4];
    const bool sub = r.scale_num != 8;
    if (sub) box_in_region(&t, &r, fbox);
    else t.y0 -= r.y0, t.x0 -= r.x0;
    const size_t need_rs = gr_decoder_scratch_bytes_for(img.w, S);
    if (need_rs > sc->rs_cap) {
        free(sc->rs);
        sc->rs = gr_xmalloc(sc->rs_cap = need_rs);
    }
    d.nhwc = true;
    d.h = img.h, d.w = img.w;
    if (sub) gr_decode_sample_sub(&d, img.rgb, &t, fbox, dst, sc->rs);
    else gr_decode_sample(&d, img.rgb, &t, dst, sc->rs);
    gr_image_free(&img);
    return GR_OK;
bad:
    return gr_error_set(err, GR_ERR_DATA, "%s: %s: sample %lld: cannot decode: %s (the file was changed or "
                        "damaged after conversion?)", src->path, origin, (long long)sample, why);
}
