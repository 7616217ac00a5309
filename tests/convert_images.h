/* convert_images.h — image files for the imagefolder converter tests
 * (test_convert_imagefolder*.c), written here with libpng / libjpeg: PNGs of
 * every colour type, RGB / gray / CMYK / YCCK JPEGs, a JPEG made to claim
 * another size; the pixel functions they are drawn from, and max_err, the
 * largest difference of a converted sample from what a pixel function says. */
#ifndef CONVERT_IMAGES_H
#define CONVERT_IMAGES_H

#include "convert_fixture.h"

#include <jpeglib.h>
#include <png.h>

typedef uint8_t (*pixel_fn)(int x, int y, int c); /* c: 0..3 (3 = alpha / gray) */

/* An 8-bit RGB / RGBA / gray / palette or a 16-bit RGB PNG. */
static inline void write_png(const char *path, int w, int h, int color, int depth, pixel_fn px) {
    FILE *f = fopen(path, "wb");
    GR_ASSERT(f);
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png_create_info_struct(png);
    png_init_io(png, f);
    png_set_IHDR(png, info, (png_uint_32)w, (png_uint_32)h, depth, color, PNG_INTERLACE_NONE,
                 PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    if (color == PNG_COLOR_TYPE_PALETTE) {
        png_color pal[2] = {{px(0, 0, 0), px(0, 0, 1), px(0, 0, 2)}, {0, 0, 0}};
        png_set_PLTE(png, info, pal, 2);
    }
    png_write_info(png, info);
    const int ch = color == PNG_COLOR_TYPE_RGB ? 3 : color == PNG_COLOR_TYPE_RGBA ? 4 : 1;
    const int bps = depth / 8;
    uint8_t *row = malloc((size_t)(w * ch * bps));
    for (int y = 0; y < h; y++) {
        for (int x = 0; x < w; x++)
            for (int c = 0; c < ch; c++) {
                uint8_t v = color == PNG_COLOR_TYPE_PALETTE ? 0 : px(x, y, color == PNG_COLOR_TYPE_GRAY ? 3 : c);
                for (int b = 0; b < bps; b++) row[(x * ch + c) * bps + b] = b == 0 ? v : (uint8_t)(255 - v);
            }
        png_write_row(png, row);
    }
    png_write_end(png, NULL);
    png_destroy_write_struct(&png, &info);
    free(row);
    fclose(f);
}

/* An RGB (components 3) or gray (1) JPEG at quality q, baseline or
 * progressive (successive scans); colour with its luma sampled h_samp x
 * v_samp times the chroma (2 2: 4:2:0, libjpeg's default; 2 1: 4:2:2; 1 1:
 * 4:4:4). */
static inline void write_jpeg_sampled(const char *path, int w, int h, int components, int q, bool progressive,
                                      int h_samp, int v_samp, pixel_fn px) {
    FILE *f = fopen(path, "wb");
    GR_ASSERT(f);
    struct jpeg_compress_struct ci;
    struct jpeg_error_mgr jerr;
    ci.err = jpeg_std_error(&jerr);
    jpeg_create_compress(&ci);
    jpeg_stdio_dest(&ci, f);
    ci.image_width = (JDIMENSION)w;
    ci.image_height = (JDIMENSION)h;
    ci.input_components = components;
    ci.in_color_space = components == 3 ? JCS_RGB : JCS_GRAYSCALE;
    jpeg_set_defaults(&ci);
    jpeg_set_quality(&ci, q, TRUE);
    if (components == 3) ci.comp_info[0].h_samp_factor = h_samp, ci.comp_info[0].v_samp_factor = v_samp;
    if (progressive) jpeg_simple_progression(&ci);
    jpeg_start_compress(&ci, TRUE);
    uint8_t *row = malloc((size_t)(w * components));
    while (ci.next_scanline < ci.image_height) {
        for (int x = 0; x < w; x++)
            for (int c = 0; c < components; c++)
                row[x * components + c] = px(x, (int)ci.next_scanline, components == 3 ? c : 3);
        JSAMPROW r = row;
        jpeg_write_scanlines(&ci, &r, 1);
    }
    jpeg_finish_compress(&ci);
    jpeg_destroy_compress(&ci);
    free(row);
    fclose(f);
}

static inline void write_jpeg_as(const char *path, int w, int h, int components, int q, bool progressive,
                                 pixel_fn px) {
    write_jpeg_sampled(path, w, h, components, q, progressive, 2, 2, px);
}

static inline void write_jpeg(const char *path, int w, int h, int components, pixel_fn px) {
    write_jpeg_as(path, w, h, components, 98, false, px);
}

/* A solid 4-component JPEG: every pixel stores cmyk[0..3]. mode 0: CMYK with
 * libjpeg's default Adobe marker (which, as Photoshop's files, means the
 * values are stored inverted); 1: CMYK without an Adobe marker (plain CMYK);
 * 2: YCCK (always with an Adobe marker). */
static inline void write_jpeg_cmyk(const char *path, int w, int h, const uint8_t cmyk[4], int mode) {
    FILE *f = fopen(path, "wb");
    GR_ASSERT(f);
    struct jpeg_compress_struct ci;
    struct jpeg_error_mgr jerr;
    ci.err = jpeg_std_error(&jerr);
    jpeg_create_compress(&ci);
    jpeg_stdio_dest(&ci, f);
    ci.image_width = (JDIMENSION)w;
    ci.image_height = (JDIMENSION)h;
    ci.input_components = 4;
    ci.in_color_space = JCS_CMYK;
    jpeg_set_defaults(&ci);
    if (mode == 2) jpeg_set_colorspace(&ci, JCS_YCCK);
    if (mode == 1) ci.write_Adobe_marker = FALSE;
    jpeg_set_quality(&ci, 98, TRUE);
    jpeg_start_compress(&ci, TRUE);
    uint8_t *row = malloc((size_t)(w * 4));
    for (int x = 0; x < w; x++) memcpy(row + 4 * x, cmyk, 4);
    while (ci.next_scanline < ci.image_height) {
        JSAMPROW r = row;
        jpeg_write_scanlines(&ci, &r, 1);
    }
    jpeg_finish_compress(&ci);
    jpeg_destroy_compress(&ci);
    free(row);
    fclose(f);
}

/* Rewrites the baseline SOF of the JPEG in buf[0, n) to claim w x h. */
static inline void jpeg_claim_size(uint8_t *buf, size_t n, int w, int h) {
    for (size_t i = 0; i + 9 < n; i++)
        if (buf[i] == 0xFF && buf[i + 1] == 0xC0) {
            buf[i + 5] = (uint8_t)(h >> 8), buf[i + 6] = (uint8_t)h;
            buf[i + 7] = (uint8_t)(w >> 8), buf[i + 8] = (uint8_t)w;
            return;
        }
    GR_ASSERT(!"no SOF0 marker");
}

static inline uint8_t px_solid(int x, int y, int c) {
    (void)x, (void)y;
    static const uint8_t v[4] = {200, 30, 90, 77};
    return v[c];
}

static inline uint8_t px_rgba(int x, int y, int c) {
    (void)x, (void)y;
    static const uint8_t v[4] = {10, 20, 30, 0}; /* fully transparent: alpha is dropped, not composited */
    return v[c];
}

static inline uint8_t px_pal(int x, int y, int c) {
    (void)x, (void)y;
    return (uint8_t)(c + 1);
}

static inline uint8_t px_busy(int x, int y, int c) { /* detail everywhere: a JPEG mostly of scan data */
    return (uint8_t)(x * 37 + y * 91 + c * 53 + x * y * 7);
}

/* Max |got - want(c, y, x)| over sample i of d ([3,S,S]) for y,x in [lo, hi). */
static inline double max_err(const split_data *d, int64_t i, int lo, int hi, double (*want)(int c, int y, int x)) {
    const int64_t S = d->chw[1];
    double e = 0;
    for (int c = 0; c < 3; c++)
        for (int y = lo; y < hi; y++)
            for (int x = lo; x < hi; x++) e = fmax(e, fabs(d->x[((i * 3 + c) * S + y) * S + x] - want(c, y, x)));
    return e;
}

static inline double want_solid(int c, int y, int x) {
    (void)y, (void)x;
    return px_solid(0, 0, c);
}

static inline double want_pal(int c, int y, int x) {
    (void)y, (void)x;
    return c + 1;
}

#endif
