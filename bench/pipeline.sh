#!/usr/bin/env bash
# bench/pipeline.sh — pipeline parallelism on the CPU, in one run: the small GPT of
# configs/fortunes-gpt.yaml (4 blocks, 128 wide, 64 positions; its head untied, so that the two
# stages exchange nothing but activations and gradients) at batch 32 in micro-batches of 4 (m = 8),
# on random tokens:
#   1 process  x 1 thread                      gpurun, and PyTorch (bench/torch_gpt_ref.py, the same
#                                              blocks with a tied head, eager fp32, 1 thread)
#   2 stages   x 1 thread each, 1f1b and gpipe `mpirun -np 2 gpurun ... --set parallel.pipeline=2`
#   a tensor group of 2 x 1 thread each        `mpirun -np 2 gpurun ... --set parallel.tensor=2`
# and prints each one's samples/s (from the median step time over STEPS steps after 2 warm-up
# steps; the fastest of REPEAT runs of each side, the sides interleaved), the 2-stage speed-up over 1 process (goal >= 1.6x), the stages' measured idle time
# (summary.json's pipeline_idle_pct, the mean over the stages of the time spent waiting for messages)
# against (p-1)/(m+p-1) = 11.1% (goal: within 5 points), and the first stage's activation memory
# under 1f1b (2 micro-batches in flight) against gpipe (all 8).
# The header names the CPU and its ISA flags; OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE are left as
# the machine sets them, for every side alike (printed). Needs 2 cores for the 2 stages.
#   STEPS=20 REPEAT=3 bench/pipeline.sh
set -euo pipefail
cd "$(dirname "$0")/.."
STEPS=${STEPS:-20}
REPEAT=${REPEAT:-3}
PY=/usr/bin/python3
[ -x build/gpurun ] || scripts/dev.sh build >/dev/null
command -v mpirun >/dev/null || { echo "bench/pipeline.sh: mpirun is missing (openmpi-bin)" >&2; exit 2; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

flags=$(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' |
        grep -x -E 'avx2|avx512f|avx512_bf16|avx512_fp16|amx_tile|amx_bf16|amx_fp16' | paste -sd' ' - || true)
echo "cpu      $(lscpu | sed -n 's/^Model name: *//p' | head -n 1), $(nproc) cores; flags: ${flags:-none of avx2/avx512f/avx512_bf16/amx_*}"
echo "pytorch  $($PY -c 'import torch; print(torch.__version__)' 2>/dev/null || echo '(torch not importable)')"
echo "mpi      $(mpirun --version 2>/dev/null | head -n 1)"
echo "steps $STEPS, OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset} OPENBLAS_L2_SIZE=${OPENBLAS_L2_SIZE:-unset}"
[ "$(nproc)" -ge 2 ] || echo "warning: $(nproc) core: the 2 stages share it, the speed-up cannot show"

$PY -c 'import numpy as np
r = np.random.default_rng(0)
r.integers(0, 256, size=400000).astype("<u2").tofile("'"$tmp"'/t.bin")
r.integers(0, 256, size=4000).astype("<u2").tofile("'"$tmp"'/v.bin")'
build/gpurun data tokens "$tmp/tok.h5" --from "$tmp/t.bin" --val "$tmp/v.bin" --vocab-size 256 --force >/dev/null 2>&1
sed -e 's/, tied: wte, bias: false}/, bias: false}/' configs/fortunes-gpt.yaml >"$tmp/gpt.yaml"
grep -q 'tied' "$tmp/gpt.yaml" && { echo "configs/fortunes-gpt.yaml: its head's tie was not undone" >&2; exit 1; }

# run NAME NP [ARG...]: trains STEPS+2 steps of batch 32 (micro-batch 4), each logged; NP 0: one
# process without a launcher, else NP processes under mpirun, one a core
run() {
    local name=$1 np=$2 launch=()
    shift 2
    [ "$np" -eq 0 ] || launch=(mpirun -np "$np" --bind-to core)
    "${launch[@]}" build/gpurun "$tmp/gpt.yaml" --device cpu --quiet --threads 1 --run-dir "$tmp/$name" \
        --set data.train.path="$tmp/tok.h5" --set data.val.path="$tmp/tok.h5" --set data.seq_len=64 \
        --set train.batch_size=32 --set train.micro_batch=4 --set train.steps=$((STEPS + 2)) \
        --set log.every_steps=1 --set eval.every_steps=1000000 --set checkpoint.every_minutes=0 \
        --set train.grad_clip=0 "$@" >&2
}
for r in $(seq "$REPEAT"); do # the sides interleaved, so a slower minute of the machine hits each alike
    run "one.$r" 0
    run "pp2.$r" 2 --set parallel.pipeline=2
    run "gpipe.$r" 2 --set parallel.pipeline=2 --set parallel.schedule=gpipe
    run "tp2.$r" 2 --set parallel.tensor=2
done
torch=$($PY bench/torch_gpt_ref.py --threads 1 --steps "$STEPS" --layers 4 --heads 4 --width 128 --vocab 256 \
    --block 64 --batch 32 --seq 64 2>"$tmp/torch.err" | $PY -c 'import json, sys; print(json.loads(sys.stdin.read())["step_s"])') ||
    { echo "pytorch failed: $(tail -n 1 "$tmp/torch.err")" >&2; torch=0; }

$PY - "$tmp" "$torch" "$REPEAT" <<'PYEOF'
import json, statistics, sys
tmp, torch_s, repeat = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
def run_step_s(d):  # the median time between consecutive train lines, the first two steps dropped
    t = [json.loads(l)["time_s"] for l in open(f"{d}/metrics.jsonl") if '"train"' in l]
    return statistics.median(b - a for a, b in zip(t[2:], t[3:]))
def best(name):  # the fastest of the side's runs, and its directory
    return min((run_step_s(f"{tmp}/{name}.{r}"), f"{tmp}/{name}.{r}") for r in range(1, repeat + 1))
def step_s(name):
    return best(name)[0]
def summary(name):
    return json.load(open(best(name)[1] + "/summary.json"))
one, pp2, gp, tp2 = step_s("one"), step_s("pp2"), step_s("gpipe"), step_s("tp2")
print(f"{'1 process x 1 thread':<34} {32 / one:8.1f} samples/s  ({one * 1000:.1f} ms/step)")
if torch_s > 0:
    print(f"{'pytorch, 1 process x 1 thread':<34} {32 / torch_s:8.1f} samples/s  ({torch_s * 1000:.1f} ms/step; "
          f"gpurun {torch_s / one:.2f}x it)")
for name, s, label in (("pp2", pp2, "2 stages x 1 thread, 1f1b"), ("gpipe", gp, "2 stages x 1 thread, gpipe")):
    m = summary(name)
    idle, pred = m["pipeline_idle_pct"], m["pipeline_predicted_idle_pct"]
    print(f"{label:<34} {32 / s:8.1f} samples/s  ({s * 1000:.1f} ms/step)  speed-up {one / s:.2f}x (goal >= 1.6x: "
          f"{'met' if one / s >= 1.6 else 'NOT met'})  idle {idle:.1f}% vs (p-1)/(m+p-1) {pred:.1f}% (goal within 5 "
          f"points: {'met' if abs(idle - pred) <= 5 else 'NOT met'})")
print(f"{'tensor group of 2 x 1 thread':<34} {32 / tp2:8.1f} samples/s  ({tp2 * 1000:.1f} ms/step)  speed-up "
      f"{one / tp2:.2f}x (no goal: it sums every block's activations twice over MPI)")
f, g = summary("pp2"), summary("gpipe")
print(f"activations of the first stage: 1f1b {f['pipeline_in_flight']} micro-batches in flight, "
      f"{f['pipeline_activation_bytes']:,} bytes; gpipe {g['pipeline_in_flight']}, {g['pipeline_activation_bytes']:,} "
      f"bytes ({g['pipeline_activation_bytes'] / f['pipeline_activation_bytes']:.1f}x)")
PYEOF
