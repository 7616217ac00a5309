# e2e_lib.bash — what the end-to-end scripts (tests/e2e_*.sh) share. Each
# starts with
#     . "$(dirname "$0")/e2e_lib.bash" "$@"
# and ends with `e2e_done`. Taken from the script's arguments
# GPURUN_BINARY SOURCE_DIR TMPDIR: G (the binary, absolute), SRC, and T, a
# fresh scratch directory that is also the working directory (runs without
# --run-dir must not touch the source tree). PY is Debian's python3 (h5py,
# numpy, torch).
#   ok / bad MSG        count a check
#   run CMD...          CMD with a time limit (E2E_TIMEOUT, 120 s): stdout in
#                       $OUT, stderr in $ERR, status in $RC
#   show                the last command, its status and stderr (after bad)
#   check DESC CMD...   passes when CMD succeeds
#   expect CODE TEXT... -- CMD...    exit code CODE, every TEXT (fixed
#                       strings) in stderr, no HDF5 error stack (expect_fail
#                       is the same)
#   expect_ok TEXT... -- CMD...      exit 0, every TEXT in stdout
#   e2e_done            prints "N passed, M failed", exits non-zero on M > 0,
#                       77 (ctest's SKIP_RETURN_CODE) when nothing failed but
#                       a part was skipped
# What a test needs and may not find here (a missing tool or dataset makes it
# report skipped, with a "SKIP: <reason>" line, never passed nor failed):
#   e2e_lacks MODULE... the reason $PY cannot serve (it is not there, or a
#                       MODULE is not installed); empty when it can. A module
#                       that is there but fails to import is no reason: the
#                       check using it fails
#   e2e_have_fmnist     the dataset-fashion-mnist package's files are in $FMNIST
#   e2e_need_py MODULE... / e2e_need_fmnist: the whole script is skipped
#                       (exit 77 at once) without them
#   e2e_skip WHY        a part that cannot run here: says "SKIP: WHY"
set -u

if [ $# -ne 3 ]; then
    echo "usage: bash $0 GPURUN_BINARY SOURCE_DIR TMPDIR" >&2
    exit 2
fi
G=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
SRC=$(cd "$2" && pwd)
T=$3
PY=/usr/bin/python3
# --threads for runs compared bit for bit with another run: by default a fresh run takes fewer
# threads when other work keeps cores busy (a parallel ctest), and the rounding follows the
# thread count (DESIGN 1.2). A resumed run takes its checkpoint's count by itself.
THREADS=(--threads "$(($(nproc) > 1 ? 2 : 1))")
rm -rf "$T"
mkdir -p "$T"
T=$(cd "$T" && pwd)
cd "$T" || exit 2

PASS=0
FAIL=0
OUT=$T/last.out
ERR=$T/last.err
RC=0
CMD=
T0=$SECONDS

ok()  { PASS=$((PASS + 1)); }
bad() { FAIL=$((FAIL + 1)); echo "FAIL: $*"; }

run() {
    timeout "${E2E_TIMEOUT:-120}" "$@" >"$OUT" 2>"$ERR"
    RC=$?
}

show() {
    echo "      command: $CMD"
    echo "      exit code: $RC"
    echo "      stderr: $(head -c 1200 "$ERR" | sed 's/^/        /' | sed '1s/^ *//')"
}

check() {
    local desc=$1; shift
    if "$@" >"$T/check.out" 2>&1; then ok; else bad "$desc"; sed 's/^/      /' "$T/check.out" | head -20; fi
}

expect() {
    local code=$1; shift
    local subs=() why="" s
    while [ $# -gt 0 ] && [ "$1" != "--" ]; do subs+=("$1"); shift; done
    shift
    CMD="$*"
    run "$@"
    [ "$RC" -eq "$code" ] || why="exit code $RC, expected $code"
    for s in "${subs[@]}"; do
        grep -qF -- "$s" "$ERR" || why="${why:+$why; }stderr lacks '$s'"
    done
    if grep -qF "HDF5-DIAG" "$ERR"; then why="${why:+$why; }HDF5 error stack printed"; fi
    if [ -z "$why" ]; then ok; else bad "$why"; show; fi
}
expect_fail() { expect "$@"; }

# laststep FILE : the step of FILE's last line (a metrics.jsonl), 0 when there is none
laststep() {
    local s
    s=$(tail -n 1 "$1" 2>/dev/null | grep -o '"step":[0-9]*')
    s=${s#*:}
    echo "${s:-0}"
}
# step_ge FILE K : FILE's last line is at step K or later
step_ge() { [ "$(laststep "$1")" -ge "$2" ]; }

# signal_when PID SIG TEST... : sends SIG to the background process PID once `TEST...` succeeds
# (or once PID has ended, or after some 20000 slices). PID runs in slices of about 2 ms and is
# stopped (SIGSTOP) while TEST runs, so a check of a fast run's log cannot fall behind the run,
# however loaded the machine: polling a free-running process on a busy CI machine overshot a
# 20-step target to step 64, and a second run ended before its target (step 94 of 100) was seen.
signal_when() {
    local pid=$1 sig=$2 i=0
    shift 2
    while kill -STOP "$pid" 2>/dev/null && ! "$@" && [ $i -lt 20000 ]; do
        kill -CONT "$pid" 2>/dev/null
        sleep 0.002
        i=$((i + 1))
    done
    kill -"$sig" "$pid" 2>/dev/null
    kill -CONT "$pid" 2>/dev/null
}

expect_ok() {
    local subs=() why="" s
    while [ $# -gt 0 ] && [ "$1" != "--" ]; do subs+=("$1"); shift; done
    shift
    CMD="$*"
    run "$@"
    [ "$RC" -eq 0 ] || why="exit code $RC, expected 0"
    for s in "${subs[@]}"; do
        grep -qF -- "$s" "$OUT" || why="${why:+$why; }stdout lacks '$s'"
    done
    if [ -z "$why" ]; then ok; else bad "$why"; show; fi
}

# A launched run in the background, and a signal to one of its ranks (e2e_parallel.sh,
# e2e_pipeline.sh, e2e_tensor.sh):
#   e2e_bg NAME CMD...    CMD in the background (MP: its pid; stdout and stderr in $T/NAME.out and
#                         $T/NAME.err), once $T/NAME/metrics.jsonl has a line and MP a gpurun child,
#                         and a second more
#   e2e_guard S PID       kills PID after S seconds (a hang); GUARD: that timer, which
#                         e2e_unguard calls off (its sleep with it)
#   e2e_hit_rank SIG      SIG to MP's last gpurun child (the launch's last rank), then waits for MP
#                         (killed after 60 s: a hang); RC: its exit status, WAITED: the seconds it took
e2e_bg() {
    local name=$1
    shift
    "$@" >"$T/$name.out" 2>"$T/$name.err" &
    MP=$!
    for _ in $(seq 600); do
        [ -s "$T/$name/metrics.jsonl" ] && [ -n "$(pgrep -P $MP gpurun)" ] && break
        sleep 0.1
    done
    sleep 1
}
e2e_guard() {
    ( trap 'kill $s 2>/dev/null; exit 0' TERM; sleep "$1" & s=$!; wait $s; kill -KILL "$2" ) >/dev/null 2>&1 &
    GUARD=$!
}
e2e_unguard() {
    kill $GUARD 2>/dev/null
    wait $GUARD 2>/dev/null
}
e2e_hit_rank() {
    kill "-$1" "$(pgrep -P $MP gpurun | tail -n 1)"
    local t0=$SECONDS
    e2e_guard 60 $MP
    wait $MP
    RC=$?
    WAITED=$((SECONDS - t0))
    e2e_unguard
}

# e2e_need_mpirun: the whole script is skipped (exit 77) without mpirun; else Open MPI may run as
# root and oversubscribe, and "${MPI[@]}" N CMD... launches N ranks. Under ASan (scripts/dev.sh's
# second pass) Open MPI's own allocations, still held at MPI_Finalize (some by components it has
# unloaded), read as leaks: the launched runs keep ASan's error checks but not LeakSanitizer's;
# the one-process runs keep both.
e2e_need_mpirun() {
    if ! command -v mpirun >/dev/null; then
        echo "SKIP: mpirun is not installed (openmpi-bin; scripts/dev.sh installs it)"
        exit 77
    fi
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
    MPI=(env "ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" mpirun --oversubscribe -np)
}
# e2e_text_h5 OUT WORDS: `gpurun data text` of 3000 lines of WORDS drawn at random (seeded)
e2e_text_h5() {
    "$PY" - "$T/text.txt" "$2" <<'EOF'
import random, sys
r = random.Random(3)
words = sys.argv[2].split()
with open(sys.argv[1], "w") as f:
    for _ in range(3000):
        f.write(" ".join(r.choice(words) for _ in range(r.randint(3, 12))) + ".\n")
EOF
    expect 0 -- "$G" data text "$1" --from "$T/text.txt"
}
# A small GPT's data and model sections (e2e_pipeline.sh, e2e_tensor.sh): 2 pre-norm blocks of
# width 32 on byte tokens of 16 positions, dropout after the attention's projection;
#   e2e_tiny_gpt TEXT_H5 HEADS HEAD   prints them; HEAD: the lm_head dense's extra attributes
#                                     ("" or ", tied: wte")
e2e_tiny_gpt() {
    cat <<EOF
data:
  train: {path: $1, group: /train}
  val: {path: $1, group: /val}
  seq_len: 16
model:
  inputs: [tokens]
  targets: [targets]
  blocks:
    h:
      layers:
        - {layernorm: {}, name: ln_1}
        - {dense: {units: 96}, name: c_attn}
        - {attention: {heads: $2}, name: attn}
        - {dense: {units: 32}, name: c_proj}
        - {dropout: {rate: 0.1}, name: drop}
        - {add: {}, input: [input, drop], name: res}
        - {layernorm: {}, name: ln_2}
        - {dense: {units: 64}, name: c_fc}
        - gelu_tanh
        - {dense: {units: 32}, name: mlp_proj}
        - {add: {}, input: [res, mlp_proj]}
  layers:
    - {embedding: {vocab: 256, dim: 32, init_std: 0.02}, name: wte}
    - {pos_embedding: {max_len: 16, init_std: 0.02}, name: wpe}
    - {h: {}, repeat: 2}
    - {layernorm: {}, name: ln_f}
    - {dense: {units: 256, bias: false$3}, name: lm_head}
EOF
}
# e2e_faults WHAT WAITS N CMD...: the faults of a run split over N processes (e2e_pipeline.sh,
# e2e_tensor.sh). CMD (the launch of a long run, given --run-dir DIR last by this) is started
# twice: SIGTERM to its last rank stops all at one step with one committed checkpoint (exit
# 75); SIGSTOP to it (parallel.timeout_s 3) makes rank 0 exit 7 within 13 s, its line
# matching WAITS (an extended regex: what it waited in) at a step, and rank 0's summary.json
# says exit 7. WHAT names the rank in the checks ("stage", "process of the group").
e2e_faults() {
    local what=$1 waits=$2 n=$3
    shift 3
    e2e_bg term "$@" --run-dir "$T/term"
    e2e_hit_rank TERM
    check "SIGTERM to one $what: mpirun exits 75 (got $RC)" test "$RC" -eq 75
    e2e_same_stop term "$n"
    e2e_bg stall "$@" --set parallel.timeout_s=3 --run-dir "$T/stall"
    e2e_hit_rank STOP
    pkill -KILL -f "$T/stall" 2>/dev/null
    check "a stalled $what: mpirun exits 7 within 3 + 10 s (rc $RC after $WAITED s)" \
        bash -c "[ $RC -eq 7 ] && [ $WAITED -le 13 ]"
    check "a stalled $what: the other names what it waited in, and the step" \
        grep -qE "rank 0 of $n: ($waits) \(step [0-9]+\) did not finish within parallel.timeout_s = 3 s" "$T/stall.err"
    check "a stalled $what: rank 0's summary.json says failed, exit 7" grep -q '"exit_code":7' "$T/stall/summary.json"
}
# e2e_same_stop NAME [N]: after e2e_hit_rank TERM on run $T/NAME of N ranks (2): all said they
# stopped at the same step, whose checkpoint is the last committed one (tests/resume_check.py)
e2e_same_stop() {
    check "all ${2:-2} ranks stopped at the same step with a committed checkpoint" bash -c "
    n=${2:-2}; a=
    for r in \$(seq 0 \$((n - 1))); do
        b=\$(sed -n \"s/.*rank \$r of \$n: stopped by SIGTERM at step \\([0-9]*\\); checkpoint.*committed.*/\\1/p\" '$T/$1.err')
        [ -n \"\$b\" ] && [ \"\${a:=\$b}\" = \"\$b\" ] || exit 1
    done
    [ \"\$('$PY' '$SRC/tests/resume_check.py' committed '$T/$1/checkpoints')\" = \"\$a\" ]"
}

e2e_done() {
    echo "$PASS passed, $FAIL failed"
    [ "$FAIL" -eq 0 ] || exit 1
    if [ -n "$SKIPPED" ]; then
        echo "SKIP: ${SKIPPED%; } (the checks above passed)"
        exit 77
    fi
    exit 0
}

FMNIST=/usr/share/datasets/fashion-mnist
SKIPPED=

e2e_lacks() {
    if [ ! -x "$PY" ]; then echo "$PY is not installed"; return; fi
    local m
    for m in "$@"; do
        "$PY" -c 'import importlib.util as u, sys; s = u.find_spec(sys.argv[1]); sys.exit(not (s and s.origin))' "$m" ||
            { echo "$PY cannot import $m (apt-get install python3-$m, as scripts/dev.sh does)"; return; }
    done
}

e2e_have_fmnist() {
    local f
    for f in train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte; do
        [ -f "$FMNIST/$f.gz" ] || return 1
    done
}
E2E_NO_FMNIST="$FMNIST is not installed (apt-get install dataset-fashion-mnist, as scripts/dev.sh does)"

e2e_need_py() {
    local why
    why=$(e2e_lacks "$@")
    if [ -n "$why" ]; then echo "SKIP: $why"; exit 77; fi
}

e2e_need_fmnist() {
    e2e_have_fmnist || { echo "SKIP: $E2E_NO_FMNIST"; exit 77; }
}

e2e_skip() {
    echo "SKIP: $*"
    SKIPPED="$SKIPPED$*; "
}
