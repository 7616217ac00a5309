#!/usr/bin/env bash
# e2e_cnn.sh — the convolutional configs end to end through the CLI:
#   - `gpurun plan` of configs/resnet50.yaml gives torchvision's exact
#     parameter count (25,557,032) and ~8.2 GFLOPs forward per image, without
#     the ImageNet file (shapes from model.input); resnet18-cifar10 likewise;
#   - resnet18-cifar10 trains a few steps on synthetic 3x32x32 data and
#     exports weights.h5 with batchnorm running stats that moved;
#   - the Fashion-MNIST CNN trains 300 steps (batch 64) to >= 80% test
#     accuracy, evaluating with batchnorm in eval mode.
#
#   bash tests/e2e_cnn.sh GPURUN_BINARY SOURCE_DIR TMPDIR
. "$(dirname "$0")/e2e_lib.bash" "$@"
e2e_need_py h5py numpy

# ---- plans
"$G" plan "$SRC/configs/resnet50.yaml" >"$T/r50.plan" 2>&1 || bad "plan resnet50 failed: $(head -3 "$T/r50.plan")"
check "resnet50: 25,557,032 parameters" grep -q "total parameters: 25,557,032$" "$T/r50.plan"
check "resnet50: ~8.2 GFLOPs forward per image" "$PY" -c '
import re, sys
m = re.search(r"forward ([0-9,]+)", open(sys.argv[1]).read())
f = int(m.group(1).replace(",", ""))
print(f); sys.exit(0 if 8.0e9 < f < 8.4e9 else 1)' "$T/r50.plan"
check "resnet50: FLOPs per optimizer step = batch 256 x forward + backward per sample" "$PY" -c '
import re, sys
t = open(sys.argv[1]).read()
per = int(re.search(r"forward \+ backward ([0-9,]+)", t).group(1).replace(",", ""))
step, batch = re.search(r"FLOPs per optimizer step: ([0-9,]+) \(batch ([0-9]+)\)", t).groups()
print(per, step, batch); sys.exit(0 if int(step.replace(",", "")) == 256 * per and batch == "256" else 1)' "$T/r50.plan"
check "resnet50: says the data file was not opened" grep -q "shapes from model.input" "$T/r50.plan"
"$G" plan "$SRC/configs/resnet18-cifar10.yaml" >"$T/r18.plan" 2>&1 || bad "plan resnet18-cifar10 failed"
check "resnet18-cifar10: 11,173,962 parameters" grep -q "total parameters: 11,173,962$" "$T/r18.plan"

# ---- resnet18-cifar10 on synthetic data: a few steps, weights exported
"$G" data synthetic "$T/syn.h5" --n 128 --test 32 --shape 3,32,32 >/dev/null 2>&1 || bad "synthetic data"
"$G" "$SRC/configs/resnet18-cifar10.yaml" --quiet --run-dir "$T/r18" --set data.train.path="$T/syn.h5" \
    --set data.val.path="$T/syn.h5" --set train.batch_size=16 --set train.steps=4 --set log.every_steps=1 \
    >"$T/r18.out" 2>&1 || bad "resnet18-cifar10 run failed: $(tail -3 "$T/r18.out")"
check "resnet18-cifar10: 4 finite losses, weights.h5 with moved running stats" "$PY" - "$T/r18" <<'EOF'
import json, sys, h5py, numpy as np
d = sys.argv[1]
losses = [json.loads(l)["loss"] for l in open(d + "/metrics.jsonl") if '"train"' in l]
assert len(losses) == 4 and all(np.isfinite(losses)), losses
with h5py.File(d + "/weights.h5", "r") as f:
    assert f["/params/conv0/weight"].shape == (64, 3, 3, 3)
    assert f["/params/down0.proj/weight"].shape == (128, 64, 1, 1)
    rv = f["/state/batchnorm0/running_var"][...]
    rm = f["/state/basic1.batchnorm1/running_mean"][...]
    assert rv.shape == (64,) and not np.allclose(rv, 1.0) and not np.allclose(rm, 0.0)
EOF

# ---- the Fashion-MNIST CNN learns (batchnorm in eval mode for the test split)
if e2e_have_fmnist; then
    "$G" data fashion-mnist "$T/fm.h5" >/dev/null 2>&1 || bad "gpurun data fashion-mnist (fixture)"
    sed "s#data/fashion-mnist.h5#$T/fm.h5#g" "$SRC/configs/fashion-mnist-cnn.yaml" >"$T/cnn.yaml"
    "$G" "$T/cnn.yaml" --quiet --run-dir "$T/cnn" --set train.steps=300 >"$T/cnn.out" 2>&1 ||
        bad "cnn run failed: $(tail -3 "$T/cnn.out")"
    acc=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["last_val_accuracy"])' "$T/cnn/summary.json" 2>/dev/null)
    echo "fashion-mnist-cnn after 300 steps: test accuracy $acc"
    check "fashion-mnist-cnn: >= 0.80 test accuracy after 300 steps" "$PY" -c 'import sys; sys.exit(0 if float(sys.argv[1]) >= 0.80 else 1)' "${acc:-0}"
else
    e2e_skip "the Fashion-MNIST CNN run: $E2E_NO_FMNIST"
fi

e2e_done
