#!/usr/bin/env bash
# bench/mlp.sh — gpurun vs PyTorch (../shared/bench/torch_ref.py mlp) on the
# Fashion-MNIST MLP (784-512-256-10, batch 128, SGD momentum 0.9, lr 0.05,
# constant lr for both), one epoch, the same number of threads, in one run.
# Prints each side's training samples/s (median of REPEAT runs; eval and data
# loading excluded on both sides) and the ratio gpurun / PyTorch.
#   THREADS=2 REPEAT=3 bench/mlp.sh
# OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE are left as the machine sets them, for
# both sides alike (printed below).
set -euo pipefail
cd "$(dirname "$0")/.."
THREADS=${THREADS:-$(nproc)}
REPEAT=${REPEAT:-3}
REF=${TORCH_REF:-../shared/bench/torch_ref.py}
PY=/usr/bin/python3

[ -x build/gpurun ] || scripts/dev.sh build >/dev/null
mkdir -p data
[ -f data/fashion-mnist.h5 ] || build/gpurun data fashion-mnist data/fashion-mnist.h5 >/dev/null
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo "threads $THREADS, repeat $REPEAT, OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset} OPENBLAS_L2_SIZE=${OPENBLAS_L2_SIZE:-unset}"
g_runs=() t_runs=()
for i in $(seq "$REPEAT"); do
    build/gpurun configs/fashion-mnist-mlp.yaml --quiet --threads "$THREADS" --run-dir "$tmp/run$i" \
        --set train.epochs=1 --set train.schedule.type=constant --set log.every_steps=1000
    g=$($PY -c 'import json,sys; s=json.load(open(sys.argv[1])); print(s["train_samples_per_s"], s["last_val_accuracy"])' \
        "$tmp/run$i/summary.json")
    t=$($PY "$REF" mlp --epochs 1 --threads "$THREADS" |
        $PY -c 'import json,sys; r=json.loads(sys.stdin.read()); print(r["samples_per_s"], r["test_accuracy"])')
    echo "run $i: gpurun $g   pytorch $t   (samples/s, test accuracy)"
    g_runs+=("${g%% *}") t_runs+=("${t%% *}")
done
$PY - "${g_runs[*]}" "${t_runs[*]}" <<'PYEOF'
import statistics, sys
g = statistics.median(float(x) for x in sys.argv[1].split())
t = statistics.median(float(x) for x in sys.argv[2].split())
print(f"mlp  gpurun {g:,.0f} samples/s   pytorch {t:,.0f} samples/s   ratio {g / t:.2f}x")
PYEOF
