#!/usr/bin/env bash
# Every file the pages cite exists: paths into the tree (src/…, tests/…, scripts/…, and the
# other top-level folders, anywhere in the text; a '*' in one must match a file) and the
# targets of relative Markdown links (from the page's folder, without their #anchor).
# Placeholders (<name>, {e}, $VAR) are not paths. README.md must link every docs/*.md
# page. Then it shows the check can fail: a page citing a missing file is refused.
# usage: check_paths.sh SOURCE_DIR
set -uo pipefail
src=$(readlink -f "$1")
dirs='\.ci|bench|cmake|completions|data|docs|examples|fuzz|include|python|sanitizers|scripts|src|tests'

# check ROOT PAGE...: prints "PAGE: missing PATH" for each; exit 1 when any is missing.
check() {
  local root=$1 page missing=0 p rel d
  shift
  for page in "$@"; do
    rel=${page#"$root"/}
    d=$(dirname "$page")
    while IFS= read -r p; do
      [[ $p == *[\<\>\{\}\$]* ]] && continue
      p=${p%%[.,:;)]}
      p=${p%%[.,:;)]}
      if [[ $p == *'*'* ]]; then
        compgen -G "$root/$p" >/dev/null || { echo "$rel: missing $p"; missing=1; }
      else
        [[ -e $root/$p ]] || { echo "$rel: missing $p"; missing=1; }
      fi
    done < <(grep -oE "(^|[^A-Za-z0-9_./-])($dirs)/[A-Za-z0-9_./*<>{}\$+-]*" "$page" | sed -E 's/^[^A-Za-z.]//')
    while IFS= read -r p; do
      p=${p#](}; p=${p%)}; p=${p%%#*}
      [[ -z $p || $p == http* || $p == mailto:* ]] && continue
      [[ -e $d/$p ]] || { echo "$rel: missing link target $p"; missing=1; }
    done < <(grep -oE '\]\([^) ]+\)' "$page")
  done
  return $missing
}

pages=("$src/README.md" "$src/CONTRIBUTING.md" "$src/CHANGELOG.md" "$src"/docs/*.md)
check "$src" "${pages[@]}" || { echo "FAIL: the pages cite files that do not exist"; exit 1; }
unlinked=0
for page in "$src"/docs/*.md; do
  grep -qF "](docs/$(basename "$page"))" "$src/README.md" || { echo "README.md: no link to docs/$(basename "$page")"; unlinked=1; }
done
[[ $unlinked == 0 ]] || { echo "FAIL: README.md does not link every page of the manual"; exit 1; }

scratch=$(mktemp -d "${TMPDIR:-/tmp}/attn-docs-paths-XXXXXX")
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$scratch/docs"
printf 'See `tests/core/test_no_such_file.cpp` and [a page](no-such-page.md).\n' >"$scratch/docs/bad.md"
out=$(check "$scratch" "$scratch/docs/bad.md") && { echo "FAIL: a missing file passed"; exit 1; }
grep -q 'missing tests/core/test_no_such_file.cpp' <<<"$out" && grep -q 'missing link target no-such-page.md' <<<"$out" ||
  { echo "$out"; echo "FAIL: the missing files were not named"; exit 1; }
echo "ok: every cited file exists, and a missing one is named"
