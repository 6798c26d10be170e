#!/usr/bin/env bash
# The stage table has a count check: src/stages.cpp compiles as it is, and does not compile
# once attn::stage has an enumerator the table has no row for (a copy of
# include/attn/stages.hpp with one more stage, found before the real one).
# usage: check_stage_count.sh SOURCE_DIR BUILD_DIR CXX
set -uo pipefail
src=$1 build=$2 cxx=$3
scratch=$(mktemp -d "$build/check-stage-count-XXXXXX")
trap 'rm -rf "$scratch"' EXIT
compile() { "$cxx" -std=c++17 -fsyntax-only -I "$1" -I "$src/include" "$src/src/stages.cpp" 2>&1; }

compile "$scratch" >/dev/null || { echo "FAIL: src/stages.cpp does not compile as it is"; exit 1; }

mkdir -p "$scratch/attn"
sed 's/rollout, word_weights/rollout, throwaway, word_weights/' "$src/include/attn/stages.hpp" > "$scratch/attn/stages.hpp"
grep -q 'rollout, throwaway, word_weights' "$scratch/attn/stages.hpp" || { echo "FAIL: could not plant a stage in the enum"; exit 1; }
out=$(compile "$scratch")
rc=$?
[[ $rc != 0 ]] || { echo "FAIL: a stage without a table row compiled"; exit 1; }
grep -q 'the stage table needs one row per enumerator of attn::stage' <<<"$out" ||
  { echo "$out"; echo "FAIL: the compiler did not name the missing row"; exit 1; }
echo "ok"
