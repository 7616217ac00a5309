#!/usr/bin/env bash
# e2e_profile.sh — observability: `gpurun run --profile [STEPS]` and the health
# figures of metrics.jsonl and summary.json:
#  1. --profile 8 after the 3 warm-up steps writes profile.txt and trace.json and says so;
#     the table's total per step is no more than the measured step time and is the trace's;
#     every op of the train plan has a row with 8 calls (16 with two micro-batches a step),
#     forward and backward, with GFLOP/s on the convs; the optimizer, the copies and the data
#     wait have rows; trace.json is valid JSON with one complete event per op per micro-batch
#     of each profiled step, its args naming the step (4..11) and the layer. (How close the
#     total comes to the step time is a measurement: bench/profile.sh, 99.4% on a quiet
#     machine; a test shares the CPU with others.)
#     The device line has the machine's roofline (GEMM fp32 and bf16 GFLOP/s, memory GB/s;
#     gr_backend_peak), each conv row its % of it; summary.json's train_flops_per_sample is
#     `gpurun plan`'s forward + backward count and train_gflops its rate.
#  2. a model of recomputed blocks has "recompute" rows; a run no longer than the warm-up
#     profiles nothing and says so; --profile takes no 0, and is for runs only (exit 2);
#  3. health: every train line has rss_bytes and cpu_pct, summary.json cpu_pct; without a GPU
#     no gpu_* field and nothing said about NVML.
#
#   bash tests/e2e_profile.sh GPURUN_BINARY SOURCE_DIR TMPDIR
. "$(dirname "$0")/e2e_lib.bash" "$@"

expect 0 -- "$G" data synthetic "$T/d.h5" --n 1200 --shape 1,28,28 --classes 10 --test 200 --seed 3
cat >"$T/cnn.yaml" <<EOF
name: prof
seed: 1
device: cpu
data:
  train: {path: $T/d.h5, group: /train}
  val: {path: $T/d.h5, group: /test}
model:
  layers:
    - conv: {filters: 16, kernel: 3, padding: 1}
    - batchnorm
    - relu
    - maxpool: {kernel: 2}
    - conv: {filters: 32, kernel: 3, padding: 1}
    - relu
    - flatten
    - dense: {units: 10}
train:
  batch_size: 64
  steps: 14
  optimizer: {type: sgd, lr: 0.05, momentum: 0.9}
eval: {every_steps: 14}
log: {every_steps: 1, tensorboard: false}
EOF

# profile_check RUNDIR CALLS : the table and the trace (python)
profile_check() {
    "$PY" - "$1" "$2" <<'EOF2'
import json, re, sys
rd, calls = sys.argv[1], int(sys.argv[2])
text = open(rd + "/profile.txt").read()
m = re.search(r"measured step time ([0-9.]+) ms .*this table's total ([0-9.]+) ms per step", text)
assert m, text[:400]
measured, total = float(m.group(1)), float(m.group(2))
assert 0 < total <= 1.02 * measured, (total, measured)  # what the table counts happened inside the steps
tr = json.load(open(rd + "/trace.json"))["traceEvents"]
x = [e for e in tr if e["ph"] == "X"]
# the table's total is the trace's (the same spans), per step
assert abs(sum(e["dur"] for e in x if e["args"]["step"] in range(4, 12)) / 1e3 / 8 - total) <= 0.01 * total + 0.01
rows = [l.split() for l in text.splitlines()[5:] if l.strip()]
ops = [r for r in rows if r[2] in ("forward", "backward", "recompute")]
assert ops and all(int(r[3]) == calls for r in ops), [r[:4] for r in ops if int(r[3]) != calls]
assert {"forward", "backward"} <= {r[2] for r in ops}
convs = [r for r in ops if r[1] in ("conv", "conv_bwd_data", "conv_bwd_params")]
assert convs and all(float(r[7]) > 0 for r in convs), convs
for span in ("optimizer", "copy to device", "copy to host", "data wait"):
    assert re.search(r"^- +" + span + " ", text, re.M), span
assert all(e["dur"] >= 0 and e["ts"] >= 0 and "step" in e["args"] and "layer" in e["args"] for e in x)
opev = [e for e in x if e["cat"] in ("forward", "backward", "recompute")]
per = {}
for e in opev:
    per[e["args"]["step"]] = per.get(e["args"]["step"], 0) + 1
assert sorted(per) == list(range(4, 12)), sorted(per)
assert set(per.values()) == {len(ops) * calls // 8}, (per, len(ops))
print(f"{len(ops)} op rows, {len(opev)} op events")
EOF2
}

# ---------------------------------------------------------------- 1. the profile
expect 0 "gpurun: profile of 8 steps: $T/p/profile.txt, $T/p/trace.json" -- \
    "$G" "$T/cnn.yaml" --run-dir "$T/p" --profile 8 --threads 1
cp "$ERR" "$T/p.err"
check "profile: the table within 10% of the step time; a row per op with 8 calls; the trace" profile_check "$T/p" 8
check "profile: the device line has the machine's roofline, measured after the steps" grep -qE \
    "^device cpu: .*; roofline, measured now on 1 thread: GEMM fp32 [0-9.]+ GFLOP/s, bf16 [0-9.]+ GFLOP/s, memory [0-9.]+ GB/s$" \
    "$T/p/profile.txt"
check "profile: each conv row's GFLOP/s as a % of the fp32 GEMM peak, its GB/s of the bandwidth" "$PY" - \
    "$T/p/profile.txt" <<'EOF2'
import re, sys
text = open(sys.argv[1]).read()
peak = float(re.search(r"GEMM fp32 ([0-9.]+) GFLOP/s", text).group(1))
bw = float(re.search(r"memory ([0-9.]+) GB/s", text).group(1))
head = text.splitlines()[4].split()
assert head[-4:] == ["GFLOP/s", "GB/s", "%peak", "%bw"], head
rows = [l.split() for l in text.splitlines()[5:] if re.match(r"\S+ +conv +forward ", l)]
assert rows, text
for r in rows:  # the % printed to the unit from figures printed rounded: within 1 point and 2%
    for pct, rate, roof in ((r[9], r[7], peak), (r[10], r[8], bw)):
        want = 100 * float(rate) / roof
        assert abs(float(pct) - want) <= 1 + 0.02 * want, (r, want)
EOF2
check "summary.json: train_flops_per_sample is plan's forward + backward count, train_gflops its rate" "$PY" - \
    "$T/p/summary.json" "$G" "$T/cnn.yaml" <<'EOF2'
import json, re, subprocess, sys
s = json.load(open(sys.argv[1]))
plan = subprocess.run([sys.argv[2], "plan", sys.argv[3]], capture_output=True, text=True).stdout
want = int(re.search(r"forward \+ backward ([0-9,]+)", plan).group(1).replace(",", ""))
assert s["train_flops_per_sample"] == want, (s["train_flops_per_sample"], want)
assert abs(s["train_gflops"] - s["train_samples_per_s"] * want / 1e9) <= 1e-6 * s["train_gflops"], s
EOF2
# two micro-batches a step: every op twice per step
expect 0 "gpurun: profile of 8 steps" -- "$G" "$T/cnn.yaml" --run-dir "$T/pa" --profile 8 --threads 1 \
    --set train.micro_batch=32
check "profile with accumulation: 16 calls per op row, the trace's events per micro-batch" profile_check "$T/pa" 16

# a run stopped while profiling (SIGTERM, two micro-batches a step, so it may land between them):
# exit 75 and a profile of the steps that ended, each row with the same count of calls per step
env --default-signal=INT "$G" "$T/cnn.yaml" --run-dir "$T/ps" --profile 1000 --threads 1 --set train.micro_batch=32 \
    --set train.steps=100000 --quiet >"$OUT" 2>"$ERR" &
signal_when $! TERM step_ge "$T/ps/metrics.jsonl" 9
wait $!
RC=$?
check "stopped while profiling: exit 75 (got $RC), the profile of the steps that ended, every row 2 calls a step" \
    "$PY" - "$T/ps/profile.txt" <<'EOF2'
import re, sys
text = open(sys.argv[1]).read()
steps = int(re.search(r"steps [0-9]+\.\.[0-9]+ \(([0-9]+) after", text).group(1))
rows = [l.split() for l in text.splitlines()[5:] if l.strip()]
calls = {" ".join(r[:3]): int(r[3]) for r in rows if r[2] in ("forward", "backward")}
calls["data wait"] = int(next(r for r in rows if r[1:3] == ["data", "wait"])[4])
assert steps >= 6 and set(calls.values()) == {2 * steps}, (steps, calls)
EOF2
[ $RC -eq 75 ] || bad "stopped while profiling: exit $RC, expected 75"

# --profile stops after its steps (as `caffe time` does), with a checkpoint: --resume auto trains on
expect 0 "gpurun: --profile: stopped after step 5 (3 warm-up and 2 profiled steps) of 14, with a checkpoint" -- \
    "$G" "$T/cnn.yaml" --run-dir "$T/pstop" --profile 2 --threads 1
check "--profile 2: status profiled at step 5, its checkpoint, no weights.h5" bash -c "
    grep -q '\"status\":\"profiled\",\"exit_code\":0,.*\"steps\":5,' '$T/pstop/summary.json' &&
    [ -f '$T/pstop/checkpoints/step-000000005.h5' ] && [ ! -e '$T/pstop/weights.h5' ]"
expect 0 "resuming from $T/pstop/checkpoints/step-000000005.h5 at step 5" -- \
    "$G" "$T/cnn.yaml" --run-dir "$T/pstop" --resume auto --threads 1
check "--profile, then --resume auto: finished at step 14" grep -q '"status":"finished","exit_code":0,.*"steps":14,' \
    "$T/pstop/summary.json"

# the tables keep their columns with long layer names
sed 's/    - conv: {filters: 32, kernel: 3, padding: 1}/    - {name: the_second_convolution_of_this_model, conv: {filters: 32, kernel: 3, padding: 1}}/' \
    "$T/cnn.yaml" >"$T/long.yaml"
expect 0 -- "$G" "$T/long.yaml" --run-dir "$T/plong" --profile 2 --threads 1
"$G" plan "$T/long.yaml" >"$T/plong.plan" 2>&1
aligned() {  # FILE FIRST-HEADER-WORD: every row of the table under the header line starts each column where it does
    "$PY" - "$1" "$2" <<'EOF2'
import re, sys
lines = open(sys.argv[1]).read().splitlines()
h = next(i for i, l in enumerate(lines) if l.startswith(sys.argv[2] + " "))
cols = [m.start() for m in re.finditer(r"(?<= )\S", lines[h])][:2]  # where "op" and the next column start
rows = [l for l in lines[h + 1:] if l.strip()]
rows = rows[:next((i for i, l in enumerate(rows) if l.startswith("total")), len(rows))]
assert any("the_second_convolution_of_this_model" in l for l in rows), rows
for l in rows:
    for c in cols:
        assert l[c - 1] == " " and l[c] != " ", (c, l, lines[h])
EOF2
}
check "plan: the columns aligned under a 36-character layer name" aligned "$T/plong.plan" layer
check "profile.txt: the columns aligned under a 36-character layer name" aligned "$T/plong/profile.txt" layer

# ---------------------------------------------------------------- 2. recompute rows, short runs, usage
cat >"$T/blocks.yaml" <<EOF
name: profb
seed: 1
device: cpu
data: {train: {path: $T/d.h5, group: /train}}
model:
  blocks:
    cb:
      args: {f: 8}
      layers: [{conv: {filters: \$f, kernel: 3, padding: 1}}, batchnorm, relu]
  layers: [{cb: {f: 8}}, {maxpool: {kernel: 2}}, {cb: {f: 8}}, flatten, {dense: {units: 10}}]
train: {batch_size: 32, steps: 6, optimizer: {type: sgd, lr: 0.05}, recompute: blocks}
log: {every_steps: 1, tensorboard: false}
EOF
expect 0 -- "$G" "$T/blocks.yaml" --run-dir "$T/pb" --profile 2 --threads 1
check "train.recompute: blocks: the profile has recompute rows" grep -qE '^cb0\.conv0 +conv +recompute ' "$T/pb/profile.txt"
expect 0 "--profile: nothing profiled: the run has 3 steps to go, no more than the 3 warm-up steps" -- \
    "$G" "$T/cnn.yaml" --run-dir "$T/short" --profile --set train.steps=3
check "a run no longer than the warm-up: no profile files" bash -c "[ ! -e '$T/short/profile.txt' ] && [ ! -e '$T/short/trace.json' ]"
expect 0 "gpurun: profile of 3 steps" "--profile: 3 steps profiled (the run has no more after the 3 warm-up steps)" -- \
    "$G" "$T/cnn.yaml" --run-dir "$T/six" --profile --set train.steps=6
expect 2 "--profile: expected a step count from 1 to 100000, got '0'" -- "$G" "$T/cnn.yaml" --run-dir "$T/z" --profile 0
expect 2 "unknown option '--profile'" -- "$G" plan "$T/cnn.yaml" --profile

# ---------------------------------------------------------------- 3. health
check "health: every train line has rss_bytes and cpu_pct; no gpu_* field on the CPU; summary.json cpu_pct" \
    "$PY" - "$T/p" <<'EOF2'
import json, sys
rd = sys.argv[1]
tr = [d for d in map(json.loads, open(rd + "/metrics.jsonl")) if d["kind"] == "train"]
assert len(tr) == 11 and all(  # --profile 8: 3 warm-up + 8 steps, then it stops
    d["rss_bytes"] > 10 << 20 and 0 <= d["cpu_pct"] < 10000 for d in tr), tr[-1]
assert not any(k.startswith("gpu_") for d in tr for k in d), tr[-1]
s = json.load(open(rd + "/summary.json"))
assert 0 < s["cpu_pct"] < 10000 and not any(k.startswith("gpu_") for k in s), s
EOF2
check "health: nothing said about NVML or a GPU's clocks on the CPU" bash -c "! grep -qi 'nvml\|clocks are lowered' '$T/p.err'"

e2e_done
