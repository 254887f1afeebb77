#!/usr/bin/env bash
# Renders rnnserve's Prometheus console (consoles/rnnserve.html) to a PNG with real data:
# starts rnnserve on the example model repository and a Prometheus configured from
# prometheus.yml (scraping every 2 s), sends mixed Predict load with rnnserve-cli for a while,
# then screenshots the console page with headless Chromium.
#
#   deploy/prometheus/render_dashboard.sh [BUILD_DIR] [OUT_PNG] [LOAD_SECONDS]
#   defaults: build/release docs/metrics_dashboard.png 150
#
# Needs: a built rnnserve and rnnserve-cli, python3, and the Debian packages prometheus and
# chromium. Everything listens on 127.0.0.1 and is stopped on exit.
set -euo pipefail
cd "$(dirname "$0")/../.."
src="$(pwd)"
build="${1:-build/release}"
out="${2:-docs/metrics_dashboard.png}"
load_seconds="${3:-150}"

for tool in prometheus chromium python3; do
  command -v "$tool" >/dev/null || { echo "render_dashboard: $tool not found" >&2; exit 1; }
done
if [ ! -x "$build/server/rnnserve" ] || [ ! -x "$build/client/rnnserve-cli" ]; then
  echo "render_dashboard: build rnnserve and rnnserve-cli in $build first" >&2
  exit 1
fi

tmp="$(mktemp -d /tmp/rnnserve_render_XXXXXX)"
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_http() {  # URL, seconds
  for _ in $(seq 1 $((${2} * 5))); do
    python3 -c "import urllib.request,sys; urllib.request.urlopen(sys.argv[1], timeout=1)" "$1" \
      2>/dev/null && return 0
    sleep 0.2
  done
  echo "render_dashboard: $1 did not answer" >&2
  return 1
}

grpc_port="$(free_port)"
metrics_port="$(free_port)"
prom_port="$(free_port)"

"$build/server/rnnserve" --model-repository models/examples --port "$grpc_port" \
  --metrics-port "$metrics_port" --http-port 0 --log-level warning &
pids+=($!)
wait_http "http://127.0.0.1:$metrics_port/metrics" 60

sed -e 's/scrape_interval: 15s/scrape_interval: 2s/' \
    -e 's/evaluation_interval: 15s/evaluation_interval: 2s/' \
    -e "s#\"localhost:8502\"#\"127.0.0.1:$metrics_port\"#" \
    -e "s#- rules/#- $src/deploy/prometheus/rules/#" \
    deploy/prometheus/prometheus.yml > "$tmp/prometheus.yml"
mkdir -p "$tmp/console_libraries"  # the console needs no library
prometheus --config.file="$tmp/prometheus.yml" --storage.tsdb.path="$tmp/data" \
  --web.listen-address="127.0.0.1:$prom_port" \
  --web.console.templates="$src/deploy/prometheus/consoles" \
  --web.console.libraries="$tmp/console_libraries" \
  --log.level=warn > "$tmp/prometheus.log" 2>&1 &
pids+=($!)
wait_http "http://127.0.0.1:$prom_port/-/ready" 30

# Inputs of mixed batch sizes and lengths; each sequence's own length is random, so batches
# carry padding. One bad file (3 features instead of 2) gives INVALID_ARGUMENT answers.
python3 - "$tmp" <<'PY'
import json, math, random, sys
random.seed(7)
d = sys.argv[1]
n = 0
for B in (1, 2, 4, 8, 16):
    for T in (16, 32, 64, 128):
        lengths = [random.randint(max(1, T // 4), T) for _ in range(B)]
        x = [[[math.sin(0.1 * t + b), 0.5 * math.cos(0.2 * t)] for t in range(T)] for b in range(B)]
        json.dump(x, open(f"{d}/in{n}.json", "w"))
        open(f"{d}/in{n}.len", "w").write(",".join(map(str, lengths)))
        n += 1
json.dump([[[0.0, 0.0, 0.0]] * 4], open(f"{d}/bad.json", "w"))
PY

load_loop() {  # seconds
  local end=$(( $(date +%s) + $1 ))
  while [ "$(date +%s)" -lt "$end" ]; do
    local i=$((RANDOM % 20))
    if [ $((RANDOM % 40)) -eq 0 ]; then
      "$build/client/rnnserve-cli" predict --server "127.0.0.1:$grpc_port" --model waveform_lstm \
        --input "waveform=$tmp/bad.json" >/dev/null 2>&1 || true
    else
      "$build/client/rnnserve-cli" predict --server "127.0.0.1:$grpc_port" --model waveform_lstm \
        --input "waveform=$tmp/in$i.json" --lengths "$(cat "$tmp/in$i.len")" >/dev/null 2>&1 || true
    fi
  done
}

# Three phases of rising concurrency, so queueing shows against compute time.
phase=$((load_seconds / 3))
echo "render_dashboard: ${load_seconds}s of load (1, then 3, then 6 concurrent clients)"
for clients in 1 3 6; do
  loops=()
  for _ in $(seq 1 "$clients"); do load_loop "$phase" & loops+=($!); done
  wait "${loops[@]}"
done
sleep 6  # two more scrapes and rule evaluations

mkdir -p "$(dirname "$out")"
chromium --headless=new --no-sandbox --disable-gpu --hide-scrollbars --force-device-scale-factor=1 \
  --window-size=1400,870 --virtual-time-budget=20000 --screenshot="$tmp/shot.png" \
  "http://127.0.0.1:$prom_port/consoles/rnnserve.html?seconds=$((load_seconds + 30))" \
  > "$tmp/chromium.log" 2>&1 || { cat "$tmp/chromium.log" >&2; exit 1; }
cp "$tmp/shot.png" "$out"
echo "render_dashboard: wrote $out"
