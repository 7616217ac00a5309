#!/usr/bin/env bash
# e2e_campaign.sh — the fast, deterministic part of the bad-input and fault campaign
# (DESIGN 1.2 exit codes, 1.3 run directory, 1.4 spec, 1.5 data, 1.6 checkpoints), a few cases per
# class beside those of tests/e2e_errors.sh and tests/e2e_resume.sh (the bad values below that
# e2e_errors also has are given here to --resume auto over a stopped run, which must stay as it was):
#
#   spec     exit 2 with `file:line:col: key:`: bad values against an existing run, unsafe
#            names, YAML tags, an unknown layer, nested repeats past the cap (at once), a model
#            with nothing to train, a FIFO, /dev/zero or a directory as the spec (no hang, no
#            unbounded memory)
#   data     exit 3 naming the file (and dataset, sample): a FIFO as data.train.path, a NaN
#            pixel in float32 images
#   ckpt     exit 6 naming the file (and tensor, key): --resume PATH to a FIFO or a directory;
#            --resume auto where every checkpoint is corrupt, or written with another seed or
#            lr; init_from a FIFO or a file with a NaN weight. Exit 0 and bit-exact: --resume
#            auto after changing only logging, checkpoint or eval cadence, workers, prefetch,
#            device, or a longer train.steps
#   storage  exit 6 naming the path: a read-only run directory, metrics.jsonl a symlink to
#            /dev/full, config.yaml.tmp occupied by a directory
#   lock     a second --resume auto on a live run's directory: exit 6 at once naming the holder
#            (pid, host), nothing touched, the first run bit-identical to one without intruder;
#            after a SIGKILL the next start takes the directory over and resumes
#   signals  SIGTERM then SIGKILL then --resume auto = the uninterrupted run; SIGTERM during a
#            slow compile stops the process within 2 s
#
# Every failing command runs under `timeout 20` (a hang fails the case) and must leave every
# committed file of the run directory it was pointed at as it was (sha256). The longer,
# randomized part is tests/campaign_slow.sh (not in CI).
#
#   bash tests/e2e_campaign.sh GPURUN_BINARY SOURCE_DIR TMPDIR
#
# Prints PASS/FAIL/SKIP per case with a reason, then `N passed, N failed, N skipped`; exits
# non-zero when a case failed.
. "$(dirname "$0")/e2e_lib.bash" "$@"
. "$SRC/tests/campaign/lib.bash"
e2e_need_py h5py numpy  # the fixtures and tests/campaign/camp.py

camp_fixtures
echo "fixtures: $((SECONDS - T0)) s"

# ================================================================ writers: planted symlinks, special files
# as OUT, two conversions to one OUT (issue 23.3, 23.4, 23.12)
. "$SRC/tests/campaign/round2_writers.bash"
round2_writers
echo "writers: $((SECONDS - T0)) s"
# over-long paths, control characters to the terminal, big YAML maps, overflowing counts
# (issue 23.5, 23.7, 23.8, 23.9)
. "$SRC/tests/campaign/round2_inputs.bash"
round2_inputs
echo "inputs: $((SECONDS - T0)) s"
# a checkpoint directory belongs to one run (issue 30.1)
. "$SRC/tests/campaign/round2_ckptdir.bash"
round2_ckptdir
echo "ckptdir: $((SECONDS - T0)) s"

# ================================================================ spec: exit 2, file:line:col: key:
# each against a stopped run (--resume auto): a bad spec must not touch it
spec_case() {  # NAME SED LINE KEYREGEX [more checks...]
    local n=$1 e=$2 line=$3 key=$4
    shift 4
    job "s_$n" "$e"
    victim "s_$n"
    kase "spec.$n" 2 "$V" "re:^gpurun: $(rx "$T/s_$n.yaml"):$line:[0-9]+: $key" "$@" -- \
        "$G" "$T/s_$n.yaml" --run-dir "$V" --resume auto --quiet
}
spec_case unknown_key 's/^seed: 3/sede: 3/' 2 "sede:"
spec_case neg_lr 's/lr: 0.05/lr: -0.05/' 16 "train\.optimizer\.lr:"
spec_case nan_lr 's/lr: 0.05/lr: .nan/' 16 "train\.optimizer\.lr:"
spec_case batch0 's/batch_size: 16/batch_size: 0/' 14 "train\.batch_size:"
spec_case wrong_type 's/steps: 40/steps: [40]/' 15 "train\.steps:"
spec_case yaml_tag 's/^seed: 3/seed: !!python\/object:os.system 3/' 2 "seed:"
spec_case yaml_tag_map 's/^  layers:/  layers: !!python\/object\/apply:os.system/' 8 "model\.layers:"
spec_case unknown_layer 's/    - relu/    - {relu: {}, input: nosuch}/' 11 "model\.layers(\[2\]|\.2)\.input:" "nosuch"
spec_case no_params '/dense/d' "[0-9]+" "model"

# unsafe names: no --run-dir, so the run would go to runs/<name> under the working directory;
# exit 2 at the name, and nothing written there (`..` wrote the run into the working directory)
name_case() {  # NAME VALUE
    job "n_$1" "s/^name: camp/name: $2/"
    mkdir -p "$T/cwd_$1/runs"
    kase "spec.name_$1" 2 "$T/cwd_$1" "re:^gpurun: $(rx "$T/n_$1.yaml"):1:[0-9]+: name:" -- \
        bash -c "cd '$T/cwd_$1' && exec '$G' '$T/n_$1.yaml' --quiet"
}
name_case dotdot '".."'
name_case dot '"."'
name_case slash '"a\/b"'
name_case dash '"-x"'
name_case newline '"a\\nb"'

# blocks nesting `repeat: 1000` three deep (10^9 layers): a spec error at once, not an expansion
cat >"$T/nest.yaml" <<EOF
name: nest
data:
  train: {path: $T/s.h5, group: /train}
model:
  blocks:
    c:
      layers:
        - relu
    b:
      layers:
        - {c: {}, repeat: 1000}
    a:
      layers:
        - {b: {}, repeat: 1000}
  layers:
    - flatten
    - {a: {}, repeat: 1000}
    - dense: {units: 10}
train: {batch_size: 16, steps: 2, optimizer: {type: sgd, lr: 0.05}}
EOF
kase spec.repeat_cap 2 "$T/rd_nest" "re:^gpurun: $(rx "$T/nest.yaml"):[0-9]+:[0-9]+: model\." -- \
    "$G" "$T/nest.yaml" --run-dir "$T/rd_nest" --quiet
kase spec.repeat_cap_plan 2 - "re:^gpurun: $(rx "$T/nest.yaml"):[0-9]+:[0-9]+: model\." -- "$G" plan "$T/nest.yaml"

# special files as the spec: no hang, no unbounded read (today /dev/zero grows ~1 GB/s: the
# process runs under a 2 GB address-space limit where it can start so, i.e. not under ASan, and
# its peak RSS must stay under 1 GB)
victim s_fifo
kase spec.fifo 2 "$V" "$FIFO" -- "$G" "$FIFO" --run-dir "$V" --resume auto --quiet
victim s_dir
mkdir -p "$T/adir.yaml"
kase spec.directory 2 "$V" "$T/adir.yaml" -- "$G" "$T/adir.yaml" --run-dir "$V" --resume auto --quiet
victim s_zero
cap=()
if { bash -c "ulimit -v 2000000 && exec '$G' --version" >/dev/null 2>&1; } 2>/dev/null; then
    cap=(bash -c 'ulimit -v 2000000 && exec "$@"' _)
fi
tm=()
[ -x /usr/bin/time ] && tm=(/usr/bin/time -f "maxrss_kb=%M" -o "$T/zero.rss")
kase spec.dev_zero 2 "$V" "/dev/zero" -- "${cap[@]}" "${tm[@]}" "$G" /dev/zero --run-dir "$V" --resume auto --quiet
if [ ${#tm[@]} -gt 0 ]; then
    rss=$(sed -n 's/^maxrss_kb=//p' "$T/zero.rss" 2>/dev/null)
    if [ -n "$rss" ] && [ "$rss" -lt 1048576 ]; then pass spec.dev_zero_memory "peak RSS $((rss / 1024)) MB"
    else fail spec.dev_zero_memory "peak RSS ${rss:-unknown (killed)} KB reading /dev/zero as a spec (limit 1 GB)"; fi
fi
echo "spec: $((SECONDS - T0)) s"

# ================================================================ data: exit 3 naming file, dataset
job d_fifo "s#path: $T/s.h5, group: /train#path: $FIFO, group: /train#"
kase data.fifo_train 3 "$T/rd_dfifo" "$FIFO" -- "$G" "$T/d_fifo.yaml" --run-dir "$T/rd_dfifo" --quiet
# float32 images (DESIGN 1.5) with one NaN pixel in sample 37 of /train
"$PY" "$CAMP" floatdata "$T/s.h5" "$T/nan.h5" train:37:nan || fail fixtures "floatdata"
job d_nan "s#$T/s.h5#$T/nan.h5#g"
kase data.nan_pixel 3 "$T/rd_dnan" "$T/nan.h5" "/train/images" "re:sample[^0-9]{0,20}37([^0-9]|$)" -- \
    "$G" "$T/d_nan.yaml" --run-dir "$T/rd_dnan" --quiet
echo "data: $((SECONDS - T0)) s"

# ================================================================ checkpoints: exit 6
victim c_fifo
kase ckpt.resume_fifo 6 "$V" "$FIFO" -- "$G" "$T/base.yaml" --run-dir "$V" --resume "$FIFO" --quiet
victim c_dir
kase ckpt.resume_directory 6 "$V" "$T/adir.yaml" -- "$G" "$T/base.yaml" --run-dir "$V" --resume "$T/adir.yaml" --quiet
# every committed checkpoint truncated: refuse (it restarted from step 0, truncating the run)
victim c_allbad
for f in "$V"/checkpoints/step-*.h5; do head -c 3000 "$f" >"$T/cut.h5" && cat "$T/cut.h5" >"$f"; done
kase ckpt.auto_all_truncated 6 "$V" "$V/checkpoints/$(ckname 20)" -- \
    "$G" "$T/base.yaml" --run-dir "$V" --resume auto --quiet
# intact checkpoints of another trajectory: refuse, naming the key
victim c_seed
kase ckpt.auto_other_seed 6 "$V" "re:(^|[^a-z_.])seed([^a-z_]|$)" -- \
    "$G" "$T/base.yaml" --set seed=4 --run-dir "$V" --resume auto --quiet
victim c_lr
kase ckpt.auto_other_lr 6 "$V" "train.optimizer.lr" -- \
    "$G" "$T/base.yaml" --set train.optimizer.lr=0.04 --run-dir "$V" --resume auto --quiet
# init_from: a FIFO, and a file whose crc32c is right but which holds a NaN
kase ckpt.init_from_fifo 6 "$T/rd_ififo" "$FIFO" -- \
    "$G" "$T/base.yaml" --set model.init_from="$FIFO" --run-dir "$T/rd_ififo" --quiet
"$PY" "$CAMP" badweight "$T/tmpl/weights.h5" "$T/wnan.h5" /params/dense1/weight nan || fail fixtures "badweight"
kase ckpt.init_from_nan 6 "$T/rd_inan" "$T/wnan.h5" "params/dense1/weight" -- \
    "$G" "$T/base.yaml" --set model.init_from="$T/wnan.h5" --run-dir "$T/rd_inan" --quiet

# keys that do not change the trajectory may change between restarts: exit 0, resumed from step
# 20, and the end equals the uninterrupted template (weights bytes, eval lines, summary)
benign() {  # NAME ARGS...
    local n=$1
    shift
    victim "b_$n"
    crun 120 "$G" "$T/base.yaml" "$@" --run-dir "$V" --resume auto
    CMD="$G $T/base.yaml $* --run-dir $V --resume auto"
    if [ "$RC" -ne 0 ]; then fail "ckpt.resume_changed_$n" "exit $RC, expected 0"; detail
    elif ! grep -qF "resuming from $V/checkpoints/$(ckname 20) at step 20" "$ERR"; then
        fail "ckpt.resume_changed_$n" "did not say 'resuming from .../$(ckname 20) at step 20'"; detail
    elif "$PY" "$CAMP" compat "${REF:-$T/tmpl}" "$V" >"$T/cmp.out" 2>&1; then
        pass "ckpt.resume_changed_$n" "$*: $(tail -n 1 "$T/cmp.out")"
    else fail "ckpt.resume_changed_$n" "$* resumed, but differs from the uninterrupted run: $(tail -n 1 "$T/cmp.out" | cut -c1-300)"; fi
}
benign log_every --set log.every_steps=5
benign checkpoint_every --set checkpoint.every_steps=7 --set checkpoint.keep=2
benign eval_every --set eval.every_steps=20
benign workers_prefetch --set data.workers=1 --set data.prefetch=2
benign tensorboard_off --set log.tensorboard=false
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    skip ckpt.resume_changed_device "a GPU is present: device auto would run the rest on it (not bit-exact with the CPU)"
else
    benign device --set device=auto
fi
crun 120 "$G" "$T/base.yaml" --set train.steps=60 "${THREADS[@]}" --run-dir "$T/tmpl60" --quiet
[ "$RC" -eq 0 ] || fail fixtures "the 60-step run failed (exit $RC): $(said)"
REF=$T/tmpl60 benign longer_steps --set train.steps=60

# the run record (root attributes) under a checksum (issue 23.1), and --resume auto past any
# file it rejects (23.2): a flipped bit in the newest checkpoint's record is a damaged file,
# skipped with a line for the one before it; the end is the uninterrupted run. --resume PATH
# of it is exit 6 naming the record, nothing changed.
record_case() {  # NAME ATTR BIT
    victim "r_$1"
    flip_attr "$V/checkpoints/$(ckname 20)" "$2" "$3" || { fail "ckpt.record_$1" "cannot flip $2"; return; }
    kase "ckpt.record_$1_path" 6 "$V" "$V/checkpoints/$(ckname 20): the run record" "fails its crc32c" -- \
        "$G" "$T/base.yaml" --run-dir "$V" --resume "$V/checkpoints/$(ckname 20)" --quiet
    crun 120 "$G" "$T/base.yaml" --run-dir "$V" --resume auto
    CMD="$G $T/base.yaml --run-dir $V --resume auto  (bit $3 of $2 flipped in $(ckname 20))"
    if [ "$RC" -ne 0 ]; then fail "ckpt.record_$1_auto" "exit $RC, expected 0"; detail
    elif ! grep -qF "skipping $V/checkpoints/$(ckname 20): $V/checkpoints/$(ckname 20): the run record" "$ERR" ||
         ! grep -qF "resuming from $V/checkpoints/$(ckname 10) at step 10" "$ERR"; then
        fail "ckpt.record_$1_auto" "did not skip $(ckname 20) for $(ckname 10)"; detail
    elif "$PY" "$CAMP" compat "$T/tmpl" "$V" >"$T/cmp.out" 2>&1; then
        pass "ckpt.record_$1_auto" "skipped, resumed from step 10: $(tail -n 1 "$T/cmp.out")"
    else fail "ckpt.record_$1_auto" "differs from the uninterrupted run: $(tail -n 1 "$T/cmp.out" | cut -c1-300)"; fi
}
record_case best_acc best_val_accuracy 62   # 0.7 -> ~1e308: summarize would rank the run first
record_case step step 2                     # 20 -> 16
record_case loss_scale loss_scale 52
record_case rng rng 3
echo "checkpoints: $((SECONDS - T0)) s"

# ================================================================ a console reader that goes away
# `gpurun JOB | head -1` (issue 23.6): SIGPIPE killed the run (exit 141, no checkpoint, no
# summary); it trains on, its console writes failing unread, and the run directory has it all
crun 120 bash -c "'$G' '$T/base.yaml' --run-dir '$T/rd_pipe' | head -n 1 >/dev/null; exit \${PIPESTATUS[0]}"
if [ "$RC" -ne 0 ]; then fail io.stdout_reader_gone "gpurun exit $RC behind | head -n 1, expected 0"; detail
elif ! grep -qF '"status":"finished"' "$T/rd_pipe/summary.json" 2>/dev/null ||
     [ "$(grep -c '"kind":"train"' "$T/rd_pipe/metrics.jsonl")" -ne 40 ] || [ ! -s "$T/rd_pipe/weights.h5" ]; then
    fail io.stdout_reader_gone "summary.json not finished, or not 40 train lines, or no weights.h5"; detail
else pass io.stdout_reader_gone "| head -n 1: exit 0, 40 metrics lines, finished, weights.h5"; fi

# ================================================================ storage: exit 6 naming the path
# read-only run directory: chmod (as root that does not stop writes, so the run is made as user
# nobody; else the directory and its files are made immutable with chattr)
victim ro
chmod -R a-w "$V"
ro=()
if [ "$(id -u)" -ne 0 ]; then ro=(env)
elif setpriv --reuid 65534 --regid 65534 --clear-groups test -r "$T/base.yaml" -a -x "$G" -a -r "$V/metrics.jsonl" 2>/dev/null; then
    ro=(setpriv --reuid 65534 --regid 65534 --clear-groups)
elif chattr -R +i "$V" 2>/dev/null; then ro=(env)
fi
if [ ${#ro[@]} -eq 0 ]; then
    skip storage.readonly_rundir "running as root, and neither setpriv to nobody nor chattr +i works here"
else
    kase storage.readonly_rundir 6 "$V" "$V" -- "${ro[@]}" "$G" "$T/base.yaml" --run-dir "$V" --resume auto --quiet
fi
chattr -R -i "$V" 2>/dev/null
chmod -R u+w "$V"
# metrics.jsonl -> /dev/full: reading it never ends, writing it fails (it spun at 100% CPU)
victim full
ln -sf /dev/full "$V/metrics.jsonl"
kase storage.metrics_dev_full 6 "$V" "$V/metrics.jsonl" -- "$G" "$T/base.yaml" --run-dir "$V" --resume auto --quiet
# config.yaml.tmp is a directory (not empty): the resolved spec cannot be written (was exit 2)
victim cfgtmp
mkdir -p "$V/config.yaml.tmp/keep"
kase storage.config_tmp_is_dir 6 "$V" "$V/config.yaml.tmp" -- "$G" "$T/base.yaml" --run-dir "$V" --resume auto --quiet
echo "storage: $((SECONDS - T0)) s"

# ================================================================ two writers
longjob long
crun 300 "$G" "$T/long.yaml" --run-dir "$T/long.straight" --quiet --threads 1
[ "$RC" -eq 0 ] || { fail fixtures "the uninterrupted long run failed (exit $RC): $(said)"; camp_done; }
echo "long run ($LONG_STEPS steps): $((SECONDS - T0)) s"

# A runs; once it logged step 5 it is paused (SIGSTOP: it holds the directory, whatever the
# machine's speed), B starts on the same directory: B must exit 6 at once naming A (pid, host)
# and change nothing; then A goes on and ends exactly as the uninterrupted run
D=$T/two
"$G" "$T/long.yaml" --run-dir "$D" --resume auto --quiet --threads 1 >"$T/a.out" 2>"$T/a.err" &
apid=$!
waitstep $apid "$D/metrics.jsonl" 5
kill -STOP $apid 2>/dev/null
i=0
while [ "$(awk '{print $3}' /proc/$apid/stat 2>/dev/null)" = R ] && [ $i -lt 100 ]; do sleep 0.01; i=$((i + 1)); done
if [ "$(awk '{print $3}' /proc/$apid/stat 2>/dev/null)" != T ]; then
    fail lock.second_writer "the first run was not running at step 5 (ended? $(head -n 2 "$T/a.err"))"
else
    kase lock.second_writer 6 "$D" "$D" "re:(^|[^0-9])$apid([^0-9]|$)" "$(hostname)" -- \
        "$G" "$T/long.yaml" --run-dir "$D" --resume auto --quiet --threads 1
    kill -CONT $apid
fi
reap $apid 120
CMD="$G $T/long.yaml --run-dir $D --resume auto (paused while the intruder ran)"
if [ "$RC" -ne 0 ]; then ERR=$T/a.err; fail lock.first_writer_unharmed "the first run exited $RC"; detail; ERR=$T/last.err
elif "$PY" "$H" same "$T/long.straight" "$D" >"$T/cmp.out" 2>&1; then
    pass lock.first_writer_unharmed "exit 0, = the run without intruder: $(tail -n 1 "$T/cmp.out")"
else fail lock.first_writer_unharmed "differs from the run without intruder: $(tail -n 3 "$T/cmp.out" | tr '\n' ' ' | cut -c1-300)"; fi

# SIGKILL after a committed checkpoint: the kernel drops the lock, the next start resumes
D=$T/killed
"$G" "$T/long.yaml" --run-dir "$D" --resume auto --quiet --threads 1 >"$T/k.out" 2>"$T/k.err" &
kpid=$!
waitstep $kpid "$D/metrics.jsonl" 700
kill -KILL $kpid 2>/dev/null
{ wait $kpid; } 2>/dev/null
n=$("$PY" "$H" committed "$D/checkpoints" 2>/dev/null)
if [ "${n:-0}" -lt 100 ]; then
    fail lock.after_sigkill "no committed checkpoint when killed at step $(laststep "$D/metrics.jsonl") (newest: ${n:-none})"
else
    crun 120 "$G" "$T/long.yaml" --run-dir "$D" --resume auto --threads 1
    CMD="$G $T/long.yaml --run-dir $D --resume auto (after a SIGKILL at step ~700)"
    if [ "$RC" -ne 0 ]; then fail lock.after_sigkill "the start after the SIGKILL exited $RC"; detail
    elif ! grep -qF "resuming from $D/checkpoints/$(ckname "$n") at step $n" "$ERR"; then
        fail lock.after_sigkill "did not resume from $(ckname "$n")"; detail
    elif "$PY" "$H" same "$T/long.straight" "$D" --last >"$T/cmp.out" 2>&1; then
        pass lock.after_sigkill "resumed from step $n, = the uninterrupted run"
    else fail lock.after_sigkill "differs from the uninterrupted run: $(tail -n 3 "$T/cmp.out" | tr '\n' ' ' | cut -c1-300)"; fi
fi
echo "lock: $((SECONDS - T0)) s"

# ================================================================ signals
# SIGTERM at step >= 300 (exit 75 naming its checkpoint), SIGKILL at step >= 1300, then to the end
D=$T/mix
env --default-signal=INT "$G" "$T/long.yaml" --run-dir "$D" --resume auto --quiet --threads 1 >"$T/m.out" 2>"$T/m.err" &
pid=$!
waitstep $pid "$D/metrics.jsonl" 300
kill -TERM $pid 2>/dev/null
reap $pid 30
s=$(sed -n 's/.*stopped by SIGTERM at step \([0-9]*\); checkpoint .* committed.*/\1/p' "$T/m.err" | head -n 1)
why=""
[ "$RC" -eq 75 ] || why="SIGTERM: exit $RC, expected 75 ($(head -n 1 "$T/m.err"))"
[ -n "$s" ] || why="${why:+$why; }no 'stopped by SIGTERM at step N; checkpoint ... committed' line"
"$G" "$T/long.yaml" --run-dir "$D" --resume auto --threads 1 >"$T/m.out" 2>"$T/m.err" &
pid=$!
waitstep $pid "$D/metrics.jsonl" 1300
kill -KILL $pid 2>/dev/null
{ wait $pid; } 2>/dev/null
rc2=$?
[ "$rc2" -eq 137 ] || why="${why:+$why; }SIGKILL: exit $rc2, expected 137"
[ -n "$s" ] && ! grep -qF "resuming from $D/checkpoints/$(ckname "$s") at step $s" "$T/m.err" &&
    why="${why:+$why; }the start after SIGTERM did not resume from step $s"
crun 120 "$G" "$T/long.yaml" --run-dir "$D" --resume auto --threads 1
[ "$RC" -eq 0 ] || why="${why:+$why; }the last start exited $RC: $(said)"
if ! "$PY" "$H" same "$T/long.straight" "$D" --last >"$T/cmp.out" 2>&1; then
    why="${why:+$why; }differs from the uninterrupted run: $(tail -n 3 "$T/cmp.out" | tr '\n' ' ' | cut -c1-300)"
fi
if [ -z "$why" ]; then pass signals.term_kill_resume "SIGTERM at step $s (75), SIGKILL at ~1300 (137), resumed: = the uninterrupted run"
else fail signals.term_kill_resume "$why"; fi

# SIGTERM during a compile that takes over 3 s (64,000 layers by nested blocks; a model within
# the layer cap, if it is below 64,000 or compiles in under 3 s the case is skipped). Whether the
# signal is taken mid-compile is told by time measured in this run, not by a fixed limit: a
# SIGTERM 1 s in must end the run in less than half of what the whole compile takes unsignalled
# (P >= 3 s; one that waited for the compile to end would take P - 1 s); it exits 75 and removes
# the run directory it made only to lock it (it left it holding .lock)
sed 's/repeat: 1000/repeat: 40/' "$T/nest.yaml" >"$T/nest40.yaml"
crun 120 "$G" plan "$T/nest40.yaml"
probe=$WALL probe_cs=$WALL_CS
if [ "$RC" -ne 0 ]; then
    skip signals.term_during_compile "the 64,000-layer model is refused or too slow to plan (exit $RC): $(said)"
elif [ "$probe_cs" -lt 300 ]; then
    skip signals.term_during_compile "64,000 layers compile in $probe s: too quick to signal in the middle"
else
    "$G" "$T/nest40.yaml" --run-dir "$T/rd_compile" --quiet >"$T/c.out" 2>"$T/c.err" &
    pid=$!
    sleep 1
    kill -TERM $pid 2>/dev/null
    reap $pid 120
    CMD="$G $T/nest40.yaml --run-dir $T/rd_compile (SIGTERM 1 s into its compile)"
    ERR=$T/c.err
    if [ $((2 * WALL_CS)) -ge "$probe_cs" ]; then
        fail signals.term_during_compile "ended $WALL s after the SIGTERM, exit $RC: not mid-compile (the whole plan takes $probe s)"; detail
    elif [ "$RC" -ne 75 ]; then fail signals.term_during_compile "exit $RC (75 expected)"; detail
    elif [ -e "$T/rd_compile" ]; then
        fail signals.term_during_compile "left $T/rd_compile ($(ls -A "$T/rd_compile" | tr '\n' ' ')): a run stopped in set-up removes the directory it made"
    else pass signals.term_during_compile "exit $RC, $WALL s after the SIGTERM (the whole plan takes $probe s)"; fi
    ERR=$T/last.err
fi
echo "signals: $((SECONDS - T0)) s"

echo "e2e_campaign: $((SECONDS - T0)) s"
camp_done
