"""act_parity_torch.py — every activation of ops.def (its GR_OPF_ACT rows)
against PyTorch (float64): torch.relu, torch.sigmoid, torch.tanh, F.gelu (the
exact erf form) and F.gelu(approximate='tanh'), forward and backward.

Runs test_op_dense_act cpu with GR_ACT_DUMP=<tmp file>, which writes each
row's input x, an upstream gradient dy and what the CPU kernels give for
y = act(x) and dx; recomputes both with torch and compares (max |a - b| /
max |b| < 1e-5 each). A row without a torch counterpart here fails.

Usage: act_parity_torch.py path/to/test_op_dense_act"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from pyneed import need, run_dump  # noqa: E402 (tests/pyneed.py: a missing module skips the test)

need("numpy", "torch")
import numpy as np
import torch
import torch.nn.functional as F

TOL = 1e-5
TORCH = {
    "relu": torch.relu,
    "sigmoid": torch.sigmoid,
    "tanh": torch.tanh,
    "gelu": F.gelu,
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
}


def rel(a, b):
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-30))


def main():
    raw = run_dump(sys.argv[1], "GR_ACT_DUMP", "act.bin")
    off, cases, bad = 0, 0, 0
    while off < len(raw):
        name = raw[off:off + 32].split(b"\0")[0].decode()
        cnt = int(np.frombuffer(raw, np.int64, 1, off + 32)[0])
        off += 40
        x, dy, y, dx = (np.frombuffer(raw, np.float32, cnt, off + 4 * cnt * k).astype(np.float64) for k in range(4))
        off += 16 * cnt
        cases += 1
        if name not in TORCH:
            bad += 1
            print("%-10s FAIL: no PyTorch counterpart in act_parity_torch.py" % name)
            continue
        tx = torch.tensor(x, requires_grad=True)
        ty = TORCH[name](tx)
        ty.backward(torch.tensor(dy))
        e_y, e_dx = rel(y, ty.detach().numpy()), rel(dx, tx.grad.numpy())
        print("%-10s %5d values: y rel err %.1e, dx rel err %.1e" % (name, cnt, e_y, e_dx))
        if not (e_y < TOL and e_dx < TOL):
            bad += 1
            print("  FAIL")
    if cases == 0:
        sys.exit("no cases in the dump")
    print("%d activations, %d failed" % (cases, bad))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
