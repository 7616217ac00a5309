/* plot_chart.c — the chart of `gpurun plot` (plot_parts.h): axis ranges from
 * the data (x padded 2%, from 0 when the first step is near it; y padded 5%),
 * ticks at 1-2-5 steps spaced so their labels do not collide, margins sized
 * to the labels, one curve per run, and a legend in the corner of the plot
 * area that hides the fewest curve pixels.
 *
 * Text (and line width) scale s = min(W / 400, H / 250) within 1..4: 1 below
 * 800x500, 2 at the default size, 4 from 1600x1000. */
#include "plot_parts.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const gr_plot_rgb gr_plot_ink = {0, 0, 0};
static const gr_plot_rgb gr_plot_grid = {228, 228, 228};
static const gr_plot_rgb gr_plot_edge = {64, 64, 64};
static const gr_plot_rgb gr_plot_white = {255, 255, 255};

/* matplotlib's tab10 */
static const gr_plot_rgb gr_plot_palette[10] = {
    {31, 119, 180}, {255, 127, 14}, {44, 160, 44},  {214, 39, 40},  {148, 103, 189},
    {140, 86, 75},  {227, 119, 194}, {127, 127, 127}, {188, 189, 34}, {23, 190, 207},
};

gr_plot_rgb gr_plot_color(int i) {
    gr_plot_rgb c = gr_plot_palette[i % 10];
    int round = i / 10, keep = round == 0 ? 10 : round == 1 ? 6 : 3; /* then darker: 60%, 30% */
    return (gr_plot_rgb){(uint8_t)(c.r * keep / 10), (uint8_t)(c.g * keep / 10), (uint8_t)(c.b * keep / 10)};
}

/* ---- axes ---- */

typedef struct gr_plot_axis {
    double lo, hi, step;
    bool integer;  /* ticks at whole numbers only (steps) */
    int decimals;  /* labels "%.*f"; -1: "%.*e" with exp_digits */
    int exp_digits;
} gr_plot_axis;

/* The smallest 1, 2 or 5 x 10^k that is >= v (v > 0). */
static double gr_plot_nice(double v) {
    double p = pow(10, floor(log10(v)));
    double m = v / p;
    return (m <= 1 + 1e-9 ? 1 : m <= 2 + 1e-9 ? 2 : m <= 5 + 1e-9 ? 5 : 10) * p;
}

/* lo..hi (lo <= hi) padded by frac of the span on both sides. A span too
 * small to tick (zero, or under 1e-9 of the values: ticks k * step must stay
 * exact integers k in a double) opens to +-half around its middle. */
static void gr_plot_axis_range(gr_plot_axis *ax, double lo, double hi, double frac, double half) {
    double span = hi - lo, big = GR_MAX(fabs(lo), fabs(hi));
    if (span > big * 1e-9 && span > 1e-290) {
        ax->lo = lo - frac * span;
        ax->hi = hi + frac * span;
    } else {
        ax->lo = lo + span / 2 - half;
        ax->hi = lo + span / 2 + half;
    }
}

static void gr_plot_axis_set_step(gr_plot_axis *ax, double step) {
    ax->step = step;
    double big = GR_MAX(fabs(ax->lo), fabs(ax->hi));
    int e = (int)floor(log10(step) + 1e-9);
    ax->decimals = GR_MAX(0, -e);
    ax->exp_digits = 0;
    if (ax->decimals > 5 || big >= 1e7) {
        ax->decimals = -1;
        ax->exp_digits = GR_MIN(GR_MAX((int)floor(log10(big)) - e, 0), 8);
    }
}

/* The ticks are k * step for k in [*k0, *k1]. */
static void gr_plot_ticks(const gr_plot_axis *ax, double *k0, double *k1) {
    *k0 = ceil(ax->lo / ax->step - 1e-9);
    *k1 = floor(ax->hi / ax->step + 1e-9);
}

static void gr_plot_tick_label(const gr_plot_axis *ax, double k, char *buf, size_t cap) {
    double v = k == 0 ? 0.0 : k * ax->step;
    if (ax->decimals >= 0) snprintf(buf, cap, "%.*f", ax->decimals, v);
    else snprintf(buf, cap, "%.*e", ax->exp_digits, v);
}

static int gr_plot_labels_w(const gr_plot_axis *ax, int s) {
    double k0, k1;
    int w = 0;
    char buf[64];
    gr_plot_ticks(ax, &k0, &k1);
    for (double k = k0; k <= k1; k++) {
        gr_plot_tick_label(ax, k, buf, sizeof buf);
        w = GR_MAX(w, gr_plot_text_w(buf, s));
    }
    return w;
}

/* The finest 1-2-5 step whose ticks are far enough apart on px_len pixels for
 * their labels (side by side when horizontal, stacked when not). */
static void gr_plot_axis_fit(gr_plot_axis *ax, double px_len, int s, bool horizontal) {
    double span = ax->hi - ax->lo;
    double step = gr_plot_nice(span / 12);
    if (ax->integer && step < 1) step = 1;
    for (;;) {
        gr_plot_axis_set_step(ax, step);
        double need = horizontal ? gr_plot_labels_w(ax, s) + 3 * GR_PLOT_ADVANCE * s : (GR_PLOT_CAP_H + 7) * s;
        if (step / span * px_len >= need || step >= span / 2) return;
        step = gr_plot_nice(step * 1.5);
    }
}

static double gr_plot_px(const gr_plot_frame *f, double x) {
    return f->fx0 + (x - f->xlo) / (f->xhi - f->xlo) * (f->fx1 - f->fx0);
}

static double gr_plot_py(const gr_plot_frame *f, double y) {
    return f->fy1 - (y - f->ylo) / (f->yhi - f->ylo) * (f->fy1 - f->fy0);
}

/* ---- layout ---- */

typedef struct gr_plot_layout {
    int s;               /* text scale */
    gr_plot_axis x, y;
    gr_plot_frame *f;
} gr_plot_layout;

static void gr_plot_data_range(const gr_plot_run *runs, int nruns, double r[4]) {
    r[0] = r[2] = INFINITY, r[1] = r[3] = -INFINITY;
    for (int i = 0; i < nruns; i++) {
        for (int64_t k = 0; k < runs[i].s->n; k++) {
            const gr_plot_point *p = &runs[i].s->pt[k];
            r[0] = GR_MIN(r[0], p->x), r[1] = GR_MAX(r[1], p->x);
            r[2] = GR_MIN(r[2], p->y), r[3] = GR_MAX(r[3], p->y);
        }
    }
    GR_ASSERT(r[0] <= r[1] && r[2] <= r[3]); /* the caller checked there is a point */
}

static void gr_plot_layout_init(gr_plot_layout *L, const gr_plot_canvas *c, const gr_plot_run *runs, int nruns) {
    double r[4];
    gr_plot_data_range(runs, nruns, r);
    if (r[0] >= 0 && r[0] <= 0.1 * (r[1] - r[0])) r[0] = 0;
    gr_plot_axis_range(&L->x, r[0], r[1], 0.02, GR_MAX(1.0, r[1] * 0.05));
    double ya = GR_MAX(fabs(r[2]), fabs(r[3]));
    gr_plot_axis_range(&L->y, r[2], r[3], 0.05, ya > 1e-290 ? ya * 0.1 : 1.0);
    L->x.integer = true;
    L->s = GR_MAX(1, GR_MIN(4, GR_MIN(c->w / 400, c->h / 250)));
    int s = L->s, tick = 4 * s;
    gr_plot_frame *f = L->f;
    f->fy0 = 22 * s;
    f->fy1 = c->h - (35 * s + 1);
    gr_plot_axis_fit(&L->y, f->fy1 - f->fy0, s, false);
    f->fx0 = 5 * s + GR_PLOT_GLYPH_ROWS * s + 6 * s + gr_plot_labels_w(&L->y, s) + 3 * s + tick + 1;
    gr_plot_axis_fit(&L->x, c->w - f->fx0 - 20 * s, s, true);
    f->fx1 = c->w - GR_MAX(10 * s, (gr_plot_labels_w(&L->x, s) + 1) / 2 + 4 * s);
    f->xlo = L->x.lo, f->xhi = L->x.hi, f->ylo = L->y.lo, f->yhi = L->y.hi;
}

/* ---- axes drawn ---- */

static void gr_plot_draw_grid(gr_plot_canvas *c, const gr_plot_layout *L) {
    const gr_plot_frame *f = L->f;
    double k0, k1;
    gr_plot_ticks(&L->x, &k0, &k1);
    for (double k = k0; k <= k1; k++) {
        int px = (int)floor(gr_plot_px(f, k * L->x.step));
        gr_plot_fill(c, px, f->fy0, px + 1, f->fy1, gr_plot_grid);
    }
    gr_plot_ticks(&L->y, &k0, &k1);
    for (double k = k0; k <= k1; k++) {
        int py = (int)floor(gr_plot_py(f, k * L->y.step));
        gr_plot_fill(c, f->fx0, py, f->fx1, py + 1, gr_plot_grid);
    }
}

static void gr_plot_draw_axes(gr_plot_canvas *c, const gr_plot_layout *L, const char *metric) {
    const gr_plot_frame *f = L->f;
    int s = L->s, tick = 4 * s, tw = GR_MAX(1, s / 2);
    char buf[64];
    double k0, k1;
    for (int t = 0; t < tw; t++)
        gr_plot_outline(c, f->fx0 - 1 - t, f->fy0 - 1 - t, f->fx1 + 1 + t, f->fy1 + 1 + t, gr_plot_ink);
    gr_plot_ticks(&L->x, &k0, &k1);
    for (double k = k0; k <= k1; k++) {
        int px = (int)floor(gr_plot_px(f, k * L->x.step));
        gr_plot_fill(c, px, f->fy1 + 1, px + tw, f->fy1 + 1 + tick, gr_plot_ink);
        gr_plot_tick_label(&L->x, k, buf, sizeof buf);
        gr_plot_text(c, px - gr_plot_text_w(buf, s) / 2, f->fy1 + 1 + tick + 3 * s, buf, s, gr_plot_ink, false);
    }
    gr_plot_ticks(&L->y, &k0, &k1);
    for (double k = k0; k <= k1; k++) {
        int py = (int)floor(gr_plot_py(f, k * L->y.step));
        gr_plot_fill(c, f->fx0 - 1 - tick, py, f->fx0 - 1, py + tw, gr_plot_ink);
        gr_plot_tick_label(&L->y, k, buf, sizeof buf);
        int x = f->fx0 - 1 - tick - 3 * s - gr_plot_text_w(buf, s);
        gr_plot_text(c, x, py - GR_PLOT_CAP_H * s / 2, buf, s, gr_plot_ink, false);
    }
    int xt = (f->fx0 + f->fx1) / 2;
    gr_plot_text(c, xt - gr_plot_text_w("step", s) / 2, f->fy1 + 1 + tick + 3 * s + 9 * s + 5 * s, "step", s,
                 gr_plot_ink, false);
    gr_plot_text(c, xt - gr_plot_text_w(metric, s) / 2, 6 * s, metric, s, gr_plot_ink, true);
    gr_plot_text_up(c, 5 * s, (f->fy0 + f->fy1) / 2 + gr_plot_text_w(metric, s) / 2, metric, s, gr_plot_ink);
}

/* ---- curves ---- */

/* A run's curve as segments in pixels. The points that fall in one pixel
 * column are drawn as one vertical segment over their range (at the column's
 * mean x), joined to the next column's first point from its last: what the
 * line through all of them shows there, so 100,000 steps cost what two
 * segments a column do. */
typedef struct gr_plot_path {
    double (*seg)[4]; /* x0, y0, x1, y1 */
    int64_t n;
} gr_plot_path;

static void gr_plot_path_add(gr_plot_path *p, double x0, double y0, double x1, double y1) {
    double *q = p->seg[p->n++];
    q[0] = x0, q[1] = y0, q[2] = x1, q[3] = y1;
}

/* The points [a, b) of one column: the vertical segment, when they are more
 * than one or the only ones; then the join to the next column. */
static void gr_plot_path_column(gr_plot_path *p, const gr_plot_frame *f, const gr_plot_series *sr, int64_t a,
                                int64_t b) {
    double lo = INFINITY, hi = -INFINITY, xs = 0;
    for (int64_t k = a; k < b; k++) {
        double y = gr_plot_py(f, sr->pt[k].y);
        lo = GR_MIN(lo, y), hi = GR_MAX(hi, y), xs += gr_plot_px(f, sr->pt[k].x);
    }
    if (b - a > 1 || (a == 0 && b == sr->n)) gr_plot_path_add(p, xs / (double)(b - a), lo, xs / (double)(b - a), hi);
    if (b < sr->n)
        gr_plot_path_add(p, gr_plot_px(f, sr->pt[b - 1].x), gr_plot_py(f, sr->pt[b - 1].y), gr_plot_px(f, sr->pt[b].x),
                         gr_plot_py(f, sr->pt[b].y));
}

static void gr_plot_path_build(gr_plot_path *p, const gr_plot_frame *f, const gr_plot_series *sr) {
    p->seg = gr_xmalloc((size_t)GR_MAX(2 * sr->n, 1) * sizeof *p->seg);
    p->n = 0;
    for (int64_t a = 0, b; a < sr->n; a = b) {
        double col = floor(gr_plot_px(f, sr->pt[a].x));
        for (b = a + 1; b < sr->n && floor(gr_plot_px(f, sr->pt[b].x)) == col; b++) continue;
        gr_plot_path_column(p, f, sr, a, b);
    }
}

static void gr_plot_path_free(gr_plot_path *p) {
    free(p->seg);
}

static double gr_plot_line_w(int s) {
    return 1.0 + s;
}

/* The curve (markers at the points when there are 20 or fewer; a bigger one
 * for a single point), clipped to the plot area. */
static void gr_plot_draw_run(gr_plot_canvas *c, const gr_plot_layout *L, const gr_plot_path *p,
                             const gr_plot_series *sr, gr_plot_rgb col) {
    const gr_plot_frame *f = L->f;
    double w = gr_plot_line_w(L->s);
    for (int64_t k = 0; k < p->n; k++) gr_plot_stroke(c, p->seg[k][0], p->seg[k][1], p->seg[k][2], p->seg[k][3], w);
    double mark = sr->n == 1 ? 4.0 * L->s + 2 : sr->n <= 20 ? w + 2.0 * L->s : 0;
    for (int64_t k = 0; mark > 0 && k < sr->n; k++) {
        double x = gr_plot_px(f, sr->pt[k].x), y = gr_plot_py(f, sr->pt[k].y);
        gr_plot_stroke(c, x, y, x, y, mark);
    }
    gr_plot_paint(c, col, f->fx0, f->fy0, f->fx1, f->fy1);
}

/* ---- legend ---- */

typedef struct gr_plot_legend {
    int shown;   /* runs listed; when fewer than nruns a "+N more" row follows */
    int rows, chars; /* rows, and the most characters of a label */
    int w, h, pad, row_h, swatch;
} gr_plot_legend;

static void gr_plot_legend_size(gr_plot_legend *g, const gr_plot_layout *L, const gr_plot_run *runs, int nruns) {
    const gr_plot_frame *f = L->f;
    int s = L->s;
    g->pad = 5 * s, g->row_h = 11 * s, g->swatch = 16 * s;
    int fixed = 2 * g->pad + g->swatch + 5 * s;
    g->chars = GR_MAX(4, ((f->fx1 - f->fx0) * 6 / 10 - fixed + s) / (GR_PLOT_ADVANCE * s));
    int fit = ((f->fy1 - f->fy0) - 12 * s - 2 * g->pad + 2 * s) / g->row_h;
    g->shown = nruns <= fit ? nruns : GR_MAX(fit - 1, 0);
    g->rows = g->shown + (g->shown < nruns ? 1 : 0);
    int longest = 0;
    for (int i = 0; i < g->shown; i++) longest = GR_MAX(longest, (int)strlen(runs[i].label) + (runs[i].s->n ? 0 : 12));
    longest = GR_MAX(GR_MIN(longest, g->chars), 4);
    g->w = fixed + longest * GR_PLOT_ADVANCE * s - s;
    g->h = 2 * g->pad + g->rows * g->row_h - 2 * s;
}

/* How many sample points of the curves (every ~2 pixels) fall in the box. */
static int64_t gr_plot_hidden(const gr_plot_path *paths, int nruns, const int b[4]) {
    int64_t hits = 0;
    for (int i = 0; i < nruns; i++) {
        const gr_plot_path *p = &paths[i];
        for (int64_t k = 0; k < p->n; k++) {
            double x0 = p->seg[k][0], y0 = p->seg[k][1], x1 = p->seg[k][2], y1 = p->seg[k][3];
            int m = (int)(hypot(x1 - x0, y1 - y0) / 2) + 1;
            for (int j = 0; j <= m; j++) {
                double x = x0 + (x1 - x0) * j / m, y = y0 + (y1 - y0) * j / m;
                hits += x >= b[0] && x < b[2] && y >= b[1] && y < b[3];
            }
        }
    }
    return hits;
}

/* The legend's box: top right, top left, bottom right or bottom left of the
 * plot area, whichever hides the fewest curve points (the first on a tie). */
static void gr_plot_legend_place(const gr_plot_legend *g, const gr_plot_layout *L, const gr_plot_path *paths,
                                 int nruns) {
    gr_plot_frame *f = L->f;
    int m = 6 * L->s;
    int xs[2] = {f->fx1 - m - g->w, f->fx0 + m}, ys[2] = {f->fy0 + m, f->fy1 - m - g->h};
    int64_t best = -1;
    for (int corner = 0; corner < 4; corner++) {
        int b[4] = {xs[corner % 2], ys[corner / 2], xs[corner % 2] + g->w, ys[corner / 2] + g->h};
        int64_t n = gr_plot_hidden(paths, nruns, b);
        if (best < 0 || n < best) best = n, f->lx0 = b[0], f->ly0 = b[1], f->lx1 = b[2], f->ly1 = b[3];
    }
}

/* label, cut to its last chars characters behind ".." */
static void gr_plot_legend_label(const gr_plot_run *r, int chars, char *buf, size_t cap) {
    char full[1200];
    snprintf(full, sizeof full, "%s%s", r->label, r->s->n ? "" : " (no values)");
    size_t n = strlen(full);
    if (n <= (size_t)chars) snprintf(buf, cap, "%s", full);
    else snprintf(buf, cap, "..%s", full + n - (size_t)(chars - 2));
}

static void gr_plot_draw_legend(gr_plot_canvas *c, const gr_plot_layout *L, const gr_plot_run *runs,
                                const gr_plot_path *paths, int nruns) {
    gr_plot_legend g;
    gr_plot_legend_size(&g, L, runs, nruns);
    gr_plot_legend_place(&g, L, paths, nruns);
    const gr_plot_frame *f = L->f;
    int s = L->s;
    gr_plot_fill(c, f->lx0, f->ly0, f->lx1, f->ly1, gr_plot_white);
    gr_plot_outline(c, f->lx0, f->ly0, f->lx1, f->ly1, gr_plot_edge);
    char buf[1200];
    for (int i = 0; i < g.rows; i++) {
        int y = f->ly0 + g.pad + i * g.row_h, x = f->lx0 + g.pad;
        if (i == g.shown) {
            snprintf(buf, sizeof buf, "+%d more", nruns - g.shown);
            gr_plot_text(c, x, y, buf, s, gr_plot_ink, false);
            break;
        }
        double cy = y + GR_PLOT_CAP_H * s / 2.0;
        gr_plot_stroke(c, x, cy, x + g.swatch, cy, gr_plot_line_w(s) + s);
        gr_plot_paint(c, gr_plot_color(i), f->lx0 + 1, f->ly0 + 1, f->lx1 - 1, f->ly1 - 1);
        gr_plot_legend_label(&runs[i], g.chars, buf, sizeof buf);
        gr_plot_text(c, x + g.swatch + 5 * s, y, buf, s, gr_plot_ink, false);
    }
}

void gr_plot_chart(gr_plot_canvas *c, const char *metric, const gr_plot_run *runs, int nruns, gr_plot_frame *f) {
    gr_plot_layout L = {.f = f};
    memset(f, 0, sizeof *f);
    gr_plot_layout_init(&L, c, runs, nruns);
    gr_plot_path *paths = gr_xcalloc((size_t)nruns, sizeof *paths);
    for (int i = 0; i < nruns; i++) gr_plot_path_build(&paths[i], f, runs[i].s);
    gr_plot_draw_grid(c, &L);
    for (int i = 0; i < nruns; i++) gr_plot_draw_run(c, &L, &paths[i], runs[i].s, gr_plot_color(i));
    gr_plot_draw_axes(c, &L, metric);
    gr_plot_draw_legend(c, &L, runs, paths, nruns);
    for (int i = 0; i < nruns; i++) gr_plot_path_free(&paths[i]);
    free(paths);
}
