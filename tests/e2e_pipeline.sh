#!/usr/bin/env bash
# e2e_pipeline.sh — pipeline parallelism, launched as users launch it: `mpirun -np P gpurun
# job.yaml --set parallel.pipeline=P` (Open MPI, --oversubscribe; a stage a process, DESIGN 2.4).
#
#  1. exactness: 1f1b with 2 stages and 8 micro-batches a step ends bit for bit where one
#     process accumulating the same 8 micro-batches ends (every weight of weights.h5, every
#     logged loss), on an MLP, a CNN with batchnorm (its running statistics too) and a small
#     GPT (2 blocks, untied head, AdamW, dropout); so do gpipe and 3 stages; 2 data replicas x
#     2 stages (4 ranks) give the losses of one process within 1e-5 (the MLP) and equal 2 data
#     replicas alone, bit for bit (the MLP, the CNN, whose batchnorm normalizes each replica's
#     micro-batch, and the GPT, whose dropout draws each replica's masks); gradient clipping (the norm summed over the stages) within 1e-6; a head
#     tied to the embedding on the other stage (the copies' gradients summed) within 1e-6;
#     the MLP in bf16 and fp16 (loss scaling) and the CNN in bf16, bit for bit too;
#  2. checkpoints carry no layout: a 2-stage run's step-6 checkpoint resumed by 1 process, and
#     a 1-process one resumed by 2 stages, end as the straight run (bit for bit; the GPT), and
#     by 2 replicas x 2 stages within 1e-5 (the MLP);
#  3. summary.json's pipeline figures: stages, micro-batches, schedule, the predicted and
#     measured idle time, the first stage's micro-batches in flight (2 under 1f1b, 8 under
#     gpipe) and its activation bytes; --profile writes each stage's profile and trace;
#  4. errors: parallel.microbatches that disagrees with train.micro_batch (exit 2 naming the
#     key, before MPI starts); stages that do not fit the memory (exit 4 naming the stage);
#  5. faults: SIGTERM to one stage stops both at the same step with one committed checkpoint
#     (exit 75); a stage that stops answering (SIGSTOP) makes the other exit 7 within
#     parallel.timeout_s, naming the message, the peer stage and the step; one stage's weights
#     turning inf/NaN stops both at that step (exit 5), none left waiting.
#
#   bash tests/e2e_pipeline.sh GPURUN_BINARY SOURCE_DIR TMPDIR
. "$(dirname "$0")/e2e_lib.bash" "$@"
e2e_need_py h5py numpy
e2e_need_mpirun
PC=$SRC/tests/parallel_check.py
ONE=(--threads 1 --quiet)

# ---------------------------------------------------------------- fixtures
expect 0 -- "$G" data synthetic "$T/syn.h5" --n 2000 --shape 1,12,12 --classes 10 --test 256 --seed 5
e2e_text_h5 "$T/text.h5" "the a pipeline stage sends its activations to the next one and gets gradients back"

# job NAME MODEL-YAML [TRAIN-YAML]: $T/NAME.yaml, batch 32 in micro-batches of 4 (8 a step), 12
# steps, SGD unless TRAIN-YAML says otherwise
SGD="  optimizer: {type: sgd, lr: 0.05, momentum: 0.9}"
job() {
    local train=${3:-$SGD}
    cat >"$T/$1.yaml" <<EOF
name: $1
seed: 7
device: cpu
$2
train:
  batch_size: 32
  micro_batch: 4
  steps: 12
$train
eval: {every_steps: 12}
log: {every_steps: 1, tensorboard: false}
EOF
}
IMG="data:
  train: {path: $T/syn.h5, group: /train}
  val: {path: $T/syn.h5, group: /test}"
job mlp "$IMG
model:
  layers: [flatten, {dense: {units: 64}}, relu, {dense: {units: 32}}, relu, {dense: {units: 10}}]"
job cnn "$IMG
model:
  layers: [{conv: {filters: 8, kernel: 3, padding: 1}}, batchnorm, relu, {maxpool: {kernel: 2}},
           {conv: {filters: 8, kernel: 3, padding: 1}}, batchnorm, relu, flatten, {dense: {units: 10}}]"
job gpt "$(e2e_tiny_gpt "$T/text.h5" 2 "")" \
"  optimizer: {type: adamw, lr: 3.0e-3, weight_decay: 0.1}
  metrics: []"
# gptt: the same with its head tied to the embedding (GPT-2's), which the cut puts on two stages
sed -e 's/{dense: {units: 256, bias: false}, name: lm_head}/{dense: {units: 256, tied: wte, bias: false}, name: lm_head}/' \
    -e 's/^name: gpt$/name: gptt/' "$T/gpt.yaml" >"$T/gptt.yaml"

# same A B WHAT [FROM]: B's weights and losses (of the steps after FROM) are A's, bit for bit
same() {
    check "$3: weights.h5 bit for bit" "$PY" "$PC" weights "$T/$1" "$T/$2" 0
    check "$3: every loss bit for bit" "$PY" "$PC" losses "$T/$1" "$T/$2" 0 "${4:-0}"
}

# ---------------------------------------------------------------- 1. exactness
for m in mlp cnn gpt; do
    expect 0 -- "$G" "$T/$m.yaml" --run-dir "$T/$m-1" "${ONE[@]}"
    expect 0 -- "${MPI[@]}" 2 "$G" "$T/$m.yaml" --run-dir "$T/$m-pp2" "${ONE[@]}" --set parallel.pipeline=2
    same "$m-1" "$m-pp2" "$m, 2 stages x 8 micro-batches (1f1b) against 1 process accumulating 8"
done
expect 0 -- "${MPI[@]}" 2 "$G" "$T/cnn.yaml" --run-dir "$T/cnn-gpipe" "${ONE[@]}" --set parallel.pipeline=2 \
    --set parallel.schedule=gpipe
same cnn-1 cnn-gpipe "cnn, gpipe"
expect 0 -- "${MPI[@]}" 3 "$G" "$T/mlp.yaml" --run-dir "$T/mlp-pp3" "${ONE[@]}" --set parallel.pipeline=3
same mlp-1 mlp-pp3 "mlp, 3 stages"
expect 0 -- "${MPI[@]}" 4 "$G" "$T/mlp.yaml" --run-dir "$T/mlp-d2pp2" "${ONE[@]}" --set parallel.pipeline=2
check "mlp, 2 replicas x 2 stages (4 ranks): the losses of 1 process within 1e-5" \
    "$PY" "$PC" losses "$T/mlp-1" "$T/mlp-d2pp2" 1e-5
for m in mlp cnn gpt; do # the CNN's batchnorm and the GPT's dropout draw per replica: 2 replicas are the reference
    expect 0 -- "${MPI[@]}" 2 "$G" "$T/$m.yaml" --run-dir "$T/$m-d2" "${ONE[@]}"
    [ $m = mlp ] || expect 0 -- "${MPI[@]}" 4 "$G" "$T/$m.yaml" --run-dir "$T/$m-d2pp2" "${ONE[@]}" --set parallel.pipeline=2
    same "$m-d2" "$m-d2pp2" "$m, 2 replicas x 2 stages (4 ranks) against 2 replicas"
done
expect 0 -- "${MPI[@]}" 2 "$G" "$T/gpt.yaml" --run-dir "$T/gpt-rc" "${ONE[@]}" --set parallel.pipeline=2 \
    --set train.recompute=blocks
same gpt-1 gpt-rc "gpt with train.recompute: blocks (the balanced cut keeps each block use whole)"
# half precision: the messages carry half activations and gradients as stored; fp16's dynamic
# loss scale is the same decision on both stages (the inf/NaN check reads the norm over both)
for p in bf16 fp16; do
    expect 0 -- "$G" "$T/mlp.yaml" --run-dir "$T/mlp-$p" "${ONE[@]}" --set precision=$p
    expect 0 -- "${MPI[@]}" 2 "$G" "$T/mlp.yaml" --run-dir "$T/mlp-pp2$p" "${ONE[@]}" --set precision=$p \
        --set parallel.pipeline=2
    same "mlp-$p" "mlp-pp2$p" "mlp in $p, 2 stages"
done
expect 0 -- "$G" "$T/cnn.yaml" --run-dir "$T/cnn-bf16" "${ONE[@]}" --set precision=bf16
expect 0 -- "${MPI[@]}" 2 "$G" "$T/cnn.yaml" --run-dir "$T/cnn-pp2bf16" "${ONE[@]}" --set precision=bf16 \
    --set parallel.pipeline=2
same cnn-bf16 cnn-pp2bf16 "cnn in bf16, 2 stages"
expect 0 -- "$G" "$T/gpt.yaml" --run-dir "$T/gpt-clip1" "${ONE[@]}" --set train.grad_clip=0.05
expect 0 -- "${MPI[@]}" 2 "$G" "$T/gpt.yaml" --run-dir "$T/gpt-clip2" "${ONE[@]}" --set train.grad_clip=0.05 \
    --set parallel.pipeline=2
check "gpt with gradient clipping (the norm over both stages): losses within 1e-6" \
    "$PY" "$PC" losses "$T/gpt-clip1" "$T/gpt-clip2" 1e-6

# a tied weight on two stages: each adds its part into its copy's slot, the slots are summed over the
# stages and both copies updated alike (another order of the sum than one process's; SGD, whose
# steps follow the gradients' rounding, where AdamW's may turn for gradients near 0)
TSGD=(--set train.optimizer.type=sgd --set train.optimizer.lr=0.1 --set train.optimizer.momentum=0.9)
expect 0 -- "$G" "$T/gptt.yaml" --run-dir "$T/gptt-1" "${ONE[@]}" "${TSGD[@]}"
expect 0 -- "${MPI[@]}" 2 "$G" "$T/gptt.yaml" --run-dir "$T/gptt-pp2" "${ONE[@]}" "${TSGD[@]}" \
    --set parallel.pipeline=2
check "gpt with its head tied to the embedding across the 2 stages: losses within 1e-6" \
    "$PY" "$PC" losses "$T/gptt-1" "$T/gptt-pp2" 1e-6
check "... and weights within 1e-6" "$PY" "$PC" weights "$T/gptt-1" "$T/gptt-pp2" 1e-6
expect 0 -- "${MPI[@]}" 2 "$G" "$T/gptt.yaml" --run-dir "$T/gptt-d2" "${ONE[@]}" "${TSGD[@]}"
expect 0 -- "${MPI[@]}" 4 "$G" "$T/gptt.yaml" --run-dir "$T/gptt-d2pp2" "${ONE[@]}" "${TSGD[@]}" \
    --set parallel.pipeline=2
check "... 2 replicas x 2 stages (the slots summed over the replicas too) against 2 replicas: within 1e-6" \
    "$PY" "$PC" losses "$T/gptt-d2" "$T/gptt-d2pp2" 1e-6

# ---------------------------------------------------------------- 2. checkpoints carry no layout
CK=(--set checkpoint.every_steps=6)
expect 0 -- "${MPI[@]}" 2 "$G" "$T/gpt.yaml" --run-dir "$T/ck-pp2" "${ONE[@]}" "${CK[@]}" --set parallel.pipeline=2
expect 0 -- "$G" "$T/gpt.yaml" --run-dir "$T/ck-pp2to1" "${ONE[@]}" "${CK[@]}" \
    --resume "$T/ck-pp2/checkpoints/step-000000006.h5"
same gpt-1 ck-pp2to1 "a 2-stage checkpoint (step 6) resumed by 1 process" 6
expect 0 -- "$G" "$T/gpt.yaml" --run-dir "$T/ck-1" "${ONE[@]}" "${CK[@]}"
expect 0 -- "${MPI[@]}" 2 "$G" "$T/gpt.yaml" --run-dir "$T/ck-1to2" "${ONE[@]}" "${CK[@]}" --set parallel.pipeline=2 \
    --resume "$T/ck-1/checkpoints/step-000000006.h5"
same gpt-1 ck-1to2 "a 1-process checkpoint (step 6) resumed by 2 stages" 6
# (the MLP: dropout draws its masks per replica, so the GPT's differ with 2 replicas by design)
expect 0 -- "${MPI[@]}" 2 "$G" "$T/mlp.yaml" --run-dir "$T/ckm-pp2" "${ONE[@]}" "${CK[@]}" --set parallel.pipeline=2
expect 0 -- "${MPI[@]}" 4 "$G" "$T/mlp.yaml" --run-dir "$T/ckm-pp2to4" "${ONE[@]}" "${CK[@]}" \
    --set parallel.pipeline=2 --resume "$T/ckm-pp2/checkpoints/step-000000006.h5"
check "a 2-stage checkpoint resumed by 2 replicas x 2 stages: steps 7-12 within 1e-5" \
    "$PY" "$PC" losses "$T/mlp-1" "$T/ckm-pp2to4" 1e-5 6

# ---------------------------------------------------------------- 3. summary.json
check "summary.json: the pipeline's figures (1f1b: 2 in flight on the first stage)" "$PY" - "$T/gpt-pp2" <<'EOF'
import json, sys
s = json.load(open(sys.argv[1] + "/summary.json"))
assert s["status"] == "finished" and s["world_size"] == 2, s
assert s["pipeline_stages"] == 2 and s["pipeline_microbatches"] == 8 and s["pipeline_schedule"] == "1f1b", s
assert abs(s["pipeline_predicted_idle_pct"] - 100 / 9) < 1e-6, s
assert 0 <= s["pipeline_idle_pct"] < 100, s
assert s["pipeline_in_flight"] == 2 and s["pipeline_activation_bytes"] > 0, s
EOF
expect_ok -- "$G" plan "$T/gpt.yaml" --set parallel.pipeline=2
check "gpurun plan's first-stage activations are the run's (summary.json)" bash -c "
    [ \"\$(sed -n 's/^1 .* \([0-9,]*\)\$/\1/p' '$OUT' | tr -d ,)\" = \
      \"\$(grep -o '\"pipeline_activation_bytes\":[0-9]*' '$T/gpt-pp2/summary.json' | cut -d: -f2)\" ]"
check "summary.json: gpipe holds all 8 micro-batches on the first stage, 4x 1f1b's activation bytes" "$PY" - \
    "$T/cnn-gpipe" "$T/cnn-pp2" <<'EOF'
import json, sys
g, f = (json.load(open(d + "/summary.json")) for d in sys.argv[1:])
assert g["pipeline_in_flight"] == 8 and f["pipeline_in_flight"] == 2, (g, f)
assert g["pipeline_activation_bytes"] == 4 * f["pipeline_activation_bytes"], (g, f)
EOF

expect 0 -- "${MPI[@]}" 2 "$G" "$T/gpt.yaml" --run-dir "$T/prof" --threads 1 --set parallel.pipeline=2 \
    --set 'parallel.stages=[h1]' --profile 3
check "--profile (stages cut at block h1): each stage's profile, its own layers' ops timed" bash -c "
    grep -qE '^h0\.attn +attention_bwd +backward' '$T/prof/profile.txt' &&
    grep -qE '^h1\.attn +attention_bwd +backward' '$T/prof/profile.rank1.txt' &&
    ! grep -qE '^h1\.' '$T/prof/profile.txt' && [ -s '$T/prof/trace.rank1.json' ]"

# ---------------------------------------------------------------- 4. errors
expect 2 "parallel.microbatches: 4 micro-batches of train.micro_batch 4 make 16 samples, but a replica's share" -- \
    "${MPI[@]}" 2 "$G" "$T/mlp.yaml" --run-dir "$T/bad" "${ONE[@]}" --set parallel.pipeline=2 \
    --set parallel.microbatches=4
check "a refused job leaves no run directory" test ! -e "$T/bad"
expect 0 -- "${MPI[@]}" 2 "$G" "$T/mlp.yaml" --run-dir "$T/mlp-m4" "${ONE[@]}" --set parallel.pipeline=2 \
    --set parallel.microbatches=4 --set train.micro_batch=8
check "parallel.microbatches 4 x train.micro_batch 8: 4 micro-batches a step" \
    grep -q '"pipeline_microbatches":4' "$T/mlp-m4/summary.json"
# (each stage says it; the first to exit may end the other before it does)
expect 4 "pipeline stage " " of 2 (schedule 1f1b, " "in flight, each its own activation arena): out of memory on cpu" -- \
    env GPURUN_MEMORY_LIMIT=700000 "${MPI[@]}" 2 "$G" "$T/gpt.yaml" --run-dir "$T/oom" "${ONE[@]}" \
    --set parallel.pipeline=2 --set train.micro_batch=4

# ---------------------------------------------------------------- 5. faults
# a stage's weights turn inf where its loss was finite (lr 1e300; the last stage, a dropout of
# rate 0, holds no weights and its copy of the first's stays finite): the metrics line's check
# is agreed, so both ranks exit 5 at once (else rank 1 waits for the next step's activations)
job div "$IMG
model:
  layers: [flatten, {dense: {units: 64}}, relu, {dense: {units: 10}}, {dropout: {rate: 0.0}}]" \
"  optimizer: {type: sgd, lr: 1.0e+300}"
expect 5 "training diverged at step 1" -- "${MPI[@]}" 2 "$G" "$T/div.yaml" --run-dir "$T/div" --threads 1 \
    --set parallel.pipeline=2 --set "parallel.stages=[dropout0]" --set parallel.timeout_s=60
check "one stage's inf/NaN at the metrics line: summary.json says diverged, naming the layer" \
    grep -q '"status":"diverged","exit_code":5,"error":"training diverged at step 1 (epoch 1): the parameters hold inf/NaN at the metrics line (first: layer dense0' \
    "$T/div/summary.json"
# rank 0 waits in a message to stage 2 most of the time; else in a sum over the stages or the
# agreement on a stop, which its line names as well
e2e_faults "stage" "pipeline stage 1: (sending|receiving) the [a-z]+ of micro-batch [0-9]+ .*stage 2[^(]*|the step's loss over the pipeline stages|the gradients' norm over the pipeline stages|agreeing on (a stop signal|a checkpoint|the parameters' check)" 2 \
    "${MPI[@]}" 2 "$G" "$T/gpt.yaml" --threads 1 --quiet --set parallel.pipeline=2 --set train.steps=200000 \
    --set eval.every_steps=0 --set eval.every_epochs=0 --set checkpoint.every_steps=50
e2e_done
