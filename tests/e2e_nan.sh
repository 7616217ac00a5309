#!/usr/bin/env bash
# e2e_nan.sh — NaN never finishes as success:
#   - float images holding NaN/inf: exit 3 naming the file, the images dataset and
#     the sample, whether the split is held in memory (checked at open) or read
#     from the file (checked as the batch is read: earlier steps run first);
#   - model.init_from with a NaN or inf tensor: exit 6 naming the tensor;
#   - gradients that overflow to inf while the loss stays finite: exit 5 naming
#     the step and the first layer (graph order) whose gradient is not finite;
#   - parameters that overflow to inf through the update (a huge lr) with finite
#     gradients: exit 5 naming the tensor;
#   and each divergence leaves summary.json "diverged" and no weights.h5.
#
#   bash tests/e2e_nan.sh GPURUN_BINARY SOURCE_DIR TMPDIR
#
# Tiny HDF5 files (python3 + h5py) and tiny specs: a few seconds.
. "$(dirname "$0")/e2e_lib.bash" "$@"
e2e_need_py h5py numpy

"$PY" - "$T" <<'EOF' || { echo "FAIL: cannot make HDF5 fixtures with $PY (h5py, numpy)"; echo "0 passed, 1 failed"; exit 1; }
import sys, h5py, numpy as np
T = sys.argv[1]
rng = np.random.default_rng(0)
img = rng.random((64, 1, 4, 4), dtype=np.float32)
lab = (np.arange(64) % 10).astype(np.uint8)

def w(name, images, labels=lab):
    with h5py.File(f"{T}/{name}.h5", "w") as f:
        g = f.create_group("train")
        g["images"] = images
        g["labels"] = labels

w("good", img)
bad = img.copy(); bad[37, 0, 2, 1] = np.nan; bad[50, 0, 0, 0] = np.inf
w("nanpix", bad)
w("nanpix16", bad.astype(np.float16))
w("zeros", img, np.zeros(64, np.uint8))

# init_from files laid out as a checkpoint's /params (no crc32c attributes: a hand-made file)
def params(name, d0w, d0b, d1w, d1b):
    with h5py.File(f"{T}/{name}.h5", "w") as f:
        f["params/dense0/weight"] = np.asarray(d0w, np.float32)
        f["params/dense0/bias"] = np.asarray(d0b, np.float32)
        f["params/dense1/weight"] = np.asarray(d1w, np.float32)
        f["params/dense1/bias"] = np.asarray(d1b, np.float32)

w0 = rng.normal(0, 0.25, (8, 16)).astype(np.float32)
w1 = rng.normal(0, 0.35, (10, 8)).astype(np.float32)
b1 = np.zeros(10, np.float32); b1n = b1.copy(); b1n[3] = np.nan
params("init_ok", w0, np.zeros(8), w1, b1)
params("init_nan", w0, np.zeros(8), w1, b1n)
w0i = w0.copy(); w0i[2, 5] = -np.inf
params("init_inf", w0i, np.zeros(8), w1, b1)
# overflow in the backward only: h = relu(0 x + 1.2e-38) is tiny, so the logits
# (+-28.8) and the loss (~57) are finite, but dh = dz W1 is 3.75e37 per sample
# (W1 rows +-3e38; every label 0), and its sums over 16 samples (dW0, dbias0) overflow to inf
big = np.zeros((10, 8), np.float32); big[0, :] = -3e38; big[1, :] = 3e38
params("init_overflow", np.zeros((8, 16)), np.full(8, 1.2e-38), big, np.zeros(10))
EOF

# spec NAME DATA [INIT [EXTRA-LINE...]]: $T/NAME.yaml, a tiny MLP on $T/DATA.h5 (/train), batch 16,
# 3 steps, a checkpoint every step; INIT (when not empty): model.init_from $T/INIT.h5
spec() {
    local name=$1 data=$2 init=${3:-}
    shift 2
    [ $# -gt 0 ] && shift
    {
        echo "name: $name"
        echo "seed: 0"
        echo "data:"
        echo "  train: {path: $T/$data.h5, group: /train}"
        echo "  shuffle: false"
        echo "model:"
        [ -n "$init" ] && echo "  init_from: $T/$init.h5"
        echo "  layers:"
        echo "    - flatten"
        echo "    - dense: {units: 8}"
        echo "    - relu"
        echo "    - dense: {units: 10}"
        echo "train:"
        echo "  batch_size: 16"
        echo "  steps: 3"
        echo "  optimizer: {type: sgd, lr: 0.1}"
        echo "log: {every_steps: 1}"
        echo "checkpoint: {every_steps: 1}"
        for l in "$@"; do echo "$l"; done
    } >"$T/$name.yaml"
}

# diverged RUNDIR: summary.json says diverged and there is no weights.h5
diverged() {
    grep -q '"status": *"diverged"' "$1/summary.json" && [ ! -e "$1/weights.h5" ]
}
# no_nan_files RUNDIR: no checkpoint or weights file of the run holds inf/NaN
no_nan_files() {
    "$PY" - "$1" <<'EOF'
import sys, glob, h5py, numpy as np
bad = []
for p in glob.glob(sys.argv[1] + "/checkpoints/*.h5") + glob.glob(sys.argv[1] + "/weights.h5"):
    with h5py.File(p, "r") as f:
        f.visititems(lambda n, o: bad.append(f"{p}:{n}") if isinstance(o, h5py.Dataset) and o.dtype.kind == "f"
                     and not np.isfinite(o[()]).all() else None)
print("\n".join(bad)); sys.exit(1 if bad else 0)
EOF
}

# ---- a clean run first: the fixtures and specs work
spec ok good
expect_ok "done:" -- "$G" "$T/ok.yaml" --run-dir "$T/r_ok"
check "a clean run finishes (exit_code 0 in summary.json)" grep -q '"status": *"finished", *"exit_code": *0,' \
    "$T/r_ok/summary.json"
spec init_ok good init_ok
expect_ok "done:" -- "$G" "$T/init_ok.yaml" --run-dir "$T/r_init_ok"

# ---- data: NaN pixels are exit 3 naming file, dataset and sample
spec nanpix nanpix
expect 3 "$T/nanpix.h5" "/train/images" "sample 37 holds NaN" "(and 1 more sample)" -- \
    "$G" "$T/nanpix.yaml" --run-dir "$T/r_nanpix"
spec nanpix16 nanpix16
expect 3 "$T/nanpix16.h5" "/train/images" "sample 37 holds NaN" -- "$G" "$T/nanpix16.yaml" --run-dir "$T/r_nanpix16"
# read from the file: steps 1-2 (samples 0-31) run, sample 37 is in step 3's batch
GPURUN_DATA_MEM_LIMIT=0 expect 3 "$T/nanpix.h5" "/train/images" "sample 37 holds NaN" -- \
    "$G" "$T/nanpix.yaml" --run-dir "$T/r_nanpix_disk"
check "streamed: two steps ran before the bad batch" grep -q '"step":2' "$T/r_nanpix_disk/metrics.jsonl"
check "streamed: no weights.h5" test ! -e "$T/r_nanpix_disk/weights.h5"
check "streamed: summary.json says failed, with exit code 3 and the message" "$PY" -c "
import json, sys
s = json.load(open(sys.argv[1]))
assert s['status'] == 'failed' and s['exit_code'] == 3 and 'sample 37 holds NaN' in s['error'], s" \
    "$T/r_nanpix_disk/summary.json"
# the same samples through eval's val split
spec nanval good "" "eval: {every_steps: 1}"
sed -i "s|^  shuffle: false|  val: {path: $T/nanpix.h5, group: /train}\n  shuffle: false|" "$T/nanval.yaml"
expect 3 "$T/nanpix.h5" "/train/images" "sample 37" -- "$G" "$T/nanval.yaml" --run-dir "$T/r_nanval"

# ---- init_from: a NaN or inf tensor is exit 6 naming it
spec init_nan good init_nan
spec init_inf good init_inf
expect 6 "$T/init_nan.h5" "/params/dense1/bias" "element 3 is NaN" -- "$G" "$T/init_nan.yaml" --run-dir "$T/r_init_nan"
expect 6 "$T/init_inf.h5" "/params/dense0/weight" "element 37 is -inf" -- \
    "$G" "$T/init_inf.yaml" --run-dir "$T/r_init_inf"
check "init_from refused: no weights.h5" test ! -e "$T/r_init_nan/weights.h5"

# ---- gradients overflow while the loss is finite: exit 5 naming step 1 and layer dense0
spec overflow zeros init_overflow
expect 5 "training diverged at step 1 (epoch 1)" "gradient of layer dense0 (dense0/" "though the loss was 5" -- \
    "$G" "$T/overflow.yaml" --run-dir "$T/r_overflow"
check "gradient overflow: summary diverged, no weights.h5" diverged "$T/r_overflow"
check "gradient overflow: no checkpoint or weights file holds inf/NaN" no_nan_files "$T/r_overflow"
check "gradient overflow: no metrics line for the step" bash -c "! grep -q '\"kind\":\"train\"' $T/r_overflow/metrics.jsonl"
# the same in bf16 (mixed precision, no loss scaling)
expect 5 "training diverged at step 1" "gradient of layer dense0" -- \
    "$G" "$T/overflow.yaml" --run-dir "$T/r_overflow_bf16" --set precision=bf16
# and with gradient clipping on (its norm is the same one reduction)
expect 5 "training diverged at step 1" "gradient of layer dense0" -- \
    "$G" "$T/overflow.yaml" --run-dir "$T/r_overflow_clip" --set train.grad_clip=1.0

# ---- parameters overflow through the update (finite gradients, an lr past float's range): exit 5
# at step 1's metrics line, before anything is written
spec hugelr good
sed -i 's/lr: 0.1/lr: 1.0e+300/; s/steps: 3/steps: 1/' "$T/hugelr.yaml"
expect 5 "training diverged at step 1 (epoch 1)" "parameters hold inf/NaN" "first: layer dense0" -- \
    "$G" "$T/hugelr.yaml" --run-dir "$T/r_hugelr"
check "huge lr: summary diverged, no weights.h5" diverged "$T/r_hugelr"
check "huge lr: no checkpoint or weights file holds inf/NaN" no_nan_files "$T/r_hugelr"

e2e_done
