#!/usr/bin/env bash
# e2e_gpt.sh — everything gpurun already does, done to a GPT job (DESIGN 1.1, 1.4, 1.5): a tiny
# GPT (2 pre-norm blocks as a `blocks:` template used with repeat, as configs/fortunes-gpt.yaml;
# 2 heads, width 32, 32 positions, a head tied to the embedding, the vocabulary padded 256 -> 320
# with train.loss.classes 256; AdamW, cosine with warmup, grad_clip) on the bytes of README.md and
# docs/DESIGN.md (`gpurun data text`), batch 8, 60 steps, every step logged:
#  1. it learns: the last val loss is well below ln 256;
#  2. exact resume: stopped by SIGTERM mid-epoch, by SIGKILL after a periodic checkpoint, and by
#     --profile, then --resume auto: metrics.jsonl's lines are the straight run's, bit for bit;
#  3. data parallelism: mpirun -np 2 (micro-batch 4, and 2 x 2 accumulated) is 1 process within
#     1e-5 relative per logged loss, and its final weights within 1e-4 but for the key biases
#     (see weights below) (skipped without mpirun or MPI);
#  4. gradient accumulation: micro_batch 4 (2 micro-steps) is micro_batch 8 within 1e-5 (losses);
#  5. train.recompute: blocks: bit for bit the plain run; gpurun plan: fewer activation bytes;
#  6. train.micro_batch: auto under GPURUN_MEMORY_LIMIT picks micro-batch 4, and trains as 4 by hand;
#  7. precision bf16 (native where the CPU has it, and GPURUN_HALF=staged, the emulated path)
#     and fp16 with dynamic loss scaling: finite losses that fall, val loss below ln 256;
#  8. grad_clip changes the trajectory; metrics.jsonl's lr follows warmup then cosine (DESIGN 1.4);
#  9. --profile: profile.txt has rows for attention, layernorm, embedding, pos_embedding (and
#     their backward ops); no row says recompute in a run without it (autodiff's gradient sums
#     of the residual stream are backward rows);
# 10. gpurun summarize and gpurun plot on the run directories; gpurun eval of weights.h5;
# 11. the vocabulary checks (exit 2, no run directory): an embedding with fewer rows than the
#     data's vocab_size (naming the layer), train.loss.classes or an untied head below it (naming
#     train.loss), data.seq_len above pos_embedding's max_len (naming max_len);
# 12. gpurun generate on the run's weights.h5: the prompt, then --tokens bytes and a newline;
#     the same --seed, the same text; another seed, other text; the last checkpoint gives
#     weights.h5's text; past max_len (the context slides).
# Each numbered check prints a PASS or FAIL line. About 15 s on 2 cores.
#
#   bash tests/e2e_gpt.sh GPURUN_BINARY SOURCE_DIR TMPDIR
#
# Prints `N passed, M failed` last and exits non-zero when M > 0.
. "$(dirname "$0")/e2e_lib.bash" "$@"
e2e_need_py h5py numpy
PC=$SRC/tests/parallel_check.py
# one thread for every run: runs compared bit for bit need one count (e2e_lib's THREADS), and two
# threads of a model this small spend their time waiting for each other when another process
# shares the 2 cores (a parallel ctest): this script took 140 s so, 12 s alone
T1=(--threads 1)

# e2e_lib's check, saying PASS too (with the last line the check printed: its figures)
check() {
    local desc=$1; shift
    if "$@" >"$T/check.out" 2>&1; then
        ok
        echo "PASS: $desc$(tail -n 1 "$T/check.out" | head -c 160 | sed 's/^\(..*\)$/ [\1]/')"
    else
        bad "$desc"
        sed 's/^/      /' "$T/check.out" | head -20
    fi
}
# exits CODE TEXT... -- CMD... : CMD exits CODE with every TEXT in its stderr (for check)
exits() {
    local code=$1 subs=() s
    shift
    while [ "$1" != "--" ]; do subs+=("$1"); shift; done
    shift
    "$@" >"$T/exits.out" 2>"$T/exits.err"
    local rc=$?
    [ "$rc" -eq "$code" ] || { echo "exit code $rc, expected $code: $(head -c 600 "$T/exits.err")"; return 1; }
    for s in "${subs[@]}"; do
        grep -qF -- "$s" "$T/exits.err" || { echo "stderr lacks '$s': $(head -c 600 "$T/exits.err")"; return 1; }
    done
    ! grep -qF "HDF5-DIAG" "$T/exits.err" || { echo "HDF5 error stack printed"; return 1; }
    echo "exit $rc"
}

expect_ok "wrote $T/t.h5" -- "$G" data text "$T/t.h5" --from "$SRC/README.md" "$SRC/docs/DESIGN.md"
cat >"$T/gpt.yaml" <<EOF
name: gpt
seed: 1
data:
  train: {path: $T/t.h5, group: /train}
  val: {path: $T/t.h5, group: /val}
  seq_len: 32
  workers: 1
model:
  inputs: [tokens]
  targets: [targets]
  blocks:
    h:
      layers:
        - {layernorm: {}, name: ln_1}
        - {dense: {units: 96}, name: c_attn}
        - {attention: {heads: 2}, name: attn}
        - {dense: {units: 32}, name: c_proj}
        - {add: {}, input: [input, c_proj], name: res}
        - {layernorm: {}, name: ln_2}
        - {dense: {units: 128}, name: c_fc}
        - gelu_tanh
        - {dense: {units: 32}, name: mlp_proj}
        - {add: {}, input: [res, mlp_proj]}
  layers:
    - {embedding: {vocab: 320, dim: 32, init_std: 0.02}, name: wte}
    - {pos_embedding: {max_len: 32, init_std: 0.02}, name: wpe}
    - {h: {}, repeat: 2}
    - {layernorm: {}, name: ln_f}
    - {dense: {units: 320, tied: wte, bias: false}, name: lm_head}
train:
  batch_size: 8
  steps: 60
  optimizer: {type: adamw, lr: 3.0e-3, betas: [0.9, 0.99], weight_decay: 0.1, decay: matrices}
  schedule: {type: cosine, warmup_steps: 10, min_lr: 3.0e-4}
  grad_clip: 1.0
  loss: {classes: 256}
  metrics: [accuracy]
eval: {every_steps: 30}
log: {every_steps: 1, tensorboard: false}
EOF
J=$T/gpt.yaml

# same A B : metrics.jsonl's train and eval lines of runs A and B, in order, equal in every field
# but the timing and health ones (bit for bit: the JSON numbers are printed with 9 digits)
same() {
    "$PY" - "$T/$1" "$T/$2" <<'PY'
import json, sys
drop = {"time_s", "samples_per_s", "data_wait_pct", "rss_bytes", "cpu_pct"}
def lines(p):
    return [{k: v for k, v in r.items() if k not in drop}
            for r in map(json.loads, open(p + "/metrics.jsonl")) if r.get("kind") in ("train", "eval")]
a, b = lines(sys.argv[1]), lines(sys.argv[2])
assert len(a) == 62, len(a)   # 60 train lines, 2 evaluations
assert len(a) == len(b), (len(a), len(b))
for x, y in zip(a, b):
    assert x == y, (x, y)
print(f"{len(a)} lines agree")
PY
}
# close A B RTOL : every train and eval loss of B within RTOL relative of A's, the same steps
close() {
    "$PY" - "$T/$1" "$T/$2" "$3" <<'PY'
import json, sys
def losses(p):
    return {(r["kind"], r["step"]): r["loss"] for r in map(json.loads, open(p + "/metrics.jsonl"))
            if r.get("kind") in ("train", "eval")}
a, b, tol = losses(sys.argv[1]), losses(sys.argv[2]), float(sys.argv[3])
assert sorted(a) == sorted(b) and len(a) == 62, (len(a), len(b))
worst = max(abs(a[k] - b[k]) / abs(a[k]) for k in a)
print(f"{len(a)} losses, worst relative difference {worst:.3g}")
assert worst <= tol, worst
PY
}
# finite_learns RUN MAXVAL : every loss finite, the last train line below the first by 1, the last
# evaluation below MAXVAL
finite_learns() {
    "$PY" - "$T/$1" "$2" <<'PY'
import json, math, sys
rows = [r for r in map(json.loads, open(sys.argv[1] + "/metrics.jsonl")) if r.get("kind") in ("train", "eval")]
tr = [r["loss"] for r in rows if r["kind"] == "train"]
ev = [r["loss"] for r in rows if r["kind"] == "eval"]
assert len(tr) == 60 and len(ev) == 2, (len(tr), len(ev))
assert all(isinstance(x, float) and math.isfinite(x) for x in tr + ev), [x for x in tr + ev if not math.isfinite(x)]
assert tr[-1] < tr[0] - 1.0, (tr[0], tr[-1])
assert ev[-1] < float(sys.argv[2]), ev
print(f"train {tr[0]:.4f} -> {tr[-1]:.4f}, val {ev[-1]:.4f}")
PY
}

# weights A B RTOL : weights.h5 of runs A and B, each tensor within RTOL of its largest magnitude, but
# the key thirds of the c_attn biases. Softmax over the keys ignores a bias added to every key
# (q . (k + b) shifts a query's scores by one constant), so that bias's gradient is exactly 0
# and what backward gives is rounding noise; AdamW divides it by its own root mean square and
# steps lr on it, so two runs that round differently walk that bias apart (5e-4 of the largest
# after 60 steps) while their losses agree to 1e-6
weights() {
    "$PY" - "$T/$1" "$T/$2" "$3" <<'PY'
import sys
import h5py, numpy as np
def tensors(p):
    out = {}
    with h5py.File(p + "/weights.h5", "r") as f:
        f.visititems(lambda n, o: out.__setitem__(n, o[()]) if isinstance(o, h5py.Dataset) else None)
    return out
a, b, tol = tensors(sys.argv[1]), tensors(sys.argv[2]), float(sys.argv[3])
assert sorted(a) == sorted(b) and len(a) == 28, (sorted(a), sorted(b))
worst = (0.0, "")
for k in a:
    x, y = a[k].astype(np.float64), b[k].astype(np.float64)
    if k.endswith("c_attn/bias"):
        c = x.shape[0] // 3
        x, y = np.concatenate([x[:c], x[2 * c:]]), np.concatenate([y[:c], y[2 * c:]])
    worst = max(worst, (float(np.max(np.abs(x - y))) / (float(np.max(np.abs(x))) or 1.0), k))
print("worst relative weight difference %.3g (%s)" % worst)
assert worst[0] <= tol, worst
PY
}

# ---------------------------------------------------------------- 1. it learns
expect 0 -- "$G" "$J" --run-dir "$T/straight" "${T1[@]}" --quiet
check "1. it learns: the val loss after 60 steps is below 4.0 (ln 256 = 5.55), every loss finite" \
    finite_learns straight 4.0
echo "straight run: $((SECONDS - T0)) s"

# ---------------------------------------------------------------- 2. exact resume
# stop RUNDIR SIG TEST... : the job in the background, SIG once TEST... holds (e2e_lib's
# signal_when: the run is paused while TEST runs); RC its exit status
stop() {
    local rd=$1 sig=$2
    shift 2
    CMD="$G $J --run-dir $rd --set checkpoint.every_steps=20 (then kill -$sig)"
    "$G" "$J" --run-dir "$rd" "${T1[@]}" --quiet --set checkpoint.every_steps=20 >"$OUT" 2>"$ERR" &
    local pid=$!
    signal_when "$pid" "$sig" "$@"
    { wait "$pid"; } 2>/dev/null
    RC=$?
}
stop "$T/term" TERM step_ge "$T/term/metrics.jsonl" 25
S=$(sed -n 's/.*stopped by SIGTERM at step \([0-9]*\);.*/\1/p' "$ERR")
check "2. SIGTERM mid-epoch: exit 75 at step ${S:-?} in [25, 60) with a checkpoint (exit $RC)" \
    bash -c "[ $RC -eq 75 ] && [ -n '$S' ] && [ '$S' -ge 25 ] && [ '$S' -lt 60 ]"
expect 0 "resuming from $T/term/checkpoints/$(printf 'step-%09d.h5' "${S:-0}") at step ${S:-0}" -- \
    "$G" "$J" --run-dir "$T/term" --resume auto
check "2. SIGTERM at step ${S:-?}, then --resume auto: metrics.jsonl is the straight run's, bit for bit" same straight term

# SIGKILL once a periodic checkpoint (every 20 steps) is committed and step 25 logged: the run
# resumes from that checkpoint and logs the steps after it again
have_ckpt() { [ -s "$T/kill/checkpoints/LATEST" ] && step_ge "$T/kill/metrics.jsonl" 25; }
stop "$T/kill" KILL have_ckpt
K=$(sed -n 's/^step-0*\([0-9][0-9]*\)\.h5$/\1/p' "$T/kill/checkpoints/LATEST" 2>/dev/null)
check "2. SIGKILL after the step-${K:-?} checkpoint (exit $RC, 137 expected)" bash -c "[ $RC -eq 137 ] && [ -n '$K' ]"
expect 0 "resuming from $T/kill/checkpoints/$(printf 'step-%09d.h5' "${K:-0}") at step ${K:-0}" -- \
    "$G" "$J" --run-dir "$T/kill" --resume auto
check "2. SIGKILL after a periodic checkpoint (step ${K:-?}), then --resume auto: the straight run's lines, bit for bit" \
    same straight kill

# --profile 10: 3 warm-up and 10 profiled steps, then a checkpoint at step 13 and exit 0
expect 0 "stopped after step 13 (3 warm-up and 10 profiled steps) of 60, with a checkpoint" -- \
    "$G" "$J" --run-dir "$T/prof" "${T1[@]}" --profile 10
expect 0 "resuming from $T/prof/checkpoints/step-000000013.h5 at step 13" -- \
    "$G" "$J" --run-dir "$T/prof" --resume auto
check "2. stopped by --profile at step 13, then --resume auto: the straight run's lines, bit for bit" same straight prof

# ---------------------------------------------------------------- 9. --profile
check "9. profile.txt: forward and backward rows of attention, layernorm, embedding, pos_embedding" \
    "$PY" - "$T/prof/profile.txt" <<'PY'
import sys
rows = [l.split() for l in open(sys.argv[1]).read().splitlines()[5:] if l.strip()]
have = {(r[0], r[1], r[2]) for r in rows if len(r) > 3 and r[2] in ("forward", "backward", "recompute")}
ops = {r[1] for r in have}
want = {"attention", "attention_bwd", "layernorm", "layernorm_bwd", "embedding", "embedding_bwd",
        "pos_embedding", "gelu_tanh", "softmax_cross_entropy"}
assert want <= ops, sorted(want - ops)
for layer, op in (("h0.attn", "attention"), ("h1.attn", "attention"), ("h0.ln_1", "layernorm"), ("ln_f", "layernorm"),
                  ("wte", "embedding"), ("wpe", "pos_embedding")):
    assert (layer, op, "forward") in have, (layer, op)
calls = {int(r[3]) for r in rows if len(r) > 3 and r[2] in ("forward", "backward", "recompute")}
assert calls == {10}, calls
print(len(have), "op rows")
PY

# Once a bug (runner/profile.c called every non-backward node after the forward pass
# "recompute", the adds autodiff emits to sum a fanned-out tensor's gradients included: `h0.res
# add recompute`, `wpe add recompute`); recomputed copies are now marked (gr_node.recomputed).
check "9. without train.recompute, no profile row says recompute (autodiff's gradient sums are backward)" \
    "$PY" - "$T/prof" <<'PY'
import json, sys
rows = [l.split() for l in open(sys.argv[1] + "/profile.txt").read().splitlines()[5:] if l.strip()]
rec = [" ".join(r[:3]) for r in rows if len(r) > 3 and r[2] == "recompute"]
ev = {e["name"] for e in json.load(open(sys.argv[1] + "/trace.json"))["traceEvents"] if e.get("cat") == "recompute"}
assert not rec and not ev, ("rows", rec, "trace events", sorted(ev))
PY

# ---------------------------------------------------------------- 3. data parallelism
if ! command -v mpirun >/dev/null; then
    e2e_skip "mpirun is not installed (openmpi-bin; scripts/dev.sh installs it): 3. data parallelism was not run"
else
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
    MPI2=(env "ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" mpirun -np 2 --oversubscribe)
    run "${MPI2[@]}" "$G" "$J" --run-dir "$T/dp_probe" --quiet --threads 1 --set train.steps=1
    if grep -qF "has no MPI" "$ERR"; then
        e2e_skip "this build of gpurun has no MPI: 3. data parallelism was not run"
    else
        expect_ok "batch 8 = 1 x 4 micro-batches x 2 processes" -- \
            "${MPI2[@]}" "$G" "$J" --run-dir "$T/two" --threads 1
        expect_ok "batch 8 = 2 x 2 micro-batches x 2 processes" -- \
            "${MPI2[@]}" "$G" "$J" --run-dir "$T/two_acc" --threads 1 --set train.micro_batch=2
        for r in two two_acc; do
            check "3. mpirun -np 2 ($r): every logged loss within 1e-5 of 1 process's" close straight "$r" 1e-5
            check "3. mpirun -np 2 ($r): final weights within 1e-4 of 1 process's (the key biases aside)" weights straight "$r" 1e-4
        done
    fi
fi

# ---------------------------------------------------------------- 4. gradient accumulation
# Per-token cross-entropy scales each counted token's gradient by grad_scale * n / count (DESIGN
# 1.4): a micro-batch's mean over its tokens weighs by its share of the step's samples. With every
# token counted (no ignore_index in byte data) each micro-batch has n x T tokens, so the two halves'
# means, weighed 1/2 each, are the whole batch's mean: micro_batch 4 agrees with 8 up to rounding.
expect 0 -- "$G" "$J" --run-dir "$T/acc" "${T1[@]}" --quiet --set train.micro_batch=4
check "4. micro_batch 4 (2 micro-steps) vs 8: every logged loss within 1e-5" close straight acc 1e-5
check "4. micro_batch 4 vs 8: final weights within 1e-4 (the key biases aside)" weights straight acc 1e-4

# ---------------------------------------------------------------- 5. recompute: blocks
expect 0 -- "$G" "$J" --run-dir "$T/rec" "${T1[@]}" --quiet --set train.recompute=blocks
check "5. train.recompute blocks: metrics.jsonl bit for bit the plain run's" same straight rec
check "5. train.recompute blocks: weights.h5 bit for bit the plain run's" "$PY" "$PC" weights "$T/straight" "$T/rec" 0
acts() { "$G" plan "$J" "$@" 2>/dev/null | sed -n 's/^  activations *\([0-9,]*\)  (train.*/\1/p' | tr -d ,; }
a0=$(acts)
a1=$(acts --set train.recompute=blocks)
check "5. gpurun plan: recomputation plans fewer training activation bytes (${a1:-?} < ${a0:-?})" \
    bash -c "[ -n '$a0' ] && [ -n '$a1' ] && [ '$a1' -gt 0 ] && [ '$a1' -lt '$a0' ]"

# ---------------------------------------------------------------- 6. micro_batch: auto
needs() {
    "$G" plan "$J" --memory 1T --set train.micro_batch="$1" 2>/dev/null |
        sed -n "s/.*micro-batch $1 needs \([0-9,]*\) bytes.*/\1/p" | tr -d ,
}
n4=$(needs 4)
n8=$(needs 8)
check "6. gpurun plan: micro-batch 4 needs fewer bytes than 8 (${n4:-?} < ${n8:-?})" \
    bash -c "[ -n '$n4' ] && [ -n '$n8' ] && [ '$n4' -lt '$n8' ]"
expect 0 "gpurun: train.micro_batch auto: 8 (" -- "$G" "$J" --run-dir "$T/auto8" --threads 1 \
    --set train.micro_batch=auto --set train.steps=2
expect 0 "gpurun: train.micro_batch auto: 4 (" "GPURUN_MEMORY_LIMIT allows)" -- \
    env GPURUN_MEMORY_LIMIT="${n4:-1}" "$G" "$J" --run-dir "$T/auto" "${T1[@]}" --set train.micro_batch=auto
check "6. config.yaml records micro_batch 4" grep -q "^  micro_batch: 4\$" "$T/auto/config.yaml"
check "6. micro_batch auto (4 under the limit) trains as micro_batch 4 set by hand, bit for bit" same acc auto

# ---------------------------------------------------------------- 7. bf16, fp16
expect 0 -- "$G" "$J" --run-dir "$T/bf16" "${T1[@]}" --quiet --set precision=bf16
check "7. bf16: finite losses that fall, val loss below 4.5 (ln 256 = 5.55)" finite_learns bf16 4.5
expect 0 -- env GPURUN_HALF=staged "$G" "$J" --run-dir "$T/bf16s" "${T1[@]}" --quiet --set precision=bf16
check "7. bf16 emulated (GPURUN_HALF=staged: every kernel in fp32 on converted copies): finite, falls, val below 4.5" \
    finite_learns bf16s 4.5
check "7. bf16: summary.json says bf16" grep -q '"precision":"bf16"' "$T/bf16/summary.json" "$T/bf16s/summary.json"
expect 0 -- "$G" "$J" --run-dir "$T/fp16" "${T1[@]}" --quiet --set precision=fp16
check "7. fp16: finite losses that fall, val loss below 4.5" finite_learns fp16 4.5
check "7. fp16: dynamic loss scaling (every train line's loss_scale a power of two, 2^16 at first)" "$PY" - "$T/fp16" <<'PY'
import json, math, sys
tl = [r for r in map(json.loads, open(sys.argv[1] + "/metrics.jsonl")) if r["kind"] == "train"]
sc = [r["loss_scale"] for r in tl]
assert sc[0] == 65536 and all(s >= 1 and math.log2(s) == int(math.log2(s)) for s in sc), sc
s = json.load(open(sys.argv[1] + "/summary.json"))
assert s["precision"] == "fp16" and s["loss_scale"] == sc[-1], s
PY

# ---------------------------------------------------------------- 8. grad_clip, cosine with warmup
expect 0 -- "$G" "$J" --run-dir "$T/noclip" "${T1[@]}" --quiet --set train.grad_clip=0
check "8. grad_clip 1.0 acts: its losses are not grad_clip 0's" bash -c "! cmp -s \
    <(grep -o '\"loss\":[^,]*' '$T/straight/metrics.jsonl') <(grep -o '\"loss\":[^,]*' '$T/noclip/metrics.jsonl')"
check "8. the lr column: warmup lr (step+1)/W, then min_lr + (lr - min_lr)(1 + cos(pi p))/2" "$PY" - "$T/straight" <<'PY'
import json, math, sys
lr = {r["step"]: r["lr"] for r in map(json.loads, open(sys.argv[1] + "/metrics.jsonl")) if r["kind"] == "train"}
base, low, W, S = 3.0e-3, 3.0e-4, 10, 60
def want(logged):              # the line of step s logs the lr of update s - 1 (0-based)
    s = logged - 1
    if s < W:
        return base * (s + 1) / W
    p = (s - W) / (S - W)
    return low + (base - low) * (1 + math.cos(math.pi * p)) / 2
for s in (1, 5, 10, 11, 12, 35, 60):
    assert abs(lr[s] - want(s)) <= 1e-6 * want(s), (s, lr[s], want(s))
assert all(lr[s] < lr[s + 1] for s in range(1, 10)) and all(lr[s] > lr[s + 1] for s in range(11, 60)), lr
print({s: lr[s] for s in (1, 5, 10, 11, 12, 35, 60)})
PY

# ---------------------------------------------------------------- 10. summarize, plot
expect_ok "finished" "val_loss" -- "$G" summarize "$T/straight"
expect_ok '"status": "finished"' -- "$G" summarize "$T/straight" "$T/noclip" "$T/bf16" --json
check "10. summarize --json: the runs' status, steps and val_loss" "$PY" - "$OUT" "$T" <<'PY'
import json, sys
rows = json.load(open(sys.argv[1]))
assert len(rows) == 3, rows
for r, name in zip(rows, ("straight", "noclip", "bf16")):
    ev = [d for d in map(json.loads, open(f"{sys.argv[2]}/{name}/metrics.jsonl")) if d["kind"] == "eval"][-1]
    assert r["status"] == "finished" and r["steps"] == 60, r
    assert abs(r["val_loss"] - ev["loss"]) <= 1e-6 * ev["loss"], (r, ev)
    assert 0 < r["best_acc"] < 1 and r["last_acc"] == ev["accuracy"], (r, ev)
PY
expect_ok "wrote $T/loss.png (loss of 3 runs)" -- "$G" plot "$T/straight" "$T/noclip" "$T/bf16" -o "$T/loss.png"
check "10. plot: loss.png is an 800x500 PNG" "$PY" "$SRC/tests/plot_check.py" size "$T/loss.png" 800 500
expect_ok "wrote $T/lr.png (lr of 1 run)" -- "$G" plot "$T/straight" -o "$T/lr.png" --metric lr
expect_ok "wrote $T/val.png (val_loss of 1 run)" -- "$G" plot "$T/straight" -o "$T/val.png" --metric val_loss

# and gpurun eval of the run's weights.h5 gives its last evaluation
expect 0 -- "$G" eval "$J" --checkpoint "$T/straight/weights.h5" "${T1[@]}"
cp "$OUT" "$T/eval.out"
check "10. gpurun eval of weights.h5: the run's last val loss and accuracy" "$PY" - "$T" <<'PY'
import json, sys
T = sys.argv[1]
e = json.loads(open(T + "/eval.out").read().strip().splitlines()[-1])
last = [r for r in map(json.loads, open(T + "/straight/metrics.jsonl")) if r["kind"] == "eval"][-1]
assert e["samples"] > 0 and (e["loss"], e["accuracy"]) == (last["loss"], last["accuracy"]), (e, last)
print(e)
PY

# ---------------------------------------------------------------- 11. the vocabulary checks
check "11. an embedding of 200 rows for vocab_size 256: exit 2 naming layer 'wte'" exits 2 \
    "model.layers: layer 'wte' (embedding) has 200 rows, but the token ids of $T/t.h5 (/train) go up to vocab_size 256" \
    "give it vocab: 256 or more" -- "$G" "$J" --run-dir "$T/e_emb" --quiet \
    --set model.layers.0.embedding.vocab=200 --set model.layers.4.dense.units=200 --set train.loss.classes=200
check "11. train.loss.classes 200 for vocab_size 256: exit 2 naming train.loss" exits 2 \
    "train.loss: the loss scores 200 classes, but the targets of $T/t.h5 (/train) go up to vocab_size 256" -- \
    "$G" "$J" --run-dir "$T/e_cls" --quiet --set train.loss.classes=200
check "11. an untied head of 200 units (no train.loss.classes) for vocab_size 256: exit 2 naming train.loss" exits 2 \
    "train.loss: the loss scores 200 classes" -- "$G" "$J" --run-dir "$T/e_head" --quiet --set train.loss.classes=null \
    --set model.layers.4="{dense: {units: 200}, name: lm_head}"
check "11. data.seq_len 64 over pos_embedding max_len 32: exit 2 naming max_len" exits 2 \
    "model.layers[1].pos_embedding.max_len: 32 positions, but the input has T=64" -- \
    "$G" "$J" --run-dir "$T/e_len" --quiet --set data.seq_len=64
check "11. each refused before anything trains: no run directory" \
    bash -c "[ ! -e '$T/e_emb' ] && [ ! -e '$T/e_cls' ] && [ ! -e '$T/e_head' ] && [ ! -e '$T/e_len' ]"
check "11. gpurun validate says so too (train.loss.classes 200)" exits 2 "train.loss: the loss scores 200 classes" -- \
    "$G" validate "$J" --set train.loss.classes=200

# ---------------------------------------------------------------- 12. generate
gen() {  # NAME SEED : 40 bytes after "The run" into $T/NAME.txt
    expect 0 -- "$G" generate "$J" --checkpoint "$T/straight/weights.h5" --prompt "The run" --tokens 40 --seed "$2" \
        "${T1[@]}"
    cp "$OUT" "$T/$1.txt"
}
gen g7 7
gen g7b 7
gen g8 8
check "12. generate: the prompt, then 40 bytes and a newline" "$PY" - "$T/g7.txt" <<'PY'
import sys
b = open(sys.argv[1], "rb").read()
assert b.startswith(b"The run") and len(b) == 7 + 40 + 1 and b.endswith(b"\n"), b
PY
check "12. generate: the same --seed twice, the same text" cmp "$T/g7.txt" "$T/g7b.txt"
check "12. generate: another --seed, other text" bash -c "! cmp -s '$T/g7.txt' '$T/g8.txt'"
expect 0 -- "$G" generate "$J" --checkpoint "$T/straight/checkpoints/step-000000060.h5" --prompt "The run" --tokens 40 \
    --seed 7 "${T1[@]}"
check "12. generate from the step-60 checkpoint: weights.h5's text" cmp "$T/g7.txt" "$OUT"
# past the position table (32): the context slides, greedy decoding (temperature 0) still answers
expect 0 -- "$G" generate "$J" --checkpoint "$T/straight/weights.h5" --prompt "gpurun " --tokens 80 --temperature 0 \
    "${T1[@]}"
check "12. generate past max_len (80 tokens after a 7-byte prompt, 32 positions): 88 bytes" \
    bash -c "[ \$(wc -c <'$OUT') -eq 88 ] && head -c 7 '$OUT' | grep -qx 'gpurun '"

echo "e2e_gpt: $((SECONDS - T0)) s"
e2e_done
