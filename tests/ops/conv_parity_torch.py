"""conv_parity_torch.py — conv forward and backward of both CPU paths against
PyTorch (torch.nn.functional.conv2d + autograd, in float64).

Runs test_op_conv cpu with GR_CONV_DUMP=<tmp file>, which writes every
kernel case (odd shapes, stride, padding, groups, depthwise, no bias, n below
the planned batch) with its inputs and both paths' outputs; recomputes each
with torch and compares (max |a - b| / (1 + max |b|) < 2e-5).

Usage: conv_parity_torch.py path/to/test_op_conv"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from pyneed import need, run_dump  # noqa: E402 (tests/pyneed.py: a missing module skips the test)

need("numpy", "torch")
import numpy as np
import torch
import torch.nn.functional as F

PATHS = ["ref", "onednn"]
TOL = 2e-5


def rel(a, b):
    return float(np.max(np.abs(a - b)) / (1.0 + np.max(np.abs(b)))) if b.size else 0.0


def main():
    raw = run_dump(sys.argv[1], "GR_CONV_DUMP", "conv.bin")
    off, cases, bad = 0, 0, 0
    while off < len(raw):
        hdr = np.frombuffer(raw, np.int64, 16, off)
        off += 16 * 8
        path, n, c, h, w, f, kh, kw, sh, sw, ph, pw, groups, bias, ho, wo = (int(v) for v in hdr)
        sizes = [n * c * h * w, f * (c // groups) * kh * kw, f, n * f * ho * wo]
        arrs = []
        for k in sizes + [sizes[3], sizes[0], sizes[1], sizes[2]]:
            arrs.append(np.frombuffer(raw, np.float32, k, off).astype(np.float64))
            off += 4 * k
        x, wt, b, dy, y, dx, dw, db = arrs
        tx = torch.tensor(x.reshape(n, c, h, w), requires_grad=True)
        tw = torch.tensor(wt.reshape(f, c // groups, kh, kw), requires_grad=True)
        tb = torch.tensor(b, requires_grad=True) if bias else None
        ty = F.conv2d(tx, tw, tb, stride=(sh, sw), padding=(ph, pw), groups=groups)
        ty.backward(torch.tensor(dy.reshape(ty.shape)))
        errs = {"y": rel(y, ty.detach().numpy().ravel()), "dx": rel(dx, tx.grad.numpy().ravel()),
                "dW": rel(dw - 0.5, tw.grad.numpy().ravel())}
        errs["db"] = rel(db - 0.5, tb.grad.numpy()) if bias else float(np.max(np.abs(db - 0.5)))
        desc = "%-6s n %d c %d %dx%d f %d k %dx%d s %dx%d p %dx%d g %d%s" % (
            PATHS[path], n, c, h, w, f, kh, kw, sh, sw, ph, pw, groups, "" if bias else " no bias")
        worst = max(errs.values())
        print("%-60s max rel err %.2e" % (desc, worst))
        if worst >= TOL:
            bad += 1
            print("  FAIL: " + ", ".join("%s %.3g" % kv for kv in errs.items()))
        cases += 1
    if cases == 0:
        sys.exit("no cases in the dump")
    print("%d cases, %d failed" % (cases, bad))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
