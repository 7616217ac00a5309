#!/usr/bin/env bash
# e2e_precision.sh — mixed precision (precision: fp16 | bf16, loss_scale) end to end:
#
#  1. fp16 and bf16 store activations and their gradients at half precision
#     (a kernel without a native half path computes in fp32 on converted copies) with fp32
#     master weights: the first step's loss differs from fp32's, but only by
#     rounding, and training reaches fp32's accuracy on learnable data.
#  2. loss scaling: fp16's dynamic scale starts at 2^16 and is logged on every
#     metrics line, in summary.json and in the checkpoint header; after
#     GPURUN_LOSS_SCALE_INTERVAL finite steps it doubles; bf16 has none (1).
#     A fixed scale whose gradients overflow is exit 5 naming it.
#     With the scale doubling after every finite step it soon overflows: those
#     steps are skipped and halve it.
#     A skipped step is no optimizer step: AdamW's bias correction counts the
#     updates applied (checked on every step's checkpoint).
#  3. a fp16 AdamW run stopped by SIGTERM and resumed gives the straight run's
#     losses, scales and weights bit for bit (the scale, its count and the
#     skipped steps come back), with skipped steps on both sides of the stop;
#     so does a bf16 one, on the CPU's native bf16 kernels where it has them.
#
#   bash tests/e2e_precision.sh GPURUN_BINARY SOURCE_DIR TMPDIR
. "$(dirname "$0")/e2e_lib.bash" "$@"
e2e_need_py h5py numpy

H=$SRC/tests/resume_check.py
expect 0 -- "$G" data synthetic "$T/syn.h5" --n 3000 --shape 1,16,16 --classes 10 --test 500 --seed 3

# spec NAME [SED-EXPR] : a small CNN with batchnorm and dropout on the synthetic data
spec() {
    cat >"$T/$1.yaml" <<EOF
name: prec
seed: 5
data:
  train: {path: $T/syn.h5, group: /train}
  val: {path: $T/syn.h5, group: /test}
model:
  layers:
    - conv: {filters: 8, kernel: 3, padding: 1}
    - batchnorm
    - relu
    - maxpool: {kernel: 2}
    - flatten
    - dropout: {rate: 0.1}
    - dense: {units: 32}
    - relu
    - dense: {units: 10}
train:
  batch_size: 32
  epochs: 2
  optimizer: {type: sgd, lr: 0.05, momentum: 0.9}
log: {every_steps: 1, tensorboard: false}
checkpoint: {every_steps: 0}
EOF
    if [ $# -gt 1 ]; then sed -i "$2" "$T/$1.yaml"; fi
}
spec fp32
spec fp16 's/^seed: 5/seed: 5\nprecision: fp16/'
spec bf16 's/^seed: 5/seed: 5\nprecision: bf16/'
spec fp16a 's/^seed: 5/seed: 5\nprecision: fp16/; s/optimizer: .*/optimizer: {type: adamw, lr: 0.002, weight_decay: 0.01}/'

for p in fp32 fp16 bf16; do
    expect 0 -- "$G" "$T/$p.yaml" --run-dir "$T/$p" --quiet --device cpu
done

# ---------------------------------------------------------------- 1. numerics
check "fp16/bf16: step 1 loss differs from fp32 by rounding only (0 < |rel| < 2e-2), accuracy at most 2 points below" \
    "$PY" - "$T" <<'EOF'
import json, sys
T = sys.argv[1]
def lines(p):
    return [json.loads(l) for l in open(f"{T}/{p}/metrics.jsonl") if l.strip()]
def first_loss(p):
    return next(l["loss"] for l in lines(p) if l["kind"] == "train")
def summary(p):
    return json.load(open(f"{T}/{p}/summary.json"))
ref, ref_acc = first_loss("fp32"), summary("fp32")["last_val_accuracy"]
assert ref_acc > 0.5, ("the fp32 run did not learn", ref_acc)
for p in ("fp16", "bf16"):
    l, s = first_loss(p), summary(p)
    rel = abs(l - ref) / ref
    assert 0 < rel < 2e-2, (p, l, ref, rel)
    assert s["status"] == "finished" and s["precision"] == p, s
    assert s["last_val_accuracy"] >= ref_acc - 0.02, (p, s["last_val_accuracy"], ref_acc)
    print(p, "step-1 loss rel diff %.2e" % rel, "accuracy", s["last_val_accuracy"], "fp32", ref_acc)
EOF

# ---------------------------------------------------------------- 2. loss scaling
check "metrics and summary: fp16's dynamic scale is a power of two <= 2^16, bf16 and fp32 have 1" \
    "$PY" - "$T" <<'EOF'
import json, math, sys
T = sys.argv[1]
for p, dyn in (("fp32", False), ("fp16", True), ("bf16", False)):
    tl = [json.loads(l) for l in open(f"{T}/{p}/metrics.jsonl") if '"train"' in l]
    scales = [l["loss_scale"] for l in tl]
    s = json.load(open(f"{T}/{p}/summary.json"))
    if dyn:
        assert scales[0] <= 65536 and all(math.log2(x).is_integer() for x in scales), scales[:5]
    else:
        assert set(scales) == {1} and s["loss_scale"] == 1 and s["skipped_steps"] == 0, (p, set(scales), s)
    assert s["loss_scale"] == scales[-1], (p, s["loss_scale"], scales[-1])
EOF

# growth: every 5 finite steps the scale doubles (GPURUN_LOSS_SCALE_INTERVAL), and the
# checkpoint header carries the scale and the count of finite steps since it changed
expect 0 -- env GPURUN_LOSS_SCALE_INTERVAL=5 "$G" "$T/fp16.yaml" --run-dir "$T/grow" --quiet --device cpu \
    --set train.epochs=1 --set train.steps=23 --set checkpoint.every_steps=23
check "GPURUN_LOSS_SCALE_INTERVAL=5: the scale doubles after 5 finite steps; header loss_scale/loss_scale_good" \
    "$PY" - "$T" <<'EOF'
import json, sys, h5py
T = sys.argv[1]
tl = [json.loads(l) for l in open(f"{T}/grow/metrics.jsonl") if '"train"' in l]
sc = [l["loss_scale"] for l in tl]
s = json.load(open(f"{T}/grow/summary.json"))
# replay the rule on the logged scales (each line shows the scale after its step's update):
# a doubling comes with the 5th finite step at one scale, a halving with a skipped step
prev, good = 65536, 0
for x in sc:
    if x == 2 * prev:
        good += 1
        assert good == 5, ("doubled after", good, "finite steps", sc)
        good = 0
    elif x == prev / 2:
        good = 0
    else:
        assert x == prev, sc
        good += 1
    prev = x
assert any(b == 2 * a for a, b in zip(sc, sc[1:])), ("the scale never grew", sc)
f = h5py.File(f"{T}/grow/checkpoints/step-000000023.h5", "r")
assert f.attrs["loss_scale"] == sc[-1], (f.attrs["loss_scale"], sc[-1])
assert f.attrs["precision"] in (b"fp16", "fp16"), f.attrs["precision"]
assert 0 <= int(f.attrs["loss_scale_good"]) < 5, f.attrs["loss_scale_good"]
print("scales", sc[0], "->", sc[-1], "skipped", s["skipped_steps"])
EOF

# backoff: doubling after every finite step drives the scale up until fp16 gradients
# overflow; those steps are skipped and halve it, and training goes on
expect 0 -- env GPURUN_LOSS_SCALE_INTERVAL=1 "$G" "$T/fp16.yaml" --run-dir "$T/backoff" --quiet --device cpu \
    --set train.epochs=1 --set train.steps=40
check "GPURUN_LOSS_SCALE_INTERVAL=1: overflowing steps are skipped and halve the scale; the loss stays finite" \
    "$PY" - "$T" <<'EOF'
import json, math, sys
T = sys.argv[1]
tl = [json.loads(l) for l in open(f"{T}/backoff/metrics.jsonl") if '"train"' in l]
sc = [l["loss_scale"] for l in tl]
s = json.load(open(f"{T}/backoff/summary.json"))
halvings = sum(1 for a, b in zip(sc, sc[1:]) if b == a / 2)
assert halvings >= 2 and s["skipped_steps"] >= halvings, (halvings, s["skipped_steps"], sc)
assert all(math.isfinite(l["loss"]) for l in tl) and s["status"] == "finished", s
print("scales", sc[:12], "... skipped", s["skipped_steps"])
EOF

# AdamW under backoff, a checkpoint after every step: a skipped step leaves weights and
# moments as they were; an applied one is AdamW's update with t = the updates applied
# (step - skipped_steps), as GradScaler skips optimizer.step(); t = step would differ
expect 0 -- env GPURUN_LOSS_SCALE_INTERVAL=1 "$G" "$T/fp16a.yaml" --run-dir "$T/adamw" --quiet --device cpu \
    --set train.epochs=1 --set train.steps=40 --set checkpoint.every_steps=1 --set checkpoint.keep=100
check "fp16 AdamW: skipped steps change nothing; applied ones use t = step - skipped_steps (bias correction)" \
    "$PY" - "$T" <<'EOF'
import sys, h5py, numpy as np
T = sys.argv[1]
lr, wd, b1, b2, eps = 0.002, 0.01, 0.9, 0.999, 1e-8
def load(k):
    with h5py.File(f"{T}/adamw/checkpoints/step-{k:09d}.h5", "r") as f:
        ts = {}
        f["params"].visititems(lambda n, d: ts.__setitem__(n, (d[()].astype(np.float64),
            f[f"optim/{n}/exp_avg"][()].astype(np.float64), f[f"optim/{n}/exp_avg_sq"][()].astype(np.float64)))
            if isinstance(d, h5py.Dataset) else None)
        return int(f.attrs["skipped_steps"]), ts
def err(w0, w1, m1, v1, t):  # the largest relative error of the update w1 - w0 under step count t
    d = w0 * np.float32(1 - lr * wd) - (lr / (1 - b1**t)) * m1 / (np.sqrt(v1) / np.sqrt(1 - b2**t) + eps) - w0
    return float(np.max(np.abs((w1 - w0) - d)) / np.max(np.abs(d)))
prev = load(1)
skips = applied = 0
worst, alt = 0.0, 0.0
for k in range(2, 41):
    cur = load(k)
    if cur[0] == prev[0] + 1:
        skips += 1
        for n in cur[1]:
            assert all(np.array_equal(a, b) for a, b in zip(prev[1][n], cur[1][n])), ("skipped step changed", k, n)
    else:
        assert cur[0] == prev[0], (k, cur[0], prev[0])
        applied += 1
        t = k - cur[0]
        for n, (w1, m1, v1) in cur[1].items():
            worst = max(worst, err(prev[1][n][0], w1, m1, v1, t))
            if cur[0]:
                alt = max(alt, err(prev[1][n][0], w1, m1, v1, k))
    prev = cur
assert skips >= 2 and applied >= 20, (skips, applied)
assert worst < 2e-3, ("updates do not follow t = step - skipped", worst)
assert alt > 10 * worst, ("t = step would fit as well: the check cannot tell them apart", alt, worst)
print(f"{skips} skipped, {applied} applied; update rel err {worst:.1e} with t = step - skipped, {alt:.1e} with t = step")
EOF

# a fixed scale that overflows fp16: nothing absorbs it
expect_fail 5 "inf/NaN at loss scale 1e+30" "loss_scale: dynamic" -- "$G" "$T/fp16.yaml" --run-dir "$T/fixed" \
    --quiet --device cpu --set loss_scale=1e30

# ---------------------------------------------------------------- 3. exact resume in fp16 and bf16
# resume_case NAME YAML: the straight run and one stopped by SIGTERM at step >= 30 and
# resumed with --resume auto give the same losses, scales and weights.h5 bytes
resume_case() {
    local name=$1 yaml=$2 pid i RC
    expect 0 -- env GPURUN_LOSS_SCALE_INTERVAL=3 "$G" "$yaml" --run-dir "$T/straight_$name" --quiet --device cpu "${THREADS[@]}" \
        --set train.epochs=1
    env --default-signal=INT GPURUN_LOSS_SCALE_INTERVAL=3 "$G" "$yaml" --run-dir "$T/stopped_$name" --quiet \
        --device cpu "${THREADS[@]}" --set train.epochs=1 >"$OUT" 2>"$ERR" &
    pid=$!
    i=0
    while kill -0 "$pid" 2>/dev/null && ! grep -q '"step":30,' "$T/stopped_$name/metrics.jsonl" 2>/dev/null &&
        [ $i -lt 6000 ]; do
        sleep 0.005
        i=$((i + 1))
    done
    kill -TERM "$pid" 2>/dev/null
    wait "$pid"
    RC=$?
    CMD="gpurun $(basename "$yaml") --run-dir stopped_$name (SIGTERM at step >= 30)"
    if [ "$RC" -eq 75 ]; then ok; else bad "exit $RC after SIGTERM, expected 75"; show; fi
    expect 0 "resuming from" -- env GPURUN_LOSS_SCALE_INTERVAL=3 "$G" "$yaml" --run-dir "$T/stopped_$name" \
        --device cpu --set train.epochs=1 --resume auto
    check "$name stopped by SIGTERM + --resume auto = the straight run (losses, scales, weights.h5 bytes)" \
        "$PY" "$H" same "$T/straight_$name" "$T/stopped_$name"
}
resume_case fp16a "$T/fp16a.yaml"
# bf16 with AdamW: the CPU's native bf16 kernels where it has them (summary.json says)
spec bf16a 's/^seed: 5/seed: 5\nprecision: bf16/; s/optimizer: .*/optimizer: {type: adamw, lr: 0.002, weight_decay: 0.01}/'
resume_case bf16a "$T/bf16a.yaml"
check "bf16 run: summary.json names its staged ops, and device_detail says whether bf16 is native" "$PY" - "$T" <<'EOF'
import json, sys
s = json.load(open(f"{sys.argv[1]}/straight_bf16a/summary.json"))
d, staged = s["device_detail"], s["half_staged_ops"]
assert "bf16 native" in d or "bf16 staged" in d, d
assert ("conv" in staged.split(", ")) == ("bf16 staged" in d), (d, staged)
assert "softmax_cross_entropy" in staged, staged  # the loss computes in fp32 on the CPU
print(d, "| staged:", staged)
EOF
check "the resumed run logged the straight run's loss scales" "$PY" - "$T" <<'EOF'
import json, sys
T = sys.argv[1]
def sc(p):
    return [(l["step"], l["loss_scale"]) for l in map(json.loads, open(f"{T}/{p}/metrics.jsonl")) if l["kind"] == "train"]
assert sc("straight_fp16a") == sc("stopped_fp16a"), "loss scales differ"
s = [json.load(open(f"{T}/{p}/summary.json"))["skipped_steps"] for p in ("straight_fp16a", "stopped_fp16a")]
assert s[0] == s[1] > 0, ("skipped_steps (over the whole run) differ or none", s)
EOF

e2e_done
