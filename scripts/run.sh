#!/usr/bin/env bash
# The main job: installs dependencies, builds, and trains the default MLP
# (784-512-512-10, ReLU, Adam lr 1e-3, batch 128) on Fashion-MNIST for one
# epoch on the cpu backend, printing test accuracy and a metrics summary.
# Extra arguments go to lazytensor-train (e.g. --epochs 5). The run's log and
# its training curves are left in build/run.csv and build/run.png.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j "$(nproc)" --target lazytensor-train # the job needs nothing else
./build/lazytensor-train --epochs 1 --log build/run.csv --plot build/run.png "$@"
echo "training curves: $PWD/build/run.png (log: $PWD/build/run.csv)"
