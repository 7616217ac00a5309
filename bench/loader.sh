#!/usr/bin/env bash
# bench/loader.sh — the data loader alone (no training), gpurun against the
# PyTorch DataLoader of bench/torch_loader_ref.py (h5py, one file
# handle per worker, torchvision transforms), with the same number of workers,
# batch size and work, in one run:
#   (a) Fashion-MNIST /train: random 28x28 crop of the image padded by 4,
#       horizontal flip, normalize (batch 256);
#   (b) synthetic 3x256x256 uint8, N images (20,000): random-resized-crop to
#       224, horizontal flip, normalize (batch 256).
# Each side: one warm-up batch, then BATCHES timed batches; median of REPEAT.
# gpurun holds Fashion-MNIST (47 MB) in memory by default (data.cache auto);
# (a) runs a second time with data.cache none, reading the file per batch as
# the reference does. (b) is over the 2 GiB limit: read per batch.
# Prints samples/s, GB/s (bytes of uint8 pixels delivered, as the reference
# counts them) and the ratio gpurun / PyTorch.
#   WORKERS=2 REPEAT=3 BATCHES=60 N=20000 bench/loader.sh
# Needs python3-torchvision (apt-get install python3-torchvision) for the
# reference. The synthetic file (3.9 GB for N=20000) is made once under data/
# by `gpurun data synthetic`; both sides then read it from the page cache.
# OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE do not matter here (no GEMMs) and are
# left as the machine sets them.
set -euo pipefail
cd "$(dirname "$0")/.."
WORKERS=${WORKERS:-2}
REPEAT=${REPEAT:-3}
BATCHES=${BATCHES:-60}
N=${N:-20000}
REF=${TORCH_LOADER_REF:-bench/torch_loader_ref.py}
PY=/usr/bin/python3

$PY -c 'import torchvision' 2>/dev/null || {
    echo "bench/loader.sh: the reference needs torchvision: apt-get install python3-torchvision" >&2
    exit 2
}
[ -x build/gpurun ] && [ -x build/gpurun_loader_bench ] || scripts/dev.sh build >/dev/null
mkdir -p data
[ -f data/fashion-mnist.h5 ] || build/gpurun data fashion-mnist data/fashion-mnist.h5 >/dev/null
SYN=data/synthetic-$N-3x256x256.h5
[ -f "$SYN" ] || build/gpurun data synthetic "$SYN" --n "$N" --shape 3,256,256 >/dev/null
cat "$SYN" data/fashion-mnist.h5 >/dev/null # into the page cache, for both sides alike

echo "workers $WORKERS, batch 256, $BATCHES timed batches, repeat $REPEAT, $(nproc) cores"
run_case() { # name file crop [extra gpurun_loader_bench options]
    local name=$1 file=$2 crop=$3 g=() t=()
    shift 3
    for i in $(seq "$REPEAT"); do
        g+=("$(build/gpurun_loader_bench "$file" --group /train --batch 256 --workers "$WORKERS" \
               --crop "$crop" --batches "$BATCHES" "$@")")
        t+=("$($PY "$REF" "$file" --group /train --batch 256 --workers "$WORKERS" --crop "$crop" \
               --batches "$BATCHES" | tail -n 1)")
    done
    $PY - "$name" "$(printf '%s\n' "${g[@]}")" "$(printf '%s\n' "${t[@]}")" <<'PYEOF'
import json, statistics, sys
name = sys.argv[1]
g = [json.loads(l) for l in sys.argv[2].splitlines() if l.strip()]
t = [json.loads(l) for l in sys.argv[3].splitlines() if l.strip()]
gs = statistics.median(r["samples_per_s"] for r in g); gb = statistics.median(r["gb_per_s"] for r in g)
ts = statistics.median(r["samples_per_s"] for r in t); tb = statistics.median(r["gb_per_s"] for r in t)
print(f"{name}: gpurun {gs:,.0f} samples/s {gb:.3f} GB/s   pytorch {ts:,.0f} samples/s {tb:.3f} GB/s   "
      f"ratio {gs / ts:.2f}x   (runs: gpurun {[round(r['samples_per_s']) for r in g]}, "
      f"pytorch {[round(r['samples_per_s']) for r in t]})")
PYEOF
}
run_case "(a) fashion-mnist pad4+flip" data/fashion-mnist.h5 pad4
run_case "(a) the same, gpurun reading the file per batch (data.cache none)" data/fashion-mnist.h5 pad4 --cache none
run_case "(b) synthetic 3x256x256 rrc224+flip" "$SYN" rrc224
