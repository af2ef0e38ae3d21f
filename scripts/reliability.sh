#!/usr/bin/env bash
# Reliability checks (called by scripts/test.sh; runs alone too):
#  - the libFuzzer targets (clang, ASan+UBSan), each for a bounded time, from the
#    seed corpora in fuzz/corpus/ (new inputs go to a temporary directory);
#  - the fault sweep (tests/test_faults: every allocation of a training step
#    fails in turn, then a compile and an execution failure), on ref, then on cpu;
#  - the threading tests (tests/test_threads; scripts/test.sh also runs them
#    under TSan);
#  - the soak: 20 000 training steps, RSS and live tensors flat after warm-up.
# Each prints its counts. About 4 minutes on 2 cores (LT_FUZZ_SECONDS, default 60
# per target, one target per core at a time; LT_SOAK_STEPS, default 20000).
#
#   scripts/reliability.sh                      everything above
#   scripts/reliability.sh --without-suite-tests  the fuzzers and the soak only:
#       the fault sweep and the threading tests are also ctests (test_faults runs
#       both backends, test_threads), and scripts/test.sh runs them in its suites
#       (ASan+UBSan, TSan, plain), so it passes this flag rather than run them twice.
#   LT_BUILD_TYPE (default RelWithDebInfo): the build type of $LT_BUILD_DIR.
set -euo pipefail
cd "$(dirname "$0")/.."
suite_tests=1
case "${1:-}" in
--without-suite-tests) suite_tests=0 ;;
"") ;;
*)
  echo "usage: scripts/reliability.sh [--without-suite-tests]" >&2
  exit 2
  ;;
esac
jobs=$(nproc)
fuzz_seconds=${LT_FUZZ_SECONDS:-60}
soak_steps=${LT_SOAK_STEPS:-20000}
fuzz_build=${LT_FUZZ_BUILD_DIR:-build-fuzz} # the build directories (scripts/test.sh's names)
build=${LT_BUILD_DIR:-build}
failed=()
tmp=$(mktemp -d /tmp/lt-reliability.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

echo "== reliability: libFuzzer targets (clang, ASan+UBSan), ${fuzz_seconds}s each"
cmake -S . -B "$fuzz_build" -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=Debug \
  -DLT_SANITIZE=address,undefined -DLT_BUILD_FUZZERS=ON -DLT_BUILD_TESTS=OFF \
  -DLT_BUILD_BENCH=OFF -DLT_LLVM_STATIC=OFF -DLT_WERROR=ON >/dev/null
cmake --build "$fuzz_build" -j "$jobs" --target fuzz_ops fuzz_cache_entry fuzz_idx fuzz_program_load >/dev/null
# One fuzzer per core at a time (each is one process): on 2 cores the four
# take two rounds of fuzz_seconds.
fuzz_one() {
  local t=$1 log=$tmp/$1.log
  mkdir -p "$tmp/$t"
  if ! ASAN_OPTIONS=detect_leaks=1 "$fuzz_build/$t" -max_total_time="$fuzz_seconds" \
    -print_final_stats=1 -timeout=30 -rss_limit_mb=3072 -artifact_prefix="$tmp/$t-" \
    "$tmp/$t" "fuzz/corpus/$t" >"$log" 2>&1; then
    {
      tail -n 80 "$log"
      for f in "$tmp/$t"-*; do
        [ -f "$f" ] || continue
        echo "fuzz $t: FAILED; reproducer (base64) $(basename "$f"):"
        base64 -w 0 "$f"
        echo
      done
      echo "fuzz $t: FAILED"
    } >"$tmp/$t.result"
    return
  fi
  local runs cov
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  cov=$(sed -n 's/^#[0-9]*[[:space:]]*DONE.*cov: \([0-9]*\).*corp: \([0-9]*\).*/\1 edges, corpus \2/p' "$log")
  echo "fuzz $t: $runs executions in ${fuzz_seconds}s ($cov), no crash, leak or abort" >"$tmp/$t.result"
}
fuzzers=(fuzz_ops fuzz_cache_entry fuzz_idx fuzz_program_load)
running=0
for t in "${fuzzers[@]}"; do
  fuzz_one "$t" &
  running=$((running + 1))
  if [ "$running" -ge "$jobs" ]; then
    wait -n
    running=$((running - 1))
  fi
done
wait
for t in "${fuzzers[@]}"; do
  cat "$tmp/$t.result"
  if grep -q "^fuzz $t: FAILED" "$tmp/$t.result"; then failed+=("fuzz $t"); fi
done

cmake -S . -B "$build" -DCMAKE_C_COMPILER=gcc -DCMAKE_BUILD_TYPE="${LT_BUILD_TYPE:-RelWithDebInfo}" \
  -DLT_WERROR=ON >/dev/null
if [ "$suite_tests" = 1 ]; then
  echo "== reliability: fault sweep, threads"
  cmake --build "$build" -j "$jobs" --target test_faults test_threads >/dev/null
  for backend in ref cpu; do
    if ! LT_BACKEND=$backend "$build/test_faults" >"$tmp/faults.log" 2>&1; then
      cat "$tmp/faults.log"
      echo "fault sweep ($backend): FAILED"
      failed+=("fault sweep ($backend)")
      continue
    fi
    grep -E '^(allocations per|fault sites tried|after the fault|failing call)' "$tmp/faults.log" |
      sed "s/^/faults ($backend): /"
  done
  if ! "$build/test_threads" >"$tmp/threads.log" 2>&1; then
    cat "$tmp/threads.log"
    echo "threads: FAILED"
    failed+=("threads")
  else
    grep -E '^threads:' "$tmp/threads.log"
  fi
fi
echo "== reliability: soak"
cmake --build "$build" -j "$jobs" --target lazytensor-soak >/dev/null
# The soak on the cpu backend, which every build has (CMake requires LLVM):
# any failure fails the run, a failed library call (exit 2) as much as growth
# (exit 1); no other backend stands in for it.
rc=0
LT_BACKEND=cpu "$build/lazytensor-soak" "$soak_steps" >"$tmp/soak.log" 2>&1 || rc=$?
cat "$tmp/soak.log"
if [ "$rc" != 0 ]; then
  echo "soak (cpu): FAILED (exit $rc)"
  failed+=("soak (cpu)")
fi
if [ "${#failed[@]}" -gt 0 ]; then
  echo "== reliability: FAILED: ${failed[*]}"
  exit 1
fi
echo "== reliability: all passed"
