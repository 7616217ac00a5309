#!/usr/bin/env python3
"""parallel_check.py — the checks tests/e2e_parallel.sh makes on runs (h5py/numpy):
  losses RUN_A RUN_B RTOL [FROM [TO]]  the train lines of B's metrics.jsonl (steps > FROM, default 0,
                                  and <= TO) have A's losses within RTOL relative, step for step, and the
                                  same steps; so do the eval lines' losses (without TO: there must be
                                  one), with accuracies within 1/500
  weights RUN_A RUN_B RTOL        weights.h5 of both: the same datasets, values within RTOL of the
                                  largest magnitude of each
"""
import json, sys
import h5py, numpy as np

def losses(run, kind="train"):
    out = {}
    for line in open(run + "/metrics.jsonl"):
        d = json.loads(line)
        if d["kind"] == kind:
            out[d["step"]] = d["loss"] if kind == "train" else (d["loss"], d.get("accuracy", 0.0))
    return out

def cmd_losses(a, b, rtol, start=0, to=None):
    last = to if to is not None else float("inf")
    la, lb = losses(a), losses(b)
    lb = {k: v for k, v in lb.items() if start < k <= last}
    la = {k: v for k, v in la.items() if k in lb or start < k <= last}
    if sorted(la) != sorted(lb):
        sys.exit("steps differ: %s vs %s" % (sorted(la)[:5], sorted(lb)[:5]))
    if not lb:
        sys.exit("no train lines after step %d" % start)
    worst = max(abs(la[k] - lb[k]) / abs(la[k]) for k in lb)
    print("%d steps, worst relative loss difference %.3g" % (len(lb), worst))
    if worst > rtol:
        sys.exit("losses differ by %.3g > %g" % (worst, rtol))
    ea, eb = losses(a, "eval"), losses(b, "eval")
    eb = {k: v for k, v in eb.items() if start < k <= last}
    if (not eb and to is None) or any(k not in ea for k in eb):
        sys.exit("eval lines: %s vs %s" % (sorted(ea), sorted(eb)))
    for k in eb:
        if abs(ea[k][0] - eb[k][0]) > rtol * abs(ea[k][0]) or abs(ea[k][1] - eb[k][1]) > 1 / 500:
            sys.exit("eval at step %d: %s vs %s" % (k, ea[k], eb[k]))
    print("%d evaluations agree" % len(eb))

def tensors(path):
    out = {}
    with h5py.File(path, "r") as f:
        f.visititems(lambda n, o: out.__setitem__(n, o[()]) if isinstance(o, h5py.Dataset) else None)
    return out

def cmd_weights(a, b, rtol):
    ta, tb = tensors(a + "/weights.h5"), tensors(b + "/weights.h5")
    if sorted(ta) != sorted(tb):
        sys.exit("datasets differ: %s vs %s" % (sorted(ta), sorted(tb)))
    worst = 0.0
    for k in ta:
        scale = float(np.max(np.abs(ta[k]))) or 1.0
        worst = max(worst, float(np.max(np.abs(ta[k].astype(np.float64) - tb[k]))) / scale)
    print("%d tensors, worst relative weight difference %.3g" % (len(ta), worst))
    if worst > rtol:
        sys.exit("weights differ by %.3g > %g" % (worst, rtol))

if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "losses":
        cmd_losses(args[0], args[1], float(args[2]), int(args[3]) if len(args) > 3 else 0,
                   int(args[4]) if len(args) > 4 else None)
    elif cmd == "weights":
        cmd_weights(args[0], args[1], float(args[2]))
    else:
        sys.exit(__doc__)
