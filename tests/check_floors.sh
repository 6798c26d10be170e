#!/usr/bin/env bash
# The floors' checks can fail (docs/design.md §3):
#  - cmake/check_floors.cmake passes on the real tree, and on a copy where a core file
#    includes an io header and a subcommand file includes another subcommand's header it
#    exits non-zero naming both (a subcommand including its own header stays allowed);
#  - the core floor's link check, given a file that calls an io function
#    (tests/floors/core_calls_io.cpp, target attn_floor_link_core_calls_io), fails to link
#    with an undefined reference to that function.
# usage: check_floors.sh SOURCE_DIR BUILD_DIR CMAKE
set -uo pipefail
src=$1 build=$2 cmake=${3:-cmake}
scratch=$(mktemp -d "$build/check-floors-XXXXXX")
trap 'rm -rf "$scratch"' EXIT

"$cmake" -DROOT="$src" -P "$src/cmake/check_floors.cmake" || { echo "FAIL: the real tree"; exit 1; }

mkdir -p "$scratch/tree"
cp -r "$src/src" "$src/include" "$scratch/tree/"
printf '#include "attn/io/npy.hpp"\n' >> "$scratch/tree/src/core/softmax.cpp"
printf '#pragma once\n' > "$scratch/tree/src/cli/cmd_rope.hpp"
printf '#include "cmd_rope.hpp"\n' >> "$scratch/tree/src/cli/cmd_view.cpp"
printf '#include "cmd_rope.hpp"\n' >> "$scratch/tree/src/cli/cmd_rope.cpp"
out=$("$cmake" -DROOT="$scratch/tree" -P "$src/cmake/check_floors.cmake" 2>&1)
rc=$?
echo "$out"
[[ $rc != 0 ]] || { echo "FAIL: wrong-way includes passed"; exit 1; }
grep -q 'src/core/softmax.cpp (core) includes include/attn/io/npy.hpp (io)' <<<"$out" ||
  { echo "FAIL: the core file including an io header not named"; exit 1; }
grep -q 'src/cli/cmd_view.cpp (subcommand view) includes src/cli/cmd_rope.hpp (subcommand rope)' <<<"$out" ||
  { echo "FAIL: the subcommand file including another's header not named"; exit 1; }
! grep -q 'src/cli/cmd_rope.cpp' <<<"$out" ||
  { echo "FAIL: a subcommand including its own header was refused"; exit 1; }

out=$("$cmake" --build "$build" --target attn_floor_link_core_calls_io 2>&1)
rc=$?
echo "$out" | tail -n 20
[[ $rc != 0 ]] || { echo "FAIL: the core floor linked with a call into io"; exit 1; }
grep -Eq "undefined reference to .*attn::io::is_npy" <<<"$out" ||
  { echo "FAIL: the link did not fail on the call into io"; exit 1; }
echo "ok"
