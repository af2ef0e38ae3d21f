#!/usr/bin/env bash
# The one-way layers of src/ (docs/ARCHITECTURE.md, "Source layers"): a lower layer never
# includes a header of a higher one and never references a symbol that a higher one
# defines. Upward calls go through hooks that the higher layer installs.
#
#   scripts/check_layers.sh [BUILDDIR]   the checks below; the symbols come from the objects
#                                        of the CMake object library lt_objects in BUILDDIR
#                                        (default: build), which must be built
#                                        (cmake --build BUILDDIR --target lt_objects)
#   scripts/check_layers.sh --self-test  checks the checker on small fake trees in a temp dir
#
#   1. Includes of src/**/*.{c,h}: a file includes headers of its own layer or lower ones.
#      A public header (include/*.h) ranks as the highest layer that defines one of the
#      LT_API functions it declares (read from the objects), or as the highest public
#      header it includes, whichever is higher; a file of layer L includes it only when
#      that rank is <= L, so that no layer compiles against an API above it. The base
#      header (PUBLIC_BASE below) is the one exception, with its reason.
#   2. Symbols: an undefined symbol of an object that another object defines must be
#      defined in its own layer or a lower one.
#   3. Programs outside src/ (the folders of OUTSIDE: tools/, bench/, fuzz/, examples/)
#      include the public API, headers of those folders, and an internal header of src/
#      only where the ALLOW list below names that file and header with a reason; a file
#      that names an internal identifier (lt__*) needs such an entry.
#
# Each violation is one line:
#   LAYER VIOLATION: <file> (<layer>) -> <target> (<layer>) via include|symbol <name>
# and a pair of folders that reference each other is also reported as a circle. Exit status
# 0 when there is none, 1 otherwise.
#
# An "#include" (quoted) resolves like the build does: the including file's folder first,
# then src/core, src/ and include/ (for a public header: include/ only; for a program
# outside src/: include/, src/, src/core); an <include> only against the same folders less
# the file's own (anything else is a system header). A symbol that no object of the library
# defines is external (libc, LLVM, OpenBLAS) and fine.
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
PUBLIC_RANK=-1 # a public header that declares no function of the library: below everything

# The base public header: every layer includes it for the types, status codes and error
# calls they all share, while its functions are defined from core up to autograd (splitting
# it per layer would touch every file of the library). So it alone is not ranked; a call
# through it to a higher layer is still a symbol violation (check 2), and it must include
# no other public header, so that the higher APIs never reach a layer through it.
PUBLIC_BASE=include/lazytensor.h
# Its one part in a file of its own: the public op table (its rows declare the
# elementwise and reduction functions that lazytensor.h declares from it), of the same
# standing as the base.
PUBLIC_BASE_PART=include/lazytensor_ops.h

# ---- programs outside src/ -------------------------------------------------------------
OUTSIDE=(tools bench fuzz examples)
# "FILE HEADER|why": FILE (outside src/) may include the internal HEADER (under src/).
# Keep it short: a program that needs more than the public API says here what and why.
# An entry that no include uses is an error (the list stays exact).
ALLOW=(
  "tools/aot/aot.c src/core/lt_node.h|the IR nodes that the AOT compiler turns into C loops"
  "tools/aot/aot.c src/exec/program_graph.h|a loaded program's graph: the documented internal API for tools"
  "bench/attention.c src/ops/op_attention.h|lt__attn_set_fused_always: builds the fused ATTENTION node at every shape it times"
  "fuzz/fuzz_cache_entry.c src/backend/backend.h|drives a backend's deserializer directly"
  "fuzz/fuzz_cache_entry.c src/backend/ref/ref_api.h|lt__ref_backend: the deserializer under test"
  "fuzz/fuzz_cache_entry.c src/exec/disk_cache.h|lt__disk_cache_load: the cache entry loader under test"
  "fuzz/fuzz_program_load.c src/backend/backend.h|lt__backend_force: runs loaded programs on the ref backend"
  "fuzz/fuzz_program_load.c src/backend/ref/ref_api.h|lt__ref_backend, the backend it forces"
  "fuzz/fuzz_program_load.c src/exec/program_file.h|lt__program_load_bytes: the loader under test, on bytes"
  "fuzz/fuzz_program_load.c src/exec/program_internal.h|walks the loaded graph to bound what it runs"
)

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
# decls HEADER: the names of the LT_API functions HEADER declares, one a line (comments and
# preprocessor lines dropped, declarations split at ; { and }).
decls() {
  perl -0777 -ne 's{/\*.*?\*/}{}gs; s{//[^\n]*}{}g; s{^[ \t]*#(?:[^\n]*\\\n)*[^\n]*}{}mg;
    for (split /[;{}]/) { print "$1\n" if /\bLT_API\b.*?\b([A-Za-z_]\w*)\s*\(/s }' "$1"
}

# check ROOT BUILDDIR: prints violations, returns 1 when there is any.
check() {
  local root=$1 build=$2
  local nviol=0 nerr=0
  declare -A seen=() edge=() def=() hrank=() hwhy=() allowed=() used=()
  local -a files=() pubs=() outs=()

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
  # judge FILE TARGET KIND NAME: one reference of a src/ FILE to TARGET (both relative to root).
  judge() {
    local file=$1 target=$2 kind=$3 name=$4 fl tl fr tr
    layer_of "$file"
    fl=$REPLY
    layer_of "$target"
    tl=$REPLY
    [[ -z $tl ]] && return 0 # outside src/ and include/: not ours
    rank_of "$fl"
    fr=$REPLY
    if [[ $tl == include ]]; then # a public header: its rank is that of its functions
      [[ $target == "$PUBLIC_BASE" || -z $fr ]] && return 0
      tl=${hrank[$target]:-}
      [[ -z $tl ]] && return 0 # no objects to rank it by: reported below
      rank_of "$tl"
      tr=$REPLY
      if [[ $fl == src ]]; then
        report "$file" "$fl" "$target" "public API of $tl" "$kind" "$name" \
          "a header directly in src/ may include only lazytensor.h"
      elif ((tr > fr)); then
        report "$file" "$fl" "$target" "public API of $tl: ${hwhy[$target]}" "$kind" "$name"
      elif forbidden_pair "$fl" "$tl"; then
        report "$file" "$fl" "$target" "public API of $tl" "$kind" "$name" "$fl must not use $tl"
      fi
      return 0
    fi
    rank_of "$tl"
    tr=$REPLY
    [[ -z $fr || -z $tr ]] && return 0 # unknown folder: reported once, below
    [[ $fl != "$tl" && -z ${edge[$fl|$tl]:-} ]] && edge[$fl|$tl]="$file -> $target via $kind $name"
    if [[ $fl == src && $kind == include && $target != "$PUBLIC_BASE" ]]; then
      report "$file" "$fl" "$target" "$tl" "$kind" "$name" \
        "a header directly in src/ may include only lazytensor.h"
    elif ((tr > fr)); then
      report "$file" "$fl" "$target" "$tl" "$kind" "$name"
    elif forbidden_pair "$fl" "$tl"; then
      report "$file" "$fl" "$target" "$tl" "$kind" "$name" "$fl must not use $tl"
    fi
  }
  # includes FILE...: "FILE<TAB>TARGET<TAB>NAME" for each include of FILE that resolves to a
  # file of the tree (unresolved quoted ones are noted on stderr).
  includes() {
    local line file inc dir cand delim target
    local -a dirs
    local re='^[[:space:]]*#[[:space:]]*include[[:space:]]*([<"])([^">]+)[">]'
    while IFS= read -r line; do
      file=${line%%:*}
      line=${line#*:}
      line=${line#*:}
      [[ $line =~ $re ]] || continue
      delim=${BASH_REMATCH[1]}
      inc=${BASH_REMATCH[2]}
      dir=${file%/*}
      case "$file" in
      include/*) dirs=(include) ;;
      src/*) dirs=(src/core src include) ;;
      *) dirs=(include src src/core) ;;
      esac
      [[ $delim == '"' ]] && dirs=("$dir" "${dirs[@]}")
      target=""
      for cand in "${dirs[@]}"; do
        norm "$cand/$inc"
        if [[ -f $REPLY ]]; then
          target=$REPLY
          break
        fi
      done
      if [[ -n $target ]]; then
        printf '%s\t%s\t%s\n' "$file" "$target" "$inc"
      elif [[ $delim == '"' && $file == src/* ]]; then # programs have include dirs of their own
        echo "check_layers: note: $file: \"$inc\" not found (ignored)" >&2
      fi
    done < <(grep -HnE '^[[:space:]]*#[[:space:]]*include' "$@" /dev/null || true)
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
  mapfile -t files < <(find src -type f \( -name '*.c' -o -name '*.h' \) | sort)
  mapfile -t pubs < <(find include -maxdepth 1 -type f -name '*.h' 2>/dev/null | sort)

  # The objects of lt_objects: which source file defines each global symbol.
  local objdir="$build/CMakeFiles/lt_objects.dir" have_objs=0
  local -a objs=()
  declare -A src_of=()
  local o s sym rest
  if [[ ! -d $objdir/src ]]; then
    problem "no objects under $objdir/src: build first (cmake --build $build --target lt_objects)"
  else
    have_objs=1
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
    if ((${#objs[@]})); then
      while read -r o sym rest; do
        o=${o%:}
        [[ -n ${def[$sym]:-} ]] || def[$sym]=${src_of[$o]}
      done < <(nm -A -P -g --defined-only "${objs[@]}")
    fi
  fi

  # 0. The rank of each public header: the highest layer that defines one of its functions,
  # raised to that of the public headers it includes (repeated until nothing changes).
  local h fn l r best bestr why t name changed
  local -a pubinc=()
  mapfile -t pubinc < <(includes "${pubs[@]}")
  if ((have_objs)); then
    for h in "${pubs[@]}"; do
      best=include bestr=$PUBLIC_RANK why=""
      while IFS= read -r fn; do
        s=${def[$fn]:-}
        if [[ -z $s ]]; then # a build option left it out, or it was renamed: say so
          echo "check_layers: note: $h declares $fn, which no object defines (not ranked by it)" >&2
          continue
        fi
        layer_of "$s"
        l=$REPLY
        rank_of "$l"
        r=${REPLY:-$PUBLIC_RANK}
        if ((r > bestr)); then
          best=$l bestr=$r why="$fn is defined in $s"
        fi
      done < <(decls "$h")
      hrank[$h]=$best
      hwhy[$h]=${why:-it declares no function of the library}
    done
    changed=1
    while ((changed)); do
      changed=0
      for line in "${pubinc[@]}"; do
        IFS=$'\t' read -r h t name <<<"$line"
        [[ $t == include/* && $t != "$h" && $t != "$PUBLIC_BASE" ]] || continue # base: unranked
        rank_of "${hrank[$h]}"
        bestr=$REPLY
        rank_of "${hrank[$t]}"
        if ((REPLY > bestr)); then
          hrank[$h]=${hrank[$t]}
          hwhy[$h]="it includes $t, where ${hwhy[$t]}"
          changed=1
        fi
      done
    done
  fi
  for line in "${pubinc[@]}"; do
    IFS=$'\t' read -r h t name <<<"$line"
    if [[ $h == "$PUBLIC_BASE" && $t == include/* && $t != "$PUBLIC_BASE_PART" ]]; then
      report "$h" "public base" "$t" "public API of ${hrank[$t]:-?}" include "$name" \
        "the base header includes no other public header"
    elif [[ $t == src/* ]]; then
      report "$h" "public" "$t" "internal" include "$name" "a public header includes public headers only"
    fi
  done

  # 1. Includes of src/.
  local n=0 line file
  while IFS=$'\t' read -r file t name; do
    n=$((n + 1))
    judge "$file" "$t" include "$name"
  done < <(includes "${files[@]}")
  local nincludes=$n

  # 2. Symbols, from the objects of lt_objects.
  if ((${#objs[@]})); then
    while read -r o sym rest; do
      o=${o%:}
      [[ -n ${def[$sym]:-} ]] || continue # external
      judge "${src_of[$o]}" "${def[$sym]}" symbol "$sym"
    done < <(nm -A -P -u "${objs[@]}")
  fi

  # 3. Programs outside src/: the public API, or an internal header ALLOW names for them.
  local entry pair
  for entry in "${ALLOW[@]}"; do
    pair=${entry%%|*}
    allowed[$pair]=${entry#*|}
    allowed[${pair%% *}]=1 # the file has some internal header
  done
  for d in "${OUTSIDE[@]}"; do
    [[ -d $d ]] && mapfile -t -O "${#outs[@]}" outs < <(find "$d" -type f \( -name '*.c' -o -name '*.h' \) | sort)
  done
  if ((${#outs[@]})); then
    while IFS=$'\t' read -r file t name; do
      [[ $t == src/* ]] || continue # the public API, or a header of the programs' own
      if [[ -n ${allowed[$file $t]:-} ]]; then
        used[$file $t]=1
      else
        report "$file" "${file%%/*}" "$t" internal include "$name" \
          "only the public API, or a header ALLOW in scripts/check_layers.sh names for this file"
      fi
    done < <(includes "${outs[@]}")
    while IFS=: read -r file name; do
      [[ -n ${allowed[$file]:-} ]] ||
        report "$file" "${file%%/*}" "src/" internal name "$name" \
          "an internal identifier: use the public API, or list the internal header in ALLOW"
    done < <(grep -oE '\blt__[A-Za-z0-9_]+' "${outs[@]}" /dev/null | sort -u || true)
  fi
  for entry in "${ALLOW[@]}"; do
    pair=${entry%%|*}
    [[ -n ${used[$pair]:-} ]] ||
      problem "the ALLOW entry \"$pair\" matches no include: remove it (the list stays exact)"
  done

  # 4. Circles: folder A references B and B references A. The order already forbids one
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
  local ranks=""
  for h in "${pubs[@]}"; do
    [[ $h == "$PUBLIC_BASE" ]] && continue
    ranks+=" ${h#include/}=${hrank[$h]:-?}"
  done
  echo "check_layers: ok (${#files[@]} files, $nincludes includes, ${#outs[@]} files outside src/, public headers:${ranks:- none}, one-way layers)"
}

# ---- self-test -------------------------------------------------------------------------
self_test() {
  local tmp fails=0 cc out
  tmp=$(mktemp -d "${TMPDIR:-/tmp}/check_layers.XXXXXX")
  # shellcheck disable=SC2064 # $tmp is local: expand it now
  trap "rm -rf '$tmp'" EXIT
  cc=${CC:-cc}
  command -v "$cc" >/dev/null || cc=gcc

  # A clean tree: core < exec < nn, exec calls down into core, a header in src/ used by
  # both; public headers of exec and nn, one that includes both, and programs outside src/
  # (a tool on ALLOW for one internal header, a bench on the public API).
  ALLOW=("tools/t/tool.c src/exec/exec.h|self-test: a tool allowed one internal header")
  mk() { # ROOT: writes the clean fake tree
    mkdir -p "$1"/include "$1"/src/core "$1"/src/exec "$1"/src/nn "$1"/src/backend/ref \
      "$1"/src/backend/cpu "$1"/tools/t "$1"/bench
    printf '#pragma once\n#define LT_API\nLT_API int lt_api(void);\n' >"$1"/include/lazytensor.h
    printf '#pragma once\n#include "lazytensor.h"\nLT_API int lt_exec_api(void);\n' \
      >"$1"/include/lazytensor_exec.h
    printf '#pragma once\n#include "lazytensor.h"\nLT_API int lt_nn_fn(void);\n' \
      >"$1"/include/lazytensor_nn.h
    printf '#pragma once\n#include "lazytensor_exec.h"\n#include "lazytensor_nn.h"\n' \
      >"$1"/include/lazytensor_all.h
    printf '#pragma once\n#include "lazytensor.h"\n' >"$1"/src/lt_hooks.h
    printf '#pragma once\nint core_fn(void);\n' >"$1"/src/core/core.h
    printf '#include "core.h"\n#include "../lt_hooks.h"\nint core_fn(void) { return 1; }\n' \
      >"$1"/src/core/core.c
    printf '#pragma once\n#include "core.h"\nint exec_fn(void);\n' >"$1"/src/exec/exec.h
    printf '#include "exec.h"\n#include <lt_hooks.h>\n#include "lazytensor_exec.h"\n%s\n' \
      'int exec_fn(void) { return core_fn(); }' 'int lt_exec_api(void) { return 0; }' \
      >"$1"/src/exec/exec.c
    printf '#include "lazytensor_all.h"\nint lt_nn_fn(void) { return lt_exec_api(); }\n' \
      >"$1"/src/nn/nn.c
    printf 'int ref_fn(void) { return 2; }\n' >"$1"/src/backend/ref/ref.c
    printf 'int cpu_fn(void) { return 3; }\n' >"$1"/src/backend/cpu/cpu.c
    printf '#include "lazytensor_all.h"\n#include "../../src/exec/exec.h"\n' >"$1"/tools/t/tool.c
    printf '#include "helper.h"\n#include <lazytensor_nn.h>\n#include <stdio.h>\n' >"$1"/bench/b.c
    printf '#pragma once\n#include "../include/lazytensor.h"\n' >"$1"/bench/helper.h
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
  expect "clean tree passes" "$t" 0 "check_layers: ok" \
    "public headers: lazytensor_all.h=nn lazytensor_exec.h=exec lazytensor_nn.h=nn,"

  t=$tmp/pubup && mk "$t"
  printf '#include "lazytensor_nn.h"\nint exec_probe(void) { return 0; }\n' >"$t"/src/exec/probe.c
  build "$t"
  expect "exec includes the public header of nn" "$t" 1 \
    'LAYER VIOLATION: src/exec/probe.c (exec) -> include/lazytensor_nn.h (public API of nn: lt_nn_fn is defined in src/nn/nn.c) via include lazytensor_nn.h'

  t=$tmp/pubvia && mk "$t"
  printf '#include <lazytensor_all.h>\n' >"$t"/src/core/probe.h
  build "$t"
  expect "core includes a public header that includes nn's" "$t" 1 \
    'LAYER VIOLATION: src/core/probe.h (core) -> include/lazytensor_all.h (public API of nn: it includes include/lazytensor_nn.h, where lt_nn_fn is defined in src/nn/nn.c) via include lazytensor_all.h'

  t=$tmp/pubbase && mk "$t"
  printf '#include "lazytensor_exec.h"\n' >>"$t"/include/lazytensor.h
  build "$t"
  expect "the base header includes another public header" "$t" 1 \
    'LAYER VIOLATION: include/lazytensor.h (public base) -> include/lazytensor_exec.h (public API of exec) via include lazytensor_exec.h (the base header includes no other public header)'

  t=$tmp/toolinc && mk "$t"
  printf '#include "lazytensor.h"\n#include "../../src/core/core.h"\n' >"$t"/tools/t/probe.c
  build "$t"
  expect "a tool includes an internal header not on ALLOW" "$t" 1 \
    'LAYER VIOLATION: tools/t/probe.c (tools) -> src/core/core.h (internal) via include ../../src/core/core.h'

  t=$tmp/toolname && mk "$t"
  printf 'int lt__secret(void);\nint use(void) { return lt__secret(); }\n' >>"$t"/bench/b.c
  build "$t"
  expect "a bench names an internal identifier" "$t" 1 \
    'LAYER VIOLATION: bench/b.c (bench) -> src/ (internal) via name lt__secret'

  t=$tmp/stale && mk "$t"
  printf '#include "lazytensor_all.h"\n' >"$t"/tools/t/tool.c
  build "$t"
  expect "an ALLOW entry that no include uses" "$t" 1 \
    'LAYER CHECK ERROR: the ALLOW entry "tools/t/tool.c src/exec/exec.h" matches no include'

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
