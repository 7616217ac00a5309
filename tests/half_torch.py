#!/usr/bin/python3
"""half_torch.py — gpurun's fp16 / bf16 storage rounding (common/gr_half.h)
against PyTorch's and NumPy's conversions.

    /usr/bin/python3 tests/half_torch.py PATH/TO/test_half

`test_half --dump` writes (input, gr_round_fp16_hd, gr_round_bf16_hd) bit
triples for the boundary sets of tests/test_half.c (every fp16 value and
midpoint +-2 float ulps, both signs; every bf16 pattern with the dropped half
at 0, 1, 2, 0x7FFE..0x8002, 0xFFFE, 0xFFFF; NaN payloads, infs, zeros) and
for every 65537th float pattern. Checks, each over all triples:
  - fp16 against torch float32 -> float16 -> float32 and numpy's astype;
  - bf16 against torch float32 -> bfloat16 -> float32.
Same value: the same bits, or NaN on both sides (payloads may differ).
Prints one line per check and "N passed, M failed"; exits 1 on any failure.
"""
import subprocess
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pyneed import need  # noqa: E402 (tests/pyneed.py: a missing module skips the test)

need("numpy", "torch")
import numpy as np
import torch

passed = failed = 0


def check(name, got, want, x):
    global passed, failed
    bad = (got.view(np.uint32) != want.view(np.uint32)) & ~(np.isnan(got) & np.isnan(want))
    n = int(bad.sum())
    if n == 0:
        passed += 1
        print(f"ok   {name}: {got.size} values")
    else:
        failed += 1
        i = int(np.flatnonzero(bad)[0])
        print(f"FAIL {name}: {n} of {got.size} differ, first x {x.view(np.uint32)[i]:08x}: "
              f"got {got.view(np.uint32)[i]:08x}, want {want.view(np.uint32)[i]:08x}")


def main():
    raw = subprocess.run([sys.argv[1], "--dump"], check=True, stdout=subprocess.PIPE).stdout
    t = np.frombuffer(raw, dtype="<u4").reshape(-1, 3)
    x, fp16, bf16 = (t[:, k].copy().view(np.float32) for k in range(3))
    # guard against an empty or truncated dump passing vacuously
    check_size = x.size > 1_000_000
    print(("ok  " if check_size else "FAIL") + f" dump size: {x.size} triples")
    global passed, failed
    passed, failed = passed + check_size, failed + (not check_size)

    xt = torch.from_numpy(x.copy())
    check("fp16 vs torch.float16", fp16, xt.to(torch.float16).to(torch.float32).numpy(), x)
    with np.errstate(over="ignore", invalid="ignore"):
        check("fp16 vs numpy.float16", fp16, x.astype(np.float16).astype(np.float32), x)
    check("bf16 vs torch.bfloat16", bf16, xt.to(torch.bfloat16).to(torch.float32).numpy(), x)

    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
