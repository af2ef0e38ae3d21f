#!/usr/bin/env bash
# lazytensor-train --log/--plot end to end:
#  - the CSV's header is the one docs/TRAINING.md documents (both the MLP's
#    and, with the fortunes corpus, the GPT's), and the doc's column table
#    names the header's columns in order;
#  - the rows: one every max(1, steps per epoch / 50) steps, whatever
#    --log-every (which paces the progress lines only), so a whole epoch has
#    at least 40 points; checked on 21 steps of an epoch of 100 (--batch 600:
#    a row every 2 steps) and of the default epoch of 468 (a row every 9);
#  - the epoch's row carries the test accuracy the run printed;
#  - --plot wrote a PNG (when built with cairo).
# Skipped (77) without the Fashion-MNIST files.
set -euo pipefail
build=$1
here=$(cd "$(dirname "$0")" && pwd)
doc=$here/../docs/TRAINING.md
dir=${LT_DATA_DIR:-/usr/share/datasets/fashion-mnist}
[ -f "$dir/t10k-images-idx3-ubyte.gz" ] || { echo "no Fashion-MNIST in $dir: skipped"; exit 77; }
tmp=$(mktemp -d /tmp/lt-trainlog.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
# the documented header of a metric (test_acc, val_loss): a line of its own in the doc
doc_header() { grep -x "step,epoch,[a-z_,]*,$1" "$doc" || fail "docs/TRAINING.md has no $1 header"; }
# the doc's column table, in order: its rows | `name` | ... |
doc_columns() { sed -n 's/^| `\([a-z_]*\)` |.*/\1/p' "$doc" | tr '\n' ',' | sed 's/,$//'; }

plot=()
grep -q "^CAIRO_FOUND:INTERNAL=1" "$build/CMakeCache.txt" && plot=(--plot "$tmp/run.png")
"$build/lazytensor-train" --limit-steps 21 --log-every 5 --batch 600 --hidden 32 --layers 1 \
  --test-limit 500 --log "$tmp/run.csv" "${plot[@]}" >"$tmp/train.log"
cat "$tmp/run.csv"
header=$(head -1 "$tmp/run.csv")
[ "$header" = "$(doc_header test_acc)" ] || fail "header '$header' is not the documented one"
[ "$(doc_columns)" = "$header,val_loss" ] || fail "the doc's columns '$(doc_columns)' are not '$header,val_loss'"
# 60000 / 600 = 100 steps an epoch: a row every 2 steps, each reading the
# loss summed through the step before (1, 3, ..., 19), and the epoch's at 21
[ "$(sed 1d "$tmp/run.csv" | cut -d, -f1 | tr '\n' ' ')" = "1 3 5 7 9 11 13 15 17 19 21 " ] ||
  fail "rows at steps $(sed 1d "$tmp/run.csv" | cut -d, -f1 | tr '\n' ' ')"
# scaled to the whole epoch: 11 rows in 21 of 100 steps is over 40 points
rows=$(($(wc -l <"$tmp/run.csv") - 1))
[ $((rows * 100 / 21)) -ge 40 ] || fail "$rows rows in 21 of 100 steps: under 40 an epoch"
# --log-every still paces the progress lines
[ "$(grep -c "^epoch 1/1 step" "$tmp/train.log")" -eq 4 ] || fail "not 4 progress lines"
# the rate of the row's last step: cosine from 1e-3 over 21 steps, step index 4 (row 3: step 5)
awk -v lr="$(sed -n 4p "$tmp/run.csv" | cut -d, -f4)" \
  'BEGIN { w = 0.5e-3 * (1 + cos(3.14159265358979 * 4 / 21)); exit !(lr - w < 1e-9 && w - lr < 1e-9) }' ||
  fail "row 3's lr"
acc=$(sed -n 's/^summary: .*final test accuracy \([0-9.]*\)$/\1/p' "$tmp/train.log")
last=$(tail -1 "$tmp/run.csv")
[ "$(echo "$last" | cut -d, -f1,2)" = "21,1" ]
awk -v a="$acc" -v b="$(echo "$last" | cut -d, -f6)" 'BEGIN { exit !(a - b < 1e-4 && b - a < 1e-4) }' ||
  fail "the epoch's row lacks the printed accuracy $acc"
if [ ${#plot[@]} -gt 0 ]; then
  [ "$(head -c 8 "$tmp/run.png" | od -An -tx1 | tr -d ' \n')" = "89504e470d0a1a0a" ]
  grep -q "^plot: $tmp/run.png$" "$tmp/train.log"
fi

# the default epoch, batch 128: 468 steps, a row every 9 (8, 17 through 19
# steps, then the epoch's row): 19 / 9 rows scale to 52 + 1 in the epoch
"$build/lazytensor-train" --limit-steps 19 --hidden 16 --layers 1 --test-limit 100 \
  --log "$tmp/default.csv" >"$tmp/default.log"
[ "$(sed 1d "$tmp/default.csv" | cut -d, -f1 | tr '\n' ' ')" = "8 17 19 " ] ||
  fail "default batch: rows at $(sed 1d "$tmp/default.csv" | cut -d, -f1 | tr '\n' ' ')"

# the GPT's header (with its corpus): the documented one, val_loss on the evaluation's row
if [ -d /usr/share/games/fortunes ]; then
  "$build/lazytensor-train" --model gpt --steps 4 --eval-every 2 --width 16 --layers 1 --heads 1 \
    --context 8 --batch 2 --eval-windows 2 --log "$tmp/gpt.csv" >"$tmp/gpt.log"
  cat "$tmp/gpt.csv"
  [ "$(head -1 "$tmp/gpt.csv")" = "$(doc_header val_loss)" ] || fail "the GPT's header"
  [ "$(sed 1d "$tmp/gpt.csv" | cut -d, -f1,6 | grep -c ',[0-9]')" -eq 2 ] ||
    fail "val_loss not on the evaluation's and the last row"
fi
echo "train_log: ok"
