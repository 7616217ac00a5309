#!/usr/bin/env bash
# comm_mpi.sh — comm/'s operations between processes (tests/test_comm_mpi.c)
# under Open MPI's launcher: 2 ranks, then 3 and 4 on fewer cores
# (--oversubscribe). Skipped without mpirun or without MPI in the build.
#
#   bash tests/comm_mpi.sh TEST_COMM_MPI_BINARY
set -u
B=$1
if ! command -v mpirun >/dev/null; then
    echo "SKIP: mpirun is not installed (openmpi-bin; scripts/dev.sh installs it)"
    exit 77
fi
if ! "$B" --mpi-built; then
    echo "SKIP: this build of gpurun has no MPI (libopenmpi-dev; scripts/dev.sh installs it)"
    exit 77
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Open MPI's own allocations still held at MPI_Finalize read as leaks under ASan (as in e2e_parallel.sh)
export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0
fails=0
for np in 2 3 4; do
    # a deadlock is a failure, not a hang (timeout's 124)
    timeout 120 mpirun --oversubscribe -np "$np" "$B"
    rc=$?
    echo "comm_mpi: $np ranks: exit $rc"
    [ "$rc" -eq 0 ] || fails=$((fails + 1))
done
[ "$fails" -eq 0 ] && echo "3 passed, 0 failed" || echo "$((3 - fails)) passed, $fails failed"
[ "$fails" -eq 0 ]
