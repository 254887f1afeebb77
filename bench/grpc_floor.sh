#!/usr/bin/env bash
# The request path's floor on this machine: perf_analyzer against bench/grpc_floor (KServe v2
# over gRPC with no model) in each threading design, the same requests as server_bench.sh's
# tiny model (x [B, 10, 8] FP32). Per mode and concurrency: requests/s, p50/p99 and the
# server's CPU µs per request.
#
# usage: bench/grpc_floor.sh BUILD_DIR OUT_DIR [CONCURRENCIES...]   (default 1 16 64 256)
# env:   PERF_ANALYZER, INTERVAL_MS, SERVER_CPUS, CLIENT_CPUS as for server_bench.sh; FLOOR the
#        grpc_floor binary (default BUILD_DIR/bench/grpc_floor);
#        MODES (default "sync sync-worker callback callback-worker")
set -euo pipefail
BUILD=$1 OUT=$2; shift 2
CONCURRENCIES=("$@"); [ ${#CONCURRENCIES[@]} -gt 0 ] || CONCURRENCIES=(1 16 64 256)
ROOT=$(cd "$(dirname "$0")/.." && pwd)
FLOOR=${FLOOR:-$BUILD/bench/grpc_floor}
[ -x "$FLOOR" ] || { echo "no $FLOOR: build the grpc_floor target"; exit 1; }
PA=${PERF_ANALYZER:-$(command -v perf_analyzer || echo /opt/perf_analyzer/bin/perf_analyzer)}
[ -x "$PA" ] || { echo "perf_analyzer not found (docs/kserve.md says how to install it)"; exit 1; }
CUDART=$(python3 -c 'import nvidia.cuda_runtime as m; print(list(m.__path__)[0] + "/lib")' \
  2>/dev/null || true)
export LD_LIBRARY_PATH=${CUDART:+$CUDART:}${LD_LIBRARY_PATH:-}
source "$ROOT/bench/server_common.sh"
SERVER_PIN=(); CLIENT_PIN=()
[ -n "${SERVER_CPUS:-}" ] && SERVER_PIN=(taskset -c "$SERVER_CPUS")
[ -n "${CLIENT_CPUS:-}" ] && CLIENT_PIN=(taskset -c "$CLIENT_CPUS")
mkdir -p "$OUT"
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')

requests() {  # requests PID LOG: the server's answered calls so far
  local before
  before=$(grep -c '^requests ' "$2" || true)
  kill -USR1 "$1"
  for _ in $(seq 100); do
    [ "$(grep -c '^requests ' "$2" || true)" -gt "$before" ] && break
    sleep 0.02
  done
  grep '^requests ' "$2" | tail -1 | cut -d' ' -f2
}

echo "mode concurrency cpu0 cpu1 req0 req1" > "$OUT/server_cpu.txt"
for mode in ${MODES:-sync sync-worker callback callback-worker}; do
  "${SERVER_PIN[@]}" "$FLOOR" --port "$PORT" --api "${mode%%+*}" ${FLOOR_ARGS:-} > "$OUT/server_$mode.log" 2>&1 &
  server=$!
  for _ in $(seq 200); do (exec 3<>/dev/tcp/127.0.0.1/"$PORT") 2>/dev/null && break; sleep 0.05; done
  for c in "${CONCURRENCIES[@]}"; do
    name=${mode}_c$c
    cpu0=$(server_cpu_seconds "$server"); req0=$(requests "$server" "$OUT/server_$mode.log")
    "${CLIENT_PIN[@]}" "$PA" -u "127.0.0.1:$PORT" -i grpc -m floor --shape x:10,8 \
      --concurrency-range "$c" --measurement-interval "${INTERVAL_MS:-1500}" \
      --stability-percentage 999 --max-trials 3 -f "$OUT/$name.csv" > "$OUT/$name.log" 2>&1 ||
      { tail -5 "$OUT/$name.log"; exit 1; }
    echo "$mode $c $cpu0 $(server_cpu_seconds "$server") $req0 \
$(requests "$server" "$OUT/server_$mode.log")" >> "$OUT/server_cpu.txt"
  done
  kill "$server"; wait "$server" 2>/dev/null || true
done

python3 - "$OUT" <<'PY' | tee "$OUT/floor.md"
import csv, sys
out = sys.argv[1]
rows = [l.split() for l in open(f"{out}/server_cpu.txt").read().splitlines()[1:]]
print("| mode | concurrency | requests/s | p50 µs | p99 µs | server CPU µs/request |")
print("|---|---:|---:|---:|---:|---:|")
for mode, c, cpu0, cpu1, r0, r1 in rows:
    rec = list(csv.DictReader(open(f"{out}/{mode}_c{c}.csv")))[-1]
    n = float(r1) - float(r0)
    cpu = (float(cpu1) - float(cpu0)) / n * 1e6 if n > 0 else float("nan")
    print(f"| {mode} | {c} | {float(rec['Inferences/Second']):.0f} | "
          f"{float(rec['p50 latency']):.0f} | {float(rec['p99 latency']):.0f} | {cpu:.1f} |")
PY
