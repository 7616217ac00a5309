#!/usr/bin/python3
"""augment_torch.py — parity of gpurun's RandomResizedCrop path with PyTorch.

    /usr/bin/python3 tests/augment_torch.py PATH/TO/augment_dump

Draws a random uint8 3x64x80 image (numpy, fixed seed), has augment_dump
(tests/tools/augment_dump.c) draw RandomResizedCrop boxes with gpurun's
gr_augment_draw and decode them with gr_decode_sample, plus hand-picked boxes
(upscale, downscale, one row, one column, touching the bottom-right edge),
and recomputes every output as torchvision does for a float tensor with
antialias=False: the box cut out of the image,
torch.nn.functional.interpolate(mode="bilinear", align_corners=False,
antialias=False), then torch.flip along the width when flipped. Checks, per
output size:
  - max |diff| < 1e-4 (stored units: mean 0, std 1) over all boxes;
  - the drawn boxes lie inside the image and both flip states occur;
  - both upscaled and downscaled boxes were compared (over all sizes).
Prints one line per check and "N passed, M failed"; exits 1 on any failure.
"""
import os
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pyneed import need  # noqa: E402 (tests/pyneed.py: a missing module skips the test)

need("numpy", "torch")
import numpy as np
import torch
import torch.nn.functional as F

C, H, W = 3, 64, 80
N_RANDOM = 50
SCALE = (0.02, 1.0)
RATIO = (3.0 / 4.0, 4.0 / 3.0)
# y0, x0, h, w, flip
FIXED = [(0, 0, 64, 80, 0), (0, 0, 64, 80, 1), (10, 20, 7, 9, 1), (57, 70, 7, 10, 0), (5, 5, 1, 1, 0),
         (30, 0, 1, 80, 1), (0, 40, 64, 1, 0), (3, 4, 50, 3, 1), (1, 2, 13, 61, 0)]
SIZES = (24, 96, 7)

passed = failed = 0


def check(ok, what):
    global passed, failed
    print(("ok   " if ok else "FAIL ") + what)
    if ok:
        passed += 1
    else:
        failed += 1


def run_dump(exe, img, size, seed, tmp):
    inp, out = os.path.join(tmp, "in.bin"), os.path.join(tmp, "out.bin")
    with open(inp, "wb") as f:
        f.write(b"GRAUGIN1")
        f.write(struct.pack("<6i", C, H, W, size, N_RANDOM, len(FIXED)))
        f.write(struct.pack("<q", seed))
        f.write(struct.pack("<4d", SCALE[0], SCALE[1], RATIO[0], RATIO[1]))
        for box in FIXED:
            f.write(struct.pack("<5q", *box))
        f.write(img.tobytes())
    subprocess.run([exe, inp, out], check=True)
    with open(out, "rb") as f:
        data = f.read()
    if data[:8] != b"GRAUGOU1":
        raise SystemExit("augment_dump: bad output magic")
    (count,) = struct.unpack_from("<q", data, 8)
    pos, res = 16, []
    n = C * size * size
    for _ in range(count):
        box = struct.unpack_from("<5q", data, pos)
        pos += 40
        out_f = np.frombuffer(data, dtype="<f4", count=n, offset=pos).reshape(C, size, size)
        pos += 4 * n
        res.append((box, out_f))
    if pos != len(data):
        raise SystemExit("augment_dump: %d trailing bytes" % (len(data) - pos))
    return res


def torch_resized(img_t, box, size):
    y0, x0, h, w, flip = box
    crop = img_t[:, y0:y0 + h, x0:x0 + w].unsqueeze(0)
    out = F.interpolate(crop, size=(size, size), mode="bilinear", align_corners=False, antialias=False)[0]
    if flip:
        out = torch.flip(out, dims=[-1])
    return out.numpy()


def main():
    if len(sys.argv) != 2:
        raise SystemExit("usage: augment_torch.py PATH/TO/augment_dump")
    exe = sys.argv[1]
    torch.set_num_threads(1)
    img = np.random.RandomState(0).randint(0, 256, size=(C, H, W), dtype=np.uint8)
    img_t = torch.from_numpy(img.astype(np.float32))
    ups = downs = 0
    with tempfile.TemporaryDirectory() as tmp:
        for size in SIZES:
            res = run_dump(exe, img, size, 1234 + size, tmp)
            check(len(res) == N_RANDOM + len(FIXED), "size %d: %d outputs" % (size, len(res)))
            drawn = [box for box, _ in res[:N_RANDOM]]
            inside = all(y0 >= 0 and x0 >= 0 and h >= 1 and w >= 1 and y0 + h <= H and x0 + w <= W
                         for y0, x0, h, w, _ in drawn)
            check(inside, "size %d: the drawn boxes lie inside the %dx%d image" % (size, H, W))
            flips = sum(box[4] for box in drawn)
            check(0 < flips < N_RANDOM, "size %d: %d of %d drawn boxes flipped" % (size, flips, N_RANDOM))
            check([tuple(b) for b, _ in res[N_RANDOM:]] == FIXED, "size %d: the fixed boxes come back" % size)
            worst, worst_box, up, down = 0.0, None, 0, 0
            for box, got in res:
                want = torch_resized(img_t, box, size)
                d = float(np.max(np.abs(got.astype(np.float64) - want.astype(np.float64))))
                if d > worst:
                    worst, worst_box = d, box
                h, w = box[2], box[3]
                up += h < size and w < size
                down += h > size and w > size
            ups, downs = ups + up, downs + down
            check(up + down > 0, "size %d: %d upscaled and %d downscaled boxes" % (size, up, down))
            check(worst < 1e-4, "size %d: max |gpurun - torch| = %.3g over %d boxes (worst %s)"
                  % (size, worst, len(res), worst_box))
    check(ups > 0 and downs > 0, "all sizes: %d upscaled and %d downscaled boxes" % (ups, downs))
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
