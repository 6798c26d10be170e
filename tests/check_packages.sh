#!/usr/bin/env bash
# scripts/check_packages can fail: against a copy of setup.sh without libdragonbox-dev it must
# exit 1 naming that package (this build finds its CMake package and includes
# <dragonbox/dragonbox.h>, and no other package of setup.sh depends on it), and against the
# real setup.sh it must pass. usage: check_packages.sh SOURCE_DIR BUILD_DIR
set -uo pipefail
src=$1 build=$2
scratch=$(mktemp -d "$build/check-packages-XXXXXX")
trap 'rm -rf "$scratch"' EXIT

"$src/scripts/check_packages" --setup "$src/scripts/setup.sh" "$build" || { echo "FAIL: the real setup.sh"; exit 1; }

sed 's/\blibdragonbox-dev\b//' "$src/scripts/setup.sh" > "$scratch/setup.sh"
out=$("$src/scripts/check_packages" --setup "$scratch/setup.sh" "$build")
rc=$?
echo "$out"
[[ $rc == 1 ]] || { echo "FAIL: exit $rc without libdragonbox-dev, expected 1"; exit 1; }
grep -q '^check_packages: libdragonbox-dev is used but not installed by ' <<<"$out" ||
  { echo "FAIL: libdragonbox-dev not named"; exit 1; }
echo "ok"
