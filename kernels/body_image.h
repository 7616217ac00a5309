/* body_image.h — the per-pixel bodies of the device image decoder's second
 * half (kernels/cuda/imgproc.cu): a decoded image (8-bit, interleaved RGB or
 * one gray plane) through a sample's transform into the input tensor's
 * [3, S, S] floats. They repeat, operation for operation, the host path's
 * arithmetic on a decoded image:
 *   training   dataio/augment.c's decode_resized_rgb8 (torch's bilinear,
 *              align_corners false, no antialias: the source index
 *              scale * (i + 0.5) - 0.5 in double from a float scale, the y
 *              blend of each x tap, then the x blend and (v * k + b) in
 *              float), or its
 *              decode_window when the box is S x S (the normalization in
 *              double, as the decoder's table holds it), the flip mirroring
 *              the output column;
 *   evaluation dataio/image.c's gr_image_resize_crop (short side to R: the
 *              average of the covered source interval when shrinking,
 *              bilinear with clamped edges when growing; each output a sum
 *              over x taps of the sum over y taps, in float, rounded half up
 *              to 8 bits), then the decoder table's normalization.
 * Products and sums go through body.h's gr_*_rn so nvcc fuses none of them into an
 * FMA (the host compiles ISO C, which contracts nothing): on the same
 * decoded pixels both sides give the same bits (tests/test_image_body.c
 * sweeps these bodies on the CPU against augment.c and image.c). What
 * differs on a GPU is only the decode: nvJPEG's IDCT and chroma upsampling
 * against libjpeg-turbo's, and the full-size image where the host decodes
 * at a reduced DCT scale (tests/test_cuda_decode.c bounds it). */
#ifndef GR_BODY_IMAGE_H
#define GR_BODY_IMAGE_H

#include <math.h>

#include "body.h"

/* One sample as the device holds it after the decode. */
typedef struct gr_img_desc {
    const uint8_t *px;         /* h rows of `pitch` bytes, `chans` interleaved channels (3 RGB, or 1 gray) */
    int64_t pitch;
    int32_t h, w, chans;
    int32_t y0, x0, bh, bw;    /* training: the box in the image's pixels (inside it) */
    int32_t flip;
    int32_t fh, fw;            /* evaluation: the resized size (its short side R) */
    int32_t skip;              /* 1: decoded elsewhere (the host): its output is left alone */
} gr_img_desc;

/* The batch's output side and normalization (gr_decoder_init's values). */
typedef struct gr_img_norm {
    float k[3], b[3];          /* (float)(1 / std), (float)(-mean / std): the resize's normalization */
    double mean[3], std[3];    /* ((double)v - mean) / std: the window's and the evaluation's */
    int64_t S;
} gr_img_norm;

/* Pixel (y, x) of channel c (a gray image's one plane for every c). */
GR_HD float gr_img_px(const gr_img_desc *d, int64_t y, int64_t x, int c) {
    return (float)d->px[y * d->pitch + x * d->chans + (d->chans == 3 ? c : 0)];
}

/* The decoder table's value for an 8-bit v of channel c. */
GR_HD float gr_img_norm_u8(const gr_img_norm *nm, float v, int c) {
    return (float)(((double)v - nm->mean[c]) / nm->std[c]);
}

/* augment.c's source_index: output i of a resize by scale, clamped at 0. */
GR_HD double gr_img_src_index(float scale, int64_t i) {
    double v = gr_dadd_rn(gr_dmul_rn((double)scale, (double)i + 0.5), -0.5);
    return v < 0.0 ? 0.0 : v;
}

/* Training: output pixel (oy, ox) of d's box into out (3 planes of S x S). */
GR_HD void gr_body_img_train(const gr_img_desc *d, const gr_img_norm *nm, int64_t oy, int64_t ox, float *out) {
    const int64_t S = nm->S, plane = S * S, o = oy * S + ox;
    if (d->bh == S && d->bw == S) { /* decode_window: a copy, maybe mirrored (zeros outside the image) */
        const int64_t sy = d->y0 + oy, sx = d->flip ? d->x0 + S - 1 - ox : d->x0 + ox;
        const int inside = sy >= 0 && sy < d->h && sx >= 0 && sx < d->w;
        for (int c = 0; c < 3; c++) out[c * plane + o] = inside ? gr_img_norm_u8(nm, gr_img_px(d, sy, sx, c), c) : nm->b[c];
        return;
    }
    /* decode_resized: x taps of the (maybe mirrored) column, the last repeated past the box's edge */
    const float sxs = (float)d->bw / (float)S, sys = (float)d->bh / (float)S;
    const double vx = gr_img_src_index(sxs, d->flip ? S - 1 - ox : ox);
    int64_t ix = (int64_t)vx;
    if (ix > d->bw - 1) ix = d->bw - 1;
    const int64_t ix1 = ix + 1 < d->bw ? ix + 1 : d->bw - 1;
    const float lx = (float)(vx - (double)ix);
    const double vy = gr_img_src_index(sys, oy);
    const int64_t iy = (int64_t)vy;
    const int64_t y0 = d->y0 + iy, y1 = y0 + (iy < d->bh - 1 ? 1 : 0);
    const float ly = (float)(vy - (double)iy);
    const int64_t xa = d->x0 + ix, xb = d->x0 + ix1;
    for (int c = 0; c < 3; c++) {
        const float a0 = gr_img_px(d, y0, xa, c), b0 = gr_img_px(d, y0, xb, c);
        const float a1 = gr_img_px(d, y1, xa, c), b1 = gr_img_px(d, y1, xb, c);
        /* y first, as decode_resized_rgb8 (the host's path for decoded RGB bytes) */
        const float fa = gr_add_rn(a0, gr_mul_rn(gr_add_rn(a1, -a0), ly));
        const float fb = gr_add_rn(b0, gr_mul_rn(gr_add_rn(b1, -b0), ly));
        const float v = gr_add_rn(fa, gr_mul_rn(gr_add_rn(fb, -fa), lx));
        out[c * plane + o] = gr_add_rn(gr_mul_rn(v, nm->k[c]), nm->b[c]);
    }
}

/* One axis of image.c's resize: `in` source pixels to `full`, position x
 * (the output plus the crop's offset). Shrinking: the taps over [lo, hi),
 * their weights normalized by the total in double; growing: two clamped
 * bilinear taps. */
typedef struct gr_img_axis {
    int shrink, stride;
    int64_t in, first, last;   /* shrink: source pixels [first, last) */
    double lo, hi, total;
    int64_t g0, g1;            /* grow: the two taps and their weights */
    float w0, w1;
} gr_img_axis;

GR_HD void gr_img_axis_init(gr_img_axis *a, int64_t in, int64_t full, int64_t x) {
    const double scale = (double)in / (double)full, xd = (double)x;
    a->in = in;
    a->shrink = full < in;
    a->stride = 0, a->first = a->last = a->g0 = a->g1 = 0;
    a->lo = a->hi = a->total = 0;
    a->w0 = a->w1 = 0;
    if (a->shrink) {
        a->stride = (int)ceil(scale) + 2;
        a->lo = gr_dmul_rn(xd, scale);
        const double hi = gr_dmul_rn(xd + 1, scale);
        a->hi = hi < (double)in ? hi : (double)in;
        a->first = (int64_t)floor(a->lo);
        a->last = (int64_t)ceil(a->hi);
        a->total = 0;
        int n = 0;
        for (int64_t i = a->first; i < a->last && n < a->stride; i++) {
            const double top = a->hi < (double)(i + 1) ? a->hi : (double)(i + 1);
            const double bot = a->lo > (double)i ? a->lo : (double)i;
            const double wt = top - bot;
            if (wt <= 0) continue;
            a->total = gr_dadd_rn(a->total, wt);
            n++;
        }
    } else {
        const double src = gr_dadd_rn(gr_dmul_rn(xd + 0.5, scale), -0.5), i0 = floor(src), f = src - i0;
        const int64_t k0 = (int64_t)i0, k1 = (int64_t)i0 + 1;
        a->g0 = k0 < 0 ? 0 : k0 > in - 1 ? in - 1 : k0;
        a->g1 = k1 < 0 ? 0 : k1 > in - 1 ? in - 1 : k1;
        a->w0 = (float)(1 - f);
        a->w1 = (float)f;
    }
}

/* The axis' next tap (*it and *n start at 0): its source pixel and weight;
 * false past the last. The shrinking taps come as image.c stores them
 * (zero-weight ones skipped, at most stride of them). */
GR_HD int gr_img_axis_next(const gr_img_axis *a, int64_t *it, int *n, int64_t *src, float *w) {
    if (!a->shrink) {
        if (*n > 1) return 0;
        *src = *n == 0 ? a->g0 : a->g1;
        *w = *n == 0 ? a->w0 : a->w1;
        (*n)++;
        return 1;
    }
    while (a->first + *it < a->last && *n < a->stride) {
        const int64_t i = a->first + (*it)++;
        const double top = a->hi < (double)(i + 1) ? a->hi : (double)(i + 1);
        const double bot = a->lo > (double)i ? a->lo : (double)i;
        const double wt = top - bot;
        if (wt <= 0) continue;
        (*n)++;
        *src = i;
        *w = (float)((double)(float)wt / a->total);
        return 1;
    }
    return 0;
}

/* Evaluation: output pixel (oy, ox) of the centre S x S of d resized to
 * fw x fh into out (3 planes of S x S). */
GR_HD void gr_body_img_eval(const gr_img_desc *d, const gr_img_norm *nm, int64_t oy, int64_t ox, float *out) {
    const int64_t S = nm->S, plane = S * S, o = oy * S + ox;
    gr_img_axis ax, ay;
    gr_img_axis_init(&ax, d->w, d->fw, ox + (d->fw - S) / 2);
    gr_img_axis_init(&ay, d->h, d->fh, oy + (d->fh - S) / 2);
    float acc[3] = {0, 0, 0};
    int64_t sx, sy;
    float wx, wy;
    int64_t itx = 0;
    int nx = 0;
    while (gr_img_axis_next(&ax, &itx, &nx, &sx, &wx)) {
        float col[3] = {0, 0, 0};
        int64_t ity = 0;
        int ny = 0;
        while (gr_img_axis_next(&ay, &ity, &ny, &sy, &wy))
            for (int c = 0; c < 3; c++) col[c] = gr_add_rn(col[c], gr_mul_rn(wy, gr_img_px(d, sy, sx, c)));
        for (int c = 0; c < 3; c++) acc[c] = gr_add_rn(acc[c], gr_mul_rn(wx, col[c]));
    }
    for (int c = 0; c < 3; c++) {
        const float v = acc[c] < 0.0f ? 0.0f : acc[c] > 255.0f ? 255.0f : acc[c];
        const float u = (float)(int)gr_add_rn(v, 0.5f); /* (uint8_t)(v + 0.5f) */
        out[c * plane + o] = gr_img_norm_u8(nm, u, c);
    }
}

#endif
