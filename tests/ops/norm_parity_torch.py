"""norm_parity_torch.py — layernorm against PyTorch (float64): F.layer_norm
over the last axis with weight and (or without) bias, forward and the
gradients of the input, the weight and the bias.

Runs test_op_norm cpu with GR_NORM_DUMP=<tmp file>, which runs each case's
layernorm forward and backward plan steps through gpurun's CPU pipeline and
writes its inputs, weight, bias, upstream gradient dy, and the results y,
dx, dweight, dbias; recomputes them with torch and compares (max |a - b| /
max |b| < 1e-5 for each).

Usage: norm_parity_torch.py path/to/test_op_norm"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from pyneed import need, run_dump  # noqa: E402 (tests/pyneed.py: a missing module skips the test)

need("numpy", "torch")
import numpy as np
import torch
import torch.nn.functional as F

TOL = 1e-5


def rel(a, b):
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-30))


def main():
    raw = run_dump(sys.argv[1], "GR_NORM_DUMP", "norm.bin")
    off, cases, bad, worst = 0, 0, 0, 0.0
    while off < len(raw):
        n, ndim, s0, s1, s2, bias, _, _ = (int(v) for v in np.frombuffer(raw, np.int64, 8, off))
        off += 64
        eps = float(np.frombuffer(raw, np.float64, 1, off)[0])
        off += 16
        shape = [n] + [s0, s1, s2][:ndim]
        c, total = shape[-1], int(np.prod(shape))
        arrs = []
        for k in [total, c, c, total, total, total, c, c]:
            arrs.append(np.frombuffer(raw, np.float32, k, off).astype(np.float64))
            off += 4 * k
        x, w, b, dy, y, dx, dw, db = arrs
        tx = torch.tensor(x.reshape(shape), requires_grad=True)
        tw = torch.tensor(w, requires_grad=True)
        tb = torch.tensor(b, requires_grad=True) if bias else None
        ty = F.layer_norm(tx, (c,), tw, tb, eps)
        ty.backward(torch.tensor(dy.reshape(shape)))
        errs = {"y": rel(y, ty.detach().numpy().ravel()), "dx": rel(dx, tx.grad.numpy().ravel()),
                "dweight": rel(dw, tw.grad.numpy())}
        errs["dbias"] = rel(db, tb.grad.numpy()) if bias else float(np.max(np.abs(db)))
        e = max(errs.values())
        worst = max(worst, e)
        desc = "%-16s eps %g%s mean %+.2f" % (str(shape), eps, "" if bias else " no bias", float(np.mean(x)))
        print("%-44s " % desc + ", ".join("%s %.1e" % kv for kv in errs.items()))
        if not e < TOL:
            bad += 1
            print("  FAIL")
        cases += 1
    if cases == 0:
        sys.exit("no cases in the dump")
    print("%d cases, %d failed, max rel err %.1e" % (cases, bad, worst))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
