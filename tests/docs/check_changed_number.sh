#!/usr/bin/env bash
# The docs test can fail: on a copy of docs/guide.md whose first shown number is changed
# by one digit, run_examples.sh must exit 1 and name the example; on the page as it is, 0.
# usage: check_changed_number.sh ATTN_BINARY SOURCE_DIR
set -uo pipefail
attn=$1 src=$2
here=$(dirname "$(readlink -f "$0")")
command -v jq >/dev/null || { echo "skipped: jq is not installed"; exit 77; }
scratch=$(mktemp -d "${TMPDIR:-/tmp}/attn-docs-changed-XXXXXX")
trap 'rm -rf "$scratch"' EXIT

# The first decimal number shown as output (inside a fence, after a "$ " line): its last
# digit d becomes (d + 1) mod 10 (-1.74768 → -1.74769).
awk '
  /^[ \t]*```/ { infence = !infence; seen = 0; print; next }
  infence && /^\$ / { seen = 1; print; next }
  infence && seen && !done && match($0, /[0-9]\.[0-9]+/) {
    i = RSTART + RLENGTH - 1
    d = (substr($0, i, 1) + 1) % 10
    print "changed line " NR ": " $0 > "/dev/stderr"
    $0 = substr($0, 1, i - 1) d substr($0, i + 1); done = 1
    print "        into: " $0 > "/dev/stderr"
  }
  { print }
' "$src/docs/guide.md" >"$scratch/guide.md"
cmp -s "$src/docs/guide.md" "$scratch/guide.md" && { echo "FAIL: no shown number to change"; exit 1; }

out=$("$here/run_examples.sh" "$attn" "$src" "$scratch/guide.md" 2>&1); rc=$?
echo "$out" | grep -A12 '^FAIL'
[[ $rc == 1 ]] || { echo "FAIL: the changed page gave exit $rc, expected 1"; exit 1; }
[[ $(grep -c '^FAIL' <<<"$out") == 1 ]] || { echo "FAIL: expected exactly one failing example"; exit 1; }

out=$("$here/run_examples.sh" "$attn" "$src" "$src/docs/guide.md" 2>&1); rc=$?
[[ $rc == 0 ]] || { echo "$out"; echo "FAIL: the page as it is gave exit $rc"; exit 1; }
echo "ok: a changed digit fails the example, the page as it is passes"
