#!/usr/bin/env bash
# lazytensor-train checks rank-dependent options at start-up (ctest
# train_dp_options; tiny runs):
#  - mpirun with --data-parallel and --batch 64 on one rank, 32 on the other
#    (MPMD: -np 1 prog args : -np 1 prog args): every rank names the option
#    and both values, and the job exits non-zero before training;
#  - --data-parallel without mpirun (a world of 1): a warning;
#  - mpirun -np 2 without --data-parallel (two duplicate runs): a warning on
#    each rank.
# Skipped (77) without mpirun or the Fashion-MNIST files.
# usage: train_dp_options.sh <lazytensor-train> <mpirun or "">
set -uo pipefail
train=$1
mpirun=${2:-}
dir=${LT_DATA_DIR:-/usr/share/datasets/fashion-mnist}
[ -f "$dir/t10k-images-idx3-ubyte.gz" ] || { echo "no Fashion-MNIST in $dir: skipped"; exit 77; }
. "$(dirname "$0")/mpi_env.sh" "$mpirun"
out=$(mktemp)
trap 'rm -f "$out"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
tiny=(--limit-steps 2 --hidden 16 --layers 1 --test-limit 100)

timeout 120 "$mpirun" --oversubscribe -np 1 "$train" --data-parallel --batch 64 "${tiny[@]}" : \
  -np 1 "$train" --data-parallel --batch 32 "${tiny[@]}" >"$out" 2>&1
rc=$?
cat "$out"
[ $rc -ne 0 ] || fail "ranks with --batch 64 and 32 ran"
grep -q "rank 0: the ranks disagree on --batch: rank 0 has 64, rank 1 has 32" "$out" ||
  fail "rank 0 did not report the mismatch"
grep -q "rank 1: the ranks disagree on --batch: rank 1 has 32, rank 0 has 64" "$out" ||
  fail "rank 1 did not report the mismatch"
! grep -q "^epoch" "$out" || fail "trained before refusing"

timeout 120 "$train" --data-parallel --batch 32 "${tiny[@]}" >"$out" 2>&1
rc=$?
cat "$out"
[ $rc -eq 0 ] || fail "--data-parallel alone exited $rc"
grep -q "warning: --data-parallel runs in a world of 1 process (not started by mpirun)" "$out" ||
  fail "no warning for --data-parallel without mpirun"

timeout 120 "$mpirun" --oversubscribe -np 2 "$train" --epochs 0 --hidden 16 --layers 1 \
  --test-limit 100 >"$out" 2>&1
rc=$?
cat "$out"
[ $rc -eq 0 ] || fail "mpirun -np 2 without --data-parallel exited $rc"
[ "$(grep -c "warning: mpirun started 2 processes without --data-parallel" "$out")" -eq 2 ] ||
  fail "not every rank warned about duplicate runs"
echo "train_dp_options: ok"
