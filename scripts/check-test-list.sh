#!/usr/bin/env bash
# Fails unless CTest runs exactly the test cases evo_tests holds: the same names, each once.
# CI runs it after the tests, so a test case that CTest silently stops running (a name that
# breaks the registration, a test binary that was not rebuilt) turns CI red.
#   scripts/check-test-list.sh [BUILD_DIR]
set -euo pipefail
build=${1:-build}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Catch2 exits with the number of test cases it listed, so only its output counts here.
"$build/evo_tests" --list-test-names-only >"$work/listed" || true
sed '/^$/d' "$work/listed" | LC_ALL=C sort >"$work/catch2"
if [ ! -s "$work/catch2" ]; then
  echo "check-test-list: $build/evo_tests lists no test cases" >&2
  exit 1
fi
ctest --test-dir "$build" -N | sed -n 's/^ *Test *#[0-9]*: //p' | LC_ALL=C sort >"$work/ctest"
catch2_count=$(wc -l <"$work/catch2")
ctest_count=$(wc -l <"$work/ctest")
if ! diff -u "$work/catch2" "$work/ctest" >"$work/diff"; then
  echo "check-test-list: CTest lists $ctest_count tests, evo_tests holds $catch2_count test cases;" \
    "they differ (- only in evo_tests, + only in CTest):" >&2
  tail -n +3 "$work/diff" | grep '^[-+]' >&2
  exit 1
fi
echo "check-test-list: CTest runs each of the $catch2_count test cases of evo_tests"
