# tests/campaign/lib.bash — what tests/e2e_campaign.sh and tests/campaign_slow.sh share (the
# bad-input and fault campaign). Sourced after tests/e2e_lib.bash, which gives G, SRC,
# T (scratch and working directory), PY, OUT, ERR, RC, CMD.
#
# Each case reports one line, `PASS name: why` / `FAIL name: why` / `SKIP name: why`; the script
# ends with `N passed, N failed, N skipped` (camp_done) and exits non-zero on a failure.
#   kase NAME CODE DIR [-T LIMIT] CHECK... -- CMD...
#       runs CMD (stdin /dev/null) under `timeout -k 2 LIMIT` (LIMIT: $CAMP_TIMEOUT, 20 s; 90 s
#       in sanitizer builds, tests/CMakeLists.txt: a hang
#       is a failure, never a stuck test; not a speed limit: a case asserts what happens, and its
#       time is printed, never compared); passes when it exits CODE, stderr holds every CHECK (a
#       fixed string, or re:ERE), no HDF5 error stack is printed, and the committed files under DIR (config.yaml, metrics.jsonl, summary.json,
#       weights.h5, checkpoints/step-*.h5, LATEST, events files; compared by sha256, symlinks by
#       target) are as they were before ("-": no such check)
#   crun LIMIT CMD...   CMD under the same timeout: $RC, $WALL (seconds, "1.23"), $WALL_CS
#   pass/fail/skip NAME WHY, detail (the last command, its exit code and stderr)
#   rx STRING           STRING escaped for grep -E
#   job NAME [SED]      $T/NAME.yaml, the tiny job below (line numbers are relied on)
#   longjob NAME [SED]  $T/NAME.yaml, the longer job of the lock and signal cases
#   victim NAME         $V: $T/v_NAME, a copy of the run $T/tmpl as a SIGKILL after step 25 leaves
#                       it (checkpoints step-10 and step-20, LATEST step-20, metrics lines 1..40
#                       of which 21..40 are dropped at the resume, no summary.json, no weights.h5)
CAMP=$SRC/tests/campaign/camp.py
H=$SRC/tests/resume_check.py
CT=${CAMP_TIMEOUT:-20}
NP=0 NF=0 NS=0
WALL=0 WALL_CS=0

pass() { NP=$((NP + 1)); echo "PASS $1${2:+: $2}"; }
fail() { NF=$((NF + 1)); echo "FAIL $1: $2"; }
skip() { NS=$((NS + 1)); echo "SKIP $1: $2"; }
detail() {
    echo "      command: $CMD"
    echo "      exit code $RC after ${WALL} s; stderr:"
    head -c 700 "$ERR" | head -n 6 | sed 's/^/      | /'
}
camp_done() {
    echo "$NP passed, $NF failed, $NS skipped"
    [ "$NF" -eq 0 ]
    exit $?
}
rx() { printf '%s' "$1" | sed 's/[]$*.^|()+?{}[]/\\&/g'; }
ckname() { printf 'step-%09d.h5' "$1"; }
elapsed_cs() { echo $((($(date +%s%N) - $1) / 10000000)); }
cs2s() { printf '%d.%02d' $(($1 / 100)) $(($1 % 100)); }
# gt A B: A > B for decimal numbers
gt() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a > b) }'; }

crun() {
    local lim=$1 t0
    shift
    t0=$(date +%s%N)
    timeout -k 2 "$lim" "$@" </dev/null >"$OUT" 2>"$ERR"
    RC=$?
    WALL_CS=$(elapsed_cs "$t0")
    WALL=$(cs2s "$WALL_CS")
}

# first line of the last stderr, shortened (the PASS lines show what was said)
said() { head -n 1 "$ERR" | cut -c1-150; }

kase() {
    local name=$1 code=$2 dir=$3 lim=$CT why="" s
    shift 3
    local subs=()
    while [ $# -gt 0 ] && [ "$1" != "--" ]; do
        case $1 in
        -T) lim=$2; shift 2 ;;
        *) subs+=("$1"); shift ;;
        esac
    done
    shift
    CMD="$*"
    if [ "$dir" != - ]; then "$PY" "$CAMP" snap "$dir" >"$T/snap.before" || { fail "$name" "cannot snapshot $dir"; return; }; fi
    crun "$lim" "$@"
    if { [ "$RC" -eq 124 ] || [ "$RC" -eq 137 ]; } && [ "$code" -ne "$RC" ]; then
        why="hung: stopped by the test's timeout after ${WALL} s (exit $RC)"
    elif [ "$RC" -ne "$code" ]; then
        why="exit $RC, expected $code"
    fi
    for s in "${subs[@]}"; do
        case $s in
        re:*) grep -qE -- "${s#re:}" "$ERR" || why="${why:+$why; }stderr lacks /${s#re:}/" ;;
        *) grep -qF -- "$s" "$ERR" || why="${why:+$why; }stderr lacks '$s'" ;;
        esac
    done
    if grep -qF "HDF5-DIAG" "$ERR"; then why="${why:+$why; }HDF5 error stack printed"; fi
    if [ "$dir" != - ]; then
        "$PY" "$CAMP" snap "$dir" >"$T/snap.after"
        if ! cmp -s "$T/snap.before" "$T/snap.after"; then
            why="${why:+$why; }committed files changed: $(diff "$T/snap.before" "$T/snap.after" | grep '^[<>]' |
                cut -c1-90 | head -n 4 | tr '\n' ' ')"
        fi
    fi
    if [ -z "$why" ]; then pass "$name" "exit $RC in $WALL s: $(said)"; else fail "$name" "$why"; detail; fi
}

# ---------------------------------------------------------------- fixtures
# s.h5: 512 + 64 samples of 1x8x8, 10 classes; l.h5: 2048 + 128 of 1x16x16 (gpurun data synthetic)
mkdata() {
    "$G" data synthetic "$T/s.h5" --n 512 --shape 1,8,8 --test 64 --seed 1 >/dev/null 2>&1 &&
        "$G" data synthetic "$T/l.h5" --n 2048 --shape 1,16,16 --test 128 --seed 2 >/dev/null 2>&1
}

job() {
    cat >"$T/$1.yaml" <<EOF
name: camp
seed: 3
device: cpu
data:
  train: {path: $T/s.h5, group: /train}
  val: {path: $T/s.h5, group: /test}
model:
  layers:
    - flatten
    - dense: {units: 32}
    - relu
    - dense: {units: 10}
train:
  batch_size: 16
  steps: 40
  optimizer: {type: sgd, lr: 0.05, momentum: 0.9}
checkpoint: {every_steps: 10, keep: 9}
eval: {every_steps: 10}
log: {every_steps: 1}
EOF
    if [ $# -gt 1 ]; then sed -i "$2" "$T/$1.yaml"; fi
}

LONG_STEPS=${CAMP_LONG_STEPS:-2000}
longjob() {
    cat >"$T/$1.yaml" <<EOF
name: long
seed: 9
device: cpu
data:
  train: {path: $T/l.h5, group: /train}
  val: {path: $T/l.h5, group: /test}
model:
  layers:
    - flatten
    - dense: {units: 1024}
    - relu
    - dropout: {rate: 0.1}
    - dense: {units: 10}
train:
  batch_size: 32
  steps: $LONG_STEPS
  optimizer: {type: sgd, lr: 0.02, momentum: 0.9, weight_decay: 0.0005}
  schedule: {type: cosine}
checkpoint: {every_steps: 100}
eval: {every_steps: 500}
log: {every_steps: 1}
EOF
    if [ $# -gt 1 ]; then sed -i "$2" "$T/$1.yaml"; fi
}

victim() {
    V=$T/v_$1
    rm -rf "$V"
    cp -a "$T/tmpl" "$V"
    rm -f "$V/summary.json" "$V/weights.h5" "$V/checkpoints/$(ckname 30)" "$V/checkpoints/$(ckname 40)"
    ckname 20 >"$V/checkpoints/LATEST"
}

# (laststep FILE: e2e_lib.bash)
# waitstep PID FILE K [TRIES]: until FILE's last line shows step >= K or PID ended (5 ms polls)
waitstep() {
    local i=0
    while kill -0 "$1" 2>/dev/null && [ "$(laststep "$2")" -lt "$3" ] && [ $i -lt "${4:-4000}" ]; do
        sleep 0.005
        i=$((i + 1))
    done
}
# reap PID LIMIT: waits up to LIMIT seconds for PID (a child), then SIGKILLs it; $RC, $WALL_CS
# from the call (the time it took to end)
reap() {
    local pid=$1 lim=$2 t0 n=0
    t0=$(date +%s%N)
    while kill -0 "$pid" 2>/dev/null && [ $n -lt $((lim * 100)) ]; do
        sleep 0.01
        n=$((n + 1))
    done
    kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null
    { wait "$pid"; } 2>/dev/null
    RC=$?
    WALL_CS=$(elapsed_cs "$t0")
    WALL=$(cs2s "$WALL_CS")
}

# flip_attr FILE ATTR BIT: flips one bit of a root attribute's stored value (numbers, arrays,
# fixed-length strings) in a checkpoint
flip_attr() {
    "$PY" - "$@" <<'EOF2'
import sys, h5py, numpy as np
path, name, bit = sys.argv[1], sys.argv[2], int(sys.argv[3])
with h5py.File(path, "a") as f:
    v = np.array(f.attrs[name])
    b = v.reshape(-1).view(np.uint8).copy()
    b[bit // 8] ^= np.uint8(1 << (bit % 8))
    f.attrs.modify(name, b.view(v.dtype).reshape(v.shape)[()])
EOF2
}

# camp_fixtures: the data, the base job, its template run ($T/tmpl: 40 steps, checkpoints every 10,
# all kept, eval every 10, a TensorBoard file) and a FIFO ($FIFO) both campaign scripts start from
camp_fixtures() {
    mkdata || { fail fixtures "gpurun data synthetic failed"; camp_done; }
    job base
    crun 120 "$G" "$T/base.yaml" "${THREADS[@]}" --run-dir "$T/tmpl" --quiet
    [ "$RC" -eq 0 ] || { fail fixtures "the template run failed (exit $RC): $(said)"; camp_done; }
    FIFO=$T/fifo
    mkfifo "$FIFO" || { fail fixtures "mkfifo"; camp_done; }
}
