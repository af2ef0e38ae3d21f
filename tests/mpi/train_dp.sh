#!/usr/bin/env bash
# lazytensor-train's data-parallel modes against the single-process run with
# the doubled batch: --devices 2 (in-process) and, when mpirun is there,
# mpirun -np 2 --data-parallel, each at batch B per replica, must reach the
# test accuracy of one process at batch 2B within 0.01 (ctest mpi_train).
# usage: train_dp.sh <lazytensor-train> <mpirun or "">
set -u
train=$1
mpirun=${2:-}
export LT_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
args=(--limit-steps 40 --test-limit 1000 --hidden 64)
acc() { sed -n 's/^summary: .*final test accuracy \([0-9.]*\)$/\1/p' | tail -1; }
one=$("$train" --batch 64 "${args[@]}" 2>&1 | tee /dev/stderr | acc)
dev=$("$train" --devices 2 --batch 32 "${args[@]}" 2>&1 | tee /dev/stderr | acc)
check() { # name value
  [ -n "$2" ] || { echo "FAIL: $1 gave no accuracy"; exit 1; }
  awk -v a="$one" -v b="$2" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 0.01) }' ||
    { echo "FAIL: $1 accuracy $2, one process $one"; exit 1; }
  echo "$1: accuracy $2, one process at the doubled batch $one"
}
[ -n "$one" ] || { echo "FAIL: the single-process run gave no accuracy"; exit 1; }
check "--devices 2" "$dev"
if [ -n "$mpirun" ] && command -v "$mpirun" >/dev/null 2>&1; then
  mp=$(timeout 120 "$mpirun" --oversubscribe -np 2 "$train" --data-parallel --batch 32 "${args[@]}" 2>&1 |
    tee /dev/stderr | acc)
  check "mpirun -np 2 --data-parallel" "$mp"
else
  echo "mpirun not found: the MPI run is skipped"
fi
