#!/usr/bin/env bash
# lazytensor-train's data-parallel modes against the single-process run with
# the doubled batch: --devices 2 (in-process) and, when mpirun is there,
# mpirun -np 2 --data-parallel, each at batch B per replica, must reach the
# test accuracy of one process at batch 2B: within 0.01 for the MLP (the same
# training up to rounding), within 0.03 for the CNN, whose batch norm takes
# each replica's shard statistics (as DistributedDataParallel without
# SyncBatchNorm), so its runs are close but not the same (ctest
# train_data_parallel). The GPT (--model gpt, small) must reach the final
# training and validation losses of one process at the doubled batch within
# 0.0005: the same training up to rounding (measured equal to the 4 printed
# decimals, also under mpirun); with the grads clipped per replica before
# the averaging instead of after it they were 0.0024 off, with one replica's
# shard alone 0.04. --shard-optimizer (each replica keeps only its chunk of
# Adam's state) must train the MLP as the replicated state does: the same
# accuracy as one process at the doubled batch, within 0.01.
# usage: train_dp.sh <lazytensor-train> <mpirun or "">
set -u
train=$1
mpirun=${2:-}
export LT_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
# what a run's lines say: the final test accuracy, or (the GPT) the final
# training and validation losses
acc() { sed -n 's/^summary: .*final test accuracy \([0-9.]*\)$/\1/p' | tail -1; }
losses() { sed -n 's/^final: steps [0-9]* train_loss \([0-9.]*\) val_loss \([0-9.]*\)$/\1 \2/p' | tail -1; }
check() { # name value one tolerance: every field of value within tolerance of one's
  [ -n "$2" ] || { echo "FAIL: $1 gave no result"; exit 1; }
  awk -v a="$3" -v b="$2" -v t="$4" 'BEGIN { n = split(a, x, " "); split(b, y, " ");
    for (i = 1; i <= n; i++) { d = x[i] - y[i]; if (d < 0) d = -d; if (d > t) exit 1 } }' ||
    { echo "FAIL: $1 gave $2, one process $3 (tolerance $4)"; exit 1; }
  echo "$1: $2, one process at the doubled batch $3"
}
run_case() { # name extract tolerance batch-per-replica args...
  local name=$1 extract=$2 tol=$3 b=$4
  shift 4
  local one dev mp
  one=$("$train" --batch $((2 * b)) "$@" 2>&1 | tee /dev/stderr | $extract)
  [ -n "$one" ] || { echo "FAIL: the single-process $name run gave no result"; exit 1; }
  dev=$("$train" --devices 2 --batch "$b" "$@" 2>&1 | tee /dev/stderr | $extract)
  check "$name --devices 2" "$dev" "$one" "$tol"
  if [ -n "$mpirun" ] && command -v "$mpirun" >/dev/null 2>&1; then
    mp=$(timeout 120 "$mpirun" --oversubscribe -np 2 "$train" --data-parallel --batch "$b" "$@" \
      2>&1 | tee /dev/stderr | $extract)
    check "$name mpirun -np 2 --data-parallel" "$mp" "$one" "$tol"
  else
    echo "mpirun not found: the MPI run is skipped"
  fi
}
run_case mlp acc 0.01 32 --model mlp --limit-steps 40 --test-limit 1000 --hidden 64
run_case cnn acc 0.03 32 --model cnn --limit-steps 40 --test-limit 1000
# clip 0.1: active every step, so that clipping before the averaging would show
run_case gpt losses 0.0005 8 --model gpt --steps 30 --lr 3e-3 --clip 0.1 --warmup 5 --width 32 \
  --layers 1 --heads 2 --context 16 --eval-every 0 --eval-windows 64 --log-every 10
# sharded optimizer state (ZeRO stage 1): the MLP's case again
mlp=(--model mlp --limit-steps 40 --test-limit 1000 --hidden 64)
one=$("$train" --batch 64 "${mlp[@]}" 2>&1 | tee /dev/stderr | acc)
dev=$("$train" --devices 2 --batch 32 --shard-optimizer "${mlp[@]}" 2>&1 | tee /dev/stderr | acc)
check "mlp --devices 2 --shard-optimizer" "$dev" "$one" 0.01
if [ -n "$mpirun" ] && command -v "$mpirun" >/dev/null 2>&1; then
  mp=$(timeout 120 "$mpirun" --oversubscribe -np 2 "$train" --data-parallel --batch 32 \
    --shard-optimizer "${mlp[@]}" 2>&1 | tee /dev/stderr | acc)
  check "mlp mpirun -np 2 --data-parallel --shard-optimizer" "$mp" "$one" 0.01
fi
