#!/usr/bin/env bash
# No hand-written source file of the library, the CLI or the scripts is over 700 lines
# (docs/design.md §3). Tests are not counted: a test file
# holds one header's cases. The check must be able to fail: a planted 701-line file in a
# scratch copy of the list must be caught, naming it.
# usage: check_file_lengths.sh SOURCE_DIR BUILD_DIR
set -uo pipefail
src=$1 build=$2
limit=700
# Every .cpp/.hpp/.py/.sh under the given roots, over the limit: "lines path" per line.
long_files() {
  find "$@" -type f \( -name '*.cpp' -o -name '*.hpp' -o -name '*.py' -o -name '*.sh' \) -print0 |
    xargs -0 wc -l | awk -v limit="$limit" '$2 != "total" && $1 > limit'
}

if out=$(long_files "$src/src" "$src/include" "$src/scripts" "$src/python" 2>/dev/null) && [ -n "$out" ]; then
  echo "$out"
  echo "FAIL: files over $limit lines (split them where they already divide)"
  exit 1
fi

scratch=$(mktemp -d "$build/check-file-lengths-XXXXXX")
trap 'rm -rf "$scratch"' EXIT
seq 1 701 | sed 's|^|// |' > "$scratch/planted.cpp"
if ! long_files "$scratch" | grep -q "planted.cpp"; then
  echo "FAIL: the check missed a planted 701-line file"
  exit 1
fi
echo "ok: no file over $limit lines; a planted one is caught"
