#!/usr/bin/env bash
# Dynamic batching on vs off at concurrency 1, in alternating rounds so that the load of a
# shared machine falls on both alike: perf_analyzer over KServe gRPC against one rnnserve
# serving bench/server_models (tiny_lstm: batching off; tiny_lstm_batched: on).
#
# usage: bench/server_batching_c1.sh [BUILD_DIR (build/release)] [ROUNDS (7)]
# env:   PERF_ANALYZER, RNNSERVE as for bench/server_bench.sh; RNNSERVE_CLI (BUILD_DIR/client/
#        rnnserve-cli, for the readiness check); WINDOW_MS (1500, three windows a run);
#        MODEL_REPO (bench/server_models; bench/server_models_gpu on a GPU machine);
#        SERVER_ARGS (more rnnserve flags); SERVER_CPUS, CLIENT_CPUS (taskset CPU lists)
# Prints each round and the medians: throughput ratio on/off and p50 on - off.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$ROOT/build/release}
ROUNDS=${2:-7}
WINDOW_MS=${WINDOW_MS:-1500}
RNNSERVE=${RNNSERVE:-$BUILD/server/rnnserve}
PA=${PERF_ANALYZER:-$(command -v perf_analyzer || echo /opt/perf_analyzer/bin/perf_analyzer)}
CUDART=$(python3 -c 'import nvidia.cuda_runtime as m; print(list(m.__path__)[0] + "/lib")' \
  2>/dev/null || true)
export LD_LIBRARY_PATH=${CUDART:+$CUDART:}${LD_LIBRARY_PATH:-}
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
SERVER_PIN=(); CLIENT_PIN=()
[ -n "${SERVER_CPUS:-}" ] && SERVER_PIN=(taskset -c "$SERVER_CPUS")
[ -n "${CLIENT_CPUS:-}" ] && CLIENT_PIN=(taskset -c "$CLIENT_CPUS")
# shellcheck disable=SC2086  # SERVER_ARGS is a list of flags
"${SERVER_PIN[@]}" "$RNNSERVE" --model-repository "${MODEL_REPO:-$ROOT/bench/server_models}" \
  --port "$PORT" --metrics-port 0 --http-port 0 --log-level warning --drain-seconds 0 \
  --allow-symlinks-outside-repository ${SERVER_ARGS:-} &
SERVER=$!
trap 'kill $SERVER 2>/dev/null; wait $SERVER 2>/dev/null || true' EXIT
# The server listens before its models load; it reports SERVING once they have.
CLI=${RNNSERVE_CLI:-$BUILD/client/rnnserve-cli}
for _ in $(seq 600); do
  "$CLI" health --server "127.0.0.1:$PORT" --timeout-ms 500 >/dev/null 2>&1 && break
  sleep 0.1
done
OUT=$(mktemp -d)
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores; rnnserve $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null); flags: ${SERVER_ARGS:-none}"
echo "round,model,seq_per_s,p50_us,p99_us"
for r in $(seq "$ROUNDS"); do
  for model in tiny_lstm tiny_lstm_batched; do
    "${CLIENT_PIN[@]}" "$PA" -u "127.0.0.1:$PORT" -i grpc -m "$model" --shape x:10,8 --concurrency-range 1 \
      --measurement-interval "$WINDOW_MS" --stability-percentage 999 --max-trials 3 \
      -f "$OUT/$r-$model.csv" > /dev/null 2>&1
    # columns: Concurrency, Inferences/Second, ..., p50 latency (10th), p90, p95, p99 (13th)
    tail -1 "$OUT/$r-$model.csv" | awk -F, -v r="$r" -v m="$model" '{print r "," m "," $2 "," $10 "," $13}'
  done
done | tee "$OUT/rounds.csv"
python3 - "$OUT/rounds.csv" <<'PY'
import csv, statistics, sys
rows = list(csv.reader(open(sys.argv[1])))
by = {}
for r, m, tput, p50, p99 in rows:
    by.setdefault(r, {})[m] = (float(tput), float(p50), float(p99))
ratio = [v["tiny_lstm_batched"][0] / v["tiny_lstm"][0] for v in by.values()]
dp50 = [v["tiny_lstm_batched"][1] - v["tiny_lstm"][1] for v in by.values()]
off = statistics.median(v["tiny_lstm"][1] for v in by.values())
on = statistics.median(v["tiny_lstm_batched"][1] for v in by.values())
print(f"median over {len(by)} rounds: throughput on/off {statistics.median(ratio):.2f}x, "
      f"p50 off {off:.0f} us, on {on:.0f} us, on - off {statistics.median(dp50):+.0f} us")
PY
