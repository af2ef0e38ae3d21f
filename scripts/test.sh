#!/usr/bin/env bash
# The test command: installs dependencies, checks the format, builds with gcc and clang
# (warnings as errors: -DLT_WERROR=ON, whose default is off) and a gcc Release build,
# runs the whole suite under ASan+UBSan, the executor tests under TSan, the ref-backend
# tests under valgrind memcheck, the oneDNN tests again with oneDNN capped at AVX2, then
# the suite plainly so that CTest's summary comes last.
#
#   scripts/test.sh           everything below (the target: under 15 minutes on 2 cores)
#   scripts/test.sh --quick   one gcc Debug build (-Werror) and CTest's `quick` tier (unit
#                             tests of a few seconds each, on both backends; the target:
#                             under 3 minutes on 2 cores from a fresh clone)
#
# The tiers are CTest labels (CMakeLists.txt): `quick`, and `slow` for the sweeps and
# the other tests of 10 s or more, MPI worlds, training runs, the Python and install
# checks (`ctest -L quick`, `ctest -L slow`).
#
# Where the time goes on 2 cores (each section prints the seconds since the start).
# Measured in pieces on a 2-core machine shared with other jobs, not end to end:
#  - builds: the library (~26k lines) and tests (~25k) compile in ~30 s at -O0
#    (Debug, no compiler cache), ~1.5 min at -O2; sanitizers ~1 min. Links were
#    the bottleneck: one static-LLVM link is ~6 s and ~49 MB, and each test was its
#    own program (~150 static links in the gcc and Release builds, ~7 min of the
#    old 24-34 min run). Now the tests are one program, lt_tests (build*/test_foo
#    are links to it); the TSan build builds only lt_tests, the Release build only
#    the library and tools (no tests, no benchmarks); the benchmarks build in the
#    clang build and the gcc build.
#  - ASan+UBSan suite: the test_* files ~4 min at -j2 (test_faults ~1.7 min,
#    test_cpu_differential ~1.3, test_program_sweep ~1), then the tool, MPI and
#    training tests. TSan: ~1 min to build lt_tests, ~1 min for its dozen tests.
#  - valgrind: every ref test under memcheck (~4 s start-up each), two at a time:
#    ~2 min.
#  - reliability (scripts/reliability.sh): 4 fuzzers x LT_FUZZ_SECONDS (60) one
#    after another (one core idle), its own clang build, the fault sweeps, the
#    soak: ~6 min.
#  - the AVX2 rerun and the plain suite (RelWithDebInfo: test_* a few times faster
#    than under Debug or ASan; the tool, MPI and training tests as above).
# Estimated total (the old run less what is no longer linked or built): 13-22
# minutes; the reliability checks and the two full suite runs are the largest parts.
set -euo pipefail
cd "$(dirname "$0")/.."
quick=0
case "${1:-}" in
--quick) quick=1 ;;
"") ;;
*)
  echo "usage: scripts/test.sh [--quick]" >&2
  exit 2
  ;;
esac
bash scripts/deps.sh
jobs=$(nproc)
start=$SECONDS
elapsed() { echo "   (${1}: $((SECONDS - start)) s since the start)"; }

if [ "$quick" = 1 ]; then
  echo "== quick: gcc Debug build (-Wall -Wextra -Werror) and the quick tier"
  cmake -S . -B build-quick -DCMAKE_C_COMPILER=gcc -DCMAKE_BUILD_TYPE=Debug \
    -DLT_LLVM_STATIC=OFF -DLT_BUILD_BENCH=OFF -DLT_WERROR=ON >/dev/null
  cmake --build build-quick -j "$jobs" --target lt_tests
  elapsed "build"
  rc=0
  ctest --test-dir build-quick -j "$jobs" -L quick --output-on-failure || rc=$?
  echo "== quick tier: $((SECONDS - start)) s (build and tests; scripts/test.sh runs everything)"
  exit "$rc"
fi

echo "== format (clang-format, .clang-format)"
git ls-files '*.c' '*.h' | xargs clang-format --dry-run -Werror

# Everything compiles with clang (tests, tools, benchmarks); nothing runs here.
echo "== clang build (-Wall -Wextra -Werror)"
cmake -S . -B build-clang -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=Debug -DLT_LLVM_STATIC=OFF \
  -DLT_WERROR=ON >/dev/null
cmake --build build-clang -j "$jobs"
elapsed "clang build"

echo "== ASan + UBSan"
cmake -S . -B build-asan -DCMAKE_C_COMPILER=gcc -DCMAKE_BUILD_TYPE=Debug \
  -DLT_SANITIZE=address,undefined -DLT_BUILD_BENCH=OFF -DLT_LLVM_STATIC=OFF -DLT_WERROR=ON >/dev/null
cmake --build build-asan -j "$jobs"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 ctest --test-dir build-asan -j "$jobs" --output-on-failure
elapsed "ASan + UBSan"

echo "== TSan: the executor, async and threading tests"
cmake -S . -B build-tsan -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=Debug \
  -DLT_SANITIZE=thread -DLT_BUILD_BENCH=OFF -DLT_LLVM_STATIC=OFF -DLT_WERROR=ON >/dev/null
cmake --build build-tsan -j "$jobs" --target lt_tests # the tests below are all in lt_tests
TSAN_OPTIONS=halt_on_error=1 ctest --test-dir build-tsan -j "$jobs" --output-on-failure \
  -R 'test_(step|executor|random|threads|faults|cpu_threads|alloc|buffer_pool|collectives|data_parallel|sharding|cpu_device_pools)'
elapsed "TSan"

echo "== gcc build (-Wall -Wextra -Werror)"
cmake -S . -B build -DCMAKE_C_COMPILER=gcc -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLT_WERROR=ON >/dev/null
cmake --build build -j "$jobs"
elapsed "gcc build"

# What a user gets from a plain `cmake -DCMAKE_BUILD_TYPE=Release`: gcc -O3 sees
# more (inlining-dependent warnings such as -Wstringop-overflow), so it must be
# clean too. The library and the tools; the tests and benchmarks run from the builds above.
echo "== gcc Release build (-O3, -Werror)"
cmake -S . -B build-release -DCMAKE_C_COMPILER=gcc -DCMAKE_BUILD_TYPE=Release \
  -DLT_BUILD_TESTS=OFF -DLT_BUILD_BENCH=OFF -DLT_WERROR=ON >/dev/null
cmake --build build-release -j "$jobs"
elapsed "gcc Release build"

echo "== layers (one-way src/ folders)"
bash scripts/check_layers.sh --self-test # two commands: set -e ignores a failure left of &&
bash scripts/check_layers.sh build

echo "== valgrind memcheck (ref backend; the LLVM JIT is covered by ASan above)"
# build/test_* are links to build/lt_tests, which picks the test by its name; the
# tests run $jobs at a time (as under ctest -j), each one's log printed if it fails.
valgrind_one() {
  local log
  log=$(mktemp /tmp/lt-valgrind.XXXXXX)
  if LT_BACKEND=ref valgrind -q --error-exitcode=1 --leak-check=full \
    --errors-for-leak-kinds=definite,possible "$1" >"$log" 2>&1; then
    echo "valgrind clean: $(basename "$1")"
    rm -f "$log"
  else
    cat "$log"
    rm -f "$log"
    echo "valgrind: $(basename "$1") FAILED"
    return 1
  fi
}
export -f valgrind_one
for t in build/test_*; do
  [ -x "$t" ] || continue
  # test_coll_abandon checks that an abandoned execution's memory is leaked
  case "$(basename "$t")" in test_cpu_* | test_coll_abandon) continue ;; esac
  printf '%s\n' "$t"
done | xargs -P "$jobs" -n 1 bash -c 'valgrind_one "$1"' valgrind_one
elapsed "valgrind"

echo "== python binding (pytest over build/liblazytensor.so; exit 77: skipped)"
prc=0
bash tests/python_check.sh build || prc=$?
[ "$prc" -eq 0 ] || [ "$prc" -eq 77 ] || exit "$prc"

bash scripts/reliability.sh
elapsed "reliability"

# oneDNN picks its kernels (and so its f32 summation order) by the processor:
# this run caps it at AVX2, so an AVX-512 machine also checks what an AVX2-only
# one computes (the plain run below covers the machine's own kernels). The
# tests that run oneDNN's matmul, convolution or attention kernels, or compare
# cpu with ref.
echo "== oneDNN capped at AVX2 (ONEDNN_MAX_CPU_ISA=AVX2)"
ONEDNN_MAX_CPU_ISA=AVX2 ctest --test-dir build -j "$jobs" --output-on-failure \
  -R '^test_(cpu_.*|conv|nn_conv|matmul|attention|nn|gpt|autograd_ops|autograd_random|eager|step|sharding|data_parallel|dtypes_small|losses|optim|embedding)$'
elapsed "AVX2"

echo "== test suite"
ctest --test-dir build -j "$jobs" --output-on-failure
echo "== scripts/test.sh: $((SECONDS - start)) s"
