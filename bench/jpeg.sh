#!/usr/bin/env bash
# bench/jpeg.sh — the JPEG training input pipeline alone (no training): gpurun's loader on an
# encoded split (`data imagefolder --store jpeg`) against PyTorch's DataLoader on the same JPEG
# files, side by side in one run, with the same work, batch and number of workers.
#   N=3000 REPEAT=3 bench/jpeg.sh        (BATCH=128, WORKERS="1 2", CLASSES=4, BATCHES)
#
# Corpus: N JPEGs (quality 90, 400-500 px a side) cut from 21 real photographs that Debian's
# wallpaper packages ship (mate-backgrounds' nature/ folder and 9 of
# plasma-workspace-wallpapers; bench/jpeg_corpus.py says which and how), made once under
# data/jpeg-photos-N/ (class_0..class_3/). The packages are installed with apt-get when missing
# (needs root), and the script says so.
# Conversion: `gpurun data imagefolder data/jpeg-photos-N.h5 --from DIR --store jpeg`, timed
# (every run); bytes on disk against the JPEG files' sum and against the raw uint8 layout at the
# stored sizes (computed, sum of 3 x H x W, not converted: sizes vary and `--store raw` resizes).
# Pipeline, images/s, each: decode, RandomResizedCrop to 224 (torchvision's scale and ratio),
# random horizontal flip, normalize with ImageNet's mean/std to float32, batches of BATCH,
# shuffled; W warm-up batches (each worker makes whole batches: the first W come together),
# then BATCHES rounded down to a multiple of W timed (default: one epoch less the warm-up; keep
# N/BATCH at 20 or more for a real measurement); median of REPEAT runs:
#   gpurun     gpurun_jpeg_bench loader: W decode threads; each decodes only the crop box's
#              part of the JPEG at the smallest DCT scale that still covers 224 x 224;
#              bytes pread per batch from the .h5 file;
#   torch PIL  torchvision.datasets.ImageFolder (PIL decodes the whole image) +
#              torchvision transforms, DataLoader(num_workers=W), files read per sample;
#   torch tvio the same files through torchvision.io.decode_jpeg (whole image, libjpeg) and
#              the tensor transforms (RandomResizedCrop antialias=False, gpurun's convention);
#   decode     gpurun_jpeg_bench decode: libjpeg's plain whole-image decode to RGB of every
#              file (bytes already in memory), one thread: the ceiling without DCT scaling.
# Every side reads from the page cache: the files and the .h5 are read once before timing.
# Prints images/s and images/s per worker (one core each), gpurun's scaling from 1 to 2
# workers (goal >= 1.85x), the ratio gpurun / PyTorch at the same workers against PyTorch's
# faster row (goal >= 3x), and gpurun per core / plain decode.
# The worker counts are cores: on a machine with fewer cores than the largest W, the runs
# share them and the per-core numbers mean little (the script says so).
# OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE do not matter here (no GEMMs) and are left as the machine
# sets them. Needs python3-torchvision and python3-pil (the reference), as bench/loader.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-3000}
REPEAT=${REPEAT:-3}
BATCH=${BATCH:-128}
WORKERS=${WORKERS:-1 2}
BATCHES=${BATCHES:-$((N / BATCH - 2))}
CLASSES=${CLASSES:-4}
PY=/usr/bin/python3

$PY -c 'import torchvision, PIL' 2>/dev/null || {
    echo "bench/jpeg.sh: the reference needs torchvision and PIL: apt-get install python3-torchvision python3-pil" >&2
    exit 2
}
need=()
[ -d /usr/share/backgrounds/mate/nature ] || need+=(mate-backgrounds)
[ -d /usr/share/wallpapers/EveningGlow ] || need+=(plasma-workspace-wallpapers)
if [ ${#need[@]} -gt 0 ]; then
    if [ "$(id -u)" != 0 ]; then
        echo "bench/jpeg.sh: the photographs come from ${need[*]}: apt-get install ${need[*]} (as root)" >&2
        exit 2
    fi
    echo "bench/jpeg.sh: installing ${need[*]} (Debian's wallpapers: the photographs of the corpus)"
    apt-get install -y --no-install-recommends "${need[@]}" >/dev/null
fi
if [ ! -x build/gpurun ] || [ ! -x build/gpurun_jpeg_bench ]; then scripts/dev.sh build >/dev/null; fi

mkdir -p data
DIR=data/jpeg-photos-$N
H5=$DIR.h5
if [ ! -f "$DIR.done" ]; then
    echo "making the corpus: $N JPEGs in $DIR (once)"
    rm -rf "$DIR"
    $PY bench/jpeg_corpus.py "$DIR" --n "$N" --classes "$CLASSES"
fi
find "$DIR" -name '*.jpg' | sort >"$DIR.list"
[ "$(wc -l <"$DIR.list")" = "$N" ] || { echo "bench/jpeg.sh: $DIR does not hold $N JPEGs: rm $DIR.done and rerun" >&2; exit 3; }

t0=$EPOCHREALTIME
build/gpurun data imagefolder "$H5" --from "$DIR" --store jpeg --force >/dev/null 2>"$DIR.convert.log" || {
    cat "$DIR.convert.log" >&2
    exit 3
}
t1=$EPOCHREALTIME
xargs -a "$DIR.list" cat >/dev/null # into the page cache, for every side alike
cat "$H5" >/dev/null

echo "== bench/jpeg.sh: N=$N, batch $BATCH, $BATCHES timed batches (rounded down to a multiple of W)," \
    "workers {$WORKERS}, repeat $REPEAT"
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores, ISA: $(uname -m)$(
    for f in sse4_2 avx2 avx512f; do grep -qw $f /proc/cpuinfo && printf ' %s' $f; done)" \
    "(libjpeg-turbo's SIMD uses up to AVX2); OPENBLAS_* do not matter here (no GEMMs)"
echo "versions: libjpeg-turbo $(dpkg-query -W -f '${Version}' libjpeg62-turbo 2>/dev/null || echo '?')," \
    "$($PY -c 'import torch, torchvision, PIL; print(f"torch {torch.__version__}, torchvision {torchvision.__version__}, PIL {PIL.__version__}")')" \
    "(PIL, torchvision.io and gpurun all decode with this libjpeg)"
$PY - "$DIR.list" "$H5" "$t0" "$t1" <<'PYEOF'
import os, sys
from PIL import Image
paths = open(sys.argv[1]).read().split()
jpeg = sum(os.path.getsize(p) for p in paths)
raw = 0
for p in paths:
    with Image.open(p) as im:  # the header only
        raw += 3 * im.width * im.height
h5 = os.path.getsize(sys.argv[2])
dt = float(sys.argv[4]) - float(sys.argv[3])
n = len(paths)
print(f"convert: --store jpeg {dt:.2f} s ({n / dt:,.0f} images/s); {sys.argv[2]} {h5:,} bytes = "
      f"{h5 / jpeg:.4f} x the {n} JPEGs' {jpeg:,} bytes ({jpeg / n / 1e3:.1f} KB each); raw uint8 at the "
      f"stored sizes (computed, sum of 3*H*W) {raw:,} bytes = {raw / h5:.1f} x the .h5")
PYEOF
[ "$(nproc)" -ge "$(echo "$WORKERS" | tr ' ' '\n' | sort -n | tail -n 1)" ] ||
    echo "note: fewer cores than workers: the runs share cores, per-core numbers mean little"

results=()
for _ in $(seq "$REPEAT"); do
    for w in $WORKERS; do
        results+=("gpurun $w $(build/gpurun_jpeg_bench loader "$H5" --batch "$BATCH" --workers "$w" --batches "$BATCHES")")
        results+=("pil $w $($PY bench/torch_jpeg_ref.py "$DIR" --decoder pil --batch "$BATCH" --workers "$w" --batches "$BATCHES" | tail -n 1)")
        results+=("tvio $w $($PY bench/torch_jpeg_ref.py "$DIR" --decoder tvio --batch "$BATCH" --workers "$w" --batches "$BATCHES" | tail -n 1)")
    done
    results+=("decode 1 $(build/gpurun_jpeg_bench decode "$DIR.list")")
done

$PY - "$WORKERS" "$(printf '%s\n' "${results[@]}")" <<'PYEOF'
import json, statistics, sys
workers = [int(w) for w in sys.argv[1].split()]
runs = {}
for line in sys.argv[2].splitlines():
    side, w, js = line.split(" ", 2)
    runs.setdefault((side, int(w)), []).append(json.loads(js)["images_per_s"])
med = {k: statistics.median(v) for k, v in runs.items()}
names = {"gpurun": "gpurun loader (DCT-scaled ROI decode)", "pil": "torch DataLoader, PIL ImageFolder",
         "tvio": "torch DataLoader, torchvision.io.decode_jpeg", "decode": "libjpeg plain full decode"}
print(f"{'':46s} {'workers':>7s} {'images/s':>10s} {'per core':>10s}   runs")
for side in ["gpurun", "pil", "tvio", "decode"]:
    for w in (workers if side != "decode" else [1]):
        v = med[(side, w)]
        print(f"{names[side]:46s} {w:7d} {v:10,.0f} {v / w:10,.0f}   {[round(x) for x in runs[(side, w)]]}")
dec = med[("decode", 1)]
for w in workers:
    best = max(("pil", "tvio"), key=lambda s: med[(s, w)])
    g = med[("gpurun", w)]
    print(f"workers {w}: gpurun / PyTorch ({'PIL' if best == 'pil' else 'decode_jpeg'}, the faster) "
          f"{g / med[(best, w)]:.2f}x (goal >= 3x per core); gpurun per core / plain decode {g / w / dec:.2f}x")
if 1 in workers and 2 in workers:
    s = lambda side: med[(side, 2)] / med[(side, 1)]
    print(f"scaling 1 -> 2 workers: gpurun {s('gpurun'):.2f}x (goal >= 1.85x), torch PIL {s('pil'):.2f}x, "
          f"torch decode_jpeg {s('tvio'):.2f}x")
PYEOF
