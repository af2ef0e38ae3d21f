#!/usr/bin/env bash
# What the built libraries show the programs that link them:
#  - the shared library needs no libmpi (lt_world_mpi loads it at run time),
#    neither directly nor through another library, and leaves no MPI symbol
#    for the loader to resolve;
#  - nor libopenblas (the cpu backend loads it at its first f64 product, as
#    its constructor costs every process that links it about 8 ms at start),
#    and leaves no OpenBLAS symbol to the loader;
#  - every global symbol the static library defines carries the lt prefix
#    (lt_ public, lt__ internal), so none clashes with a user's own names.
# Allowed without the prefix: names starting with "__", which C reserves to
# the implementation (a program cannot define them), as compilers emit for
# sanitizer and coverage instrumentation. Nothing else.
# Usage: symbols_check.sh liblazytensor.so liblazytensor.a
set -euo pipefail
shared=$1 static=$2
fail=0

# not_linked LIB SYMBOLS HOW: $shared needs library LIB neither directly nor
# through another library, and leaves no symbol matching SYMBOLS (an
# extended regex) to the loader; HOW says what to use instead.
not_linked() {
  local lib=$1 symbols=$2 how=$3 undef
  if readelf -d "$shared" | grep -i "NEEDED.*$lib"; then
    echo "FAIL: $shared has $lib as NEEDED ($how)"
    fail=1
  fi
  if ldd "$shared" | grep -i "$lib"; then
    echo "FAIL: $shared pulls $lib in through another library"
    fail=1
  fi
  undef=$(nm -D --undefined-only "$shared" | awk '{print $NF}' | grep -E "$symbols" || true)
  if [ -n "$undef" ]; then
    echo "FAIL: $shared leaves $lib symbols to the loader ($how): $undef"
    fail=1
  fi
}
not_linked libmpi '^(P?MPI_|ompi_|opal_)' 'use the lt__mpi table'
not_linked libopenblas '^(cblas_|openblas_)' 'load it at run time: lt__cpu_openblas'

# nm -g --defined-only: "address type name" (objects' headers have one field)
unprefixed=$(nm -g --defined-only "$static" | awk 'NF == 3 {print $3}' |
  grep -v -E '^(lt_|__)' | sort -u || true)
if [ -n "$unprefixed" ]; then
  echo "FAIL: $static defines globals without the lt_ prefix (make them static, or" \
    "rename them lt__*):"
  # the object each comes from
  nm -g --defined-only -A "$static" | awk -v names="$(echo "$unprefixed" | tr '\n' ' ')" '
    BEGIN { n = split(names, a, " "); for (i = 1; i <= n; i++) want[a[i]] = 1 }
    NF == 3 && ($3 in want) { sub(/:[0-9a-f]+$/, "", $1); sub(/^.*:/, "", $1); print "  " $3 " (" $1 ")" }' |
    sort -u
  fail=1
fi

[ "$fail" -eq 0 ] && echo "symbols: ok (no libmpi nor libopenblas needed; every global of $(basename "$static") is lt_*)"
exit "$fail"
