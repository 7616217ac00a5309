#!/usr/bin/env bash
# tests/same_results.sh — "nothing changed for existing jobs": trains the shipped configs for a
# few steps with two commits of gpurun and checks that they compute the same thing, bit for bit.
# Issue 24 (one graph for any model) rebuilds the graph, the losses and the batch handling under
# every job; its rule is that existing jobs do not notice. Not a ctest (it builds two trees and
# trains ResNet-50 on the CPU: about 10 minutes on 2 cores); run it before landing such a change:
#
#   bash tests/same_results.sh BASE [OTHER]
#
# BASE and OTHER are commits (OTHER: HEAD, as committed; uncommitted changes are not seen). Each
# is exported (git archive) and built CPU-only, Release, into $SAME_TMP/build-<commit>, kept for
# the next call. Both binaries then train, with the same data, threads and options:
#
#   mlp         configs/fashion-mnist-mlp.yaml, 60 steps, an evaluation at 30 and at the end
#   cnn         configs/fashion-mnist-cnn.yaml, 30 steps
#   cnn_bf16    the same with precision bf16
#   augment     configs/fashion-mnist-cnn-augment.yaml, 30 steps (random crops, flips)
#   resnet18    configs/resnet18-cifar10.yaml, 4 steps of 32 on synthetic 3x32x32 data
#   resnet50    configs/resnet50.yaml, 2 steps of 8 on synthetic 3x224x224 data (random crop)
#   mpi2        the mlp job under `mpirun -np 2` (skipped without mpirun)
#   resume      the mlp job stopped at step 23 (--profile 20: 3 warm-up + 20 steps, a checkpoint),
#               then --resume auto to step 60
#
# and the runs are compared (tests/same_results.py): every metrics.jsonl line less its timing
# fields (time_s, samples_per_s, data_wait_pct, rss_bytes, cpu_pct, gpu_*), summary.json's
# figures (steps, losses, accuracies, loss scale, params) and every tensor of weights.h5, bytes
# equal. Data: Fashion-MNIST from Debian's dataset-fashion-mnist when installed, else a
# synthetic stand-in of the same shape (said). One line per job; exit 0 when every job is the
# same, 1 when one differs (the first difference named), 2 on a usage or build error.
#
# Environment: SAME_TMP (default /tmp/gpurun-same), SAME_THREADS (default 2, or 1 on one CPU;
# both sides take it), SAME_JOBS (a space-separated subset of the jobs above).
set -euo pipefail

SRC=$(cd "$(dirname "$0")/.." && pwd)
if [ $# -lt 1 ] || [ $# -gt 2 ]; then
    sed -n '2,30p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
fi
TMP=${SAME_TMP:-/tmp/gpurun-same}
THR=${SAME_THREADS:-$([ "$(nproc)" -ge 2 ] && echo 2 || echo 1)}
JOBS=${SAME_JOBS:-mlp cnn cnn_bf16 augment resnet18 resnet50 mpi2 resume}
PY=/usr/bin/python3
mkdir -p "$TMP"

# build COMMIT: the gpurun binary of COMMIT in $BIN
build() {
    local c dir
    c=$(git -C "$SRC" rev-parse --verify "$1^{commit}") || { echo "same_results: no commit '$1'" >&2; exit 2; }
    dir=$TMP/build-${c:0:12}
    BIN=$dir/build/gpurun
    [ -x "$BIN" ] && return 0
    echo "building ${c:0:12} ($(git -C "$SRC" log -1 --format=%s "$c" | cut -c1-60)) in $dir"
    rm -rf "$dir" && mkdir -p "$dir/src"
    git -C "$SRC" archive "$c" | tar -x -C "$dir/src"
    if ! { cmake -S "$dir/src" -B "$dir/build" -DCMAKE_BUILD_TYPE=Release -DGPURUN_CUDA=OFF >/dev/null &&
        cmake --build "$dir/build" -j "$(nproc)" --target gpurun >"$dir/build.log" 2>&1; }; then
        echo "same_results: the build of ${c:0:12} failed: $dir/build.log" >&2
        exit 2
    fi
}

build "$1"
BASE_BIN=$BIN BASE=$1
build "${2:-HEAD}"
OTHER_BIN=$BIN OTHER=${2:-HEAD}

# ---------------------------------------------------------------- data (made once, by BASE)
D=$TMP/data
mkdir -p "$D"
if [ ! -f "$D/fmnist.h5" ]; then
    if [ -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ] ||
        [ -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte ]; then
        "$BASE_BIN" data fashion-mnist "$D/fmnist.h5" >/dev/null 2>&1
    else
        echo "note: no dataset-fashion-mnist here; the Fashion-MNIST jobs train on synthetic 1x28x28 data"
        "$BASE_BIN" data synthetic "$D/fmnist.h5" --n 6000 --test 1000 --shape 1,28,28 --seed 1 >/dev/null 2>&1
    fi
fi
[ -f "$D/cifar.h5" ] || "$BASE_BIN" data synthetic "$D/cifar.h5" --n 1024 --test 128 --shape 3,32,32 --seed 2 >/dev/null 2>&1
[ -f "$D/r50.h5" ] || "$BASE_BIN" data synthetic "$D/r50.h5" --n 32 --test 8 --shape 3,224,224 --classes 1000 \
    --seed 3 >/dev/null 2>&1

FM=(--set "data.train.path=$D/fmnist.h5" --set "data.val.path=$D/fmnist.h5" --set data.val.group=/test)
MLP=("$SRC/configs/fashion-mnist-mlp.yaml" "${FM[@]}" --set train.steps=60 --set eval.every_steps=30
    --set log.every_steps=10)

# job NAME: the command line of job NAME (in the array J) and its launcher (L: "" or mpirun)
job() {
    L=""
    case $1 in
    mlp | resume) J=("${MLP[@]}") ;;
    mpi2) J=("${MLP[@]}" --set train.steps=30) L=mpirun ;;
    cnn) J=("$SRC/configs/fashion-mnist-cnn.yaml" "${FM[@]}" --set train.steps=30 --set log.every_steps=5) ;;
    cnn_bf16) J=("$SRC/configs/fashion-mnist-cnn.yaml" "${FM[@]}" --set train.steps=30 --set log.every_steps=5
        --set precision=bf16) ;;
    augment) J=("$SRC/configs/fashion-mnist-cnn-augment.yaml" "${FM[@]}" --set train.steps=30
        --set log.every_steps=5) ;;
    resnet18) J=("$SRC/configs/resnet18-cifar10.yaml" --set "data.train.path=$D/cifar.h5"
        --set "data.val.path=$D/cifar.h5" --set data.val.group=/test --set train.batch_size=32
        --set train.steps=4 --set log.every_steps=1) ;;
    resnet50) J=("$SRC/configs/resnet50.yaml" --set "data.train.path=$D/r50.h5" --set "data.val.path=$D/r50.h5"
        --set data.val.group=/test --set data.augment.crop.type=random --set train.batch_size=8
        --set train.micro_batch=8 --set train.steps=2 --set log.every_steps=1) ;;
    *) echo "same_results: no job '$1' (SAME_JOBS)" >&2; exit 2 ;;
    esac
}

# train BIN SIDE NAME: runs job NAME with BIN into $TMP/runs/SIDE/NAME; 0 when it exited 0
train() {
    local bin=$1 out=$TMP/runs/$2/$3 rc=0
    rm -rf "$out"
    mkdir -p "$(dirname "$out")"
    job "$3"
    local opts=(--device cpu --quiet --run-dir "$out")
    if [ -n "$L" ]; then
        OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun --oversubscribe -np 2 \
            "$bin" "${J[@]}" "${opts[@]}" --threads 1 >"$out.log" 2>&1 || rc=$?
    elif [ "$3" = resume ]; then
        # --profile stops at a fixed step (3 warm-up + 20) with a checkpoint, status profiled
        "$bin" "${J[@]}" "${opts[@]}" --threads "$THR" --profile 20 >"$out.log" 2>&1 || rc=$?
        [ $rc -ne 0 ] || "$bin" "${J[@]}" "${opts[@]}" --resume auto >>"$out.log" 2>&1 || rc=$?
    else
        "$bin" "${J[@]}" "${opts[@]}" --threads "$THR" >"$out.log" 2>&1 || rc=$?
    fi
    [ $rc -eq 0 ] || echo "  $2 exited $rc: $(tail -n 2 "$out.log" | tr '\n' ' ' | cut -c1-200)"
    return $rc
}

echo "comparing $BASE ($BASE_BIN) with $OTHER ($OTHER_BIN); $THR threads; runs in $TMP/runs"
nsame=0 ndiff=0 nskip=0
for name in $JOBS; do
    job "$name"
    if [ -n "$L" ] && ! command -v mpirun >/dev/null; then
        echo "SKIP $name: no mpirun"
        nskip=$((nskip + 1))
        continue
    fi
    t0=$SECONDS
    if ! train "$BASE_BIN" base "$name" || ! train "$OTHER_BIN" other "$name"; then
        echo "DIFF $name: a run failed (logs: $TMP/runs/{base,other}/$name.log)"
        ndiff=$((ndiff + 1))
        continue
    fi
    if verdict=$("$PY" "$SRC/tests/same_results.py" "$TMP/runs/base/$name" "$TMP/runs/other/$name"); then
        echo "SAME $name: $verdict ($((SECONDS - t0)) s)"
        nsame=$((nsame + 1))
    else
        echo "DIFF $name: $verdict"
        ndiff=$((ndiff + 1))
    fi
done
echo "$nsame same, $ndiff different, $nskip skipped"
[ $ndiff -eq 0 ]
