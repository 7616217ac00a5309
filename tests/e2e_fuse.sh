#!/usr/bin/env bash
# e2e_fuse.sh — fusions as graph rewrites (graph/fuse.c), run as a user runs them:
#
#  1. batchnorm + relu: a CNN (conv-bn-relu twice, 4-D, then dense-bn-relu, 2-D) trains to the
#     same weights, losses and evaluation bit for bit fused and with GPURUN_FUSE=0, in fp32
#     (channels-first) and bf16 (channels-last where the CPU has native bf16, else staged), and
#     with recomputed blocks (the copies' pairs fuse), and a ResNet-style block (a relu read by a
#     conv and a residual add; a relu after the add, fused forward only), and ResNet's block (its
#     input read by its first conv and its add: the previous block's output relu's backward folded
#     into the sum of those two gradients); dense + relu: an MLP
#     (the dense relus its output in place; the relu's backward folded into the next dense's
#     backward, which masks its dx), fp32 and bf16;
#  2. what it says: `gpurun plan` names the fused pairs, or why none is (GPURUN_FUSE=0, pipeline
#     stages; dense + relu in a tensor group); --profile has no relu steps of a fused pair (they run inside the batchnorm's),
#     nor an MLP's relu backward steps (inside the dense backward's), nor the residual block's;
#  3. the memory plan: a fused pair's relu output is the batchnorm's bytes (one tensor fewer; the
#     peak, which holds the relu's output for the backward anyway, is no higher).
#
#   bash tests/e2e_fuse.sh GPURUN_BINARY SOURCE_DIR TMPDIR
. "$(dirname "$0")/e2e_lib.bash" "$@"
e2e_need_py h5py numpy
PC=$SRC/tests/parallel_check.py
ONE=(--threads 2 --quiet)

expect 0 -- "$G" data synthetic "$T/syn.h5" --n 512 --shape 3,12,12 --classes 10 --test 64 --seed 5
# job NAME STEPS MODEL-YAML: $T/NAME.yaml on the synthetic images, SGD, evaluated every STEPS / 2
job() {
    cat >"$T/$1.yaml" <<EOF
name: $1
seed: 7
device: cpu
data:
  train: {path: $T/syn.h5, group: /train}
  val: {path: $T/syn.h5, group: /test}
model:
$3
train:
  batch_size: 32
  steps: $2
  optimizer: {type: sgd, lr: 0.05, momentum: 0.9}
eval: {every_steps: $(($2 / 2))}
log: {every_steps: 1, tensorboard: false}
EOF
}
job cnn 8 "  layers: [{conv: {filters: 8, kernel: 3, padding: 1}}, batchnorm, relu, {maxpool: {kernel: 2}},
           {conv: {filters: 16, kernel: 3, padding: 1}}, batchnorm, relu, flatten,
           {dense: {units: 32}}, batchnorm, relu, {dense: {units: 10}}]"
job res 6 "  blocks:
    res:
      args: {f: 8}
      layers:
        - {conv: {filters: \$f, kernel: 3, padding: 1, bias: false}}
        - batchnorm
        - {relu: {}, name: r}
        - {conv: {filters: \$f, kernel: 3, padding: 1, bias: false}}
        - batchnorm
        - {add: {}, input: [r, batchnorm1]}
        - relu
  layers:
    - {conv: {filters: 8, kernel: 3, padding: 1}}
    - batchnorm
    - relu
    - {res: {f: 8}, repeat: 2}
    - global_avgpool
    - flatten
    - dense: {units: 10}"
job resid 6 "  blocks:
    blk:
      layers:
        - {conv: {filters: 8, kernel: 3, padding: 1, bias: false}}
        - batchnorm
        - relu
        - {conv: {filters: 8, kernel: 3, padding: 1, bias: false}}
        - batchnorm
        - {add: {}, input: [input, batchnorm1]}
        - relu
  layers:
    - {conv: {filters: 8, kernel: 3, padding: 1}}
    - batchnorm
    - relu
    - {blk: {}, repeat: 2}
    - global_avgpool
    - flatten
    - dense: {units: 10}"
job mlp 8 "  layers: [flatten, {dense: {units: 48}}, relu, {dense: {units: 32}}, relu, {dense: {units: 10}}]"
job mlpb 8 "  blocks:
    fc:
      args: {u: 32}
      layers: [{dense: {units: \$u}}, relu]
  layers: [flatten, {fc: {u: 48}}, {fc: {u: 32}}, {dense: {units: 10}}]"

# ---------------------------------------------------------------- 1. the same bits
# pair NAME ARGS...: $T/NAME-f (fused) and $T/NAME-u (GPURUN_FUSE=0), bit for bit
pair() {
    local name=$1
    shift
    expect 0 -- "$G" "$@" --run-dir "$T/$name-f" "${ONE[@]}"
    expect 0 -- env GPURUN_FUSE=0 "$G" "$@" --run-dir "$T/$name-u" "${ONE[@]}"
    check "$name: fused and unfused weights bit for bit" "$PY" "$PC" weights "$T/$name-f" "$T/$name-u" 0
    check "$name: fused and unfused losses and evaluations bit for bit" "$PY" "$PC" losses "$T/$name-f" "$T/$name-u" 0
}
pair cnn32 "$T/cnn.yaml"
pair cnn16 "$T/cnn.yaml" --set precision=bf16
pair rc "$T/res.yaml" --set train.recompute=blocks --set precision=bf16
pair res "$T/res.yaml"
pair resid32 "$T/resid.yaml"
pair resid16 "$T/resid.yaml" --set precision=bf16
pair mlp32 "$T/mlp.yaml"
pair mlp16 "$T/mlp.yaml" --set precision=bf16
pair mlprc "$T/mlpb.yaml" --set train.recompute=blocks

# ---------------------------------------------------------------- 2. what it says
check "plan names the fused pairs (4-D and 2-D)" bash -c "'$G' plan '$T/cnn.yaml' |
    grep -q '^fused: 3 pairs (each relu computed by the pass before it; GPURUN_FUSE=0 turns it off): batchnorm0 + relu0, batchnorm1 + relu1, batchnorm2 + relu2\$'"
check "plan: the residual block's batchnorm + relu, and its add + relu" bash -c "'$G' plan '$T/res.yaml' |
    grep -q '^fused: 5 pairs .*: batchnorm0 + relu0, res0.batchnorm0 + res0.r, res0.add0 + res0.relu1, res1.batchnorm0 + res1.r, res1.add0 + res1.relu1\$'"
check "plan: the MLP's dense + relu pairs" bash -c "'$G' plan '$T/mlp.yaml' |
    grep -q '^fused: 2 pairs .*: dense0 + relu0, dense1 + relu1\$'"
check "plan in a tensor group: dense + relu left apart, and why" bash -c "'$G' plan '$T/mlp.yaml' --set parallel.tensor=2 |
    grep -q '^fused: dense + relu left apart in tensor groups (a row layer.s output is summed after its kernel)\$'"
check "plan under GPURUN_FUSE=0 says it is off" bash -c "GPURUN_FUSE=0 '$G' plan '$T/cnn.yaml' | grep -q '^fused: off (GPURUN_FUSE=0)\$'"
check "plan on pipeline stages says why nothing is fused" bash -c "'$G' plan '$T/cnn.yaml' --set parallel.pipeline=2 |
    grep -q '^fused: off on pipeline stages (a cut may split a pair)\$'"
expect 0 -- "$G" "$T/cnn.yaml" --run-dir "$T/prof-f" "${ONE[@]}" --profile 3
expect 0 -- env GPURUN_FUSE=0 "$G" "$T/cnn.yaml" --run-dir "$T/prof-u" "${ONE[@]}" --profile 3
check "--profile: a fused pair's relu has no step of its own (the batchnorm's steps do its work)" bash -c "
    ! grep -qE '^relu[0-2] ' '$T/prof-f/profile.txt' && grep -qE '^batchnorm0 +batchnorm_bwd ' '$T/prof-f/profile.txt'"
check "--profile under GPURUN_FUSE=0: the relus' forward and backward steps" bash -c "
    grep -qE '^relu0 +relu +forward' '$T/prof-u/profile.txt' && grep -qE '^relu0 +relu_bwd +backward' '$T/prof-u/profile.txt'"
expect 0 -- "$G" "$T/mlp.yaml" --run-dir "$T/prof-mf" "${ONE[@]}" --profile 3
expect 0 -- env GPURUN_FUSE=0 "$G" "$T/mlp.yaml" --run-dir "$T/prof-mu" "${ONE[@]}" --profile 3
check "--profile on the MLP: no relu_bwd step (each dense's dense_bwd_data masks its dx)" bash -c "
    ! grep -qE ' relu_bwd ' '$T/prof-mf/profile.txt' && grep -qE '^dense1 +dense_bwd_data ' '$T/prof-mf/profile.txt'"
check "--profile on the MLP under GPURUN_FUSE=0: both relu_bwd steps" bash -c "
    test \$(grep -cE '^relu[01] +relu_bwd ' '$T/prof-mu/profile.txt') = 2"
expect 0 -- "$G" "$T/resid.yaml" --run-dir "$T/prof-rf" "${ONE[@]}" --profile 3
check "--profile on ResNet's block: the first block's output relu has no relu_bwd step (the sum of its gradients masks)" \
    bash -c "! grep -qE '^blk0.relu1 +relu_bwd ' '$T/prof-rf/profile.txt' && grep -qE '^blk1.relu1 +relu_bwd ' '$T/prof-rf/profile.txt'"

# ---------------------------------------------------------------- 3. memory
# "A B": the planned training activations with reuse, and without
act() { env GPURUN_FUSE=$1 "$G" plan "$T/cnn.yaml" --set precision=bf16 |
        sed -n 's/^  activations *\([0-9,]*\) *(train; \([0-9,]*\) without reuse.*/\1 \2/p' | tr -d ,; }
read -r FR FN <<<"$(act 1)"
read -r UR UN <<<"$(act 0)"
check "the fused plan's activations: fewer tensors ($FN against $UN bytes without reuse), a peak no higher ($FR against $UR)" \
    test "${FN:-0}" -gt 0 -a "${FN:-0}" -lt "${UN:-0}" -a "${FR:-1}" -le "${UR:-0}"
e2e_done
