#!/usr/bin/env bash
# lazytensor-train's command line catches mistakes before it trains, and
# says what went wrong in training (ctest train_cli; tiny runs):
#  - the paths of --save, --export, --log and --plot are checked at start-up:
#    a missing directory fails at once (status 2, the option and the path
#    named), before any training step;
#  - --plot alone leaves no FILE.png.csv behind (its log is a temporary
#    file) and its messages name --plot, not --log;
#  - --model cnn refuses --hidden and --layers (the MLP's), as gpt refuses
#    what it does not use;
#  - a diverging loss (--lr 1e10) is warned about on stderr; a sound run
#    gives no warning;
#  - --precision takes f32 or bf16 only; a bf16 run says so in its header
#    and trains (the MLP and the GPT, replicated or not).
# Skipped (77) without the Fashion-MNIST files.
set -uo pipefail
build=$1
train=$build/lazytensor-train
dir=${LT_DATA_DIR:-/usr/share/datasets/fashion-mnist}
[ -f "$dir/t10k-images-idx3-ubyte.gz" ] || { echo "no Fashion-MNIST in $dir: skipped"; exit 77; }
tmp=$(mktemp -d /tmp/lt-traincli.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
tiny=(--limit-steps 3 --log-every 1 --hidden 16 --layers 1 --test-limit 100)
fail() { echo "FAIL: $*"; exit 1; }
# expect_refusal STATUS NEEDLE args...: exits with STATUS, NEEDLE on stderr, no training
expect_refusal() {
  local want=$1 needle=$2
  shift 2
  "$train" "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  cat "$tmp/err"
  [ $rc -eq "$want" ] || fail "$* exited $rc, want $want"
  grep -qF -- "$needle" "$tmp/err" || fail "$*: stderr lacks '$needle'"
  ! grep -q "^epoch" "$tmp/out" || fail "$*: trained before refusing"
}
for opt in --save --export --log --plot; do
  expect_refusal 2 "$opt $tmp/no/such/dir/f: directory $tmp/no/such/dir does not exist" \
    "${tiny[@]}" "$opt" "$tmp/no/such/dir/f"
done
expect_refusal 2 "--save $tmp/no/g: directory $tmp/no does not exist" \
  --model gpt --steps 2 --save "$tmp/no/g"
expect_refusal 2 "--export $tmp: is a directory" "${tiny[@]}" --export "$tmp"
expect_refusal 2 "--hidden is an option of the MLP; --model cnn" --model cnn --hidden 32
expect_refusal 2 "--layers is an option of the MLP; --model cnn" --model cnn --layers 1

# --plot alone: the log is a temporary file in TMPDIR, gone after the run
mkdir "$tmp/tmpdir"
TMPDIR=$tmp/tmpdir "$train" "${tiny[@]}" --plot "$tmp/run.png" >"$tmp/out" 2>"$tmp/err"
rc=$?
cat "$tmp/out" "$tmp/err"
[ ! -e "$tmp/run.png.csv" ] || fail "--plot alone wrote $tmp/run.png.csv"
[ -z "$(ls -A "$tmp/tmpdir")" ] || fail "--plot alone left $(ls "$tmp/tmpdir") in TMPDIR"
! grep -q -- "--log" "$tmp/err" || fail "--plot's messages name --log"
! grep -q "^log: " "$tmp/out" || fail "--plot alone reports a log file"
if grep -q "^CAIRO_FOUND:INTERNAL=1" "$build/CMakeCache.txt"; then
  [ $rc -eq 0 ] || fail "--plot run exited $rc"
  grep -q "^plot: $tmp/run.png$" "$tmp/out" || fail "no plot line"
  [ "$(head -c 8 "$tmp/run.png" | od -An -tx1 | tr -d ' \n')" = "89504e470d0a1a0a" ] ||
    fail "$tmp/run.png is not a PNG"
else
  grep -q -- "--plot $tmp/run.png: built without cairo" "$tmp/err" || fail "no --plot error"
fi
# that sound run (the default rate) gave no divergence warning
! grep -q "warning: the training loss" "$tmp/err" || fail "warning on a sound run"

# --lr 1e10 diverges (its loss reaches 1e22 and more): warned once, on stderr
"$train" "${tiny[@]}" --lr 1e10 >"$tmp/out" 2>"$tmp/err" || fail "--lr 1e10 run failed"
cat "$tmp/err"
[ "$(grep -c "warning: the training loss is .* training diverges; lower --lr?" "$tmp/err")" -eq 1 ] ||
  fail "no single divergence warning for --lr 1e10"
# --precision: f32 or bf16, named in the run's header
expect_refusal 2 "bad value 'fp8' for --precision" "${tiny[@]}" --precision fp8
"$train" "${tiny[@]}" --precision bf16 >"$tmp/out" 2>"$tmp/err" || fail "--precision bf16 failed"
grep -q "precision bf16 (autocast, products on " "$tmp/out" || fail "no bf16 in the MLP's header"
grep -q "test accuracy" "$tmp/out" || fail "the bf16 MLP run did not evaluate"
for dev in 1 2; do
  "$train" --model gpt --steps 2 --eval-windows 32 --devices $dev --precision bf16 >"$tmp/out" \
    2>"$tmp/err" || fail "--model gpt --devices $dev --precision bf16 failed: $(cat "$tmp/err")"
  grep -q "precision bf16 (autocast" "$tmp/out" || fail "no bf16 in the GPT's header ($dev)"
  grep -q "val_loss" "$tmp/out" || fail "the bf16 GPT run did not evaluate ($dev)"
done
echo "train_cli: ok"
