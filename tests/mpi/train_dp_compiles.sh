#!/usr/bin/env bash
# lazytensor-train's data-parallel step compiles once for the whole world:
# every replica traces the same step graph (its shard of the batch is data,
# not a slice at its rank's offset), so --devices 4 counts as many compiles
# (the summary's "compiles N uncached", the UncachedCompile counter) as the
# single-process run at 4x the batch. Before, each replica's step was a graph
# of its own: 4 devices compiled 3 more graphs. (Under mpirun each process
# compiles its own graphs in any case; there the same graph on every rank
# changes no count.) The same with --shard-optimizer. Skipped (77) without the Fashion-MNIST files.
# usage: train_dp_compiles.sh <lazytensor-train>
set -uo pipefail
train=$1
dir=${LT_DATA_DIR:-/usr/share/datasets/fashion-mnist}
[ -f "$dir/t10k-images-idx3-ubyte.gz" ] || { echo "no Fashion-MNIST in $dir: skipped"; exit 77; }
export LT_NUM_THREADS=1 ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
compiles() { sed -n 's/^summary: compiles \([0-9]*\) uncached.*$/\1/p' | tail -1; }
args=(--model mlp --hidden 32 --limit-steps 6 --test-limit 200)
one=$("$train" --batch 64 "${args[@]}" 2>&1 | tee /dev/stderr | compiles)
[ -n "$one" ] || { echo "FAIL: the single-process run printed no compile count"; exit 1; }
dev=$("$train" --devices 4 --batch 16 "${args[@]}" 2>&1 | tee /dev/stderr | compiles)
[ "$dev" = "$one" ] ||
  { echo "FAIL: --devices 4 compiled ${dev:-?} graphs, one process at 4x the batch $one"; exit 1; }
# The sharded optimizer's update works on each replica's own chunk of every
# parameter: taken when the step runs (a shard node), not by a slice at the
# rank's offset, so its step too is one graph for the world.
zero=$("$train" --devices 4 --batch 16 --shard-optimizer "${args[@]}" 2>&1 | tee /dev/stderr | compiles)
[ "$zero" = "$one" ] ||
  { echo "FAIL: --devices 4 --shard-optimizer compiled ${zero:-?} graphs, one process $one"; exit 1; }
echo "--devices 4: $dev compiles (sharded optimizer: $zero), one process at 4x the batch: $one"
