#!/usr/bin/env bash
# The one-way layers of src/ (docs/DESIGN.md, section "Layers"): a lower layer never
# includes a header of a higher one and never references a symbol that a higher one
# defines. Upward calls go through hooks that the higher layer installs.
#
#   scripts/check_layers.sh [BUILDDIR]   includes of src/**/*.{c,h}, then the undefined
#                                        symbols of the objects of the CMake object library
#                                        lt_objects in BUILDDIR (default: build), which must
#                                        be built (cmake --build BUILDDIR --target lt_objects)
#   scripts/check_layers.sh --self-test  checks the checker on small fake trees in a temp dir
#
# Each violation is one line:
#   LAYER VIOLATION: <file> (<layer>) -> <target> (<layer>) via include|symbol <name>
# and a pair of folders that reference each other is also reported as a circle. Exit status
# 0 when there is none, 1 otherwise.
#
# An "#include" (quoted) resolves like the build does: the including file's folder first,
# then src/core, src/ and include/; an <include> only against the last three (anything else
# is a system header). A symbol that no object of the library defines is external (libc,
# LLVM, OpenBLAS) and fine.
set -euo pipefail

# ---- the layer table: folder under src/ -> rank (a higher rank is a higher layer) -------
# Every folder of src/ must be here: a folder missing from the table is an error.
# A file may include a header of, and reference a symbol defined in, its own folder or a
# folder of lower rank only. Sub-folders of backend/ are layers of their own inside the
# backend layer: the interface and registry (backend/) name neither ref nor cpu.
declare -A RANK=(
  [core]=10
  [backend]=20
  [backend/ref]=21
  [backend/cpu]=22
  [exec]=30
  [ops]=40
  [autograd]=50
  [nn]=60
)
# Pairs "A B": A must not use B even though B ranks lower (siblings inside one layer).
FORBIDDEN=(
  "backend/cpu backend/ref"
)
# Files directly in src/ (the layer called "src" below): any file may include a header
# there, and such a header may include only include/lazytensor.h.
ROOT_RANK=0
PUBLIC_RANK=-1 # include/: the public API, below everything

usage() {
  sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
}

# ---- path helpers (no forks: the tree has a few hundred includes) ----------------------
# norm PATH -> REPLY: PATH with "." and ".." folded (relative paths stay relative).
norm() {
  local IFS=/ part out=()
  local -a parts
  read -ra parts <<<"$1"
  for part in "${parts[@]}"; do
    case "$part" in
    "" | .) ;;
    ..) if ((${#out[@]})) && [[ ${out[-1]} != .. ]]; then unset 'out[-1]'; else out+=(..); fi ;;
    *) out+=("$part") ;;
    esac
  done
  REPLY="${out[*]}"
}

# layer_of PATH (relative to the root) -> REPLY: layer name, or "" outside src/.
layer_of() {
  local p=$1
  case "$p" in
  src/*)
    p=${p#src/}
    if [[ $p == */* ]]; then REPLY=${p%/*}; else REPLY=src; fi
    ;;
  include/*) REPLY=include ;;
  *) REPLY="" ;;
  esac
}

# rank_of LAYER -> REPLY: its rank, or "" when the layer is not in the table.
rank_of() {
  case "$1" in
  src) REPLY=$ROOT_RANK ;;
  include) REPLY=$PUBLIC_RANK ;;
  *) REPLY=${RANK[$1]:-} ;;
  esac
}

folder() { # LAYER: its folder, as printed
  if [[ $1 == src ]]; then echo "src/ (top)"; else echo "src/$1"; fi
}

forbidden_pair() { # LAYER_FROM LAYER_TO: 0 when the table forbids the pair
  local pair
  for pair in "${FORBIDDEN[@]}"; do
    [[ $pair == "$1 $2" ]] && return 0
  done
  return 1
}

# ---- the check -------------------------------------------------------------------------
# check ROOT BUILDDIR: prints violations, returns 1 when there is any.
check() {
  local root=$1 build=$2
  local nviol=0 nerr=0
  declare -A seen=() edge=()
  local -a files=()

  report() { # FILE LAYER TARGET TLAYER KIND NAME [NOTE]
    local key="$1|$3|$5|$6"
    [[ -n ${seen[$key]:-} ]] && return 0
    seen[$key]=1
    echo "LAYER VIOLATION: $1 ($2) -> $3 ($4) via $5 $6${7:+ ($7)}"
    nviol=$((nviol + 1))
  }
  problem() {
    echo "LAYER CHECK ERROR: $*"
    nerr=$((nerr + 1))
  }
  # judge FILE TARGET KIND NAME: one reference of FILE to TARGET (both relative to root).
  judge() {
    local file=$1 target=$2 kind=$3 name=$4 fl tl fr tr
    layer_of "$file"
    fl=$REPLY
    layer_of "$target"
    tl=$REPLY
    [[ -z $tl ]] && return 0 # outside src/ and include/: not ours
    rank_of "$fl"
    fr=$REPLY
    rank_of "$tl"
    tr=$REPLY
    [[ -z $fr || -z $tr ]] && return 0 # unknown folder: reported once, below
    if [[ $fl != "$tl" && $tl != include ]]; then
      [[ -n ${edge[$fl|$tl]:-} ]] || edge[$fl|$tl]="$file -> $target via $kind $name"
    fi
    if [[ $fl == src && $kind == include && $target != include/lazytensor.h ]]; then
      report "$file" "$fl" "$target" "$tl" "$kind" "$name" \
        "a header directly in src/ may include only lazytensor.h"
    elif ((tr > fr)); then
      report "$file" "$fl" "$target" "$tl" "$kind" "$name"
    elif forbidden_pair "$fl" "$tl"; then
      report "$file" "$fl" "$target" "$tl" "$kind" "$name" "$fl must not use $tl"
    fi
  }

  cd "$root"
  [[ -d src ]] || {
    echo "check_layers: no src/ under $root" >&2
    return 2
  }

  # Every folder of src/ is in the table.
  local d
  while IFS= read -r d; do
    d=${d#src/}
    [[ -n ${RANK[$d]:-} ]] ||
      problem "src/$d is not in the layer table of scripts/check_layers.sh (add it with its rank)"
  done < <(find src -mindepth 1 -type d | sort)

  # 1. Includes.
  mapfile -t files < <(find src -type f \( -name '*.c' -o -name '*.h' \) | sort)
  local line file inc dir cand target delim n=0
  local re='^[[:space:]]*#[[:space:]]*include[[:space:]]*([<"])([^">]+)[">]'
  while IFS= read -r line; do
    file=${line%%:*}
    line=${line#*:}
    line=${line#*:}
    [[ $line =~ $re ]] || continue
    delim=${BASH_REMATCH[1]}
    inc=${BASH_REMATCH[2]}
    dir=${file%/*}
    target=""
    if [[ $delim == '"' ]]; then set -- "$dir" src/core src include; else set -- src/core src include; fi
    for cand in "$@"; do
      norm "$cand/$inc"
      if [[ -f $REPLY ]]; then
        target=$REPLY
        break
      fi
    done
    if [[ -z $target ]]; then
      [[ $delim == '"' ]] && echo "check_layers: note: $file: \"$inc\" not found (ignored)" >&2
      continue
    fi
    n=$((n + 1))
    judge "$file" "$target" include "$inc"
  done < <(grep -HnE '^[[:space:]]*#[[:space:]]*include' "${files[@]}" /dev/null || true)
  local nincludes=$n

  # 2. Symbols, from the objects of lt_objects.
  local objdir="$build/CMakeFiles/lt_objects.dir"
  if [[ ! -d $objdir/src ]]; then
    problem "no objects under $objdir/src: build first (cmake --build $build --target lt_objects)"
  else
    local -a objs=()
    declare -A src_of=() def=()
    local o s
    while IFS= read -r o; do
      s=${o#"$objdir"/}
      s=${s%.o}
      if [[ ! -f $s ]]; then
        echo "check_layers: note: $o is stale (no $s), ignored" >&2
        continue
      fi
      objs+=("$o")
      src_of[$o]=$s
    done < <(find "$objdir/src" -type f -name '*.c.o' | sort)
    for s in "${files[@]}"; do
      [[ $s == *.c ]] || continue
      if [[ ! -f $objdir/$s.o ]]; then
        problem "$s has no object in $objdir (not built, or the build failed)"
      elif [[ $objdir/$s.o -ot $s ]]; then
        echo "check_layers: note: $objdir/$s.o is older than $s (rebuild for a current answer)" >&2
      fi
    done
    local sym rest
    if ((${#objs[@]})); then
      while read -r o sym rest; do
        o=${o%:}
        [[ -n ${def[$sym]:-} ]] || def[$sym]=${src_of[$o]}
      done < <(nm -A -P -g --defined-only "${objs[@]}")
      while read -r o sym rest; do
        o=${o%:}
        [[ -n ${def[$sym]:-} ]] || continue # external
        judge "${src_of[$o]}" "${def[$sym]}" symbol "$sym"
      done < <(nm -A -P -u "${objs[@]}")
    fi
  fi

  # 3. Circles: folder A references B and B references A. The order already forbids one
  # of the two directions; the circle is named too, since it is what must be cut.
  local k a b
  local -a circles=()
  for k in "${!edge[@]}"; do
    a=${k%%|*}
    b=${k#*|}
    [[ $a < $b && -n ${edge[$b|$a]:-} ]] || continue
    circles+=("LAYER VIOLATION: circle between $(folder "$a") and $(folder "$b") (the one-way layer order forbids it): ${edge[$a|$b]}; ${edge[$b|$a]}")
  done
  if ((${#circles[@]})); then
    printf '%s\n' "${circles[@]}" | sort
    nviol=$((nviol + ${#circles[@]}))
  fi

  if ((nviol + nerr)); then
    echo "check_layers: $nviol violation(s), $nerr error(s)"
    return 1
  fi
  echo "check_layers: ok (${#files[@]} files, $nincludes includes, one-way layers)"
}

# ---- self-test -------------------------------------------------------------------------
self_test() {
  local tmp fails=0 cc out
  tmp=$(mktemp -d "${TMPDIR:-/tmp}/check_layers.XXXXXX")
  # shellcheck disable=SC2064 # $tmp is local: expand it now
  trap "rm -rf '$tmp'" EXIT
  cc=${CC:-cc}
  command -v "$cc" >/dev/null || cc=gcc

  # A clean tree: core < exec, exec calls down into core, a header in src/ used by both.
  mk() { # ROOT: writes the clean fake tree
    mkdir -p "$1"/include "$1"/src/core "$1"/src/exec "$1"/src/backend/ref "$1"/src/backend/cpu
    printf '#pragma once\nint lt_api(void);\n' >"$1"/include/lazytensor.h
    printf '#pragma once\n#include "lazytensor.h"\n' >"$1"/src/lt_hooks.h
    printf '#pragma once\nint core_fn(void);\n' >"$1"/src/core/core.h
    printf '#include "core.h"\n#include "../lt_hooks.h"\nint core_fn(void) { return 1; }\n' \
      >"$1"/src/core/core.c
    printf '#pragma once\n#include "core.h"\nint exec_fn(void);\n' >"$1"/src/exec/exec.h
    printf '#include "exec.h"\n#include <lt_hooks.h>\nint exec_fn(void) { return core_fn(); }\n' \
      >"$1"/src/exec/exec.c
    printf 'int ref_fn(void) { return 2; }\n' >"$1"/src/backend/ref/ref.c
    printf 'int cpu_fn(void) { return 3; }\n' >"$1"/src/backend/cpu/cpu.c
  }
  build() { # ROOT: compiles every .c like CMake lays out lt_objects
    local f
    while IFS= read -r f; do
      mkdir -p "$1/build/CMakeFiles/lt_objects.dir/${f%/*}"
      "$cc" -c -w -I"$1/include" -I"$1/src/core" -I"$1/src" -o "$1/build/CMakeFiles/lt_objects.dir/$f.o" "$1/$f"
    done < <(cd "$1" && find src -name '*.c')
  }
  # expect NAME ROOT WANT_RC [FIXED STRING...]: runs the check on ROOT, wants WANT_RC and
  # every string in the output.
  expect() {
    local name=$1 root=$2 want=$3 rc=0 s
    shift 3
    out=$( (check "$root" "$root/build") 2>&1) || rc=$?
    if [[ $rc != "$want" ]]; then
      echo "self-test FAIL: $name: exit $rc, expected $want"
      printf '%s\n' "$out" | sed 's/^/    /'
      fails=$((fails + 1))
      return
    fi
    for s in "$@"; do
      if ! grep -qF -- "$s" <<<"$out"; then
        echo "self-test FAIL: $name: no line with: $s"
        printf '%s\n' "$out" | sed 's/^/    /'
        fails=$((fails + 1))
        return
      fi
    done
    echo "self-test ok: $name"
  }

  local t
  t=$tmp/clean && mk "$t" && build "$t"
  expect "clean tree passes" "$t" 0 "check_layers: ok"

  t=$tmp/include && mk "$t"
  printf '#include "../exec/exec.h"\nint core_up(void) { return 0; }\n' >"$t"/src/core/up.c
  build "$t"
  expect "upward include" "$t" 1 \
    'LAYER VIOLATION: src/core/up.c (core) -> src/exec/exec.h (exec) via include ../exec/exec.h' \
    'LAYER VIOLATION: circle between src/core and src/exec'

  t=$tmp/symbol && mk "$t"
  printf 'int exec_fn(void);\nint core_up(void) { return exec_fn(); }\n' >"$t"/src/core/up.c
  build "$t"
  expect "upward symbol" "$t" 1 \
    'LAYER VIOLATION: src/core/up.c (core) -> src/exec/exec.c (exec) via symbol exec_fn' \
    'LAYER VIOLATION: circle between src/core and src/exec'

  t=$tmp/siblings && mk "$t"
  printf 'int ref_fn(void);\nint cpu_up(void) { return ref_fn(); }\n' >"$t"/src/backend/cpu/up.c
  build "$t"
  expect "cpu uses ref" "$t" 1 \
    'LAYER VIOLATION: src/backend/cpu/up.c (backend/cpu) -> src/backend/ref/ref.c (backend/ref) via symbol ref_fn (backend/cpu must not use backend/ref)'

  t=$tmp/roothdr && mk "$t"
  printf '#pragma once\n#include "core/core.h"\n' >"$t"/src/lt_bad.h
  build "$t"
  expect "header in src/ includes a layer" "$t" 1 \
    'LAYER VIOLATION: src/lt_bad.h (src) -> src/core/core.h (core) via include core/core.h'

  t=$tmp/folder && mk "$t"
  mkdir -p "$t"/src/extra && printf 'int extra_fn(void) { return 4; }\n' >"$t"/src/extra/extra.c
  build "$t"
  expect "folder missing from the table" "$t" 1 \
    'LAYER CHECK ERROR: src/extra is not in the layer table'

  t=$tmp/unbuilt && mk "$t"
  expect "no objects" "$t" 1 'LAYER CHECK ERROR: no objects under'

  if ((fails)); then
    echo "check_layers self-test: $fails failure(s)"
    return 1
  fi
  echo "check_layers self-test: ok"
}

case "${1:-}" in
-h | --help)
  usage
  exit 0
  ;;
--self-test)
  self_test
  exit $?
  ;;
esac
builddir=${1:-build}
[[ $builddir == /* ]] || builddir=$PWD/$builddir
check "$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)" "$builddir"
