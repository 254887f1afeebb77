#!/usr/bin/env bash
# The fuzzing campaign: builds the asan preset (clang, ASan+UBSan, the libFuzzer targets of
# tests/fuzz/CMakeLists.txt) and runs each target for SECONDS on a scratch copy of its committed
# corpus, then prints one line per target: executions, crashes, hangs.
#
#   tests/fuzz/run_fuzz.sh [seconds per target, default 120] [target ...]
#   MINIMIZE=1 tests/fuzz/run_fuzz.sh ...   also merges what each run found back into a minimal
#                                           tests/fuzz/corpus/<target>/ (libFuzzer -merge=1)
#   NO_BUILD=1 tests/fuzz/run_fuzz.sh ...    runs what build/asan holds (two runs side by side
#                                           on different targets, say)
#
# Needs clang (Debian: clang) and the -dev packages of the build. New inputs go to
# build/asan/fuzz/corpus/<target>/, crashes and hangs to build/asan/fuzz/artifacts/, logs to
# build/asan/fuzz/<target>.log. Exit status 1 if any target crashed or hung.
#
# The Keras .h5 and .keras targets run in fork mode and go on past timeouts and crashes:
# Debian's libhdf5 1.10 can loop forever on a corrupt global heap (H5HG_read) and overrun its
# own buffers on corrupt object headers (H5O__msg_iterate_real), which the loader cannot
# prevent; the server parses each file in a child process with a time limit for that reason
# (server/model_check.h), so such a file fails its own load only. Each such artifact is run
# again: one whose sanitizer report starts inside libhdf5 is counted apart (libhdf5 column),
# any other is a crash of ours.
# Allocations libhdf5 attempts from corrupt sizes return NULL (allocator_may_return_null), as
# glibc's malloc does in production.
set -euo pipefail
cd "$(dirname "$0")/../.."
seconds="${1:-120}"
shift || true
all=(predict_request_fuzz kserve_request_fuzz model_config_fuzz onnx_fuzz keras_config_fuzz
     keras_h5_fuzz keras_zip_fuzz tensor_bundle_fuzz savedmodel_graph_fuzz)
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=("${all[@]}")

if [ "${NO_BUILD:-0}" != 1 ]; then
  cmake --preset asan >/dev/null
  cmake --build build/asan -j"$(nproc)" --target "${targets[@]}"
fi
work=build/asan/fuzz
mkdir -p "$work/artifacts"
export ASAN_OPTIONS="allocator_may_return_null=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export LSAN_OPTIONS="suppressions=$PWD/tests/fuzz/keras_lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
status=0
printf '%-22s %12s %8s %8s %8s\n' target executions crashes hangs libhdf5
for t in "${targets[@]}"; do
  bin=$(find build/asan/tests/fuzz -maxdepth 1 -name "$t" -type f)
  corpus="$work/corpus/$t"
  mkdir -p "$corpus"
  cp -n tests/fuzz/corpus/"$t"/* "$corpus"/ 2>/dev/null || true
  mode=()
  case "$t" in
    keras_h5_fuzz | keras_zip_fuzz) mode=(-fork=1 -ignore_timeouts=1 -ignore_crashes=1) ;;
  esac
  rm -f "$work/artifacts/$t-"*
  "$bin" "$corpus" "${mode[@]}" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=2048 \
    -malloc_limit_mb=2048 -max_len=65536 -print_final_stats=1 \
    -artifact_prefix="$work/artifacts/$t-" >"$work/$t.log" 2>&1 || true
  # Executions: libFuzzer's final stats, or the last "#N" status line in fork mode.
  runs=$({ grep -o 'stat::number_of_executed_units: [0-9]*' "$work/$t.log" || true; } |
    awk '{s += $2} END {print s + 0}')
  if [ "$runs" = 0 ]; then
    runs=$({ grep -o '^#[0-9]*' "$work/$t.log" || true; } | tail -1 | tr -d '#')
  fi
  crashes=0
  hangs=$(find "$work/artifacts" -name "$t-timeout-*" | wc -l)
  hdf5=0
  for a in $(find "$work/artifacts" -name "$t-crash-*" -o -name "$t-leak-*" -o -name "$t-oom-*"); do
    if [ ${#mode[@]} -gt 0 ] && timeout 60 "$bin" "$a" 2>&1 | grep -m1 -E '^ +#[0-9]+ ' -A1 |
        grep -q 'libhdf5'; then
      hdf5=$((hdf5 + 1))
    else
      crashes=$((crashes + 1))
    fi
  done
  if [ ${#mode[@]} -gt 0 ]; then hdf5=$((hdf5 + hangs)); hangs=0; fi
  # A target that stopped on an error without writing an artifact is a failure too.
  if grep -q 'ERROR: \(AddressSanitizer\|LeakSanitizer\|UndefinedBehaviorSanitizer\|libFuzzer\)' "$work/$t.log" && [ "$crashes" = 0 ] && [ ${#mode[@]} = 0 ]; then
    crashes=1
  fi
  printf '%-22s %12s %8s %8s %8s\n' "$t" "${runs:-0}" "$crashes" "$hangs" "$hdf5"
  [ "$crashes" = 0 ] && [ "$hangs" = 0 ] || status=1
  if [ "${MINIMIZE:-0}" = 1 ]; then
    merged="$work/merged/$t"
    rm -rf "$merged" && mkdir -p "$merged"
    "$bin" -merge=1 "${mode[@]/-fork=1/}" -timeout=20 -max_len=65536 "$merged" \
      tests/fuzz/corpus/"$t" "$corpus" >"$work/$t.merge.log" 2>&1 || true
    rm -f tests/fuzz/corpus/"$t"/* && cp "$merged"/* tests/fuzz/corpus/"$t"/
  fi
done
exit $status
