#!/usr/bin/env bash
# Installs what lazytensor needs from Debian 12's packages (run as root; uses
# sudo when not root). Skips apt entirely when everything is already there.
set -euo pipefail
deps=(build-essential cmake pkg-config clang clang-format valgrind libcmocka-dev libxxhash-dev llvm-19-dev
  libopenblas-dev libdnnl-dev zlib1g-dev libzstd-dev dataset-fashion-mnist fortunes
  libcairo2-dev python3-numpy python3-pytest python3-venv libopenmpi-dev openmpi-bin)
missing=()
for p in "${deps[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -q
  $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
