#!/usr/bin/env bash
# Builds the Keras importer's libFuzzer targets with clang and runs each for a while on its
# committed seed corpus (tests/fuzz/keras_corpus/<target>/). Not part of ctest.
#
#   tests/fuzz/run_keras_fuzz.sh [seconds per target, default 180]
#
# New inputs found go to build/fuzz-keras/corpus/<target>/ (the committed seeds are not
# touched); crashes to build/fuzz-keras/crash-*. Needs clang (Debian: clang) and the -dev
# packages the rnnserve build needs.
#
# Runs in fork mode and goes on past timeouts: Debian's libhdf5 1.10 can loop forever on a
# corrupt global heap (H5HG_read), which the loader cannot interrupt; such inputs are saved as
# build/fuzz-keras/crash-*-timeout-* for the record. Allocations libhdf5 attempts from corrupt
# sizes return NULL (allocator_may_return_null), as glibc's malloc does in production.
set -euo pipefail
cd "$(dirname "$0")/../.."
SECONDS_PER_TARGET="${1:-180}"
BUILD=build/fuzz-keras
CC=clang CXX=clang++ cmake -S tests/fuzz/keras -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$BUILD" -j2
export ASAN_OPTIONS="allocator_may_return_null=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export LSAN_OPTIONS="suppressions=$PWD/tests/fuzz/keras_lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
status=0
for target in keras_h5_fuzz keras_zip_fuzz keras_config_fuzz; do
  mkdir -p "$BUILD/corpus/$target"
  echo "== $target: ${SECONDS_PER_TARGET}s"
  if ! "$BUILD/$target" -max_total_time="$SECONDS_PER_TARGET" -rss_limit_mb=2048 -timeout=20 \
      -fork=1 -ignore_timeouts=1 -max_len=262144 -artifact_prefix="$BUILD/crash-$target-" \
      "$BUILD/corpus/$target" "tests/fuzz/keras_corpus/$target"; then
    status=1
  fi
  for f in "$BUILD"/crash-"$target"-*; do
    [ -e "$f" ] || continue
    case "$f" in
      *-timeout-*) echo "!! hang (libhdf5's global heap reader, if the stack says H5HG): $f" ;;
      *) echo "!! failure: $f" ;;
    esac
  done
done
exit $status
