#!/usr/bin/env bash
# e2e_sweep.sh — examples/sweeps/sweep.sh end to end on a tiny job: three points,
#  1. one point's gpurun gets SIGTERM mid-run: it exits 75 and the sweep queues it again (at
#     the back);
#  2. the sweep itself gets SIGTERM while the next point runs: it stops that point at a
#     checkpoint and exits 75; the same command again skips the finished point ("already
#     finished") and resumes both stopped ones from their checkpoints (each step logged once);
#  3. the end: gpurun summarize's table (every point finished, the learning rate the column
#     that differs), OUT/summary.csv with a row per point, and the loss and accuracy PNGs.
#
#   bash tests/e2e_sweep.sh GPURUN_BINARY SOURCE_DIR TMPDIR
. "$(dirname "$0")/e2e_lib.bash" "$@"
e2e_need_py h5py numpy

SWEEP=$SRC/examples/sweeps/sweep.sh
expect 0 -- "$G" data synthetic "$T/d.h5" --n 1024 --shape 1,28,28 --classes 10 --test 128 --seed 4
cat >"$T/tiny.yaml" <<EOF
name: tiny
seed: 1
device: cpu
data: {train: {path: $T/d.h5, group: /train}, val: {path: $T/d.h5, group: /test}}
model: {layers: [{conv: {filters: 32, kernel: 3, padding: 1}}, relu, {maxpool: {kernel: 2}}, flatten, {dense: {units: 10}}]}
train: {batch_size: 32, steps: 400, optimizer: {type: sgd, lr: 0.1, momentum: 0.9}}
eval: {every_steps: 100}
checkpoint: {every_steps: 50}
log: {every_steps: 10, tensorboard: false}
EOF
export GPURUN=$G LRS="0.1 0.05 0.02" BATCHES=32
# wait_point DIR K SIG : finds the gpurun of run directory DIR (up to 60 s; a point takes about a
# second), runs it in slices until it has logged step K (signal_when) and sends it SIG; false when
# no such process was seen
wait_point() {
    local i=0 pid=
    while [ -z "$pid" ] && [ $i -lt 12000 ]; do
        pid=$(pgrep -f -- "--run-dir $1 " | head -n 1)
        [ -n "$pid" ] || sleep 0.005
        i=$((i + 1))
    done
    [ -n "$pid" ] || return 1
    signal_when "$pid" "$3" step_ge "$1/metrics.jsonl" "$2"
}

# ---------------------------------------------------------------- 1. a point stopped, queued again
O=$T/sweep
bash "$SWEEP" "$T/tiny.yaml" "$O" --threads 1 >"$T/s1.out" 2>"$T/s1.err" &
SP=$!
if wait_point "$O/lr=0.05,bs=32" 100 TERM; then ok; else bad "no gpurun of point lr=0.05 was seen"; fi
# ---------------------------------------------------------------- 2. the sweep stopped, run again
if wait_point "$O/lr=0.02,bs=32" 100 CONT; then kill -TERM "$SP"; ok; else bad "no gpurun of point lr=0.02 was seen"; fi
wait "$SP"
RC=$?
check "the sweep stopped by SIGTERM: exit 75 (got $RC), and says how to carry on" \
    bash -c "[ $RC -eq 75 ] && grep -q 'sweep: stopped; run the same command again to carry on' '$T/s1.err'"
check "the stopped point was queued again (behind lr=0.02, which the sweep's stop then caught)" \
    grep -q 'lr=0.05,bs=32 was stopped (exit 75) and is queued again' "$T/s1.err"
check "the point running when the sweep stopped: stopped at a checkpoint (summary.json says stopped)" \
    grep -q '"status": *"stopped"' "$O/lr=0.02,bs=32/summary.json"
CMD="bash $SWEEP $T/tiny.yaml $O --threads 1"
bash "$SWEEP" "$T/tiny.yaml" "$O" --threads 1 >"$OUT" 2>"$ERR"
RC=$?
if [ $RC -eq 0 ]; then ok; else bad "the sweep run again: exit $RC"; show; fi
check "run again: the finished point (lr=0.1) is not run again" \
    bash -c "[ \$(grep -c 'this run already finished' '$ERR') -eq 1 ] && grep -q 'lr=0.1,bs=32: this run already finished' '$ERR'"
check "run again: both stopped points resumed from their checkpoints (summary.json's start_step >= 100)" "$PY" -c "
import json, sys
for f in sys.argv[1:]:
    s = json.load(open(f))
    assert s['status'] == 'finished' and s['start_step'] >= 100, s" "$O/lr=0.05,bs=32/summary.json" "$O/lr=0.02,bs=32/summary.json"
check "every point logged each of its 400 steps once (40 train lines)" "$PY" - "$O" <<'EOF'
import json, sys
for lr in ("0.1", "0.05", "0.02"):
    steps = [d["step"] for d in map(json.loads, open(f"{sys.argv[1]}/lr={lr},bs=32/metrics.jsonl")) if d["kind"] == "train"]
    assert steps == list(range(10, 401, 10)), (lr, steps)
EOF

# ---------------------------------------------------------------- 3. the summary and the curves
check "summarize: every point finished, the learning rate the differing column" "$PY" - "$OUT" <<'EOF'
import sys
lines = open(sys.argv[1]).read().splitlines()
head = lines[0].split()
assert "train.optimizer.lr" in head and "train.batch_size" not in head and "seed" not in head, head
rows = [l for l in lines[1:] if "lr=" in l]
assert len(rows) == 3 and all(" finished" in r for r in rows), lines
EOF
check "OUT/summary.csv: a row per point, parsed by Python's csv module" "$PY" - "$O/summary.csv" <<'EOF'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
assert len(rows) == 3 and {r["train.optimizer.lr"] for r in rows} == {"0.1", "0.05", "0.02"}, rows
assert all(r["status"] == "finished" and r["steps"] == "400" for r in rows), rows
EOF
check "OUT/loss.png and OUT/accuracy.png are PNGs" bash -c "
    for f in '$O/loss.png' '$O/accuracy.png'; do [ \"\$(head -c 8 \"\$f\" | od -An -tx1 | tr -d ' \n')\" = 89504e470d0a1a0a ] || exit 1; done"

e2e_done
