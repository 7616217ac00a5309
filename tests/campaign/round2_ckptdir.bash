# tests/campaign/round2_ckptdir.bash — issue 30 item 1: a checkpoint directory belongs to one run
# (runner/ckptdir.h). Sourced after tests/e2e_lib.bash and tests/campaign/lib.bash, after
# camp_fixtures (it uses the base job and the data). Run A trains with checkpoint.dir $T/cx
# (checkpoints 10..40, its .owner naming $T/ca); every refusal must leave $T/cx's committed files
# (step-*.h5, LATEST, .owner) as they were (sha256), and make no run directory. The refusals
# failed before the fix (each exited 0, overwriting A's checkpoints and deleting older ones under
# keep):
#
#   ckptdir.fresh_foreign     a fresh run B (another run directory, no --resume) with A's
#                             checkpoint.dir: exit 6 naming the directory, A's files and A
#   ckptdir.resume_elsewhere  B resumed from a checkpoint elsewhere (--resume PATH) into A's
#                             directory: exit 6 the same way
#   ckptdir.no_record         a directory of committed checkpoints without an .owner (an earlier
#                             gpurun's): a fresh run is refused, saying there is no record
#   ckptdir.own_fresh         a run directory emptied of its run (config.yaml, metrics.jsonl,
#                             summary.json removed) but not of its checkpoints: a fresh start is
#                             refused, pointing at --resume auto
#   ckptdir.live_lock         a live run holds its checkpoint directory: a second run with another
#                             run directory and the same checkpoint.dir exits 6 at once naming it
#                             (pid, host), changing nothing
# and what must still work:
#   ckptdir.carry_on          a run whose run directory is gone (a spot instance's local disk)
#                             restarts with --resume auto into a new one: exit 0, resumed from A's
#                             step 40, says it carries the directory on, .owner names the new one
#   ckptdir.is_run_dir        checkpoint.dir = the run directory: one lock, exit 0

round2_ckptdir() {
    local X=$T/cx A=$T/ca
    job ckd 's/^checkpoint: {every_steps: 10, keep: 9}/checkpoint: {every_steps: 10, keep: 2}/'
    crun 120 "$G" "$T/ckd.yaml" "${THREADS[@]}" --run-dir "$A" --set "checkpoint.dir=$X" --quiet
    if [ "$RC" -ne 0 ] || [ ! -f "$X/$(ckname 40)" ] || [ ! -f "$X/.owner" ]; then
        fail ckptdir.fixture "run A with checkpoint.dir $X: exit $RC; $(ls -A "$X" 2>&1 | tr '\n' ' ')"
        detail
        return
    fi
    local RA
    RA=$(realpath "$A")
    local owned="re:^gpurun: $(rx "$X"): holds 2 committed checkpoints \($(ckname 40), $(ckname 30)\) of the run $(rx "$RA")"

    kase ckptdir.fresh_foreign 6 "$X" "$owned" "nothing was changed" "--run-dir $RA --resume auto" -- \
        "$G" "$T/ckd.yaml" "${THREADS[@]}" --run-dir "$T/cb" --set "checkpoint.dir=$X" --quiet
    [ -e "$T/cb" ] && fail ckptdir.fresh_foreign_no_dir "$T/cb was made by a refused run"

    kase ckptdir.resume_elsewhere 6 "$X" "$owned" -- \
        "$G" "$T/ckd.yaml" "${THREADS[@]}" --run-dir "$T/cb" --set "checkpoint.dir=$X" \
        --resume "$T/tmpl/checkpoints/$(ckname 20)" --quiet

    rm -rf "$T/cy" && cp -a "$X" "$T/cy" && rm -f "$T/cy/.owner" "$T/cy/.lock"
    kase ckptdir.no_record 6 "$T/cy" "re:^gpurun: $(rx "$T/cy"): holds 2 committed checkpoints" \
        "no .owner record" -- \
        "$G" "$T/ckd.yaml" "${THREADS[@]}" --run-dir "$T/cb" --set "checkpoint.dir=$T/cy" --quiet

    victim ckd_own
    rm -f "$V/config.yaml" "$V/metrics.jsonl"
    printf 'run %s\n' "$(realpath "$V")" >"$V/checkpoints/.owner" # the copy's own, as if it had trained
    kase ckptdir.own_fresh 6 "$V" "re:^gpurun: $(rx "$V/checkpoints"): holds 2 committed checkpoints \($(ckname 20), $(ckname 10)\) of an earlier run" \
        "--resume auto" -- "$G" "$T/base.yaml" "${THREADS[@]}" --run-dir "$V" --quiet

    # a live run on $T/cz (paused once it logged step 5, so that it holds it whatever the
    # machine's speed), and a second one with its own run directory
    longjob ckl
    local Z=$T/cz pid i=0
    "$G" "$T/ckl.yaml" --run-dir "$T/cl1" --set "checkpoint.dir=$Z" --set checkpoint.every_steps=1 \
        --quiet --threads 1 >/dev/null 2>"$T/cl1.err" &
    pid=$!
    waitstep $pid "$T/cl1/metrics.jsonl" 5
    kill -STOP $pid 2>/dev/null
    while [ "$(awk '{print $3}' /proc/$pid/stat 2>/dev/null)" = R ] && [ $i -lt 100 ]; do sleep 0.01; i=$((i + 1)); done
    if [ "$(awk '{print $3}' /proc/$pid/stat 2>/dev/null)" != T ]; then
        fail ckptdir.live_lock "the first run was not running at step 5: $(head -n 2 "$T/cl1.err")"
    else
        kase ckptdir.live_lock 6 "$Z" "re:^gpurun: $(rx "$Z"): locked by another run \(host .*pid $pid," \
            "checkpoint directory" "$(hostname)" -- \
            "$G" "$T/ckl.yaml" --run-dir "$T/cl2" --set "checkpoint.dir=$Z" --quiet --threads 1
        [ -e "$T/cl2" ] && fail ckptdir.live_lock_no_dir "$T/cl2 was made by a refused run"
    fi
    kill -KILL $pid 2>/dev/null
    reap $pid 10

    # the run directory is lost; the checkpoints are not: a new one carries them on
    local N=$T/ca_new
    crun 120 "$G" "$T/ckd.yaml" "${THREADS[@]}" --run-dir "$N" --set "checkpoint.dir=$X" --set train.steps=50 \
        --resume auto
    local why=""
    [ "$RC" -eq 0 ] || why="exit $RC, expected 0"
    grep -qF "resuming from $X/$(ckname 40)" "$ERR" || why="${why:+$why; }did not resume from step 40"
    grep -qF "was written by the run $RA; this run ($(realpath "$N")) resumed from its checkpoint and carries it on" \
        "$ERR" || why="${why:+$why; }no line saying it carries $X on"
    [ "$(head -n 1 "$X/.owner" 2>/dev/null)" = "run $(realpath "$N")" ] || why="${why:+$why; }.owner: $(head -n 1 "$X/.owner")"
    [ -f "$X/$(ckname 50)" ] || why="${why:+$why; }no $(ckname 50)"
    if [ -z "$why" ]; then pass ckptdir.carry_on "exit 0 in $WALL s: $(grep -F 'carries it on' "$ERR" | cut -c1-120)"
    else fail ckptdir.carry_on "$why"; detail; fi

    crun 120 "$G" "$T/ckd.yaml" "${THREADS[@]}" --run-dir "$T/cs" --set "checkpoint.dir=$T/cs" --quiet
    if [ "$RC" -eq 0 ] && [ -f "$T/cs/$(ckname 40)" ] && [ -f "$T/cs/summary.json" ]; then
        pass ckptdir.is_run_dir "exit 0, checkpoints beside the run's files"
    else fail ckptdir.is_run_dir "exit $RC; $(ls -A "$T/cs" 2>&1 | tr '\n' ' ')"; detail; fi
}
