#!/usr/bin/env bash
# Builds the GPU image and copies its payload out, for a GPU machine without a container
# engine: the image's rnnserve and rnnserve-cli, the gpu-labelled test binaries built in the
# same build stage (target gpu-tests), and the shared libraries they load, into
# DEST/rnnserve-gpu-payload.tar.gz with run_gpu_payload.sh beside them.
#
#   deploy/docker/gpu_payload.sh [DEST (build)]
# env: BUILD_IMAGE, BASE_IMAGE  as gpu.Dockerfile's build arguments (default: the local bases of
#                               make_base.sh --cuda, made if missing)
#      CUDA_ARCHS               as gpu.Dockerfile's (default there: 80;86;89;90;100;120)
#      INCLUDE_CUDA=1           also pack cudart, cuBLAS and cuDNN (about 1 GB more); by default
#                               the GPU machine brings them (its CUDA install or PyTorch's wheels)
#
# On the GPU machine, from a checkout of this repository (the tests read its fixtures):
#   tar -xzf build/rnnserve-gpu-payload.tar.gz -C build
#   build/rnnserve-gpu-payload/run_gpu_payload.sh OUT_DIR
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
DEST="$(mkdir -p "${1:-$ROOT/build}" && cd "${1:-$ROOT/build}" && pwd)"
export CONTAINERS_CONF="${CONTAINERS_CONF:-$ROOT/deploy/docker/containers.conf}"
BUILD_IMAGE="${BUILD_IMAGE:-localhost/cuda:13-cudnn9-devel}"
BASE_IMAGE="${BASE_IMAGE:-localhost/cuda:13-cudnn9-runtime}"
case "$BUILD_IMAGE$BASE_IMAGE" in *localhost/cuda*) "$ROOT/deploy/docker/make_base.sh" --cuda ;; esac

# The host's ccache lent to the compile steps (gpu.Dockerfile's CCACHE_DIR).
host_ccache="${CCACHE_DIR:-$HOME/.cache/ccache}"
mkdir -p "$host_ccache"
args=(--format docker --network host --build-arg BUILD_IMAGE="$BUILD_IMAGE"
      -v "$host_ccache:/host-ccache" --build-arg CCACHE_DIR=/host-ccache
      --build-arg BASE_IMAGE="$BASE_IMAGE" --build-arg JOBS="$(nproc)"
      -f "$ROOT/deploy/docker/gpu.Dockerfile")
[ -n "${CUDA_ARCHS:-}" ] && args+=(--build-arg CUDA_ARCHS="$CUDA_ARCHS")
start=$SECONDS
podman build "${args[@]}" -t localhost/rnnserve:gpu "$ROOT"
echo "gpu_payload: image built in $((SECONDS - start)) s," \
  "$(( $(podman image inspect -f '{{.Size}}' localhost/rnnserve:gpu) / 1000000 )) MB"
start=$SECONDS
podman build "${args[@]}" --target gpu-tests -t localhost/rnnserve:gpu-tests "$ROOT"
echo "gpu_payload: test binaries built in $((SECONDS - start)) s"

stage="$(mktemp -d)"
pay="$stage/rnnserve-gpu-payload"
mkdir -p "$pay/bin" "$pay/lib"
cleanup() {
  podman rm -f rnnserve-gpu-payload-$$ rnnserve-gpu-tests-$$ >/dev/null 2>&1 || true
  rm -rf "$stage"
}
trap cleanup EXIT
# The image's own binaries, as it serves them; the tests from the stage that built them.
podman create --name rnnserve-gpu-payload-$$ localhost/rnnserve:gpu >/dev/null
podman cp rnnserve-gpu-payload-$$:/usr/local/bin/. "$pay/bin/"
podman create --name rnnserve-gpu-tests-$$ localhost/rnnserve:gpu-tests >/dev/null
podman cp rnnserve-gpu-tests-$$:/out/tests/. "$pay/bin/"
# Their shared libraries, resolved in the build stage's file system (the runtime image holds
# the same packages), without the C library family the GPU machine has.
podman run --rm --entrypoint /bin/bash -e INCLUDE_CUDA="${INCLUDE_CUDA:-0}" \
  localhost/rnnserve:gpu-tests -c '
    ldd /out/bin/* /out/tests/* | awk "\$2 == \"=>\" && \$3 ~ /^\\// {print \$3}" | sort -u |
    while read -r lib; do
      case "${lib##*/}" in
        libc.so*|libm.so*|libdl.so*|librt.so*|libpthread.so*|ld-linux*|libresolv.so*) continue ;;
        libcuda.so*) continue ;;  # the driver
        libcudart*|libcublas*|libcudnn*|libnvrtc*|libnvJitLink*)
          [ "$INCLUDE_CUDA" = 1 ] || continue ;;
      esac
      echo "$lib"
    done | tar -chf - --transform "s|.*/||" -T -' | tar -xf - -C "$pay/lib"
cp "$ROOT/deploy/docker/run_gpu_payload.sh" "$pay/"
podman image inspect -f '{{.Id}} {{.Created}}' localhost/rnnserve:gpu > "$pay/IMAGE"
git -C "$ROOT" rev-parse --short HEAD > "$pay/COMMIT"
tar -C "$stage" -czf "$DEST/rnnserve-gpu-payload.tar.gz" rnnserve-gpu-payload
du -sh "$pay/bin" "$pay/lib" "$DEST/rnnserve-gpu-payload.tar.gz"
ls "$pay/bin" "$pay/lib"
