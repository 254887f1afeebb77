#!/usr/bin/env bash
# Builds the CPU engine's bench binary and times the reduced-precision weight modes in one run:
# BF16 against our FP32 (LSTM B=1 T=100 H=512, 1024), INT8 against onnxruntime's quantised LSTM
# (quantize_dynamic of the same FP32 ONNX model; B=1 and B=8), paired rounds. Prints the table
# and, with --results FILE, writes it as markdown. Needs: numpy, onnx, onnxruntime (pip).
# Usage: bench/cpu_quant_peers.sh [--reps N] [--rounds N] [--threads N] [--results FILE]
set -euo pipefail
cd "$(dirname "$0")/.."
cmake --preset release > /dev/null
cmake --build build/release --target cpu_rnn_bench -j2 > /dev/null
python3 bench/cpu_quant_peers.py --binary build/release/bench/cpu_rnn_bench \
  --command "bench/cpu_quant_peers.sh $*" "$@"
