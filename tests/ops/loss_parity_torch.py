"""loss_parity_torch.py — the losses against PyTorch (float64): mse_loss,
binary_cross_entropy_with_logits and cross_entropy over the last axis with
ignore_index and label_smoothing, reduction='mean', loss and input gradient.

Runs test_op_loss cpu with GR_LOSS_DUMP=<tmp file>, which runs each case
through gpurun's CPU pipeline (one training pass of a hand-built loss graph
at grad_scale 1/n, the convention that makes one micro-batch's gradient that
of the mean) and writes its inputs, loss and input gradient; recomputes each
with torch and compares (loss: |a - b| / (1e-6 + |b|) < 1e-5; gradient:
max |a - b| / max |b| < 1e-5).

Usage: loss_parity_torch.py path/to/test_op_loss"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from pyneed import need, run_dump  # noqa: E402 (tests/pyneed.py: a missing module skips the test)

need("numpy", "torch")
import numpy as np
import torch
import torch.nn.functional as F

KINDS = ["mse", "bce_with_logits", "cross_entropy"]
TOL = 1e-5


def torch_loss(kind, x, t, ignore, smoothing):
    """the mean loss of x (requires grad) and targets t, as PyTorch defines it"""
    if kind == 0:
        return F.mse_loss(x, t)
    if kind == 1:
        return F.binary_cross_entropy_with_logits(x, t)
    c = x.shape[-1]
    return F.cross_entropy(x.reshape(-1, c), t.reshape(-1), ignore_index=ignore, label_smoothing=smoothing)


def main():
    raw = run_dump(sys.argv[1], "GR_LOSS_DUMP", "loss.bin")
    off, cases, bad = 0, 0, 0
    while off < len(raw):
        kind, n, ndim, s0, s1, s2, ignore, _ = (int(v) for v in np.frombuffer(raw, np.int64, 8, off))
        off += 64
        smoothing, loss = (float(v) for v in np.frombuffer(raw, np.float64, 2, off))
        off += 16
        shape = [n] + [s0, s1, s2][:ndim]
        tshape = shape[:-1] if kind == 2 else shape
        nx, nt = int(np.prod(shape)), int(np.prod(tshape))
        x = np.frombuffer(raw, np.float32, nx, off).reshape(shape)
        off += 4 * nx
        t = np.frombuffer(raw, np.int32 if kind == 2 else np.float32, nt, off).reshape(tshape)
        off += 4 * nt
        dx = np.frombuffer(raw, np.float32, nx, off).reshape(shape)
        off += 4 * nx
        tx = torch.tensor(x.astype(np.float64), requires_grad=True)
        tt = torch.tensor(t.astype(np.int64)) if kind == 2 else torch.tensor(t.astype(np.float64))
        tl = torch_loss(kind, tx, tt, ignore, smoothing)
        tl.backward()
        want_l, want_dx = float(tl), tx.grad.numpy()
        e_loss = abs(loss - want_l) / (1e-6 + abs(want_l))
        e_dx = float(np.max(np.abs(dx - want_dx)) / max(np.max(np.abs(want_dx)), 1e-30))
        ignored = int(np.sum(t == ignore)) if kind == 2 else 0
        desc = "%-15s %-16s smoothing %.1f ignore_index %4d (%d ignored)" % (
            KINDS[kind], str(shape), smoothing, ignore, ignored)
        print("%-72s loss %.7g (torch %.7g) rel err %.1e, grad rel err %.1e" % (desc, loss, want_l, e_loss, e_dx))
        if not (e_loss < TOL and e_dx < TOL):
            bad += 1
            print("  FAIL")
        cases += 1
    if cases == 0:
        sys.exit("no cases in the dump")
    print("%d cases, %d failed" % (cases, bad))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
