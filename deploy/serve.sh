#!/usr/bin/env bash
# Installs what is missing, builds rnnserve (Release) and serves the example model repository.
#   deploy/serve.sh [extra rnnserve flags, e.g. --log-level debug]
set -euo pipefail
cd "$(dirname "$0")/.."

source deploy/progress.sh

step "checking the build dependencies (deploy/install_deps.sh --serve)"
deploy/install_deps.sh --serve
step "configuring build/release (cmake --preset release)"
run_logged build/release/serve-configure.log cmake --preset release
step "building rnnserve and rnnserve-cli on $(nproc) cores (a first build takes many minutes;" \
  "output in build/release/serve-build.log)"
run_logged build/release/serve-build.log \
  cmake --build --preset release -j "$(nproc)" --target rnnserve rnnserve-cli

PORT=8500
METRICS_PORT=8502
cat <<MSG

rnnserve: gRPC on 127.0.0.1:${PORT}, metrics on 127.0.0.1:${METRICS_PORT}/metrics
repository: models/examples
try, from the repository root in another shell:

  build/release/client/rnnserve-cli predict --server 127.0.0.1:${PORT} --model waveform_lstm --input models/examples/waveform_lstm/sample_input.json

MSG
exec build/release/server/rnnserve --model-repository models/examples --port "$PORT" \
  --metrics-port "$METRICS_PORT" --log-level info "$@"
