#!/usr/bin/env bash
# lazytensor-train --export, then lazytensor-classify in another process: the
# accuracy the classifier prints equals the training run's final test accuracy.
# Skipped (77) without the Fashion-MNIST files.
set -euo pipefail
build=$1
dir=${LT_DATA_DIR:-/usr/share/datasets/fashion-mnist}
[ -f "$dir/t10k-images-idx3-ubyte.gz" ] || { echo "no Fashion-MNIST in $dir: skipped"; exit 77; }
tmp=$(mktemp -d /tmp/lt-export.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
"$build/lazytensor-train" --limit-steps 20 --hidden 32 --layers 1 \
  --export "$tmp/mlp.ltp" >"$tmp/train.log"
want=$(sed -n 's/^summary: .*final test accuracy \([0-9.]*\)$/\1/p' "$tmp/train.log")
got=$("$build/lazytensor-classify" "$tmp/mlp.ltp" | sed -n 's/.*accuracy \([0-9.]*\)$/\1/p')
echo "training run: $want, saved program in another process: $got"
[ -n "$want" ] && [ "$want" = "$got" ]
