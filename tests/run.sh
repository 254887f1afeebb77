#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test: ctest labels unit, conformance,
# integration, gpu and deploy (gpu tests skip with the reason where there is no GPU; deploy
# tests, where podman cannot run).
# Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."

deploy/install_deps.sh
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$PWD}"
cmake --preset release -DRNNSERVE_BUILD_TESTS=ON
cmake --build --preset release -j "$(nproc)"
ctest --preset release -L 'unit|conformance|integration|gpu|deploy' -j "$(nproc)" \
  --timeout 600 --no-tests=error
