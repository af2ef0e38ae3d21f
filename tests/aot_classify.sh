#!/usr/bin/env bash
# lazytensor-train --export, lazytensor-aot on the saved program, then
# examples/classify_aot.c linked with the generated object only: its accuracy
# equals the training run's, and the binary needs nothing beyond libc and libm.
# Skipped (77) without the Fashion-MNIST files.
set -euo pipefail
build=$1 cc=$2 src=$(cd "$(dirname "$0")/.." && pwd)
dir=${LT_DATA_DIR:-/usr/share/datasets/fashion-mnist}
[ -f "$dir/t10k-images-idx3-ubyte.gz" ] || { echo "no Fashion-MNIST in $dir: skipped"; exit 77; }
tmp=$(mktemp -d /tmp/lt-aot.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
"$build/lazytensor-train" --limit-steps 20 --hidden 32 --export "$tmp/mlp.ltp" >"$tmp/train.log"
want=$(sed -n 's/^summary: .*final test accuracy \([0-9.]*\)$/\1/p' "$tmp/train.log")
"$build/lazytensor-aot" "$tmp/mlp.ltp" -o "$tmp/model" --cc "$cc"
"$cc" -std=c11 -Wall -Wextra -Werror -O2 "$src/examples/classify_aot.c" "$tmp/model.o" \
  -I"$tmp" -lm -o "$tmp/classify_aot"
gunzip -c "$dir/t10k-images-idx3-ubyte.gz" >"$tmp/images"
gunzip -c "$dir/t10k-labels-idx1-ubyte.gz" >"$tmp/labels"
got=$("$tmp/classify_aot" "$tmp/images" "$tmp/labels" "$tmp/aot.pred" |
  sed -n 's/.*accuracy \([0-9.]*\)$/\1/p')
echo "training run: $want, AOT object: $got"
[ -n "$want" ] && [ "$want" = "$got" ]
# Image by image: the AOT object predicts what the JIT runs of the same saved
# program predict, for all 10,000 test images.
"$build/lazytensor-classify" "$tmp/mlp.ltp" "$dir" "$tmp/jit.pred" >/dev/null
[ "$(wc -l <"$tmp/aot.pred")" -eq 10000 ] || { echo "AOT wrote $(wc -l <"$tmp/aot.pred") predictions" >&2; exit 1; }
cmp "$tmp/jit.pred" "$tmp/aot.pred" || { echo "AOT and JIT predictions differ" >&2; exit 1; }
echo "predictions: the AOT object's equal the JIT's on all 10000 test images"
deps=$(ldd "$tmp/classify_aot" | awk '{print $1}' | grep -v -E '^(linux-vdso|/lib.*/ld-linux|libc\.so|libm\.so)' || true)
[ -z "$deps" ] || { echo "unexpected dynamic dependencies: $deps" >&2; exit 1; }
echo "dynamic dependencies: libc/libm only"
