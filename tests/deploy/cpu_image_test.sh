#!/usr/bin/env bash
# The CPU image, built and run for real: it builds on the local base, stays within its size,
# passes its HEALTHCHECK (gRPC health), answers the example's predict with Keras's numbers from
# the host's rnnserve-cli, serves /metrics, runs as a non-root user, and on `podman stop`
# (SIGTERM to PID 1) drains and exits 0 within the grace period. Then the volume example of
# docs/deploy.md (the same in cpu.Dockerfile's header), run as written from the repository root
# with podman for docker and free ports: its mount is a model repository whose models all load
# (the image's HEALTHCHECK, strict readiness, would fail otherwise) and it answers the predict.
#   tests/deploy/cpu_image_test.sh RNNSERVE_CLI
set -euo pipefail
source "$(dirname "$0")/podman_env.sh"
cli=${1:?usage: cpu_image_test.sh RNNSERVE_CLI}
require_podman

max_bytes=$((250 * 1000 * 1000))
grace_s=30
name="rnnserve-deploy-test-$$"
trap 'for c in "$name" "$name-volume"; do podman rm -f "$c" >/dev/null 2>&1 || true; done' EXIT

make_base
build_cpu_image
size=$(podman image inspect -f '{{.Size}}' localhost/rnnserve:cpu)
echo "image: localhost/rnnserve:cpu $((size / 1000000)) MB"
[ "$size" -le "$max_bytes" ] || { echo "FAIL: image is $size bytes, over $max_bytes"; exit 1; }

grpc_port=$(free_port)
http_port=$(free_port)
metrics_port=$(free_port)
start=$SECONDS
podman run -d --name "$name" -p "127.0.0.1:$grpc_port:8500" -p "127.0.0.1:$http_port:8501" -p "127.0.0.1:$metrics_port:8502" \
  localhost/rnnserve:cpu >/dev/null
wait_healthy "$name" 120
echo "timing: start to healthy $((SECONDS - start)) s"

uid=$(podman exec "$name" id -u)
[ "$uid" = 10001 ] || { echo "FAIL: the server runs as uid $uid, not 10001"; exit 1; }

predict_matches_keras "$cli" "127.0.0.1:$grpc_port"

# The REST port the image publishes: TF Serving's model status and KServe v2 readiness.
status=$(curl -fsS "http://127.0.0.1:$http_port/v1/models/waveform_lstm")
grep -q '"state": *"AVAILABLE"' <<<"$status" || {
  echo "FAIL: TF Serving REST model status on 8501: $status"; exit 1
}
curl -fsS "http://127.0.0.1:$http_port/v2/health/ready" >/dev/null || {
  echo "FAIL: KServe v2 REST readiness on 8501"; exit 1
}
echo "http: 8501 answers TF Serving's model status and KServe v2 readiness"

metrics=$(curl -fsS "http://127.0.0.1:$metrics_port/metrics")
grep '^rnnserve_requests_total{' <<<"$metrics" | grep 'model="waveform_lstm"' |
  grep 'method="Predict"' | grep -c ' 1$' >/dev/null || {
  echo "FAIL: /metrics has no Predict counted for waveform_lstm:"
  grep rnnserve_requests_total <<<"$metrics" || true
  exit 1
}
echo "metrics: /metrics counts the predict"

start=$SECONDS
podman stop -t "$grace_s" "$name" >/dev/null
took=$((SECONDS - start))
code=$(podman inspect -f '{{.State.ExitCode}}' "$name")
logs=$(podman logs "$name" 2>&1)
echo "stop: exit $code after $took s"
[ "$code" = 0 ] || { echo "FAIL: exit code $code"; tail -20 <<<"$logs"; exit 1; }
[ "$took" -lt "$grace_s" ] || { echo "FAIL: stop took $took s (grace $grace_s s)"; exit 1; }
grep -q "signal 15: draining" <<<"$logs" && grep -q "stopped" <<<"$logs" || {
  echo "FAIL: the log does not show the drain:"; tail -20 <<<"$logs"; exit 1
}

example=$(grep -m1 -E '^docker run .* -v "\$PWD/[^"]*:/models:ro" rnnserve:cpu' "$ROOT/docs/deploy.md" |
  sed 's/ *#.*//')
[ -n "$example" ] || { echo "FAIL: docs/deploy.md has no volume example"; exit 1; }
grep -qF "#   $example" "$ROOT/deploy/docker/cpu.Dockerfile" ||
  { echo "FAIL: cpu.Dockerfile's header does not have docs/deploy.md's example: $example"; exit 1; }
echo "example: $example"
grpc_port=$(free_port)
run=${example/#docker run/podman run -d --name $name-volume}
run=${run/127.0.0.1:8500:8500/127.0.0.1:$grpc_port:8500}
run=${run/% rnnserve:cpu/ localhost/rnnserve:cpu}
[ "$run" != "$example" ] && grep -q "$grpc_port:8500" <<<"$run" ||
  { echo "FAIL: cannot run the example with a free port: $example"; exit 1; }
(cd "$ROOT" && eval "$run") >/dev/null
wait_healthy "$name-volume" 120
mounts=$(podman inspect -f '{{range .Mounts}}{{.Source}}:{{.Destination}} {{end}}' "$name-volume")
echo "example: mounts $mounts"
podman logs "$name-volume" 2>&1 | grep -c "1 model(s) ready from /models" >/dev/null ||
  { echo "FAIL: the example's repository:"; podman logs "$name-volume" 2>&1 | tail; exit 1; }
predict_matches_keras "$cli" "127.0.0.1:$grpc_port"
podman rm -f "$name-volume" >/dev/null
echo "PASS"
