#!/usr/bin/env bash
# bench/ckpt.sh — checkpoint save and load of a ResNet-50-sized training state
# (25.6 M params + BN running stats + SGD momentum, ~205 MB of float32), gpurun
# (bench/ckpt_bench.c: gr_ckpt_save / gr_ckpt_load with crc32c verification,
# and the async saver of the training loop) against torch.save / torch.load of
# the same state (bench/torch_ckpt_ref.py, with an fsync), in one
# run, in the same directory (same filesystem), alternating the two sides.
# Both sides load the file they have just written and fsynced: the load reads
# the page cache on both sides (nothing is dropped, as in the reference).
# Prints save and load GB/s (median of ROUNDS rounds, each the median of
# REPEAT), gpurun's training stall per async save (ms and % of a synchronous
# gpurun save; the goal is under 10%), and the ratios gpurun / torch.
#   DIR=/tmp/gpurun-ckpt-bench ROUNDS=3 REPEAT=5 BUILD=build bench/ckpt.sh
# Needs python3-torchvision for the reference (apt-get install python3-torchvision).
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${DIR:-/tmp/gpurun-ckpt-bench}
ROUNDS=${ROUNDS:-3}
REPEAT=${REPEAT:-5}
BUILD=${BUILD:-build}
REF=${TORCH_CKPT_REF:-bench/torch_ckpt_ref.py}
PY=/usr/bin/python3

$PY -c 'import torchvision' 2>/dev/null || {
    echo "bench/ckpt.sh: the reference needs torchvision: apt-get install python3-torchvision" >&2
    exit 2
}
if [ ! -x "$BUILD/gpurun_ckpt_bench" ]; then
    [ "$BUILD" = build ] || { echo "bench/ckpt.sh: $BUILD/gpurun_ckpt_bench: not built" >&2; exit 2; }
    scripts/dev.sh build >/dev/null
fi
mkdir -p "$DIR"
echo "dir $DIR ($(df -P "$DIR" | awk 'NR == 2 {print $1}'), $(stat -f -c %T "$DIR")), $ROUNDS rounds x repeat $REPEAT, $(nproc) cores"
g=() t=()
for i in $(seq "$ROUNDS"); do
    g+=("$("$BUILD/gpurun_ckpt_bench" --dir "$DIR" --repeat "$REPEAT")")
    t+=("$($PY "$REF" "$DIR" --repeats "$REPEAT" | tail -n 1)")
done
$PY - "$(printf '%s\n' "${g[@]}")" "$(printf '%s\n' "${t[@]}")" <<'PYEOF'
import json, statistics, sys
g = [json.loads(l) for l in sys.argv[1].splitlines() if l.strip()]
t = [json.loads(l) for l in sys.argv[2].splitlines() if l.strip()]
med = lambda rs, k: statistics.median(r[k] for r in rs)
gs, gl, ts, tl = med(g, "save_gb_per_s"), med(g, "load_gb_per_s"), med(t, "save_gb_per_s"), med(t, "load_gb_per_s")
stall, pct, wr = med(g, "stall_ms"), med(g, "stall_pct_of_sync_save"), med(g, "async_write_s")
print(f"state: gpurun {g[0]['bytes'] / 1e6:.1f} MB float32 ({g[0]['file_bytes'] / 1e6:.1f} MB file), "
      f"torch {t[0]['bytes'] / 1e6:.1f} MB file")
print(f"save (fsync'd, committed): gpurun {gs:.3f} GB/s ({med(g, 'save_s') * 1e3:.0f} ms)   "
      f"torch {ts:.3f} GB/s ({med(t, 'save_s') * 1e3:.0f} ms)   ratio {gs / ts:.2f}x")
print(f"load (crc32c verified on gpurun's side): gpurun {gl:.3f} GB/s ({med(g, 'load_s') * 1e3:.0f} ms)   "
      f"torch {tl:.3f} GB/s ({med(t, 'load_s') * 1e3:.0f} ms)   ratio {gl / tl:.2f}x")
print(f"training stall per async save: {stall:.1f} ms = {pct:.1f}% of a synchronous gpurun save "
      f"(goal < 10%); the background write takes {wr * 1e3:.0f} ms")
print(f"runs: gpurun save {[round(r['save_gb_per_s'], 3) for r in g]} load {[round(r['load_gb_per_s'], 3) for r in g]} "
      f"stall ms {[round(r['stall_ms'], 1) for r in g]}; torch save {[round(r['save_gb_per_s'], 3) for r in t]} "
      f"load {[round(r['load_gb_per_s'], 3) for r in t]}")
PYEOF
