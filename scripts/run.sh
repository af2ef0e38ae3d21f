#!/usr/bin/env bash
# The main job: installs dependencies, builds, and runs the example program
# (traces a small graph twice, reads the results, prints the metrics).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j "$(nproc)"
./build/lazytensor-example
