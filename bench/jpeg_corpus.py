#!/usr/bin/env python3
"""bench/jpeg_corpus.py — the photographs of bench/jpeg.sh: N JPEGs of 400-500 px cut from
real photographs that Debian's wallpaper packages ship, in an imagefolder tree.

The photographs (21): the 12 of mate-backgrounds' nature/ folder (macro and landscape shots,
1280x1024 to 2560x1920) and 9 of plasma-workspace-wallpapers (BytheWater, ColdRipple,
ColorfulCups, EveningGlow, FallenLeaf, Grey, OneStandsOut, Path, summer_1am: the largest JPEG
of each, 2560x1600). The other wallpapers of those packages, and those of gnome-backgrounds
(SVG/WebP renders) and ukui-wallpapers, are drawn or rendered art, not photographs.

Image k (0..N-1), from random.Random(k) alone: a photograph; an output size with its long
side in 400..500 and aspect (w/h) in [3/4, 4/3], either way round; a box of that aspect in
the photograph, 1 to 4 times the output's size (log-uniform, capped by the photograph), at a
random place; the box resized to the output size (PIL LANCZOS) and saved as a baseline JPEG
at quality 90 (PIL's default 4:2:0 subsampling) as OUT/class_<k % CLASSES>/img_<k>.jpg.
The same N, CLASSES and Pillow version give the same files. OUT.done (beside OUT, outside
the tree the converter reads) is written last.

Usage: bench/jpeg_corpus.py OUT --n N [--classes 4]
"""
import argparse
import glob
import math
import os
import random
import sys

from PIL import Image

MATE = "/usr/share/backgrounds/mate/nature"
PLASMA = "/usr/share/wallpapers"
PLASMA_PHOTOS = ["BytheWater", "ColdRipple", "ColorfulCups", "EveningGlow", "FallenLeaf", "Grey",
                 "OneStandsOut", "Path", "summer_1am"]


def photographs():
    paths = sorted(glob.glob(os.path.join(MATE, "*.jpg")))
    for name in PLASMA_PHOTOS:
        imgs = glob.glob(os.path.join(PLASMA, name, "contents", "images", "*.jpg"))
        if imgs:  # the largest resolution of the wallpaper
            paths.append(max(imgs, key=lambda p: (os.path.getsize(p), p)))
    return paths


def main():
    ap = argparse.ArgumentParser(description="JPEG corpus of bench/jpeg.sh")
    ap.add_argument("out")
    ap.add_argument("--n", type=int, required=True)
    ap.add_argument("--classes", type=int, default=4)
    a = ap.parse_args()
    if a.n < 1 or a.classes < 1:
        ap.error("--n and --classes must be >= 1")
    paths = photographs()
    if len(paths) != 12 + len(PLASMA_PHOTOS):
        sys.exit(f"bench/jpeg_corpus.py: found {len(paths)} of the {12 + len(PLASMA_PHOTOS)} photographs "
                 f"(mate-backgrounds, plasma-workspace-wallpapers installed?)")
    photos = [Image.open(p).convert("RGB") for p in paths]
    for c in range(a.classes):
        os.makedirs(os.path.join(a.out, f"class_{c}"), exist_ok=True)
    for k in range(a.n):
        r = random.Random(k)
        im = photos[r.randrange(len(photos))]
        long_side = r.randint(400, 500)
        aspect = math.exp(r.uniform(math.log(3 / 4), math.log(4 / 3)))  # w / h, <= 4/3 either way
        if aspect >= 1:
            ow, oh = long_side, round(long_side / aspect)
        else:
            ow, oh = round(long_side * aspect), long_side
        zmax = min(4.0, im.width / ow, im.height / oh)
        z = math.exp(r.uniform(0.0, math.log(zmax))) if zmax > 1 else zmax
        bw, bh = min(im.width, round(ow * z)), min(im.height, round(oh * z))
        x0, y0 = r.randint(0, im.width - bw), r.randint(0, im.height - bh)
        tile = im.resize((ow, oh), Image.LANCZOS, box=(x0, y0, x0 + bw, y0 + bh))
        tile.save(os.path.join(a.out, f"class_{k % a.classes}", f"img_{k:06d}.jpg"), "JPEG", quality=90)
    with open(a.out.rstrip("/") + ".done", "w") as f:
        f.write(f"n {a.n} classes {a.classes} photographs {len(paths)}\n")


if __name__ == "__main__":
    main()
