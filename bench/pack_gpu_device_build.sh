#!/usr/bin/env bash
# Packs what bench/gpu_device_run.sh runs on a GPU machine that has no build tools and no
# network: the gpu test binaries, gpu_peers, cpu_rnn_bench, grpc_floor, rnnserve, rnnserve-cli and
# perf_analyzer (stripped) into DEST/bin, and the shared libraries they link into DEST/lib,
# except the C library family and the CUDA install's libraries (the GPU machine brings its own driver, CUDA and cuDNN).
# Build first with a CPU target the GPU machine runs, e.g.
#   cmake --preset release -DRNNSERVE_CPU_ARCH=x86-64-v3
# With SOURCES=1 it also copies, into DEST/src, the parts of this tree the binaries and scripts
# read at run time (fixtures, example models, bench scripts and models; the tests find them
# under the source directory compiled in, RNNSERVE_SOURCE_DIR), and ../shared/models into
# DEST/shared/models: for a machine that gets another checkout than this one.
#
# usage: bench/pack_gpu_device_build.sh [BUILD_DIR (build/release)] [DEST (.devbuild-gpu)]
# env:   PERF_ANALYZER  the perf_analyzer binary (default: PATH, then /opt/perf_analyzer/bin); a
#                       pyenv shim that PATH finds is resolved to the binary it runs
#        PERF           a perf binary (linux-perf) to pack as well, for gpu_device_run.sh's
#                       profile stage; rnnserve then keeps its symbol table
#        MINIMAL_LIBS=1 pack only the libraries the device tool's image (Ubuntu 24.04) lacks:
#                       abseil, libzip, gRPC's, prometheus-cpp's, civetweb, hiredis, cpp-httplib
#                       and libevent (it has hdf5,
#                       protobuf, curl, OpenSSL and the C++ runtime): a pack a third the size,
#                       for the device's 64 MiB upload limit
#        BINS           the binaries to pack instead of the default list (paths)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$ROOT/build/release}
DEST=${2:-$ROOT/.devbuild-gpu}
PA=${PERF_ANALYZER:-$(command -v perf_analyzer || echo /opt/perf_analyzer/bin/perf_analyzer)}
# The executable itself: through symlinks, and through a pyenv shim (a bash script that asks pyenv
# which version's binary to exec; packed, it would run nowhere). Anything else that is not an ELF
# file is refused, as strip and the GPU machine could not use it.
resolve_elf() {
  local path
  path=$(readlink -f "$1") || { echo "missing: $1" >&2; return 1; }
  if [ "$(head -c 4 "$path" 2>/dev/null | tail -c 3)" != ELF ] && grep -q pyenv "$path" 2>/dev/null &&
    command -v pyenv >/dev/null 2>&1; then
    path=$(readlink -f "$(pyenv which "$(basename "$1")")") ||
      { echo "pyenv which $(basename "$1") failed for the shim $1" >&2; return 1; }
  fi
  if [ "$(head -c 4 "$path" 2>/dev/null | tail -c 3)" != ELF ]; then
    echo "$1 ($path) is not an ELF executable (a wrapper script?); set PERF_ANALYZER to the binary" >&2
    return 1
  fi
  echo "$path"
}
PA=$(resolve_elf "$PA")
rm -rf "$DEST"
mkdir -p "$DEST/bin" "$DEST/lib"
bins=("$BUILD/server/rnnserve" "$BUILD/bench/gpu_peers" "$BUILD/bench/gpu_request_path"
  "$BUILD/bench/cpu_rnn_bench" "$BUILD/bench/grpc_floor" "$BUILD/client/rnnserve-cli" "$PA")
for t in gpu_availability_test gpu_conformance_test gpu_engine_test example_model_test gpu_layers_test \
  gpu_host_io_test gpu_fused_lstm_test gpu_fused_half_test gpu_torch_test gpu_multi_gpu_test cellular_conformance_test slot_states_test gpu_metrics_test; do
  bins+=("$(find "$BUILD/tests" -name "$t" -type f -executable | head -1)")
done
[ -n "${BINS:-}" ] && read -r -a bins <<< "$BINS"
# perf_analyzer loads libcudart.so.12 even for gRPC runs; PyPI's nvidia-cuda-runtime-cu12.
CUDART=$(python3 -c 'import nvidia.cuda_runtime as m; print(list(m.__path__)[0] + "/lib")' \
  2>/dev/null || true)
export LD_LIBRARY_PATH=${CUDART:+$CUDART:}${LD_LIBRARY_PATH:-}
[ -n "${PERF:-}" ] && bins+=("$PERF")
for b in "${bins[@]}"; do
  [ -x "$b" ] || { echo "missing: $b"; exit 1; }
  name=$(basename "$b")
  [ "$b" = "$PA" ] && name=perf_analyzer  # whatever the resolved file is called
  if [ -n "${PERF:-}" ] && [ "$name" = rnnserve ]; then
    cp "$b" "$DEST/bin/rnnserve"  # symbols, for perf report
  else
    strip --strip-unneeded -o "$DEST/bin/$name" "$b"
  fi
  ldd "$b" | awk '/=> \//{print $3}' | while read -r lib; do
    case "$(basename "$lib")" in
      libc.so*|libm.so*|libdl.so*|librt.so*|libpthread.so*|ld-linux*|libresolv.so*) continue ;;
    esac
    case "$lib" in /usr/local/cuda*) continue ;; esac
    if [ "${MINIMAL_LIBS:-0}" = 1 ]; then
      case "$(basename "$lib")" in
        libabsl_*|libzip*|libgrpc*|libgpr*|libupb*|libaddress_sorting*|libre2*|libcares*|libprometheus*|libcivetweb*|libhiredis*|libcpp-httplib*|libevent*) ;;
        *) continue ;;
      esac
    fi
    [ -e "$DEST/lib/$(basename "$lib")" ] || cp -L "$lib" "$DEST/lib/"
  done
done
if ldd "$PA" | grep -q "not found"; then
  ldd "$PA" | grep "not found"
  exit 1
fi
if [ "${SOURCES:-0}" = 1 ]; then
  mkdir -p "$DEST/src/bench" "$DEST/src/tests" "$DEST/src/models" "$DEST/shared"
  cp -r "$ROOT/tests/fixtures" "$DEST/src/tests/"
  cp -r "$ROOT/models/examples" "$DEST/src/models/"
  cp "$ROOT"/bench/*.sh "$ROOT"/bench/*.py "$DEST/src/bench/"
  cp -r "$ROOT/bench/server_models" "$ROOT/bench/server_models_gpu" "$DEST/src/bench/"
  [ -d "$ROOT/../shared/models" ] && cp -r "$ROOT/../shared/models" "$DEST/shared/"
  git -C "$ROOT" rev-parse --short HEAD > "$DEST/src/COMMIT"
  git -C "$ROOT" status --short | grep -q . && echo "+ uncommitted changes" >> "$DEST/src/COMMIT"
  du -sh "$DEST/src" "$DEST/shared"
fi
# The commit the binaries were built from, for the run's summary (the GPU machine's copy of the
# tree may have no .git, or an older one).
{ git -C "$ROOT" rev-parse --short HEAD
  git -C "$ROOT" status --short --untracked-files=no | grep -q . && echo "+ uncommitted changes"
} > "$DEST/COMMIT" || true
du -sh "$DEST/bin" "$DEST/lib"
ls "$DEST/lib"
