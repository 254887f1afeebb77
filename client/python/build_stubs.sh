#!/usr/bin/env bash
# Generates the Python gRPC stubs of rnnserve.v1 into rnnserve_client/_gen (needs grpcio-tools).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="$here/rnnserve_client/_gen"
mkdir -p "$out"
python3 -m grpc_tools.protoc -I "$here/../../proto" --python_out="$out" --grpc_python_out="$out" \
  rnnserve/v1/model_config.proto rnnserve/v1/rnnserve.proto
touch "$out/__init__.py" "$out/rnnserve/__init__.py" "$out/rnnserve/v1/__init__.py"
