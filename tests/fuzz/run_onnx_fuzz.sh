#!/usr/bin/env bash
# Fuzzes the ONNX importer with libFuzzer (clang from Debian) for a few minutes.
#
#   tests/fuzz/run_onnx_fuzz.sh [seconds=180] [jobs=1]
#
# Builds build/fuzz-onnx with clang, ASan and UBSan, and runs onnx_fuzz on a scratch copy of the
# committed seed corpus (tests/fuzz/onnx_corpus), so new inputs do not land in the repository.
# Crashes are written to build/fuzz-onnx/artifacts/. Not part of ctest.
set -euo pipefail

seconds="${1:-180}"
jobs="${2:-1}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${root}/build/fuzz-onnx"

cmake -S "${root}" -B "${build}" \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_CXX_FLAGS="-fsanitize=address,undefined,fuzzer-no-link -fno-omit-frame-pointer" \
  -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" \
  -DRNNSERVE_FUZZ_ONNX=ON -DRNNSERVE_WITH_CUDA=OFF \
  -DRNNSERVE_BUILD_TESTS=OFF -DRNNSERVE_BUILD_BENCH=OFF >/dev/null
cmake --build "${build}" --target onnx_fuzz -j2

corpus="${build}/corpus"
mkdir -p "${corpus}" "${build}/artifacts"
cp -n "${root}"/tests/fuzz/onnx_corpus/* "${corpus}/"
parallel=()
if [[ "${jobs}" -gt 1 ]]; then
  # Worker logs (fuzz-N.log) go to the build directory.
  cd "${build}"
  parallel=(-jobs="${jobs}" -workers="${jobs}")
fi
"${build}/models/onnx_fuzz" "${corpus}" "${parallel[@]}" \
  -max_total_time="${seconds}" \
  -rss_limit_mb=4096 -malloc_limit_mb=2048 -max_len=65536 -timeout=20 \
  -artifact_prefix="${build}/artifacts/"
