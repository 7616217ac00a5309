#!/usr/bin/env bash
# bench/parallel.sh — data parallelism on one machine's cores: the Fashion-MNIST CNN
# (configs/fashion-mnist-cnn.yaml, batch 64, one epoch) as 1 process x THREADS threads and as
# THREADS processes x 1 thread (`mpirun -np THREADS`, micro-batch 64 / THREADS each), in one
# run. Prints each layout's training samples/s (eval and data loading excluded, from rank 0's
# summary.json), test accuracy, and the share of the wall time rank 0 spent waiting in
# collectives (summary.json's comm_s: the gradient sums, the per-micro-batch signal agreement,
# the evaluation's sums). The multi-process layout runs twice: with the gradient sums in
# buckets started during backward (parallel.bucket_mb, default 25 MiB) and in one all-reduce
# after backward (bucket_mb 0); the share of the latter's wait that the buckets hide is
# 1 - comm_s(buckets) / comm_s(one). The same run also gives PyTorch's figure for the
# 1-process layout (bench/torch_ref.py cnn --channels-last, the faster of THREADS
# and 1 intra-op threads) for scale.
#   THREADS=2 REPEAT=1 bench/parallel.sh
# OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE are left as the machine sets them (printed below).
set -euo pipefail
cd "$(dirname "$0")/.."
THREADS=${THREADS:-$(nproc)}
REPEAT=${REPEAT:-1}
REF=${TORCH_REF:-bench/torch_ref.py}
PY=/usr/bin/python3
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

command -v mpirun >/dev/null || { echo "bench/parallel.sh: mpirun is not installed (openmpi-bin)" >&2; exit 2; }
[ -x build/gpurun ] || scripts/dev.sh build >/dev/null
mkdir -p data
[ -f data/fashion-mnist.h5 ] || build/gpurun data fashion-mnist data/fashion-mnist.h5 >/dev/null
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
MB=$((64 / THREADS))

echo "cpu      $(lscpu | sed -n 's/^Model name: *//p' | head -n 1), $(nproc) cores; $(mpirun --version | head -n 1)"
echo "threads $THREADS, repeat $REPEAT, OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset} OPENBLAS_L2_SIZE=${OPENBLAS_L2_SIZE:-unset}"
summary() {
    $PY -c 'import json,sys; s=json.load(open(sys.argv[1]))
print(round(s["train_samples_per_s"], 1), round(s["last_val_accuracy"], 4), round(100 * s["comm_s"] / s["wall_s"], 2))' "$1"
}
one=() many=() tor=() cb=() cs=()
for i in $(seq "$REPEAT"); do
    build/gpurun configs/fashion-mnist-cnn.yaml --quiet --threads "$THREADS" --run-dir "$tmp/one$i" \
        --set log.every_steps=1000 --set device=cpu
    a=$(summary "$tmp/one$i/summary.json")
    mpirun -np "$THREADS" --oversubscribe build/gpurun configs/fashion-mnist-cnn.yaml --quiet --threads 1 \
        --run-dir "$tmp/many$i" --set log.every_steps=1000 --set train.micro_batch=$MB --set device=cpu
    b=$(summary "$tmp/many$i/summary.json")
    mpirun -np "$THREADS" --oversubscribe build/gpurun configs/fashion-mnist-cnn.yaml --quiet --threads 1 \
        --run-dir "$tmp/sync$i" --set log.every_steps=1000 --set train.micro_batch=$MB --set device=cpu \
        --set parallel.bucket_mb=0
    c=$(summary "$tmp/sync$i/summary.json")
    t=$($PY "$REF" cnn --epochs 1 --threads "$THREADS" --channels-last |
        $PY -c 'import json,sys; print(json.loads(sys.stdin.read().strip().splitlines()[-1])["samples_per_s"])')
    t1=$($PY "$REF" cnn --epochs 1 --threads 1 --channels-last |
        $PY -c 'import json,sys; print(json.loads(sys.stdin.read().strip().splitlines()[-1])["samples_per_s"])')
    echo "run $i: 1 x $THREADS threads $a   $THREADS x 1 thread: buckets $b, one all-reduce $c" \
         "  pytorch $t ($THREADS threads) $t1 (1)   (samples/s, test accuracy, % of wall time in collectives)"
    one+=("${a%% *}") many+=("${b%% *}") tor+=("$(printf '%s\n%s\n' "$t" "$t1" | sort -g | tail -n 1)")
    cb+=("${b##* }") cs+=("${c##* }")
done
$PY - "${one[*]}" "${many[*]}" "${tor[*]}" "$THREADS" "${cb[*]}" "${cs[*]}" <<'PYEOF'
import statistics, sys
o, m, t = (statistics.median(float(x) for x in a.split()) for a in sys.argv[1:4])
n = sys.argv[4]
cb, cs = (statistics.median(float(x) for x in a.split()) for a in sys.argv[5:7])
hidden = f"{100 * (1 - cb / cs):.0f}%" if cs > 0 else "n/a"
print(f"cnn  1 process x {n} threads {o:,.0f} samples/s   {n} processes x 1 thread {m:,.0f} samples/s "
      f"({m / o:.2f}x)   pytorch 1 process {t:,.0f} (gpurun 1 process {o / t:.2f}x)")
print(f"     collectives: {cb:.2f}% of wall time with buckets, {cs:.2f}% with one all-reduce after backward "
      f"(hidden by the buckets: {hidden})")
PYEOF
