#!/usr/bin/env bash
# lazytensor-train's data-parallel modes against the single-process run with
# the doubled batch: --devices 2 (in-process) and, when mpirun is there,
# mpirun -np 2 --data-parallel, each at batch B per replica, must reach the
# test accuracy of one process at batch 2B: within 0.01 for the MLP (the same
# training up to rounding), within 0.03 for the CNN, whose batch norm takes
# each replica's shard statistics (as DistributedDataParallel without
# SyncBatchNorm), so its runs are close but not the same (ctest
# train_data_parallel).
# usage: train_dp.sh <lazytensor-train> <mpirun or "">
set -u
train=$1
mpirun=${2:-}
export LT_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
acc() { sed -n 's/^summary: .*final test accuracy \([0-9.]*\)$/\1/p' | tail -1; }
check() { # name value one tolerance
  [ -n "$2" ] || { echo "FAIL: $1 gave no accuracy"; exit 1; }
  awk -v a="$3" -v b="$2" -v t="$4" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= t) }' ||
    { echo "FAIL: $1 accuracy $2, one process $3 (tolerance $4)"; exit 1; }
  echo "$1: accuracy $2, one process at the doubled batch $3"
}
run_model() { # model tolerance args...
  local model=$1 tol=$2
  shift 2
  local args=(--model "$model" --limit-steps 40 --test-limit 1000 "$@")
  local one dev mp
  one=$("$train" --batch 64 "${args[@]}" 2>&1 | tee /dev/stderr | acc)
  [ -n "$one" ] || { echo "FAIL: the single-process $model run gave no accuracy"; exit 1; }
  dev=$("$train" --devices 2 --batch 32 "${args[@]}" 2>&1 | tee /dev/stderr | acc)
  check "$model --devices 2" "$dev" "$one" "$tol"
  if [ -n "$mpirun" ] && command -v "$mpirun" >/dev/null 2>&1; then
    mp=$(timeout 120 "$mpirun" --oversubscribe -np 2 "$train" --data-parallel --batch 32 \
      "${args[@]}" 2>&1 | tee /dev/stderr | acc)
    check "$model mpirun -np 2 --data-parallel" "$mp" "$one" "$tol"
  else
    echo "mpirun not found: the MPI run is skipped"
  fi
}
run_model mlp 0.01 --hidden 64
run_model cnn 0.03
