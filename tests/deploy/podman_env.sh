# Sourced by the deploy tests: the podman settings of this repository (no change to /etc), the
# skip rule, and helpers. A test that cannot run here exits 77 (ctest: skipped) and says why.
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
export CONTAINERS_CONF="$ROOT/deploy/docker/containers.conf"
export BUILDAH_FORMAT=docker  # HEALTHCHECK is kept only in Docker-format images

skip() {
  echo "SKIPPED: $*"
  exit 77
}

require_podman() {
  command -v podman >/dev/null 2>&1 ||
    skip "no podman (deploy/install_deps.sh installs it)"
  [ "$(id -u)" -eq 0 ] || skip "podman builds and runs images here only as root (uid $(id -u))"
  command -v mmdebstrap >/dev/null 2>&1 || skip "no mmdebstrap (deploy/install_deps.sh)"
  local err
  if ! err="$(podman info 2>&1 >/dev/null)"; then
    skip "podman does not work here: $(echo "$err" | tail -1)"
  fi
}

# A TCP port nobody listens on now.
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# Seconds since the script started, for the timings the tests print.
elapsed() { echo "$((SECONDS))s"; }

# The local base images (deploy/docker/make_base.sh caches the Debian root).
make_base() {
  local start=$SECONDS
  "$ROOT/deploy/docker/make_base.sh" "$@"
  echo "timing: base image $((SECONDS - start)) s"
}

# The host's ccache (CI keeps it between runs), lent to the image builds' compile step.
HOST_CCACHE="${CCACHE_DIR:-$HOME/.cache/ccache}"

# Builds the CPU image as localhost/rnnserve:cpu on the local base; reruns reuse its layers, and
# after a source change ccache's objects.
build_cpu_image() {
  local start=$SECONDS
  mkdir -p "$HOST_CCACHE"
  podman build --format docker --network host \
    -v "$HOST_CCACHE:/host-ccache" --build-arg CCACHE_DIR=/host-ccache \
    --build-arg BASE_IMAGE=localhost/debian:bookworm --build-arg JOBS="$(nproc)" \
    -t localhost/rnnserve:cpu -f "$ROOT/deploy/docker/cpu.Dockerfile" "$ROOT"
  echo "timing: CPU image build $((SECONDS - start)) s"
}

# Waits until `podman healthcheck run NAME` passes (the image's HEALTHCHECK: gRPC health).
wait_healthy() {
  local name=$1 limit=${2:-120} start=$SECONDS
  until podman healthcheck run "$name" >/dev/null 2>&1; do
    if [ "$(podman inspect -f '{{.State.Running}}' "$name" 2>/dev/null)" != true ]; then
      echo "container $name stopped:"; podman logs "$name" 2>&1 | tail -30
      return 1
    fi
    if [ $((SECONDS - start)) -ge "$limit" ]; then
      echo "container $name not healthy after ${limit}s:"; podman logs "$name" 2>&1 | tail -30
      return 1
    fi
    sleep 1
  done
  echo "healthy: $name after $((SECONDS - start)) s"
}

# The example's Keras numbers: CLI (the host's rnnserve-cli) → SERVER, output compared with
# tests/fixtures/example/expected.npy as the integration tests compare it.
predict_matches_keras() {
  local cli=$1 server=$2 out
  out="$(mktemp --suffix .npz)"
  "$cli" predict --server "$server" --model waveform_lstm \
    --input "$ROOT/models/examples/waveform_lstm/sample_input.json" --output "$out" >/dev/null
  python3 - "$out" "$ROOT/tests/fixtures/example/expected.npy" <<'PY'
import sys
import numpy as np
got = np.load(sys.argv[1])["probabilities"]
want = np.load(sys.argv[2])
assert got.shape == want.shape, (got.shape, want.shape)
bad = np.abs(got - want) > 1e-6 + 1e-5 * np.abs(want)
assert not bad.any(), f"{bad.sum()} values differ from Keras: {got[bad]} vs {want[bad]}"
print(f"predict: {got.shape} probabilities match Keras")
PY
  local rc=$?
  rm -f "$out"
  return $rc
}
