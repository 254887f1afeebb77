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
#
# TSan needs every lock the process takes to be visible to it. The server's locks, and gRPC's,
# are absl::Mutex, which Debian's libabsl_synchronization.so implements without TSan; so the
# tsan run first builds Debian's own abseil source package with -fsanitize=thread
# (tests/tsan_abseil.sh, once, into build/tsan-absl) and puts it first in LD_LIBRARY_PATH for
# every process the tests start (test binaries, the server, the CLI). gRPC, protobuf and the
# other Debian libraries stay uninstrumented; tests/tsan.supp names what of theirs is
# suppressed and why. OpenMP is off in the tsan preset (Debian's libgomp is uninstrumented
# too, and its fork/join would read as races): the recurrent kernel's phase runner is checked
# on plain threads instead (tests/unit/cpu_phase_runner_test.cc).
set -euo pipefail
cd "$(dirname "$0")/.."
preset="${1:?asan or tsan}"
case "$preset" in asan | tsan) ;; *) echo "usage: $0 asan|tsan" >&2; exit 2 ;; esac
cmake --preset "$preset" >/dev/null
cmake --build "build/$preset" -j"${RNNSERVE_BUILD_JOBS:-$(nproc)}"
reports="$PWD/build/$preset/sanitizer-reports"
rm -rf "$reports"
mkdir -p "$reports"
if [[ "$preset" == tsan ]]; then
  absl_lib="$(tests/tsan_abseil.sh)"
  export LD_LIBRARY_PATH="$absl_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  # The server must resolve absl::Mutex to the instrumented library, or the run means nothing.
  if ! ldd "build/$preset/server/rnnserve" | grep -q "$absl_lib/libabsl_synchronization.so"; then
    echo "run_sanitizers.sh: the server does not load $absl_lib's abseil" >&2
    exit 1
  fi
fi
# libhdf5 keeps blocks on internal free lists after a failed open (released at H5close).
export LSAN_OPTIONS="suppressions=$PWD/tests/fuzz/keras_lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
export ASAN_OPTIONS="detect_stack_use_after_return=1:strict_string_checks=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
# Every process writes its TSan reports to $reports/tsan.<pid> as well as failing with exit
# code 66: the server's stderr goes to log files the tests own, so the files are what we scan.
export TSAN_OPTIONS="second_deadlock_stack=1:halt_on_error=0:history_size=4:print_suppressions=1:suppressions=$PWD/tests/tsan.supp:log_path=$reports/tsan${TSAN_OPTIONS:+:$TSAN_OPTIONS}"
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
  grep -hE 'ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:|WARNING: ThreadSanitizer' \
    "build/$preset/ctest.log" "$reports"/* 2>/dev/null | sed 's/ (pid=[0-9]*)//' | sort | uniq -c \
    || echo "  none"
  if [[ "$preset" == tsan ]]; then
    echo "processes that reported: $(grep -l 'WARNING: ThreadSanitizer' "$reports"/* 2>/dev/null | wc -l)"
    echo "reports by whose code made each access (tests/tsan_reports.py):"
    python3 tests/tsan_reports.py $(grep -l 'WARNING: ThreadSanitizer' "$reports"/* 2>/dev/null) | sed 's/^/  /'
    echo "suppressions used:"
    grep -h -A1000 'ThreadSanitizer: Matched' "$reports"/* 2>/dev/null | grep -E '^[0-9]+ ' \
      | awk '{n[$2]+=$1} END {for (s in n) print "  " n[s] " " s}' | sort -k2 || true
  fi
} >"$summary"
if grep -qsE 'ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:|WARNING: ThreadSanitizer' \
    "build/$preset/ctest.log" "$reports"/*; then
  status=1
fi
cat "$summary"
exit $status
