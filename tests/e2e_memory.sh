#!/usr/bin/env bash
# e2e_memory.sh — memory planning before a run:
#  1. `gpurun plan --memory BYTES`: whether the job's arenas (params, grads, optimizer state,
#     train and eval activations, fp32 staging) fit, and the largest micro-batch dividing
#     train.batch_size that does: that one fits when set by hand, the next divisor up does
#     not; a limit below the model's own arenas says no micro-batch fits; K/M/G suffixes;
#     `--memory auto` takes the device's free memory;
#  2. train.micro_batch: auto under GPURUN_MEMORY_LIMIT picks plan --memory's micro-batch for
#     that limit, says so, writes it into config.yaml, and trains bit for bit as that
#     micro-batch set by hand; a limit below the model's arenas is exit 4 with the figures;
#     summary.json's planned_bytes is what the CPU backend held at most (device_peak_bytes);
#     a run resumed under another limit picks another micro-batch and continues with the
#     uninterrupted run's losses (an MLP: only the summation order changes, within 1e-5);
#  2b. the CPU's planned device bytes are exact (GPURUN_MEMORY_LIMIT at the figure runs, a byte
#     less is exit 4); the host plan (gpurun plan's table, summary.json's planned_host_bytes)
#     is within 15% of the peak RSS for configs/fashion-mnist-cnn.yaml (images in memory and
#     read from the file) and configs/resnet18-cifar10.yaml, on synthetic data of their shapes;
#  3. out of memory (GPURUN_MEMORY_LIMIT: the CPU as a smaller device) is exit 4 naming the
#     arena and its bytes, with remedies planned for the job: the micro-batch that fits, and
#     bf16's; applied, each runs under the same limit;
#  4. activation recomputation: a ResNet-shaped net (residual blocks with batchnorm and
#     dropout) and a CNN built of blocks train bit for bit as plain with train.recompute:
#     blocks and with recompute: true on block uses (per-step losses, final weights and
#     running statistics), in fp32 and bf16; their planned training activations shrink;
#     configs/resnet50.yaml's planned activation peak is at most 40% of the plain plan's;
#     recompute on an op is exit 2;
#  5. a malformed --memory, or --memory on another command, is exit 2 naming it; 8G, 8GiB,
#     8GB (10^9), 1.5G, 512MiB are read as people mean them.
#
#   bash tests/e2e_memory.sh GPURUN_BINARY SOURCE_DIR TMPDIR
. "$(dirname "$0")/e2e_lib.bash" "$@"

expect 0 -- "$G" data synthetic "$T/syn.h5" --n 600 --shape 1,28,28 --classes 10 --test 100 --seed 2
cat >"$T/cnn.yaml" <<EOF2
name: mem
seed: 1
device: cpu
data:
  train: {path: $T/syn.h5, group: /train}
  val: {path: $T/syn.h5, group: /test}
model:
  layers:
    - conv: {filters: 16, kernel: 3, padding: 1}
    - batchnorm
    - relu
    - maxpool: {kernel: 2}
    - flatten
    - dense: {units: 10}
train:
  batch_size: 64
  steps: 2
  optimizer: {type: sgd, lr: 0.05, momentum: 0.9}
EOF2
J=$T/cnn.yaml

# needs M: the bytes `gpurun plan --memory 1T --set train.micro_batch=M` says micro-batch M needs
needs() {
    "$G" plan "$J" --memory 1T --set train.micro_batch="$1" 2>/dev/null |
        sed -n "s/.*micro-batch $1 needs \([0-9,]*\) bytes.*/\1/p" | tr -d ,
}
expect_ok "memory limit 3,145,728 bytes (--memory 3M): micro-batch 64 needs" "does not fit" \
          "largest micro-batch that fits: " -- "$G" plan "$J" --memory 3M
best=$(sed -n 's/^largest micro-batch that fits: \([0-9]*\) .*/\1/p' "$OUT")
check "a micro-batch below 64 fits 3 MiB (got '$best')" bash -c "[ -n '$best' ] && [ '$best' -lt 64 ]"
if [ -n "$best" ] && [ "$best" -lt 64 ]; then
    nb=$(needs "$best") nn=$(needs $((best * 2)))
    check "micro-batch $best needs $nb <= 3 MiB, micro-batch $((best * 2)) needs $nn > 3 MiB" \
        bash -c "[ -n '$nb' ] && [ -n '$nn' ] && [ '$nb' -le 3145728 ] && [ '$nn' -gt 3145728 ]"
    expect_ok "micro-batch $best needs" ": fits" -- "$G" plan "$J" --memory 3M --set train.micro_batch="$best"
fi
expect_ok "no micro-batch fits: micro-batch 1 needs" -- "$G" plan "$J" --memory 20K
expect_ok "memory limit " "(--memory auto)" "largest micro-batch that fits: 64" -- "$G" plan "$J" --memory auto

# ---------------------------------------------------------------- micro_batch: auto
expect 0 "gpurun: train.micro_batch auto: $best (" "GPURUN_MEMORY_LIMIT allows)" -- \
    env GPURUN_MEMORY_LIMIT=3145728 "$G" "$J" --run-dir "$T/auto" --threads 1 --set train.micro_batch=auto \
    --set log.every_steps=1
check "config.yaml records micro_batch $best" grep -q "^  micro_batch: $best\$" "$T/auto/config.yaml"
expect 0 -- "$G" "$J" --run-dir "$T/hand" --quiet --threads 1 --set train.micro_batch="$best" --set log.every_steps=1
check "micro_batch auto trains as micro_batch $best set by hand, bit for bit" \
    cmp <(grep -o '"loss":[^,]*' "$T/auto/metrics.jsonl") <(grep -o '"loss":[^,]*' "$T/hand/metrics.jsonl")
check "summary.json: on the CPU the backend held at most exactly the planned bytes, and a peak RSS" "$PY" -c "
import json, sys
s = json.load(open(sys.argv[1] + '/auto/summary.json'))
assert s['planned_bytes'] > 0 and s['device_peak_bytes'] == s['planned_bytes'], s
assert s['peak_rss_bytes'] > s['planned_bytes'], s" "$T"
expect 4 "train.micro_batch auto: not even micro-batch 1 fits: it needs" "1,000 are there to plan for" -- \
    env GPURUN_MEMORY_LIMIT=1000 "$G" "$J" --run-dir "$T/auto_oom" --quiet --set train.micro_batch=auto

# resumed under another limit: another micro-batch, the same run (an MLP: 1.9 MB of arenas,
# 2.07 MB at micro-batch 16, 2.57 MB at 64)
cat >"$T/mlp.yaml" <<EOF2
name: memmlp
seed: 1
device: cpu
data:
  train: {path: $T/syn.h5, group: /train}
model:
  layers: [flatten, {dense: {units: 200}}, relu, {dense: {units: 10}}]
train:
  batch_size: 64
  steps: 6
  optimizer: {type: sgd, lr: 0.05, momentum: 0.9}
checkpoint: {every_steps: 3}
log: {every_steps: 1, tensorboard: false}
EOF2
M=$T/mlp.yaml
expect 0 -- "$G" "$M" --run-dir "$T/m_full" --quiet --threads 1
expect 0 "gpurun: train.micro_batch auto: 64 (" -- env GPURUN_MEMORY_LIMIT=100000000 "$G" "$M" --run-dir "$T/m_a" \
    --threads 1 --set train.micro_batch=auto --set train.steps=3
expect 0 "gpurun: train.micro_batch auto: 16 (" "resuming from" -- env GPURUN_MEMORY_LIMIT=2100000 "$G" "$M" \
    --run-dir "$T/m_b" --threads 1 --set train.micro_batch=auto --resume "$T/m_a/checkpoints/step-000000003.h5"
check "a resume under a smaller limit (micro-batch 16 instead of 64) continues with the uninterrupted run's losses within 1e-5" \
    "$PY" - "$T" <<'EOF2'
import json, sys
T = sys.argv[1]
def losses(r):
    return {d["step"]: d["loss"] for d in map(json.loads, open(f"{T}/{r}/metrics.jsonl")) if d["kind"] == "train"}
a, b = losses("m_full"), losses("m_b")
assert sorted(b) == [4, 5, 6], sorted(b)
for k in b:
    assert abs(a[k] - b[k]) <= 1e-5 * abs(a[k]), (k, a[k], b[k])
EOF2

# ---------------------------------------------------------------- the device's plan is exact, the host's within 15%
# on the CPU the planned device bytes (arenas and the convolutions' scratch) are exactly what a
# run may hold: GPURUN_MEMORY_LIMIT at the figure runs, one byte less is exit 4
P=$("$PY" -c "import json,sys; print(json.load(open(sys.argv[1]))['planned_bytes'])" "$T/hand/summary.json")
expect 0 -- env GPURUN_MEMORY_LIMIT="$P" "$G" "$J" --run-dir "$T/exact" --quiet --threads 1 --set train.micro_batch="$best"
expect 4 "out of memory on cpu" -- env GPURUN_MEMORY_LIMIT=$((P - 1)) "$G" "$J" --run-dir "$T/exact1" --quiet --threads 1 \
    --set train.micro_batch="$best"
# the host plan (gpurun plan's table, summary.json's planned_host_bytes) against the peak RSS:
# configs/fashion-mnist-cnn.yaml on data of Fashion-MNIST's size (held in memory, and read from
# the file), and configs/resnet18-cifar10.yaml on CIFAR-shaped data, a few steps and an eval each
host_check() {  # NAME RUNDIR CONFIG ARGS... : a run, then its plan within 15% of its peak RSS
    local name=$1 rd=$2 cfg=$3; shift 3
    expect 0 -- "$G" "$cfg" --run-dir "$rd" --quiet "$@"
    expect_ok "host memory (bytes), a fresh run on cpu:" -- "$G" plan "$cfg" "$@"
    check "$name: the host plan within 15% of the peak RSS; gpurun plan's total within 2% of the run's" \
        "$PY" - "$rd/summary.json" "$OUT" <<'EOF2'
import json, re, sys
s = json.load(open(sys.argv[1]))
plan, rss = s["planned_host_bytes"], s["peak_rss_bytes"]
print(f"planned {plan}, peak RSS {rss}: {plan / rss:.3f}")
assert abs(plan - rss) <= 0.15 * rss
text = open(sys.argv[2]).read().split("host memory (bytes)")[1]
total = int(re.search(r"\n  total +([0-9,]+)", text).group(1).replace(",", ""))
assert abs(total - plan) <= 0.02 * plan, (total, plan)
EOF2
}
if ldd "$G" 2>/dev/null | grep -q libasan; then
    e2e_skip "the host plan against the peak RSS: this gpurun is built with AddressSanitizer, whose shadow memory is in its RSS"
else
    expect 0 -- "$G" data synthetic "$T/fm.h5" --n 60000 --shape 1,28,28 --classes 10 --test 10000 --seed 5
    expect 0 -- "$G" data synthetic "$T/c10.h5" --n 2000 --shape 3,32,32 --classes 10 --test 200 --seed 6
    FM=(--set data.train.path="$T/fm.h5" --set data.val.path="$T/fm.h5" --set train.steps=20 --set eval.every_steps=20
        --set device=cpu)
    C10=(--set data.train.path="$T/c10.h5" --set data.val.path="$T/c10.h5" --set train.steps=2 --set eval.every_steps=2
         --set device=cpu --set train.batch_size=64)
    host_check "Fashion-MNIST CNN" "$T/h_cnn" "$SRC/configs/fashion-mnist-cnn.yaml" "${FM[@]}"
    host_check "Fashion-MNIST CNN, data.cache: none" "$T/h_cnn_file" "$SRC/configs/fashion-mnist-cnn.yaml" "${FM[@]}" \
        --set data.cache=none
    host_check "CIFAR ResNet-18" "$T/h_r18" "$SRC/configs/resnet18-cifar10.yaml" "${C10[@]}"
    rm -f "$T/fm.h5" "$T/c10.h5"
fi

# ---------------------------------------------------------------- out of memory, and its remedies
WIDE=(--set train.batch_size=512 --set "model.layers=[{conv: {filters: 64, kernel: 3, padding: 1}}, batchnorm, relu,
      {maxpool: {kernel: 2}}, flatten, {dense: {units: 10}}]" --set train.steps=1 --threads 2)
expect 4 "out of memory on cpu: the training activation arena needs" "at micro-batch 512" \
    "Remedies, planned for this job in 209,715,200 bytes (GPURUN_MEMORY_LIMIT): train.micro_batch 128 fits" \
    "precision bf16 fits micro-batch 256" "or train.micro_batch: auto" -- \
    env GPURUN_MEMORY_LIMIT=209715200 "$G" "$J" --run-dir "$T/oom" "${WIDE[@]}" --quiet
expect 0 -- env GPURUN_MEMORY_LIMIT=209715200 "$G" "$J" --run-dir "$T/oom_mb" "${WIDE[@]}" --quiet \
    --set train.micro_batch=128
expect 0 -- env GPURUN_MEMORY_LIMIT=209715200 "$G" "$J" --run-dir "$T/oom_bf16" "${WIDE[@]}" --quiet \
    --set train.micro_batch=256 --set precision=bf16
expect 0 "gpurun: train.micro_batch auto: 128 (" -- env GPURUN_MEMORY_LIMIT=209715200 "$G" "$J" --run-dir "$T/oom_auto" \
    "${WIDE[@]}" --set train.micro_batch=auto

# ---------------------------------------------------------------- recomputation
expect 0 -- "$G" data synthetic "$T/img.h5" --n 256 --shape 3,16,16 --classes 10 --test 64 --seed 4
cat >"$T/res.yaml" <<EOF2
name: rec
seed: 2
device: cpu
data:
  train: {path: $T/img.h5, group: /train}
  val: {path: $T/img.h5, group: /test}
model:
  blocks:
    basic:
      args: {out: 16}
      layers:
        - conv: {filters: \$out, kernel: 3, padding: 1, bias: false}
        - batchnorm
        - relu
        - dropout: {rate: 0.2}
        - conv: {filters: \$out, kernel: 3, padding: 1, bias: false}
        - batchnorm
        - {add: {}, input: [input, batchnorm1]}
        - relu
    cbr:
      args: {f: 8}
      layers: [{conv: {filters: \$f, kernel: 3, padding: 1}}, batchnorm, relu, {maxpool: {kernel: 2}}]
  layers:
    - conv: {filters: 16, kernel: 3, padding: 1, bias: false}
    - batchnorm
    - relu
    - {basic: {out: 16}, repeat: 2}
    - maxpool: {kernel: 2}
    - basic: {out: 16}
    - global_avgpool
    - flatten
    - dense: {units: 10}
train:
  batch_size: 32
  steps: 5
  optimizer: {type: sgd, lr: 0.05, momentum: 0.9}
eval: {every_steps: 5}
log: {every_steps: 1, tensorboard: false}
EOF2
sed -e 's/^    - conv: {filters: 16, kernel: 3, padding: 1, bias: false}$/    - cbr: {f: 8}/' \
    -e '/^    - batchnorm$/d' -e '/^    - relu$/d' -e '/^    - {basic: {out: 16}, repeat: 2}$/d' \
    -e 's/^    - maxpool: {kernel: 2}$/    - cbr: {f: 16}/' -e '/^    - basic: {out: 16}$/d' \
    -e '/^    - global_avgpool$/i\    - dropout: {rate: 0.3}' "$T/res.yaml" >"$T/cnn_b.yaml"
# same ROOT A B: per-step losses and eval lines bit for bit, weights.h5's tensors exactly
same() { cmp -s <(grep -o '"loss":[^,]*' "$T/$1/metrics.jsonl") <(grep -o '"loss":[^,]*' "$T/$2/metrics.jsonl") &&
         "$PY" "$PC2" weights "$T/$1" "$T/$2" 0 >/dev/null; }
PC2=$SRC/tests/parallel_check.py
for net in res cnn_b; do
    for p in fp32 bf16; do
        expect 0 -- "$G" "$T/$net.yaml" --run-dir "$T/${net}_$p" --quiet --threads 1 --set precision=$p
        expect 0 -- "$G" "$T/$net.yaml" --run-dir "$T/${net}_${p}_r" --quiet --threads 1 --set precision=$p \
            --set train.recompute=blocks
        check "$net $p: train.recompute blocks trains bit for bit as plain" same "${net}_$p" "${net}_${p}_r"
    done
    a0=$("$G" plan "$T/$net.yaml" 2>/dev/null | sed -n 's/^  activations *\([0-9,]*\)  (train.*/\1/p' | tr -d ,)
    a1=$("$G" plan "$T/$net.yaml" --set train.recompute=blocks 2>/dev/null |
         sed -n 's/^  activations *\([0-9,]*\)  (train.*/\1/p' | tr -d ,)
    check "$net: recomputation plans fewer training activation bytes ($a1 < $a0)" bash -c "[ '${a1:-0}' -gt 0 ] && [ '$a1' -lt '$a0' ]"
done
sed 's/^    - {basic: {out: 16}, repeat: 2}$/    - {basic: {out: 16}, repeat: 2, recompute: true}/' "$T/res.yaml" >"$T/res_use.yaml"
expect 0 -- "$G" "$T/res_use.yaml" --run-dir "$T/res_use" --quiet --threads 1
check "recompute: true on a block use trains bit for bit as plain" same res_fp32 res_use
r0=$("$G" plan "$SRC/configs/resnet50.yaml" 2>/dev/null | sed -n 's/^  activations *\([0-9,]*\)  (train.*/\1/p' | tr -d ,)
r1=$("$G" plan "$SRC/configs/resnet50.yaml" --set train.recompute=blocks 2>/dev/null |
     sed -n 's/^  activations *\([0-9,]*\)  (train.*/\1/p' | tr -d ,)
check "configs/resnet50.yaml: recomputed training activations $r1 <= 40% of $r0" \
    bash -c "[ -n '$r1' ] && [ -n '$r0' ] && [ \$((100 * $r1)) -le \$((40 * $r0)) ]"
expect_ok "with train.recompute: blocks: largest micro-batch that fits: " -- "$G" plan "$T/res.yaml" --memory 4M
expect 4 "Remedies, planned for this job" "train.recompute: blocks fits micro-batch" -- \
    env GPURUN_MEMORY_LIMIT=4194304 "$G" "$T/res.yaml" --run-dir "$T/res_oom" --quiet --threads 1 \
    --set train.batch_size=128 --set train.micro_batch=128
expect 2 "model.layers[0]: recompute: a block use's key ('conv' is an op, not a block)" -- \
    "$G" validate "$T/res.yaml" --set 'model.layers=[{conv: {filters: 4, kernel: 3}, recompute: true}, flatten, {dense: {units: 10}}]'

expect 2 "--memory: expected a number of bytes (8G or 8GiB: 8 x 2^30; 8GB: 8 x 10^9; K, M, G, T) or auto, got '3X'" \
    -- "$G" plan "$J" --memory 3X
for bad in 3GiBs 0 -1 G 3.G2; do
    expect 2 "--memory: expected a number of bytes" "got '$bad'" -- "$G" plan "$J" --memory "$bad"
done
# the spellings people type: K/M/G/T and KiB.. powers of 1024, KB.. powers of 1000
for m in 8G:8,589,934,592 8GiB:8,589,934,592 8gib:8,589,934,592 8GB:8,000,000,000 1.5G:1,610,612,736 \
    512MiB:536,870,912 3M:3,145,728 20K:20,480 1000:1,000; do
    expect_ok "memory limit ${m#*:} bytes (--memory ${m%%:*})" -- "$G" plan "$J" --memory "${m%%:*}"
done
expect 2 "unknown option '--memory'" -- "$G" validate "$J" --memory 3M

e2e_done
