#!/usr/bin/env bash
# sweep.sh — a hyperparameter sweep of one gpurun job: every point of LRS x BATCHES (the
# optimizer's learning rate, train.batch_size) in its own run directory OUT/lr=<lr>,bs=<bs>.
#
#   examples/sweeps/sweep.sh JOB.yaml OUT [--set KEY=VALUE]...      (the --set go to every point)
#   LRS="0.1 0.03 0.01" BATCHES="64 128" GPURUN=build/gpurun examples/sweeps/sweep.sh \
#       configs/fashion-mnist-mlp.yaml runs/sweep
#
# Re-run safe: every point starts with --resume auto, so a point that finished is not run
# again (gpurun says "this run already finished" and exits 0), one that was stopped continues
# from its checkpoint, and one that never started starts.
# Preemption-tolerant: a point that exits 75 (SIGTERM, SIGINT or SIGUSR1 stopped it after a
# checkpoint: a spot instance's notice, a scheduler's preemption) goes to the back of the queue
# and is run again, up to RETRIES (10) times. When the sweep itself gets SIGTERM or SIGINT it
# passes the signal to the running point, waits for its checkpoint and exits 75: run the same
# command again to carry on. Any other exit code fails the point (named at the end) and the
# sweep goes on with the others.
# At the end: `gpurun summarize` of the points, best validation accuracy first, also written as
# OUT/summary.csv, and their loss and accuracy curves in OUT/loss.png and OUT/accuracy.png.
# Exit code: 0 every point finished; 1 a point failed; 75 the sweep was stopped.
set -u
[ $# -ge 2 ] || { sed -n '2,6p' "$0" >&2; exit 2; }
JOB=$1 OUT=$2
shift 2
G=${GPURUN:-gpurun}
LRS=${LRS:-0.1 0.03 0.01}
BATCHES=${BATCHES:-64}
RETRIES=${RETRIES:-10}
mkdir -p "$OUT" || exit 1

queue=()
for lr in $LRS; do
    for bs in $BATCHES; do queue+=("$lr $bs"); done
done
declare -A tries=()
failed=() stopped=0 child=
on_signal() { stopped=1; [ -n "$child" ] && kill -TERM "$child" 2>/dev/null; }
trap on_signal TERM INT

while [ ${#queue[@]} -gt 0 ] && [ $stopped -eq 0 ]; do
    read -r lr bs <<<"${queue[0]}"
    queue=("${queue[@]:1}")
    dir="$OUT/lr=$lr,bs=$bs"
    echo "sweep: $dir" >&2
    "$G" "$JOB" --resume auto --run-dir "$dir" --quiet --set train.optimizer.lr="$lr" \
        --set train.batch_size="$bs" "$@" &
    child=$!
    wait "$child"
    rc=$?
    while [ $rc -gt 128 ] && kill -0 "$child" 2>/dev/null; do wait "$child"; rc=$?; done # a signal ended the wait
    child=
    case $rc in
    0) ;;
    75)
        tries[$dir]=$(( ${tries[$dir]:-0} + 1 ))
        if [ $stopped -eq 1 ]; then
            :
        elif [ "${tries[$dir]}" -le "$RETRIES" ]; then
            echo "sweep: $dir was stopped (exit 75) and is queued again" >&2
            queue+=("$lr $bs")
        else
            failed+=("$dir (stopped $RETRIES times)")
        fi ;;
    *) failed+=("$dir (exit $rc)") ;;
    esac
done

if [ $stopped -eq 1 ]; then
    echo "sweep: stopped; run the same command again to carry on" >&2
    exit 75
fi
dirs=()
for lr in $LRS; do
    for bs in $BATCHES; do [ -f "$OUT/lr=$lr,bs=$bs/config.yaml" ] && dirs+=("$OUT/lr=$lr,bs=$bs"); done
done
if [ ${#dirs[@]} -gt 0 ]; then
    "$G" summarize "${dirs[@]}" --sort -best_acc
    "$G" summarize "${dirs[@]}" --sort -best_acc --csv >"$OUT/summary.csv"
    "$G" plot "${dirs[@]}" -o "$OUT/loss.png" --metric loss
    "$G" plot "${dirs[@]}" -o "$OUT/accuracy.png" --metric accuracy 2>/dev/null ||
        echo "sweep: no accuracy curves (the job has no val split)" >&2
fi
if [ ${#failed[@]} -gt 0 ]; then
    printf 'sweep: failed: %s\n' "${failed[@]}" >&2
    exit 1
fi
exit 0
