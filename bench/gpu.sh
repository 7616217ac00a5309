#!/usr/bin/env bash
# bench/gpu.sh — the one-shot check on a GPU machine, run from anywhere in the repository:
#   (a) prints the environment: GPU, nvcc, CMake, compiler, glibc, Python/torch/torchvision,
#       cuDNN (system, else the pip wheel), system headers of the C dependencies;
#   (b) configures and builds gpurun (system libraries when all are there, else the unpacked
#       Debian packages of bench/gpu_deps.sh: bench/deps/root.tar.xz -> bench/deps/root);
#   (c) runs `ctest -L gpu` and the CPU tests of the CUDA kernel bodies (op_*_cpu, optim_body);
#   (d) ResNet-50 training throughput at batch 256, gpurun vs PyTorch (bench/gpu_torch.py),
#       for fp32, tf32, bf16 and fp16, on synthetic data: gpurun with --set precision=P,
#       PyTorch channels-last for every precision and AMP (torch.autocast; a GradScaler for
#       fp16) for bf16 and fp16;
#   (d2) with two GPUs or more: the bf16 run as one process per GPU (mpirun, NCCL), and cut into
#       2 pipeline stages on 2 GPUs (1f1b, 8 micro-batches; NCCL send/recv between them);
#   (d3) the first precision's run with --profile 5: profile.txt's head, the NVML health fields;
#   (d4) GPT-2 124M (configs/gpt2-124m.yaml) training tokens/s in bf16 at batch GPU_BENCH_GPT_BATCH
#       (8) x 1024 positions on random tokens, gpurun vs PyTorch (bench/torch_gpt_ref.py: nanoGPT's
#       model, scaled_dot_product_attention, bf16 autocast); gpurun's attention is its own
#       kernel there (cuDNN's fused attention is not used yet);
#       with two GPUs or more, gpurun's split by a tensor group of 2 (parallel.tensor=2);
#   (d5) JPEG decoding (data.decode): images/s of an encoded split's training batches
#       (RandomResizedCrop 224, flip, normalize) delivered to the GPU, decoded by nvJPEG and
#       gpurun's kernel against the loader's 12 CPU workers (bench/loader_bench.c --decode
#       gpu|cpu), on 512 JPEGs made here; a failure there is said and does not fail the script;
#   (e) a table precision | gpurun img/s | PyTorch img/s | ratio, the GPT-2 row and the
#       decoding rows, also in $OUT/gpu_bench.md.
# Logs of every phase go to ${OUT:-bench/out}. Each phase runs under its own timeout, cut to
# what is left of GPU_BENCH_BUDGET_S (default 500 s, build included), so one hang cannot eat
# the session; a failed phase is reported and the script goes on. Without a GPU it stops
# after (c), exit 0, with "no GPU: skipped the benchmark".
#
# Knobs: OUT, BUILD_DIR (build), JOBS (nproc), GPU_BENCH_BUDGET_S, GPU_BENCH_FORCE_DEPS=1
# (build against bench/deps/root even when the system has the headers), GPU_BENCH_CUDNN_ROOT
# (a cuDNN tree with include/ and lib/), GPU_BENCH_PYTHON (the python with torch),
# GPU_BENCH_PRECISIONS ("fp32 tf32 bf16 fp16", run in that order: the last ones are skipped
# first when the budget runs short), GPU_BENCH_STEPS (gpurun steps, 20),
# GPU_BENCH_WARMUP (leading gpurun steps dropped, 4), GPU_BENCH_TORCH_STEPS (15) and _WARMUP (5),
# GPU_BENCH_TMP (synthetic data and run directories, /tmp/gpurun-gpu-bench); for a dry run
# of the benchmark phases without a GPU: GPU_BENCH_DEVICE=cpu GPU_BENCH_BATCH=8 (slow: keep
# GPU_BENCH_STEPS and GPU_BENCH_TORCH_STEPS small).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
SRC=$PWD
OUT=${OUT:-bench/out}
mkdir -p "$OUT" && OUT=$(cd "$OUT" && pwd)
BUILD=${BUILD_DIR:-build}
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 4)}
BUDGET=${GPU_BENCH_BUDGET_S:-500}
PRECISIONS=${GPU_BENCH_PRECISIONS:-fp32 tf32 bf16 fp16}
P1=${PRECISIONS%% *} # the first: its PyTorch run starts cold, its gpurun run is profiled
BATCH=${GPU_BENCH_BATCH:-256}
DEVICE=${GPU_BENCH_DEVICE:-cuda}
STEPS=${GPU_BENCH_STEPS:-20}
WARM=${GPU_BENCH_WARMUP:-4}
TSTEPS=${GPU_BENCH_TORCH_STEPS:-15}
TWARM=${GPU_BENCH_TORCH_WARMUP:-5}
TMPD=${GPU_BENCH_TMP:-/tmp/gpurun-gpu-bench}
DEPS_TAR=$SRC/bench/deps/root.tar.xz
DEPS_ROOT=$SRC/bench/deps/root
T0=$SECONDS
SUMMARY=$OUT/summary.txt
: >"$SUMMARY"
FAILED=0
declare -A RESULT=()

say() { echo "$*" | tee -a "$SUMMARY"; }
left() { echo $((BUDGET - (SECONDS - T0))); }
have() { command -v "$1" >/dev/null 2>&1; }

# phase NAME CAP CMD...: CMD under a timeout of min(CAP, budget left), output in $OUT/NAME.log
phase() {
    local name=$1 cap=$2 t rc s
    shift 2
    t=$(left)
    [ "$t" -gt "$cap" ] && t=$cap
    if [ "$t" -lt 5 ]; then
        say "== $name: SKIPPED (the ${BUDGET} s budget is spent)"
        # the row of this phase reads this, not a log of an earlier run
        echo "SKIPPED: the ${BUDGET} s budget is spent" >"$OUT/$name.log"
        FAILED=1
        return 124
    fi
    s=$SECONDS
    timeout -k 10 "$t" "$@" >"$OUT/$name.log" 2>&1
    rc=$?
    if [ $rc -eq 0 ]; then
        say "== $name: ok ($((SECONDS - s)) s)"
    else
        if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then say "== $name: TIMED OUT after ${t} s"
        else say "== $name: FAILED, exit $rc ($((SECONDS - s)) s)"; fi
        tail -n 25 "$OUT/$name.log" | sed 's/^/   | /' | tee -a "$SUMMARY"
    fi
    return $rc
}

# ---------------------------------------------------------------- (a) environment
ENV_TXT=$OUT/env.txt
: >"$ENV_TXT"
env_line() { printf '%-22s %s\n' "$1" "$2" | tee -a "$ENV_TXT"; }
say "== environment ($(date -u +%Y-%m-%dT%H:%M:%SZ))"
env_line host "$(uname -srm), $(nproc) cores, $(free -g 2>/dev/null | awk '/^Mem:/ {print $2 " GiB RAM"}'), $(df -h "$SRC" | awk 'NR==2 {print $4 " free on " $6}')"
# the CPU: the reference side of the GPU tests runs its native half paths where these flags are
env_line cpu "$(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo 2>/dev/null); $(for f in avx512f avx512_bf16 avx512_fp16 amx_bf16 amx_tile; do grep -qw "$f" /proc/cpuinfo 2>/dev/null && printf '%s ' "$f"; done)"
env_line glibc "$(getconf GNU_LIBC_VERSION 2>/dev/null || echo unknown)"
env_line compiler "$( (cc --version || gcc --version) 2>/dev/null | head -n 1 || echo 'none found')"
env_line cmake "$(cmake --version 2>/dev/null | head -n 1 || echo 'none found')"
env_line pkg-config "$(command -v pkg-config || echo 'not installed')"

HAVE_GPU=0
GPU_NAME=none
if have nvidia-smi && timeout 20 nvidia-smi -L >"$OUT/nvidia-smi.txt" 2>&1 && grep -q '^GPU ' "$OUT/nvidia-smi.txt"; then
    HAVE_GPU=1
    GPU_NAME=$(timeout 20 nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | head -n 1)
    timeout 20 nvidia-smi >>"$OUT/nvidia-smi.txt" 2>&1
fi
env_line GPU "$GPU_NAME$([ $HAVE_GPU = 0 ] && echo " (nvidia-smi: $(have nvidia-smi && head -n 1 "$OUT/nvidia-smi.txt" || echo 'not installed'))")"

# Python: the first one that imports torch (GPU_BENCH_PYTHON first)
PY=""
for c in ${GPU_BENCH_PYTHON:-} "$(command -v python3)" /usr/bin/python3 /usr/local/bin/python3 /opt/conda/bin/python3; do
    [ -n "$c" ] && [ -x "$c" ] || continue
    if timeout 60 "$c" -c 'import torch' >/dev/null 2>&1; then PY=$c; break; fi
done
[ -z "$PY" ] && PY=$(command -v python3 || echo /usr/bin/python3)
timeout 90 "$PY" - >"$OUT/python.json" 2>"$OUT/python.err" <<'PYEOF'
import glob, json, os, site, sys
d = {"python": sys.version.split()[0], "exe": sys.executable}
roots = []
try:
    import torch
    d.update(torch=torch.__version__, torch_cuda=torch.version.cuda, cuda_available=torch.cuda.is_available())
    try: d["torch_cudnn"] = torch.backends.cudnn.version()
    except Exception as e: d["torch_cudnn"] = repr(e)
    if torch.cuda.is_available(): d["device"] = torch.cuda.get_device_name(0)
    roots.append(os.path.dirname(os.path.dirname(torch.__file__)))
except Exception as e:
    d["torch"] = "import failed: %r" % e
try:
    import torchvision; d["torchvision"] = torchvision.__version__
except Exception as e:
    d["torchvision"] = "import failed: %r" % e
try: roots += site.getsitepackages() + [site.getusersitepackages()]
except Exception: pass
# cuDNN and cuBLAS as pip wheels: nvidia/<name>/{include,lib}, wherever the wheel put them
dirs = []
try:
    import nvidia.cudnn as m; dirs += list(m.__path__)
except Exception: pass
for r in dict.fromkeys(roots): dirs += sorted(glob.glob(os.path.join(r, "nvidia", "*")))
def pick(pattern_h, libs):
    for c in dict.fromkeys(dirs):
        h = glob.glob(os.path.join(c, "include", pattern_h))
        found = [l for name in libs for l in glob.glob(os.path.join(c, "lib", name))]
        if h and found: return os.path.dirname(h[0]), found
    return None, []
nv = [n for c in dict.fromkeys(dirs) for n in glob.glob(os.path.join(c, "bin", "nvcc"))]
if nv: d["nvcc_wheel"] = nv[0]
inc, libs = pick("cudnn.h", ["libcudnn.so.9", "libcudnn.so"])
if inc: d.update(cudnn_wheel_include=inc, cudnn_wheel_lib=libs[0])
inc, libs = pick("cublas_v2.h", ["libcublas.so.13", "libcublas.so.12", "libcublas.so"])
if inc:
    lt = glob.glob(os.path.join(os.path.dirname(libs[0]), "libcublasLt.so.1[23]"))
    d.update(cublas_wheel_include=inc, cublas_wheel_lib=libs[0], cublaslt_wheel_lib=lt[0] if lt else "")
try:
    from importlib import metadata
    d["nvidia_wheels"] = sorted("%s %s" % (x.metadata["Name"], x.version) for x in metadata.distributions()
                                if (x.metadata["Name"] or "").lower().startswith(("nvidia-cudnn", "nvidia-cublas", "torch")))
except Exception: pass
print(json.dumps(d))
PYEOF
pyget() { "$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); v=d.get(sys.argv[2], ""); print(" ".join(v) if isinstance(v, list) else v)' "$OUT/python.json" "$1" 2>/dev/null; }
env_line python "$PY ($(pyget python))"
env_line torch "$(pyget torch), CUDA $(pyget torch_cuda), cuDNN $(pyget torch_cudnn), cuda available: $(pyget cuda_available)"
env_line torchvision "$(pyget torchvision)"
env_line "pip nvidia wheels" "$(pyget nvidia_wheels)"

NVCC=${CUDACXX:-}
if [ -z "$NVCC" ]; then
    for c in "$(command -v nvcc)" /usr/local/cuda/bin/nvcc $(ls -d /usr/local/cuda-*/bin/nvcc 2>/dev/null | sort -V -r); do
        [ -n "$c" ] && [ -x "$c" ] && { NVCC=$c; break; }
    done
    # last resort: nvcc from a pip wheel (nvidia/*/bin/nvcc)
    [ -z "$NVCC" ] && NVCC=$(pyget nvcc_wheel)
fi
CUDA_HOME_=""
if [ -n "$NVCC" ]; then
    CUDA_HOME_=$(cd "$(dirname "$NVCC")/.." && pwd)
    env_line nvcc "$NVCC: $("$NVCC" --version 2>/dev/null | grep -o 'release [0-9.]*, V[0-9.]*')"
else
    env_line nvcc "none found (PATH, /usr/local/cuda*/bin): the CUDA backend will not be built"
fi
# the toolkit's library directories, for gpurun's run-time search (the loader may not know them)
CUDA_LIBDIRS=""
for d in "$CUDA_HOME_/lib64" "$CUDA_HOME_/lib" "$CUDA_HOME_/targets/x86_64-linux/lib"; do
    [ -n "$CUDA_HOME_" ] && [ -d "$d" ] && CUDA_LIBDIRS="$CUDA_LIBDIRS:$d"
done
CUDA_LIBDIRS=${CUDA_LIBDIRS#:}
first_file() { local f; for f in "$@"; do [ -e "$f" ] && { echo "$f"; return 0; }; done; return 1; }
TK_CUBLAS=$(first_file "$CUDA_HOME_"/lib64/libcublas.so "$CUDA_HOME_"/lib/libcublas.so \
            "$CUDA_HOME_"/targets/x86_64-linux/lib/libcublas.so) || TK_CUBLAS=""
env_line "toolkit cuBLAS" "${TK_CUBLAS:-missing}"

# cuDNN: GPU_BENCH_CUDNN_ROOT, else the system's (toolkit or /usr), else the wheel's
CUDNN_ARGS=()
CUDNN_LIBDIR=""
cudnn_ver() { awk '/define CUDNN_(MAJOR|MINOR|PATCHLEVEL) /{v = v (v ? "." : "") $3} END {print v}' "$1/cudnn_version.h" 2>/dev/null; }
if [ -n "${GPU_BENCH_CUDNN_ROOT:-}" ]; then
    CUDNN_INC=$GPU_BENCH_CUDNN_ROOT/include
    CUDNN_LIB=$(first_file "$GPU_BENCH_CUDNN_ROOT"/lib/libcudnn.so "$GPU_BENCH_CUDNN_ROOT"/lib/libcudnn.so.9) || CUDNN_LIB=""
    CUDNN_FROM="GPU_BENCH_CUDNN_ROOT"
elif CUDNN_H=$(first_file "$CUDA_HOME_"/include/cudnn.h /usr/include/cudnn.h /usr/include/x86_64-linux-gnu/cudnn.h) &&
     CUDNN_LIB=$(first_file "$CUDA_HOME_"/lib64/libcudnn.so "$CUDA_HOME_"/lib/libcudnn.so "$CUDA_HOME_"/lib64/libcudnn.so.9 \
                 /usr/lib/x86_64-linux-gnu/libcudnn.so /usr/lib/x86_64-linux-gnu/libcudnn.so.9); then
    CUDNN_INC=$(dirname "$CUDNN_H")
    CUDNN_FROM="system"
else
    CUDNN_INC=$(pyget cudnn_wheel_include)
    CUDNN_LIB=$(pyget cudnn_wheel_lib)
    CUDNN_FROM="pip wheel"
fi
if [ -n "$CUDNN_INC" ] && [ -f "$CUDNN_INC/cudnn.h" ] && [ -n "$CUDNN_LIB" ]; then
    CUDNN_ARGS=(-DCUDNN_INCLUDE_DIR="$CUDNN_INC" -DCUDNN_LIBRARY="$CUDNN_LIB")
    CUDNN_LIBDIR=$(dirname "$CUDNN_LIB")
    env_line cuDNN "$(cudnn_ver "$CUDNN_INC") from the $CUDNN_FROM: $CUDNN_INC, $CUDNN_LIB"
else
    env_line cuDNN "NOT FOUND (no system cudnn.h/libcudnn, no pip nvidia-cudnn): the CUDA build will fail"
fi
CUBLAS_ARGS=()
if [ -n "$NVCC" ] && [ -z "$TK_CUBLAS" ] && [ -n "$(pyget cublas_wheel_lib)" ]; then
    CUBLAS_ARGS=(-DCUBLAS_INCLUDE_DIR="$(pyget cublas_wheel_include)" -DCUBLAS_LIBRARY="$(pyget cublas_wheel_lib)"
                 -DCUBLASLT_LIBRARY="$(pyget cublaslt_wheel_lib)")
    CUDA_LIBDIRS="$CUDA_LIBDIRS:$(dirname "$(pyget cublas_wheel_lib)")"
    env_line cuBLAS "from the pip wheel: $(pyget cublas_wheel_lib)"
fi

# the C dependencies: all from the system (headers and pkg-config), or all from bench/deps
declare -A HDR=([yaml]="yaml.h" [hdf5]="hdf5/serial/hdf5.h hdf5.h" [openblas]="x86_64-linux-gnu/openblas-pthread/cblas.h openblas/cblas.h cblas.h"
                [dnnl]="oneapi/dnnl/dnnl.h" [png]="png.h libpng16/png.h" [jpeg]="jpeglib.h" [zlib]="zlib.h")
missing=()
for k in yaml hdf5 openblas dnnl png jpeg zlib; do
    f=""
    for h in ${HDR[$k]}; do [ -f "/usr/include/$h" ] && { f=/usr/include/$h; break; }; done
    [ -n "$f" ] || missing+=("$k")
done
have pkg-config || missing+=("pkg-config")
USE_DEPS=0
if [ -n "${GPU_BENCH_FORCE_DEPS:-}" ] && [ "${GPU_BENCH_FORCE_DEPS}" != 0 ]; then
    USE_DEPS=1
    env_line "C dependencies" "bench/deps/root (forced by GPU_BENCH_FORCE_DEPS; system lacks: ${missing[*]:-nothing})"
elif [ ${#missing[@]} -gt 0 ]; then
    USE_DEPS=1
    env_line "C dependencies" "bench/deps/root (the system lacks: ${missing[*]})"
else
    env_line "C dependencies" "system (headers and pkg-config all present)"
fi
RUN_LD=$CUDA_LIBDIRS
[ -n "$CUDNN_LIBDIR" ] && RUN_LD="$RUN_LD:$CUDNN_LIBDIR"
if [ $USE_DEPS = 1 ]; then
    if [ ! -f "$DEPS_ROOT/MANIFEST.txt" ] || { [ -f "$DEPS_TAR" ] && [ "$DEPS_TAR" -nt "$DEPS_ROOT/MANIFEST.txt" ]; }; then
        if [ -f "$DEPS_TAR" ]; then
            rm -rf "$DEPS_ROOT" && mkdir -p "$DEPS_ROOT"
            # xz may be missing there; Python's tarfile reads .xz through its lzma module
            if have xz; then tar -C "$DEPS_ROOT" -xJf "$DEPS_TAR"
            else "$PY" -c 'import sys, tarfile; t = tarfile.open(sys.argv[1]); (t.extractall(sys.argv[2], filter="tar") if hasattr(tarfile, "tar_filter") else t.extractall(sys.argv[2]))' "$DEPS_TAR" "$DEPS_ROOT"; fi
            touch "$DEPS_ROOT/MANIFEST.txt"
        else
            env_line "bench/deps" "MISSING: neither bench/deps/root nor bench/deps/root.tar.xz (run bench/gpu_deps.sh on Debian 12 and carry the archive)"
        fi
    fi
    need=$(awk '$1 == "needs_glibc" {print $2}' "$DEPS_ROOT/MANIFEST.txt" 2>/dev/null)
    needxx=$(awk '$1 == "needs_glibcxx" {print $2}' "$DEPS_ROOT/MANIFEST.txt" 2>/dev/null)
    got=$(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{print $2}')
    if [ -n "$need" ] && [ -n "$got" ] && [ "$(printf '%s\n%s\n' "$need" "$got" | sort -V | head -n 1)" != "$need" ]; then
        env_line "bench/deps" "WARNING: its libraries need glibc >= $need, this machine has $got: they will not load"
    fi
    env_line "bench/deps" "$(du -sh "$DEPS_ROOT" 2>/dev/null | cut -f1) unpacked; needs glibc >= ${need:-?}, GLIBCXX_${needxx:-?}"
    # compiler runtimes: the system's unless missing or too old for the packed libraries
    libcxx=$( (ldconfig -p 2>/dev/null || /sbin/ldconfig -p 2>/dev/null) | awk '$1 == "libstdc++.so.6" && /x86-64/ {print $NF; exit}')
    gomp=$( (ldconfig -p 2>/dev/null || /sbin/ldconfig -p 2>/dev/null) | awk '$1 == "libgomp.so.1" && /x86-64/ {print $NF; exit}')
    if [ -z "$libcxx" ] || [ -z "$gomp" ] || ! grep -q "GLIBCXX_${needxx:-3.4.29}" "$libcxx" 2>/dev/null; then
        RUN_LD="$RUN_LD:$DEPS_ROOT/fallback/lib"
        env_line "compiler runtimes" "from bench/deps/root/fallback (system libstdc++: ${libcxx:-none}, libgomp: ${gomp:-none})"
    else
        env_line "compiler runtimes" "system ($libcxx, $gomp)"
    fi
fi
# each directory once, in order
RUN_LD=$(printf '%s' "$RUN_LD" | tr ':' '\n' | awk 'NF && !seen[$0]++' | paste -sd: -)
# gpurun and its tests get the CUDA/cuDNN library directories; Python does not (its wheels
# bring their own, and a toolkit copy first in the path could shadow them)
GR_ENV=(env "LD_LIBRARY_PATH=$RUN_LD${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
env_line "gpurun LD_LIBRARY_PATH" "${RUN_LD:-(none added)}"
say "   (environment: $((SECONDS - T0)) s)"

# ---------------------------------------------------------------- (b) build
CMAKE_ARGS=(-DCMAKE_BUILD_TYPE=Release)
if [ -n "$NVCC" ]; then CMAKE_ARGS+=(-DGPURUN_CUDA=ON -DCMAKE_CUDA_COMPILER="$NVCC" "${CUDNN_ARGS[@]}" "${CUBLAS_ARGS[@]}")
else CMAKE_ARGS+=(-DGPURUN_CUDA=AUTO); fi
[ $USE_DEPS = 1 ] && CMAKE_ARGS+=(-DGPURUN_DEPS_PREFIX="$DEPS_ROOT")
say "   cmake ${CMAKE_ARGS[*]}"
BUILT=0
if phase configure 120 cmake -S "$SRC" -B "$BUILD" "${CMAKE_ARGS[@]}" &&
   phase build 300 cmake --build "$BUILD" -j "$JOBS"; then
    BUILT=1
else
    FAILED=1
fi
GPURUN=$SRC/$BUILD/gpurun
[ "${BUILD#/}" != "$BUILD" ] && GPURUN=$BUILD/gpurun
if [ -x "$GPURUN" ]; then
    "${GR_ENV[@]}" ldd "$GPURUN" >"$OUT/ldd.txt" 2>&1
    say "   ldd $BUILD/gpurun: $(grep -c '=> /' "$OUT/ldd.txt") libraries resolved, $(grep -c 'not found' "$OUT/ldd.txt") not found$(
        [ $USE_DEPS = 1 ] && echo ", $(grep -c "=> $DEPS_ROOT/" "$OUT/ldd.txt") from bench/deps/root")"
    # cuBLAS is not linked (the first CUDA backend loads it: kernels/cuda/cublas_dl.c); the gpu tests load it
    for so in libyaml-0.so.2 libhdf5_serial.so.103 libopenblas.so.0 libdnnl.so.2 libpng16.so.16 libjpeg.so.62 libz.so.1 \
              libgomp.so.1 libstdc++.so.6 libcudart.so libcudnn.so; do
        awk -v so="$so" 'index($1, so) == 1 {printf "     %-24s %s\n", $1, $3}' "$OUT/ldd.txt" | tee -a "$SUMMARY"
    done
    grep 'not found' "$OUT/ldd.txt" | sed 's/^/   NOT FOUND: /' | tee -a "$SUMMARY"
    grep -q 'not found' "$OUT/ldd.txt" && FAILED=1
    grep -E '^CUDNN_(INCLUDE_DIR|LIBRARY):' "$BUILD/CMakeCache.txt" 2>/dev/null | sed 's/^/   /' | tee -a "$SUMMARY"
fi

# ---------------------------------------------------------------- (c) tests
if [ $BUILT = 1 ]; then
    phase ctest_gpu 150 "${GR_ENV[@]}" ctest --test-dir "$BUILD" -L gpu --output-on-failure --timeout 90 || FAILED=1
    grep -E 'tests passed|Not Run|\*\*\*Skipped|Failed' "$OUT/ctest_gpu.log" | sed 's/^/   /' | tee -a "$SUMMARY"
    if ctest --test-dir "$BUILD" -N -R '^op_.*_cpu$|^optim_body$' 2>/dev/null | grep -q 'Total Tests: [1-9]'; then
        phase ctest_body 90 "${GR_ENV[@]}" ctest --test-dir "$BUILD" -R '^op_.*_cpu$|^optim_body$' --output-on-failure --timeout 60 -j 4 || FAILED=1
        grep -E 'tests passed' "$OUT/ctest_body.log" | sed 's/^/   /' | tee -a "$SUMMARY"
    else
        say "== ctest_body: no op_*_cpu / optim_body tests are registered in this build"
    fi
fi

# the benchmark's gpurun command line, checked against the schema whether or not there is a GPU
SYN=$TMPD/synthetic-$((BATCH * 12))-3x224x224-1000.h5
SETS=(--set data.train.path="$SYN" --set data.train.group=/train --set data.val.path="$SYN" --set data.val.group=/test
      --set data.augment.crop.type=random --set data.augment.flip=false --set data.workers=12
      --set train.batch_size="$BATCH" --set train.micro_batch="$BATCH" --set train.steps="$STEPS"
      --set "train.schedule={type: constant}" --set eval.every_epochs=0 --set eval.every_steps=0
      --set checkpoint.every_steps=0 --set checkpoint.every_minutes=0
      --set log.every_steps=1 --set log.tensorboard=false)
if [ $BUILT = 1 ]; then
    # --no-data: the benchmark's data is made below, only where the benchmark runs
    phase preflight 30 "${GR_ENV[@]}" "$GPURUN" validate configs/resnet50.yaml --no-data "${SETS[@]}" || FAILED=1
    # cuDNN autotuning as on the PyTorch side, where this gpurun has the key
    if "${GR_ENV[@]}" "$GPURUN" validate configs/resnet50.yaml --no-data "${SETS[@]}" --set cudnn_benchmark=true \
        >/dev/null 2>&1; then
        SETS+=(--set cudnn_benchmark=true)
        say "   gpurun: cudnn_benchmark=true"
    fi
fi

if [ $HAVE_GPU = 0 ] && [ "$DEVICE" != cpu ]; then
    phase torch_args 30 "$PY" bench/gpu_torch.py --help || FAILED=1
    say "no GPU: skipped the benchmark (phases above: $((SECONDS - T0)) s; logs in $OUT)"
    exit "$FAILED"
fi
if [ $BUILT = 0 ]; then
    say "the build failed: no gpurun side; PyTorch runs alone"
fi

# ---------------------------------------------------------------- (d) benchmark
mkdir -p "$TMPD"
if [ $BUILT = 1 ] && [ ! -f "$SYN" ]; then
    phase synthetic 90 "${GR_ENV[@]}" "$GPURUN" data synthetic "$SYN" --n $((BATCH * 12)) --test $BATCH --shape 3,224,224 \
        --classes 1000 --force || FAILED=1
fi

# median samples_per_s of the train lines after the warm-up, from a (possibly partial) metrics.jsonl
gpurun_rate() {
    "$PY" - "$1" "$WARM" <<'PYEOF'
import json, statistics, sys
try: lines = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
except OSError: lines = []
t = sorted((d for d in lines if d.get("kind") == "train"), key=lambda d: d["step"])
t = t[int(sys.argv[2]):]
w = [d["data_wait_pct"] for d in t if "data_wait_pct" in d]
print(f"{statistics.median(d['samples_per_s'] for d in t):.1f} {len(t)} {statistics.median(w) if w else -1:.0f}" if t else "")
PYEOF
}

for P in $PRECISIONS; do
    if [ $BUILT = 1 ] && [ -f "$SYN" ]; then
        run=$TMPD/run-$P
        rm -rf "$run"
        phase "gpurun_$P" 75 "${GR_ENV[@]}" "$GPURUN" configs/resnet50.yaml --device "$DEVICE" --run-dir "$run" \
            --set precision="$P" "${SETS[@]}"
        rc=$?
        cp "$run/metrics.jsonl" "$OUT/gpurun_$P.metrics.jsonl" 2>/dev/null
        cp "$run/summary.json" "$OUT/gpurun_$P.summary.json" 2>/dev/null
        r=$(gpurun_rate "$run/metrics.jsonl")
        msg=$(grep -v '^\s*$' "$OUT/gpurun_$P.log" | tail -n 1 | cut -c1-160)
        if [ -n "$r" ]; then
            read -r rate nsteps wait <<<"$r"
            RESULT[g_$P]=$rate
            [ $rc -ne 0 ] && RESULT[gnote_$P]="partial: exit $rc after $nsteps timed steps"
            say "   gpurun $P: $rate img/s (median of $nsteps steps after $WARM warm-up steps; data wait ${wait}%)"
        elif [ $rc -eq 2 ]; then
            RESULT[g_$P]="n/a"; RESULT[gnote_$P]="rejected: $msg"
            say "   gpurun $P: n/a ($msg)"
        else
            RESULT[g_$P]="failed"; RESULT[gnote_$P]="exit $rc: $msg"; FAILED=1
            say "   gpurun $P: failed (exit $rc: $msg)"
        fi
    fi
    # the first PyTorch run pays for CUDA's start and cuDNN's autotuning of every shape: on an
    # H200 (2026-12-04) fp32's printed its result as 75 s ran out
    tcap=75; [ "$P" = "$P1" ] && tcap=150
    phase "torch_$P" "$tcap" "$PY" bench/gpu_torch.py --device "$DEVICE" --precision "$P" --batch $BATCH --warmup "$TWARM" --steps "$TSTEPS" || FAILED=1
    t=$("$PY" -c 'import json,sys
for l in open(sys.argv[1]):
    if l.startswith("{"):
        d = json.loads(l)
        print(d.get("img_per_s") or "failed", d.get("torch", ""), d.get("cudnn", ""), d.get("cuda", ""), sep="|")' "$OUT/torch_$P.log" 2>/dev/null | tail -n 1)
    RESULT[t_$P]=${t%%|*}
    [ -n "$t" ] && TORCH_INFO=${t#*|}
    [ -n "${RESULT[t_$P]}" ] && say "   pytorch $P: ${RESULT[t_$P]} img/s"
done

# ---------------------------------------------------------------- (d2) data parallelism
# with several GPUs: the bf16 run once more as one process per GPU (mpirun, NCCL), batch
# $BATCH per GPU; its img/s are the whole run's (rank 0's metrics count the global batch)
NGPU=$(grep -c '^GPU ' "$OUT/nvidia-smi.txt" 2>/dev/null || true)
if [ $BUILT = 1 ] && [ -f "$SYN" ] && [ "${NGPU:-0}" -ge 2 ] && have mpirun; then
    run=$TMPD/run-dp
    rm -rf "$run"
    phase gpurun_dp 90 "${GR_ENV[@]}" OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
        mpirun -np "$NGPU" "$GPURUN" configs/resnet50.yaml --device cuda --run-dir "$run" --set precision=bf16 \
        "${SETS[@]}" --set train.batch_size=$((BATCH * NGPU)) --set train.micro_batch=$BATCH || FAILED=1
    r=$(gpurun_rate "$run/metrics.jsonl")
    RESULT[dp]=${r%% *}
    say "   gpurun bf16 on $NGPU GPUs (NCCL): ${RESULT[dp]:-failed} img/s"
    # pipeline parallelism: the bf16 run cut into 2 stages on 2 GPUs, batch $BATCH in 8
    # micro-batches (1f1b; the stages' messages over NCCL send/recv)
    run=$TMPD/run-pp
    rm -rf "$run"
    phase gpurun_pp 90 "${GR_ENV[@]}" OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
        mpirun -np 2 "$GPURUN" configs/resnet50.yaml --device cuda --run-dir "$run" --set precision=bf16 \
        "${SETS[@]}" --set train.batch_size=$BATCH --set train.micro_batch=$((BATCH / 8)) \
        --set parallel.pipeline=2 || FAILED=1
    r=$(gpurun_rate "$run/metrics.jsonl")
    RESULT[pp]=${r%% *}
    say "   gpurun bf16, 2 pipeline stages on 2 GPUs: ${RESULT[pp]:-failed} img/s"
fi

# ---------------------------------------------------------------- (d3) profile and health
# the first precision's job once more with --profile 5 (CUDA events per op, graphs off): the
# table's head, and a metrics line's NVML figures (gpu_util_pct, gpu_temp_c, ...)
if [ $BUILT = 1 ] && [ -f "$SYN" ]; then
    run=$TMPD/run-profile
    rm -rf "$run"
    phase gpurun_profile 60 "${GR_ENV[@]}" "$GPURUN" configs/resnet50.yaml --device "$DEVICE" --run-dir "$run" \
        --set precision="$P1" "${SETS[@]}" --set train.steps=9 --profile 5 || FAILED=1
    cp "$run/profile.txt" "$run/trace.json" "$OUT/" 2>/dev/null
    if [ -f "$run/profile.txt" ]; then
        say "   profile ($P1, 5 steps): $(sed -n 3p "$run/profile.txt")"
        sed -n '5,15p' "$run/profile.txt" | tee -a "$SUMMARY"
    else
        say "   profile: none written"; FAILED=1
    fi
    say "   health: $(grep '"kind":"train"' "$run/metrics.jsonl" 2>/dev/null | tail -n 1 | grep -o '"rss_bytes.*' | cut -c1-240)"
fi

# ---------------------------------------------------------------- (d4) GPT-2 124M
GPT_BATCH=${GPU_BENCH_GPT_BATCH:-8}
if [ $BUILT = 1 ]; then
    tok=$TMPD/gpt2-tokens.h5
    "$PY" -c 'import sys, numpy as np
np.random.default_rng(0).integers(0, 50257, size=2000000).astype("<u2").tofile(sys.argv[1])' "$TMPD/gpt2-tokens.bin" &&
        phase gpt_tokens 60 "${GR_ENV[@]}" "$GPURUN" data tokens "$tok" --from "$TMPD/gpt2-tokens.bin"             --val "$TMPD/gpt2-tokens.bin" --force || FAILED=1
    run=$TMPD/run-gpt2
    rm -rf "$run"
    phase gpurun_gpt2 90 "${GR_ENV[@]}" "$GPURUN" configs/gpt2-124m.yaml --device "$DEVICE" --run-dir "$run"         --set precision=bf16 --set data.train.path="$tok" --set data.val.path="$tok" --set data.seq_len=1024         --set train.batch_size="$GPT_BATCH" --set train.micro_batch="$GPT_BATCH" --set train.steps="$STEPS"         --set "train.schedule={type: constant}" --set eval.every_steps=0 --set eval.every_epochs=0         --set checkpoint.every_minutes=0 --set log.every_steps=1 --set log.tensorboard=false || FAILED=1
    r=$(gpurun_rate "$run/metrics.jsonl")
    [ -n "$r" ] && RESULT[gpt_g]=$("$PY" -c 'import sys; print(round(float(sys.argv[1]) * 1024))' "${r%% *}")
    say "   gpurun gpt2-124m bf16: ${RESULT[gpt_g]:-failed} tokens/s"
    if [ "${NGPU:-0}" -ge 2 ] && have mpirun; then # the same, split by a tensor group of 2 GPUs
        run=$TMPD/run-gpt2-tp
        rm -rf "$run"
        phase gpurun_gpt2_tp 90 "${GR_ENV[@]}" OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
            mpirun -np 2 "$GPURUN" configs/gpt2-124m.yaml --device cuda --run-dir "$run" --set parallel.tensor=2 \
            --set precision=bf16 --set data.train.path="$tok" --set data.val.path="$tok" --set data.seq_len=1024 \
            --set train.batch_size="$GPT_BATCH" --set train.micro_batch="$GPT_BATCH" --set train.steps="$STEPS" \
            --set "train.schedule={type: constant}" --set eval.every_steps=0 --set eval.every_epochs=0 \
            --set checkpoint.every_minutes=0 --set log.every_steps=1 --set log.tensorboard=false || FAILED=1
        r=$(gpurun_rate "$run/metrics.jsonl")
        [ -n "$r" ] && RESULT[gpt_tp]=$("$PY" -c 'import sys; print(round(float(sys.argv[1]) * 1024))' "${r%% *}")
        say "   gpurun gpt2-124m bf16, a tensor group of 2 GPUs: ${RESULT[gpt_tp]:-failed} tokens/s"
    fi
fi
phase torch_gpt2 90 "$PY" bench/torch_gpt_ref.py --device "$DEVICE" --autocast bf16 --batch "$GPT_BATCH" --seq 1024 \
    --classes 50257 --steps "$TSTEPS" || FAILED=1
RESULT[gpt_t]=$("$PY" -c 'import json, sys
for l in open(sys.argv[1]):
    if l.startswith("{"): print(round(json.loads(l)["tokens_per_s"]))' "$OUT/torch_gpt2.log" 2>/dev/null | tail -n 1)
say "   pytorch gpt2-124m bf16: ${RESULT[gpt_t]:-failed} tokens/s"

# ---------------------------------------------------------------- (d5) JPEG decoding
# 512 JPEGs of 500x375 (quality 90, 4:2:0) as an encoded split, batches of 128 through
# RandomResizedCrop 224 + flip + normalize onto the GPU: --decode gpu (nvJPEG, hardware engines
# where the GPU has them, then gpurun's kernel) against --decode cpu (12 loader workers decoding,
# each batch uploaded). Whatever happens here is said and leaves FAILED as it was.
DEC_BENCH=$SRC/$BUILD/gpurun_loader_bench
[ "${BUILD#/}" != "$BUILD" ] && DEC_BENCH=$BUILD/gpurun_loader_bench
FAILED_BEFORE_DECODE=$FAILED
if [ $BUILT = 1 ] && [ -x "$DEC_BENCH" ]; then
    enc=$TMPD/jpeg-512.h5
    if [ ! -f "$enc" ]; then
        rm -rf "$TMPD/jpegs"
        phase jpeg_make 60 "${GR_ENV[@]}" "$DEC_BENCH" --make-jpegs "$TMPD/jpegs" 512 &&
            phase jpeg_split 60 "${GR_ENV[@]}" "$GPURUN" data imagefolder "$enc" --from "$TMPD/jpegs" --store jpeg \
                --force
    fi
    for dm in gpu cpu; do
        if [ ! -f "$enc" ]; then
            RESULT[dec_$dm]="n/a (no encoded split: see jpeg_make.log, jpeg_split.log)"
            continue
        fi
        phase "decode_$dm" 60 "${GR_ENV[@]}" "$DEC_BENCH" "$enc" --batch 128 --batches 24 --workers 12 \
            --decode "$dm" --device "$DEVICE"
        r=$(grep -o '"samples_per_s": [0-9.]*' "$OUT/decode_$dm.log" 2>/dev/null | tail -n 1 | awk '{print $2}')
        if [ -n "$r" ]; then
            RESULT[dec_$dm]=$r
            [ "$dm" = gpu ] && RESULT[dec_how]=$(grep -o '"decoder": "[^"]*"' "$OUT/decode_gpu.log" | tail -n 1 | cut -d'"' -f4)
            h=$(grep -o '"host_decoded": [0-9]*' "$OUT/decode_$dm.log" | tail -n 1 | awk '{print $2}')
            [ "${h:-0}" != 0 ] && RESULT[dec_$dm]="$r ($h samples decoded on the host)"
        else
            RESULT[dec_$dm]="failed: $(grep -v '^\s*$' "$OUT/decode_$dm.log" 2>/dev/null | tail -n 1 | cut -c1-160)"
        fi
        say "   decode $dm: ${RESULT[dec_$dm]} img/s"
    done
fi
FAILED=$FAILED_BEFORE_DECODE

# ---------------------------------------------------------------- (e) table
MD=$OUT/gpu_bench.md
{
    echo "# ResNet-50 training throughput, batch $BATCH, synthetic 3x224x224, 1000 classes, device $DEVICE"
    echo
    echo "GPU: $GPU_NAME; nvcc: $("$NVCC" --version 2>/dev/null | grep -o 'release [0-9.]*' || echo none);" \
         "gpurun cuDNN $(cudnn_ver "$CUDNN_INC") ($CUDNN_FROM); C deps: $([ $USE_DEPS = 1 ] && echo bench/deps/root || echo system)"
    IFS='|' read -r tv tcudnn tcuda <<<"${TORCH_INFO:-||}"
    echo "PyTorch ${tv:-?} (CUDA ${tcuda:-?}, cuDNN ${tcudnn:-?}), torchvision $(pyget torchvision): eager, channels_last" \
         "for every precision, AMP (torch.autocast) for bf16 and fp16 with a GradScaler for fp16, cudnn.benchmark," \
         "data already on the device, $TSTEPS timed steps after $TWARM."
    echo "gpurun: configs/resnet50.yaml, --device $DEVICE, --set precision=P (fp16: dynamic loss scaling), data from" \
         "HDF5 through the loader (12 workers), median samples_per_s of metrics.jsonl over $STEPS steps less $WARM warm-up."
    echo
    echo "| precision | gpurun img/s | PyTorch img/s | ratio |"
    echo "|---|---|---|---|"
    for P in $PRECISIONS; do
        g=${RESULT[g_$P]:-n/a} t=${RESULT[t_$P]:-n/a}
        ratio=$("$PY" -c 'import sys
try: print(f"{float(sys.argv[1]) / float(sys.argv[2]):.2f}")
except Exception: print("-")' "$g" "$t")
        note=${RESULT[gnote_$P]:-}
        echo "| $P | $g${note:+ ($note)} | $t | $ratio |"
    done
    [ -n "${RESULT[dp]+x}" ] && echo "| bf16, $NGPU GPUs (mpirun, NCCL, batch $BATCH each) | ${RESULT[dp]:-failed} | - | - |"
    [ -n "${RESULT[pp]+x}" ] && echo "| bf16, 2 pipeline stages on 2 GPUs (1f1b, 8 micro-batches of batch $BATCH) | ${RESULT[pp]:-failed} | - | - |"
    echo
    echo "GPT-2 124M, bf16, batch $GPT_BATCH x 1024 positions, random tokens: gpurun configs/gpt2-124m.yaml (its own" \
         "attention kernel), PyTorch bench/torch_gpt_ref.py (scaled_dot_product_attention, bf16 autocast)."
    echo
    echo "| model | gpurun tokens/s | PyTorch tokens/s | ratio |"
    echo "|---|---|---|---|"
    echo "| gpt2-124m bf16 | ${RESULT[gpt_g]:-n/a} | ${RESULT[gpt_t]:-n/a} | $("$PY" -c 'import sys
try: print(f"{float(sys.argv[1]) / float(sys.argv[2]):.2f}")
except Exception: print("-")' "${RESULT[gpt_g]:-x}" "${RESULT[gpt_t]:-x}") |"
    [ -n "${RESULT[gpt_tp]+x}" ] && echo "| gpt2-124m bf16, a tensor group of 2 GPUs (NCCL) | ${RESULT[gpt_tp]:-failed} | - | - |"
    echo
    echo "JPEG decoding (data.decode): 512 JPEGs 500x375 (q90, 4:2:0) as an encoded split, batch 128," \
         "RandomResizedCrop 224 + flip + normalize, delivered to the GPU (bench/loader_bench.c)."
    echo
    echo "| path | img/s |"
    echo "|---|---|"
    echo "| GPU: ${RESULT[dec_how]:-nvJPEG} + gpurun's crop kernel | ${RESULT[dec_gpu]:-n/a} |"
    echo "| CPU: 12 loader workers (libjpeg-turbo, reduced DCT scale) + upload | ${RESULT[dec_cpu]:-n/a} |"
    echo
    echo "Total $((SECONDS - T0)) s; logs: $OUT."
} >"$MD"
echo
tee -a "$SUMMARY" <"$MD"
exit "$FAILED"
