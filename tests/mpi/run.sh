#!/usr/bin/env bash
# Runs tests/mpi/mpi_world <mode> under `mpirun --oversubscribe -np 2` (ctest:
# mpi_collectives, mpi_data_parallel, mpi_tensor_parallel, mpi_kill, ...). Exit
# 77 (skipped) when mpirun is absent (mpi_env.sh).
# usage: run.sh <mpirun or ""> <program> <mode> [ranks, default 2]
set -u
mpirun=${1:-}
prog=$2
mode=$3
np=${4:-2}
. "$(dirname "$0")/mpi_env.sh" "$mpirun"
out=$(mktemp)
trap 'rm -f "$out"' EXIT
# Fault modes: the ranks that survive (or leave) must each print "rank <r>: ok"
# (a killed or stopped rank prints nothing); the job's exit status is not
# checked (a broken world skips MPI_Finalize, and mpirun reports that). A
# killed rank must not take the survivor down with it: --enable-recovery.
# Every fault is found within seconds: the whole run is bounded.
case "$mode" in
kill | kill_ring | stop) want=1 ;;
leave | extra | graph | mismatch | mismatch_pairs) want=2 ;;
*) want=0 ;;
esac
if [ "$want" -gt 0 ]; then
  start=$(date +%s)
  timeout 60 "$mpirun" --oversubscribe --enable-recovery -np 2 "$prog" "$mode" >"$out" 2>&1
  rc=$?
  cat "$out"
  echo "mpirun exit $rc after $(($(date +%s) - start)) s"
  [ $rc -ne 124 ] || { echo "FAIL: the job hung (60 s)"; exit 1; }
  [ "$(grep -c '^rank [0-9]*: ok' "$out")" -eq "$want" ] || { echo "FAIL: want $want ranks ok"; exit 1; }
  exit 0
fi
timeout 120 "$mpirun" --oversubscribe -np "$np" "$prog" "$mode" >"$out" 2>&1
rc=$?
cat "$out"
[ $rc -eq 0 ] || { echo "FAIL: mpirun exit $rc"; exit 1; }
[ "$(grep -c '^rank [0-9]*: ok' "$out")" -eq "$np" ] || { echo "FAIL: not all $np ranks ok"; exit 1; }
