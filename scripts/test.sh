#!/usr/bin/env bash
# The test command: installs dependencies, checks the format, builds with clang
# and with gcc at -O3 (Release; warnings as errors: -DLT_WERROR=ON, whose default
# is off), runs the whole suite under ASan+UBSan, the executor tests under TSan,
# the quick tier's ref-backend tests under valgrind memcheck, the fuzzers and the
# soak, then the whole suite plainly (Release) so that CTest's summary comes last.
# The ASan+UBSan run caps the cpu backend at AVX2 (LT_CPU_ISA=avx2: the LLVM
# loops and oneDNN); the plain run uses the machine's own kernels.
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
# Where the time goes on 2 cores (each section prints the seconds since the start):
#  - builds: the tests are one program, lt_tests (build*/test_foo are links to
#    it), so a configuration links LLVM once for them; the TSan build builds only
#    the library once per configuration. Three configurations: ASan+UBSan (gcc
#    -O1), TSan (clang: everything, the clang -Werror build), gcc Release
#    (everything), plus the fuzzers' clang build (the library and fuzz/).
#  - ASan+UBSan suite: the largest part (test_faults, test_cpu_differential and
#    test_program_sweep take 1-2 minutes each under ASan), then the tool, MPI and
#    training tests (all but train_data_parallel, which runs plainly).
#  - valgrind: the quick tier under memcheck, in one process that forks each test
#    ($jobs at a time), so LLVM's start-up runs once (the sweeps run under
#    ASan instead).
#  - reliability: four fuzzers x 20 s (LT_FUZZ_SECONDS), one per core, and the
#    soak. Its fault sweep and threading tests are ctests here (test_faults,
#    test_threads), so scripts/reliability.sh --without-suite-tests skips its
#    own run of them.
#  - the plain suite (Release: test_* a few times faster than under ASan).
#    mpi_busy (a rank away 60 s) runs beside other tests.
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

echo "== ASan + UBSan (oneDNN capped at AVX2)"
# -O1, as ASan's documentation advises for speed (at -O0 the suite ran about
# twice as long); -g keeps the reports' line numbers.
cmake -S . -B build-asan -DCMAKE_C_COMPILER=gcc -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_FLAGS_DEBUG="-O1 -g" \
  -DLT_SANITIZE=address,undefined -DLT_BUILD_BENCH=OFF -DLT_LLVM_STATIC=OFF -DLT_WERROR=ON >/dev/null
cmake --build build-asan -j "$jobs"
# train_data_parallel compares a 2-rank training's numbers with one process's
# (a minute under ASan, alone: it is RUN_SERIAL); its code runs under ASan in
# mpi_data_parallel, train_dp_options and train_cli, and it runs plainly below.
# oneDNN and the LLVM JIT pick their kernels (and so the f32 summation order)
# by the processor: this run caps both at AVX2 (LT_CPU_ISA=avx2, which also
# sets oneDNN's cap, and ONEDNN_MAX_CPU_ISA for any oneDNN call before the
# library's), so an AVX-512 machine also checks what an AVX2-only one
# computes; the plain run at the end uses the machine's own kernels. ctest runs one test more than there are cores:
# mpi_busy holds a slot for 60 s while one rank sleeps and the other waits.
LT_CPU_ISA=avx2 ONEDNN_MAX_CPU_ISA=AVX2 ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 \
  ctest --test-dir build-asan -j "$((jobs + 1))" --output-on-failure \
  -E '^train_data_parallel$'
elapsed "ASan + UBSan"

# The clang build: everything (library, tests, tools, benchmarks) compiles with
# clang -Werror, under TSan; the executor, async and threading tests run.
echo "== clang build with TSan (-Wall -Wextra -Werror): the executor, async and threading tests"
cmake -S . -B build-tsan -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=Debug \
  -DLT_SANITIZE=thread -DLT_LLVM_STATIC=OFF -DLT_WERROR=ON >/dev/null
cmake --build build-tsan -j "$jobs"
# test_faults sweeps both backends, one after the other, for most of this
# run's time: here each backend is its own process, beside the other tests.
tsan_faults() {
  local log=build-tsan/test_faults_$1.log
  if LT_BACKEND=$1 TSAN_OPTIONS=halt_on_error=1 build-tsan/test_faults >"$log" 2>&1; then
    echo "TSan test_faults ($1): passed"
  else
    cat "$log"
    echo "TSan test_faults ($1): FAILED"
    return 1
  fi
}
tsan_faults ref &
faults_ref=$!
tsan_faults cpu &
faults_cpu=$!
TSAN_OPTIONS=halt_on_error=1 ctest --test-dir build-tsan -j "$jobs" --output-on-failure \
  -R 'test_(step|executor|random|threads|cpu_threads|alloc|buffer_pool|collectives|mesh|data_parallel|dp_zero|sharding|cpu_device_pools|cpu_matmul_prim)'
wait "$faults_ref"
wait "$faults_cpu"
elapsed "TSan"

# The plain build is what a user gets from `cmake -DCMAKE_BUILD_TYPE=Release`
# (gcc -O3, which sees more than -O2: inlining-dependent warnings such as
# -Wstringop-overflow), with the tests and benchmarks: the valgrind, AVX2 and
# plain suite runs below use it.
echo "== gcc Release build (-O3, -Wall -Wextra -Werror)"
cmake -S . -B build -DCMAKE_C_COMPILER=gcc -DCMAKE_BUILD_TYPE=Release -DLT_WERROR=ON >/dev/null
cmake --build build -j "$jobs"
elapsed "gcc Release build"

echo "== layers (one-way src/ folders)"
bash scripts/check_layers.sh --self-test # two commands: set -e ignores a failure left of &&
bash scripts/check_layers.sh build

echo "== valgrind memcheck (ref backend; the LLVM JIT is covered by ASan above)"
# One valgrind process: `lt_tests --forked` runs each test in a forked child
# ($jobs at a time), so the static LLVM and oneDNN constructors run once under
# memcheck rather than once per test (about 3 s each). Valgrind follows the
# fork: each child checks its own leaks when it exits and writes its own log
# (%p); a child's test output is printed if it fails.
# The quick tier's tests (ctest -L quick): the slow tier's sweeps (test_faults,
# test_program_sweep, ...) run under ASan+UBSan above and plainly below; under
# memcheck they would take most of the run. test_coll_abandon checks that an
# abandoned execution's memory is leaked.
mapfile -t vg_tests < <(ctest --test-dir build -N -L quick |
  sed -n 's/^ *Test *#[0-9]*: \(test_[a-z0-9_]*\)$/\1/p' | grep -v -E '^(test_cpu_.*|test_coll_abandon)$')
vg_logs=$(mktemp -d /tmp/lt-valgrind.XXXXXX)
if ! LT_BACKEND=ref valgrind -q --error-exitcode=1 --leak-check=full \
  --errors-for-leak-kinds=definite,possible --log-file="$vg_logs/%p.log" \
  build/lt_tests --forked "$jobs" "${vg_tests[@]}"; then
  for f in "$vg_logs"/*.log; do [ -s "$f" ] && { echo "== valgrind log $(basename "$f")"; cat "$f"; }; done
  echo "valgrind: FAILED"
  exit 1
fi
rm -rf "$vg_logs"
elapsed "valgrind"

# The Python binding's pytest run is the ctest python_binding (plain suite below):
# tests/python_check.sh installs the build into a temporary prefix (cmake
# --install: the library and the package) and runs tests/python against that
# install, the source tree's python/ not importable, then pip-installs python/
# offline into a venv (python3-venv) and runs an op through that copy.
# The fuzzers for 20 s each here (a smoke run from the seed corpora; longer runs:
# LT_FUZZ_SECONDS=600 scripts/reliability.sh).
LT_FUZZ_SECONDS=20 LT_BUILD_TYPE=Release bash scripts/reliability.sh --without-suite-tests
elapsed "reliability"

echo "== test suite"
ctest --test-dir build -j "$((jobs + 1))" --output-on-failure # + 1: mpi_busy, as above
echo "== scripts/test.sh: $((SECONDS - start)) s"
