"""tests/same_results.py A B — whether run directories A and B (tests/same_results.sh) hold the
same training: metrics.jsonl line for line less the timing fields, summary.json's figures, and
every tensor of weights.h5 byte for byte. Prints what was compared (exit 0) or the first
difference (exit 1)."""
import json
import sys

import h5py
import numpy as np

TIMING = {"time_s", "samples_per_s", "data_wait_pct", "rss_bytes", "cpu_pct"}
SUMMARY = ("status", "steps", "epochs", "final_train_loss", "best_val_accuracy", "last_val_accuracy",
           "last_val_loss", "loss_scale", "skipped_steps", "params", "precision", "world_size")


def lines(d):
    out = []
    with open(d + "/metrics.jsonl") as f:
        for raw in f:
            o = json.loads(raw)
            out.append({k: v for k, v in o.items() if k not in TIMING and not k.startswith("gpu_")})
    return out


def tensors(d):
    out = {}
    with h5py.File(d + "/weights.h5", "r") as f:
        def visit(name, obj):
            if isinstance(obj, h5py.Dataset):
                v = obj[()]
                out[name] = (str(v.dtype), v.shape, np.ascontiguousarray(v).tobytes())
        f.visititems(visit)
    return out


def compare(a, b):
    """(True, what was compared) or (False, the first difference)."""
    la, lb = lines(a), lines(b)
    if len(la) != len(lb):
        return False, f"metrics.jsonl: {len(la)} lines against {len(lb)}"
    for i, (x, y) in enumerate(zip(la, lb)):
        if x != y:
            keys = sorted(k for k in set(x) | set(y) if x.get(k) != y.get(k))
            return False, f"metrics.jsonl line {i + 1} (step {x.get('step')}): " + ", ".join(
                f"{k} {x.get(k)!r} against {y.get(k)!r}" for k in keys[:4])
    sa, sb = (json.load(open(d + "/summary.json")) for d in (a, b))
    for k in SUMMARY:
        if sa.get(k) != sb.get(k):
            return False, f"summary.json {k}: {sa.get(k)!r} against {sb.get(k)!r}"
    ta, tb = tensors(a), tensors(b)
    if set(ta) != set(tb):
        return False, f"weights.h5: tensors {sorted(set(ta) ^ set(tb))[:4]} in one only"
    for name in sorted(ta):
        if ta[name] != tb[name]:
            return False, f"weights.h5 {name}: {ta[name][:2]} differs from {tb[name][:2]} or in its values"
    return True, f"{len(la)} metrics lines, summary, {len(ta)} tensors bit-identical"


if __name__ == "__main__":
    same, what = compare(sys.argv[1], sys.argv[2])
    print(what)
    sys.exit(0 if same else 1)
