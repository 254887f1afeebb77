#!/usr/bin/env bash
# Builds the CPU engine's bench binary and runs it beside onnxruntime and TensorFlow/Keras on
# the same weights: LSTM and GRU at B=1 T=100 I=H=256/512/1024, B=8 and B=64 T=100 H=512,
# B=32 T=50 I=64 H=128. Prints median ms and our speed-up over each peer, and writes
# bench/results/cpu-<date>.md. Needs: numpy, onnx, onnxruntime, tensorflow (pip).
# Usage: bench/cpu_peers.sh [--reps N] [--rounds N] [--threads N] [--only lstm|gru]
set -euo pipefail
cd "$(dirname "$0")/.."
cmake --preset release > /dev/null
cmake --build build/release --target cpu_rnn_bench -j2 > /dev/null
export TF_CPP_MIN_LOG_LEVEL=3
arch=$(sed -n 's/^RNNSERVE_CPU_ARCH:STRING=//p' build/release/CMakeCache.txt)
kernels=${RNNSERVE_CPU_KERNELS:-the best this CPU has}
python3 bench/cpu_peers.py --binary build/release/bench/cpu_rnn_bench \
  --results "${CPU_PEERS_RESULTS:-bench/results/cpu-$(date -u +%F).md}" \
  --command "bench/cpu_peers.sh $*" \
  --build "-march=${arch} (RNNSERVE_CPU_ARCH), CPU kernel set: ${kernels} (RNNSERVE_CPU_KERNELS)" "$@"
