# Sourced by the server benchmarks (server_bench.sh, server_paired_bench.sh, gpu_device_run.sh):
# waiting for a started rnnserve, and what it has spent.

# wait_for_server PORT METRICS_PORT WANT: until the gRPC port accepts calls and the server's
# /metrics reports its models loaded (it listens before they load). WANT is a model's name, or
# how many models must have loaded.
wait_for_server() {
  for _ in $(seq 400); do
    (exec 3<>/dev/tcp/127.0.0.1/"$1") 2>/dev/null && break
    sleep 0.05
  done
  for _ in $(seq 600); do
    python3 - "$2" "$3" <<'PY' 2>/dev/null && return 0
import sys, urllib.request
port, want = sys.argv[1], sys.argv[2]
text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics").read().decode()
loaded = [l for l in text.splitlines() if l.startswith("rnnserve_model_loaded{") and l.endswith(" 1")]
sys.exit(0 if (len(loaded) >= int(want) if want.isdigit()
               else any(f'model="{want}"' in l for l in loaded)) else 1)
PY
    sleep 0.2
  done
  return 1
}

# server_cpu_seconds PID: user + system CPU seconds of the process so far.
server_cpu_seconds() {
  awk -v hz="$(getconf CLK_TCK)" '{sub(/.*\) /, ""); print ($12 + $13) / hz}' "/proc/$1/stat"
}

# server_requests METRICS_PORT [METHOD]: the calls of METHOD (default the KServe ModelInfer) the
# server has answered (any code).
server_requests() {
  python3 - "$1" "${2:-ModelInfer}" <<'PY'
import sys, urllib.request
text = urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/metrics").read().decode()
print(sum(float(l.rsplit(" ", 1)[1]) for l in text.splitlines()
          if l.startswith("rnnserve_requests_total{") and f'method="{sys.argv[2]}"' in l))
PY
}
