/* convert_imagefolder.c — `gpurun data imagefolder OUT.h5 --from DIR --size S`:
 * a folder of class folders of JPEG (libjpeg-turbo) and PNG (libpng) files
 * to one split of the HDF5 layout of DESIGN 1.5: each image decoded to RGB,
 * resized so its short side is R, centre-cropped to SxS.
 *
 * A file's format is told by its first bytes (JPEG FF D8 FF, PNG's 8-byte
 * signature), not its name: ImageNet has a PNG named .JPEG. CMYK and YCCK
 * JPEGs (ImageNet has a few dozen) are decoded as CMYK and converted to RGB.
 *
 * Both libraries report errors by calling a function that must not return;
 * here it records the message and longjmps back to the decoding function,
 * so a corrupt file is an error naming it, never an exit or a crash. What
 * then happens to the conversion is the caller's --on-error policy. */
#include "convert.h"
#include "convert_out.h"
#include "h5util.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include <jpeglib.h>
#include <jerror.h>
#include <png.h>

#define IF_MAX_SIDE 65536 /* --size and --short-side */
/* The largest source image taken, checked on the header before anything is
 * allocated: a side of at most 32768 and at most 2^28 pixels (256 Mpixel,
 * 16384x16384). Photo datasets stay far below it (ImageNet's largest is
 * under 10k a side); past it a header is corrupt or hostile (65500x65500
 * over a few hundred bytes would cost gigabytes and a long decode). */
#define IF_MAX_SRC_SIDE 32768
#define IF_MAX_SRC_PIXELS ((int64_t)1 << 28)
#define IF_MSG_MAX 256

/* ---- decoding: an interleaved RGB image ---- */
typedef struct if_image {
    uint8_t *rgb;  /* h * w * 3 */
    int64_t w, h;
} if_image;

/* Whether a header's w x h is within IF_MAX_SRC_*; else msg says why. */
static bool if_size_ok(int64_t w, int64_t h, char *msg, size_t n) {
    if (w >= 1 && h >= 1 && w <= IF_MAX_SRC_SIDE && h <= IF_MAX_SRC_SIDE && w * h <= IF_MAX_SRC_PIXELS) return true;
    snprintf(msg, n, "header claims %lldx%lld pixels, more than this converter takes (sides up to %d, up to %lld "
             "pixels)", (long long)w, (long long)h, IF_MAX_SRC_SIDE, (long long)IF_MAX_SRC_PIXELS);
    return false;
}

typedef struct if_jpeg_job {
    struct jpeg_decompress_struct ci;
    struct jpeg_error_mgr mgr;
    jmp_buf jb;
    char msg[IF_MSG_MAX - 16]; /* room for the "JPEG: " / "PNG: " prefix */
    FILE *fp;
    int64_t short_side;  /* decode at a reduced scale while the short side stays >= this */
    if_image *img;
    uint8_t *cmyk;       /* one CMYK row, for CMYK / YCCK files */
} if_jpeg_job;

static void if_jpeg_error_exit(j_common_ptr ci) {
    if_jpeg_job *j = (if_jpeg_job *)ci->client_data;
    char m[JMSG_LENGTH_MAX];
    ci->err->format_message(ci, m);
    snprintf(j->msg, sizeof j->msg, "%s", m);
    longjmp(j->jb, 1);
}

/* Warnings are ignored, except the scan data ending early, at the end of the
 * file or at a marker (a cut file, or one whose header claims more rows
 * than its data holds): libjpeg would fill the rest with grey. */
static void if_jpeg_emit(j_common_ptr ci, int level) {
    if (level < 0 && (ci->err->msg_code == JWRN_JPEG_EOF || ci->err->msg_code == JWRN_HIT_MARKER))
        if_jpeg_error_exit(ci);
}

/* One row of n CMYK pixels to RGB. Adobe's files (an APP14 marker: Photoshop
 * and libjpeg write one) store CMYK inverted, 255 meaning no ink: R = C*K/255,
 * as libjpeg-turbo's own examples, Pillow and browsers do; others store it
 * plain: R = (255-C)*(255-K)/255. */
static void if_cmyk_to_rgb(const uint8_t *cmyk, int64_t n, bool inverted, uint8_t *rgb) {
    for (int64_t x = 0; x < n; x++, cmyk += 4, rgb += 3) {
        const unsigned k = inverted ? cmyk[3] : 255u - cmyk[3];
        for (int c = 0; c < 3; c++) {
            const unsigned v = inverted ? cmyk[c] : 255u - cmyk[c];
            rgb[c] = (uint8_t)((v * k + 127) / 255);
        }
    }
}

/* The libjpeg calls; returns false with j->msg set. Touches only *j. */
static bool if_jpeg_run(if_jpeg_job *j) {
    if (setjmp(j->jb)) return false;
    jpeg_create_decompress(&j->ci);
    j->ci.client_data = j;
    jpeg_stdio_src(&j->ci, j->fp);
    jpeg_read_header(&j->ci, TRUE);
    if (!if_size_ok(j->ci.image_width, j->ci.image_height, j->msg, sizeof j->msg)) return false;
    /* libjpeg converts YCCK to CMYK but neither to RGB */
    const bool cmyk = j->ci.jpeg_color_space == JCS_CMYK || j->ci.jpeg_color_space == JCS_YCCK;
    j->ci.out_color_space = cmyk ? JCS_CMYK : JCS_RGB;
    const int64_t shorter = GR_MIN((int64_t)j->ci.image_width, (int64_t)j->ci.image_height);
    for (int d = 8; d >= 2; d /= 2)
        if ((shorter + d - 1) / d >= j->short_side) {
            j->ci.scale_num = 1;
            j->ci.scale_denom = (unsigned)d;
            break;
        }
    jpeg_start_decompress(&j->ci);
    if (j->ci.output_components != (cmyk ? 4 : 3)) {
        snprintf(j->msg, sizeof j->msg, "decodes to %d components, not %s", j->ci.output_components,
                 cmyk ? "CMYK" : "RGB");
        return false;
    }
    j->img->w = j->ci.output_width;
    j->img->h = j->ci.output_height;
    j->img->rgb = gr_xmalloc((size_t)(j->img->w * j->img->h * 3));
    if (cmyk) j->cmyk = gr_xmalloc((size_t)(j->img->w * 4));
    while (j->ci.output_scanline < j->ci.output_height) {
        uint8_t *rgb = j->img->rgb + (size_t)j->ci.output_scanline * (size_t)j->img->w * 3;
        JSAMPROW row = cmyk ? j->cmyk : rgb;
        if (jpeg_read_scanlines(&j->ci, &row, 1) == 1 && cmyk)
            if_cmyk_to_rgb(j->cmyk, j->img->w, j->ci.saw_Adobe_marker, rgb);
    }
    jpeg_finish_decompress(&j->ci);
    return true;
}

static bool if_decode_jpeg(FILE *fp, int64_t short_side, if_image *img, char *msg) {
    if_jpeg_job *j = gr_xcalloc(1, sizeof *j);
    j->fp = fp;
    j->img = img;
    j->short_side = short_side;
    j->ci.err = jpeg_std_error(&j->mgr);
    j->mgr.error_exit = if_jpeg_error_exit;
    j->mgr.emit_message = if_jpeg_emit;
    bool ok = if_jpeg_run(j);
    if (!ok) snprintf(msg, IF_MSG_MAX, "JPEG: %s", j->msg);
    jpeg_destroy_decompress(&j->ci);
    free(j->cmyk);
    free(j);
    return ok;
}

typedef struct if_png_job {
    png_structp png;
    png_infop info;
    png_bytep *rows;
    jmp_buf jb;
    char msg[IF_MSG_MAX - 16]; /* room for the "JPEG: " / "PNG: " prefix */
    FILE *fp;
    if_image *img;
} if_png_job;

static void if_png_error(png_structp png, png_const_charp m) {
    if_png_job *j = png_get_error_ptr(png);
    snprintf(j->msg, sizeof j->msg, "%s", m);
    longjmp(j->jb, 1);
}

static void if_png_warning(png_structp png, png_const_charp m) {
    (void)png, (void)m;
}

/* The libpng calls; returns false with j->msg set. Touches only *j. */
static bool if_png_run(if_png_job *j) {
    if (setjmp(j->jb)) return false;
    png_init_io(j->png, j->fp);
    png_set_user_limits(j->png, IF_MAX_SRC_SIDE, IF_MAX_SRC_SIDE);
    png_read_info(j->png, j->info);
    if (!if_size_ok(png_get_image_width(j->png, j->info), png_get_image_height(j->png, j->info), j->msg,
                    sizeof j->msg))
        return false;
    const int color = png_get_color_type(j->png, j->info);
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

static bool if_decode_png(FILE *fp, if_image *img, char *msg) {
    if_png_job *j = gr_xcalloc(1, sizeof *j);
    j->fp = fp;
    j->img = img;
    j->png = png_create_read_struct(PNG_LIBPNG_VER_STRING, j, if_png_error, if_png_warning);
    if (j->png) j->info = png_create_info_struct(j->png);
    bool ok = j->png && j->info && if_png_run(j);
    if (!ok) snprintf(msg, IF_MSG_MAX, "PNG: %s", j->png && j->info ? j->msg : "out of memory");
    png_destroy_read_struct(&j->png, &j->info, NULL);
    free(j->rows);
    free(j);
    return ok;
}

/* Decodes path into img, by what its first bytes say it is (not by its name). */
static bool if_decode(const char *path, int64_t short_side, if_image *img, char *msg) {
    memset(img, 0, sizeof *img);
    FILE *fp = fopen(path, "rb");
    if (!fp) {
        snprintf(msg, IF_MSG_MAX, "%s", strerror(errno));
        return false;
    }
    uint8_t sig[8] = {0};
    size_t got = fread(sig, 1, sizeof sig, fp);
    rewind(fp);
    bool ok;
    if (got >= 3 && sig[0] == 0xFF && sig[1] == 0xD8 && sig[2] == 0xFF) {
        ok = if_decode_jpeg(fp, short_side, img, msg);
    } else if (got == sizeof sig && png_sig_cmp(sig, 0, sizeof sig) == 0) {
        ok = if_decode_png(fp, img, msg);
    } else {
        char hex[3 * sizeof sig + 1] = "";
        for (size_t i = 0; i < GR_MIN(got, (size_t)4); i++) snprintf(hex + 3 * i, 4, " %02X", sig[i]);
        snprintf(msg, IF_MSG_MAX, "not a JPEG or PNG file (%s%s)", got ? "it starts with" : "it is empty", hex);
        ok = false;
    }
    fclose(fp);
    if (!ok) {
        free(img->rgb);
        img->rgb = NULL;
    }
    return ok;
}

/* ---- resize (short side R) + centre crop (S), separable ---- */
typedef struct if_taps {
    int stride;     /* taps per output position, at most */
    int *count;     /* S */
    int64_t *idx;   /* S * stride source positions */
    float *w;       /* S * stride weights, summing to 1 */
} if_taps;

static void if_taps_free(if_taps *t) {
    free(t->count);
    free(t->idx);
    free(t->w);
}

/* An axis of `in` source pixels resized to `full`, of which output o in
 * [0, S) is resized position o + off. Shrinking: the average of the source
 * interval [x, x + 1) * in / full, pixels weighted by their overlap with it.
 * Growing (or equal): bilinear at (x + 0.5) * in / full - 0.5, edges clamped. */
static void if_taps_init(if_taps *t, int64_t in, int64_t full, int64_t off, int64_t S) {
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

/* img resized so its short side is R, centre-cropped to SxS, into dst as
 * [3,S,S] planes. */
static void if_resize_crop(const if_image *img, int64_t R, int64_t S, uint8_t *dst) {
    int64_t fw, fh;
    if (img->w <= img->h) fw = R, fh = GR_MAX(llround((double)img->h * (double)R / (double)img->w), R);
    else fh = R, fw = GR_MAX(llround((double)img->w * (double)R / (double)img->h), R);
    if_taps tx, ty;
    if_taps_init(&tx, img->w, fw, (fw - S) / 2, S);
    if_taps_init(&ty, img->h, fh, (fh - S) / 2, S);
    const int64_t rw = img->w * 3;
    float *row = gr_xmalloc((size_t)rw * sizeof *row);
    for (int64_t oy = 0; oy < S; oy++) {
        memset(row, 0, (size_t)rw * sizeof *row);
        for (int k = 0; k < ty.count[oy]; k++) {
            const uint8_t *src = img->rgb + ty.idx[oy * ty.stride + k] * rw;
            const float wt = ty.w[oy * ty.stride + k];
            for (int64_t i = 0; i < rw; i++) row[i] += wt * (float)src[i];
        }
        for (int64_t ox = 0; ox < S; ox++) {
            float acc[3] = {0, 0, 0};
            for (int k = 0; k < tx.count[ox]; k++) {
                const float *p = row + tx.idx[ox * tx.stride + k] * 3, wt = tx.w[ox * tx.stride + k];
                acc[0] += wt * p[0], acc[1] += wt * p[1], acc[2] += wt * p[2];
            }
            for (int c = 0; c < 3; c++) {
                const float v = acc[c] < 0.0f ? 0.0f : acc[c] > 255.0f ? 255.0f : acc[c];
                dst[(c * S + oy) * S + ox] = (uint8_t)(v + 0.5f);
            }
        }
    }
    free(row);
    if_taps_free(&tx);
    if_taps_free(&ty);
}

/* ---- the folder scan ---- */
typedef struct if_file {
    char *path;
    int32_t label;
} if_file;

typedef struct if_scan {
    char **classes;   /* folder names, sorted */
    int64_t nclasses;
    if_file *files;   /* in class order, then name order */
    int64_t n, cap;
    int64_t skipped;
} if_scan;

static void if_scan_free(if_scan *s) {
    for (int64_t k = 0; k < s->nclasses; k++) free(s->classes[k]);
    for (int64_t i = 0; i < s->n; i++) free(s->files[i].path);
    free(s->classes);
    free(s->files);
    memset(s, 0, sizeof *s);
}

static int if_cmp_names(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static char *if_join(const char *dir, const char *name) {
    size_t len = strlen(dir) + strlen(name) + 2;
    char *p = gr_xmalloc(len);
    snprintf(p, len, "%s/%s", dir, name);
    return p;
}

/* The entries of dir other than hidden ones (counted in *hidden), sorted. */
static gr_status if_list(const char *dir, char ***names, int64_t *count, int64_t *hidden, gr_error *err) {
    *names = NULL;
    *count = 0;
    DIR *d = opendir(dir);
    if (!d) return gr_error_set(err, GR_ERR_DATA, "%s: %s", dir, strerror(errno));
    int64_t cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        if (e->d_name[0] == '.') {
            (*hidden)++;
            continue;
        }
        GR_GROW(*names, cap, *count + 1);
        (*names)[(*count)++] = gr_xstrdup(e->d_name);
    }
    closedir(d);
    if (*count) qsort(*names, (size_t)*count, sizeof **names, if_cmp_names);
    return GR_OK;
}

static void if_free_names(char **names, int64_t count) {
    for (int64_t i = 0; i < count; i++) free(names[i]);
    free(names);
}

static bool if_is_image_name(const char *name) {
    const char *dot = strrchr(name, '.');
    return dot && (strcasecmp(dot, ".jpg") == 0 || strcasecmp(dot, ".jpeg") == 0 || strcasecmp(dot, ".png") == 0);
}

/* Adds the images of class folder dir/name as label `label`. */
static gr_status if_scan_class(if_scan *s, const char *dir, const char *name, int32_t label, gr_error *err) {
    char *cdir = if_join(dir, name), **names;
    int64_t count, images = 0;
    gr_status st = if_list(cdir, &names, &count, &s->skipped, err);
    for (int64_t i = 0; i < count && st == GR_OK; i++) {
        char *path = if_join(cdir, names[i]);
        struct stat sb;
        if (!if_is_image_name(names[i]) || stat(path, &sb) != 0) {
            s->skipped++;
            free(path);
            continue;
        }
        /* an image's name on a FIFO, device or folder: refused, as every input that is not a file
         * (the decoder's fopen would block on a FIFO) */
        if ((st = gr_check_regular(path, "an image", GR_ERR_DATA, err))) {
            free(path);
            break;
        }
        GR_GROW(s->files, s->cap, s->n + 1);
        s->files[s->n++] = (if_file){path, label};
        images++;
    }
    if (st == GR_OK && images == 0)
        st = gr_error_set(err, GR_ERR_DATA, "%s: no JPEG or PNG images (*.jpg, *.jpeg, *.png) in this class folder",
                          cdir);
    if_free_names(names, count);
    free(cdir);
    return st;
}

static gr_status if_scan_dir(const char *dir, if_scan *s, gr_error *err) {
    memset(s, 0, sizeof *s);
    struct stat sb;
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return gr_error_set(err, GR_ERR_DATA, "%s: no such directory (expected one sub-folder of images per class)",
                            dir);
    char **names;
    int64_t count;
    gr_status st = if_list(dir, &names, &count, &s->skipped, err);
    s->classes = gr_xmalloc((size_t)GR_MAX(count, 1) * sizeof *s->classes);
    for (int64_t i = 0; i < count && st == GR_OK; i++) {
        char *path = if_join(dir, names[i]);
        bool is_dir = stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
        free(path);
        if (!is_dir) {
            s->skipped++;
            continue;
        }
        if (s->nclasses == INT32_MAX) {
            st = gr_error_set(err, GR_ERR_DATA, "%s: more than %d class folders", dir, INT32_MAX);
            break;
        }
        s->classes[s->nclasses] = gr_xstrdup(names[i]);
        st = if_scan_class(s, dir, names[i], (int32_t)s->nclasses, err);
        s->nclasses++;
    }
    if (st == GR_OK && s->nclasses == 0)
        st = gr_error_set(err, GR_ERR_DATA, "%s: no class sub-folders (expected %s/<class>/<image>.jpg or .png)", dir,
                          dir);
    if_free_names(names, count);
    if (st != GR_OK) if_scan_free(s);
    return st;
}

/* ---- the converter ---- */

void gr_imagefolder_report_free(gr_imagefolder_report *r) {
    for (int64_t i = 0; i < r->nbad; i++) {
        free(r->bad[i].path);
        free(r->bad[i].why);
    }
    for (int64_t i = 0; i < r->nwarnings; i++) free(r->warnings[i]);
    free(r->bad);
    free(r->warnings);
    memset(r, 0, sizeof *r);
}

/* Adds path (copied) and why (taken) to r->bad. */
static void if_report_bad(gr_imagefolder_report *r, const char *path, char *why) {
    if ((r->nbad & (r->nbad - 1)) == 0) /* 0, 1, 2, 4, ...: grow at powers of two */
        r->bad = gr_xrealloc(r->bad, (size_t)GR_MAX(2 * r->nbad, 1) * sizeof *r->bad);
    r->bad[r->nbad++] = (gr_imagefolder_bad){gr_xstrdup(path), why};
}

/* The block's working memory and where its samples go. */
typedef struct if_job {
    gr_conv_split *split;
    int64_t R, S;
    gr_on_error on_error;
    uint8_t *images;             /* block * 3 * S * S */
    int32_t *labels;             /* block */
    char **errs;                 /* block */
    int32_t *kept;               /* the labels written, in order (skip only: the split is shrunk to them) */
    gr_imagefolder_report *report;
} if_job;

/* Decodes, resizes and crops one block of files on all cores, then appends
 * it. A file that fails is the error (the first, in order) under fail; under
 * skip it is listed and the others close up. */
static gr_status if_block(if_job *jb, const if_file *files, int64_t count, gr_error *err) {
    const int64_t S = jb->S, R = jb->R, sample = 3 * S * S;
    uint8_t *const images = jb->images;
    int32_t *const labels = jb->labels;
    char **const errs = jb->errs;
    #pragma omp parallel for schedule(dynamic, 1)
    for (int64_t i = 0; i < count; i++) {
        char msg[IF_MSG_MAX];
        if_image img;
        labels[i] = files[i].label;
        errs[i] = NULL;
        if (!if_decode(files[i].path, R, &img, msg)) {
            errs[i] = gr_xstrdup(msg);
            continue;
        }
        if_resize_crop(&img, R, S, images + i * sample);
        free(img.rgb);
    }
    gr_status st = GR_OK;
    int64_t kept = 0;
    for (int64_t i = 0; i < count; i++) {
        if (!errs[i]) {
            if (kept < i) {
                memcpy(images + kept * sample, images + i * sample, (size_t)sample);
                labels[kept] = labels[i];
            }
            kept++;
        } else if (jb->on_error == GR_ON_ERROR_SKIP) {
            if_report_bad(jb->report, files[i].path, errs[i]);
            errs[i] = NULL;
        } else if (st == GR_OK) {
            st = gr_error_set(err, GR_ERR_DATA, "%s: cannot decode: %s (--on-error skip leaves such files out)",
                              files[i].path, errs[i]);
        }
        free(errs[i]);
    }
    if (st != GR_OK || kept == 0) return st;
    if (jb->kept) memcpy(jb->kept + jb->split->next, labels, (size_t)kept * sizeof *labels);
    return gr_conv_split_write(jb->split, kept, images, labels, err);
}

/* Shrinks split s, created for more samples, to the s->next written (files
 * left out under skip): the images dataset is chunked, so it is cut; labels
 * is contiguous, so it is made again from `kept`. gr_conv_split has fixed
 * sizes because every other converter knows its count up front. */
static gr_status if_split_shrink(gr_conv_split *s, const int32_t *kept, gr_error *err) {
    gr_status st = GR_OK;
    hid_t type = -1, sp = -1;
    const char *f = s->out->tmp, *g = s->name;
    const hsize_t dims[4] = {(hsize_t)s->next, (hsize_t)s->c, (hsize_t)s->h, (hsize_t)s->w};
    GR_H5_CHECK(H5Dset_extent(s->images, dims), err, "%s: %s/images: cannot shrink to %lld samples", f, g,
                (long long)s->next);
    GR_H5_CHECK(type = H5Dget_type(s->labels), err, "%s: %s/labels: cannot read its type", f, g);
    H5Dclose(s->labels);
    s->labels = -1;
    GR_H5_CHECK(H5Ldelete(s->group, "labels", H5P_DEFAULT), err, "%s: %s/labels: cannot delete", f, g);
    GR_H5_CHECK(sp = H5Screate_simple(1, dims, NULL), err, "%s: %s/labels: cannot create", f, g);
    GR_H5_CHECK(s->labels = H5Dcreate2(s->group, "labels", type, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), err,
                "%s: %s/labels: cannot create", f, g);
    GR_H5_CHECK(H5Dwrite(s->labels, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, kept), err,
                "%s: %s/labels: write failed", f, g);
    s->n = s->next;
fail:
    if (type >= 0) H5Tclose(type);
    if (sp >= 0) H5Sclose(sp);
    return st;
}

/* What the groups of one conversion share. */
typedef struct if_run {
    const gr_imagefolder_config *cfg;
    const gr_conv_out *out;
    const if_scan *scan;
    int64_t R, S;
    gr_imagefolder_report *report;
    bool two;  /* /train and /val (--val-fraction) */
} if_run;

/* Writes files[0..n) as split `name`, block by block. stats: fills mean/std
 * from what was written; else writes the given ones. */
static gr_status if_write_split(const if_run *r, const char *name, const if_file *files, int64_t n, bool stats,
                                double *mean, double *std, gr_error *err) {
    const int64_t S = r->S, nbad0 = r->report->nbad;
    gr_conv_split s;
    gr_status st = gr_conv_split_create(r->out, name, n, 3, S, S, r->scan->nclasses, stats, &s, err);
    if (st != GR_OK) return st;
    const int64_t block = gr_conv_block_samples(n, 3 * S * S);
    if_job jb = {.split = &s, .R = r->R, .S = S, .on_error = r->cfg->on_error, .report = r->report,
                 .images = gr_xmalloc((size_t)(block * 3 * S * S)),
                 .labels = gr_xmalloc((size_t)block * sizeof *jb.labels),
                 .errs = gr_xcalloc((size_t)block, sizeof *jb.errs),
                 .kept = r->cfg->on_error == GR_ON_ERROR_SKIP ? gr_xmalloc((size_t)n * sizeof *jb.kept) : NULL};
    for (int64_t first = 0; first < n && st == GR_OK; first += block)
        st = if_block(&jb, files + first, GR_MIN(block, n - first), err);
    const gr_imagefolder_bad *bad = r->report->bad + nbad0;
    if (st == GR_OK && r->report->nbad - nbad0 == n)
        st = gr_error_set(err, GR_ERR_DATA, "%s: none of the %lld images could be decoded (the first: %s: %s)%s%s%s",
                          r->cfg->dir, (long long)n, bad->path, bad->why, r->two ? "; " : "", r->two ? name : "",
                          r->two ? " would be empty" : "");
    if (st == GR_OK && r->report->nbad > nbad0) {
        if (r->out->progress) fputc('\n', stderr); /* the bar stopped short of 100% */
        st = if_split_shrink(&s, jb.kept, err);
    }
    free(jb.images);
    free(jb.labels);
    free(jb.errs);
    free(jb.kept);
    r->report->samples += s.next;
    return gr_conv_split_end(&s, st, (const char *const *)r->scan->classes, r->scan->nclasses, mean, std, err);
}

/* Whether group is "/" or "/name[/name...]" without empty, "." or ".." names. */
static bool if_group_ok(const char *group) {
    if (group[0] != '/') return false;
    if (group[1] == '\0') return true;
    for (const char *p = group; *p; ) {
        const char *name = p + 1, *end = strchr(name, '/');
        const size_t len = end ? (size_t)(end - name) : strlen(name);
        if (len == 0 || (len == 1 && name[0] == '.') || (len == 2 && name[0] == '.' && name[1] == '.')) return false;
        p = name + len;
    }
    return true;
}

static gr_status if_check_config(const gr_imagefolder_config *cfg, gr_error *err) {
    const int64_t S = cfg->size, R = cfg->short_side ? cfg->short_side : cfg->size;
    if (S < 1 || S > IF_MAX_SIDE)
        return gr_error_set(err, GR_ERR_USAGE, "data imagefolder: --size must be in [1, %d], got %lld", IF_MAX_SIDE,
                            (long long)S);
    if (R < S || R > IF_MAX_SIDE)
        return gr_error_set(err, GR_ERR_USAGE, "data imagefolder: --short-side must be in [--size %lld, %d], got %lld",
                            (long long)S, IF_MAX_SIDE, (long long)R);
    if (cfg->group && !if_group_ok(cfg->group))
        return gr_error_set(err, GR_ERR_USAGE, "data imagefolder: --group must be an absolute HDF5 path "
                                               "(\"/train\"), got \"%s\"", cfg->group);
    if (cfg->on_error != GR_ON_ERROR_FAIL && cfg->on_error != GR_ON_ERROR_SKIP)
        return gr_error_set(err, GR_ERR_USAGE, "data imagefolder: --on-error must be skip or fail");
    if (cfg->val_fraction != 0 && !(cfg->val_fraction > 0 && cfg->val_fraction < 1))
        return gr_error_set(err, GR_ERR_USAGE, "data imagefolder: --val-fraction must be in (0, 1), got %g",
                            cfg->val_fraction);
    if (cfg->val_fraction != 0 && cfg->group)
        return gr_error_set(err, GR_ERR_USAGE, "data imagefolder: --group does not apply with --val-fraction, which "
                                               "writes /train and /val");
    return GR_OK;
}

/* The files as /train's then /val's (gr_split_stratified), into lists
 * (scan->n, sharing the paths); the count of /val's. */
static gr_status if_split_files(const gr_imagefolder_config *cfg, const if_scan *scan, if_file *lists,
                                int64_t *nval, gr_error *err) {
    int32_t *labels = gr_xmalloc((size_t)GR_MAX(scan->n, 1) * sizeof *labels);
    uint8_t *val = gr_xmalloc((size_t)GR_MAX(scan->n, 1));
    for (int64_t i = 0; i < scan->n; i++) labels[i] = scan->files[i].label;
    *nval = gr_split_stratified(labels, scan->n, scan->nclasses, cfg->val_fraction, cfg->seed, val);
    int64_t t = 0, v = scan->n - *nval;
    for (int64_t i = 0; i < scan->n; i++) lists[val[i] ? v++ : t++] = scan->files[i];
    free(labels);
    free(val);
    if (*nval == 0)
        return gr_error_set(err, GR_ERR_DATA, "%s: --val-fraction %g leaves /val empty: every class folder holds a "
                            "single image, and a class of one image stays in /train", cfg->dir, cfg->val_fraction);
    return GR_OK;
}

gr_status gr_data_convert_imagefolder(const gr_imagefolder_config *cfg, const char *out, bool force, bool progress,
                                      gr_imagefolder_report *report, gr_error *err) {
    const int64_t S = cfg->size, R = cfg->short_side ? cfg->short_side : cfg->size;
    gr_imagefolder_report own = {0};
    if (!report) report = &own;
    memset(report, 0, sizeof *report);
    gr_status st = if_check_config(cfg, err);
    if (st != GR_OK) return st;
    const bool two = cfg->val_fraction > 0;
    const char *groups[2] = {two || !cfg->group ? "/train" : cfg->group, "/val"};
    gr_conv_out o;
    if ((st = gr_conv_out_begin_groups(&o, out, groups, two ? 2 : 1, force, progress, err)) != GR_OK) return st;
    if_scan scan;
    if ((st = if_scan_dir(cfg->dir, &scan, err)) != GR_OK) {
        gr_conv_out_abort(&o);
        return st;
    }
    report->skipped = scan.skipped;
    const if_run run = {cfg, &o, &scan, R, S, report, two};
    if_file *lists = two ? gr_xmalloc((size_t)scan.n * sizeof *lists) : scan.files;
    int64_t nval = 0;
    if (two) st = if_split_files(cfg, &scan, lists, &nval, err);
    double mean[3], std[3];
    if (st == GR_OK) st = if_write_split(&run, groups[0], lists, scan.n - nval, true, mean, std, err);
    const int64_t ntrain = report->samples;
    if (st == GR_OK && two) st = if_write_split(&run, "/val", lists + scan.n - nval, nval, false, mean, std, err);
    report->val_samples = report->samples - ntrain;
    if (st == GR_OK)
        gr_conv_out_classes_check(&o, two ? "/train and /val" : groups[0], (const char *const *)scan.classes,
                                  scan.nclasses, &report->warnings, &report->nwarnings, &report->warnings_cap);
    if (st == GR_OK) st = gr_conv_out_commit(&o, err);
    if (st == GR_OK && progress) {
        char counts[1100];
        if (two) snprintf(counts, sizeof counts, "/train %lld, /val %lld", (long long)ntrain,
                          (long long)report->val_samples);
        else snprintf(counts, sizeof counts, "%.1000s %lld", groups[0], (long long)ntrain);
        fprintf(stderr, "gpurun data: %s: %s samples of 3x%lldx%lld in %lld classes; mean %.2f %.2f %.2f, std %.2f "
                        "%.2f %.2f%s\n", out, counts, (long long)S, (long long)S, (long long)scan.nclasses, mean[0],
                mean[1], mean[2], std[0], std[1], std[2], two ? " (of /train)" : "");
    }
    gr_conv_out_abort(&o);
    if (two) free(lists);
    if_scan_free(&scan);
    gr_imagefolder_report_free(&own);
    return st;
}
