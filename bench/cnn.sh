#!/usr/bin/env bash
# bench/cnn.sh — gpurun vs PyTorch (../shared/bench/torch_ref.py) on two CNN
# workloads, side by side in one run, the same number of threads:
#   cnn       configs/fashion-mnist-cnn.yaml, one epoch (batch 64, SGD momentum
#             0.9, lr 0.05): training samples/s (eval and data loading
#             excluded on both sides) and test accuracy;
#   resnet50  configs/resnet50.yaml, training steps at batch 8 on 224x224
#             synthetic images (1000 classes): the median step time over STEPS
#             steps after a warm-up step.
# PyTorch runs with THREADS intra-op threads and with 1 (Debian's torch 1.13
# also spawns OpenBLAS threads); the ratio is against the faster of the two.
#   THREADS=2 REPEAT=1 STEPS=4 bench/cnn.sh [cnn|resnet50]
# OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE are left as the machine sets them, for
# both sides alike (printed below).
set -euo pipefail
cd "$(dirname "$0")/.."
THREADS=${THREADS:-$(nproc)}
REPEAT=${REPEAT:-1}
STEPS=${STEPS:-4}
WHAT=${1:-all}
REF=${TORCH_REF:-../shared/bench/torch_ref.py}
PY=/usr/bin/python3

[ -x build/gpurun ] || scripts/dev.sh build >/dev/null
mkdir -p data
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "threads $THREADS, repeat $REPEAT, OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset} OPENBLAS_L2_SIZE=${OPENBLAS_L2_SIZE:-unset}"

field() { $PY -c 'import json,sys; d=json.loads(sys.stdin.read().strip().splitlines()[-1]); print(*(d[k] for k in sys.argv[1:]))' "$@"; }

if [ "$WHAT" = all ] || [ "$WHAT" = cnn ]; then
    [ -f data/fashion-mnist.h5 ] || build/gpurun data fashion-mnist data/fashion-mnist.h5 >/dev/null
    g_runs=() t_runs=()
    for i in $(seq "$REPEAT"); do
        build/gpurun configs/fashion-mnist-cnn.yaml --quiet --threads "$THREADS" --run-dir "$tmp/cnn$i" \
            --set log.every_steps=1000
        g=$(field train_samples_per_s last_val_accuracy data_wait_pct <"$tmp/cnn$i/summary.json")
        t=$($PY "$REF" cnn --epochs 1 --threads "$THREADS" | field samples_per_s test_accuracy)
        t1=$($PY "$REF" cnn --epochs 1 --threads 1 | field samples_per_s test_accuracy)
        echo "run $i: gpurun $g   pytorch($THREADS threads) $t   pytorch(1 thread) $t1   (samples/s, test accuracy[, data wait %])"
        g_runs+=("${g%% *}")
        t_runs+=("$(printf '%s\n%s\n' "${t%% *}" "${t1%% *}" | sort -g | tail -n 1)")
    done
    $PY - "${g_runs[*]}" "${t_runs[*]}" <<'PYEOF'
import statistics, sys
g, t = (statistics.median(float(x) for x in a.split()) for a in sys.argv[1:3])
print(f"cnn       gpurun {g:,.0f} samples/s   pytorch {t:,.0f} samples/s (the faster setting)   ratio {g / t:.2f}x")
PYEOF
fi

if [ "$WHAT" = all ] || [ "$WHAT" = resnet50 ]; then
    SYN=data/synthetic-64-3x224x224-1000.h5
    [ -f "$SYN" ] || build/gpurun data synthetic "$SYN" --n 64 --test 8 --shape 3,224,224 --classes 1000 >/dev/null
    g_runs=() t_runs=()
    for i in $(seq "$REPEAT"); do
        # the stored 224x224 images as they are (a random 224 crop of them is the whole image)
        build/gpurun configs/resnet50.yaml --quiet --threads "$THREADS" --run-dir "$tmp/r50_$i" \
            --set data.train.path="$SYN" --set data.val.path="$SYN" --set data.val.group=/test \
            --set data.augment.crop.type=random --set data.augment.flip=false --set data.workers=1 \
            --set train.batch_size=8 --set train.micro_batch=8 --set train.steps=$((STEPS + 1)) \
            --set log.every_steps=1 --set train.schedule.type=constant
        g=$($PY -c '
import json, statistics, sys
t = [json.loads(l)["time_s"] for l in open(sys.argv[1]) if "\"train\"" in l]
print(1000 * statistics.median(b - a for a, b in zip(t, t[1:])))' "$tmp/r50_$i/metrics.jsonl")
        t=$($PY "$REF" resnet50 --steps "$STEPS" --threads "$THREADS" | field step_ms)
        t1=$($PY "$REF" resnet50 --steps "$STEPS" --threads 1 | field step_ms)
        echo "run $i: gpurun ${g} ms/step   pytorch($THREADS threads) ${t} ms   pytorch(1 thread) ${t1} ms"
        g_runs+=("$g")
        t_runs+=("$(printf '%s\n%s\n' "$t" "$t1" | sort -g | head -n 1)")
    done
    $PY - "${g_runs[*]}" "${t_runs[*]}" <<'PYEOF'
import statistics, sys
g, t = (statistics.median(float(x) for x in a.split()) for a in sys.argv[1:3])
print(f"resnet50  gpurun {g:,.0f} ms/step   pytorch {t:,.0f} ms/step (the faster setting)   "
      f"ratio (pytorch time / gpurun time) {t / g:.2f}x")
PYEOF
fi
