/* image.c — one JPEG (libjpeg-turbo) or PNG (libpng) image decoded to RGB,
 * resized so its short side is R and centre-cropped to SxS (image.h): the
 * pixels of `gpurun data imagefolder` and of `gpurun predict`.
 *
 * Decoding works on the encoded bytes in memory (jpeg_mem_src; libpng with
 * a read callback over the buffer); a file is read into memory whole, then
 * decoded the same way. An image's format is told by its first bytes (JPEG
 * FF D8 FF, PNG's 8-byte signature), not its name: ImageNet has a PNG named
 * .JPEG. CMYK and YCCK JPEGs (ImageNet has a few dozen) are decoded as CMYK
 * and converted to RGB.
 *
 * Both libraries report errors by calling a function that must not return;
 * here it records the message and longjmps back to the decoding function,
 * so a corrupt file is an error naming it, never an exit or a crash. What
 * then happens is the caller's: the converter's --on-error policy, or
 * gr_image_load's GR_ERR_DATA. */
#include "image.h"

#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <jpeglib.h>
#include <jerror.h>
#include <png.h>

/* ---- decoding: an interleaved RGB image ---- */
/* Whether a header's w x h is within GR_IMAGE_MAX_SRC_*; else msg says why. */
static bool image_size_ok(int64_t w, int64_t h, char *msg, size_t n) {
    if (w >= 1 && h >= 1 && w <= GR_IMAGE_MAX_SRC_SIDE && h <= GR_IMAGE_MAX_SRC_SIDE &&
        w * h <= GR_IMAGE_MAX_SRC_PIXELS)
        return true;
    snprintf(msg, n, "header claims %lldx%lld pixels, more than this converter takes (sides up to %d, up to %lld "
             "pixels)", (long long)w, (long long)h, GR_IMAGE_MAX_SRC_SIDE, (long long)GR_IMAGE_MAX_SRC_PIXELS);
    return false;
}

typedef struct image_jpeg_job {
    struct jpeg_decompress_struct ci;
    struct jpeg_error_mgr mgr;
    jmp_buf jb;
    char msg[GR_IMAGE_WHY_MAX - 16]; /* room for the "JPEG: " / "PNG: " prefix */
    const uint8_t *data; /* the encoded image, n bytes */
    size_t n;
    int64_t short_side;  /* decode at a reduced scale while the short side stays >= this */
    gr_image *img;
    gr_image_info *info; /* header only (gr_image_probe_mem): filled, nothing decoded */
    const int64_t *box;  /* gr_image_decode_roi: bx, by, bw, bh, out_w, out_h; NULL: the whole image */
    gr_image_roi *roi;   /* ... and where its region lies */
    uint8_t *cmyk;       /* one CMYK row, for CMYK / YCCK files */
} image_jpeg_job;

static void image_jpeg_error_exit(j_common_ptr ci) {
    image_jpeg_job *j = (image_jpeg_job *)ci->client_data;
    char m[JMSG_LENGTH_MAX];
    ci->err->format_message(ci, m);
    snprintf(j->msg, sizeof j->msg, "%s", m);
    longjmp(j->jb, 1);
}

/* Warnings are ignored, except the scan data ending early, at the end of the
 * file or at a marker (a cut file, or one whose header claims more rows
 * than its data holds): libjpeg would fill the rest with grey. */
static void image_jpeg_emit(j_common_ptr ci, int level) {
    if (level < 0 && (ci->err->msg_code == JWRN_JPEG_EOF || ci->err->msg_code == JWRN_HIT_MARKER))
        image_jpeg_error_exit(ci);
}

/* One row of n CMYK pixels to RGB. Adobe's files (an APP14 marker: Photoshop
 * and libjpeg write one) store CMYK inverted, 255 meaning no ink: R = C*K/255,
 * as libjpeg-turbo's own examples, Pillow and browsers do; others store it
 * plain: R = (255-C)*(255-K)/255. */
static void image_cmyk_to_rgb(const uint8_t *cmyk, int64_t n, bool inverted, uint8_t *rgb) {
    for (int64_t x = 0; x < n; x++, cmyk += 4, rgb += 3) {
        const unsigned k = inverted ? cmyk[3] : 255u - cmyk[3];
        for (int c = 0; c < 3; c++) {
            const unsigned v = inverted ? cmyk[c] : 255u - cmyk[c];
            rgb[c] = (uint8_t)((v * k + 127) / 255);
        }
    }
}

/* gr_image_decode_roi's scale: the smallest N/8 (N = 1, 2, 4, 8) at which
 * the box, scaled as libjpeg scales (a side of s pixels becomes
 * ceil(s N / 8)), still covers out_w x out_h pixels; 8/8 when none does.
 * Not 3, 5, 6 or 7: libjpeg-turbo has SIMD inverse DCTs at 1, 2, 4 and 8
 * only (4:2:0 chroma runs at 2N), and its scalar ones cost more than the
 * pixels they save (bench/jpeg.sh's photos, 224 crops, one worker: 1,010 to
 * 1,094 images/s with every N, 1,165 to 1,453 with these). */
static void image_jpeg_roi_scale(image_jpeg_job *j) {
    const int64_t bw = j->box[2], bh = j->box[3], ow = j->box[4], oh = j->box[5];
    unsigned num = 8;
    for (unsigned n = 1; n < 8; n *= 2)
        if ((bw * n + 7) / 8 >= ow && (bh * n + 7) / 8 >= oh) {
            num = n;
            break;
        }
    j->ci.scale_num = num;
    j->ci.scale_denom = 8;
    j->roi->scale_num = (int)num;
}

/* The box's rows [*y0, *y1) and columns of the scaled image, set up: the
 * columns through jpeg_crop_scanline, which widens them to whole iMCU
 * columns (the region's x0 and width say where they ended up). A column
 * more is asked for on each side: fancy upsampling treats the crop's edges
 * as the image's, so the colours of the region's first and last columns
 * differ from a full decode's (test_image_roi saw it); the box's own
 * columns are then all inside and come out as a full decode gives them. */
static void image_jpeg_roi_crop(image_jpeg_job *j, JDIMENSION *y0, JDIMENSION *y1) {
    const int64_t num = j->roi->scale_num, sw = j->ci.output_width, sh = j->ci.output_height;
    const int64_t bx = j->box[0], by = j->box[1], bw = j->box[2], bh = j->box[3];
    const int64_t x0 = GR_MAX(GR_MIN(bx * num / 8, sw - 1) - 1, 0);
    const int64_t x1 = GR_MAX(GR_MIN(((bx + bw) * num + 7) / 8 + 1, sw), x0 + 1);
    *y0 = (JDIMENSION)GR_MIN(by * num / 8, sh - 1);
    *y1 = (JDIMENSION)GR_MAX(GR_MIN(((by + bh) * num + 7) / 8, sh), (int64_t)*y0 + 1);
    JDIMENSION xoff = (JDIMENSION)x0, cw = (JDIMENSION)(x1 - x0);
    jpeg_crop_scanline(&j->ci, &xoff, &cw);
    j->roi->sw = sw;
    j->roi->sh = sh;
    j->roi->x0 = xoff;
    j->roi->y0 = *y0;
}

/* The libjpeg calls; returns false with j->msg set. Touches only *j. */
static bool image_jpeg_run(image_jpeg_job *j) {
    if (setjmp(j->jb)) return false;
    jpeg_create_decompress(&j->ci);
    j->ci.client_data = j;
    jpeg_mem_src(&j->ci, j->data, (unsigned long)j->n);
    jpeg_read_header(&j->ci, TRUE);
    if (!image_size_ok(j->ci.image_width, j->ci.image_height, j->msg, sizeof j->msg)) return false;
    if (j->info) {
        *j->info = (gr_image_info){GR_IMAGE_JPEG, j->ci.image_width, j->ci.image_height,
                                   j->ci.jpeg_color_space == JCS_GRAYSCALE ? 1 : 3};
        return true;
    }
    /* libjpeg converts YCCK to CMYK but neither to RGB */
    const bool cmyk = j->ci.jpeg_color_space == JCS_CMYK || j->ci.jpeg_color_space == JCS_YCCK;
    j->ci.out_color_space = cmyk ? JCS_CMYK : JCS_RGB;
    const int64_t shorter = GR_MIN((int64_t)j->ci.image_width, (int64_t)j->ci.image_height);
    if (j->box) {
        image_jpeg_roi_scale(j);
    } else {
        for (int d = 8; d >= 2; d /= 2)
            if ((shorter + d - 1) / d >= j->short_side) {
                j->ci.scale_num = 1;
                j->ci.scale_denom = (unsigned)d;
                break;
            }
    }
    jpeg_start_decompress(&j->ci);
    if (j->ci.output_components != (cmyk ? 4 : 3)) {
        snprintf(j->msg, sizeof j->msg, "decodes to %d components, not %s", j->ci.output_components,
                 cmyk ? "CMYK" : "RGB");
        return false;
    }
    /* the rows [y0, y1) of the (scaled) image, and with a box only its columns */
    JDIMENSION y0 = 0, y1 = j->ci.output_height;
    if (j->box) image_jpeg_roi_crop(j, &y0, &y1);
    j->img->w = j->ci.output_width;
    j->img->h = y1 - y0;
    j->img->rgb = gr_xmalloc((size_t)(j->img->w * j->img->h * 3));
    if (cmyk) j->cmyk = gr_xmalloc((size_t)(j->img->w * 4));
    if (y0 > 0) jpeg_skip_scanlines(&j->ci, y0);
    while (j->ci.output_scanline < y1) {
        uint8_t *rgb = j->img->rgb + (size_t)(j->ci.output_scanline - y0) * (size_t)j->img->w * 3;
        JSAMPROW row = cmyk ? j->cmyk : rgb;
        if (jpeg_read_scanlines(&j->ci, &row, 1) == 1 && cmyk)
            image_cmyk_to_rgb(j->cmyk, j->img->w, j->ci.saw_Adobe_marker, rgb);
    }
    /* a region ends here: the rows below it are not decoded (libjpeg_turbo
     * cannot skip to the end of a file, and the caller has what it asked) */
    if (!j->box) jpeg_finish_decompress(&j->ci);
    return true;
}

static bool image_decode_jpeg(const uint8_t *data, size_t n, int64_t short_side, gr_image *img, gr_image_info *info,
                              const int64_t *box, gr_image_roi *roi, char *msg) {
    image_jpeg_job *j = gr_xcalloc(1, sizeof *j);
    j->data = data;
    j->n = n;
    j->img = img;
    j->info = info;
    j->short_side = short_side;
    j->box = box;
    j->roi = roi;
    j->ci.err = jpeg_std_error(&j->mgr);
    j->mgr.error_exit = image_jpeg_error_exit;
    j->mgr.emit_message = image_jpeg_emit;
    bool ok = image_jpeg_run(j);
    if (!ok) snprintf(msg, GR_IMAGE_WHY_MAX, "JPEG: %s", j->msg);
    jpeg_destroy_decompress(&j->ci);
    free(j->cmyk);
    free(j);
    return ok;
}

typedef struct image_png_job {
    png_structp png;
    png_infop info;
    png_bytep *rows;
    jmp_buf jb;
    char msg[GR_IMAGE_WHY_MAX - 16]; /* room for the "JPEG: " / "PNG: " prefix */
    const uint8_t *data; /* the encoded image, n bytes, read up to pos */
    size_t n, pos;
    gr_image *img;
    gr_image_info *hdr;  /* header only, as image_jpeg_job's info */
} image_png_job;

static void image_png_error(png_structp png, png_const_charp m) {
    image_png_job *j = png_get_error_ptr(png);
    snprintf(j->msg, sizeof j->msg, "%s", m);
    longjmp(j->jb, 1);
}

static void image_png_warning(png_structp png, png_const_charp m) {
    (void)png, (void)m;
}

/* libpng's read callback over the buffer: a read past its end fails with
 * the message of libpng's own stdio reader. */
static void image_png_read(png_structp png, png_bytep out, size_t len) {
    image_png_job *j = png_get_io_ptr(png);
    if (len > j->n - j->pos) png_error(png, "Read Error");
    memcpy(out, j->data + j->pos, len);
    j->pos += len;
}

/* The libpng calls; returns false with j->msg set. Touches only *j. */
static bool image_png_run(image_png_job *j) {
    if (setjmp(j->jb)) return false;
    png_set_read_fn(j->png, j, image_png_read);
    png_set_user_limits(j->png, GR_IMAGE_MAX_SRC_SIDE, GR_IMAGE_MAX_SRC_SIDE);
    png_read_info(j->png, j->info);
    if (!image_size_ok(png_get_image_width(j->png, j->info), png_get_image_height(j->png, j->info), j->msg,
                    sizeof j->msg))
        return false;
    const int color = png_get_color_type(j->png, j->info);
    if (j->hdr) {
        *j->hdr = (gr_image_info){GR_IMAGE_PNG, png_get_image_width(j->png, j->info),
                                  png_get_image_height(j->png, j->info),
                                  color == PNG_COLOR_TYPE_GRAY || color == PNG_COLOR_TYPE_GRAY_ALPHA ? 1 : 3};
        return true;
    }
    png_set_expand(j->png);      /* palette -> RGB, gray < 8 bits -> 8, tRNS -> alpha */
    png_set_strip_16(j->png);
    png_set_strip_alpha(j->png);
    if (color == PNG_COLOR_TYPE_GRAY || color == PNG_COLOR_TYPE_GRAY_ALPHA) png_set_gray_to_rgb(j->png);
    png_set_interlace_handling(j->png);
    png_read_update_info(j->png, j->info);
    const int64_t w = png_get_image_width(j->png, j->info), h = png_get_image_height(j->png, j->info);
    if (png_get_channels(j->png, j->info) != 3 || (int64_t)png_get_rowbytes(j->png, j->info) != w * 3) {
        snprintf(j->msg, sizeof j->msg, "does not decode to 8-bit RGB");
        return false;
    }
    j->img->w = w;
    j->img->h = h;
    j->img->rgb = gr_xmalloc((size_t)(w * h * 3));
    j->rows = gr_xmalloc((size_t)h * sizeof *j->rows);
    for (int64_t y = 0; y < h; y++) j->rows[y] = j->img->rgb + y * w * 3;
    png_read_image(j->png, j->rows);
    png_read_end(j->png, NULL);
    return true;
}

static bool image_decode_png(const uint8_t *data, size_t n, gr_image *img, gr_image_info *hdr, char *msg) {
    image_png_job *j = gr_xcalloc(1, sizeof *j);
    j->data = data;
    j->n = n;
    j->img = img;
    j->hdr = hdr;
    j->png = png_create_read_struct(PNG_LIBPNG_VER_STRING, j, image_png_error, image_png_warning);
    if (j->png) j->info = png_create_info_struct(j->png);
    bool ok = j->png && j->info && image_png_run(j);
    if (!ok) snprintf(msg, GR_IMAGE_WHY_MAX, "PNG: %s", j->png && j->info ? j->msg : "out of memory");
    png_destroy_read_struct(&j->png, &j->info, NULL);
    free(j->rows);
    free(j);
    return ok;
}

/* Decodes (info NULL) or reads the header of (info set) bytes[0, n), told
 * by its first bytes. */
static bool image_decode_any(const void *bytes, size_t n, int64_t short_side, gr_image *img, gr_image_info *info,
                             char why[GR_IMAGE_WHY_MAX]) {
    memset(img, 0, sizeof *img);
    const uint8_t *data = bytes;
    uint8_t sig[8] = {0};
    const size_t got = GR_MIN(n, sizeof sig);
    if (got) memcpy(sig, data, got);
    bool ok;
    if (got >= 3 && sig[0] == 0xFF && sig[1] == 0xD8 && sig[2] == 0xFF) {
        ok = image_decode_jpeg(data, n, short_side, img, info, NULL, NULL, why);
    } else if (got == sizeof sig && png_sig_cmp(sig, 0, sizeof sig) == 0) {
        ok = image_decode_png(data, n, img, info, why);
    } else {
        char hex[3 * sizeof sig + 1] = "";
        for (size_t i = 0; i < GR_MIN(got, (size_t)4); i++) snprintf(hex + 3 * i, 4, " %02X", sig[i]);
        snprintf(why, GR_IMAGE_WHY_MAX, "not a JPEG or PNG file (%s%s)", got ? "it starts with" : "it is empty", hex);
        ok = false;
    }
    if (!ok) gr_image_free(img);
    return ok;
}

bool gr_image_decode_mem(const void *bytes, size_t n, int64_t short_side, gr_image *img,
                        char why[GR_IMAGE_WHY_MAX]) {
    return image_decode_any(bytes, n, short_side, img, NULL, why);
}

/* A PNG has no reduced-scale or partial decode: it is decoded whole and the
 * box cut out of it, at scale 8/8. */
static void image_cut_box(gr_image *img, const int64_t *box, gr_image_roi *roi) {
    const int64_t x0 = GR_MIN(GR_MAX(box[0], 0), img->w - 1), y0 = GR_MIN(GR_MAX(box[1], 0), img->h - 1);
    const int64_t w = GR_MAX(GR_MIN(box[0] + box[2], img->w) - x0, 1), h = GR_MAX(GR_MIN(box[1] + box[3], img->h) - y0, 1);
    roi->img.w = w;
    roi->img.h = h;
    roi->img.rgb = gr_xmalloc((size_t)(w * h * 3));
    for (int64_t y = 0; y < h; y++)
        memcpy(roi->img.rgb + y * w * 3, img->rgb + ((y0 + y) * img->w + x0) * 3, (size_t)(w * 3));
    roi->x0 = x0;
    roi->y0 = y0;
    roi->sw = img->w;
    roi->sh = img->h;
    roi->scale_num = 8;
    gr_image_free(img);
}

bool gr_image_decode_roi(const void *bytes, size_t n, const int64_t box[6], gr_image_roi *roi,
                         char why[GR_IMAGE_WHY_MAX]) {
    memset(roi, 0, sizeof *roi);
    GR_ASSERT(box[2] >= 1 && box[3] >= 1 && box[4] >= 1 && box[5] >= 1);
    const uint8_t *data = bytes;
    if (n >= 3 && data[0] == 0xFF && data[1] == 0xD8 && data[2] == 0xFF) {
        if (image_decode_jpeg(data, n, 0, &roi->img, NULL, box, roi, why)) return true;
        gr_image_free(&roi->img);
        return false;
    }
    gr_image whole;
    if (!image_decode_any(bytes, n, 0, &whole, NULL, why)) return false;
    image_cut_box(&whole, box, roi);
    return true;
}

bool gr_image_probe_mem(const void *bytes, size_t n, gr_image_info *info, char why[GR_IMAGE_WHY_MAX]) {
    gr_image none;
    memset(info, 0, sizeof *info);
    return image_decode_any(bytes, n, 1, &none, info, why);
}

/* The bytes of fp up to its end (or to a read error, as a decoder reading
 * the stream would have seen them) into *data (malloc'd; NULL when empty). */
size_t gr_image_read_all(FILE *fp, uint8_t **data) {
    struct stat sb;
    size_t cap = fstat(fileno(fp), &sb) == 0 && sb.st_size > 0 ? (size_t)sb.st_size + 1 : 4096, n = 0;
    uint8_t *buf = gr_xmalloc(cap);
    for (;;) {
        if (n == cap) buf = gr_xrealloc(buf, cap *= 2);
        const size_t got = fread(buf + n, 1, cap - n, fp);
        n += got;
        if (got == 0) break;
    }
    if (n == 0) {
        free(buf);
        buf = NULL;
    }
    *data = buf;
    return n;
}

bool gr_image_decode(const char *path, int64_t short_side, gr_image *img, char why[GR_IMAGE_WHY_MAX]) {
    memset(img, 0, sizeof *img);
    FILE *fp = fopen(path, "rb");
    if (!fp) {
        snprintf(why, GR_IMAGE_WHY_MAX, "%s", strerror(errno));
        return false;
    }
    uint8_t *data;
    const size_t n = gr_image_read_all(fp, &data);
    fclose(fp);
    const bool ok = gr_image_decode_mem(data, n, short_side, img, why);
    free(data);
    return ok;
}

void gr_image_free(gr_image *img) {
    free(img->rgb);
    memset(img, 0, sizeof *img);
}

/* ---- resize (short side R) + centre crop (S), separable ---- */
typedef struct image_taps {
    int stride;     /* taps per output position, at most */
    int *count;     /* S */
    int64_t *idx;   /* S * stride source positions */
    float *w;       /* S * stride weights, summing to 1 */
} image_taps;

static void image_taps_free(image_taps *t) {
    free(t->count);
    free(t->idx);
    free(t->w);
}

/* An axis of `in` source pixels resized to `full`, of which output o in
 * [0, S) is resized position o + off. Shrinking: the average of the source
 * interval [x, x + 1) * in / full, pixels weighted by their overlap with it.
 * Growing (or equal): bilinear at (x + 0.5) * in / full - 0.5, edges clamped. */
static void image_taps_init(image_taps *t, int64_t in, int64_t full, int64_t off, int64_t S) {
    const double scale = (double)in / (double)full;
    t->stride = full < in ? (int)ceil(scale) + 2 : 2;
    t->count = gr_xcalloc((size_t)S, sizeof *t->count);
    t->idx = gr_xcalloc((size_t)(S * t->stride), sizeof *t->idx);
    t->w = gr_xcalloc((size_t)(S * t->stride), sizeof *t->w);
    for (int64_t o = 0; o < S; o++) {
        const double x = (double)(o + off);
        int64_t *idx = t->idx + o * t->stride;
        float *w = t->w + o * t->stride;
        int n = 0;
        if (full < in) {
            const double lo = x * scale, hi = GR_MIN((x + 1) * scale, (double)in);
            double total = 0;
            for (int64_t i = (int64_t)floor(lo); i < (int64_t)ceil(hi) && n < t->stride; i++) {
                const double wt = GR_MIN(hi, (double)(i + 1)) - GR_MAX(lo, (double)i);
                if (wt <= 0) continue;
                idx[n] = i, w[n] = (float)wt, n++;
                total += wt;
            }
            for (int k = 0; k < n; k++) w[k] = (float)(w[k] / total);
        } else {
            const double src = (x + 0.5) * scale - 0.5, i0 = floor(src), f = src - i0;
            idx[0] = GR_MIN(GR_MAX((int64_t)i0, 0), in - 1), w[0] = (float)(1 - f);
            idx[1] = GR_MIN(GR_MAX((int64_t)i0 + 1, 0), in - 1), w[1] = (float)f;
            n = 2;
        }
        t->count[o] = n;
    }
}

/* img resized to fw x fh, of which the ow x oh window at its centre
 * (offset floor((full - out) / 2)) goes to dst: [3,oh,ow] planes when
 * planar, else interleaved rows. */
static void image_resample(const gr_image *img, int64_t fw, int64_t fh, int64_t ow, int64_t oh, bool planar,
                           uint8_t *dst) {
    image_taps tx, ty;
    image_taps_init(&tx, img->w, fw, (fw - ow) / 2, ow);
    image_taps_init(&ty, img->h, fh, (fh - oh) / 2, oh);
    const int64_t rw = img->w * 3;
    float *row = gr_xmalloc((size_t)rw * sizeof *row);
    for (int64_t oy = 0; oy < oh; oy++) {
        memset(row, 0, (size_t)rw * sizeof *row);
        for (int k = 0; k < ty.count[oy]; k++) {
            const uint8_t *src = img->rgb + ty.idx[oy * ty.stride + k] * rw;
            const float wt = ty.w[oy * ty.stride + k];
            for (int64_t i = 0; i < rw; i++) row[i] += wt * (float)src[i];
        }
        for (int64_t ox = 0; ox < ow; ox++) {
            float acc[3] = {0, 0, 0};
            for (int k = 0; k < tx.count[ox]; k++) {
                const float *p = row + tx.idx[ox * tx.stride + k] * 3, wt = tx.w[ox * tx.stride + k];
                acc[0] += wt * p[0], acc[1] += wt * p[1], acc[2] += wt * p[2];
            }
            for (int c = 0; c < 3; c++) {
                const float v = acc[c] < 0.0f ? 0.0f : acc[c] > 255.0f ? 255.0f : acc[c];
                dst[planar ? (c * oh + oy) * ow + ox : (oy * ow + ox) * 3 + c] = (uint8_t)(v + 0.5f);
            }
        }
    }
    free(row);
    image_taps_free(&tx);
    image_taps_free(&ty);
}

void gr_image_resize_crop(const gr_image *img, int64_t R, int64_t S, uint8_t *dst) {
    int64_t fw, fh;
    if (img->w <= img->h) fw = R, fh = GR_MAX(llround((double)img->h * (double)R / (double)img->w), R);
    else fh = R, fw = GR_MAX(llround((double)img->w * (double)R / (double)img->h), R);
    image_resample(img, fw, fh, S, S, true, dst);
}

void gr_image_fit_side(int64_t w, int64_t h, int64_t S, int64_t *ow, int64_t *oh) {
    if (w >= h) *ow = S, *oh = GR_MAX(llround((double)h * (double)S / (double)w), 1);
    else *oh = S, *ow = GR_MAX(llround((double)w * (double)S / (double)h), 1);
}

void gr_image_resize(const gr_image *img, int64_t w, int64_t h, gr_image *out) {
    out->w = w;
    out->h = h;
    out->rgb = gr_xmalloc((size_t)(w * h * 3));
    image_resample(img, w, h, w, h, false, out->rgb);
}

/* ---- encoding: JPEG (libjpeg-turbo) ---- */
typedef struct image_enc_job {
    struct jpeg_compress_struct ci;
    struct jpeg_error_mgr mgr;
    jmp_buf jb;
    char msg[GR_IMAGE_WHY_MAX - 16];
    const gr_image *img;
    int channels, quality;
    unsigned char *out;   /* jpeg_mem_dest's buffer */
    unsigned long n;
    uint8_t *gray;        /* one row of luma, channels 1 */
} image_enc_job;

static void image_enc_error_exit(j_common_ptr ci) {
    image_enc_job *j = (image_enc_job *)ci->client_data;
    char m[JMSG_LENGTH_MAX];
    ci->err->format_message(ci, m);
    snprintf(j->msg, sizeof j->msg, "%s", m);
    longjmp(j->jb, 1);
}

static bool image_enc_run(image_enc_job *j) {
    if (setjmp(j->jb)) return false;
    jpeg_create_compress(&j->ci);
    j->ci.client_data = j;
    jpeg_mem_dest(&j->ci, &j->out, &j->n);
    j->ci.image_width = (JDIMENSION)j->img->w;
    j->ci.image_height = (JDIMENSION)j->img->h;
    j->ci.input_components = j->channels;
    j->ci.in_color_space = j->channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
    jpeg_set_defaults(&j->ci);
    jpeg_set_quality(&j->ci, j->quality, TRUE);
    jpeg_start_compress(&j->ci, TRUE);
    if (j->channels == 1) j->gray = gr_xmalloc((size_t)j->img->w);
    while (j->ci.next_scanline < j->ci.image_height) {
        uint8_t *rgb = j->img->rgb + (size_t)j->ci.next_scanline * (size_t)j->img->w * 3;
        if (j->gray) /* a grayscale source decodes to R = G = B: R is the gray */
            for (int64_t x = 0; x < j->img->w; x++) j->gray[x] = rgb[3 * x];
        JSAMPROW row = j->gray ? j->gray : rgb;
        jpeg_write_scanlines(&j->ci, &row, 1);
    }
    jpeg_finish_compress(&j->ci);
    return true;
}

bool gr_image_encode_jpeg(const gr_image *img, int channels, int quality, uint8_t **out, size_t *n,
                          char why[GR_IMAGE_WHY_MAX]) {
    GR_ASSERT((channels == 1 || channels == 3) && quality >= 1 && quality <= 100);
    image_enc_job *j = gr_xcalloc(1, sizeof *j);
    j->img = img;
    j->channels = channels;
    j->quality = quality;
    j->ci.err = jpeg_std_error(&j->mgr);
    j->mgr.error_exit = image_enc_error_exit;
    const bool ok = image_enc_run(j);
    jpeg_destroy_compress(&j->ci);
    *out = NULL;
    *n = 0;
    if (ok) {
        *out = gr_xmalloc(j->n);
        memcpy(*out, j->out, j->n);
        *n = j->n;
    } else {
        snprintf(why, GR_IMAGE_WHY_MAX, "JPEG encoding: %s", j->msg);
    }
    free(j->out); /* jpeg_mem_dest's, malloc'd by libjpeg */
    free(j->gray);
    free(j);
    return ok;
}

/* ---- one file to a sample ---- */

gr_status gr_image_load(const char *path, int64_t short_side, int64_t size, int channels, uint8_t *out,
                        gr_error *err) {
    const int64_t S = size, R = short_side;
    if (S < 1 || S > GR_IMAGE_MAX_SIDE || R < S || R > GR_IMAGE_MAX_SIDE || (channels != 1 && channels != 3))
        return gr_error_set(err, GR_ERR_USAGE, "%s: cannot load as %d x %lld x %lld from a short side of %lld: the "
                            "size must be in [1, %d], the short side in [size, %d], the channels 1 or 3", path,
                            channels, (long long)S, (long long)S, (long long)R, GR_IMAGE_MAX_SIDE, GR_IMAGE_MAX_SIDE);
    /* a FIFO would block fopen, a directory would read as empty */
    gr_status st = gr_check_regular(path, "an image", GR_ERR_DATA, err);
    if (st != GR_OK) return st;
    gr_image img;
    char why[GR_IMAGE_WHY_MAX];
    if (!gr_image_decode(path, R, &img, why)) return gr_error_set(err, GR_ERR_DATA, "%s: cannot decode: %s", path, why);
    uint8_t *rgb = channels == 3 ? out : gr_xmalloc((size_t)(3 * S * S));
    gr_image_resize_crop(&img, R, S, rgb);
    gr_image_free(&img);
    if (channels == 1) {
        const uint8_t *r = rgb, *g = rgb + S * S, *b = rgb + 2 * S * S;
        for (int64_t i = 0; i < S * S; i++)
            out[i] = (uint8_t)((299u * r[i] + 587u * g[i] + 114u * b[i] + 500u) / 1000u);
        free(rgb);
    }
    return GR_OK;
}
