#!/usr/bin/env bash
# e2e_plot.sh — `gpurun plot` (tools/plot.c): the curves of runs in one PNG, checked by its
# pixels with tests/plot_check.py, which maps the runs' (step, value) points to pixels through the
# axis ranges and plot area the command prints on stdout, and finds each run's tab10 colour there:
#   - two real runs (lr 0.1 and 0.02): an 800x500 8-bit RGB PNG by default, each run's colour
#     along its loss curve and nowhere far from it, the legend's swatches in order, frame and text;
#     --size 640x400 and 200x150; accuracy and val_loss from the eval lines (x starts at the
#     first eval step), lr of the cosine schedule going down, samples_per_s
#   - a hand-written metrics.jsonl: torn and glued lines, null / "NaN" / 1e999 values, an eval
#     loss, a step logged again after a resume (the last value drawn, the first not), and a run
#     with a single point (a marker); same basenames are told apart by their paths
#   - errors: no RUN_DIR, no -o, an unknown option or metric, bad --size (2); a missing run
#     directory, one without metrics.jsonl, a FIFO as metrics.jsonl, a metric without values (3);
#     an output that cannot be written (6), leaving neither it nor OUT.tmp
#
#   bash tests/e2e_plot.sh GPURUN_BINARY SOURCE_DIR TMPDIR
#
# Two 60-step runs of a tiny MLP on synthetic data: a few seconds.
. "$(dirname "$0")/e2e_lib.bash" "$@"
e2e_need_py  # $PY itself; plot_check.py decodes the PNGs with zlib where PIL is missing
CHK=$SRC/tests/plot_check.py
pc() { "$PY" "$CHK" "$@"; }

# ---- two real runs
"$G" data synthetic "$T/p.h5" --n 600 --shape 1,8,8 --classes 10 --test 100 --seed 2 >/dev/null 2>&1 ||
    { echo "FAIL: gpurun data synthetic"; echo "0 passed, 1 failed"; exit 1; }
cat >"$T/tiny.yaml" <<EOF
name: ptiny
device: cpu
data: {train: {path: $T/p.h5, group: /train}, val: {path: $T/p.h5, group: /test}}
model: {layers: [flatten, {dense: {units: 16}}, relu, {dense: {units: 10}}]}
train: {batch_size: 32, steps: 60, optimizer: {type: sgd, lr: 0.1}, schedule: {type: cosine}}
eval: {every_steps: 10}
log: {every_steps: 2}
EOF
for r in "a 0.1" "b 0.02"; do
    set -- $r
    run "$G" "$T/tiny.yaml" --run-dir "$T/runs/$1" --quiet --set train.optimizer.lr="$2"
    [ "$RC" -eq 0 ] || { echo "FAIL: the run $1 exited $RC: $(head -c 400 "$ERR")"; echo "0 passed, 1 failed"; exit 1; }
done
A=$T/runs/a/metrics.jsonl
B=$T/runs/b/metrics.jsonl

# plot NAME ARGS...: gpurun plot -v ARGS..., exit 0 and the documented line, kept as $T/NAME.info
plot() {
    local name=$1
    shift
    expect_ok "plot: x " "wrote " -- "$G" plot -v "$@"
    cp "$OUT" "$T/$name.info"
}

plot loss "$T/runs/a" "$T/runs/b" -o "$T/loss.png"
check "loss.png: 800x500 8-bit RGB" pc size "$T/loss.png" 800 500
check "loss.png: each run's colour along its curve" pc curves "$T/loss.png" "$T/loss.info" "$A:loss" "$B:loss" --min 15
check "loss.png: the y range is the losses'" pc range "$T/loss.info" "$A:loss" "$B:loss"
check "loss.png: legend swatches" pc legend "$T/loss.png" "$T/loss.info" 2
check "loss.png: frame, tick labels, titles" pc axes "$T/loss.png" "$T/loss.info"
check "loss.png: no loss.png.tmp left" test ! -e "$T/loss.png.tmp"

plot mid "$T/runs/a" "$T/runs/b" -o "$T/mid.png" --size 640x400
check "--size 640x400" pc size "$T/mid.png" 640 400
check "640x400: the curves" pc curves "$T/mid.png" "$T/mid.info" "$A:loss" "$B:loss" --min 10
plot small "$T/runs/a" "$T/runs/b" -o "$T/small.png" --size=200x150
check "--size=200x150" pc size "$T/small.png" 200 150
check "200x150: the curves" pc curves "$T/small.png" "$T/small.info" "$A:loss" "$B:loss" --min 3
check "200x150: frame and text" pc axes "$T/small.png" "$T/small.info"

plot acc "$T/runs/a" "$T/runs/b" -o "$T/acc.png" --metric accuracy
check "accuracy: the eval points" pc curves "$T/acc.png" "$T/acc.info" "$A:accuracy" "$B:accuracy"
check "accuracy: the ranges are the eval lines'" pc range "$T/acc.info" "$A:accuracy" "$B:accuracy"
check "accuracy: x starts past the first train step" \
    awk '{ split($3, r, "\\.\\."); exit !(r[1] > 2 && r[1] <= 10) }' "$T/acc.info"
plot vloss "$T/runs/a" -o "$T/vloss.png" --metric val_loss
check "val_loss: the eval losses" pc curves "$T/vloss.png" "$T/vloss.info" "$A:val_loss"
check "val_loss: their range" pc range "$T/vloss.info" "$A:val_loss"
plot lr "$T/runs/a" "$T/runs/b" -o "$T/lr.png" --metric lr
check "lr: the schedule's values" pc curves "$T/lr.png" "$T/lr.info" "$A:lr" "$B:lr" --min 10
check "lr: the cosine schedule goes down" pc down "$T/lr.png" "$T/lr.info" 0 6 20 34 48
plot sps "$T/runs/a" -o "$T/sps.png" --metric samples_per_s
check "samples_per_s: its values" pc curves "$T/sps.png" "$T/sps.info" "$A:samples_per_s"

# ---- a hand-written metrics.jsonl
mkdir -p "$T/hand/x/r1" "$T/hand/y/r1" "$T/hand/one"
cat >"$T/hand/x/r1/metrics.jsonl" <<'EOF'
{"kind":"train","step":0,"epoch":0,"loss":5,"lr":0.1}
{"kind":"train","step":10,"loss":4}
{"kind":"train","step":20,"loss":4.5}
{"kind":"train","step":30,"loss":3}
{"kind":"eval","split":"val","step":30,"loss":7,"accuracy":0.5}
{"kind":"eval","split":"train","step":30,"loss":9,"accuracy":0.99}
{"kind":"train","step":20,"loss":2.5}
{"kind":"train","step":40,"loss":null}
{"kind":"train","step":40,"loss":"NaN"}
{"kind":"train","step":40,"loss":1e999}
{"kind":"train","step":50,"loss":2,"extra":{"a":[1,{"b":"}"}]}}
{"kind":"train","step":60,"lo
not json
{"kind":"train","step":60,"loss":3.5}{"kind":"train","step":65,"loss":8}
{"kind":"train","step":70,"loss":1}
EOF
printf '{"kind":"train","step":80,"loss":0.5' >>"$T/hand/x/r1/metrics.jsonl"   # torn at the end
printf '{"kind":"train","step":5,"loss":3}\n{"kind":"train","step":45,"loss":4}\n' >"$T/hand/y/r1/metrics.jsonl"
echo '{"kind":"train","step":35,"loss":2}' >"$T/hand/one/metrics.jsonl"
HX=$T/hand/x/r1/metrics.jsonl
plot hand "$T/hand/x/r1" -o "$T/hand.png"
check "hand: the kept points: last value of step 20, none of the torn, glued or non-finite lines" \
    pc curves "$T/hand.png" "$T/hand.info" "$HX:loss" --min 5 --absent 0:20:4.5 --absent 0:60:3.5
check "hand: y range from the kept points only (not 7, 8, 9 or 0.5)" pc range "$T/hand.info" "$HX:loss"
check "hand: y range 1..5 padded" \
    awk '{ split($5, r, "\\.\\."); exit !(r[1] > 0.5 && r[1] < 1 && r[2] + 0 > 5 && r[2] + 0 < 5.5) }' "$T/hand.info"
plot hacc "$T/hand/x/r1" -o "$T/hacc.png" --metric accuracy
check "hand: accuracy of the val split only" pc range "$T/hacc.info" "$HX:accuracy"
plot one "$T/hand/one" -o "$T/one.png"
check "a single point: a marker" pc marker "$T/one.png" "$T/one.info" 0 35 2
plot three "$T/hand/x/r1" "$T/hand/y/r1" "$T/hand/one" -o "$T/three.png"
check "three runs: each curve" pc curves "$T/three.png" "$T/three.info" "$HX:loss" "$T/hand/y/r1/metrics.jsonl:loss" \
    "$T/hand/one/metrics.jsonl:loss" --min 1
check "three runs: swatches" pc legend "$T/three.png" "$T/three.info" 3
plot twin "$T/hand/one" "$T/hand/y/r1" -o "$T/twin.png"
# the legend of x/r1 and y/r1 names them by path: wider than that of "one" and "r1"
lw() {
    awk '{ for (i = 1; i <= NF; i++)
             if ($i == "legend") { split($(i + 1), a, ","); split($(i + 2), b, ","); print b[1] - a[1] } }' "$1"
}
check "same basenames: the legend names the paths (wider)" \
    test "$(lw "$T/three.info")" -gt "$(( $(lw "$T/twin.info") + 60 ))"

# ---- without -v: one line saying what was written, no geometry
expect_ok "wrote $T/quiet.png (loss of 2 runs)" -- "$G" plot "$T/runs/a" "$T/runs/b" -o "$T/quiet.png"
check "without -v: one line on stdout, no geometry" \
    bash -c '[ "$(wc -l <"$1")" -eq 1 ] && ! grep -q frame "$1" && [ ! -s "$2" ]' _ "$OUT" "$ERR"

# ---- a sweep's directory: its runs (two levels down), its PNGs and CSV beside them skipped
mkdir -p "$T/sweep/g1"
cp -r "$T/runs/a" "$T/sweep/lr=a"
cp -r "$T/runs/b" "$T/sweep/g1/lr=b"
cp "$T/loss.png" "$T/sweep/loss.png"
echo 'run,status' >"$T/sweep/summary.csv"
plot sweepdir "$T/sweep" -o "$T/sweepdir.png"
check "a sweep directory: both runs, found below it" grep -q ', 2 runs, ' "$T/sweepdir.info"
check "a sweep directory: the same curves as the runs named" pc curves "$T/sweepdir.png" "$T/sweepdir.info" \
    "$T/sweep/g1/lr=b/metrics.jsonl:loss" "$T/sweep/lr=a/metrics.jsonl:loss"
expect_ok "wrote $T/glob.png (loss of 2 runs)" -- "$G" plot "$T/sweep"/* -o "$T/glob.png"
check "a glob over a sweep: the PNG and the CSV skipped with a line each" \
    bash -c 'grep -qF "gpurun: plot: skipped $1/loss.png (not a run directory)" "$2" &&
             grep -qF "gpurun: plot: skipped $1/summary.csv (not a run directory)" "$2" && [ "$(wc -l <"$2")" -eq 2 ]' \
    _ "$T/sweep" "$ERR"
expect 3 "gpurun: plot: none of the 2 arguments is a run directory or holds one" -- \
    "$G" plot "$T/sweep/loss.png" "$T/sweep/summary.csv" -o "$T/x.png"

# ---- errors
expect 2 "gpurun: plot: " "-o" -- "$G" plot "$T/runs/a"
expect 2 "gpurun: plot: " "RUN_DIR" -- "$G" plot -o "$T/x.png"
expect 2 "gpurun: plot: " "unknown metric 'loss2'" -- "$G" plot "$T/runs/a" -o "$T/x.png" --metric loss2
expect 2 "gpurun: plot: " "--bogus" -- "$G" plot "$T/runs/a" -o "$T/x.png" --bogus
for s in 100x100 199x150 4001x500 800x 800x500x abc -800x500 800X500; do
    expect 2 "gpurun: plot: " "--size '$s'" -- "$G" plot "$T/runs/a" -o "$T/x.png" --size "$s"
done
expect 3 "gpurun: plot: " "$T/runs/nosuch" -- "$G" plot "$T/runs/a" "$T/runs/nosuch" -o "$T/x.png"
mkdir -p "$T/empty"
expect 3 "gpurun: plot: " "$T/empty/metrics.jsonl" -- "$G" plot "$T/empty" -o "$T/x.png"
mkdir -p "$T/fifo" && mkfifo "$T/fifo/metrics.jsonl"
E2E_TIMEOUT=10 expect 3 "gpurun: plot: " "$T/fifo/metrics.jsonl" -- "$G" plot "$T/fifo" -o "$T/x.png"
expect 3 "gpurun: plot: " "accuracy" "no values" -- \
    "$G" plot "$T/hand/one" "$T/hand/y/r1" -o "$T/x.png" --metric accuracy
check "no output after the failures" test ! -e "$T/x.png"
expect 6 "gpurun: plot: " "$T/nodir/out.png" "No such file or directory" -- "$G" plot "$T/runs/a" -o "$T/nodir/out.png"
check "no directory made for the output" test ! -e "$T/nodir"
mkdir -p "$T/outdir/keep"
expect 6 "gpurun: plot: " "$T/outdir" -- "$G" plot "$T/runs/a" -o "$T/outdir"
check "an output that is a directory: left as it was, no outdir.tmp" \
    bash -c "[ -d '$T/outdir/keep' ] && [ ! -e '$T/outdir.tmp' ]"

echo "e2e_plot: $((SECONDS - T0)) s"
e2e_done
