#!/usr/bin/env bash
# e2e_pipeplan.sh — `gpurun plan` of a pipeline (parallel.pipeline > 1, DESIGN
# 2.4): the stage table, the bubble and the in-flight micro-batches per stage;
# the refusals (exit 2, the key at its place): too many stages, unknown or
# out-of-order names, a skip connection over a stage, a recomputed block cut
# in two; tensor parallelism's split (and its refusals); a launched world that
# is not data x pipeline x tensor, and `gpurun run` of a pipeline job without a launcher (the command
# that launches it; tests/e2e_pipeline.sh runs them).
#
#   bash tests/e2e_pipeplan.sh GPURUN_BINARY SOURCE_DIR TMPDIR
. "$(dirname "$0")/e2e_lib.bash" "$@"

cat >cnn.yaml <<'YAML'
data: {train: {path: absent.h5}}
model:
  input: [1, 8, 8]
  layers:
    - {conv: {filters: 4, kernel: 3, padding: 1}, name: c1}
    - relu
    - {conv: {filters: 8, kernel: 3, padding: 1}, name: c2}
    - {relu: {}, name: r2}
    - {conv: {filters: 8, kernel: 3, padding: 1}, name: c3}
    - {add: {}, input: [r2, c3], name: skip}
    - flatten
    - {dense: {units: 10}, name: out}
train: {batch_size: 32, micro_batch: 4, steps: 1, optimizer: {lr: 0.1}}
YAML

expect_ok "pipeline: 2 stages (balanced by FLOPs), 8 micro-batches a step, schedule 1f1b" \
    "stage layers" "bubble: 11.1% of each step idle, (p-1)/(m+p-1) = 1/9" -- "$G" plan cnn.yaml --set parallel.pipeline=2
grep -Eq '^1 +c1\.\.[a-z0-9]+ +[0-9]+ +[0-9,]+ +[0-9,]+ +2 +[0-9,]+$'  "$OUT" && ok || { bad "stage 1's row (2 in flight)"; echo "$OUT"; }
grep -Eq '^2 +[a-z0-9]+\.\.out +[0-9]+ +[0-9,]+ +[0-9,]+ +1 +[0-9,]+$'  "$OUT" && ok || { bad "stage 2's row (1 in flight)"; echo "$OUT"; }
expect_ok "3 stages (cut at parallel.stages), 4 micro-batches a step, schedule gpipe" "1     c1..relu0" \
    "3     skip..out" "bubble: 33.3% of each step idle, (p-1)/(m+p-1) = 2/6" -- \
    "$G" plan cnn.yaml --set parallel.pipeline=3 --set 'parallel.stages=[c2, skip]' --set parallel.schedule=gpipe \
    --set parallel.microbatches=4 --set train.micro_batch=8
# parallel.microbatches alone: the micro-batch is the batch over them, and the plan is made there;
# each stage's activations are its micro-batches in flight times its part's arena
sed 's/micro_batch: 4, //' cnn.yaml >cnn_m.yaml
expect_ok "micro-batch 8" "pipeline: 2 stages (balanced by FLOPs), 4 micro-batches a step" "activations (B)" \
    "each stage's process also holds the whole model's params, grads and optimizer state" -- \
    "$G" plan cnn_m.yaml --set parallel.pipeline=2 --set parallel.microbatches=4
expect_ok -- "$G" plan cnn.yaml --set parallel.pipeline=1   # no table, no error
grep -q "stage layers" "$OUT" && bad "a table for one stage" || ok

{ cat cnn.yaml; echo "parallel: {pipeline: 9}"; } >cnn9.yaml
expect 2 "cnn9.yaml:14:22: parallel.pipeline: 9 stages, but the model has 8 layers" -- "$G" plan cnn9.yaml
expect 2 "--set:1:1: parallel.pipeline: 9 stages, but the model has 8 layers" -- "$G" plan cnn.yaml --set parallel.pipeline=9
expect 2 "parallel.stages[0]: no layer or block use is named 'c9'" -- \
    "$G" plan cnn.yaml --set parallel.pipeline=2 --set 'parallel.stages=[c9]'
expect 2 "parallel.stages[1]: 'c2' (layer 3) comes before or at 'c3' (layer 5)" -- \
    "$G" plan cnn.yaml --set parallel.pipeline=3 --set 'parallel.stages=[c3, c2]'
expect 2 "parallel.stages: layer 'skip' (stage 3) reads 'r2' (stage 1)" "may not skip a stage" -- \
    "$G" plan cnn.yaml --set parallel.pipeline=3 --set 'parallel.stages=[c3, skip]'
expect 2 "parallel.stages: expected auto or a non-empty list" -- "$G" plan cnn.yaml --set parallel.stages=c2
expect 2 "parallel.schedule" -- "$G" plan cnn.yaml --set parallel.schedule=zigzag
# tensor parallelism: `plan` shows the split (graph/tensor.h; tests/test_tensor_plan.c has the rules); a
# convolution is refused at its item; `run` without a launcher names the command (e2e_tensor.sh runs it)
expect 2 "cnn.yaml:5:7: model: layer 'c1': tensor parallelism splits dense layers and attention heads; a conv layer" \
    -- "$G" plan cnn.yaml --set parallel.tensor=2
cat >mlp.yaml <<'YAML'
data: {train: {path: absent.h5}}
model:
  input: [16]
  layers: [{dense: {units: 32}, name: up}, gelu, {dense: {units: 16}, name: down}, {dense: {units: 4}, name: out}]
train: {batch_size: 8, steps: 1, optimizer: {lr: 0.1}}
YAML
expect_ok "tensor parallelism: 2 processes a group; 1 column/row pair split (0 by attention heads)" \
    "each process holds 536 parameters of the split layers (1/2) and the 68 replicated" -- \
    "$G" plan mlp.yaml --set parallel.tensor=2
grep -Eq '^up +dense +column ' "$OUT" && grep -Eq '^gelu0 +gelu +sharded$' "$OUT" && grep -Eq '^down +dense +row ' "$OUT" &&
    ! grep -Eq '^out +dense +(column|row)' "$OUT" && ok || { bad "the split's rows"; cat "$OUT"; }
expect 2 "mlp.yaml:4:12: model: layer 'up': its 32 units do not split over parallel.tensor 3 processes" -- \
    "$G" plan mlp.yaml --set parallel.tensor=3
expect 2 "parallel.tensor: a model replica is parallel.pipeline 1 x parallel.tensor 2 = 2 processes" -- \
    "$G" run mlp.yaml --set parallel.tensor=2
expect 2 "parallel.microbatches: 3 does not split train.batch_size 32" -- \
    "$G" plan cnn.yaml --set parallel.pipeline=2 --set parallel.microbatches=3
# under a launcher (its environment; plan joins no one): world = data x pipeline x tensor
expect 2 "parallel.data: parallel.data 2 x parallel.pipeline 2 x parallel.tensor 1 = 4 processes, but this one was " \
    "started as one of 3 by Open MPI" -- env OMPI_COMM_WORLD_SIZE=3 OMPI_COMM_WORLD_RANK=0 \
    "$G" plan cnn.yaml --set parallel.pipeline=2 --set parallel.data=2
expect 2 "parallel.pipeline: 2 x parallel.tensor 1 = 2 processes a model replica, but Open MPI started 3" -- \
    env OMPI_COMM_WORLD_SIZE=3 OMPI_COMM_WORLD_RANK=0 "$G" plan cnn.yaml --set parallel.pipeline=2
expect_ok "pipeline: 2 stages" "2 micro-batches a step" -- env OMPI_COMM_WORLD_SIZE=8 OMPI_COMM_WORLD_RANK=0 \
    "$G" plan cnn.yaml --set parallel.pipeline=2
# a recomputed block's copies run in the backward pass: a cut inside one is refused, at a block boundary taken
cat >rec.yaml <<'YAML'
data: {train: {path: absent.h5}}
model:
  input: [16]
  blocks:
    b: {layers: [{dense: {units: 16}, name: d1}, {relu: {}, name: r1}, {dense: {units: 16}, name: d2}]}
  layers:
    - {b: {}, repeat: 2}
    - {dense: {units: 4}, name: out}
train: {batch_size: 8, micro_batch: 1, steps: 1, recompute: blocks, optimizer: {lr: 0.1}}
YAML
expect 2 "parallel.stages: the recomputed block use of layers 'b1.d1' (stage 1) and 'b1.r1' (stage 2) is cut in two" -- \
    "$G" plan rec.yaml --set parallel.pipeline=2 --set 'parallel.stages=[b1.r1]'
expect_ok "1     b0.d1..b0.d2" -- "$G" plan rec.yaml --set parallel.pipeline=2 --set 'parallel.stages=[b1]'
# a pipeline runs one process a stage: without a launcher, the command that launches it
expect 2 "parallel.pipeline: a model replica is parallel.pipeline 2 x parallel.tensor 1 = 2 processes" \
    "launch it with \`mpirun -np 2 gpurun ...\`" -- "$G" run cnn.yaml --set parallel.pipeline=2
e2e_done
