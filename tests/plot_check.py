#!/usr/bin/env python3
"""plot_check.py — the checks tests/e2e_plot.sh makes on the PNGs of `gpurun plot`, by their
pixels. INFO is a file holding the line the plot printed on stdout (tools/plot.c):
    plot: x XLO..XHI, y YLO..YHI, N runs, WxH, frame X0,Y0 X1,Y1, legend X0,Y0 X1,Y1; wrote OUT
which gives the axis ranges and the plot area, so a (step, value) maps to a pixel as the plot
maps it. Run i is drawn in tab10 colour i. A RUN argument is METRICS.jsonl:METRIC; its points
are read here independently (json.loads; torn lines skipped; the last value of a step wins).
  size PNG W H                   an 8-bit RGB PNG of W x H (IHDR read here, CRCs checked)
  curves PNG INFO RUN... [--min K] [--absent I:STEP:VALUE]...
                                 at every point of every run (outside the legend and away from
                                 later-drawn runs) the run's colour lies within 3 px; where the
                                 point mirrored about the plot's middle is far from the run's
                                 curve it does not; no other run's colour near a point far from
                                 that run's curve; at least K points checked a run (default 5);
                                 --absent: run I's colour is not at (STEP, VALUE)
  range INFO RUN...              the y range holds the runs' values and no more than 25% besides;
                                 the x range holds their steps
  legend PNG INFO N              the legend box holds a swatch of each of the N runs' colours,
                                 in order from the top
  axes PNG INFO                  frame lines, and ink (tick labels, titles) left of, below and
                                 above the plot area
  down PNG INFO I STEP...        run I's curve is lower at each STEP than at the one before
  marker PNG INFO I STEP VALUE   a marker (a disc of 20+ pixels) of run I's colour at the point
The PNG is read with PIL where it is installed (PLOT_CHECK_NO_PIL=1: never), else decoded here
(zlib + struct, filters 0-4).
"""
import json, math, os, re, struct, sys, zlib

TAB10 = [(31, 119, 180), (255, 127, 14), (44, 160, 44), (214, 39, 40), (148, 103, 189),
         (140, 86, 75), (227, 119, 194), (127, 127, 127), (188, 189, 34), (23, 190, 207)]
TOL = 40  # max channel difference to count as a run's colour (anti-aliased edges aside)


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


# ---- PNG ----

def chunks(path):
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        fail(f"{path}: not a PNG (signature {data[:8]!r})")
    pos = 8
    while pos + 12 <= len(data):
        n, typ = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        (crc,) = struct.unpack(">I", data[pos + 8 + n:pos + 12 + n])
        if zlib.crc32(typ + body) != crc:
            fail(f"{path}: chunk {typ!r} has a bad CRC")
        yield typ, body
        pos += 12 + n


def ihdr(path):
    for typ, body in chunks(path):
        if typ == b"IHDR":
            return struct.unpack(">IIBBBBB", body)
    fail(f"{path}: no IHDR")


def unfilter(raw, w, h):
    stride, out, prev = w * 3, bytearray(), bytearray(w * 3)
    for y in range(h):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - 3] if i >= 3 else 0
            b = prev[i]
            c = prev[i - 3] if i >= 3 else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + ((a + b) >> 1)) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
            elif f != 0:
                fail(f"row {y}: filter type {f}")
        out += line
        prev = line
    return bytes(out)


class Image:
    def __init__(self, path):
        w, h, depth, ctype, _, _, interlace = ihdr(path)
        if depth != 8 or ctype != 2:
            fail(f"{path}: bit depth {depth}, colour type {ctype}; expected 8-bit RGB (2)")
        self.w, self.h = w, h
        self.px = None
        if not os.environ.get("PLOT_CHECK_NO_PIL"):
            try:
                from PIL import Image as PImage
                self.px = PImage.open(path).convert("RGB").tobytes()
            except ImportError:
                pass
        if self.px is None:
            if interlace:
                fail(f"{path}: interlaced")
            idat = b"".join(body for typ, body in chunks(path) if typ == b"IDAT")
            self.px = unfilter(zlib.decompress(idat), w, h)

    def get(self, x, y):
        if x < 0 or y < 0 or x >= self.w or y >= self.h:
            return None
        i = (y * self.w + x) * 3
        return tuple(self.px[i:i + 3])

    def near(self, x, y, col, r=3):
        """whether a pixel of colour col is within r (Chebyshev) of pixel (x, y)"""
        for j in range(y - r, y + r + 1):
            for i in range(x - r, x + r + 1):
                p = self.get(i, j)
                if p and max(abs(p[k] - col[k]) for k in range(3)) <= TOL:
                    return True
        return False

    def count(self, x0, y0, x1, y1, col):
        return [(i, j) for j in range(y0, y1) for i in range(x0, x1)
                if (p := self.get(i, j)) and max(abs(p[k] - col[k]) for k in range(3)) <= TOL]


# ---- the plot's own account, and the runs' points ----

class Info:
    def __init__(self, path):
        line = open(path).read().strip().splitlines()[-1]
        num = r"(-?[0-9.]+(?:e[-+]?[0-9]+)?)"
        m = re.match(rf"plot: x {num}\.\.{num}, y {num}\.\.{num}, (\d+) runs, (\d+)x(\d+), "
                     rf"frame (\d+),(\d+) (\d+),(\d+), legend (\d+),(\d+) (\d+),(\d+); wrote ", line)
        if not m:
            fail(f"the plot's line does not read as documented: {line!r}")
        g = m.groups()
        self.xlo, self.xhi, self.ylo, self.yhi = map(float, g[:4])
        self.nruns, self.w, self.h, self.fx0, self.fy0, self.fx1, self.fy1, self.lx0, self.ly0, self.lx1, \
            self.ly1 = map(int, g[4:])

    def pixel(self, x, y):
        px = self.fx0 + (x - self.xlo) / (self.xhi - self.xlo) * (self.fx1 - self.fx0)
        py = self.fy1 - (y - self.ylo) / (self.yhi - self.ylo) * (self.fy1 - self.fy0)
        return px, py

    def in_legend(self, px, py, margin=5):
        return self.lx0 - margin <= px < self.lx1 + margin and self.ly0 - margin <= py < self.ly1 + margin

    def inside(self, px, py):
        return self.fx0 <= px < self.fx1 and self.fy0 <= py < self.fy1


KINDS = {"loss": ("train", "loss"), "lr": ("train", "lr"), "samples_per_s": ("train", "samples_per_s"),
         "accuracy": ("eval", "accuracy"), "val_loss": ("eval", "loss")}


def points(spec):
    path, metric = spec.rsplit(":", 1)
    kind, key = KINDS[metric]
    pts = {}
    for line in open(path, errors="replace"):
        try:
            d = json.loads(line)
        except ValueError:
            continue
        if not isinstance(d, dict) or d.get("kind") != kind or (kind == "eval" and d.get("split", "val") != "val"):
            continue
        s, v = d.get("step"), d.get(key)
        if isinstance(s, int) and isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
            pts[s] = float(v)
    return sorted(pts.items())


def seg_dist(p, a, b):
    dx, dy = b[0] - a[0], b[1] - a[1]
    l2 = dx * dx + dy * dy
    t = 0 if l2 == 0 else max(0, min(1, ((p[0] - a[0]) * dx + (p[1] - a[1]) * dy) / l2))
    return math.hypot(a[0] + t * dx - p[0], a[1] + t * dy - p[1])


def curve_dist(p, poly):
    if len(poly) == 1:
        return math.hypot(p[0] - poly[0][0], p[1] - poly[0][1])
    return min(seg_dist(p, poly[k - 1], poly[k]) for k in range(1, len(poly)))


# ---- the checks ----

def check_size(png, w, h):
    W, H, depth, ctype, _, _, _ = ihdr(png)
    if (W, H, depth, ctype) != (int(w), int(h), 8, 2):
        fail(f"{png}: {W}x{H}, depth {depth}, colour type {ctype}; expected {w}x{h}, 8-bit RGB")
    Image(png)  # decodes
    print(f"{png}: {W}x{H} 8-bit RGB")


def check_curves(png, info, runs, least, absent):
    im, f = Image(png), Info(info)
    polys = [[f.pixel(x, y) for x, y in points(r)] for r in runs]
    for i, poly in enumerate(polys):
        col, checked = TAB10[i], 0
        for p in poly:
            if f.in_legend(*p) or any(curve_dist(p, q) < 8 for q in polys[i + 1:] if q):
                continue
            if not im.near(int(p[0]), int(p[1]), col):
                fail(f"run {i} ({runs[i]}): no pixel of its colour {col} near {p} (its point there)")
            for j, q in enumerate(polys):
                if j != i and q and curve_dist(p, q) > 15 and im.near(int(p[0]), int(p[1]), TAB10[j]):
                    fail(f"run {j}'s colour near {p}, a point of run {i} far from run {j}'s curve")
            m = (p[0], f.fy0 + f.fy1 - p[1])
            if curve_dist(m, poly) > 15 and not f.in_legend(*m) and im.near(int(m[0]), int(m[1]), col):
                fail(f"run {i}'s colour at {m}, far from its curve (the mirror of its point {p})")
            checked += 1
        if checked < min(least, len(poly)):
            fail(f"run {i}: only {checked} of its {len(poly)} points could be checked")
        print(f"run {i}: colour {col} at {checked} of its {len(poly)} points, not at their mirror images")
    for a in absent:
        i, s, v = a.split(":")
        p = f.pixel(float(s), float(v))
        if im.near(int(p[0]), int(p[1]), TAB10[int(i)]):
            fail(f"run {i}'s colour at {p}, the pixel of ({s}, {v}), which must not be drawn")
        print(f"run {i}: nothing at ({s}, {v})")


def check_range(info, runs):
    f = Info(info)
    pts = [p for r in runs for p in points(r)]
    xs, ys = [p[0] for p in pts], [p[1] for p in pts]
    lo, hi = min(ys), max(ys)
    if not (f.ylo <= lo and f.yhi >= hi):
        fail(f"y range {f.ylo}..{f.yhi} does not hold the values {lo}..{hi}")
    if hi > lo and f.yhi - f.ylo > 1.25 * (hi - lo):
        fail(f"y range {f.ylo}..{f.yhi} is much wider than the values {lo}..{hi}")
    if not (f.xlo <= min(xs) and f.xhi >= max(xs)):
        fail(f"x range {f.xlo}..{f.xhi} does not hold the steps {min(xs)}..{max(xs)}")
    print(f"x {f.xlo}..{f.xhi} holds steps {min(xs)}..{max(xs)}, y {f.ylo}..{f.yhi} values {lo}..{hi}")


def check_legend(png, info, n):
    im, f = Image(png), Info(info)
    last = -1
    for i in range(int(n)):
        px = im.count(f.lx0, f.ly0, f.lx1, f.ly1, TAB10[i])
        if len(px) < 15:
            fail(f"legend {f.lx0},{f.ly0}-{f.lx1},{f.ly1}: {len(px)} pixels of run {i}'s colour {TAB10[i]}")
        y = sum(p[1] for p in px) / len(px)
        if y <= last:
            fail(f"legend: run {i}'s swatch (y {y:.1f}) is not below run {i - 1}'s ({last:.1f})")
        last = y
        print(f"legend: run {i}'s swatch, {len(px)} pixels at y {y:.1f}")


def check_axes(png, info):
    im, f = Image(png), Info(info)
    dark = lambda p: p and max(p) < 90
    for name, pts in (("left", [(f.fx0 - 1, y) for y in range(f.fy0, f.fy1)]),
                      ("bottom", [(x, f.fy1) for x in range(f.fx0, f.fx1)])):
        if sum(1 for p in pts if dark(im.get(*p))) < 0.95 * len(pts):
            fail(f"the frame's {name} edge is not drawn")
    regions = {"left of the plot (y labels, y title)": (0, f.fy0, f.fx0 - 2, f.fy1),
               "below the plot (x labels, x title)": (f.fx0, f.fy1 + 2, f.fx1, f.h),
               "above the plot (title)": (0, 0, f.w, f.fy0 - 2)}
    for name, (x0, y0, x1, y1) in regions.items():
        ink = sum(1 for y in range(y0, y1) for x in range(x0, x1) if dark(im.get(x, y)))
        if ink < 30:
            fail(f"no text {name}: {ink} dark pixels")
        print(f"{ink} dark pixels {name}")


def column_y(im, f, x, col):
    ys = [j for j in range(f.fy0, f.fy1) for i in (x - 1, x, x + 1) if not f.in_legend(i, j, 0)
          and (p := im.get(i, j)) and max(abs(p[k] - col[k]) for k in range(3)) <= TOL]
    if not ys:
        fail(f"no pixel of colour {col} in the columns about x {x}")
    return sum(ys) / len(ys)


def check_down(png, info, i, steps):
    im, f = Image(png), Info(info)
    prev = None
    for s in steps:
        x = int(f.pixel(float(s), 0)[0])
        y = column_y(im, f, x, TAB10[int(i)])
        if prev is not None and y <= prev[1] + 2:
            fail(f"run {i}: the curve at step {s} (pixel y {y:.1f}) is not below that at step {prev[0]} "
                 f"({prev[1]:.1f})")
        print(f"run {i}: step {s} at pixel y {y:.1f}")
        prev = (s, y)


def check_marker(png, info, i, step, value):
    im, f = Image(png), Info(info)
    px, py = f.pixel(float(step), float(value))
    got = im.count(int(px) - 8, int(py) - 8, int(px) + 9, int(py) + 9, TAB10[int(i)])
    if len(got) < 20:
        fail(f"run {i}: {len(got)} pixels of its colour about ({px:.1f}, {py:.1f}), no marker")
    print(f"run {i}: a marker of {len(got)} pixels at ({px:.1f}, {py:.1f})")


def main(a):
    cmd = a[0] if a else ""
    if cmd == "size" and len(a) == 4:
        check_size(*a[1:])
    elif cmd == "curves" and len(a) >= 4:
        least, absent, runs, rest = 5, [], [], a[3:]
        while rest:
            if rest[0] == "--min":
                least, rest = int(rest[1]), rest[2:]
            elif rest[0] == "--absent":
                absent, rest = absent + [rest[1]], rest[2:]
            else:
                runs, rest = runs + [rest[0]], rest[1:]
        check_curves(a[1], a[2], runs, least, absent)
    elif cmd == "range" and len(a) >= 3:
        check_range(a[1], a[2:])
    elif cmd == "legend" and len(a) == 4:
        check_legend(*a[1:])
    elif cmd == "axes" and len(a) == 3:
        check_axes(*a[1:])
    elif cmd == "down" and len(a) >= 5:
        check_down(a[1], a[2], a[3], a[4:])
    elif cmd == "marker" and len(a) == 6:
        check_marker(*a[1:])
    else:
        print(__doc__, file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main(sys.argv[1:])
