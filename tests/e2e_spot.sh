#!/usr/bin/env bash
# e2e_spot.sh — a spot-instance simulation: the preemptible idiom of DESIGN 1.1
# (`gpurun JOB --resume auto --run-dir D`, rerun until it exits 0) under
#
#  A. 30 SIGTERMs at random moments in a 1000-step job (each a random 2..12 steps after the
#     restart's first step, plus 0..15 ms): every stop exits 75 naming its
#     checkpoint, the next start resumes from exactly that one, and the end
#     result equals an uninterrupted run — per-step losses, eval lines and
#     weights.h5 byte for byte;
#  B. 25 SIGKILLs at random moments (0..150 ms after the start, right when a
#     checkpoint's .tmp appears, i.e. during a save, or 1..25 steps past the
#     furthest step logged), then a run to the end: after
#     every kill each committed checkpoint verifies (crc32c recomputed here);
#     every restart resumes from the newest committed checkpoint or, when
#     there is none, says it starts fresh; the steps redone per kill are at
#     most 2 x checkpoint.every_steps (see below); the end result equals the
#     uninterrupted run;
#  C. 3 SIGTERMs as a start begins (GPURUN_START_DELAY_MS holds it before the spec is read):
#     each exits 75 with the set-up line and writes nothing (it was the default action, 143);
#     C2: 5 SIGTERMs as soon as gpurun is exec'd, most before main (in a preloaded library's slow constructor):
#     each exits 75 the same way.
#
#   bash tests/e2e_spot.sh GPURUN_BINARY SOURCE_DIR TMPDIR
#
# The random moments come from bash's RANDOM with a fixed seed, so a failure
# reproduces (up to the machine's timing). Prints `N passed, M failed` last.
. "$(dirname "$0")/e2e_lib.bash" "$@"
e2e_need_py h5py numpy
lasttrain() {  # the step of FILE's last train line, 0 when none
    local s
    s=$(grep '"kind":"train"' "$1" 2>/dev/null | tail -n 1 | grep -o '"step":[0-9]*')
    s=${s#*:}
    echo "${s:-0}"
}
ckname() { printf 'step-%09d.h5' "$1"; }

# ---------------------------------------------------------------- fixtures
H=$SRC/tests/resume_check.py   # the checks on runs and checkpoints

"$PY" - "$T" <<'EOF' || { echo "FAIL: cannot make HDF5 fixtures with $PY (h5py, numpy)"; echo "0 passed, 1 failed"; exit 1; }
import sys, h5py, numpy as np
T = sys.argv[1]
r = np.random.default_rng(3)
with h5py.File(f"{T}/rnd.h5", "w") as f:
    for g, n in (("train", 1024), ("val", 64)):
        f[g + "/images"] = r.integers(0, 256, (n, 1, 16, 16), dtype=np.uint8)
        f[g + "/labels"] = r.integers(0, 10, n).astype(np.uint8)
EOF

EVERY=20
# a small CNN with batchnorm (12.8k parameters, ~6 ms a step on one core), 64 steps an epoch,
# crop + flip augmentation, SGD with momentum and a cosine schedule, checkpoints every 20 steps
job() {  # job NAME STEPS
    cat >"$T/$1.yaml" <<EOF
name: spot
seed: 5
data:
  train: {path: $T/rnd.h5, group: /train}
  val: {path: $T/rnd.h5, group: /val}
  normalize: {mean: [127.5], std: [73.9]}
  augment: {crop: {size: 16, padding: 2}, flip: true}
model:
  layers:
    - conv: {filters: 16, kernel: 3, padding: 1}
    - batchnorm
    - relu
    - conv: {filters: 16, kernel: 3, padding: 1}
    - relu
    - maxpool: {kernel: 2}
    - flatten
    - dropout: {rate: 0.2}
    - dense: {units: 10}
train:
  batch_size: 16
  steps: $2
  optimizer: {type: sgd, lr: 0.05, momentum: 0.9, weight_decay: 0.0005}
  schedule: {type: cosine}
checkpoint: {every_steps: $EVERY}
eval: {every_steps: 50}
log: {every_steps: 1, tensorboard: false}
EOF
}

# ---------------------------------------------------------------- A: 30 SIGTERMs
NA=1000
job a $NA
"$G" "$T/a.yaml" "${THREADS[@]}" --run-dir "$T/a.straight" --quiet >/dev/null 2>"$T/a.straight.err" && ok ||
    bad "the uninterrupted run A failed: $(cat "$T/a.straight.err")"
echo "A: uninterrupted run: $((SECONDS - T0)) s"

RANDOM=20240601
D=$T/a.spot
stops=0 starts=0 rc=75 expect_from=0 why=""
while [ $rc -ne 0 ] && [ $starts -lt 60 ]; do
    starts=$((starts + 1))
    : >"$T/a.out"; : >"$T/a.err"
    env --default-signal=INT "$G" "$T/a.yaml" "${THREADS[@]}" --resume auto --run-dir "$D" >"$T/a.out" 2>"$T/a.err" &
    pid=$!
    if [ $stops -lt 30 ]; then
        target=$((expect_from + 2 + RANDOM % 11))
        extra=$(printf '0.%03d' $((RANDOM % 16)))
        # run in slices until the target is logged (a loaded machine cannot overshoot it), then on
        signal_when $pid CONT step_ge "$D/metrics.jsonl" $target
        sleep "$extra"
        kill -TERM $pid 2>/dev/null
    fi
    wait $pid
    rc=$?
    # each start after the first resumes from the checkpoint the previous stop named
    if [ $expect_from -gt 0 ]; then
        grep -qF "resuming from $D/checkpoints/$(ckname $expect_from) at step $expect_from" "$T/a.err" ||
            why="${why}start $starts did not resume from step $expect_from: $(head -c 300 "$T/a.err"); "
    else
        grep -qF "starting fresh" "$T/a.err" || why="${why}start $starts did not say it starts fresh; "
    fi
    if [ $rc -eq 75 ]; then
        stops=$((stops + 1))
        s=$(sed -n 's/.*stopped by SIGTERM at step \([0-9]*\); checkpoint .* committed; rerun with --resume auto.*/\1/p' "$T/a.err")
        if [ -z "$s" ]; then
            why="${why}stop $stops: no 'stopped by SIGTERM at step N; checkpoint ... committed' line; "
            s=$(lasttrain "$D/metrics.jsonl")
        elif [ "$s" != "$(lasttrain "$D/metrics.jsonl")" ] || [ ! -f "$D/checkpoints/$(ckname "$s")" ]; then
            why="${why}stop $stops at step $s: not the last logged step, or $(ckname "$s") missing; "
        fi
        expect_from=$s
    elif [ $rc -ne 0 ]; then
        why="${why}start $starts exited $rc: $(head -c 300 "$T/a.err"); "
        break
    fi
done
echo "A: $stops SIGTERMs in $starts starts, stops at steps up to $expect_from of $NA: $((SECONDS - T0)) s"
[ -z "$why" ] && ok || bad "A: $why"
[ $stops -eq 30 ] && ok || bad "A: $stops SIGTERMs, 30 expected (the job finished too early or a start failed)"
[ $rc -eq 0 ] && ok || bad "A: the last start exited $rc, not 0"
# BUG (reported, see e2e_resume.sh): a SIGTERM during a micro-batch leaves that batch's update in
# batchnorm's running stats, so /state/batchnorm0/* and the eval lines differ until it is fixed.
check "A: 30 SIGTERMs + --resume auto = the uninterrupted run (losses, evals, weights.h5 bytes)" \
    "$PY" "$H" same "$T/a.straight" "$D"

# ---------------------------------------------------------------- B: SIGKILLs
# Redone steps: a kill loses the steps logged after the newest committed checkpoint. A save of
# step c (a multiple of every_steps) starts at c and is committed in the background; the next one
# starts at c + every_steps only after it is committed (the loop waits), so when the kill comes the
# last logged step L is < c + every_steps, or = c + every_steps while the loop waits for commit c,
# and the newest committed is c, or c - every_steps while c is being written:
# L - resume step <= every_steps (the interval) + every_steps (steps run during one save) = 40.
NB=700
job b $NB
"$G" "$T/b.yaml" "${THREADS[@]}" --run-dir "$T/b.straight" --quiet >/dev/null 2>"$T/b.straight.err" && ok ||
    bad "the uninterrupted run B failed: $(cat "$T/b.straight.err")"
# tmp_or_step DIR MARK K : a checkpoint .tmp newer than MARK is in DIR/checkpoints, or DIR's
# metrics.jsonl is at step K or later
tmp_or_step() {
    [ -n "$(find "$1/checkpoints" -name '*.tmp' -newer "$2" 2>/dev/null)" ] || step_ge "$1/metrics.jsonl" "$3"
}
# stderr holds more than what a start killed during start-up may have said
startup_lines() { grep -v -e '^gpurun: device auto: ' -e ': an unfinished write (skipped)$' "$1" | grep -q .; }
RANDOM=777
D=$T/b.spot
kills=0 starts=0 rc=137 why="" newest=0 during_save=0 fresh=0 redone_max=0 redone_sum=0 last_logged=0
while [ $rc -ne 0 ] && [ $starts -lt 80 ]; do
    starts=$((starts + 1))
    # truncated here: a kill may come before the child has opened them
    : >"$T/b.out"; : >"$T/b.err"; touch "$T/b.mark"
    "$G" "$T/b.yaml" "${THREADS[@]}" --resume auto --run-dir "$D" >"$T/b.out" 2>"$T/b.err" &
    pid=$!
    if [ $kills -lt 25 ]; then
        case $((kills % 4)) in
        0)  # any moment from start-up on: 0..150 ms
            sleep "$(printf '0.%03d' $((RANDOM % 150)))" ;;
        2)  # right when this start writes a checkpoint's .tmp, or two intervals past the furthest
            # step logged: run in slices (signal_when), so a .tmp shorter than a poll on a loaded
            # machine cannot let the run go on for seconds (it once finished the job 3 kills early)
            target=$(( (last_logged > newest ? last_logged : newest) + 2 * EVERY ))
            signal_when $pid CONT tmp_or_step "$D" "$T/b.mark" $target ;;
        *)  # 1..25 steps past the furthest step logged so far, then 0..7 ms
            target=$(( (last_logged > newest ? last_logged : newest) + 1 + RANDOM % 25 ))
            signal_when $pid CONT step_ge "$D/metrics.jsonl" $target
            sleep "$(printf '0.%03d' $((RANDOM % 8)))" ;;
        esac
        kill -KILL $pid 2>/dev/null
    fi
    { wait $pid; } 2>/dev/null
    rc=$?
    # this start: resumed from the newest committed checkpoint, or started fresh when there was none
    if [ "$newest" -gt 0 ]; then
        if grep -qF "resuming from $D/checkpoints/$(ckname "$newest") at step $newest" "$T/b.err"; then
            r=$((last_logged - newest))
            [ $r -gt $redone_max ] && redone_max=$r
            redone_sum=$((redone_sum + r))
            [ $r -le $((2 * EVERY)) ] || why="${why}start $starts redid $r steps ($newest..$last_logged); "
        elif startup_lines "$T/b.err" || [ $rc -ne 137 ]; then
            # a kill during start-up may come before the line (after, on a machine with a CUDA
            # toolkit and no usable GPU, the device fallback line, and the lines naming the .tmp
            # leftovers the checkpoint scan skips)
            why="${why}start $starts did not resume from $(ckname "$newest"): $(head -c 300 "$T/b.err"); "
        fi
    elif grep -qF "no checkpoint in $D/checkpoints; starting fresh" "$T/b.err"; then
        fresh=$((fresh + 1))
        [ "$last_logged" -le $((2 * EVERY)) ] || why="${why}start $starts started fresh after step $last_logged; "
    elif startup_lines "$T/b.err" || [ $rc -ne 137 ]; then
        why="${why}start $starts: neither resumed nor 'starting fresh': $(head -c 300 "$T/b.err"); "
    fi
    grep -q "skipping" "$T/b.err" && why="${why}start $starts skipped a committed checkpoint: $(grep skipping "$T/b.err"); "
    if [ $rc -eq 137 ]; then
        kills=$((kills + 1))
        ls "$D/checkpoints" 2>/dev/null | grep -q '\.tmp$' && during_save=$((during_save + 1))
        # every committed checkpoint verifies; the newest is what the next start must take
        n=$("$PY" "$H" committed "$D/checkpoints" 2>"$T/b.verify") ||
            { why="${why}after kill $kills: $(tail -n 1 "$T/b.verify"); "; n=0; }
        # the steps trained since the newest commit (a start killed before it logged keeps the older count)
        l=$(lasttrain "$D/metrics.jsonl")
        [ "$l" -gt "$newest" ] 2>/dev/null || l=$n
        [ "$n" -ge "$newest" ] || why="${why}after kill $kills the newest committed checkpoint went back from $newest to $n; "
        newest=$n last_logged=$l
    elif [ $rc -ne 0 ]; then
        why="${why}start $starts exited $rc: $(head -c 300 "$T/b.err"); "
        break
    fi
done
echo "B: $kills SIGKILLs in $starts starts ($during_save with a .tmp present, $fresh fresh starts), steps redone per kill: max $redone_max, total $redone_sum (bound $((2 * EVERY))): $((SECONDS - T0)) s"
[ -z "$why" ] && ok || bad "B: $why"
[ $rc -eq 0 ] && ok || bad "B: the last start exited $rc, not 0"
[ $kills -eq 25 ] && ok || bad "B: only $kills kills (25 expected)"
[ $during_save -ge 1 ] && ok || bad "B: no kill came while a .tmp was there"
# a start killed before its first checkpoint starts fresh and appends to metrics.jsonl (said so
# on stderr), so a step may be logged twice: compare the last line logged for each step
check "B: SIGKILLs + --resume auto = the uninterrupted run (last line of each step, evals, weights.h5 bytes)" \
    "$PY" "$H" same "$T/b.straight" "$D" --last
check "B: the finished run's committed checkpoints verify" "$PY" "$H" committed "$D/checkpoints"

# ---------------------------------------------------------------- C: SIGTERM as a start begins
# A preemption notice right after a restart: the process is still starting (libraries, MPI, the
# spec), before train.c's set-up, where a SIGTERM was the default action (exit 143). From main's
# first lines on it is exit 75 with the set-up line, nothing written. GPURUN_START_DELAY_MS holds
# the start for 10 s after those lines (a slow start); each SIGTERM comes as soon as the process
# catches SIGTERM (/proc/PID/status SigCgt, bit 15), which must be within 3 s: before the delay
caught_term() {
    local m
    m=$(sed -n 's/^SigCgt:[[:space:]]*//p' "/proc/$1/status" 2>/dev/null)
    [ $(( 0x${m:-0} >> 14 & 1 )) -eq 1 ]
}
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }
why=""
for k in 1 2 3; do
    GPURUN_START_DELAY_MS=10000 "$G" "$T/b.yaml" "${THREADS[@]}" --resume auto --run-dir "$T/c.spot" \
        >"$T/c.out" 2>"$T/c.err" &
    pid=$!
    t_end=$(( $(now_ms) + 3000 ))
    until caught_term $pid || [ "$(now_ms)" -ge $t_end ]; do sleep 0.01; done
    caught_term $pid || why="${why}start $k: SIGTERM not caught within 3 s of the start; "
    kill -TERM $pid
    wait $pid
    rc=$?
    [ $rc -eq 75 ] || why="${why}start $k exited $rc, not 75: $(head -c 300 "$T/c.err"); "
    grep -qF "gpurun: stopped by SIGTERM during set-up (start, MPI, compile, data, device), before the run directory \
was written; nothing changed: rerun with --resume auto to continue" "$T/c.err" ||
        why="${why}start $k: no set-up stop line; "
    [ ! -e "$T/c.spot" ] || why="${why}start $k left $T/c.spot; "
done
[ -z "$why" ] && ok || bad "C: $why"

# C2: the same before main: the shared libraries' constructors run before main, and a SIGTERM
# then was the default action (143). The stop signals are held from before them (main.c's
# .preinit_array entry), so each start below is signalled as soon as /proc/PID/status shows
# SIGTERM held (SigBlk), whether or not main has begun: exit 75 with the set-up line every time.
# gpurun's own libraries reach main within milliseconds now (cuBLAS's 0.3 s of constructors are
# no longer linked), too short a window to aim at, so each start preloads a library whose
# constructor takes 0.5 s, a stand-in for a slow one; GPURUN_START_DELAY_MS holds the set-up
# after main, so a late poll still signals before the run directory. A signal that landed before
# main is one sent while SIGTERM was not yet caught (SigCgt); when none did (no C compiler for
# the stand-in, or every poll late), that part is reported skipped. (The dynamic loader's
# mapping of the libraries, before any of gpurun's code runs, stays uncovered: nothing of the
# program can act there.)
slow_ctor=""
printf '#include <time.h>\n__attribute__((constructor)) static void slow(void) {\n    %s\n}\n' \
    'struct timespec t = {0, 500000000}; nanosleep(&t, 0);' >"$T/slow_ctor.c"
cc -shared -fPIC -o "$T/slow_ctor.so" "$T/slow_ctor.c" 2>/dev/null && slow_ctor=$T/slow_ctor.so
held_term() {
    local m
    m=$(sed -n 's/^SigBlk:[[:space:]]*//p' "/proc/$1/status" 2>/dev/null)
    [ $(( 0x${m:-0} >> 14 & 1 )) -eq 1 ]
}
why="" early=0 gbin=$(realpath "$G")  # (bash blocks no signal of its children: SigBlk is gpurun's)
for k in 1 2 3 4 5; do
    LD_PRELOAD=$slow_ctor GPURUN_START_DELAY_MS=2000 "$G" "$T/b.yaml" "${THREADS[@]}" --resume auto \
        --run-dir "$T/c2.spot" >"$T/c.out" 2>"$T/c.err" &
    pid=$!
    t_end=$(( $(now_ms) + 5000 ))
    until held_term $pid || ! kill -0 $pid 2>/dev/null || [ "$(now_ms)" -ge $t_end ]; do :; done
    [ "$(readlink "/proc/$pid/exe" 2>/dev/null)" = "$gbin" ] && ! caught_term $pid && early=$((early + 1))
    kill -TERM $pid
    wait $pid
    rc=$?
    [ $rc -eq 75 ] || why="${why}start $k exited $rc, not 75: $(head -c 300 "$T/c.err"); "
    grep -qF "gpurun: stopped by SIGTERM during set-up" "$T/c.err" || why="${why}start $k: no set-up stop line; "
    [ ! -e "$T/c2.spot" ] || why="${why}start $k left $T/c2.spot; "
done
[ -z "$why" ] && ok || bad "C2: $why"
[ $early -gt 0 ] && echo "C2: $early of 5 SIGTERMs landed before main" ||
    e2e_skip "C2 before main: no SIGTERM landed before main (the start reached it between two polls)"

echo "e2e_spot: $((SECONDS - T0)) s"
e2e_done
