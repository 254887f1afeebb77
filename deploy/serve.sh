#!/usr/bin/env bash
# Installs what is missing, builds rnnserve (Release) and serves the example model repository.
#   deploy/serve.sh [extra rnnserve flags, e.g. --log-level debug]
set -euo pipefail
cd "$(dirname "$0")/.."

deploy/install_deps.sh --serve
cmake --preset release >/dev/null
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
