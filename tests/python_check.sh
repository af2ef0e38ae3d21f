#!/usr/bin/env bash
# The Python binding's pytest suite (tests/python) against the shared library of
# a build folder: python_check.sh BUILD_DIR. Uses Debian's python3 (/usr/bin/python3,
# with python3-numpy and python3-pytest). Exit 77 (skipped) when those are missing
# or pytest collects nothing (its exit 5).
set -uo pipefail
build=${1:?usage: python_check.sh BUILD_DIR}
src="$(cd "$(dirname "$0")/.." && pwd)"
py=/usr/bin/python3
if ! "$py" -c 'import numpy, pytest' 2>/dev/null; then
  echo "python_check: $py with numpy and pytest is missing (python3-numpy, python3-pytest): skipped"
  exit 77
fi
lib="$build/liblazytensor.so"
[ -e "$lib" ] || { echo "python_check: $lib is missing"; exit 1; }
LAZYTENSOR_LIB="$lib" PYTHONDONTWRITEBYTECODE=1 "$py" -m pytest -q -p no:cacheprovider "$src/tests/python"
rc=$?
[ "$rc" -eq 5 ] && { echo "python_check: pytest collected no tests: skipped"; exit 77; }
exit "$rc"
