#!/usr/bin/env bash
# bench/gpt.sh — gpurun vs PyTorch (bench/torch_gpt_ref.py: nanoGPT's model, the same layers)
# on GPT training, side by side in one run, the same threads:
#   gpt2    configs/gpt2-124m.yaml (124,475,904 parameters) at batch 4 x 64 positions (llm.c's
#           CPU setting), fp32 against PyTorch eager fp32: training tokens/s from the median
#           step time over STEPS steps after a warm-up step (goal >= 2x);
#   small   configs/fortunes-gpt.yaml (4 layers, 4 heads, 128 wide) at 256 positions, batch 12,
#           fp32 and bf16 against PyTorch fp32 and bf16 autocast: tokens/s as above;
#   memory  `gpurun plan`'s training activation bytes of the small model at T = 256, 512
#           and 1024 (attention keeps no T x T matrix: linear in T).
# Both sides train on random tokens (gpurun: a token file made here by `gpurun data tokens`).
# PyTorch runs with THREADS intra-op threads and with 1; the ratio is against the faster. (Debian's
# PyTorch multiplies through OpenBLAS's pthreads build, which runs a thread a core of its own
# whatever torch.set_num_threads says: its "1 thread" GEMMs use every core.)
# Each line also gives both sides' GFLOP/s (gpurun's FLOPs count of a training pass for both) and
# their % of this machine's GEMM peak in that precision, which build/gpurun_peak_bench measures
# first (bench/peak_bench.c).
# The header names the CPU and its ISA flags. OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE are left as
# the machine sets them, for both sides alike (printed below).
#   THREADS=2 STEPS=5 bench/gpt.sh [gpt2|small|memory]
set -euo pipefail
cd "$(dirname "$0")/.."
THREADS=${THREADS:-$(nproc)}
STEPS=${STEPS:-5}
WHAT=${1:-all}
PY=/usr/bin/python3
REF=bench/torch_gpt_ref.py
[ -x build/gpurun ] || scripts/dev.sh build >/dev/null
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
FAILED=0
SUMMARY=()

flags=$(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' |
        grep -x -E 'avx2|avx512f|avx512_bf16|avx512_fp16|amx_tile|amx_bf16|amx_fp16' | paste -sd' ' - || true)
echo "cpu      $(lscpu | sed -n 's/^Model name: *//p' | head -n 1), $(nproc) cores; flags: ${flags:-none of avx2/avx512f/avx512_bf16/amx_*}"
echo "pytorch  $($PY -c 'import torch; print(torch.__version__)' 2>/dev/null || echo '(torch not importable)')"
echo "threads $THREADS, steps $STEPS, OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset} OPENBLAS_L2_SIZE=${OPENBLAS_L2_SIZE:-unset}"
# the roofline: this machine's GEMM peak (fp32, bf16) on THREADS threads (bench/peak_bench.c)
[ -x build/gpurun_peak_bench ] || scripts/dev.sh build >/dev/null
PEAK=$(build/gpurun_peak_bench "$THREADS")
echo "${PEAK%%$'\n'*}"
PEAK=${PEAK##*$'\n'}

# tokens FILE VOCAB: a token file of random ids below VOCAB (train; a small val, as the
# evaluation after the last step reads all of it)
tokens() {
    $PY -c 'import sys, numpy as np
r = np.random.default_rng(0)
r.integers(0, int(sys.argv[3]), size=400000).astype("<u2").tofile(sys.argv[1])
r.integers(0, int(sys.argv[3]), size=4000).astype("<u2").tofile(sys.argv[2])' "$tmp/t.bin" "$tmp/v.bin" "$2"
    build/gpurun data tokens "$1" --from "$tmp/t.bin" --val "$tmp/v.bin" --vocab-size "$2" --force >/dev/null 2>&1
}
# step_ms RUN_DIR: the median time between consecutive train lines of metrics.jsonl (ms), the first dropped
step_ms() {
    $PY -c 'import json, statistics, sys
t = [json.loads(l)["time_s"] for l in open(sys.argv[1]) if "\"train\"" in l]
print(round(1000 * statistics.median(b - a for a, b in zip(t[1:], t[2:])), 1))' "$1/metrics.jsonl"
}
# torch_ms ARGS...: the faster median step (ms) of torch_gpt_ref.py at THREADS and 1 thread
torch_ms() {
    local best="" th v
    for th in $THREADS 1; do
        v=$($PY "$REF" --threads "$th" --steps "$STEPS" "$@" 2>"$tmp/torch.err" |
            $PY -c 'import json, sys; print(round(1000 * json.loads(sys.stdin.read())["step_s"], 1))') || {
            echo "pytorch failed: $(tail -n 1 "$tmp/torch.err")" >&2; FAILED=1; echo 0; return; }
        echo "  pytorch threads $th: $v ms/step" >&2
        if [ -z "$best" ] || awk -v a="$v" -v b="$best" 'BEGIN { exit !(a < b) }'; then best=$v; fi
        [ "$THREADS" -ne 1 ] || break
    done
    echo "$best"
}
# report NAME TOKENS_PER_STEP G_MS T_MS GOAL NOTE RUN_DIR SEQUENCES_PER_STEP PRECISION: the line, with each
# side's GFLOP/s (gpurun's count of a training pass, summary.json's train_flops_per_sample, for both)
# and its % of the GEMM peak in PRECISION (bf16's for bf16, else fp32's)
report() {
    local s
    s=$($PY - "$@" "$PEAK" <<'PYEOF'
import json, sys
name, tok, g, t, goal, note, run, seqs, prec, peak = sys.argv[1:11]
tok, g, t, peak = float(tok), float(g), float(t), json.loads(peak)
flops = json.load(open(run + "/summary.json"))["train_flops_per_sample"] * float(seqs)  # a step's
bf = prec == "bf16" and peak["bf16_gflops"] > 0
roof = peak["bf16_gflops"] if bf else peak["fp32_gflops"]
rate = lambda ms: flops / (ms / 1e3) / 1e9
gf = f"GFLOP/s gpurun {rate(g):,.1f} = {100 * rate(g) / roof:.0f}%"
if t <= 0:
    print(f"{name:<14} gpurun {tok / g * 1000:,.0f} tokens/s   pytorch failed   {gf} of the {'bf16' if bf else 'fp32'} "
          f"GEMM peak   {note}")
    sys.exit()
r = t / g
s = f"{name:<14} gpurun {tok / g * 1000:,.0f} tokens/s ({g:,.1f} ms/step)   pytorch {tok / t * 1000:,.0f} tokens/s ({t:,.1f} ms/step)   ratio {r:.2f}x"
if goal:
    s += f" (goal >= {goal}x: {'met' if r >= float(goal) else 'NOT met'})"
s += f"   {gf}, pytorch {rate(t):,.1f} = {100 * rate(t) / roof:.0f}% of the {'bf16' if bf else 'fp32'} GEMM peak"
print(f"{s}   {note}")
PYEOF
)
    echo "$s"
    SUMMARY+=("$s")
}
# small_spec T: configs/fortunes-gpt.yaml with a position table of T, as $tmp/small_T.yaml
small_spec() {
    sed "s/max_len: 64,/max_len: $1,/" configs/fortunes-gpt.yaml >"$tmp/small_$1.yaml"
    grep -q "max_len: $1," "$tmp/small_$1.yaml" || { echo "configs/fortunes-gpt.yaml: no max_len: 64" >&2; exit 1; }
    echo "$tmp/small_$1.yaml"
}
# gpurun_run NAME SPEC ARGS...: trains STEPS+2 steps, logging each; prints the median ms/step
gpurun_run() {
    local name=$1 spec=$2 rc=0
    shift 2
    build/gpurun "$spec" --device cpu --quiet --threads "$THREADS" --run-dir "$tmp/$name" \
        --set train.steps=$((STEPS + 2)) --set log.every_steps=1 --set eval.every_steps=1000000 \
        --set checkpoint.every_minutes=0 "$@" >&2 || rc=$?
    if [ $rc -ne 0 ]; then echo "gpurun $name failed (exit $rc)" >&2; FAILED=1; echo 0; return; fi
    step_ms "$tmp/$name"
}

if [ "$WHAT" = all ] || [ "$WHAT" = gpt2 ]; then
    tokens "$tmp/gpt2.h5" 50257
    g=$(gpurun_run gpt2 configs/gpt2-124m.yaml --set data.train.path="$tmp/gpt2.h5" --set data.val.path="$tmp/gpt2.h5")
    echo "gpt2 fp32: gpurun $g ms/step"
    t=$(torch_ms --layers 12 --heads 12 --width 768 --vocab 50304 --classes 50257 --block 1024 --batch 4 --seq 64)
    report "gpt2-124m fp32" 256 "$g" "$t" 2 "[B=4 T=64; pytorch eager fp32, the faster of threads $THREADS and 1]" \
        "$tmp/gpt2" 4 fp32
fi

if [ "$WHAT" = all ] || [ "$WHAT" = small ]; then
    tokens "$tmp/small.h5" 256
    for P in fp32 bf16; do
        g=$(gpurun_run "small_$P" "$(small_spec 256)" --set precision=$P --set data.seq_len=256 \
            --set data.train.path="$tmp/small.h5" --set data.val.path="$tmp/small.h5")
        echo "small $P: gpurun $g ms/step"
        targs=(--layers 4 --heads 4 --width 128 --vocab 256 --block 256 --batch 12 --seq 256)
        note="pytorch eager fp32"
        if [ $P = bf16 ]; then targs+=(--autocast bf16); note="pytorch bf16 autocast"; fi
        t=$(torch_ms "${targs[@]}")
        report "small T=256 $P" $((12 * 256)) "$g" "$t" "" "[B=12 T=256; $note, the faster of threads $THREADS and 1]" \
            "$tmp/small_$P" 12 "$P"
    done
fi

if [ "$WHAT" = all ] || [ "$WHAT" = memory ]; then
    tokens "$tmp/small.h5" 256
    echo "memory: gpurun plan, configs/fortunes-gpt.yaml at batch 12, training activations"
    prev=""
    for T in 256 512 1024; do
        b=$(build/gpurun plan "$(small_spec $T)" --set data.seq_len=$T --set data.train.path="$tmp/small.h5" \
            --set data.val.path="$tmp/small.h5" | sed -n 's/^  activations *\([0-9,]*\)  (train.*/\1/p' | tr -d ,)
        s=$(printf 'memory T=%-5s activations %s bytes (%s bytes per position)' "$T" "$b" $((b / T)))
        [ -z "$prev" ] || s="$s, x$(awk -v a="$b" -v b="$prev" 'BEGIN { printf "%.2f", a / b }') of the T/2 plan's"
        echo "$s"
        SUMMARY+=("$s")
        prev=$b
    done
fi

echo
echo "== summary, threads $THREADS (ratio: how many times faster gpurun trains than PyTorch)"
for l in "${SUMMARY[@]}"; do echo "$l"; done
exit "$FAILED"
