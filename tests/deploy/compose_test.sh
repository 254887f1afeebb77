#!/usr/bin/env bash
# The compose stack (deploy/compose.yaml) run for real: rnnserve and Prometheus (built from
# Debian's package, with deploy/prometheus's rules), N predicts from the host, and Prometheus's
# API shows rnnserve_requests_total at N and the job the dashboard and alerts select up. Run
# from the repository root with the settings as its header writes them: RNNSERVE_MODELS=
# $PWD/models/examples (the mount is the example repository), RNNSERVE_ARGS (the flags reach
# rnnserve), RNNSERVE_CPUS (the limit is set), and the ports published on 127.0.0.1 only.
# Grafana's image cannot be pulled on machines without a registry, so the stack runs the two
# services that build here.
#   tests/deploy/compose_test.sh RNNSERVE_CLI
set -euo pipefail
source "$(dirname "$0")/podman_env.sh"
cli=${1:?usage: compose_test.sh RNNSERVE_CLI}
require_podman
command -v podman-compose >/dev/null 2>&1 ||
  skip "no podman-compose (deploy/install_deps.sh)"

n=20
project="rnnserve-deploy-test-$$"
compose=(podman-compose -p "$project" -f "$ROOT/deploy/compose.yaml")
export BASE_IMAGE=localhost/debian:bookworm
cd "$ROOT"
export RNNSERVE_MODELS=$PWD/models/examples   # as deploy/compose.yaml's header writes it
export RNNSERVE_ARGS="--drain-seconds 1 --strict-readiness"
export RNNSERVE_CPUS=1
grep -qF 'RNNSERVE_MODELS=$PWD/models/examples docker compose -f deploy/compose.yaml up -d' \
  deploy/compose.yaml || { echo "FAIL: deploy/compose.yaml's header has another volume example"; exit 1; }
RNNSERVE_GRPC_PORT=$(free_port)
RNNSERVE_HTTP_PORT=$(free_port)
RNNSERVE_METRICS_PORT=$(free_port)
PROMETHEUS_PORT=$(free_port)
export RNNSERVE_GRPC_PORT RNNSERVE_HTTP_PORT RNNSERVE_METRICS_PORT PROMETHEUS_PORT
# podman-compose 1.0's down leaves the project's network behind.
trap '"${compose[@]}" down -t 30 >/dev/null 2>&1 || true
      podman network rm -f "${project}_default" >/dev/null 2>&1 || true' EXIT

make_base
build_cpu_image  # compose's own build would drop the HEALTHCHECK (OCI format)
start=$SECONDS
podman build --format docker --network host --build-arg BASE_IMAGE="$BASE_IMAGE" \
  -t localhost/rnnserve-prometheus:latest -f "$ROOT/deploy/docker/prometheus.Dockerfile" "$ROOT"
echo "timing: Prometheus image build $((SECONDS - start)) s"

start=$SECONDS
"${compose[@]}" up -d rnnserve prometheus
server=$(podman ps --filter "label=io.podman.compose.project=$project" \
  --filter "label=com.docker.compose.service=rnnserve" --format '{{.Names}}' | head -1)
[ -n "$server" ] || { echo "FAIL: no rnnserve container"; podman ps -a; exit 1; }
wait_healthy "$server" 120
echo "timing: compose up to healthy $((SECONDS - start)) s"

mounts=$(podman inspect -f '{{range .Mounts}}{{.Source}}:{{.Destination}} {{end}}' "$server")
grep -qF "$ROOT/models/examples:/models" <<<"$mounts" ||
  { echo "FAIL: /models is not models/examples: $mounts"; exit 1; }
podman logs "$server" 2>&1 | grep -c "1 model(s) ready from /models" >/dev/null ||
  { echo "FAIL: the log does not say the example loaded:"; podman logs "$server" 2>&1 | tail; exit 1; }
cpus=$(podman inspect -f '{{.HostConfig.NanoCpus}}' "$server")
[ "$cpus" = 1000000000 ] || { echo "FAIL: CPU limit $cpus nano-CPUs, not RNNSERVE_CPUS=1"; exit 1; }
bindings=$(podman inspect -f '{{range $p, $b := .HostConfig.PortBindings}}{{range $b}}{{.HostIP}} {{end}}{{end}}' "$server")
for ip in $bindings; do
  [ "$ip" = 127.0.0.1 ] || { echo "FAIL: a port is published on '$ip', not 127.0.0.1"; exit 1; }
done
[ -n "$bindings" ] || { echo "FAIL: no published port"; exit 1; }
echo "compose: /models is models/examples, 1 CPU, ports on 127.0.0.1 ($bindings)"

for _ in $(seq "$n"); do
  "$cli" predict --server "127.0.0.1:$RNNSERVE_GRPC_PORT" --model waveform_lstm \
    --input "$ROOT/models/examples/waveform_lstm/sample_input.json" >/dev/null
done
echo "sent $n predicts"
curl -fsS "http://127.0.0.1:$RNNSERVE_HTTP_PORT/v2/health/ready" >/dev/null ||
  { echo "FAIL: KServe v2 REST is not answering on the published HTTP port"; exit 1; }
echo "compose: HTTP/REST answers on 127.0.0.1:$RNNSERVE_HTTP_PORT"

query='sum(rnnserve_requests_total{model="waveform_lstm",method="Predict",code="OK"})'
start=$SECONDS
seen=""
while [ $((SECONDS - start)) -lt 90 ]; do
  seen=$(curl -fsS "http://127.0.0.1:$PROMETHEUS_PORT/api/v1/query" --data-urlencode "query=$query" |
    python3 -c 'import json, sys; r = json.load(sys.stdin)["data"]["result"]; print(r[0]["value"][1] if r else "")' ||
    true)
  [ "$seen" = "$n" ] && break
  sleep 2
done
echo "prometheus: $query = ${seen:-none} after $((SECONDS - start)) s"
[ "$seen" = "$n" ] || {
  echo "FAIL: Prometheus shows ${seen:-nothing}, not $n"
  curl -fsS "http://127.0.0.1:$PROMETHEUS_PORT/api/v1/targets" | head -c 2000 || true
  exit 1
}
rules=$(curl -fsS "http://127.0.0.1:$PROMETHEUS_PORT/api/v1/rules" |
  python3 -c 'import json, sys; print(sum(len(g["rules"]) for g in json.load(sys.stdin)["data"]["groups"]))')
echo "prometheus: $rules rules loaded"
[ "$rules" -gt 0 ] || { echo "FAIL: Prometheus loaded no rules"; exit 1; }
up=$(curl -fsS "http://127.0.0.1:$PROMETHEUS_PORT/api/v1/query" --data-urlencode 'query=up{job="rnnserve"}' |
  python3 -c 'import json, sys; r = json.load(sys.stdin)["data"]["result"]; print(r[0]["value"][1] if r else "")')
[ "$up" = 1 ] || { echo "FAIL: up{job=\"rnnserve\"} (the alerts' and dashboard's job) is '${up:-absent}'"; exit 1; }
echo "prometheus: up{job=\"rnnserve\"} = 1"

# RNNSERVE_ARGS reached rnnserve: its drain is the 1 s asked for, not the default.
podman stop -t 30 "$server" >/dev/null
podman logs "$server" 2>&1 | grep -c "draining for 1 s" >/dev/null ||
  { echo "FAIL: RNNSERVE_ARGS did not reach rnnserve:"; podman logs "$server" 2>&1 | tail; exit 1; }
echo "compose: RNNSERVE_ARGS reached rnnserve (drain 1 s)"

start=$SECONDS
"${compose[@]}" down -t 30
podman network rm -f "${project}_default" >/dev/null 2>&1 || true
echo "timing: compose down $((SECONDS - start)) s"
trap - EXIT
echo "PASS"
