#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/, clang++ with ASan + UBSan) and fuzzes each one for a
# bounded time. Exits non-zero if any target crashed, leaked, hung or ran out of memory.
#
#   scripts/fuzz.sh [SECONDS] [TARGET ...] [-FLAG=VALUE ...]
#       SECONDS per target (default 60); TARGETs among npy npz json cli safetensors
#       config tokenizer manifest encode (default all); -FLAGs go to libFuzzer after the defaults, so they win
#       (`scripts/fuzz.sh cli -timeout=2`).
#
# Crashing inputs are saved as build-fuzz/artifacts/<target>/crash-* (or leak-, timeout-,
# oom-); reproduce one with `build-fuzz/fuzz/attn_fuzz_<target> FILE`. Inputs that found
# new coverage collect in build-fuzz/corpus/<target>/; the committed seeds in
# fuzz/corpus/<target>/ are only read. Environment: ATTN_FUZZ_BUILD_DIR (default build-fuzz).
set -uo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
seconds=60
targets=()
flags=()
for arg in "$@"; do
  case "$arg" in
    -*) flags+=("$arg") ;;
    *[!0-9]*) targets+=("$arg") ;;
    *) seconds=$arg ;;
  esac
done
((${#targets[@]})) || targets=(npy npz json cli safetensors config tokenizer manifest encode)
build=${ATTN_FUZZ_BUILD_DIR:-build-fuzz}
case "$build" in /*) ;; *) build="$root/$build" ;; esac

set -e
cmake -S . -B "$build" -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DATTN_FUZZ=ON -DATTN_SANITIZE=ON -DATTN_BUILD_TESTS=OFF -DATTN_BUILD_BENCH=OFF >/dev/null
cmake --build "$build" -j2 --target "${targets[@]/#/attn_fuzz_}"
set +e

# The CLI target's scratch directories (fuzz_cli.cpp) go here, and go away with it.
export TMPDIR="$build/tmp"
rm -rf "$TMPDIR"
mkdir -p "$TMPDIR"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}
failed=()
for t in "${targets[@]}"; do
  mkdir -p "$build/corpus/$t" "$build/artifacts/$t"
  dict=()
  [[ -f fuzz/$t.dict ]] && dict=("-dict=$root/fuzz/$t.dict")
  echo "== fuzzing $t for ${seconds}s"
  # -timeout: one input taking longer is a hang; -rss_limit_mb bounds memory per input.
  "$build/fuzz/attn_fuzz_$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -max_len=8192 -print_final_stats=1 -artifact_prefix="$build/artifacts/$t/" "${dict[@]}" "${flags[@]}" \
    "$build/corpus/$t" "$root/fuzz/corpus/$t" >"$build/fuzz-$t.log" 2>&1
  status=$?
  grep -E '^(#[0-9]+ +DONE|stat::number_of_executed_units|stat::peak_rss_mb)' "$build/fuzz-$t.log" | tr '\n' ' '
  echo
  if ((status != 0)); then
    echo "!! $t failed (exit $status); log: $build/fuzz-$t.log; artifacts: $build/artifacts/$t/"
    grep -E 'ERROR|runtime error|SUMMARY|Test unit written' "$build/fuzz-$t.log" | head -n 8
    failed+=("$t")
  fi
done
rm -rf "$TMPDIR"
if ((${#failed[@]})); then
  echo "fuzz: FAILED: ${failed[*]}"
  exit 1
fi
echo "fuzz: no crash in ${targets[*]} (${seconds}s each)"
