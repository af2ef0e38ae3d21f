#!/usr/bin/env bash
# Installs the build into a temporary prefix and builds the example against it
# twice: once through pkg-config, once through CMake's find_package.
set -euo pipefail
build=$1 cc=$2 src=$(cd "$(dirname "$0")/.." && pwd)
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix" >/dev/null
libdir=$(dirname "$(find "$prefix" -name lazytensor.pc)")
export PKG_CONFIG_PATH=$libdir
"$cc" -std=c11 -Wall -Wextra -Werror "$src/examples/example.c" -o "$prefix/ex-pc" \
  $(pkg-config --cflags --libs lazytensor) -Wl,-rpath,"$prefix/lib" -Wl,-rpath,"$(dirname "$libdir")"
"$prefix/ex-pc" | grep -q "sum = 8"
echo "pkg-config consumer: ok"
mkdir -p "$prefix/consumer"
cat >"$prefix/consumer/CMakeLists.txt" <<CM
cmake_minimum_required(VERSION 3.25)
project(consumer C)
find_package(lazytensor REQUIRED)
add_executable(ex $src/examples/example.c)
target_link_libraries(ex PRIVATE lazytensor::lazytensor)
CM
cmake -S "$prefix/consumer" -B "$prefix/consumer/build" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_C_COMPILER="$cc" >/dev/null
cmake --build "$prefix/consumer/build" >/dev/null
"$prefix/consumer/build/ex" | grep -q "sum = 8"
echo "CMake find_package consumer: ok"
