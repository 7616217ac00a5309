/* augment.h — the per-sample work of the loader's decode workers: drawing a
 * sample's crop and flip, and turning its stored pixels into normalized
 * floats through that transform.
 *
 * Draws are pure functions of (seed, epoch, sample index in the file), made
 * with the counter-based gr_hash64, so the same sample in the same epoch gets
 * the same crop whichever thread decodes it and whenever.
 *
 * Conventions follow torchvision, so a pipeline moves both ways:
 *   random   RandomCrop(size, padding): a size x size window of the image
 *            padded by `padding` zeros (stored units) on every side;
 *   resized  RandomResizedCrop(size, scale, ratio, antialias=False): a box of
 *            random area fraction and aspect ratio (10 tries, then the
 *            centre fallback), resized bilinearly (align_corners=False) to
 *            size x size;
 *   center   CenterCrop(size) for evaluation (zero padding when the image is
 *            smaller), rounding half to even as Python's round() does;
 *   flip     RandomHorizontalFlip(0.5), applied after the crop.
 * One difference: torchvision rounds a resized uint8 image back to uint8
 * before normalizing; here the interpolated value is normalized directly. */
#ifndef GR_AUGMENT_H
#define GR_AUGMENT_H

#include "../common/gr_common.h"

/* Stored element types of images (DESIGN 1.5). */
typedef enum gr_dtype { GR_DT_UINT8, GR_DT_FLOAT16, GR_DT_FLOAT32 } gr_dtype;

typedef enum gr_crop_kind { GR_CROP_NONE, GR_CROP_RANDOM, GR_CROP_RESIZED, GR_CROP_CENTER } gr_crop_kind;

typedef struct gr_augment {
    gr_crop_kind crop;
    int64_t size;        /* output side, crop != NONE */
    int64_t padding;     /* RANDOM */
    double scale[2];     /* RESIZED: area fraction range */
    double ratio[2];     /* RESIZED: aspect (w/h) range */
    bool flip;
} gr_augment;

/* One sample's transform: the source box in image coordinates (it may reach
 * past the edges, which read as zeros) and whether to mirror. The output is
 * out_h x out_w; the box is resized to it when their sizes differ. */
typedef struct gr_xform {
    int64_t y0, x0, h, w;
    bool flip;
} gr_xform;

/* Output side for an H x W image. */
void gr_augment_out_shape(const gr_augment *a, int64_t H, int64_t W, int64_t *oh, int64_t *ow);
/* Rejects a crop that cannot be taken (exit 3), e.g.
 *   "data/f.h5: /train/images: crop 40 is larger than the padded image 36x36 (28x28 + padding 4)" */
gr_status gr_augment_check(const gr_augment *a, int64_t H, int64_t W, const char *path, const char *dset,
                           gr_error *err);
/* Draws the transform of `sample` in `epoch`. */
void gr_augment_draw(const gr_augment *a, int64_t H, int64_t W, uint64_t seed, int64_t epoch, int64_t sample,
                     gr_xform *t);

/* torchvision's RandomResizedCrop.get_params on an H x W image (a's scale
 * and ratio), its random numbers from draw(ctx, k, what, n) for try k of 10:
 * GR_RRC_AREA the area fraction (uniform in scale), GR_RRC_ASPECT the aspect
 * ratio w/h (log-uniform in ratio), then, for a box that fits, GR_RRC_ROW and
 * GR_RRC_COL its offsets, integers in [0, n) (as doubles); after 10 misses
 * the centre fallback. gr_augment_draw's RESIZED crop is this with its
 * counter-based draws; test_rrc_golden feeds torchvision's recorded ones. */
enum { GR_RRC_AREA, GR_RRC_ASPECT, GR_RRC_ROW, GR_RRC_COL };
typedef double (*gr_rrc_draw_fn)(void *ctx, int k, int what, int64_t n);
void gr_augment_rrc_box(const gr_augment *a, int64_t H, int64_t W, gr_rrc_draw_fn draw, void *ctx, gr_xform *t);

/* Stored values -> normalized floats, C,H,W order. */
typedef struct gr_decoder {
    gr_dtype dtype;
    int64_t c, h, w;     /* stored image */
    bool nhwc;
    int64_t oh, ow;      /* output */
    float *scale, *bias; /* c each: out = v * scale + bias = (v - mean) / std */
    double *mean, *inv;  /* c each: the same in double, for float images */
    float *lut;          /* uint8: c * 256 precomputed outputs */
} gr_decoder;

void gr_decoder_init(gr_decoder *d, gr_dtype dtype, const int64_t chw[3], bool nhwc, int64_t oh, int64_t ow,
                     const double *mean, const double *std);
void gr_decoder_free(gr_decoder *d);
/* Bytes of scratch gr_decode_sample needs. */
size_t gr_decoder_scratch_bytes(const gr_decoder *d);
/* the same for images w wide decoded to ow wide (no decoder needed) */
size_t gr_decoder_scratch_bytes_for(int64_t w, int64_t ow);
/* Decodes one stored sample (c*h*w elements at src) through t into
 * dst (c*oh*ow floats). scratch: gr_decoder_scratch_bytes, float-aligned. */
void gr_decode_sample(const gr_decoder *d, const void *src, const gr_xform *t, float *dst, void *scratch);
/* The same, resized always, from the sub-pixel box fbox = {y, x, h, w} (image
 * coordinates) inside t's integer box, which bounds the pixels read: an
 * output pixel's centre maps to fbox's start + (i + 0.5) * side / out - 0.5,
 * kept inside t's box. The loader's crop of a JPEG decoded at a reduced
 * DCT scale, whose box rarely falls on whole pixels there. */
void gr_decode_sample_sub(const gr_decoder *d, const void *src, const gr_xform *t, const double fbox[4], float *dst,
                          void *scratch);

#endif
