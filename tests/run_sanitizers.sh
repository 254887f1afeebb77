#!/usr/bin/env bash
# The sanitizer campaign: builds a sanitizer preset and runs the unit, conformance and
# integration suites under it (the container tests, label deploy, are left out: they build
# images, not code). The real server binary the integration tests start is the sanitized one,
# so its request paths run under the sanitizer too.
#
#   tests/run_sanitizers.sh asan   # ASan + UBSan (clang; also builds the libFuzzer targets)
#   tests/run_sanitizers.sh tsan   # ThreadSanitizer (g++)
#
# Writes build/<preset>/sanitizer-summary.txt (the ctest summary and every sanitizer report
# found in the test logs) and exits non-zero if a test failed or a sanitizer reported.
set -euo pipefail
cd "$(dirname "$0")/.."
preset="${1:?asan or tsan}"
case "$preset" in asan | tsan) ;; *) echo "usage: $0 asan|tsan" >&2; exit 2 ;; esac
cmake --preset "$preset" >/dev/null
cmake --build "build/$preset" -j"$(nproc)"
# libhdf5 keeps blocks on internal free lists after a failed open (released at H5close).
export LSAN_OPTIONS="suppressions=$PWD/tests/fuzz/keras_lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
export ASAN_OPTIONS="detect_stack_use_after_return=1:strict_string_checks=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
export TSAN_OPTIONS="second_deadlock_stack=1${TSAN_OPTIONS:+:$TSAN_OPTIONS}"
summary="build/$preset/sanitizer-summary.txt"
status=0
(cd "build/$preset" && ctest -L 'unit|conformance|integration' -j"$(nproc)" --timeout 1200 --output-on-failure \
  --output-log ctest.log >ctest.out 2>&1) || status=1
{
  echo "preset: $preset   commit: $(git rev-parse --short HEAD)   machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
  grep -E '^[0-9]+% tests passed|tests failed|Total Test time' "build/$preset/ctest.out" || true
  grep -E '^\s+[0-9]+ - .*\((Failed|Timeout|SEGFAULT|Subprocess aborted|Exception)' \
    "build/$preset/ctest.out" || true
  echo "sanitizer reports in the test logs:"
  grep -E 'ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:|WARNING: ThreadSanitizer' \
    "build/$preset/ctest.log" | sort | uniq -c || echo "  none"
} >"$summary"
if grep -qE 'ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:|WARNING: ThreadSanitizer' \
    "build/$preset/ctest.log"; then
  status=1
fi
cat "$summary"
exit $status
