#!/usr/bin/env bash
# e2e_tensor.sh — tensor parallelism, launched as users launch it: `mpirun -np T gpurun job.yaml
# --set parallel.tensor=T` (Open MPI, --oversubscribe; a tensor group's process each, DESIGN 2.4).
#
#  1. parity: 2 processes splitting an MLP's dense pair (column, then row) and a small GPT's
#     blocks (attention by heads, the MLP's pair; embeddings, layernorms, dropout after the
#     projections and a head tied to the embedding replicated) give one process's losses over
#     20 steps within 1e-6 and its weights within 1e-5 of the largest magnitude (SGD with
#     momentum: AdamW's first steps move each weight by lr x the sign of its gradient, which the
#     split's other order of sums can turn where a gradient is near 0); clipping too (the norm
#     summed over the group, the replicated layers counted once), and recomputed blocks; 2 data replicas x 2 (4 ranks)
#     within 1e-5, and AdamW's losses within 1e-3;
#  2. checkpoints carry no layout: a 2-process group's step-10 checkpoint resumed by 1 process,
#     and a 1-process one by a group of 2, continue as the straight run (within 1e-6);
#  3. each rank's view: --profile times the part's split steps (the group's sums as
#     collectives), the start line and summary.json say the world;
#  4. errors (exit 2, at the key or the layer's line): a convolution, a count the group does not
#     divide, with pipeline stages, in bf16; without a launcher, the command that launches it;
#  5. faults: SIGTERM to one process stops both at one step with one checkpoint (exit 75); one
#     that stops answering makes the other exit 7 within parallel.timeout_s, naming the sum.
#
#   bash tests/e2e_tensor.sh GPURUN_BINARY SOURCE_DIR TMPDIR
. "$(dirname "$0")/e2e_lib.bash" "$@"
e2e_need_py h5py numpy
e2e_need_mpirun
PC=$SRC/tests/parallel_check.py
ONE=(--threads 1 --quiet)

expect 0 -- "$G" data synthetic "$T/syn.h5" --n 2000 --shape 1,12,12 --classes 10 --test 256 --seed 5
e2e_text_h5 "$T/text.h5" "a tensor group splits each dense pair by columns and then by rows"

cat >"$T/mlp.yaml" <<EOF
name: mlp
seed: 7
device: cpu
data:
  train: {path: $T/syn.h5, group: /train}
  val: {path: $T/syn.h5, group: /test}
model:
  layers: [flatten, {dense: {units: 64}}, relu, {dense: {units: 32}}, relu, {dense: {units: 10}}]
train:
  batch_size: 32
  micro_batch: 16
  steps: 20
  optimizer: {type: sgd, lr: 0.05, momentum: 0.9}
eval: {every_steps: 20}
log: {every_steps: 1, tensorboard: false}
EOF
cat >"$T/gpt.yaml" <<EOF
name: gpt
seed: 7
device: cpu
$(e2e_tiny_gpt "$T/text.h5" 4 ", tied: wte")
train:
  batch_size: 16
  micro_batch: 8
  steps: 20
  optimizer: {type: sgd, lr: 0.1, momentum: 0.9}
  metrics: []
eval: {every_steps: 20}
log: {every_steps: 1, tensorboard: false}
EOF

# ---------------------------------------------------------------- 1. parity
for m in mlp gpt; do
    expect 0 -- "$G" "$T/$m.yaml" --run-dir "$T/$m-1" "${ONE[@]}"
    expect 0 -- "${MPI[@]}" 2 "$G" "$T/$m.yaml" --run-dir "$T/$m-tp2" "${ONE[@]}" --set parallel.tensor=2
    check "$m, a tensor group of 2: the losses of 1 process over 20 steps within 1e-6" \
        "$PY" "$PC" losses "$T/$m-1" "$T/$m-tp2" 1e-6
    check "$m, a tensor group of 2: weights within 1e-5" "$PY" "$PC" weights "$T/$m-1" "$T/$m-tp2" 1e-5
done
expect 0 -- "$G" "$T/gpt.yaml" --run-dir "$T/clip-1" "${ONE[@]}" --set train.grad_clip=0.2
expect 0 -- "${MPI[@]}" 2 "$G" "$T/gpt.yaml" --run-dir "$T/clip-tp2" "${ONE[@]}" --set train.grad_clip=0.2 \
    --set parallel.tensor=2
check "gpt with gradient clipping (the group's norm): losses within 1e-6" \
    "$PY" "$PC" losses "$T/clip-1" "$T/clip-tp2" 1e-6
expect 0 -- "${MPI[@]}" 2 "$G" "$T/gpt.yaml" --run-dir "$T/rc-tp2" "${ONE[@]}" --set train.recompute=blocks \
    --set parallel.tensor=2
check "gpt with train.recompute: blocks in the group's parts: losses within 1e-6" \
    "$PY" "$PC" losses "$T/gpt-1" "$T/rc-tp2" 1e-6
expect 0 -- "${MPI[@]}" 2 "$G" "$T/gpt.yaml" --run-dir "$T/gpt-d2" "${ONE[@]}"
expect 0 -- "${MPI[@]}" 4 "$G" "$T/gpt.yaml" --run-dir "$T/gpt-d2tp2" "${ONE[@]}" --set parallel.tensor=2
check "gpt, 2 replicas x a group of 2 (4 ranks) against 2 replicas: within 1e-5" \
    "$PY" "$PC" losses "$T/gpt-d2" "$T/gpt-d2tp2" 1e-5
sed 's/optimizer: {type: sgd, lr: 0.1, momentum: 0.9}/optimizer: {type: adamw, lr: 3.0e-3}/' "$T/gpt.yaml" >"$T/adam.yaml"
expect 0 -- "$G" "$T/adam.yaml" --run-dir "$T/adam-1" "${ONE[@]}"
expect 0 -- "${MPI[@]}" 2 "$G" "$T/adam.yaml" --run-dir "$T/adam-tp2" "${ONE[@]}" --set parallel.tensor=2
check "gpt with AdamW: losses within 1e-3 (its sign-like first steps)" \
    "$PY" "$PC" losses "$T/adam-1" "$T/adam-tp2" 1e-3

# ---------------------------------------------------------------- 2. checkpoints carry no layout
CK=(--set checkpoint.every_steps=10)
expect 0 -- "${MPI[@]}" 2 "$G" "$T/gpt.yaml" --run-dir "$T/ck-tp2" "${ONE[@]}" "${CK[@]}" --set parallel.tensor=2
expect 0 -- "$G" "$T/gpt.yaml" --run-dir "$T/ck-tp2to1" "${ONE[@]}" "${CK[@]}" \
    --resume "$T/ck-tp2/checkpoints/step-000000010.h5"
check "a group's checkpoint (step 10) resumed by 1 process: steps 11-20 within 1e-6" \
    "$PY" "$PC" losses "$T/gpt-1" "$T/ck-tp2to1" 1e-6 10
expect 0 -- "$G" "$T/gpt.yaml" --run-dir "$T/ck-1" "${ONE[@]}" "${CK[@]}"
expect 0 -- "${MPI[@]}" 2 "$G" "$T/gpt.yaml" --run-dir "$T/ck-1to2" "${ONE[@]}" "${CK[@]}" --set parallel.tensor=2 \
    --resume "$T/ck-1/checkpoints/step-000000010.h5"
check "a 1-process checkpoint resumed by a group of 2: steps 11-20 within 1e-6" \
    "$PY" "$PC" losses "$T/gpt-1" "$T/ck-1to2" 1e-6 10
check "... and its weights within 1e-5" "$PY" "$PC" weights "$T/gpt-1" "$T/ck-1to2" 1e-5

# ---------------------------------------------------------------- 3. what a rank shows
expect 0 -- "${MPI[@]}" 2 "$G" "$T/gpt.yaml" --run-dir "$T/prof" --threads 1 --set parallel.tensor=2 --profile 3
check "--profile: the part's split steps timed, the group's sums as collectives" bash -c "
    grep -qE '^h0\\.attn +attention_bwd +backward' '$T/prof/profile.txt' &&
    grep -qE '^- +collective +host +[0-9]+' '$T/prof/profile.txt'"
check "the start line says the group" grep -q "batch 16 = 2 x 8 micro-batches on a tensor group of 2, run dir" \
    "$T/last.out"
check "summary.json: world_size 2" grep -q '"world_size":2' "$T/gpt-tp2/summary.json"

# ---------------------------------------------------------------- 4. errors
cat >"$T/cnn.yaml" <<EOF
data: {train: {path: $T/syn.h5, group: /train}}
model:
  layers:
    - {conv: {filters: 4, kernel: 3}, name: c1}
    - flatten
    - {dense: {units: 10}}
train: {batch_size: 32, steps: 1, optimizer: {lr: 0.1}}
EOF
expect 2 "cnn.yaml:4:7: model: layer 'c1': tensor parallelism splits dense layers and attention heads" -- \
    "${MPI[@]}" 2 "$G" "$T/cnn.yaml" --run-dir "$T/bad" "${ONE[@]}" --set parallel.tensor=2
check "no run directory left" test ! -e "$T/bad"
expect 2 "gpt.yaml:16:11: model: layer 'h0.attn': its 4 heads do not split over parallel.tensor 3 processes" -- \
    "${MPI[@]}" 3 "$G" "$T/gpt.yaml" --run-dir "$T/bad" "${ONE[@]}" --set parallel.tensor=3
expect 2 "parallel.tensor: 2 with parallel.pipeline 2: tensor parallelism does not run inside pipeline stages yet" -- \
    "${MPI[@]}" 4 "$G" "$T/gpt.yaml" --run-dir "$T/bad" "${ONE[@]}" --set parallel.tensor=2 --set parallel.pipeline=2
expect 2 "precision: bf16 with parallel.tensor 2: tensor parallelism sums fp32 activations only yet" -- \
    "${MPI[@]}" 2 "$G" "$T/gpt.yaml" --run-dir "$T/bad" "${ONE[@]}" --set parallel.tensor=2 --set precision=bf16
expect 2 "parallel.tensor: a model replica is parallel.pipeline 1 x parallel.tensor 2 = 2 processes" \
    "launch it with \`mpirun -np 2 gpurun ...\`" -- "$G" "$T/gpt.yaml" --run-dir "$T/bad" --set parallel.tensor=2

# ---------------------------------------------------------------- 5. faults
# rank 0 waits in a layer's sum over the group most of the time; else in the gradients' norm or
# the agreement on a stop, which its line names as well
e2e_faults "process of the group" "the tensor group's sum of layer [a-z0-9._]+'s (output|input gradient)|the gradients' norm over the tensor group|agreeing on a (stop signal|checkpoint)" \
    "${MPI[@]}" 2 "$G" "$T/gpt.yaml" --threads 1 --quiet --set parallel.tensor=2 --set train.steps=200000 \
    --set eval.every_steps=0 --set checkpoint.every_steps=50
e2e_done
