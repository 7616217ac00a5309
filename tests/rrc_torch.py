#!/usr/bin/python3
"""rrc_torch.py — golden RandomResizedCrop boxes: gpurun's box rule
(gr_augment_rrc_box, dataio/augment.h) against torchvision's
RandomResizedCrop.get_params on the same random numbers.

    /usr/bin/python3 tests/rrc_torch.py PATH/TO/rrc_replay

torchvision draws from torch's generator, gpurun from counter-based hashes, so
the streams differ; the rule that turns draws into a box must not. Each case
calls get_params on a seeded generator with torch.Tensor.uniform_ and
torch.randint wrapped to record every number it draws: per try the area
fraction and the log aspect ratio (torchvision draws it in float32 and takes
torch.exp in float32: the recorded aspect is that exp, exactly), and the row
and column of the box that fits with their bounds. rrc_replay feeds them to
gr_augment_rrc_box, which must ask for the same draws (the same number of
tries, the same randint bounds) and return the same (i, j, h, w).
Cases: ImageNet-like shapes with the default scale (0.08, 1) and ratio
(3/4, 4/3), small images (where rounding decides the fit), and narrow or
tall images with scale near 1, where all 10 tries miss and the centre
fallback with the clamped ratio decides. Checks that every box is equal and
that both the fallback and first/later-try successes occurred.
Prints one line per check and "N passed, M failed"; exits 1 on any failure."""
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pyneed import need  # noqa: E402

need("torch", "torchvision")
import torch  # noqa: E402
from torchvision.transforms import RandomResizedCrop  # noqa: E402

passed = failed = 0


def check(ok, what):
    global passed, failed
    print(("ok   " if ok else "FAIL ") + what)
    passed, failed = passed + ok, failed + (not ok)


def record(h, w, scale, ratio, seed):
    """torchvision's box for an h x w image and the numbers it drew."""
    draws = []
    orig_uniform, orig_randint = torch.Tensor.uniform_, torch.randint

    def uniform(self, lo, hi):
        r = orig_uniform(self, lo, hi)
        draws.append(("u", r.clone()))
        return r

    def randint(lo, hi, size, **kw):
        r = orig_randint(lo, hi, size, **kw)
        draws.append(("i", int(hi), int(r.item())))
        return r

    torch.manual_seed(seed)
    torch.Tensor.uniform_, torch.randint = uniform, randint
    try:
        box = RandomResizedCrop.get_params(torch.empty(3, h, w), list(scale), list(ratio))
    finally:
        torch.Tensor.uniform_, torch.randint = orig_uniform, orig_randint
    us = [d[1] for d in draws if d[0] == "u"]
    ints = [d for d in draws if d[0] == "i"]
    assert len(us) % 2 == 0 and len(ints) in (0, 2), draws
    tries = []
    for k in range(len(us) // 2):
        frac = us[2 * k].item()             # float32 -> double: what `area * ...item()` multiplies
        aspect = torch.exp(us[2 * k + 1]).item()  # torchvision's float32 exp, as it takes it
        tries.append([frac, aspect, 0, -1, 0, -1])
    if ints:
        tries[-1][2:] = [ints[0][1], ints[0][2], ints[1][1], ints[1][2]]
    return box, tries


def cases():
    default = ((0.08, 1.0), (3.0 / 4.0, 4.0 / 3.0))
    seed = 0
    for h, w in ((375, 500), (500, 333), (256, 256), (1200, 1600), (2000, 90)):
        for _ in range(150):
            seed += 1
            yield h, w, default[0], default[1], seed
    for h, w in ((3, 3), (5, 9), (1, 7), (12, 2), (17, 17)):
        for _ in range(40):
            seed += 1
            yield h, w, default[0], default[1], seed
    for (h, w), scale, ratio in (((100, 400), (0.9, 1.0), (3 / 4, 4 / 3)), ((400, 100), (0.95, 1.0), (3 / 4, 4 / 3)),
                               ((60, 64), (0.99, 1.0), (1.6, 2.0)), ((64, 60), (0.99, 1.0), (0.4, 0.5)),
                               ((300, 100), (0.5, 1.0), (0.9, 1.1))):
        for _ in range(30):
            seed += 1
            yield h, w, scale, ratio, seed


def main():
    if len(sys.argv) != 2:
        print("usage: rrc_torch.py PATH/TO/rrc_replay", file=sys.stderr)
        sys.exit(2)
    want, lines, n_tries = [], [], []
    for h, w, scale, ratio, seed in cases():
        box, tries = record(h, w, scale, ratio, seed)
        want.append(tuple(box))
        n_tries.append((len(tries), tries[-1][3] >= 0 if tries else False))
        fields = [h, w, scale[0], scale[1], ratio[0], ratio[1], len(tries)] + [v for t in tries for v in t]
        lines.append(" ".join(repr(float(v)) if isinstance(v, float) else str(v) for v in fields))
    with tempfile.TemporaryDirectory() as d:
        inp, out = os.path.join(d, "in.txt"), os.path.join(d, "out.txt")
        with open(inp, "w") as f:
            f.write("\n".join(lines) + "\n")
        subprocess.run([sys.argv[1], inp, out], check=True)
        with open(out) as f:
            got = [line.split() for line in f]
    check(len(got) == len(want), f"rrc_replay answered all {len(want)} cases (got {len(got)})")
    errors = [(k, " ".join(g)) for k, g in enumerate(got) if g[0] == "ERROR"]
    check(not errors, "gpurun asked for the draws torchvision made" + (f": case {errors[0][0]}: {errors[0][1]}"
                                                                        if errors else ""))
    diff = [(k, want[k], g) for k, g in enumerate(got) if g[0] != "ERROR" and tuple(map(int, g)) != want[k]]
    check(not diff, f"{len(want) - len(diff)} of {len(want)} boxes equal torchvision's"
          + (f"; first differing: case {diff[0][0]} torchvision {diff[0][1]} gpurun {diff[0][2]}" if diff else ""))
    fallback = sum(1 for t, hit in n_tries if not hit)
    first = sum(1 for t, hit in n_tries if hit and t == 1)
    later = sum(1 for t, hit in n_tries if hit and t > 1)
    check(fallback > 0 and first > 0 and later > 0,
          f"cases cover the fallback ({fallback}), a first-try box ({first}) and a later-try box ({later})")
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


main()
