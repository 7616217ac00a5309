/* plot_png.c — the PNG writer of `gpurun plot` (plot_parts.h): libpng, 8-bit
 * RGB, written to a private temporary next to OUT (common/tmpfile.h), flushed
 * and synced, then renamed over OUT; on any failure the temporary is removed
 * and OUT is left as it was. An existing OUT that is not a regular file (a
 * FIFO, a device, a directory) is refused before anything is written. */
#include "plot_parts.h"
#include "../common/tmpfile.h"

#include <errno.h>
#include <png.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct gr_plot_png_job {
    png_structp png;
    png_infop info;
    jmp_buf jb;
    FILE *fp;
    const gr_plot_canvas *c;
    int sys_errno; /* set when the failure was the system's (a short write) */
    char msg[256];
} gr_plot_png_job;

static void gr_plot_png_error(png_structp png, png_const_charp m) {
    gr_plot_png_job *j = png_get_error_ptr(png);
    snprintf(j->msg, sizeof j->msg, "%s", m);
    longjmp(j->jb, 1);
}

static void gr_plot_png_warning(png_structp png, png_const_charp m) {
    (void)png, (void)m;
}

static void gr_plot_png_out(png_structp png, png_bytep data, size_t n) {
    gr_plot_png_job *j = png_get_io_ptr(png);
    errno = 0;
    if (fwrite(data, 1, n, j->fp) != n) {
        j->sys_errno = errno ? errno : EIO;
        png_error(png, strerror(j->sys_errno));
    }
}

static void gr_plot_png_flush(png_structp png) {
    (void)png; /* the file is flushed and synced once, at the end */
}

/* The libpng calls; false with j->msg set. Touches only *j. */
static bool gr_plot_png_run(gr_plot_png_job *j) {
    if (setjmp(j->jb)) return false;
    png_set_write_fn(j->png, j, gr_plot_png_out, gr_plot_png_flush);
    png_set_IHDR(j->png, j->info, (png_uint_32)j->c->w, (png_uint_32)j->c->h, 8, PNG_COLOR_TYPE_RGB,
                 PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    png_write_info(j->png, j->info);
    for (int y = 0; y < j->c->h; y++) png_write_row(j->png, j->c->rgb + (size_t)y * (size_t)j->c->w * 3);
    png_write_end(j->png, j->info);
    return true;
}

/* Encodes c into fp; false with msg (the system's reason where it was one). */
static bool gr_plot_png_encode(FILE *fp, const gr_plot_canvas *c, char *msg, size_t cap) {
    gr_plot_png_job *j = gr_xcalloc(1, sizeof *j);
    j->fp = fp;
    j->c = c;
    j->png = png_create_write_struct(PNG_LIBPNG_VER_STRING, j, gr_plot_png_error, gr_plot_png_warning);
    if (j->png) j->info = png_create_info_struct(j->png);
    bool ok = j->png && j->info && gr_plot_png_run(j);
    if (!ok) snprintf(msg, cap, "%s", j->png && j->info ? j->msg : "libpng: out of memory");
    png_destroy_write_struct(&j->png, &j->info);
    free(j);
    return ok;
}

/* Encodes c into fp (NULL: the reason in errno) and closes it; false with
 * msg. */
static bool gr_plot_png_file(FILE *fp, const gr_plot_canvas *c, char *msg, size_t cap) {
    if (!fp) {
        snprintf(msg, cap, "%s", strerror(errno));
        return false;
    }
    bool ok = gr_plot_png_encode(fp, c, msg, cap);
    if (ok && fflush(fp) != 0) {
        snprintf(msg, cap, "%s", strerror(errno));
        ok = false;
    }
    if (fclose(fp) != 0 && ok) {
        snprintf(msg, cap, "%s", strerror(errno));
        ok = false;
    }
    return ok;
}

gr_status gr_plot_png_write(const char *path, const gr_plot_canvas *c, gr_error *err) {
    gr_status st = gr_check_regular(path, "the output file", GR_ERR_CKPT, err);
    gr_tmpfile tf;
    if (st) return st;
    gr_tmpfile_sweep(path, stderr); /* an interrupted plot's temporary (tmpfile.h, Leftovers) */
    if ((st = gr_tmpfile_create_locked(&tf, path, GR_ERR_CKPT, err))) return st;
    char msg[256];
    if (!gr_plot_png_file(gr_tmpfile_fdopen(&tf, "wb"), c, msg, sizeof msg))
        st = gr_error_set(err, GR_ERR_CKPT, "%s: cannot write: %s", tf.tmp, msg);
    else
        st = gr_tmpfile_commit(&tf, false, GR_ERR_CKPT, err);
    gr_tmpfile_abort(&tf);
    return st;
}
