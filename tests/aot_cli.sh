#!/usr/bin/env bash
# lazytensor-aot's command line (ctest aot_cli): --help prints the usage on
# stdout and exits 0, as GNU tools do; an -o NAME whose directory does not
# exist fails with a message naming the file, not silently. Skipped (77)
# without the Fashion-MNIST files (the program comes from a tiny
# lazytensor-train --export).
set -uo pipefail
build=$1
dir=${LT_DATA_DIR:-/usr/share/datasets/fashion-mnist}
[ -f "$dir/t10k-images-idx3-ubyte.gz" ] || { echo "no Fashion-MNIST in $dir: skipped"; exit 77; }
tmp=$(mktemp -d /tmp/lt-aotcli.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
aot=$build/lazytensor-aot
"$aot" --help >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc -eq 0 ] || fail "--help exited $rc"
grep -q "^usage: lazytensor-aot" "$tmp/out" || fail "--help printed no usage on stdout"
[ ! -s "$tmp/err" ] || fail "--help wrote to stderr: $(cat "$tmp/err")"
"$aot" --bogus >"$tmp/out" 2>"$tmp/err"
[ $? -eq 2 ] || fail "a bad argument did not exit 2"
grep -q "unexpected argument '--bogus'" "$tmp/err" || fail "no message for a bad argument"

"$build/lazytensor-train" --epochs 0 --test-limit 10 --hidden 8 --layers 0 \
  --export "$tmp/p.ltp" >/dev/null || fail "making the program failed"
"$aot" "$tmp/p.ltp" -o "$tmp/no/such/dir/x" >"$tmp/out" 2>"$tmp/err"
rc=$?
cat "$tmp/err"
[ $rc -eq 1 ] || fail "-o into a missing directory exited $rc"
grep -q "lazytensor-aot: -o: cannot write $tmp/no/such/dir/x\.[ch]: No such file or directory" \
  "$tmp/err" || fail "no message naming the file"
echo "aot_cli: ok"
