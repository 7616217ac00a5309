#!/usr/bin/env bash
# bench/threads.sh — gpurun's thread count on a shared machine: the Fashion-MNIST CNN
# (configs/fashion-mnist-cnn.yaml, STEPS steps) trained with gpurun's default thread count, with
# --threads 1 and with --threads $(nproc), first on a quiet machine, then beside BUSY processes
# that each keep one core busy (a shell loop: another user's job). PyTorch at its fastest
# setting for this model (bench/torch_ref.py cnn --channels-last, its default threads and 1)
# runs in the same conditions, side by side. Each row prints training samples/s (gpurun:
# summary.json's train_samples_per_s; torch: its samples/s over the same steps), the thread count
# the default took (summary.json's threads) and the default's ratio to one thread: a fresh run's
# default takes the CPUs of the affinity mask less those busy with other work as it starts, so on a
# loaded machine it should not fall below 1 (two threads waiting for each other at every parallel
# region while a busy neighbour preempts one of them ran at half of one thread's speed).
# Each figure is the median of REPEAT runs, taken in turns (default, 1, all; default, 1, all; ...)
# so a drift of the machine touches all alike.
#   STEPS=300 BUSY=1 REPEAT=3 bench/threads.sh
# OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE are left as the machine sets them, for both sides alike.
set -euo pipefail
cd "$(dirname "$0")/.."
STEPS=${STEPS:-300}
BUSY=${BUSY:-1}
REPEAT=${REPEAT:-3}
REF=${TORCH_REF:-bench/torch_ref.py}
PY=/usr/bin/python3
N=$(nproc)

[ -x build/gpurun ] || scripts/dev.sh build >/dev/null
mkdir -p data
[ -f data/fashion-mnist.h5 ] || build/gpurun data fashion-mnist data/fashion-mnist.h5 >/dev/null
tmp=$(mktemp -d)
busy=()
stop_busy() { [ ${#busy[@]} -eq 0 ] || kill "${busy[@]}" 2>/dev/null || true; busy=(); }
trap 'stop_busy; rm -rf "$tmp"' EXIT

echo "cpu      $(lscpu | sed -n 's/^Model name: *//p' | head -n 1), $N cores; STEPS=$STEPS BUSY=$BUSY;" \
     "OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset}"

# gpurun ARGS...: training samples/s of STEPS steps
g() {
    local d=$tmp/g$RANDOM
    build/gpurun configs/fashion-mnist-cnn.yaml --run-dir "$d" --set train.steps="$STEPS" \
        --set eval.every_epochs=0 --set log.every_steps=1000 "$@" 2>"$d.err" >/dev/null
    $PY -c 'import json,sys; s = json.load(open(sys.argv[1])); print("%.0f" % s["train_samples_per_s"])
print(s["threads"], file=open(sys.argv[2], "a"))' "$d/summary.json" "$tmp/threads"
}
med() { printf '%s\n' "$@" | sort -n | sed -n "$(( ($# + 1) / 2 ))p"; }
# torch THREADS: samples/s of STEPS steps
t() {
    $PY "$REF" cnn --steps "$STEPS" --threads "$1" --channels-last |
        $PY -c 'import json,sys; print("%.0f" % json.loads(sys.stdin.read())["samples_per_s"])'
}

row() {
    local name=$1 gd=() g1=() gn=() td t1
    : >"$tmp/threads"
    for _ in $(seq "$REPEAT"); do
        gd+=("$(g)"); g1+=("$(g --threads 1)"); gn+=("$(g --threads "$N")")
    done
    # the counts the default took (every third line: the default's runs)
    local took
    took=$(awk 'NR % 3 == 1' "$tmp/threads" | sort -n | uniq | paste -sd/)
    gd=$(med "${gd[@]}") g1=$(med "${g1[@]}") gn=$(med "${gn[@]}") td=$(t "$N") t1=$(t 1)
    printf '%-7s gpurun default (%s threads) %6s  1 thread %6s  %d threads %6s  (default / 1 thread %.2fx)   ' \
        "$name" "$took" "$gd" "$g1" "$N" "$gn" "$($PY -c "print($gd / $g1)")"
    printf 'pytorch %d threads %6s  1 thread %6s   samples/s\n' "$N" "$td" "$t1"
}

row quiet
for _ in $(seq "$BUSY"); do (while :; do :; done) & busy+=($!); done
sleep 1
row "loaded"
stop_busy
