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
#     In bf16 and fp16 within 5e-3 and 5e-4 of one process in the same precision.
#  4. errors (exit 2, at the key or the layer's line): a convolution, a count the group does not
#     divide, a world that is not data x pipeline x tensor; without a launcher, the command;
#  5. faults: SIGTERM to one process stops both at one step with one checkpoint (exit 75); one
#     that stops answering makes the other exit 7 within parallel.timeout_s, naming the sum.
#  6. inside pipeline stages (2 stages x a group of 2, 4 ranks; 2 x 2 x 2 on 8): one process's
#     losses within 1e-6 (MLP, GPT; gpipe, clipping, recomputation), 2 replicas' within 1e-5,
#     checkpoints to and from other layouts, every rank's profile, SIGTERM.
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

# half precision: each part's output is rounded to half before the group's sum (in fp32, rounded
# once), one rounding more than one process makes; bf16 itself moves these losses from fp32's by
# 6e-4 (gpt) and 6e-3 (mlp), the split in bf16 from one bf16 process by 6e-4 and 2e-3
for m in mlp gpt; do
    expect 0 -- "$G" "$T/$m.yaml" --run-dir "$T/$m-bf16" "${ONE[@]}" --set precision=bf16
    expect 0 -- "${MPI[@]}" 2 "$G" "$T/$m.yaml" --run-dir "$T/$m-tp2bf16" "${ONE[@]}" --set precision=bf16 \
        --set parallel.tensor=2
    check "$m in bf16, a tensor group of 2: the losses of 1 bf16 process within 5e-3" \
        "$PY" "$PC" losses "$T/$m-bf16" "$T/$m-tp2bf16" 5e-3
done
expect 0 -- "$G" "$T/gpt.yaml" --run-dir "$T/gpt-fp16" "${ONE[@]}" --set precision=fp16
expect 0 -- "${MPI[@]}" 2 "$G" "$T/gpt.yaml" --run-dir "$T/gpt-tp2fp16" "${ONE[@]}" --set precision=fp16 \
    --set parallel.tensor=2
check "gpt in fp16 (loss scaling), a tensor group of 2: the losses of 1 fp16 process within 5e-4" \
    "$PY" "$PC" losses "$T/gpt-fp16" "$T/gpt-tp2fp16" 5e-4

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
expect 2 "parallel.data: parallel.data 2 x parallel.pipeline 2 x parallel.tensor 2" -- \
    "${MPI[@]}" 4 "$G" "$T/gpt.yaml" --run-dir "$T/bad" "${ONE[@]}" --set parallel.tensor=2 --set parallel.pipeline=2 \
    --set parallel.data=2
expect 2 "parallel.tensor: a model replica is parallel.pipeline 1 x parallel.tensor 2 = 2 processes" \
    "launch it with \`mpirun -np 2 gpurun ...\`" -- "$G" "$T/gpt.yaml" --run-dir "$T/bad" --set parallel.tensor=2

# ---------------------------------------------------------------- 5. faults
# rank 0 waits in a layer's sum over the group most of the time; else in the gradients' norm or
# the agreement on a stop, which its line names as well
e2e_faults "process of the group" "the tensor group's sum of layer [a-z0-9._]+'s (output|input gradient)|the gradients' norm over the tensor group|agreeing on (a stop signal|a checkpoint|the parameters' check)" 2 \
    "${MPI[@]}" 2 "$G" "$T/gpt.yaml" --threads 1 --quiet --set parallel.tensor=2 --set train.steps=200000 \
    --set eval.every_steps=0 --set eval.every_epochs=0 --set checkpoint.every_steps=50

# ---------------------------------------------------------------- 6. inside pipeline stages
PT=(--set parallel.pipeline=2 --set parallel.tensor=2)
check "plan: the MLP's column/row pair crosses the stage cut (the message carries the column's part)" bash -c "
    '$G' plan '$T/mlp.yaml' ${PT[*]} | grep -qE '^1 +flatten0\.\.dense0 ' &&
    '$G' plan '$T/mlp.yaml' ${PT[*]} | grep -qE '^relu0 +relu +sharded' &&
    '$G' plan '$T/mlp.yaml' ${PT[*]} | grep -q '^both: each of the 2 stages is a tensor group of 2, 4 processes'"
for m in mlp gpt; do
    expect 0 -- "${MPI[@]}" 4 "$G" "$T/$m.yaml" --run-dir "$T/$m-pt" "${ONE[@]}" "${PT[@]}"
    check "$m, 2 pipeline stages of a tensor group of 2 (4 ranks): the losses of 1 process within 1e-6" \
        "$PY" "$PC" losses "$T/$m-1" "$T/$m-pt" 1e-6
    check "$m, 2 stages x a group of 2: weights within 1e-5" "$PY" "$PC" weights "$T/$m-1" "$T/$m-pt" 1e-5
done
expect 0 -- "${MPI[@]}" 4 "$G" "$T/gpt.yaml" --run-dir "$T/clip-pt" "${ONE[@]}" "${PT[@]}" --set train.grad_clip=0.2 \
    --set parallel.schedule=gpipe --set train.recompute=blocks
check "gpt, 2 stages x a group of 2, gpipe, clipping (the norm over stages and group), recompute: within 1e-6" \
    "$PY" "$PC" losses "$T/clip-1" "$T/clip-pt" 1e-6
MB4=(--set train.micro_batch=4)
expect 0 -- "${MPI[@]}" 2 "$G" "$T/gpt.yaml" --run-dir "$T/gpt-d2m4" "${ONE[@]}" "${MB4[@]}"
expect 0 -- "${MPI[@]}" 8 "$G" "$T/gpt.yaml" --run-dir "$T/gpt-d2pt" --threads 1 "${MB4[@]}" "${PT[@]}"
check "gpt, 2 replicas x 2 stages x a group of 2 (8 ranks) against 2 replicas: within 1e-5" \
    "$PY" "$PC" losses "$T/gpt-d2m4" "$T/gpt-d2pt" 1e-5
check "the start line says the layout" grep -q "on 2 pipeline stages of a tensor group of 2 each x 2 replicas, run dir" \
    "$T/last.out"
expect 0 -- "${MPI[@]}" 4 "$G" "$T/gpt.yaml" --run-dir "$T/ck-pt" "${ONE[@]}" "${CK[@]}" "${PT[@]}"
expect 0 -- "${MPI[@]}" 2 "$G" "$T/gpt.yaml" --run-dir "$T/ck-pt-tp2" "${ONE[@]}" "${CK[@]}" --set parallel.tensor=2 \
    --resume "$T/ck-pt/checkpoints/step-000000010.h5"
check "a checkpoint of 2 stages x a group of 2 resumed by a group of 2: steps 11-20 within 1e-6" \
    "$PY" "$PC" losses "$T/gpt-1" "$T/ck-pt-tp2" 1e-6 10
expect 0 -- "${MPI[@]}" 4 "$G" "$T/gpt.yaml" --run-dir "$T/ck-1-pt" "${ONE[@]}" "${CK[@]}" "${PT[@]}" \
    --resume "$T/ck-1/checkpoints/step-000000010.h5"
check "a 1-process checkpoint resumed by 2 stages x a group of 2: steps 11-20 within 1e-6" \
    "$PY" "$PC" losses "$T/gpt-1" "$T/ck-1-pt" 1e-6 10
expect 0 -- "${MPI[@]}" 4 "$G" "$T/gpt.yaml" --run-dir "$T/prof-pt" --threads 1 "${PT[@]}" --profile 3
check "--profile: every rank's part (ranks 1-3 beside rank 0's), rank 3's with the group's sums" bash -c "
    for r in 1 2 3; do [ -s '$T/prof-pt/profile.rank'\$r.txt ] && [ -s '$T/prof-pt/trace.rank'\$r.json ] || exit 1; done
    grep -qE '^h1\.mlp_proj +dense +forward' '$T/prof-pt/profile.rank3.txt' &&
    grep -qE '^- +collective +host +[0-9]+' '$T/prof-pt/profile.rank3.txt' &&
    ! grep -qE '^h1\.mlp_proj ' '$T/prof-pt/profile.rank1.txt'"
e2e_bg term-pt "${MPI[@]}" 4 "$G" "$T/gpt.yaml" --threads 1 --quiet "${PT[@]}" --set train.steps=200000 \
    --set eval.every_steps=0 --set eval.every_epochs=0 --set checkpoint.every_steps=50 --run-dir "$T/term-pt"
e2e_hit_rank TERM
check "SIGTERM to one of 2 stages x a group of 2: mpirun exits 75 (got $RC)" test "$RC" -eq 75
e2e_same_stop term-pt 4
e2e_done
