#!/usr/bin/env bash
# Server benchmarks: perf_analyzer against the real rnnserve over the KServe v2 gRPC protocol,
# on this machine: the CPU engine (bench/server_models), or the GPU engine with
# MODEL_REPO=bench/server_models_gpu. Writes one CSV per run under OUT_DIR and a summary with
# bench/server_report.py, with the server's CPU time per request of each run (user + system
# time of its process over the requests it answered: server_cpu.txt, a line a run with the
# name, the CPU seconds and the request count before and after).
#
# usage: bench/server_bench.sh [BUILD_DIR (build/release)] [OUT_DIR (build/bench-server)]
# env:   PERF_ANALYZER  the perf_analyzer binary (default: PATH, then /opt/perf_analyzer/bin)
#        RNNSERVE       the server binary (default BUILD_DIR/server/rnnserve)
#        MODEL_REPO     the model repository (default bench/server_models: CPU instances)
#        LEVELS         concurrency levels of the sweeps (default "1 2 4 8 16 32 64 128 256")
#        INTERVAL_MS    perf_analyzer measurement window (default 1500)
#        LATENCY_RUNS   repeats of the concurrency-1 latency run (default 3)
#        SERVER_CPUS, CLIENT_CPUS  taskset CPU lists that keep the server and perf_analyzer on
#                       cores of their own (default: both anywhere)
# Models (bench/server_models/): tiny_lstm (H=32, 8 features, T=10 sent) and lstm256 (H=256,
# 16 features, T=50 sent), each as <model> (max_batch_size 1) and <model>_batched (dynamic
# batching, max_batch_size 64). The server's /metrics is saved around each mixed-length run,
# so the report reads real and computed time steps from rnnserve_batch_timesteps_*_total.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$ROOT/build/release}
OUT=${2:-$ROOT/build/bench-server}
LEVELS=${LEVELS:-1 2 4 8 16 32 64 128 256}
LATENCY_RUNS=${LATENCY_RUNS:-3}
RNNSERVE=${RNNSERVE:-$BUILD/server/rnnserve}
MODEL_REPO=${MODEL_REPO:-$ROOT/bench/server_models}
INTERVAL_MS=${INTERVAL_MS:-1500}
mkdir -p "$OUT"

PA=${PERF_ANALYZER:-$(command -v perf_analyzer || echo /opt/perf_analyzer/bin/perf_analyzer)}
[ -x "$PA" ] || { echo "perf_analyzer not found (docs/kserve.md says how to install it)"; exit 1; }
CUDART=$(python3 -c 'import nvidia.cuda_runtime as m; print(list(m.__path__)[0] + "/lib")' \
  2>/dev/null || true)
export LD_LIBRARY_PATH=${CUDART:+$CUDART:}${LD_LIBRARY_PATH:-}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
PORT=$(free_port)
METRICS_PORT=$(free_port)
SERVER_PIN=(); CLIENT_PIN=()
[ -n "${SERVER_CPUS:-}" ] && SERVER_PIN=(taskset -c "$SERVER_CPUS")
[ -n "${CLIENT_CPUS:-}" ] && CLIENT_PIN=(taskset -c "$CLIENT_CPUS")
# The GPU repository's model files link into the CPU one: both are this checkout's. The
# sweeps reach 256 requests in flight on a model without batching, past the default cap of 8
# an instance (what a client gets then is RESOURCE_EXHAUSTED, not a measurement).
"${SERVER_PIN[@]}" "$RNNSERVE" --model-repository "$MODEL_REPO" --port "$PORT" \
  --metrics-port "$METRICS_PORT" --http-port 0 --log-level warning --allow-symlinks-outside-repository \
  --max-concurrent-per-model=512 &
SERVER=$!
trap 'kill $SERVER 2>/dev/null; wait $SERVER 2>/dev/null || true' EXIT
source "$ROOT/bench/server_common.sh"
wait_for_server "$PORT" "$METRICS_PORT" \
  "$(find "$MODEL_REPO" -mindepth 2 -maxdepth 2 -name config.pbtxt | wc -l)"

pa() {  # pa NAME ARGS...: one perf_analyzer run, CSV to $OUT/NAME.csv
  local name=$1; shift
  echo "== $name: $*"
  local cpu0 reqs0
  cpu0=$(server_cpu_seconds "$SERVER"); reqs0=$(server_requests "$METRICS_PORT")
  "${CLIENT_PIN[@]}" "$PA" -u "127.0.0.1:$PORT" -i grpc --measurement-interval "$INTERVAL_MS" \
    --stability-percentage 999 --max-trials 3 -f "$OUT/$name.csv" "$@" \
    > "$OUT/$name.log" 2>&1 || { tail -5 "$OUT/$name.log"; return 1; }
  tail -3 "$OUT/$name.csv" | sed 's/^/   /'
  echo "$name $(cut -d' ' -f1-3 /proc/loadavg)" >> "$OUT/loadavg.txt"
  # Server CPU time per request over the whole run (perf_analyzer's warm-up and trials): the
  # cost a request puts on the server, whatever the number of cores.
  echo "$name $cpu0 $(server_cpu_seconds "$SERVER") $reqs0 $(server_requests "$METRICS_PORT")" \
    >> "$OUT/server_cpu.txt"
}

scrape() {  # scrape FILE: the server's Prometheus text
  python3 -c 'import sys, urllib.request; sys.stdout.write(urllib.request.urlopen(sys.argv[1]).read().decode())' \
    "http://127.0.0.1:$METRICS_PORT/metrics" > "$1"
}

{
  echo "date: $(date -u +%Y-%m-%dT%H:%MZ)"
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores"
  echo "memory: $(free -g | awk '/Mem:/{print $2}') GiB"
  echo "gpu: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null |
    head -1 || echo none)"
  echo "models: $MODEL_REPO"
  echo "perf_analyzer: $PA${CLIENT_CPUS:+ on CPUs $CLIENT_CPUS}${SERVER_CPUS:+, rnnserve on CPUs $SERVER_CPUS}"
  echo "rnnserve: $(git -C "$ROOT" rev-parse --short HEAD)"
  echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
} > "$OUT/machine.txt"

: > "$OUT/loadavg.txt"
: > "$OUT/server_cpu.txt"
# 1. Tiny model, T=10, concurrency 1: latency, repeated.
for r in $(seq "$LATENCY_RUNS"); do
  pa latency_c1_r$r -m tiny_lstm --shape x:10,8 --concurrency-range 1 --measurement-interval 4000
done
# 2. Concurrency sweeps, batching off and on: the tiny model (T=10), then LSTM H=256 (T=50).
for c in $LEVELS; do
  pa off_c$c -m tiny_lstm --shape x:10,8 --concurrency-range "$c"
  pa on_c$c -m tiny_lstm_batched --shape x:10,8 --concurrency-range "$c"
done
for c in $LEVELS; do
  pa lstm256_off_c$c -m lstm256 --shape x:50,16 --concurrency-range "$c"
  pa lstm256_on_c$c -m lstm256_batched --shape x:50,16 --concurrency-range "$c"
done
# 3. Client-side batches (what an engine call of B sequences gives): the batcher's ceiling.
for b in 8 32 64; do
  pa client_b$b -m tiny_lstm_batched --shape x:10,8 -b "$b" --concurrency-range 2
  pa lstm256_client_b$b -m lstm256_batched --shape x:50,16 -b "$b" --concurrency-range 2
done
# 4. Mixed lengths, uniform in [10, 500], tiny model; time steps from /metrics around each run.
python3 "$ROOT/bench/server_mixed_lengths.py" "$OUT/mixed_lengths.json" 64 > "$OUT/mixed.txt"
for c in 1 16 64; do
  for m in off on; do
    model=tiny_lstm; [ "$m" = on ] && model=tiny_lstm_batched
    scrape "$OUT/mixed_${m}_c$c.before.prom"
    pa mixed_${m}_c$c -m "$model" --input-data "$OUT/mixed_lengths.json" --concurrency-range "$c"
    scrape "$OUT/mixed_${m}_c$c.after.prom"
  done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$OUT/machine.txt"
echo "CSV files in $OUT"
