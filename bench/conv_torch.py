"""conv_torch.py — PyTorch's side of bench/conv_bench.c: the same conv shapes,
forward, and forward+backward (data, weights, bias) timed with
torch.nn.functional.conv2d + autograd.grad. Usage: conv_torch.py [threads (2)]"""
import sys
import time
import torch
import torch.nn.functional as F

torch.set_num_threads(int(sys.argv[1]) if len(sys.argv) > 1 else 2)
CASES = [
    ("fmnist conv1 1x28x28->32 k3p1 n64", 64, 1, 28, 28, 32, 3, 1, 1, False),
    ("fmnist conv2 32x14x14->64 k3p1 n64", 64, 32, 14, 14, 64, 3, 1, 1, True),
    ("r50 stem 3x224x224->64 k7s2p3 n8", 8, 3, 224, 224, 64, 7, 2, 3, False),
    ("r50 64x56x56->256 1x1 n8", 8, 64, 56, 56, 256, 1, 1, 0, True),
    ("r50 64x56x56->64 k3p1 n8", 8, 64, 56, 56, 64, 3, 1, 1, True),
    ("r50 512x7x7->512 k3p1 n8", 8, 512, 7, 7, 512, 3, 1, 1, True),
    ("r50 128x56x56->128 k3s2p1 n8", 8, 128, 56, 56, 128, 3, 2, 1, True),
    ("r50 256x56x56->512 1x1 s2 n8", 8, 256, 56, 56, 512, 1, 2, 0, True),
]


def ms(fn):
    """the fastest of the calls in ~0.6 s (the machine is shared: min, not mean)"""
    fn(); fn()
    reps, t0, best = 0, time.perf_counter(), 1e30
    while time.perf_counter() - t0 < 0.6 or reps < 5:
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
        reps += 1
    return 1e3 * best


print("%-38s %9s %9s %9s %9s" % ("torch " + torch.__version__, "fwd ms", "bwd ms", "", "total"))
for name, n, c, h, w, f, k, s, p, need_dx in CASES:
    x = torch.rand(n, c, h, w, requires_grad=need_dx)
    wt = torch.rand(f, c, k, k, requires_grad=True)
    b = torch.rand(f, requires_grad=True)
    with torch.no_grad():
        tf = ms(lambda: F.conv2d(x, wt, b, stride=s, padding=p))
    y = F.conv2d(x, wt, b, stride=s, padding=p)
    dy = torch.rand_like(y)
    wrt = [x, wt, b] if need_dx else [wt, b]

    def fb():
        yy = F.conv2d(x, wt, b, stride=s, padding=p)
        torch.autograd.grad(yy, wrt, dy)
    tfb = ms(fb)
    print("%-38s %9.2f %9.2f %9s %9.2f" % (name, tf, tfb - tf, "", tfb))
