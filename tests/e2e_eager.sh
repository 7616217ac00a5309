#!/usr/bin/env bash
# e2e_eager.sh — the optimizer update applied to each parameter as the pass goes (runner/eager.h),
# run as a user runs it:
#
#  1. the same bits: a run updated eagerly (the CPU default) ends with the same weights, optimizer
#     state and losses as the update after the backward pass (train.grad_clip: 1e30 takes that
#     path and multiplies by exactly 1): SGD with momentum on an MLP; nesterov and weight decay on
#     a CNN with batchnorm (state that is not updated); AdamW with parameter groups (an lr
#     multiplier, decay on matrices only, a frozen bias), gradient accumulation and a schedule;
#  2. what it says: summary.json's optimizer_update is "eager", or "after_backward" where the
#     eager update does not apply (grad_clip); --profile's optimizer row gathers the update's
#     parts, several a step;
#  3. a stop (SIGTERM) mid-run resumes to the same weights as the run that was not stopped.
#
#   bash tests/e2e_eager.sh GPURUN_BINARY SOURCE_DIR TMPDIR
. "$(dirname "$0")/e2e_lib.bash" "$@"
e2e_need_py h5py numpy
PC=$SRC/tests/parallel_check.py
ONE=(--threads 2 --quiet)

expect 0 -- "$G" data synthetic "$T/syn.h5" --n 512 --shape 1,12,12 --classes 10 --test 64 --seed 3
# job NAME STEPS OPTIMIZER-YAML MODEL-YAML [TRAIN-YAML]: $T/NAME.yaml on the synthetic images
job() {
    cat >"$T/$1.yaml" <<EOF
name: $1
seed: 11
device: cpu
data:
  train: {path: $T/syn.h5, group: /train}
  val: {path: $T/syn.h5, group: /test}
model:
  layers: $4
train:
  batch_size: 32
  steps: $2
  optimizer: $3
${5:-}
eval: {every_steps: $(($2 / 2))}
log: {every_steps: 1, tensorboard: false}
EOF
}
job mlp 8 "{type: sgd, lr: 0.05, momentum: 0.9}" \
    "[flatten, {dense: {units: 48}}, relu, {dense: {units: 32}}, relu, {dense: {units: 10}}]"
job cnn 8 "{type: sgd, lr: 0.05, momentum: 0.9, nesterov: true, weight_decay: 0.001}" \
    "[{conv: {filters: 8, kernel: 3, padding: 1}}, batchnorm, relu, {maxpool: {kernel: 2}}, flatten,
     {dense: {units: 32}}, relu, {dense: {units: 10}}]"
job adamw 8 "{type: adamw, lr: 0.003, weight_decay: 0.01, decay: matrices,
              groups: [{params: dense1.*, lr_mult: 0.5}, {params: dense2.bias, frozen: true}]}" \
    "[flatten, {dense: {units: 48}}, relu, {dense: {units: 32}}, relu, {dense: {units: 10}}]" \
    "  micro_batch: 16
  schedule: {type: cosine, warmup_steps: 2}"

# the last checkpoint of two runs: every dataset (weights, optimizer state, layer state) the same bits
same_ckpt() {
    "$PY" - "$1" "$2" <<'EOF'
import glob, sys
import h5py, numpy as np
a, b = (sorted(glob.glob(r + "/checkpoints/step-*.h5"))[-1] for r in sys.argv[1:3])
fa, fb = h5py.File(a, "r"), h5py.File(b, "r")
names = []
fa.visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Dataset) else None)
assert any(n.startswith("optim/") for n in names) or "adamw" not in a, names
for n in names:
    if n not in fb or not np.array_equal(fa[n][()], fb[n][()]):
        sys.exit("%s differs between %s and %s" % (n, a, b))
print(len(names), "datasets the same")
EOF
}
updated() { "$PY" -c 'import json,sys; print(json.load(open(sys.argv[1] + "/summary.json"))["optimizer_update"])' "$1"; }

# ---------------------------------------------------------------- 1. the same bits
# pair NAME ARGS...: $T/NAME-e (eager) and $T/NAME-a (after the pass), bit for bit
pair() {
    local name=$1
    shift
    expect 0 -- "$G" "$@" --run-dir "$T/$name-e" "${ONE[@]}"
    expect 0 -- "$G" "$@" --run-dir "$T/$name-a" "${ONE[@]}" --set train.grad_clip=1e30
    check "$name: the eager run says so" test "$(updated "$T/$name-e")" = eager
    check "$name: grad_clip updates after the backward pass, and says so" test "$(updated "$T/$name-a")" = after_backward
    check "$name: eager and after-the-pass weights bit for bit" "$PY" "$PC" weights "$T/$name-e" "$T/$name-a" 0
    check "$name: eager and after-the-pass losses and evaluations bit for bit" \
        "$PY" "$PC" losses "$T/$name-e" "$T/$name-a" 0
    check "$name: the checkpoints (optimizer state included) bit for bit" same_ckpt "$T/$name-e" "$T/$name-a"
}
pair mlp "$T/mlp.yaml"
pair cnn "$T/cnn.yaml"
pair adamw "$T/adamw.yaml"
pair mlp16 "$T/mlp.yaml" --set precision=bf16

# ---------------------------------------------------------------- 2. what it says
expect 0 -- "$G" "$T/mlp.yaml" --run-dir "$T/prof" "${ONE[@]}" --profile 3
check "--profile: the optimizer row holds the update's parts, several a step (one a step after the pass)" \
    "$PY" - "$T/prof/profile.txt" <<'EOF'
import re, sys
rows = [l for l in open(sys.argv[1]) if re.match(r"^-\s+optimizer\s", l)]
assert len(rows) == 1, rows
calls = int(rows[0].split()[3])
assert calls > 3, rows[0]
EOF

# ---------------------------------------------------------------- 3. a stop and a resume
# (tests/e2e_spot.sh stops and resumes an eager run 30 times; here once, against the whole run)
job long 40 "{type: sgd, lr: 0.05, momentum: 0.9}" \
    "[flatten, {dense: {units: 48}}, relu, {dense: {units: 32}}, relu, {dense: {units: 10}}]"
expect 0 -- "$G" "$T/long.yaml" --run-dir "$T/whole" "${ONE[@]}"
"$G" "$T/long.yaml" --run-dir "$T/cut" "${ONE[@]}" >"$T/cut.out" 2>&1 &
pid=$!
signal_when $pid TERM step_ge "$T/cut/metrics.jsonl" 7
wait $pid
check "the stopped run exited 75 before its end" "$PY" -c '
import json, sys
s = json.load(open(sys.argv[1] + "/summary.json"))
assert s["status"] == "stopped" and s["exit_code"] == 75 and 0 < s["steps"] < 40, (s["status"], s["steps"])' "$T/cut"
expect 0 -- "$G" "$T/long.yaml" --run-dir "$T/cut" "${ONE[@]}" --resume auto
check "stopped and resumed: the same weights as the whole run, bit for bit" "$PY" "$PC" weights "$T/whole" "$T/cut" 0

e2e_done
