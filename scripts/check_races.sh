#!/usr/bin/env bash
# Batch workers call OpenBLAS and cairo side by side: helgrind must find no race in them.
#
# usage: scripts/check_races.sh [BUILD_DIR]     (default: build; needs valgrind)
#
# Debian's OpenMP build of OpenBLAS (libopenblas0-openmp, the one attn links) is made to
# be called from an OpenMP team's threads, not from several threads of the program's own:
# attn serialises the GEMMs its batch workers make (src/core/blas.hpp) and the figures
# they draw (src/io/plot/draw.cpp). This runs two batches under helgrind, one that draws a
# heatmap per input and one whose every stage goes through BLAS, and fails (exit 1),
# printing the first report, if helgrind sees any race outside attn's own code (see
# sanitizers/helgrind.supp for why attn's own atomics are not taken). About a minute.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
attn="$build/attn"
[[ -x "$attn" ]] || { echo "check_races: no $attn (build the attn target first)" >&2; exit 2; }
command -v valgrind >/dev/null || { echo "check_races: valgrind is missing (scripts/setup.sh installs it)" >&2; exit 2; }
scratch=$(mktemp -d)
[[ -n "${ATTN_KEEP_RACE_LOGS:-}" ]] && echo "check_races: logs in $scratch"
trap '[[ -n "${ATTN_KEEP_RACE_LOGS:-}" ]] || rm -rf "$scratch"' EXIT

failed=0
# check NAME ARGS...: attn ARGS under helgrind, its log in $scratch/NAME.log.
check() {
  local name=$1
  shift
  local log="$scratch/$name.log" status=0
  valgrind --tool=helgrind --suppressions=sanitizers/helgrind.supp --error-exitcode=99 --log-file="$log" \
    "$attn" "$@" >/dev/null 2>"$scratch/$name.err" || status=$?
  local summary
  summary=$(grep -o 'ERROR SUMMARY: [0-9]* errors from [0-9]* contexts' "$log" | tail -1)
  if [[ $status -eq 0 ]]; then
    printf 'check_races: %s: ok (%s)\n' "$name" "$summary"
    return
  fi
  failed=1
  if [[ $status -eq 99 ]]; then
    printf 'check_races: %s: helgrind reports races (%s); the first:\n' "$name" "$summary"
    # The first report, from its heading to the end of the conflicting access's stack.
    awk '/Possible data race|lock order|unlocked a|was held/ {on=1} on {print} on && /^==[0-9]+== *$/ && ++n == 3 {exit}' "$log"
  else
    printf 'check_races: %s: attn exited %d under helgrind:\n' "$name" "$status"
    tail -5 "$scratch/$name.err"
  fi
}

inputs=(data/x.npy data/notebook.npz data/notebook.npz)
# The issue's run: three inputs on three workers, each drawing its weights (cairo's text).
check plot compute "${inputs[@]}" --mask causal --dump output --plot "$scratch/plots/" -o "$scratch/out.jsonl" -j 3
# Every Tq×Tk stage kept: the blocks go through OpenBLAS's GEMMs (not the fused kernel).
check blas compute "${inputs[@]}" --mask causal --dump qk,scores,weights,output -o "$scratch/blas.jsonl" -j 3
if ((failed)); then
  echo "check_races: FAILED"
  exit 1
fi
echo "check_races: no race in the batch workers' library calls"
