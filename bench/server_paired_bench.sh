#!/usr/bin/env bash
# Two rnnserve binaries compared on one model and one concurrency with perf_analyzer (KServe v2
# gRPC), in paired runs that alternate which binary goes first (A B, B A, A B, ...), each run on
# a freshly started server. On a small shared machine the load drifts over minutes; a pair is a
# few seconds apart, so the per-pair ratio B/A is what to read, not the absolute numbers.
# Besides throughput and the median latency it records the server's CPU time per request (utime + stime of the server
# process over the run, divided by the ModelInfer requests its /metrics counted): what a request
# costs, which depends much less than throughput on how much of the machine others take.
#
# usage: bench/server_paired_bench.sh BIN_A BIN_B [OUT_DIR (build/bench-paired)]
# env:   ROUNDS       pairs (default 10)
#        MODEL        model of bench/server_models (default tiny_lstm), SHAPE (default x:10,8)
#        CONCURRENCY  perf_analyzer concurrency (default 64)
#        INTERVAL_MS  perf_analyzer measurement window (default 2000; 3 windows per run)
#        PROTOCOL     kserve (perf_analyzer, ModelInfer) or v1 (bench/v1_predict_load.py,
#                     rnnserve.v1 Predict for 3 windows' time; SHAPE's input name is used)
#        PERF_ANALYZER  the perf_analyzer binary (default: PATH, then /opt/perf_analyzer/bin)
#        MODEL_REPO   the model repository (default bench/server_models; bench/server_models_gpu
#                     for the GPU engine)
#        SERVER_CPUS, CLIENT_CPUS  taskset CPU lists for the server and perf_analyzer
# Prints one line per run and the summary of bench/server_paired_report.py.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
A=${1:?usage: $0 BIN_A BIN_B [OUT_DIR]}
B=${2:?usage: $0 BIN_A BIN_B [OUT_DIR]}
OUT=${3:-$ROOT/build/bench-paired}
ROUNDS=${ROUNDS:-10}
MODEL=${MODEL:-tiny_lstm}
SHAPE=${SHAPE:-x:10,8}
CONCURRENCY=${CONCURRENCY:-64}
INTERVAL_MS=${INTERVAL_MS:-2000}
PROTOCOL=${PROTOCOL:-kserve}
METHOD=ModelInfer; [ "$PROTOCOL" = v1 ] && METHOD=Predict
MODEL_REPO=${MODEL_REPO:-$ROOT/bench/server_models}
SERVER_PIN=(); CLIENT_PIN=()
[ -n "${SERVER_CPUS:-}" ] && SERVER_PIN=(taskset -c "$SERVER_CPUS")
[ -n "${CLIENT_CPUS:-}" ] && CLIENT_PIN=(taskset -c "$CLIENT_CPUS")
PA=${PERF_ANALYZER:-$(command -v perf_analyzer || echo /opt/perf_analyzer/bin/perf_analyzer)}
[ -x "$PA" ] || { echo "perf_analyzer not found (docs/kserve.md says how to install it)"; exit 1; }
CUDART=$(python3 -c 'import nvidia.cuda_runtime as m; print(list(m.__path__)[0] + "/lib")' \
  2>/dev/null || true)
export LD_LIBRARY_PATH=${CUDART:+$CUDART:}${LD_LIBRARY_PATH:-}
mkdir -p "$OUT"

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

SERVER=""
source "$ROOT/bench/server_common.sh"
trap '[ -n "$SERVER" ] && kill "$SERVER" 2>/dev/null; wait 2>/dev/null || true' EXIT

run() {  # run LABEL BIN ROUND: one perf_analyzer run on a fresh server; appends to runs.csv
  local label=$1 bin=$2 round=$3 port metrics_port
  port=$(free_port)
  metrics_port=$(free_port)
  "${SERVER_PIN[@]}" "$bin" --model-repository "$MODEL_REPO" --port "$port" \
    --metrics-port "$metrics_port" --http-port 0 --log-level warning --allow-symlinks-outside-repository \
    --max-concurrent-per-model=512 &
  SERVER=$!
  wait_for_server "$port" "$metrics_port" "$MODEL"
  local csv="$OUT/${label}_r${round}.csv" cpu0 req0 cpu1 req1
  cpu0=$(server_cpu_seconds "$SERVER")
  req0=$(server_requests "$metrics_port" "$METHOD")
  if [ "$PROTOCOL" = v1 ]; then
    "${CLIENT_PIN[@]}" python3 "$ROOT/bench/v1_predict_load.py" "127.0.0.1:$port" "$MODEL" \
      "$SHAPE" "$CONCURRENCY" "$((INTERVAL_MS * 3 / 1000))" "$csv" \
      > "$OUT/${label}_r${round}.log" 2>&1 || { tail -5 "$OUT/${label}_r${round}.log"; return 1; }
  else
    "${CLIENT_PIN[@]}" "$PA" -u "127.0.0.1:$port" -i grpc -m "$MODEL" --shape "$SHAPE" \
      --concurrency-range "$CONCURRENCY" --measurement-interval "$INTERVAL_MS" \
      --stability-percentage 999 --max-trials 3 -f "$csv" > "$OUT/${label}_r${round}.log" 2>&1 ||
      { tail -5 "$OUT/${label}_r${round}.log"; return 1; }
  fi
  cpu1=$(server_cpu_seconds "$SERVER")
  req1=$(server_requests "$metrics_port" "$METHOD")
  kill "$SERVER"
  wait "$SERVER" 2>/dev/null || true
  SERVER=""
  local ips p50
  ips=$(python3 -c 'import csv,sys; print(next(csv.DictReader(open(sys.argv[1])))["Inferences/Second"])' "$csv")
  p50=$(python3 -c 'import csv,sys; print(next(csv.DictReader(open(sys.argv[1])))["p50 latency"])' "$csv")
  local us
  us=$(python3 -c 'import sys; c0,c1,r0,r1=map(float,sys.argv[1:]); print(f"{(c1-c0)/(r1-r0)*1e6:.1f}")' \
    "$cpu0" "$cpu1" "$req0" "$req1")
  echo "$round,$label,$ips,$us,$p50,$(cut -d' ' -f1 /proc/loadavg)" | tee -a "$OUT/runs.csv"
}

{
  echo "date: $(date -u +%Y-%m-%dT%H:%MZ)"
  echo "cpu: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores"
  echo "A: $A"
  echo "B: $B"
  echo "protocol: $PROTOCOL"
  echo "model: $MODEL --shape $SHAPE ($MODEL_REPO), concurrency $CONCURRENCY, window ${INTERVAL_MS} ms x 3"
  echo "pinning: server ${SERVER_CPUS:-anywhere}, perf_analyzer ${CLIENT_CPUS:-anywhere}"
  echo "perf_analyzer: $PA"
} | tee "$OUT/machine.txt"
echo "round,binary,inferences_per_second,server_cpu_us_per_request,p50_latency_us,load1" \
  > "$OUT/runs.csv"
for r in $(seq "$ROUNDS"); do
  if [ $((r % 2)) = 1 ]; then
    run A "$A" "$r"; run B "$B" "$r"
  else
    run B "$B" "$r"; run A "$A" "$r"
  fi
done
python3 "$ROOT/bench/server_paired_report.py" "$OUT/runs.csv" | tee "$OUT/summary.txt"
