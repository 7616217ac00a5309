#!/usr/bin/env bash
# bench/profile.sh — does `gpurun --profile` time the convolutions right? configs/fashion-mnist-cnn.yaml
# (batch 64, the CPU) profiled over STEPS steps, next to bench/conv_bench.c timing the same
# kernels on the same shapes alone, in one run: each conv row's GFLOP/s from profile.txt and from
# conv_bench (its fastest call with the operands in cache, and with the caches flushed first as
# a step's other layers flush them), and the ratios. Also the profile's table total against its
# measured step time.
#   THREADS=2 STEPS=20 bench/profile.sh
# OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE are left as the machine sets them (printed below).
set -euo pipefail
cd "$(dirname "$0")/.."
THREADS=${THREADS:-$(nproc)}
STEPS=${STEPS:-20}
[ -x build/gpurun ] || scripts/dev.sh build >/dev/null
mkdir -p data
[ -f data/fashion-mnist.h5 ] || build/gpurun data fashion-mnist data/fashion-mnist.h5 >/dev/null
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --build build --target gpurun gpurun_conv_bench -j "$(nproc)" >/dev/null
echo "cpu      $(lscpu | sed -n 's/^Model name: *//p' | head -n 1), $(nproc) cores; threads $THREADS, steps $STEPS," \
     "OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset} OPENBLAS_L2_SIZE=${OPENBLAS_L2_SIZE:-unset}"
build/gpurun configs/fashion-mnist-cnn.yaml --device cpu --quiet --threads "$THREADS" --run-dir "$tmp/run" \
    --set train.steps=$((STEPS + 3)) --profile "$STEPS" 2>/dev/null
sed -n 3p "$tmp/run/profile.txt"
# conv0: 1x28x28 -> 32, conv1: 32x14x14 -> 64 (k3 s1 p1, n 64)
OMP_NUM_THREADS=$THREADS build/gpurun_conv_bench onednn 64,1,28,28,32,3,1,1 64,32,14,14,64,3,1,1 >"$tmp/bench.txt"
CONV_BENCH_COLD=1 OMP_NUM_THREADS=$THREADS build/gpurun_conv_bench onednn 64,1,28,28,32,3,1,1 64,32,14,14,64,3,1,1 \
    >"$tmp/cold.txt"
/usr/bin/python3 - "$tmp/run/profile.txt" "$tmp/bench.txt" "$tmp/cold.txt" <<'PY'
import re, sys
prof = {}
for l in open(sys.argv[1]):
    f = l.split()
    if len(f) == 9 and f[1].startswith("conv") and f[2] in ("forward", "backward"):
        prof[(f[0], f[1])] = (float(f[5]), float(f[7]))   # mean_us, GFLOP/s
bench = [l.split() for l in open(sys.argv[2]).read().splitlines()[1:]]
cold = [l.split() for l in open(sys.argv[3]).read().splitlines()[1:]]
# FLOPs of a call: 2 * n * f * ho * wo * c * k * k (each direction)
shapes = {"conv0": (64, 1, 28, 28, 32), "conv1": (64, 32, 14, 14, 64)}
cols = {"conv": 3, "conv_bwd_data": 4, "conv_bwd_params": 5}
print("conv_bench: the fastest call with its operands in cache (hot), and with the caches flushed first (cold)")
print(f"{'layer':6} {'op':16} {'profile GFLOP/s':>16} {'bench hot':>10} {'ratio':>6} {'bench cold':>11} {'ratio':>6}")
for i, (layer, (n, c, h, w, f)) in enumerate(sorted(shapes.items())):
    row = bench[i]
    flops = 2.0 * n * f * h * w * c * 9
    for op, col in cols.items():
        if (layer, op) not in prof:
            continue
        ms, mc = float(row[len(row) - 4 + col - 3]), float(cold[i][len(row) - 4 + col - 3])
        if ms <= 0 or mc <= 0:
            continue
        b, bc = flops / (ms / 1e3) / 1e9, flops / (mc / 1e3) / 1e9
        p = prof[(layer, op)][1]
        print(f"{layer:6} {op:16} {p:16.1f} {b:10.1f} {p / b:6.2f} {bc:11.1f} {p / bc:6.2f}")
PY
