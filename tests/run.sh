#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test: ctest labels unit, conformance,
# integration, gpu and deploy (gpu tests skip with the reason where there is no GPU; deploy
# tests, where podman cannot run).
# Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."

source deploy/progress.sh

step "checking the dependencies (deploy/install_deps.sh)"
deploy/install_deps.sh
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$PWD}"
step "configuring build/release with the tests (cmake --preset release)"
run_logged build/release/run-configure.log cmake --preset release -DRNNSERVE_BUILD_TESTS=ON
step "building every target on $(nproc) cores (a first build takes many minutes; output in" \
  "build/release/run-build.log)"
run_logged build/release/run-build.log cmake --build --preset release -j "$(nproc)"
step "running the tests, labels unit|conformance|integration|gpu|deploy (failures are shown as" \
  "they come; output in build/release/run-tests.log)"
run_logged build/release/run-tests.log \
  ctest --preset release -L 'unit|conformance|integration|gpu|deploy' -j "$(nproc)" \
  --timeout 600 --no-tests=error
grep -E "tests passed|Total Test time" build/release/run-tests.log
echo "$(grep -c '\*\*\*Skipped' build/release/run-tests.log || true) tests skipped (their reasons:" \
  "build/release/run-tests.log)"
