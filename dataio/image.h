/* image.h — one JPEG or PNG image to a uint8 [C,S,S] sample: the decoding and
 * the resize + centre crop that `gpurun data imagefolder` applies to every
 * image it converts (dataio/convert_imagefolder.c), shared with whatever
 * needs the same pixels from a single file (`gpurun predict`), so a model
 * sees at prediction exactly what it was trained on.
 *
 * Exports:
 *   gr_image              a decoded image: interleaved 8-bit RGB, w x h;
 *   gr_image_decode_mem   an encoded image in memory to a gr_image, by its
 *                         first bytes (JPEG FF D8 FF or PNG's signature);
 *   gr_image_decode       the same for a file (read whole, then decoded
 *                         from memory), told by its bytes, not its name;
 *   gr_image_free         releases a decoded image;
 *   gr_image_probe_mem    an encoded image's format, size and channels from
 *                         its header, nothing decoded;
 *   gr_image_read_all     a stream's bytes, read whole;
 *   gr_image_fit_side, gr_image_resize  the size with the long side S
 *                         (aspect kept), and a resize to any size;
 *   gr_image_encode_jpeg  a decoded image to JPEG bytes (RGB or gray);
 *   gr_image_resize_crop  short side to R (area averaging when shrinking,
 *                         bilinear when growing), centre crop S x S, as
 *                         [3,S,S] planes;
 *   gr_image_load         decode + resize + crop of one file, 3 (RGB) or 1
 *                         (luma) channels, errors naming the file;
 *   GR_IMAGE_MAX_SIDE     the largest S and R;
 *   GR_IMAGE_MAX_SRC_*    the largest source image decoded.
 * All of it is thread-safe: no state outside its arguments. */
#ifndef GR_IMAGE_H
#define GR_IMAGE_H

#include "../common/gr_common.h"

#include <stdio.h>

#define GR_IMAGE_MAX_SIDE 65536 /* S (crop size) and R (short side) */
/* The largest source image taken, checked on the header before anything is
 * allocated: a side of at most 32768 and at most 2^28 pixels (256 Mpixel,
 * 16384x16384). Photo datasets stay far below it (ImageNet's largest is
 * under 10k a side); past it a header is corrupt or hostile (65500x65500
 * over a few hundred bytes would cost gigabytes and a long decode). */
#define GR_IMAGE_MAX_SRC_SIDE 32768
#define GR_IMAGE_MAX_SRC_PIXELS ((int64_t)1 << 28)
#define GR_IMAGE_WHY_MAX 256 /* gr_image_decode's `why`, with its terminating NUL */

/* What an encoded image's header says (gr_image_probe_mem). */
typedef enum gr_image_format { GR_IMAGE_JPEG = 0, GR_IMAGE_PNG = 1 } gr_image_format;
typedef struct gr_image_info {
    gr_image_format format;
    int64_t w, h;
    int channels;  /* 1: grayscale (JPEG gray, PNG gray with or without alpha); else 3 */
} gr_image_info;

typedef struct gr_image {
    uint8_t *rgb;  /* h * w * 3, interleaved */
    int64_t w, h;
} gr_image;

/* Decodes the n encoded bytes at bytes into *img (to be freed with
 * gr_image_free) by what its first bytes say it is: JPEG (libjpeg; CMYK and
 * YCCK converted to RGB, grayscale copied to the 3 channels; decoded at 1/2,
 * 1/4 or 1/8 scale while the short side stays >= short_side) or PNG (libpng;
 * palette expanded, 16-bit cut to 8, alpha dropped, grayscale copied to the 3
 * channels). On failure returns false, leaves img empty and writes the
 * problem to why (naming no file or sample: the caller does): "not a JPEG or
 * PNG file (...)", "JPEG: <libjpeg's message>", "PNG: <libpng's>" (bytes
 * ending early: "JPEG: Premature end of JPEG file", "PNG: Read Error"), or a
 * header past GR_IMAGE_MAX_SRC_*. Corrupt or truncated bytes are such a
 * failure, never an exit or a crash. The buffer is only read. */
bool gr_image_decode_mem(const void *bytes, size_t n, int64_t short_side, gr_image *img,
                        char why[GR_IMAGE_WHY_MAX]);

/* gr_image_decode_mem of the file at path, read into memory whole: the same
 * image and the same `why` as for its bytes, or the fopen error. */
bool gr_image_decode(const char *path, int64_t short_side, gr_image *img, char why[GR_IMAGE_WHY_MAX]);

void gr_image_free(gr_image *img);

/* What gr_image_decode_roi decoded: the region img of the image scaled by
 * scale_num / 8 (sw x sh pixels), its top-left pixel at (x0, y0) there. A
 * full-size pixel coordinate x maps to (x + 0.5) scale_num / 8 - 0.5 - x0 in
 * img (pixel centres: libjpeg's scaled pixel k covers the full-size pixels
 * [8k / N, 8(k + 1) / N)). */
typedef struct gr_image_roi {
    gr_image img;
    int64_t x0, y0;
    int64_t sw, sh;
    int scale_num;
} gr_image_roi;

/* The part of an encoded image covering box = {bx, by, bw, bh, out_w,
 * out_h}: the full-size box [bx, bx + bw) x [by, by + bh) (within the image)
 * that is to become out_w x out_h pixels. A JPEG is decoded at the smallest
 * scale N/8, N = 1, 2, 4 or 8 (the ones libjpeg-turbo has SIMD code for), at
 * which the box still covers out_w x out_h (libjpeg's DCT scaling: a
 * 448-pixel box for 224 output pixels decodes at 4/8, a quarter of the
 * pixels), and only the rows the box touches and its columns, widened
 * to whole iMCU columns and one more on each side (jpeg_skip_scanlines,
 * jpeg_crop_scanline): at 8/8 the box's pixels are a full decode's, bit for
 * bit (test_image_roi); scaled, the box resized agrees with the full
 * decode's box resized the same way within 36-40 dB PSNR there. The rows
 * after the box are not read, so a cut file fails only when the cut is in
 * them. The loader's training crops of encoded splits decode so (loader_encoded.c).
 * A PNG decodes whole and the box is cut out (scale 8). Failures as
 * gr_image_decode_mem's. roi->img is gr_image_free's. */
bool gr_image_decode_roi(const void *bytes, size_t n, const int64_t box[6], gr_image_roi *roi,
                         char why[GR_IMAGE_WHY_MAX]);

/* The header of the n bytes at bytes (told as gr_image_decode_mem tells
 * them) into *info, the pixel data not read: a truncated file passes. The
 * same failures and `why` as gr_image_decode_mem for a bad signature, a
 * header libjpeg or libpng refuses, or sides past GR_IMAGE_MAX_SRC_*. */
bool gr_image_probe_mem(const void *bytes, size_t n, gr_image_info *info, char why[GR_IMAGE_WHY_MAX]);

/* The bytes of fp up to its end (or a read error) into *data (malloc'd; NULL
 * when there are none); returns their count. */
size_t gr_image_read_all(FILE *fp, uint8_t **data);

/* The size of a w x h image scaled so its long side is S, the aspect kept:
 * the short side rounded, at least 1. */
void gr_image_fit_side(int64_t w, int64_t h, int64_t S, int64_t *ow, int64_t *oh);

/* img resized to w x h into *out (allocated; gr_image_free), with the
 * arithmetic of gr_image_resize_crop per axis (area averaging when
 * shrinking, bilinear when growing). */
void gr_image_resize(const gr_image *img, int64_t w, int64_t h, gr_image *out);

/* img as a baseline JPEG at quality (1..100), libjpeg's defaults otherwise
 * (4:2:0 for colour): channels 3 encodes RGB, 1 encodes grayscale from the R
 * channel (what a grayscale source decodes to in all three). The bytes into
 * *out (malloc'd) and *n; false with why set on a libjpeg error. */
bool gr_image_encode_jpeg(const gr_image *img, int channels, int quality, uint8_t **out, size_t *n,
                          char why[GR_IMAGE_WHY_MAX]);

/* img resized so its short side is R (the long side rounded, at least R),
 * centre-cropped to S x S (R >= S >= 1), into dst as [3,S,S] planes.
 * Separable: the average of the covered source interval, pixels weighted by
 * their overlap, when shrinking; bilinear at (x + 0.5) * in / out - 0.5, edges
 * clamped, when growing or equal; float sums rounded half up. */
void gr_image_resize_crop(const gr_image *img, int64_t R, int64_t S, uint8_t *dst);

/* Decodes the JPEG or PNG file at path (by its first bytes) and writes it as
 * uint8 C,H,W into out (channels*size*size bytes): resized so its short side is
 * short_side (area averaging when shrinking, bilinear when growing; the
 * converter's exact arithmetic) and centre-cropped to size x size; channels 3
 * (RGB, exactly the bytes `gpurun data imagefolder --size size --short-side
 * short_side` stores for the file; a grayscale image copied to the 3 channels)
 * or 1 (the luma of that 3-channel result, (299 R + 587 G + 114 B) / 1000
 * rounded half up: for a grayscale image its value as it is). Errors
 * (GR_ERR_DATA, exit 3) name the file and the problem: not a regular file,
 * not JPEG or PNG, corrupt/truncated, too large ("PATH: cannot decode: WHY",
 * as the converter says it); size outside [1, GR_IMAGE_MAX_SIDE], short_side
 * outside [size, GR_IMAGE_MAX_SIDE] or channels not 1 or 3 are GR_ERR_USAGE. */
gr_status gr_image_load(const char *path, int64_t short_side, int64_t size, int channels, uint8_t *out,
                        gr_error *err);

#endif
