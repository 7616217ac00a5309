/* plot_parts.h — the parts of `gpurun plot` (tools.h), each in its own file:
 *
 *   plot_data.c    a run's series of one metric, read from its metrics.jsonl
 *                  with a small reader of flat JSON objects
 *   plot_raster.c  an RGB canvas: boxes, anti-aliased thick polylines and
 *                  markers (stroked into a coverage mask, then painted once,
 *                  so joints do not darken), text in the built-in font
 *   plot_font.c    that font: 5x7 glyphs (two descender rows), ASCII art
 *   plot_chart.c   the chart: axis ranges, 1-2-5 ticks, margins, legend
 *   plot_png.c     the PNG writer (libpng, RGB 8-bit, a private temporary + rename)
 *   plot.c         the command: arguments, runs, exit codes
 *
 * Pixel coordinates are continuous: pixel (i, j) covers [i, i+1) x [j, j+1),
 * y grows downwards. */
#ifndef GR_PLOT_PARTS_H
#define GR_PLOT_PARTS_H

#include <stdbool.h>
#include <stdint.h>

#include "../common/gr_common.h"

/* ---- metrics (plot_data.c) ---- */

typedef enum gr_plot_metric {
    GR_PLOT_LOSS,
    GR_PLOT_ACCURACY,
    GR_PLOT_LR,
    GR_PLOT_VAL_LOSS,
    GR_PLOT_SAMPLES_PER_S,
    GR_PLOT_METRIC_COUNT
} gr_plot_metric;

/* "loss", "accuracy", ... */
const char *gr_plot_metric_name(gr_plot_metric m);
/* false when name is none of them */
bool gr_plot_metric_parse(const char *name, gr_plot_metric *m);

typedef struct gr_plot_point {
    double x, y;  /* step, value */
    int64_t line; /* the line of metrics.jsonl it came from (1-based) */
} gr_plot_point;

/* One run's points, ascending in step, one per step (the last one logged:
 * after a resume a step may be logged again). */
typedef struct gr_plot_series {
    gr_plot_point *pt;
    int64_t n, cap;
} gr_plot_series;

/* Reads RUN_DIR/metrics.jsonl into *s (which it initializes): the metric's
 * finite values (|v| <= 1e300) of the lines of its kind (train; eval of the
 * val split), skipping torn or malformed lines. GR_ERR_DATA naming the path
 * when RUN_DIR is no directory or its metrics.jsonl is missing, unreadable or
 * not a regular file. */
gr_status gr_plot_series_load(const char *run_dir, gr_plot_metric m, gr_plot_series *s, gr_error *err);
void gr_plot_series_free(gr_plot_series *s);

/* ---- canvas (plot_raster.c, plot_font.c) ---- */

typedef struct gr_plot_rgb {
    uint8_t r, g, b;
} gr_plot_rgb;

typedef struct gr_plot_canvas {
    int w, h;
    uint8_t *rgb;  /* h rows of w RGB pixels */
    uint8_t *mask; /* coverage of the stroke being built, 0..255 */
    int mx0, my0, mx1, my1; /* the mask's dirty box (half-open) */
} gr_plot_canvas;

void gr_plot_canvas_init(gr_plot_canvas *c, int w, int h); /* white */
void gr_plot_canvas_free(gr_plot_canvas *c);
/* Fills the pixels of [x0, x1) x [y0, y1) (clipped to the canvas). */
void gr_plot_fill(gr_plot_canvas *c, int x0, int y0, int x1, int y1, gr_plot_rgb col);
/* A 1-pixel outline of the box [x0, x1) x [y0, y1). */
void gr_plot_outline(gr_plot_canvas *c, int x0, int y0, int x1, int y1, gr_plot_rgb col);
/* Adds to the mask a segment of the given width with round caps (a disc when
 * both ends are the same point). */
void gr_plot_stroke(gr_plot_canvas *c, double x0, double y0, double x1, double y1, double width);
/* Blends col into the canvas by the mask, inside the clip box [x0, x1) x
 * [y0, y1) only, and clears the mask. */
void gr_plot_paint(gr_plot_canvas *c, gr_plot_rgb col, int x0, int y0, int x1, int y1);

/* Text: glyphs of 5x7 pixels (rows 7-8 hold descenders) on a 6-pixel advance,
 * each pixel a scale x scale block; characters without a glyph draw as '?'. */
#define GR_PLOT_GLYPH_W 5
#define GR_PLOT_GLYPH_ROWS 9
#define GR_PLOT_CAP_H 7
#define GR_PLOT_ADVANCE 6
/* The glyph of ch (the '?' glyph when there is none): GR_PLOT_GLYPH_ROWS rows
 * of GR_PLOT_GLYPH_W characters, '#' for ink, rows separated by one space. */
const char *gr_plot_glyph(char ch);
int gr_plot_text_w(const char *s, int scale);
/* Draws s with its top-left corner (of the cap height) at (x, y). bold draws
 * it twice, one pixel apart. */
void gr_plot_text(gr_plot_canvas *c, int x, int y, const char *s, int scale, gr_plot_rgb col, bool bold);
/* The same turned 90 degrees counter-clockwise, reading upwards: the text
 * starts at (x, y) (its baseline side to the right of x) and runs to y - width. */
void gr_plot_text_up(gr_plot_canvas *c, int x, int y, const char *s, int scale, gr_plot_rgb col);

/* ---- chart (plot_chart.c) ---- */

typedef struct gr_plot_run {
    const char *label; /* its legend entry */
    const gr_plot_series *s;
} gr_plot_run;

typedef struct gr_plot_frame {
    double xlo, xhi, ylo, yhi; /* the axis ranges */
    int fx0, fy0, fx1, fy1;    /* the plot area: data map linearly onto [fx0, fx1] x [fy1, fy0] */
    int lx0, ly0, lx1, ly1;    /* the legend box */
} gr_plot_frame;

/* The colour of run i (tab10 colours; runs past 10 take them again, darker). */
gr_plot_rgb gr_plot_color(int i);
/* Draws the chart of the runs (at least one with a point) on c, and says in
 * *f where its axes and legend went. */
void gr_plot_chart(gr_plot_canvas *c, const char *metric, const gr_plot_run *runs, int nruns, gr_plot_frame *f);

/* ---- PNG (plot_png.c) ---- */

/* Writes c to path as an 8-bit RGB PNG: to a private temporary next to it
 * (common/tmpfile.h), then renamed, so a failure leaves no file (and no
 * temporary) behind; GR_ERR_CKPT (6) naming the path and the system's reason,
 * also for an existing path that is not a regular file (left as it is). */
gr_status gr_plot_png_write(const char *path, const gr_plot_canvas *c, gr_error *err);

#endif
