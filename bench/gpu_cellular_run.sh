#!/usr/bin/env bash
# The step-level batching benchmark (bench/cellular_bench.py) on a GPU machine, with the packed
# build of bench/pack_gpu_device_build.sh (rnnserve and the libraries it links) and the Python
# client's generated modules and grpcio/protobuf on PYTHONPATH. The load generator runs in
# several processes on the machine's cores beside the server.
#
# usage: bench/gpu_cellular_run.sh OUT_DIR MODEL_DIR [cellular_bench.py flags...]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT_DIR=$1
MODEL_DIR=$2
shift 2
DEVBUILD=${DEVBUILD:-$ROOT/.devbuild-gpu}
export LD_LIBRARY_PATH=$DEVBUILD/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
for mod in cudnn cublas cuda_nvrtc; do
  d=$(python3 -c "import nvidia.$mod as m; print(list(m.__path__)[0] + '/lib')" 2>/dev/null) &&
    export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$d
done
mkdir -p "$OUT_DIR"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT_DIR/gpu.txt" || true
exec python3 "$ROOT/bench/cellular_bench.py" --rnnserve "$DEVBUILD/bin/rnnserve" \
  --model-dir "$MODEL_DIR" --kind KIND_GPU --out "$OUT_DIR" "$@"
