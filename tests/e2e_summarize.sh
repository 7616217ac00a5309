#!/usr/bin/env bash
# e2e_summarize.sh — `gpurun summarize RUN_DIR... [--csv | --json] [--sort [-]KEY]`, one row per
# run of a sweep:
#   - status: finished; stopped (75) after SIGTERM; failed (3) (a NaN pixel read from the file);
#     running while a live process holds the run's lock (paused with SIGSTOP); interrupted once
#     it is SIGKILLed (no summary.json: the figures come from metrics.jsonl, a torn last line
#     skipped);
#   - the config keys that differ between the runs are columns (lr, batch_size), the common ones
#     (seed, name) are not; one run has none;
#   - --csv parses with Python's csv module, its values = summary.json's (or metrics.jsonl's);
#     --json parses, numbers as numbers, missing as null; the text table is aligned with 4/1
#     decimals and "-" for missing;
#   - --sort KEY / -KEY: numbers by value, missing last;
#   - usage errors exit 2; a directory that is not a run, or a corrupt summary.json, exit 3
#     naming it.
#
#   bash tests/e2e_summarize.sh GPURUN_BINARY SOURCE_DIR TMPDIR
#
# Tiny MLP runs of 40 steps on an 8x8 synthetic set: some 10 s.
. "$(dirname "$0")/e2e_lib.bash" "$@"
e2e_need_py h5py numpy

"$PY" - "$T" <<'EOF' || { echo "FAIL: cannot make the NaN fixture with $PY (h5py, numpy)"; echo "0 passed, 1 failed"; exit 1; }
import sys, h5py, numpy as np
rng = np.random.default_rng(0)
with h5py.File(sys.argv[1] + "/nan.h5", "w") as f:
    for split, n in (("train", 200), ("test", 50)):
        img = rng.random((n, 1, 8, 8), dtype=np.float32)
        if split == "train":
            img[100, 0, 3, 3] = np.nan
        f[split + "/images"] = img
        f[split + "/labels"] = (np.arange(n) % 10).astype(np.uint8)
EOF

expect_ok "wrote $T/s.h5" -- "$G" data synthetic "$T/s.h5" --n 600 --shape 1,8,8 --classes 10 --test 100 --seed 2
cat >"$T/tiny.yaml" <<EOF
name: tiny
device: cpu
data: {train: {path: $T/s.h5, group: /train}, val: {path: $T/s.h5, group: /test}}
model: {layers: [flatten, {dense: {units: 16}}, relu, {dense: {units: 10}}]}
train: {batch_size: 32, steps: 40, optimizer: {type: sgd, lr: 0.1}}
eval: {every_steps: 20}
log: {every_steps: 5}
EOF

# ---- the runs of a "sweep"
expect_ok -- "$G" "$T/tiny.yaml" --run-dir "$T/runs/a" --quiet --set train.optimizer.lr=0.05
expect_ok -- "$G" "$T/tiny.yaml" --run-dir "$T/runs/b" --quiet --set train.batch_size=16
expect_ok -- "$G" "$T/tiny.yaml" --run-dir "$T/runs/c" --quiet --set train.batch_size=8 --set train.optimizer.lr=0.2
# failed: NaN in train sample 100, read from the file as its batch comes (exit 3, summary.json "failed")
expect 3 "sample 100 holds NaN" -- "$G" "$T/tiny.yaml" --run-dir "$T/runs/nan" --quiet --set data.cache=none \
    --set data.train.path="$T/nan.h5" --set data.val.path="$T/nan.h5"
# stopped: SIGTERM mid-run (exit 75, summary.json "stopped")
"$G" "$T/tiny.yaml" --run-dir "$T/runs/stop" --quiet --set train.steps=100000 >"$T/stop.out" 2>"$T/stop.err" &
pid=$!
signal_when "$pid" TERM step_ge "$T/runs/stop/metrics.jsonl" 10
wait "$pid"
RC=$?
check "SIGTERM: the run exits 75 (was $RC)" test "$RC" -eq 75

S=$T/sum.out
sum() { "$G" summarize "$@" >"$S" 2>"$T/sum.err"; }
# py SCRIPT ARGS... : runs a check in Python on $S (sys.argv[1]) and ARGS
py() { local code=$1; shift; "$PY" -c "import csv, json, sys; $code" "$S" "$@"; }

# a resumed attempt of a copy of it, SIGKILLed after it committed a checkpoint: not the earlier
# attempt's "stopped (75)" but interrupted at the step of its last commit
cp -r "$T/runs/stop" "$T/runs/stop2"
stop_step=$(sed -n 's/.*"steps":\([0-9]*\).*/\1/p' "$T/runs/stop2/summary.json")
committed_past() { local s; s=$(sed -n 's/.*"status":"running".*"steps":\([0-9]*\).*/\1/p' "$1"); [ "${s:-0}" -gt "$2" ]; }
"$G" "$T/tiny.yaml" --run-dir "$T/runs/stop2" --resume auto --quiet --set train.steps=100000 \
    --set checkpoint.every_steps=5 >"$T/stop2.out" 2>"$T/stop2.err" &
pid=$!
signal_when "$pid" KILL committed_past "$T/runs/stop2/summary.json" "$stop_step"
{ wait "$pid"; } 2>/dev/null
sum --csv "$T/runs/stop2"
check "a resumed attempt SIGKILLed: interrupted at its last committed step, not the earlier 'stopped (75)'" py "
import os
r = next(csv.DictReader(open(sys.argv[1], newline='')))
s = json.load(open(sys.argv[2] + '/summary.json'))
assert r['status'] == 'interrupted' and s['status'] == 'running', (r, s)
assert int(r['steps']) == s['steps'] > int(sys.argv[3]) and s['start_step'] == int(sys.argv[3]), (r, s)
assert os.path.exists(sys.argv[2] + '/checkpoints/step-%09d.h5' % s['steps']), s" "$T/runs/stop2" "$stop_step"
# its next attempt finishes: the closing line gives this attempt's steps and time, then the run's (a
# commit may have landed after summary.json last said so: the attempt starts at the newest one)
k=$(ls "$T/runs/stop2/checkpoints" | sed -n 's/^step-0*\([0-9][0-9]*\)\.h5$/\1/p' | sort -n | tail -n 1)
expect_ok "done: this attempt 10 steps ($((k + 1))-$((k + 10))) in " "; the run $((k + 10)) steps in " -- \
    "$G" "$T/tiny.yaml" --run-dir "$T/runs/stop2" --resume auto --set train.steps=$((k + 10))

# ---- one figure for the final train loss: the last train line's, on the console, in metrics.jsonl,
# summary.json and summarize
expect_ok "done: 40 steps in " -- "$G" "$T/tiny.yaml" --run-dir "$T/runs/loud" --set log.every_steps=7
check "the final train loss: the same in the console's last step line and closing line, metrics.jsonl, summary.json" \
    "$PY" -c "
import json, re, sys
out = open(sys.argv[1]).read()
steps = re.findall(r'^step (\d+)/40 .* loss ([0-9.]+)', out, re.M)
final = re.search(r'final train loss ([0-9.]+)', out).group(1)
lines = [json.loads(l) for l in open(sys.argv[2] + '/metrics.jsonl')]
last = [l for l in lines if l['kind'] == 'train'][-1]
s = json.load(open(sys.argv[2] + '/summary.json'))
assert steps[-1][0] == '40' and steps[-1][1] == final, (steps[-1], final)
assert last['step'] == 40 and s['final_train_loss'] == last['loss'] and '%.4f' % last['loss'] == final, (last, s)
" "$OUT" "$T/runs/loud"
"$G" summarize --json "$T/runs/loud" >"$T/loud.json"
check "summarize's final_loss is summary.json's final_train_loss" "$PY" -c "
import json, sys
assert json.load(open(sys.argv[1]))[0]['final_loss'] == json.load(open(sys.argv[2]))['final_train_loss']
" "$T/loud.json" "$T/runs/loud/summary.json"

# ---- train.steps with train.epochs: steps may cut the epochs short (18 steps an epoch here), never
# ask for more than they give
expect 2 "$T/tiny.yaml:5:32: train.steps: 40 steps asked, but train.epochs: 1 ends the run at step 18" \
    "$T/s.h5: /train at train.batch_size 32 are 18 steps an epoch" -- \
    "$G" "$T/tiny.yaml" --run-dir "$T/runs/contra" --set train.epochs=1
expect 2 "train.steps: 40 steps asked, but train.epochs: 1" -- "$G" validate "$T/tiny.yaml" --set train.epochs=1
expect_ok "done: 40 steps in " -- "$G" "$T/tiny.yaml" --run-dir "$T/runs/cut" --set train.epochs=3

# ---- one run: no override columns; its figures are summary.json's
sum --csv "$T/runs/a"
check "one run --csv: exit 0" test $? -eq 0
check "one run: the header has no config columns" py "
rows = list(csv.reader(open(sys.argv[1], newline='')))
assert rows[0] == ['run', 'status', 'steps', 'best_acc', 'last_acc', 'final_loss', 'samples_per_s', 'wall_s',
                   'val_loss'], rows[0]
assert len(rows) == 2, rows"
check "one run --csv: the figures are summary.json's" py "
r = next(csv.DictReader(open(sys.argv[1], newline='')))
s = json.load(open(sys.argv[2] + '/summary.json'))
assert r['run'] == sys.argv[2] and r['status'] == 'finished' and int(r['steps']) == s['steps'] == 40, r
for k, sk in (('best_acc', 'best_val_accuracy'), ('last_acc', 'last_val_accuracy'), ('final_loss', 'final_train_loss'),
              ('samples_per_s', 'samples_per_s'), ('wall_s', 'wall_s'), ('val_loss', 'last_val_loss')):
    assert float(r[k]) == s[sk], (k, r[k], s[sk])" "$T/runs/a"

# ---- a live run (paused while summarized: it holds its lock), then SIGKILLed: interrupted
"$G" "$T/tiny.yaml" --run-dir "$T/runs/live" --quiet --set train.steps=1000000 >"$T/live.out" 2>"$T/live.err" &
live=$!
for _ in $(seq 1500); do  # at most some 15 s
    step_ge "$T/runs/live/metrics.jsonl" 25 && break  # past its first eval (step 20)
    kill -0 "$live" 2>/dev/null || break
    sleep 0.01
done
kill -STOP "$live"
sum --csv "$T/runs/live" "$T/runs/a"
check "a live run is 'running'" py "
r = list(csv.DictReader(open(sys.argv[1], newline='')))
assert r[0]['status'] == 'running' and int(r[0]['steps']) >= 25, r[0]
assert 'train.steps' in r[0] and r[0]['train.steps'] == '1000000', r[0]"
kill -KILL "$live"
{ wait "$live"; } 2>/dev/null
check "SIGKILL leaves the attempt's summary.json: running, no checkpoint committed (steps 0)" \
    grep -q '"status":"running","exit_code":0,"name":"tiny","steps":0,' "$T/runs/live/summary.json"
printf '{"kind":"train","step":99999999,"epoch":1,"loss":0.5,"lr":0.1,"samp' >>"$T/runs/live/metrics.jsonl" # torn

# ---- a hand-written run without summary.json: figures from metrics.jsonl (best = the largest
# accuracy, last = the last one; a malformed line and a torn last line skipped)
mkdir -p "$T/runs/hand"
cp "$T/runs/a/config.yaml" "$T/runs/hand/"
cat >"$T/runs/hand/metrics.jsonl" <<'EOF'
{"kind":"train","step":10,"epoch":0.5,"loss":2.5,"lr":0.1,"samples_per_s":100.25,"loss_scale":1,"time_s":1.5}
{"kind":"eval","split":"val","step":10,"epoch":0.5,"loss":2.0,"accuracy":0.5}
{"kind":"train","step":20,"epoch":1,"loss":1.25,"lr":0.1,"samples_per_s":200.5,"loss_scale":1,"time_s":3.25}
{"kind":"eval","split":"val","step":20,"epoch":1,"loss":1.0,"accuracy":0.875}
{"kind":"train","step":30,"epoch":1.5,"loss":0.75,,"lr":0.1}
{"kind":"train","step":30,"epoch":1.5,"loss":0.625,"lr":0.1,"samples_per_s":300.75,"loss_scale":1,"time_s":4.5,"note":"a \"quoted\" \u00e9"}
{"kind":"eval","split":"val","step":30,"epoch":1.5,"loss":1.5,"accuracy":0.75}
{"kind":"train","step":40,"epoch":2,"loss":0.1
EOF
sum --json "$T/runs/hand"
check "no summary.json: steps, loss, samples/s and wall from the last train line, best/last accuracy" py "
j = json.load(open(sys.argv[1]))[0]
got = [j[k] for k in ('status', 'steps', 'best_acc', 'last_acc', 'final_loss', 'samples_per_s', 'wall_s')]
assert got == ['interrupted', 30, 0.875, 0.75, 0.625, 300.75, 4.5], got"

# ---- every status, in CSV
ALL=("$T/runs/a" "$T/runs/b" "$T/runs/c" "$T/runs/nan" "$T/runs/stop" "$T/runs/live")
sum --csv "${ALL[@]}"
check "--csv of six runs: exit 0" test $? -eq 0
check "statuses: finished, stopped (75), failed (3), interrupted" py "
r = {x['run'].rsplit('/', 1)[1]: x for x in csv.DictReader(open(sys.argv[1], newline=''))}
got = {k: v['status'] for k, v in r.items()}
assert got == {'a': 'finished', 'b': 'finished', 'c': 'finished', 'nan': 'failed (3)', 'stop': 'stopped (75)',
               'live': 'interrupted'}, got"
check "the stopped and failed runs' steps are summary.json's" py "
r = {x['run'].rsplit('/', 1)[1]: x for x in csv.DictReader(open(sys.argv[1], newline=''))}
for k in ('stop', 'nan'):
    s = json.load(open(sys.argv[2] + '/' + k + '/summary.json'))
    assert int(r[k]['steps']) == s['steps'] > 0, (k, r[k], s['steps'])
assert r['nan']['best_acc'] == '' and r['nan']['last_acc'] == '', r['nan']" "$T/runs"
check "interrupted: steps the last committed (0: none), loss from metrics.jsonl's last train line (torn line skipped)" py "
r = {x['run'].rsplit('/', 1)[1]: x for x in csv.DictReader(open(sys.argv[1], newline=''))}['live']
lines = []
for l in open(sys.argv[2]):
    try: lines.append(json.loads(l))
    except ValueError: pass
t = [l for l in lines if l['kind'] == 'train'][-1]
e = [l['accuracy'] for l in lines if l['kind'] == 'eval']
assert int(r['steps']) == 0 and float(r['final_loss']) == t['loss'], (r, t)
assert float(r['wall_s']) == t['time_s'] and float(r['samples_per_s']) == t['samples_per_s'], (r, t)
assert e and (float(r['best_acc']), float(r['last_acc'])) == (max(e), e[-1]), (r, e)" "$T/runs/live/metrics.jsonl"
check "the differing keys are columns, in config order after run; the common ones are not" py "
h = next(csv.reader(open(sys.argv[1], newline='')))
for k in ('train.optimizer.lr', 'train.batch_size', 'train.steps', 'data.train.path', 'data.cache'):
    assert k in h, (k, h)
for k in ('seed', 'name', 'device', 'model.layers.1.dense.units', 'train.optimizer.type', 'eval.every_steps'):
    assert k not in h, (k, h)
assert h[0] == 'run' and h.index('train.batch_size') < h.index('train.optimizer.lr') < h.index('status'), h
assert h[-8:] == ['status', 'steps', 'best_acc', 'last_acc', 'final_loss', 'samples_per_s', 'wall_s', 'val_loss'], h"

# ---- three finished runs: exactly their overrides; --json; --sort
sum --json "$T/runs/a" "$T/runs/b" "$T/runs/c"
check "--json: an array of objects, numbers as numbers, in the order given" py "
j = json.load(open(sys.argv[1]))
assert [list(o)[:4] for o in j] == [['run', 'train.batch_size', 'train.micro_batch', 'train.optimizer.lr']] * 3, j[0]
assert [(o['train.batch_size'], o['train.optimizer.lr']) for o in j] == [(32, 0.05), (16, 0.1), (8, 0.2)], j
s = json.load(open(sys.argv[2] + '/summary.json'))
assert j[0]['best_acc'] == s['best_val_accuracy'] and j[0]['steps'] == 40 and j[0]['status'] == 'finished', j[0]" \
    "$T/runs/a"
sum --json "$T/runs/nan" "$T/runs/a"
check "--json: missing values are null" py "
j = json.load(open(sys.argv[1]))
assert j[0]['best_acc'] is None and j[0]['last_acc'] is None and j[0]['status'] == 'failed (3)', j[0]
assert isinstance(j[1]['best_acc'], float), j[1]"
sum --csv --sort train.batch_size "$T/runs/a" "$T/runs/b" "$T/runs/c"
check "--sort train.batch_size: ascending by value (8, 16, 32)" py "
assert [r['train.batch_size'] for r in csv.DictReader(open(sys.argv[1], newline=''))] == ['8', '16', '32']"
sum --csv --sort -train.optimizer.lr "$T/runs/a" "$T/runs/b" "$T/runs/c"
check "--sort -train.optimizer.lr: descending" py "
assert [r['train.optimizer.lr'] for r in csv.DictReader(open(sys.argv[1], newline=''))] == ['0.2', '0.1', '0.05']"
for key in best_acc -best_acc; do
    sum --csv --sort "$key" "$T/runs/nan" "$T/runs/a" "$T/runs/c" "$T/runs/b"
    check "--sort $key: by value, the run without evals last" py "
r = list(csv.DictReader(open(sys.argv[1], newline='')))
a = [float(x['best_acc']) for x in r[:3]]
assert a == sorted(a, reverse=sys.argv[2].startswith('-')) and r[3]['run'].endswith('/nan'), r" "$key"
done

# ---- the text table: aligned, 4 decimals for accuracy, 1 for wall, '-' for missing
sum "$T/runs/a" "$T/runs/nan" "$T/runs/stop"
check "table: a header, one line per run, columns aligned, figures rounded" py "
lines = open(sys.argv[1]).read().splitlines()
assert len(lines) == 4 and lines[0].startswith('run '), lines
at = lines[0].index('status')
assert [l[at:at + 12].rstrip() for l in lines[1:]] == ['finished', 'failed (3)', 'stopped (75)'], lines
s = json.load(open(sys.argv[2] + '/summary.json'))
end = lines[0].index('best_acc') + len('best_acc')
assert lines[1][:end].endswith(' %.4f' % s['best_val_accuracy']) and lines[2][:end].endswith(' -'), lines
assert lines[1].endswith(' %.4f' % s['last_val_loss']) and ' %.1f ' % s['wall_s'] in lines[1], lines[1]" "$T/runs/a"

# ---- CSV quoting: a run directory named with a comma and a quote
cp -r "$T/runs/a" "$T/runs/x,\"y\""
sum --csv "$T/runs/x,\"y\"" "$T/runs/b"
check "--csv: a field with a comma and a quote round-trips through csv" py "
r = list(csv.DictReader(open(sys.argv[1], newline='')))
assert r[0]['run'] == sys.argv[2] and r[0]['status'] == 'finished', r" "$T/runs/x,\"y\""

# ---- a sweep's directory (examples/sweeps/sweep.sh writes summary.csv and PNGs beside its runs)
mkdir -p "$T/sweep/bs=8"
cp -r "$T/runs/a" "$T/sweep/lr=0.05"
cp -r "$T/runs/b" "$T/sweep/bs=8/lr=0.1"      # two levels down
printf 'PNG' >"$T/sweep/loss.png"
echo 'run,status' >"$T/sweep/summary.csv"
sum --csv "$T/sweep"
check "a sweep directory: exit 0" test $? -eq 0
check "a sweep directory: its runs, found below it, in name order" py "
r = [x['run'] for x in csv.DictReader(open(sys.argv[1], newline=''))]
assert r == [sys.argv[2] + '/bs=8/lr=0.1', sys.argv[2] + '/lr=0.05'], r" "$T/sweep"
sum --csv "$T/sweep"/*
check "a glob over a sweep: exit 0" test $? -eq 0
check "a glob over a sweep: the two runs" py "
r = [x['run'] for x in csv.DictReader(open(sys.argv[1], newline=''))]
assert r == [sys.argv[2] + '/bs=8/lr=0.1', sys.argv[2] + '/lr=0.05'], r" "$T/sweep"
check "a glob over a sweep: the PNG and the CSV skipped, a line each" bash -c '
grep -qxF "gpurun: summarize: skipped $1/loss.png (not a run directory)" "$2" &&
grep -qxF "gpurun: summarize: skipped $1/summary.csv (not a run directory)" "$2" && [ "$(wc -l <"$2")" -eq 2 ]' \
    _ "$T/sweep" "$T/sum.err"
expect 3 "gpurun: summarize: none of the 2 arguments is a run directory or holds one" -- \
    "$G" summarize "$T/sweep/loss.png" "$T/sweep/summary.csv"

# ---- errors
expect 2 "gpurun: summarize: no run directory given" -- "$G" summarize
expect 2 "unknown option '--bogus'" -- "$G" summarize "$T/runs/a" --bogus
expect 2 "--csv and --json exclude each other" -- "$G" summarize "$T/runs/a" --csv --json
expect 2 "--sort: no column 'nosuch'" "columns: run, status, steps" -- "$G" summarize "$T/runs/a" --sort nosuch
expect 2 "--sort needs a column name" -- "$G" summarize "$T/runs/a" --sort
expect 3 "gpurun: summarize: $T/nowhere: not a run directory (no such directory)" -- \
    "$G" summarize "$T/runs/a" "$T/nowhere"
mkdir -p "$T/empty"
expect 3 "gpurun: summarize: $T/empty: not a run directory (no config.yaml)" -- "$G" summarize "$T/empty"
cp -r "$T/runs/a" "$T/corrupt"
printf '{"status":"finished","exit_code":0,"steps":4' >"$T/corrupt/summary.json"
expect 3 "$T/corrupt/summary.json: not a JSON object" -- "$G" summarize "$T/runs/a" "$T/corrupt"
check "an error is one line on stderr" test "$(wc -l <"$T/last.err")" -eq 1

echo "e2e_summarize: $((SECONDS - T0)) s"
e2e_done
