#!/usr/bin/env bash
# Installs the build into a temporary prefix; checks that every program is
# installed and answers --help; builds the example against it three times:
# through pkg-config with the shared library, through pkg-config --static with
# liblazytensor.a, and through CMake's find_package; then a program with both
# public headers, one with the deprecated names, and checks what the shared
# library exports.
set -euo pipefail
build=$1 cc=$2 src=$(cd "$(dirname "$0")/.." && pwd)
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix" >/dev/null
libdir=$(dirname "$(find "$prefix" -name lazytensor.pc)")
export PKG_CONFIG_PATH=$libdir

# The programs: the ones every install has, and whatever else the build made
# under a lazytensor-* name (the user-facing names; tests and benchmarks have others).
tools="lazytensor-train lazytensor-aot lazytensor-classify lazytensor-example lazytensor-soak"
for f in "$build"/lazytensor-*; do
  [ -f "$f" ] && [ -x "$f" ] && tools="$tools $(basename "$f")"
done
for t in $(tr ' ' '\n' <<<"$tools" | sort -u); do
  [ -x "$prefix/bin/$t" ] || { echo "$t is not installed in $prefix/bin" >&2; exit 1; }
  "$prefix/bin/$t" --help >"$prefix/help.out" 2>&1 || {
    echo "$prefix/bin/$t --help failed:" >&2
    cat "$prefix/help.out" >&2
    exit 1
  }
  grep -q "usage: $t" "$prefix/help.out" || { echo "$t --help printed no usage line" >&2; exit 1; }
done
echo "installed programs: $(tr ' ' '\n' <<<"$tools" | sort -u | tr '\n' ' ')ok"

"$cc" -std=c11 -Wall -Wextra -Werror "$src/examples/example.c" -o "$prefix/ex-pc" \
  $(pkg-config --cflags --libs lazytensor) -Wl,-rpath,"$prefix/lib" -Wl,-rpath,"$(dirname "$libdir")"
"$prefix/ex-pc" | grep -q "sum = 8"
echo "pkg-config consumer: ok"
# Static: liblazytensor.a in place of -llazytensor, everything it needs from
# Libs.private and Requires.private; the program must not need the shared library.
archive=$(pkg-config --variable=libdir lazytensor)/liblazytensor.a
[ -f "$archive" ] || { echo "$archive is not installed" >&2; exit 1; }
static_libs=$(pkg-config --static --libs lazytensor | sed "s|-llazytensor\b|$archive|")
"$cc" -std=c11 -Wall -Wextra -Werror "$src/examples/example.c" -o "$prefix/ex-static" \
  $(pkg-config --static --cflags lazytensor) $static_libs
if readelf -d "$prefix/ex-static" | grep -q 'NEEDED.*liblazytensor'; then
  echo "the static program needs liblazytensor.so" >&2
  exit 1
fi
"$prefix/ex-static" | grep -q "sum = 8"
echo "pkg-config --static consumer: ok"
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

# The public headers, in any order, with the shared library.
cat >"$prefix/both.c" <<'C'
#include <lazytensor_nn.h>
#include <lazytensor_dist.h>
#include <lazytensor.h>
#include <stdio.h>
int main(void) {
  lt_nn_optim_config cfg = lt_nn_optim_defaults(LT_NN_ADAM);
  if (lt_world_size(NULL) != 0) return 3;
  int64_t v = -1;
  if (lt_get_counter("CreateTensor", &v) != LT_OK || v != 0) return 1;
  if (lt_get_counter("NoSuchCounter", &v) != LT_ENOTFOUND) return 2;
  printf("both headers: lr %g\n", cfg.lr);
  return 0;
}
C
"$cc" -std=c11 -Wall -Wextra -Werror "$prefix/both.c" -o "$prefix/both" \
  $(pkg-config --cflags --libs lazytensor) -Wl,-rpath,"$prefix/lib" -Wl,-rpath,"$(dirname "$libdir")"
"$prefix/both" | grep -q "both headers: lr 0.001"
echo "both public headers: ok"

# The old names still compile (and run), each with a deprecation warning.
old_names="lt_requires_grad lt_mark_donatable lt_manual_seed lt_counter lt_metric lt_slice lt_pad
  lt_norm lt_conv2d lt_nn_max_pool2d lt_nn_save"
cat >"$prefix/old.c" <<'C'
#include <lazytensor_nn.h>
int main(void) {
  lt_metric_stats s;
  lt_tensor *x = lt_scalar(lt_cpu(0), LT_F32, 2.5);
  if (lt_requires_grad(x, true) != LT_OK || lt_mark_donatable(x, false) != LT_OK) return 1;
  if (lt_manual_seed(lt_cpu(0), 1) != LT_OK || lt_counter("NoSuchCounter") != -1) return 2;
  if (lt_last_status() != LT_ENOTFOUND || lt_metric("CompileTime", &s) != LT_OK) return 3;
  /* ones [1, 1, 4, 4]; a ones kernel [1, 1, 2, 2]: conv gives 4s [1, 1, 3, 3],
   * pooling by 2 one 4, whose 1-norm is 4 */
  lt_tensor *img = lt_ones(lt_cpu(0), LT_F32, (const int64_t[]){1, 1, 4, 4}, 4);
  const int64_t k[2] = {2, 2}, stop[4] = {1, 1, 2, 2}, pads[8] = {0};
  lt_tensor *w = lt_pad(lt_slice(img, NULL, stop, NULL), pads, 0);
  lt_tensor *y = lt_nn_max_pool2d(lt_conv2d(img, w, NULL, NULL, NULL, NULL, 1), k, NULL, NULL);
  double v = 0;
  if (!y || lt_item(lt_norm(y, 1, NULL, 0, false), 0, &v) != LT_OK || v != 4) return 4;
  int (*save)(const char *, lt_tensor *const *, int) = lt_nn_save; /* compiled, not run */
  if (!save) return 5;
  lt_release(x);
  return 0;
}
C
"$cc" -std=c11 -Wall -Wextra -Werror -Wno-error=deprecated-declarations "$prefix/old.c" \
  -o "$prefix/old" $(pkg-config --cflags --libs lazytensor) -Wl,-rpath,"$prefix/lib" \
  -Wl,-rpath,"$(dirname "$libdir")" 2>"$prefix/old.log"
for n in $old_names; do
  grep -q "$n.*deprecated" "$prefix/old.log" || { echo "no deprecation warning for $n" >&2; exit 1; }
done
"$prefix/old"
echo "deprecated names: ok"

# The shared library exports the public API (LT_API in the installed headers)
# and nothing internal.
so=$(find "$prefix" -name 'liblazytensor.so*' -type f | head -n 1)
exported=$(nm -D --defined-only "$so" | awk '$2 ~ /^[TtWiDdBbRrVv]$/ {print $3}' | sort -u)
# (the ops of lazytensor_ops.h are declared from its rows: X(name, ...) is lt_name)
public=$({ cat "$prefix"/include/lazytensor*.h |
  sed -n 's/^LT_API[^(]*[ *]\(lt_[A-Za-z0-9_]*\)(.*/\1/p'
  sed -n 's/^ *X(\([a-z0-9_]*\),.*/lt_\1/p' "$prefix/include/lazytensor_ops.h"; } | sort -u)
if [ "$(wc -l <<<"$public")" -lt 100 ]; then
  echo "only $(wc -l <<<"$public") public functions found in the headers" >&2
  exit 1
fi
if grep '^lt__' <<<"$exported" >&2; then
  echo "internal (lt__) symbols exported from $so (above)" >&2
  exit 1
fi
missing=$(comm -23 <(echo "$public") <(echo "$exported"))
if [ -n "$missing" ]; then
  echo "public functions not exported from $so:" $missing >&2
  exit 1
fi
extra=$(comm -13 <(echo "$public") <(echo "$exported") | grep -v '^_' || true)
if [ -n "$extra" ]; then
  echo "symbols exported from $so that no public header declares:" $extra >&2
  exit 1
fi
echo "exports: $(wc -l <<<"$public") public functions, nothing else: ok"
