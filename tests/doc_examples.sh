#!/usr/bin/env bash
# Every ```c block of README.md and docs/*.md compiles, and every whole program
# among them runs, so that the docs cannot drift from the library.
#
#   doc_examples.sh BUILD_DIR CC
#
# What a block is, is said by an HTML comment (invisible once rendered) on the
# line just before its opening fence:
#   (none)                      a whole program (it has main): compiled with the
#                               warnings as errors against the built shared
#                               library, then run; it must exit 0.
#   <!-- fragment: DECLS -->    statements: compiled (-fsyntax-only, warnings as
#                               errors) as the body of a function, after the
#                               public headers and <stdio.h>, <stdlib.h>, <string.h>;
#                               DECLS (optional) declares what the block uses
#                               and does not declare itself.
#   <!-- excerpt: FILE... -->   lines shown from the sources (FILE relative to
#                               the repository): each line of the block must be
#                               a line of one of the FILEs, spaces at the ends aside.
# A block with no comment and no main fails: mark it, or make it whole.
set -euo pipefail
build=$(cd "$1" && pwd) cc=$2 src=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$src"

# Split the blocks out: $tmp/N.c holds block N, $tmp/N.where "FILE:LINE" and
# $tmp/N.mark the comment before it (empty when none).
awk -v out="$tmp" '
  FNR == 1 { prev = ""; inblock = 0 }
  inblock && /^```/ { inblock = 0; close(file); next }
  inblock { print > file; next }
  /^```c[ \t]*$/ {
    n++; inblock = 1; file = out "/" n ".c"
    printf "" > file
    print FILENAME ":" FNR > (out "/" n ".where"); close(out "/" n ".where")
    mark = (prev ~ /^<!--.*-->[ \t]*$/) ? prev : ""
    print mark > (out "/" n ".mark"); close(out "/" n ".mark")
    next
  }
  { prev = $0 }
' README.md docs/*.md

re_excerpt='^<!-- *excerpt:(.*)-->[[:space:]]*$'
re_fragment='^<!-- *fragment:?(.*)-->[[:space:]]*$'
trim() { sed -e 's/^[[:space:]]*//' -e 's/[[:space:]]*$//' -e '/^$/d'; }
cflags=(-std=c11 -Wall -Wextra -Werror -I"$src/include")
failed=0 programs=0 fragments=0 excerpts=0
for block in $(find "$tmp" -name '*.c' | sort -V); do
  n=${block%.c}
  where=$(cat "$n.where") mark=$(cat "$n.mark")
  fail() {
    echo "$where: $1" >&2
    failed=$((failed + 1))
  }
  # compiler messages point into the markdown: its block starts on the line after the fence
  line_directive="#line $((${where##*:} + 1)) \"${where%:*}\""
  if [[ $mark =~ $re_excerpt ]]; then
    read -r -a files <<<"${BASH_REMATCH[1]}"
    [ ${#files[@]} -gt 0 ] || { fail "an excerpt names no file"; continue; }
    for f in "${files[@]}"; do
      [ -f "$f" ] || { fail "excerpt of $f, which does not exist"; continue 2; }
    done
    cat "${files[@]}" | trim >"$n.source"
    while IFS= read -r line; do
      grep -qxF -- "$line" "$n.source" || fail "not a line of ${files[*]}: $line"
    done < <(trim <"$block")
    excerpts=$((excerpts + 1))
  elif [[ $mark =~ $re_fragment ]]; then
    {
      printf '#include <lazytensor.h>\n#include <lazytensor_nn.h>\n#include <lazytensor_dist.h>\n'
      printf '#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n'
      printf 'void doc_fragment(void);\nvoid doc_fragment(void) {\n%s\n' "${BASH_REMATCH[1]}"
      echo "$line_directive"
      cat "$block"
      printf '}\n'
    } >"$n.frag.c"
    "$cc" "${cflags[@]}" -fsyntax-only "$n.frag.c" || fail "the fragment does not compile"
    fragments=$((fragments + 1))
  elif [ -n "$mark" ]; then
    fail "unknown mark before a c block: $mark"
  elif ! grep -q '\bmain *(' "$block"; then
    fail "a c block without main: make it a whole program or mark it (see $0)"
  else
    { echo "$line_directive"; cat "$block"; } >"$n.prog.c"
    if ! "$cc" "${cflags[@]}" "$n.prog.c" -o "$n.prog" -L"$build" -llazytensor -lm \
      -Wl,-rpath,"$build"; then
      fail "the program does not compile"
    else
      rc=0
      (cd "$tmp" && timeout 120 "$n.prog" >"$n.out" 2>&1) || rc=$?
      if [ "$rc" -ne 0 ]; then
        cat "$n.out" >&2
        fail "the program exited with $rc (its output above)"
      fi
    fi
    programs=$((programs + 1))
  fi
done
echo "c blocks: $programs programs compiled and run, $fragments fragments compiled," \
  "$excerpts excerpts found in the sources; $failed failed"
[ -s "$tmp/1.where" ] || { echo "no c blocks found" >&2; exit 1; }
[ "$failed" -eq 0 ]
