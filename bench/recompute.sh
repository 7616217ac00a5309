#!/usr/bin/env bash
# bench/recompute.sh — what activation recomputation costs and saves: configs/resnet50.yaml
# at batch 8 (224x224 synthetic images, 1000 classes, the CPU), plain and with
# `train.recompute: blocks`, in one run. Prints each side's median step time over STEPS steps
# after a warm-up step (REPEAT runs, the median), the planned training activation bytes of
# each (`gpurun plan` at micro-batch 64, configs/resnet50.yaml's own), and the ratios. The
# expected cost is about one more forward pass of the blocks: a step is about 1 forward + 2
# for backward, so about a third more.
#   THREADS=2 REPEAT=1 STEPS=4 bench/recompute.sh
# OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE are left as the machine sets them (printed below).
set -euo pipefail
cd "$(dirname "$0")/.."
THREADS=${THREADS:-$(nproc)}
REPEAT=${REPEAT:-1}
STEPS=${STEPS:-4}
PY=/usr/bin/python3
[ -x build/gpurun ] || scripts/dev.sh build >/dev/null
mkdir -p data
SYN=data/synthetic-64-3x224x224-1000.h5
[ -f "$SYN" ] || build/gpurun data synthetic "$SYN" --n 64 --test 8 --shape 3,224,224 --classes 1000 >/dev/null
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "cpu      $(lscpu | sed -n 's/^Model name: *//p' | head -n 1), $(nproc) cores; threads $THREADS, repeat $REPEAT," \
     "steps $STEPS, OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset} OPENBLAS_L2_SIZE=${OPENBLAS_L2_SIZE:-unset}"

act() { build/gpurun plan configs/resnet50.yaml "$@" 2>/dev/null | sed -n 's/^  activations *\([0-9,]*\)  (train.*/\1/p' | tr -d ,; }
step_ms() {
    $PY -c 'import json, statistics, sys
t = [json.loads(l)["time_s"] for l in open(sys.argv[1]) if "\"train\"" in l]
print(round(1000 * statistics.median(b - a for a, b in zip(t, t[1:])), 1))' "$1"
}
declare -A MS
for mode in none blocks; do
    runs=()
    for i in $(seq "$REPEAT"); do
        build/gpurun configs/resnet50.yaml --device cpu --quiet --threads "$THREADS" --run-dir "$tmp/$mode$i" \
            --set train.recompute=$mode --set data.train.path="$SYN" --set data.val.path="$SYN" \
            --set data.val.group=/test --set data.augment.crop.type=random --set data.augment.flip=false \
            --set data.workers=1 --set train.batch_size=8 --set train.micro_batch=8 \
            --set train.steps=$((STEPS + 1)) --set log.every_steps=1 --set train.schedule.type=constant
        runs+=("$(step_ms "$tmp/$mode$i/metrics.jsonl")")
    done
    MS[$mode]=$($PY -c 'import statistics, sys; print(statistics.median(float(x) for x in sys.argv[1:]))' "${runs[@]}")
    echo "recompute $mode: ${runs[*]} ms/step (batch 8)"
done
a0=$(act) a1=$(act --set train.recompute=blocks)
$PY - "${MS[none]}" "${MS[blocks]}" "$a0" "$a1" <<'PYEOF'
import sys
t0, t1, a0, a1 = (float(x) for x in sys.argv[1:])
print(f"resnet50  step {t0:.1f} -> {t1:.1f} ms ({t1 / t0:.2f}x)   planned training activations at micro-batch 64: "
      f"{a0 / 1e9:.2f} -> {a1 / 1e9:.2f} GB ({100 * a1 / a0:.1f}%)")
PYEOF
