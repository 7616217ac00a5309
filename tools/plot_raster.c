/* plot_raster.c — the RGB canvas of `gpurun plot` (plot_parts.h): boxes,
 * thick anti-aliased strokes and text in the built-in font.
 *
 * A stroke is built up in the coverage mask (each pixel keeps the largest
 * coverage any segment gave it) and painted once, so a polyline's joints
 * are not blended twice. Coverage is 1 within width/2 of the segment, falling
 * to 0 over the next pixel. */
#include "plot_parts.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void gr_plot_canvas_init(gr_plot_canvas *c, int w, int h) {
    GR_ASSERT(w > 0 && h > 0);
    c->w = w;
    c->h = h;
    c->rgb = gr_xmalloc((size_t)w * (size_t)h * 3);
    memset(c->rgb, 255, (size_t)w * (size_t)h * 3);
    c->mask = gr_xcalloc((size_t)w * (size_t)h, 1);
    c->mx0 = w, c->my0 = h, c->mx1 = 0, c->my1 = 0;
}

void gr_plot_canvas_free(gr_plot_canvas *c) {
    free(c->rgb);
    free(c->mask);
    memset(c, 0, sizeof *c);
}

void gr_plot_fill(gr_plot_canvas *c, int x0, int y0, int x1, int y1, gr_plot_rgb col) {
    x0 = GR_MAX(x0, 0), y0 = GR_MAX(y0, 0);
    x1 = GR_MIN(x1, c->w), y1 = GR_MIN(y1, c->h);
    for (int y = y0; y < y1; y++) {
        uint8_t *p = c->rgb + ((size_t)y * (size_t)c->w + (size_t)x0) * 3;
        for (int x = x0; x < x1; x++, p += 3) p[0] = col.r, p[1] = col.g, p[2] = col.b;
    }
}

void gr_plot_outline(gr_plot_canvas *c, int x0, int y0, int x1, int y1, gr_plot_rgb col) {
    gr_plot_fill(c, x0, y0, x1, y0 + 1, col);
    gr_plot_fill(c, x0, y1 - 1, x1, y1, col);
    gr_plot_fill(c, x0, y0, x0 + 1, y1, col);
    gr_plot_fill(c, x1 - 1, y0, x1, y1, col);
}

/* ---- strokes ---- */

/* A segment (a0, b0)-(a1, b1), with what its distance function needs. */
typedef struct gr_plot_seg {
    double a0, b0, a1, b1, da, db, len2, inv_len;
} gr_plot_seg;

/* Distance from (pa, pb) to the segment: to the line in its middle, to an
 * end beyond it. */
static inline double gr_plot_seg_dist(const gr_plot_seg *g, double pa, double pb) {
    double ea = pa - g->a0, eb = pb - g->b0, u = ea * g->da + eb * g->db;
    if (u > 0 && u < g->len2) return fabs(ea * g->db - eb * g->da) * g->inv_len;
    if (u >= g->len2 && g->len2 > 0) ea = pa - g->a1, eb = pb - g->b1;
    return sqrt(ea * ea + eb * eb);
}

/* Raises the mask at (x, y), which is on the canvas, to cov. */
static inline void gr_plot_mask_put(gr_plot_canvas *c, int x, int y, double cov) {
    if (cov <= 0) return;
    uint8_t v = (uint8_t)(GR_MIN(cov, 1.0) * 255 + 0.5);
    uint8_t *m = c->mask + (size_t)y * (size_t)c->w + (size_t)x;
    if (v > *m) *m = v;
}

/* Widens the mask's dirty box by [x0, x1] x [y0, y1] (inclusive, on the canvas). */
static void gr_plot_mask_touch(gr_plot_canvas *c, int x0, int y0, int x1, int y1) {
    c->mx0 = GR_MIN(c->mx0, x0), c->mx1 = GR_MAX(c->mx1, x1 + 1);
    c->my0 = GR_MIN(c->my0, y0), c->my1 = GR_MAX(c->my1, y1 + 1);
}

/* The stroke walked along its major axis a (x, or y when swap), with the
 * pixels of the band around the line across it in b: work ~ length x width,
 * however steep. Coordinates here are (a, b); the mask is addressed (x, y). */
static void gr_plot_stroke_axis(gr_plot_canvas *c, double a0, double b0, double a1, double b1, double r,
                                bool swap) {
    if (a1 < a0) {
        double t = a0;
        a0 = a1, a1 = t, t = b0, b0 = b1, b1 = t;
    }
    double da = a1 - a0, db = b1 - b0, len = sqrt(da * da + db * db);
    gr_plot_seg g = {a0, b0, a1, b1, da, db, da * da + db * db, len > 0 ? 1 / len : 0};
    double half = (r + 1) * (da > 0 ? len / da : 1); /* the band's half-width across */
    int lim = swap ? c->h : c->w, blim = swap ? c->w : c->h;
    int i0 = GR_MAX((int)floor(a0 - r - 1), 0), i1 = GR_MIN((int)ceil(a1 + r + 1), lim - 1);
    for (int i = i0; i <= i1; i++) {
        double ca = i + 0.5, t = da > 0 ? (ca - a0) / da : 0;
        double cb = b0 + (t < 0 ? 0 : t > 1 ? 1 : t) * db;
        int j0 = GR_MAX((int)floor(cb - half), 0), j1 = GR_MIN((int)ceil(cb + half), blim - 1);
        if (j0 > j1) continue;
        if (swap) gr_plot_mask_touch(c, j0, i, j1, i);
        else gr_plot_mask_touch(c, i, j0, i, j1);
        for (int j = j0; j <= j1; j++) {
            double cov = r + 0.5 - gr_plot_seg_dist(&g, ca, j + 0.5);
            if (swap) gr_plot_mask_put(c, j, i, cov);
            else gr_plot_mask_put(c, i, j, cov);
        }
    }
}

void gr_plot_stroke(gr_plot_canvas *c, double x0, double y0, double x1, double y1, double width) {
    double r = width / 2;
    /* nothing of it can reach the canvas (this also keeps the int casts in range) */
    if (GR_MAX(x0, x1) < -r - 1 || GR_MIN(x0, x1) > c->w + r + 1 || GR_MAX(y0, y1) < -r - 1 ||
        GR_MIN(y0, y1) > c->h + r + 1)
        return;
    GR_ASSERT(fabs(x0) < 1e7 && fabs(x1) < 1e7 && fabs(y0) < 1e7 && fabs(y1) < 1e7);
    if (fabs(x1 - x0) >= fabs(y1 - y0)) gr_plot_stroke_axis(c, x0, y0, x1, y1, r, false);
    else gr_plot_stroke_axis(c, y0, x0, y1, x1, r, true);
}

void gr_plot_paint(gr_plot_canvas *c, gr_plot_rgb col, int x0, int y0, int x1, int y1) {
    int px0 = GR_MAX(x0, c->mx0), px1 = GR_MIN(x1, c->mx1);
    int py0 = GR_MAX(y0, c->my0), py1 = GR_MIN(y1, c->my1);
    const uint8_t rgb[3] = {col.r, col.g, col.b};
    for (int y = py0; y < py1; y++) {
        for (int x = px0; x < px1; x++) {
            size_t at = (size_t)y * (size_t)c->w + (size_t)x;
            int a = c->mask[at];
            if (a == 0) continue;
            uint8_t *p = c->rgb + at * 3;
            for (int k = 0; k < 3; k++) p[k] = (uint8_t)((p[k] * (255 - a) + rgb[k] * a + 127) / 255);
        }
    }
    for (int y = c->my0; y < c->my1; y++)
        memset(c->mask + (size_t)y * (size_t)c->w + (size_t)c->mx0, 0, (size_t)(c->mx1 - c->mx0));
    c->mx0 = c->w, c->my0 = c->h, c->mx1 = 0, c->my1 = 0;
}

/* ---- text ---- */

int gr_plot_text_w(const char *s, int scale) {
    size_t n = strlen(s);
    return n ? (int)n * GR_PLOT_ADVANCE * scale - scale : 0;
}

/* Whether pixel (row, col) of a glyph's rows is ink. */
static bool gr_plot_ink(const char *rows, int row, int col) {
    size_t at = (size_t)row * (GR_PLOT_GLYPH_W + 1) + (size_t)col;
    return at < strlen(rows) && rows[at] == '#';
}

void gr_plot_text(gr_plot_canvas *c, int x, int y, const char *s, int scale, gr_plot_rgb col, bool bold) {
    for (size_t i = 0; s[i]; i++) {
        const char *rows = gr_plot_glyph(s[i]);
        int gx = x + (int)i * GR_PLOT_ADVANCE * scale;
        for (int r = 0; r < GR_PLOT_GLYPH_ROWS; r++) {
            for (int k = 0; k < GR_PLOT_GLYPH_W; k++) {
                if (!gr_plot_ink(rows, r, k)) continue;
                int px = gx + k * scale, py = y + r * scale;
                gr_plot_fill(c, px, py, px + scale + (bold ? 1 : 0), py + scale, col);
            }
        }
    }
}

void gr_plot_text_up(gr_plot_canvas *c, int x, int y, const char *s, int scale, gr_plot_rgb col) {
    for (size_t i = 0; s[i]; i++) {
        const char *rows = gr_plot_glyph(s[i]);
        int gy = y - (int)i * GR_PLOT_ADVANCE * scale;
        for (int r = 0; r < GR_PLOT_GLYPH_ROWS; r++) {
            for (int k = 0; k < GR_PLOT_GLYPH_W; k++) {
                if (!gr_plot_ink(rows, r, k)) continue;
                int px = x + r * scale, py = gy - (k + 1) * scale;
                gr_plot_fill(c, px, py, px + scale, py + scale, col);
            }
        }
    }
}
