#!/usr/bin/env bash
# The Python binding's pytest suite (tests/python) against the INSTALLED package:
#   python_check.sh BUILD_DIR [CC]
# Uses Debian's python3 (/usr/bin/python3, with python3-numpy and python3-pytest).
#  1. `cmake --install BUILD_DIR` into a temporary prefix: the library, the
#     package (<prefix>/lib/python3.X/dist-packages/lazytensor) and its _install.py.
#  2. pytest from a temporary working folder, PYTHONPATH naming only the
#     install's package folder, LAZYTENSOR_LIB unset and LAZYTENSOR_TEST_INSTALLED
#     set (tests/python/conftest.py then leaves the source tree's python/ out):
#     the source tree's package cannot be imported, and the installed one must
#     find the installed library by itself. Checked before pytest starts:
#     lazytensor.__file__ and the loaded library both lie under the prefix.
#  3. pip, offline: a venv made in the same prefix (--system-site-packages, for
#     numpy) and `pip install --no-index SRC/python` (the in-tree build backend,
#     python/_build), then one op through that copy, which must load the
#     library of the prefix's lib/ (skipped, saying so, where python3 -m venv
#     is missing: python3-venv).
# CC (the build's C compiler, else cc) preprocesses the headers for
# tests/python/test_header_sync.py. Exit 77 (skipped) when numpy or pytest is
# missing or pytest collects nothing (its exit 5).
set -uo pipefail
build=${1:?usage: python_check.sh BUILD_DIR [CC]}
build=$(cd "$build" && pwd)
src="$(cd "$(dirname "$0")/.." && pwd)"
py=/usr/bin/python3
if ! "$py" -c 'import numpy, pytest' 2>/dev/null; then
  echo "python_check: $py with numpy and pytest is missing (python3-numpy, python3-pytest): skipped"
  exit 77
fi
[ -e "$build/liblazytensor.so" ] || { echo "python_check: $build/liblazytensor.so is missing"; exit 1; }
[ -n "${2:-}" ] && export CC=$2
unset LAZYTENSOR_LIB
export PYTHONDONTWRITEBYTECODE=1
tmp=$(mktemp -d /tmp/lt-python-check.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
work=$tmp/work # the working folder: nothing importable in it
mkdir -p "$work"
cmake --install "$build" --prefix "$prefix" >"$tmp/install.log" || {
  cat "$tmp/install.log"
  echo "python_check: cmake --install $build failed"
  exit 1
}
init=$(find "$prefix" -path '*/lazytensor/__init__.py' | head -n 1)
if [ -z "$init" ]; then # configured with -DLT_INSTALL_PYTHON=OFF: the source tree's package
  echo "python_check: cmake --install put no Python package under the prefix (LT_INSTALL_PYTHON=OFF):"
  echo "python_check: the suite runs on the source tree's python/ with $build/liblazytensor.so"
  LAZYTENSOR_LIB=$build/liblazytensor.so "$py" -m pytest -q -p no:cacheprovider "$src/tests/python"
  rc=$?
  [ "$rc" -eq 5 ] && { echo "python_check: pytest collected no tests: skipped"; exit 77; }
  exit "$rc"
fi
pydir=$(dirname "$(dirname "$init")")
echo "python_check: the package installed in ${pydir#"$prefix"/} (under the prefix)"

# Where a Python gets lazytensor and the library from: both must lie under the
# prefix (where PYTHON SITE-FOLDER-NAME [PYTHONPATH]).
where() {
  (cd "$work" && PYTHONPATH=${3:-} "$1" - "$prefix" "$2" <<'PY'
import os, sys
import lazytensor as lt
prefix, site = os.path.realpath(sys.argv[1]), sys.argv[2]
pkg, lib = os.path.realpath(lt.__file__), os.path.realpath(lt._lib.lib._name)
ok = pkg.startswith(prefix + os.sep) and os.sep + site + os.sep in pkg and \
    lib.startswith(prefix + os.sep)
# cmake's install records the library's path beside the package: that one loaded
recorded = lt._lib._installed_library(os.path.dirname(lt.__file__))
ok = ok and (recorded is None or os.path.realpath(recorded) == lib)
print("python_check: %s imports <prefix>/%s, loads <prefix>/%s%s" %
      ("ok:" if ok else "WRONG:", os.path.relpath(pkg, prefix),
       os.path.relpath(os.path.abspath(lt._lib.lib._name), prefix),
       " (recorded in _install.py)" if recorded else ""))
assert (lt.tensor([1.0, 2.0]) * 3).numpy().tolist() == [3.0, 6.0]
sys.exit(0 if ok else 1)
PY
  )
}
[ -f "$pydir/lazytensor/_install.py" ] || { echo "python_check: no _install.py in $pydir/lazytensor"; exit 1; }
where "$py" "$(basename "$pydir")" "$pydir" || { echo "python_check: not the installed package and library"; exit 1; }

(cd "$work" && PYTHONPATH=$pydir LAZYTENSOR_TEST_INSTALLED=$prefix \
  "$py" -m pytest -q -p no:cacheprovider "$src/tests/python")
rc=$?
[ "$rc" -eq 5 ] && { echo "python_check: pytest collected no tests: skipped"; exit 77; }
[ "$rc" -ne 0 ] && exit "$rc"

# pip install ./python, offline, into a venv that shares the prefix with the library.
if ! "$py" -m venv --system-site-packages "$prefix" >"$tmp/venv.log" 2>&1; then
  echo "python_check: $py -m venv failed (python3-venv missing?): pip install not checked"
  sed -n 1,5p "$tmp/venv.log"
  exit 0
fi
if ! "$prefix/bin/pip" install -q --no-index --disable-pip-version-check "$src/python" \
  >"$tmp/pip.log" 2>&1; then
  cat "$tmp/pip.log"
  echo "python_check: pip install --no-index $src/python failed"
  exit 1
fi
# this copy, not the cmake-installed one: the venv reads site-packages, and
# the package finds the library in the prefix's lib/ (no _install.py here)
where "$prefix/bin/python" site-packages || { echo "python_check: the pip-installed package failed"; exit 1; }
exit 0
