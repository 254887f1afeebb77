#!/usr/bin/env bash
# Builds bench/cpu_real_bench and runs the real Keras models (../shared/models/keras-real and
# the repository's fixtures of the same structure) on the CPU engine beside onnxruntime and
# TF/Keras predict_on_batch, B=1 and B=32, in paired rounds; writes
# bench/results/cpu-real-<date>-<threads>t.md. Needs: numpy, onnx, onnxruntime, tensorflow,
# tf_keras, keras, h5py (PYTHON, default /opt/fixenv/bin/python where it exists).
# Usage: bench/cpu_real_peers.sh [--threads N] [--reps N] [--rounds N] [--batches 1,32]
set -euo pipefail
cd "$(dirname "$0")/.."
cmake --preset release > /dev/null
cmake --build build/release --target cpu_real_bench -j2 > /dev/null
threads=1
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
  [[ "${args[$i]}" == "--threads" ]] && threads=${args[$((i + 1))]}
done
py=${PYTHON:-python3}
[[ -z "${PYTHON:-}" && -x /opt/fixenv/bin/python ]] && py=/opt/fixenv/bin/python
export TF_CPP_MIN_LOG_LEVEL=3
"$py" bench/cpu_real_peers.py --binary build/release/bench/cpu_real_bench \
  --results "${CPU_REAL_RESULTS:-bench/results/cpu-real-$(date -u +%F)-${threads}t.md}" \
  --command "bench/cpu_real_peers.sh $*" "$@"
