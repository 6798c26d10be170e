#!/usr/bin/env bash
# cmake/check_floors.cmake can fail: on a copy of the tree where a core file includes an
# io header it must exit non-zero naming both, and on the real tree it must pass.
# usage: check_floors.sh SOURCE_DIR BUILD_DIR
set -uo pipefail
src=$1 build=$2
scratch=$(mktemp -d "$build/check-floors-XXXXXX")
trap 'rm -rf "$scratch"' EXIT

cmake -DROOT="$src" -P "$src/cmake/check_floors.cmake" || { echo "FAIL: the real tree"; exit 1; }

mkdir -p "$scratch/tree"
cp -r "$src/src" "$src/include" "$scratch/tree/"
printf '#include "attn/io/npy.hpp"\n' >> "$scratch/tree/src/core/softmax.cpp"
out=$(cmake -DROOT="$scratch/tree" -P "$src/cmake/check_floors.cmake" 2>&1)
rc=$?
echo "$out"
[[ $rc != 0 ]] || { echo "FAIL: a core file including an io header passed"; exit 1; }
grep -q 'src/core/softmax.cpp (core) includes include/attn/io/npy.hpp (io)' <<<"$out" ||
  { echo "FAIL: the wrong-way include not named"; exit 1; }
echo "ok"
