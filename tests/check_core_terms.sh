#!/usr/bin/env bash
# core names no command-line flag (docs/design.md §3): no string in src/core or
# include/attn/core starts with "--"; core names a setting in its own terms (`window`)
# and src/cli/flag_terms.hpp says the flag. The check must be able to fail: a copy of a
# core file given a flag name must be caught, naming the line.
# usage: check_core_terms.sh SOURCE_DIR BUILD_DIR
set -uo pipefail
src=$1 build=$2
check() { grep -rn '"--' "$1/src/core" "$1/include/attn/core"; }

if out=$(check "$src"); then
  echo "$out"
  echo "FAIL: core names command-line flags (name the setting as \`name\`, map it in src/cli/flag_terms.hpp)"
  exit 1
fi

scratch=$(mktemp -d "$build/check-core-terms-XXXXXX")
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$scratch/src" "$scratch/include/attn"
cp -r "$src/src/core" "$scratch/src/"
cp -r "$src/include/attn/core" "$scratch/include/attn/"
printf 'static const char* planted = "--window";\n' >> "$scratch/src/core/softmax.cpp"
out=$(check "$scratch") || { echo "FAIL: a flag planted in core passed the check"; exit 1; }
grep -q 'src/core/softmax.cpp:.*"--window"' <<<"$out" || { echo "FAIL: the planted flag not named: $out"; exit 1; }
echo "ok"
