#!/usr/bin/env bash
# Runs every example a page shows and compares what it prints with what the page shows.
#
# An example is a line starting with "$ " inside a fenced block (``` … ```), with any
# lines it continues with a trailing backslash; the lines after it, up to the next "$ "
# line or the end of the block, are what it prints (stdout and stderr together). The
# conventions of a shown output:
#   - a line that is exactly "..." stands for any number of lines, none included;
#   - a command that exits with a code other than 0 shows "[exit N]" as its last line;
#   - trailing spaces and trailing empty lines are not compared;
#   - nothing shown means nothing printed.
# Examples run in order, one page at a time, each page in its own scratch copy of the
# source tree (never in the tree itself), with the built attn first on PATH, NO_COLOR set
# and C.UTF-8 text. An example makes the files it uses, or takes them from data/.
#
# usage: run_examples.sh ATTN_BINARY SOURCE_DIR PAGE...
#   PAGE is a path (README.md, docs/guide.md, or a copy of one elsewhere).
# Exit 0 when every example printed what its page shows, 1 otherwise (each difference is
# reported with its page and line), 77 (skipped) without jq, which the pages pipe into.
set -uo pipefail
attn=$(readlink -f "$1") src=$(readlink -f "$2"); shift 2
command -v jq >/dev/null || { echo "skipped: jq is not installed (scripts/setup.sh installs it)"; exit 77; }
scratch=$(mktemp -d "${TMPDIR:-/tmp}/attn-docs-XXXXXX")
trap 'rm -rf "$scratch"' EXIT
bindir=$scratch/bin
mkdir -p "$bindir"
ln -s "$attn" "$bindir/attn"

# Splits PAGE into DIR/NNN.cmd (the command), DIR/NNN.exp (what is shown) and DIR/NNN.line.
extract() {
  awk -v dir="$2" '
    function flush() { if (n > 0) { close(dir "/" sprintf("%03d", n) ".exp") } }
    /^[ \t]*```/ { infence = !infence; cmd = 0; cont = 0; next }
    !infence { next }
    cont { print > (dir "/" sprintf("%03d", n) ".cmd"); cont = /\\$/; next }
    /^\$ / {
      flush(); n++
      f = dir "/" sprintf("%03d", n)
      print NR > (f ".line"); close(f ".line")
      print substr($0, 3) > (f ".cmd")
      printf "" > (f ".exp")
      cont = /\\$/; cmd = 1; next
    }
    cmd { print > (dir "/" sprintf("%03d", n) ".exp") }
  ' "$1"
}

# Normalises a text: trailing spaces and trailing empty lines dropped.
normalise() { sed -e 's/[[:space:]]*$//' "$1" | awk '{ a[NR] = $0 } END { n = NR; while (n > 0 && a[n] == "") n--; for (i = 1; i <= n; i++) print a[i] }'; }

# matches EXPECTED ACTUAL: exit 0 when ACTUAL fits EXPECTED, "..." lines matching any run.
matches() {
  awk '
    FNR == 1 { file++ }
    file == 1 { e[++ne] = $0; next }
    { a[++na] = $0 }
    END {
      # ok[i, j]: expected lines i.. match actual lines j..
      for (i = ne + 1; i >= 1; i--)
        for (j = na + 1; j >= 1; j--) {
          if (i > ne) { ok[i, j] = (j > na); continue }
          if (e[i] == "...") { ok[i, j] = ok[i + 1, j] || (j <= na && ok[i, j + 1]); continue }
          ok[i, j] = (j <= na && e[i] == a[j] && ok[i + 1, j + 1])
        }
      exit ok[1, 1] ? 0 : 1
    }' "$1" "$2"
}

failed=0 total=0
for page in "$@"; do
  name=$page
  page=$(readlink -f "$page")
  work=$scratch/$(basename "$page" .md)-$total
  mkdir -p "$work/ex" "$work/repo"
  tar -C "$src" --exclude=./.git --exclude='./build*' -cf - . | tar -C "$work/repo" -xf -
  extract "$page" "$work/ex"
  for cmdfile in "$work"/ex/*.cmd; do
    [[ -e $cmdfile ]] || break
    ex=${cmdfile%.cmd}
    total=$((total + 1))
    line=$(cat "$ex.line")
    (cd "$work/repo" && env PATH="$bindir:$PATH" NO_COLOR=1 LC_ALL=C.UTF-8 TZ=UTC \
       bash -o pipefail -c "$(cat "$cmdfile")") >"$ex.out" 2>&1 </dev/null
    rc=$?
    [[ $rc == 0 ]] || echo "[exit $rc]" >>"$ex.out"
    normalise "$ex.exp" >"$ex.exp.n"
    normalise "$ex.out" >"$ex.out.n"
    if ! matches "$ex.exp.n" "$ex.out.n"; then
      failed=$((failed + 1))
      echo "FAIL $name:$line: \$ $(head -n1 "$cmdfile")"
      echo "--- shown on the page"
      cat "$ex.exp.n"
      echo "--- printed"
      cat "$ex.out.n"
      echo "---"
    fi
  done
done
echo "$((total - failed)) of $total examples print what their pages show"
[[ $failed == 0 ]]
