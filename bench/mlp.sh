#!/usr/bin/env bash
# bench/mlp.sh — gpurun vs PyTorch (bench/torch_ref.py mlp) on the
# Fashion-MNIST MLP (784-512-256-10, batch 128, SGD momentum 0.9, lr 0.05,
# constant lr for both), one epoch, the same number of threads, in one run.
# Prints each side's training samples/s (median of REPEAT runs; eval and data
# loading excluded on both sides) and the ratio gpurun / PyTorch. PyTorch runs
# twice per repeat: with THREADS intra-op threads (the same as gpurun), and
# with 1, since Debian's torch 1.13 calls OpenBLAS, whose own threads then
# use the cores anyway (torch with 2 threads oversubscribes them here).
# The ratio is taken against the faster of the two. gpurun's line also shows
# data_wait_pct: the share of training time the loop waited for a batch.
# Then each side's achieved GFLOP/s (gpurun's count of a training pass's FLOPs, forward and
# backward, for both) and its % of this machine's fp32 GEMM peak on THREADS threads, which
# build/gpurun_peak_bench measures first (bench/peak_bench.c). Last, the ceiling the matrix
# products alone set: the 8 products of a step at its shapes, cache-hot in a loop, on gpurun's
# routes (bench/gemm_bench.c; once per repeat, after gpurun's run, the median), as a % of the
# same peak: no step can beat it. With it, the floor the optimizer's memory traffic sets (SGD with
# momentum reads and writes each weight and its momentum once a step: 16 bytes a parameter at the
# measured copy bandwidth), and the % of the peak a step of the products at their hot speed plus
# that floor would reach.
#   THREADS=2 REPEAT=3 bench/mlp.sh
# OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE are left as the machine sets them, for
# both sides alike (printed below).
set -euo pipefail
cd "$(dirname "$0")/.."
THREADS=${THREADS:-$(nproc)}
REPEAT=${REPEAT:-3}
REF=${TORCH_REF:-bench/torch_ref.py}
PY=/usr/bin/python3

[ -x build/gpurun ] || scripts/dev.sh build >/dev/null
mkdir -p data
[ -f data/fashion-mnist.h5 ] || build/gpurun data fashion-mnist data/fashion-mnist.h5 >/dev/null
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo "cpu $(lscpu | sed -n 's/^Model name: *//p' | head -n 1), $(nproc) cores; flags: $(grep -m1 '^flags' /proc/cpuinfo |
    tr ' ' '\n' | grep -x -E 'avx2|avx512f|avx512_bf16|amx_tile|amx_bf16' | paste -sd' ' - || true)"
echo "threads $THREADS, repeat $REPEAT, OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset} OPENBLAS_L2_SIZE=${OPENBLAS_L2_SIZE:-unset}"
# the roofline: this machine's fp32 GEMM peak on THREADS threads (bench/peak_bench.c)
[ -x build/gpurun_peak_bench ] && [ -x build/gpurun_gemm_bench ] || scripts/dev.sh build >/dev/null
PEAK=$(build/gpurun_peak_bench "$THREADS")
echo "${PEAK%%$'\n'*}"
PEAK=${PEAK##*$'\n'}
g_runs=() t_runs=() t1_runs=() m_runs=()
for i in $(seq "$REPEAT"); do
    build/gpurun configs/fashion-mnist-mlp.yaml --quiet --threads "$THREADS" --run-dir "$tmp/run$i" \
        --set train.epochs=1 --set train.schedule.type=constant --set log.every_steps=1000
    g=$($PY -c 'import json,sys; s=json.load(open(sys.argv[1])); print(s["train_samples_per_s"], s["last_val_accuracy"], s["data_wait_pct"])' \
        "$tmp/run$i/summary.json")
    GEMMS=$(build/gpurun_gemm_bench "$THREADS" 128 784 512 256 10) # the same moment's ceiling
    m_runs+=("${GEMMS##*$'\n'}")
    t=$($PY "$REF" mlp --epochs 1 --threads "$THREADS" |
        $PY -c 'import json,sys; r=json.loads(sys.stdin.read()); print(r["samples_per_s"], r["test_accuracy"])')
    t1=$($PY "$REF" mlp --epochs 1 --threads 1 |
        $PY -c 'import json,sys; r=json.loads(sys.stdin.read()); print(r["samples_per_s"], r["test_accuracy"])')
    echo "run $i: gpurun $g   pytorch($THREADS threads) $t   pytorch(1 thread) $t1   (samples/s, test accuracy[, gpurun's data wait %])"
    g_runs+=("${g%% *}") t_runs+=("${t%% *}") t1_runs+=("${t1%% *}")
done
echo "the matrix products alone, the last repeat's (gpurun_gemm_bench):"
echo "${GEMMS%$'\n'*}"
flops=$($PY -c 'import json,sys; print(json.load(open(sys.argv[1]))["train_flops_per_sample"])' "$tmp/run1/summary.json")
params=$($PY -c 'import json,sys; print(json.load(open(sys.argv[1]))["params"])' "$tmp/run1/summary.json")
$PY - "${g_runs[*]}" "${t_runs[*]}" "${t1_runs[*]}" "$THREADS" "$flops" "$PEAK" "$(printf '%s\n' "${m_runs[@]}")" "$params" <<'PYEOF'
import json, statistics, sys
g, t, t1 = (statistics.median(float(x) for x in a.split()) for a in sys.argv[1:4])
flops, roof = float(sys.argv[5]), json.loads(sys.argv[6])["fp32_gflops"]
best = max(t, t1)
print(f"mlp  gpurun {g:,.0f} samples/s ({sys.argv[4]} threads)   pytorch {t:,.0f} ({sys.argv[4]} threads), "
      f"{t1:,.0f} (1 thread)   ratio vs the faster pytorch {g / best:.2f}x")
gf, tf = g * flops / 1e9, best * flops / 1e9
print(f"     GFLOP/s (a training pass's {flops:,.0f} FLOPs a sample): gpurun {gf:.1f} = {100 * gf / roof:.0f}% of the "
      f"fp32 GEMM peak ({roof:.1f}; goal >= 80%: {'met' if gf >= 0.8 * roof else 'NOT met'}), the faster pytorch "
      f"{tf:.1f} = {100 * tf / roof:.0f}%")
mm = [json.loads(l) for l in sys.argv[7].splitlines()]
route, fast = (statistics.median(m[k] for m in mm) for k in ("route_us", "best_us"))
cg = mm[0]["flops"] / route / 1e3
print(f"     ceiling: the step's matrix products alone, cache-hot (gpurun_gemm_bench, the median of {len(mm)}), "
      f"{route:.0f} us a step = {cg:.1f} GFLOP/s = {100 * cg / roof:.0f}% of the peak (the faster of sgemm and "
      f"matmul for each: {fast:.0f} us); gpurun's step reaches {100 * gf / cg:.0f}% of that")
bw = json.loads(sys.argv[6])["mem_gbs"]
opt_us = 16 * int(sys.argv[8]) / (bw * 1e3)
reach = mm[0]["flops"] / (route + opt_us) / 1e3
print(f"     with the optimizer's floor (its weights and momentum read and written once a step, 16 bytes a "
      f"parameter at {bw:.1f} GB/s: {opt_us:.0f} us), a step of the products at their hot speed plus that floor "
      f"reaches {reach:.1f} GFLOP/s = {100 * reach / roof:.0f}% of the peak")
PYEOF
