#!/usr/bin/env bash
# lazytensor-train --log/--plot end to end: the CSV has its header, a row per
# progress update (step 5, 10, 15, 20 with --log-every 5) and the epoch's row
# carrying the test accuracy the run printed; --plot wrote a PNG (when built
# with cairo). Skipped (77) without the Fashion-MNIST files.
set -euo pipefail
build=$1
dir=${LT_DATA_DIR:-/usr/share/datasets/fashion-mnist}
[ -f "$dir/t10k-images-idx3-ubyte.gz" ] || { echo "no Fashion-MNIST in $dir: skipped"; exit 77; }
tmp=$(mktemp -d /tmp/lt-trainlog.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
plot=()
grep -q "^CAIRO_FOUND:INTERNAL=1" "$build/CMakeCache.txt" && plot=(--plot "$tmp/run.png")
"$build/lazytensor-train" --limit-steps 21 --log-every 5 --hidden 32 --layers 1 --test-limit 500 \
  --log "$tmp/run.csv" "${plot[@]}" >"$tmp/train.log"
cat "$tmp/run.csv"
[ "$(head -1 "$tmp/run.csv")" = "step,epoch,loss,lr,steps_per_s,test_acc" ]
# progress rows: the loss summed through the step before the update (4, 9, 14, 19)
[ "$(sed -n '2,5p' "$tmp/run.csv" | cut -d, -f1 | tr '\n' ' ')" = "4 9 14 19 " ]
# the rate of the window's last step: cosine from 1e-3 over 21 steps, step index 3
awk -v lr="$(sed -n 2p "$tmp/run.csv" | cut -d, -f4)" \
  'BEGIN { w = 0.5e-3 * (1 + cos(3.14159265358979 * 3 / 21)); exit !(lr - w < 1e-9 && w - lr < 1e-9) }'
acc=$(sed -n 's/^summary: .*final test accuracy \([0-9.]*\)$/\1/p' "$tmp/train.log")
last=$(tail -1 "$tmp/run.csv")
[ "$(echo "$last" | cut -d, -f1,2)" = "21,1" ]
awk -v a="$acc" -v b="$(echo "$last" | cut -d, -f6)" 'BEGIN { exit !(a - b < 1e-4 && b - a < 1e-4) }'
if [ ${#plot[@]} -gt 0 ]; then
  [ "$(head -c 8 "$tmp/run.png" | od -An -tx1 | tr -d ' \n')" = "89504e470d0a1a0a" ]
  grep -q "^plot: $tmp/run.png$" "$tmp/train.log"
fi
echo "train_log: ok"
