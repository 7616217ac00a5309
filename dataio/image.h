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

#define GR_IMAGE_MAX_SIDE 65536 /* S (crop size) and R (short side) */
/* The largest source image taken, checked on the header before anything is
 * allocated: a side of at most 32768 and at most 2^28 pixels (256 Mpixel,
 * 16384x16384). Photo datasets stay far below it (ImageNet's largest is
 * under 10k a side); past it a header is corrupt or hostile (65500x65500
 * over a few hundred bytes would cost gigabytes and a long decode). */
#define GR_IMAGE_MAX_SRC_SIDE 32768
#define GR_IMAGE_MAX_SRC_PIXELS ((int64_t)1 << 28)
#define GR_IMAGE_WHY_MAX 256 /* gr_image_decode's `why`, with its terminating NUL */

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
