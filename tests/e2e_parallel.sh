#!/usr/bin/env bash
# e2e_parallel.sh — data parallelism across processes, launched as users
# launch it: `mpirun -np 2 --oversubscribe gpurun job.yaml` (Open MPI; as root with
# OMPI_ALLOW_RUN_AS_ROOT). An MLP without batchnorm, SGD with momentum, global batch 128:
#
#  1. equivalence: 2 processes x micro-batch 64, and 2 x 32 with two micro-batches each, give
#     the per-step losses and final weights of 1 process with batch 128 within 1e-5 relative,
#     with the gradients summed in buckets during backward (one, or two of 0.001 MiB) or in one
#     all-reduce after it (parallel.bucket_mb 0)
#     (the same samples per step: the loader's rank/world split; gradients summed over ranks);
#     rank 0 alone writes the run directory, and its start line says "x 2 processes";
#     with batchnorm, parallel.sync_batchnorm makes it so too (fp32 NCHW within 1e-5; bf16
#     channels-last within 1e-4 over the first steps), and per-rank statistics do not; the
#     evaluation, sharded over the ranks, is that of rank 0's saved model (gpurun eval);
#  2. errors (exit 2, naming the key): parallel.data 2 without a launcher; a global batch that
#     2 x micro_batch does not divide, or 2 processes do not (refused by each rank before MPI
#     starts, none stopped by a signal); parallel.backend none under mpirun;
#  3. checkpoints across world sizes: a 2-process run's step-10 checkpoint resumed by 1
#     process (micro-batch 64, two per step), and a 1-process one resumed by 2, continue
#     with the uninterrupted run's losses within 1e-5;
#  4. SIGTERM to one rank of two: both exit 75 at the same step, its checkpoint committed;
#  5. SIGKILL to one rank: the launcher ends the job (no hang, non-zero exit within 60 s)
#     and every committed checkpoint verifies; a rank that stops answering (SIGSTOP) makes
#     the other's collective time out (parallel.timeout_s): it exits 7 naming the collective,
#     and rank 0's summary.json says failed (7), as summarize does; a rank stopped before it
#     starts makes rank 0 exit 7 from MPI_Init naming that phase, leaving no run directory;
#     SIGTERM to a rank waiting in MPI_Init is exit 75 with its line.
#
#   bash tests/e2e_parallel.sh GPURUN_BINARY SOURCE_DIR TMPDIR
. "$(dirname "$0")/e2e_lib.bash" "$@"
e2e_need_py h5py numpy
e2e_need_mpirun
MPI2=("${MPI[@]}" 2)
PC=$SRC/tests/parallel_check.py
RC_PY=$SRC/tests/resume_check.py

expect 0 -- "$G" data synthetic "$T/syn.h5" --n 4000 --shape 1,12,12 --classes 10 --test 500 --seed 5
cat >"$T/job.yaml" <<EOF
name: dp
seed: 3
device: cpu
data:
  train: {path: $T/syn.h5, group: /train}
  val: {path: $T/syn.h5, group: /test}
model:
  layers: [flatten, {dense: {units: 64}}, relu, {dense: {units: 10}}]
train:
  batch_size: 128
  steps: 20
  epochs: 5
  optimizer: {type: sgd, lr: 0.05, momentum: 0.9}
eval: {every_steps: 20}
log: {every_steps: 1, tensorboard: false}
checkpoint: {every_steps: 10}
EOF
J=$T/job.yaml

# the build may lack MPI: then a launched run says so, and the rest cannot run here
run "${MPI2[@]}" "$G" "$J" --run-dir "$T/probe" --quiet --threads 1 --set train.steps=1
if grep -qF "has no MPI" "$ERR"; then
    echo "SKIP: this build of gpurun has no MPI (libopenmpi-dev was missing when it was built)"
    exit 77
fi

# ---------------------------------------------------------------- 1. equivalence
expect 0 -- "$G" "$J" --run-dir "$T/one" --quiet --threads 1
expect_ok "batch 128 = 1 x 64 micro-batches x 2 processes" -- \
    "${MPI2[@]}" "$G" "$J" --run-dir "$T/two" --threads 1 --set train.micro_batch=64
expect 0 -- "${MPI2[@]}" "$G" "$J" --run-dir "$T/two_acc" --quiet --threads 1 --set train.micro_batch=32
# the gradient sums in small buckets started during backward (0.001 MiB: 262 floats, so the
# second layer's 650 make one and the first layer's 9,280 another), and in one all-reduce
# after it (bucket_mb 0)
expect 0 -- "${MPI2[@]}" "$G" "$J" --run-dir "$T/two_b" --quiet --threads 1 --set train.micro_batch=32 \
    --set parallel.bucket_mb=0.001
expect 0 -- "${MPI2[@]}" "$G" "$J" --run-dir "$T/two_sync" --quiet --threads 1 --set parallel.bucket_mb=0
check "summary.json: grad_buckets 1 by default, 2 of 0.001 MiB, 0 for bucket_mb 0" "$PY" -c "
import json, sys
n = [json.load(open(sys.argv[1] + '/' + r + '/summary.json'))['grad_buckets'] for r in ('two', 'two_b', 'two_sync')]
assert n == [1, 2, 0], n" "$T"
for r in two two_acc two_b two_sync; do
    check "$r: losses of 1 process within 1e-5" "$PY" "$PC" losses "$T/one" "$T/$r" 1e-5
    check "$r: final weights of 1 process within 1e-5" "$PY" "$PC" weights "$T/one" "$T/$r" 1e-5
done
check "rank 0 alone wrote the run directory: one config.yaml, one line per step" \
    bash -c "[ \$(grep -c '\"kind\":\"train\"' '$T/two/metrics.jsonl') -eq 20 ] && [ -f '$T/two/summary.json' ] \
             && [ -f '$T/two/weights.h5' ] && [ -f '$T/two/checkpoints/step-000000010.h5' ]"

# batchnorm: per-rank statistics by default (then 2 ranks are not 1 process), the global
# batch's with parallel.sync_batchnorm (each rank's sums summed over the ranks)
sed -e 's/^name: dp$/name: dpbn/' \
    -e 's/^  layers: .*/  layers: [{conv: {filters: 4, kernel: 3, padding: 1}}, batchnorm, relu, {maxpool: {kernel: 2}}, {conv: {filters: 8, kernel: 3, padding: 1}}, flatten, {dense: {units: 10}}]/' \
    "$J" >"$T/bn.yaml"
JB=$T/bn.yaml
expect 0 -- "$G" "$JB" --run-dir "$T/bn1" --quiet --threads 1
expect 0 -- "${MPI2[@]}" "$G" "$JB" --run-dir "$T/bn2" --quiet --threads 1 --set parallel.sync_batchnorm=true
expect 0 -- "${MPI2[@]}" "$G" "$JB" --run-dir "$T/bn2n" --quiet --threads 1
check "sync_batchnorm: 2 ranks' losses are 1 process's within 1e-5" "$PY" "$PC" losses "$T/bn1" "$T/bn2" 1e-5
check "sync_batchnorm: 2 ranks' weights and running statistics are 1 process's within 1e-5" \
    "$PY" "$PC" weights "$T/bn1" "$T/bn2" 1e-5
check "per-rank batchnorm statistics: the losses are not 1 process's (the check above has teeth)" \
    bash -c "! '$PY' '$PC' losses '$T/bn1' '$T/bn2n' 1e-5 >/dev/null 2>&1"
# sync_batchnorm with activation recomputation: the running statistics are updated once, by the
# recomputation, so the original and its copy shift by the same running mean: bit for bit the plain run
sed -e 's/^name: dpbn$/name: dpbnr/' \
    -e 's/^  layers: .*/  blocks: {cb: {args: {f: 4}, layers: [{conv: {filters: $f, kernel: 3, padding: 1}}, batchnorm, relu]}}\n  layers: [{cb: {f: 4}}, {maxpool: {kernel: 2}}, {cb: {f: 8}}, flatten, {dense: {units: 10}}]/' \
    "$JB" >"$T/bnr.yaml"
expect 0 -- "${MPI2[@]}" "$G" "$T/bnr.yaml" --run-dir "$T/bnr" --quiet --threads 1 --set parallel.sync_batchnorm=true
expect 0 -- "${MPI2[@]}" "$G" "$T/bnr.yaml" --run-dir "$T/bnrr" --quiet --threads 1 --set parallel.sync_batchnorm=true \
    --set train.recompute=blocks
check "sync_batchnorm + train.recompute: blocks: losses bit for bit the plain run's" "$PY" "$PC" losses "$T/bnr" "$T/bnrr" 0
check "sync_batchnorm + train.recompute: blocks: weights and running statistics bit for bit" \
    "$PY" "$PC" weights "$T/bnr" "$T/bnrr" 0
# the evaluation, sharded over the ranks, used rank 0's running statistics (the ones saved):
# `gpurun eval` of the last checkpoint gives the run's last eval line
expect 0 -- "$G" eval "$JB" --checkpoint "$T/bn2n/checkpoints/step-000000020.h5" --threads 1
cp "$OUT" "$T/bn2n.eval"
check "per-rank statistics: the sharded evaluation is rank 0's saved model's" "$PY" - "$T" <<'EOF'
import json, sys
T = sys.argv[1]
e = json.loads(open(T + "/bn2n.eval").read().strip().splitlines()[-1])
last = [json.loads(l) for l in open(T + "/bn2n/metrics.jsonl") if '"eval"' in l][-1]
assert last["step"] == e["step"] == 20, (last, e)
assert abs(last["loss"] - e["loss"]) <= 1e-6 * abs(e["loss"]) and abs(last["accuracy"] - e["accuracy"]) < 1e-9, (last, e)
EOF
# bf16 on a CPU with native bf16: the first block runs channels-last (kernels/cpu/bn_nhwc.c)
if "$G" plan "$JB" --set precision=bf16 2>&1 | grep -q "bf16 native"; then
    expect 0 -- "$G" "$JB" --run-dir "$T/bh1" --quiet --threads 1 --set precision=bf16
    expect 0 -- "${MPI2[@]}" "$G" "$JB" --run-dir "$T/bh2" --quiet --threads 1 --set precision=bf16 \
        --set parallel.sync_batchnorm=true
    expect 0 -- "${MPI2[@]}" "$G" "$JB" --run-dir "$T/bh2n" --quiet --threads 1 --set precision=bf16
    check "sync_batchnorm, bf16 channels-last: the first 2 steps' losses are 1 process's within 1e-4" \
        "$PY" "$PC" losses "$T/bh1" "$T/bh2" 1e-4 0 2
    check "bf16, per-rank statistics: not within 1e-4 (teeth)" \
        bash -c "! '$PY' '$PC' losses '$T/bh1' '$T/bh2n' 1e-4 0 2 >/dev/null 2>&1"
else
    e2e_skip "this CPU has no native bf16: sync_batchnorm on channels-last batchnorm was not run"
fi

# ---------------------------------------------------------------- 2. errors
# ranks that run another job (an MPMD launch, per-node copies of job.yaml or the data that
# differ): exit 2 on every rank, each differing rank naming its keys, rank 0 naming the ranks;
# it trained to exit 0 before with a model matching neither spec
MPMD=(env "ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" mpirun --oversubscribe)
expect 2 "rank 0 of 2: rank 1 of 2 runs another job than rank 0" \
    "rank 1 of 2: rank 1 runs another job than rank 0: train.optimizer.lr (rank 0 " -- \
    "${MPMD[@]}" -np 1 "$G" "$J" --run-dir "$T/mpmd" --quiet --threads 1 : \
    -np 1 "$G" "$J" --run-dir "$T/mpmd" --quiet --threads 1 --set train.optimizer.lr=0.2
check "ranks of different jobs: no run directory" test ! -e "$T/mpmd"
cp "$T/syn.h5" "$T/syn2.h5"
"$PY" -c 'import h5py, sys; d = h5py.File(sys.argv[1], "a")["/train/labels"]; v = d[...]; v[0] = (v[0] + 1) % 10; d[...] = v' \
    "$T/syn2.h5"
expect 2 "rank 1 runs another job than rank 0: data.train.path (rank 0 $T/syn.h5, rank 1 $T/syn2.h5)" \
    "the data differ: rank 0 has data.train: " -- \
    "${MPMD[@]}" -np 1 "$G" "$J" --run-dir "$T/mpmd2" --quiet --threads 1 : \
    -np 1 "$G" "$J" --run-dir "$T/mpmd2" --quiet --threads 1 --set data.train.path="$T/syn2.h5"
check "ranks of different data: the ranks' exit codes are 2, not an abort (mpirun says 'exit code: 2')" \
    bash -c "! grep -q MPI_ABORT '$ERR'"
expect 2 "parallel.data: 2 processes asked for" "without a launcher" "mpirun -np 2" -- \
    "$G" "$J" --run-dir "$T/e1" --quiet --set parallel.data=2
check "a refused launch leaves no run directory" test ! -e "$T/e1"
expect 2 "train.batch_size: 128 (the global batch) is not a multiple of train.micro_batch 128 x 2 processes" -- \
    "${MPI2[@]}" "$G" "$J" --run-dir "$T/e2" --quiet --set train.micro_batch=128
expect 2 "train.batch_size: 127 (the global batch) does not split evenly over the 2 processes" -- \
    "${MPI2[@]}" "$G" "$J" --run-dir "$T/e2b" --quiet --set train.batch_size=127
check "an uneven batch is refused by every rank before MPI starts: no rank is stopped by a signal" \
    bash -c "! grep -q -e MPI_ABORT -e SIGTERM '$ERR'"
expect 2 "parallel.backend: none, but Open MPI started 2 processes" -- \
    "${MPI2[@]}" "$G" "$J" --run-dir "$T/e3" --quiet --set parallel.backend=none

# ---------------------------------------------------------------- 3. checkpoints across world sizes
expect 0 -- "$G" "$J" --run-dir "$T/r2to1" --quiet --threads 1 --set train.micro_batch=64 \
    --resume "$T/two/checkpoints/step-000000010.h5"
check "2-process checkpoint resumed by 1 process: steps 11-20 within 1e-5" "$PY" "$PC" losses "$T/two" "$T/r2to1" 1e-5 10
expect 0 -- "$G" "$J" --run-dir "$T/r1" --quiet --threads 1 --set train.micro_batch=64
expect 0 -- "${MPI2[@]}" "$G" "$J" --run-dir "$T/r1to2" --quiet --threads 1 --set train.micro_batch=64 \
    --resume "$T/r1/checkpoints/step-000000010.h5"
check "1-process checkpoint resumed by 2 processes: steps 11-20 within 1e-5" "$PY" "$PC" losses "$T/r1" "$T/r1to2" 1e-5 10

# ---------------------------------------------------------------- 4, 5. a signal to one rank
# long_run NAME [ARG...]: a 2-process run of many steps in the background (e2e_bg: MP is
# mpirun's pid); hit_rank SIG: e2e_hit_rank
long_run() {
    local name=$1
    shift
    e2e_bg "$name" "${MPI2[@]}" "$G" "$J" --run-dir "$T/$name" --threads 1 --quiet --set train.micro_batch=64 \
        --set train.steps=200000 --set train.epochs=10000 --set eval.every_steps=0 --set eval.every_epochs=10000 \
        --set checkpoint.every_steps=50 "$@"
}
hit_rank() { e2e_hit_rank "$@"; }

long_run term
hit_rank TERM
check "SIGTERM to one rank: mpirun exits 75 (got $RC)" test "$RC" -eq 75
e2e_same_stop term

long_run kill
hit_rank KILL
check "SIGKILL to one rank: the job ends, non-zero, within 60 s (rc $RC after $WAITED s)" \
    bash -c "[ $RC -ne 0 ] && [ $WAITED -lt 60 ]"
check "SIGKILL to one rank: every committed checkpoint verifies" "$PY" "$RC_PY" committed "$T/kill/checkpoints"

# a rank that stops answering (SIGSTOP: alive, so the launcher sees nothing): the other's
# collective runs past parallel.timeout_s (lowered to 3 s), and it exits 7 naming itself and
# the collective; the launcher then ends the job
long_run stall --set parallel.timeout_s=3
hit_rank STOP
pkill -KILL -f "$T/stall" 2>/dev/null
check "a stalled rank: mpirun exits 7 within 3 + 10 s (rc $RC after $WAITED s)" \
    bash -c "[ $RC -eq 7 ] && [ $WAITED -le 13 ]"
check "a stalled rank: the other says which collective timed out" \
    grep -qE "rank 0 of 2: (the all-reduce of the step's gradients|agreeing on a stop signal) \(step [0-9]+\) did not finish within parallel.timeout_s = 3 s" "$T/stall.err"
check "a stalled rank: every committed checkpoint verifies" "$PY" "$RC_PY" committed "$T/stall/checkpoints"
# the watchdog's exit is one gpurun decides: rank 0's summary.json says so (it said nothing, and
# `summarize` read the run as interrupted)
check "a stalled rank: rank 0's summary.json says failed, exit 7, naming the collective" "$PY" - "$T/stall" <<'EOF'
import json, sys
s = json.load(open(sys.argv[1] + "/summary.json"))
assert s["status"] == "failed" and s["exit_code"] == 7, s
assert s["error"].startswith("rank 0 of 2: ") and "did not finish within parallel.timeout_s = 3 s" in s["error"], s
assert s["steps"] >= 1 and s["world_size"] == 2, s
EOF
expect 0 -- "$G" summarize "$T/stall"
check "a stalled rank: summarize shows failed (7)" grep -qF "failed (7)" "$OUT"

# ---------------------------------------------------------------- 5b. a rank stuck at start
# late.sh runs each rank's command; rank 1 (OMPI_COMM_WORLD_RANK) first stops itself (LATE=stop:
# alive, so the launcher sees nothing) or sleeps (LATE=sleep), and rank 0 waits for it inside
# MPI_Init's exchange (Open MPI's modex): that wait was unbounded (seen for 15 minutes)
cat >"$T/late.sh" <<'EOF'
#!/usr/bin/env bash
if [ "${OMPI_COMM_WORLD_RANK:-0}" = 1 ]; then
    if [ "$LATE" = stop ]; then kill -STOP $$; else sleep 120; fi
fi
exec "$@"
EOF
chmod +x "$T/late.sh"
# late_run NAME LATE [ARG...]: the 2-rank job under late.sh in the background (MP: mpirun's
# pid), killed after 60 s (a hang)
late_run() {
    local name=$1 late=$2
    shift 2
    LATE=$late "${MPI2[@]}" "$T/late.sh" "$G" "$J" --run-dir "$T/$name" --threads 1 --quiet "$@" \
        >"$T/$name.out" 2>"$T/$name.err" &
    MP=$!
    e2e_guard 60 $MP
    T_LATE=$SECONDS
}
# late_end NAME: waits for mpirun; RC, WAITED (seconds since late_run); then every process of
# the run that is left (the stopped rank; all of them after a hang) is killed and woken
late_end() {
    wait $MP
    RC=$?
    WAITED=$((SECONDS - T_LATE))
    e2e_unguard
    local p
    for p in $(pgrep -f "$T/$1( |\$)"); do kill -KILL "$p"; kill -CONT "$p"; done 2>/dev/null
}
late_run late_stop stop --set parallel.timeout_s=3
late_end late_stop
check "a rank stopped before it starts: rank 0 exits 7 within 3 + 10 s (rc $RC after $WAITED s)" \
    bash -c "[ $RC -eq 7 ] && [ $WAITED -le 13 ]"
check "a rank stopped before it starts: rank 0 names the phase" grep -qF "gpurun: rank 0 of 2: MPI initialisation \
did not finish within parallel.timeout_s = 3 s: another rank is gone or stuck; exiting" "$T/late_stop.err"
check "a rank stopped before it starts: no run directory" test ! -e "$T/late_stop"
# SIGTERM to rank 0 while it waits in MPI_Init (rank 1 asleep): exit 75 with its line, as at any
# point before the run directory is written (it was the default action's 143). Rank 0 is in
# MPI_Init once Open MPI's components (mca_*.so) are loaded
late_run late_term sleep --set parallel.timeout_s=60
R0=
for _ in $(seq 300); do
    R0=$(pgrep -P $MP -x gpurun)
    [ -n "$R0" ] && grep -q '/mca_' "/proc/$R0/maps" 2>/dev/null && break
    sleep 0.1
done
sleep 1
[ -n "$R0" ] && kill -TERM "$R0"
late_end late_term
check "SIGTERM to a rank waiting in MPI_Init: exit 75 (rc $RC after $WAITED s)" test "$RC" -eq 75
check "SIGTERM to a rank waiting in MPI_Init: its line" grep -qF "gpurun: stopped by SIGTERM during set-up (start, \
MPI, compile, data, device), before the run directory was written" "$T/late_term.err"
check "SIGTERM to a rank waiting in MPI_Init: no run directory" test ! -e "$T/late_term"

# ---------------------------------------------------------------- 6. gpurun launch: the run's exit code
# mpirun exits 1 when a SIGTERM sent to it stopped the ranks at a checkpoint (they exit 75):
# `gpurun launch` passes the signal on and exits with the run's own code, from summary.json
LENV=(env "ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0")
expect 0 -- "${LENV[@]}" "$G" launch -n 2 "$J" --run-dir "$T/launch_ok" --quiet --threads 1 --set train.micro_batch=64
check "launch -n 2: a finished 2-process run" grep -q '"status":"finished".*"world_size":2' "$T/launch_ok/summary.json"
"${LENV[@]}" "$G" launch -n 2 "$J" --run-dir "$T/launch_term" --threads 1 --quiet --set train.micro_batch=64 \
    --set train.steps=200000 --set train.epochs=10000 --set eval.every_steps=0 --set eval.every_epochs=10000 \
    --set checkpoint.every_steps=50 >"$T/launch_term.out" 2>"$T/launch_term.err" &
LP=$!
for _ in $(seq 600); do step_ge "$T/launch_term/metrics.jsonl" 5 && break; sleep 0.1; done
kill -TERM $LP
wait $LP
RC=$?
check "SIGTERM to gpurun launch: exit 75 (got $RC)" test "$RC" -eq 75
check "SIGTERM to gpurun launch: summary.json says stopped, 75" \
    grep -q '"status":"stopped","exit_code":75' "$T/launch_term/summary.json"
LSTOP=$(sed -n 's/.*"steps":\([0-9]*\).*/\1/p' "$T/launch_term/summary.json")
expect 0 "resuming from" -- "${LENV[@]}" "$G" launch -n 2 "$J" --run-dir "$T/launch_term" --resume auto --threads 1 \
    --set train.micro_batch=64 --set train.steps=$((LSTOP + 20)) --set train.epochs=10000 --set eval.every_steps=0 \
    --set eval.every_epochs=10000 --set checkpoint.every_steps=50
# a checkpoint that takes seconds to write (GPURUN_SAVE_DELAY_MS: a large model's): Open MPI's
# mpirun SIGKILLs the ranks 1 s after passing a SIGTERM on (odls_base_sigkill_timeout), which
# cut the stop checkpoint off; launch gives them checkpoint.signal_deadline_s + 5 s
slow_stop() {  # NAME LAUNCHER...: a long run under LAUNCHER with 3-second saves, SIGTERM at step 5
    "${LENV[@]}" GPURUN_SAVE_DELAY_MS=3000 "${@:2}" "$J" --run-dir "$T/$1" --threads 1 --quiet \
        --set train.micro_batch=64 --set train.steps=200000 --set train.epochs=10000 --set eval.every_steps=0 \
        --set eval.every_epochs=10000 >"$T/$1.out" 2>"$T/$1.err" &
    local p=$!
    for _ in $(seq 600); do step_ge "$T/$1/metrics.jsonl" 5 && break; sleep 0.1; done
    kill -TERM $p
    wait $p
    RC=$?
}
slow_stop launch_slow "$G" launch -n 2
check "3-second save, SIGTERM to gpurun launch: exit 75 (got $RC), a committed checkpoint, summary stopped" \
    bash -c "[ $RC -eq 75 ] && ls '$T/launch_slow/checkpoints/'step-*.h5 >/dev/null 2>&1 &&
             grep -q '\"status\":\"stopped\",\"exit_code\":75' '$T/launch_slow/summary.json'"
if [ -z "${OMPI_MCA_odls_base_sigkill_timeout:-}" ]; then
    slow_stop mpirun_slow mpirun -np 2 --oversubscribe "$G" run
    check "3-second save, SIGTERM to plain mpirun: cut off (no committed checkpoint; exit $RC): what launch avoids" \
        bash -c "! ls '$T/mpirun_slow/checkpoints/'step-*.h5 >/dev/null 2>&1"
fi
expect 3 "data.train.path: $T/nosuch.h5: no such file" -- \
    "${LENV[@]}" "$G" launch -n 2 "$J" --run-dir "$T/launch_bad" --threads 1 --set data.train.path="$T/nosuch.h5"
expect 2 "launch: -n N (the number of processes) is required" -- "$G" launch "$J"
expect 2 "launch: -n: expected a process count, got '0'" -- "$G" launch -n 0 "$J"

e2e_done
