#!/usr/bin/env bash
# The scale-out stack of deploy/compose.scale-out.yaml run for real with podman-compose (three
# rnnserve replicas of IMAGE, Redis and HAProxy, as the file has them; bearer tokens on), then
# bench/scale_out_compose.py: sequences stream through HAProxy while replica rnnserve-2 is
# stopped (podman stop: SIGTERM, drained), and each finished sequence is compared with Keras.
# Needs podman, podman-compose and the images localhost/rnnserve-redis and
# localhost/rnnserve-haproxy (podman-compose ... build, or tests/deploy's helpers) on the local
# base; /work/shared-style settings come from deploy/docker/containers.conf.
# HOW "kill" sends SIGKILL (podman kill) instead.
#   bench/scale_out_compose.sh [IMAGE (localhost/rnnserve:cpu)] [DURABILITY (chunk)] [HOW (stop)]
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
export CONTAINERS_CONF="$ROOT/deploy/docker/containers.conf"
image=${1:-localhost/rnnserve:cpu}
durability=${2:-chunk}
how=${3:-stop}
project="rnnserve-scale-out-bench-$$"
work=$(mktemp -d)
chmod 755 "$work"
token="scale-out-token-$RANDOM$RANDOM"
cp -r "$ROOT/models/examples" "$work/models"
echo "$token" > "$work/models/tokens"
chmod -R a+rX "$work/models"
{
  echo "services:"
  for r in 1 2 3; do printf '  rnnserve-%s:\n    image: %s\n' "$r" "$image"; done
} > "$work/override.yaml"
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
export RNNSERVE_MODELS="$work/models" RNNSERVE_GRPC_PORT="$port" RNNSERVE_CPUS=1
# One caller streams every sequence: the per-model bound sized to it, first come first served.
export RNNSERVE_ARGS="--auth-token-file /models/tokens --sequence-durability $durability \
  --max-concurrent-per-model 64 --fair-floor-percent 100"
export BASE_IMAGE=localhost/debian:bookworm
compose=(podman-compose -p "$project" -f "$ROOT/deploy/compose.scale-out.yaml"
  -f "$work/override.yaml")
cleanup() {
  "${compose[@]}" down -v >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
"${compose[@]}" up -d >"$work/up.log" 2>&1 || { tail -20 "$work/up.log"; exit 1; }
# Ready once a whole sequence runs through the proxy.
python3 - "$port" "$token" <<'PY'
import sys, time
import numpy as np
import tritonclient.grpc as g
c = g.InferenceServerClient(f"127.0.0.1:{sys.argv[1]}")
x = np.zeros((1, 5, 2), np.float32)
for i in range(240):
    try:
        i0 = g.InferInput("waveform", list(x.shape), "FP32"); i0.set_data_from_numpy(x)
        c.infer("waveform_lstm", [i0], sequence_id=1, sequence_start=True, sequence_end=True,
                headers={"authorization": f"Bearer {sys.argv[2]}", "x-sequence-id": "1"})
        break
    except Exception as e:
        time.sleep(0.5)
else:
    sys.exit(f"the stack did not answer through HAProxy: {e}")
PY
victim=$(podman ps --format '{{.Names}}' | grep "^${project}[_-]rnnserve-2" | head -1)
echo "# podman-compose -f deploy/compose.scale-out.yaml, image $image, --sequence-durability $durability, replica 2: podman $how"
echo
podman ps --format '- {{.Names}} ({{.Image}})' | grep "$project"
python3 "$ROOT/bench/scale_out_compose.py" --address "127.0.0.1:$port" --token "$token" \
  --stop "$([ "$how" = kill ] && echo "podman kill -s KILL" || echo "podman stop -t 30") $victim" ||
  echo "- (some sequences failed: exit status 1)"
echo "- $victim's log, last lines:"
podman logs "$victim" 2>&1 | tail -4 | sed 's/^/  /'
# The replicas left: where their chunks' states came from, and what was lost (their /metrics,
# reached on the compose network's address from the host).
for r in 1 3; do
  name=$(podman ps --format '{{.Names}}' | grep "^${project}[_-]rnnserve-$r" | head -1)
  ip=$(podman inspect -f '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}' "$name")
  m=$(curl -s --max-time 5 "http://$ip:8502/metrics" |
    grep -E '^rnnserve_(sequences_resumed_from_store|sequences_lost|sequence_chunks_from_memory)_total' |
    tr '\n' ';' || true)
  echo "- $name /metrics: ${m:-not reachable from the host}"
done
