#!/usr/bin/env bash
# The Grafana dashboard and the alert rules against real data. rnnserve serves the example
# repository; a real Prometheus (Debian's package) runs deploy/prometheus/prometheus.yml as
# written but for its target and intervals (the job `rnnserve`, its recording rules and alerts)
# and scrapes it every second; rnnserve-cli sends predicts of mixed batch sizes and lengths and
# a bad request. Then every panel's query of deploy/grafana/dashboards/rnnserve.json, with the
# dashboard's variables filled as Grafana fills them ($model: All, $__rate_interval: 1m), must
# return a sample with a number, and so must every alert rule's selector on `job`. Before that,
# every Prometheus config of the repository (deploy/prometheus, deploy/compose, the Kubernetes
# scrape job) must name the job the dashboard and the alerts select.
#   tests/deploy/dashboard_test.sh RNNSERVE RNNSERVE_CLI
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
server_bin=$(realpath "${1:?usage: dashboard_test.sh RNNSERVE RNNSERVE_CLI}")
cli=$(realpath "${2:?usage: dashboard_test.sh RNNSERVE RNNSERVE_CLI}")
for tool in prometheus promtool curl python3; do
  command -v "$tool" >/dev/null 2>&1 ||
    { echo "SKIPPED: no $tool (deploy/install_deps.sh installs Debian's prometheus)"; exit 77; }
done
cd "$ROOT"

tmp="$(mktemp -d /tmp/rnnserve_dashboard_XXXXXX)"
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
wait_http() {  # URL SECONDS
  for _ in $(seq 1 $(($2 * 5))); do
    curl -fsS -o /dev/null "$1" 2>/dev/null && return 0
    sleep 0.2
  done
  echo "FAIL: $1 did not answer within $2 s"
  return 1
}

# 1. One job name everywhere.
job=$(python3 - "$tmp/k8s-scrape.yml" <<'PY'
import json, re, sys
import yaml

def jobs(config, where):
    names = [c["job_name"] for c in config["scrape_configs"]]
    assert names, f"{where}: no scrape job"
    return names

found = {}
for path in ("deploy/prometheus/prometheus.yml", "deploy/compose/prometheus.yml"):
    found[path] = jobs(yaml.safe_load(open(path)), path)
cm = yaml.safe_load(open("deploy/k8s/common/prometheus-scrape-config.yaml"))
k8s = yaml.safe_load(cm["data"]["rnnserve-scrape.yml"])
found["deploy/k8s/common/prometheus-scrape-config.yaml"] = jobs({"scrape_configs": k8s}, "k8s")
yaml.safe_dump({"scrape_configs": k8s}, open(sys.argv[1], "w"))
for path in ("deploy/k8s/cpu/deployment.yaml", "deploy/k8s/gpu/deployment.yaml"):
    annotations = yaml.safe_load(open(path))["spec"]["template"]["metadata"].get("annotations") or {}
    assert "prometheus.io/scrape" not in annotations, (
        f"{path}: prometheus.io/scrape annotations give a job other than the dashboard's")

selected = {}
dashboard = json.load(open("deploy/grafana/dashboards/rnnserve.json"))
def panels(ps):
    for p in ps:
        yield p
        yield from panels(p.get("panels", []))
for p in panels(dashboard["panels"]):
    for t in p.get("targets", []):
        for j in re.findall(r'job\s*=~?\s*"([^"]*)"', t["expr"]):
            selected.setdefault(j, []).append(f"dashboard panel '{p['title']}'")
for group in yaml.safe_load(open("deploy/prometheus/rules/rnnserve_alerts.yml"))["groups"]:
    for rule in group["rules"]:
        for j in re.findall(r'job\s*=~?\s*"([^"]*)"', rule["expr"]):
            selected.setdefault(j, []).append(f"alert {rule.get('alert')}")
names = {n for ns in found.values() for n in ns}
assert len(names) == 1, f"scrape jobs differ: {found}"
job = names.pop()
assert selected, "neither the dashboard nor the alerts select a job"
assert set(selected) == {job}, f"the configs scrape job '{job}'; selected: {selected}"
print(job)
PY
)
echo "job: every config scrapes '$job'; the dashboard and the alerts select it"
err=$(promtool check config "$tmp/k8s-scrape.yml" 2>&1) && echo "promtool: the Kubernetes scrape job is valid" || {
  if grep -q "kubernetes_sd_configs not found" <<<"$err"; then
    echo "promtool: this Prometheus build has no Kubernetes discovery; the k8s job is not checked"
  else
    echo "FAIL: promtool check config of the Kubernetes scrape job:"; echo "$err"; exit 1
  fi
}

# 2. rnnserve, and Prometheus with the repository's config.
grpc_port=$(free_port)
metrics_port=$(free_port)
prom_port=$(free_port)
"$server_bin" --model-repository models/examples --port "$grpc_port" \
  --metrics-port "$metrics_port" --http-port 0 --log-level warning &
pids+=($!)
for _ in $(seq 1 300); do  # ready: the example model has loaded
  "$cli" health --server "127.0.0.1:$grpc_port" --timeout-ms 500 >/dev/null 2>&1 && break
  sleep 0.2
done
"$cli" health --server "127.0.0.1:$grpc_port" >/dev/null || { echo "FAIL: rnnserve is not ready"; exit 1; }
python3 - "$tmp/prometheus.yml" "127.0.0.1:$metrics_port" "$ROOT" <<'PY'
import sys
import yaml
out, target, root = sys.argv[1:]
config = yaml.safe_load(open(f"{root}/deploy/prometheus/prometheus.yml"))
config["global"].update(scrape_interval="1s", evaluation_interval="1s")
config["rule_files"] = [f"{root}/deploy/prometheus/{r}" for r in config["rule_files"]]
(job,) = config["scrape_configs"]
job["static_configs"] = [{"targets": [target]}]
yaml.safe_dump(config, open(out, "w"))
PY
prometheus --config.file="$tmp/prometheus.yml" --storage.tsdb.path="$tmp/data" \
  --web.listen-address="127.0.0.1:$prom_port" --log.level=warn >"$tmp/prometheus.log" 2>&1 &
pids+=($!)
wait_http "http://127.0.0.1:$prom_port/-/ready" 60

# 3. Load: batch sizes 1 to 16, sequences shorter than the batch's longest (padding), a bad
# input (INVALID_ARGUMENT), until the queries below have their data.
python3 - "$tmp" <<'PY'
import json, math, random, sys
random.seed(7)
d = sys.argv[1]
for n, (B, T) in enumerate([(1, 16), (2, 32), (4, 24), (8, 40), (16, 12)]):
    lengths = [random.randint(max(1, T // 4), T) for _ in range(B)]
    x = [[[math.sin(0.1 * t + b), 0.5 * math.cos(0.2 * t)] for t in range(T)] for b in range(B)]
    json.dump(x, open(f"{d}/in{n}.json", "w"))
    open(f"{d}/in{n}.len", "w").write(",".join(map(str, lengths)))
json.dump([[[0.0, 0.0, 0.0]] * 4], open(f"{d}/bad.json", "w"))
PY
(
  set +e
  while true; do
    for i in 0 1 2 3 4; do
      "$cli" predict --server "127.0.0.1:$grpc_port" --model waveform_lstm \
        --input "waveform=$tmp/in$i.json" --lengths "$(cat "$tmp/in$i.len")" >/dev/null ||
        echo "load: predict $i failed"
    done
    "$cli" predict --server "127.0.0.1:$grpc_port" --model waveform_lstm \
      --input "waveform=$tmp/bad.json" >/dev/null 2>&1 || true
    sleep 0.2
  done
) &
pids+=($!)

# 4. Every panel's query, and the alerts' job selectors.
python3 - "http://127.0.0.1:$prom_port" <<'PY'
import json, math, re, sys, time, urllib.parse, urllib.request
import yaml
prom = sys.argv[1]

def panels(ps):
    for p in ps:
        yield p
        yield from panels(p.get("panels", []))

def fill(expr):  # as Grafana fills the dashboard's variables: $model All (.*)
    return (expr.replace("$__rate_interval", "1m").replace("${model}", ".*")
            .replace("$model", ".*"))

queries = []
dashboard = json.load(open("deploy/grafana/dashboards/rnnserve.json"))
for p in panels(dashboard["panels"]):
    for t in p.get("targets", []):
        queries.append((f"panel '{p['title']}' {t.get('refId', '')}", fill(t["expr"])))
for v in dashboard.get("templating", {}).get("list", []):
    if v.get("type") == "query":
        m = re.fullmatch(r"label_values\((.+),\s*(\w+)\)", v["definition"])
        assert m, f"variable {v['name']}: {v['definition']} is not label_values(SERIES, LABEL)"
        queries.append((f"variable ${v['name']}", m.group(1)))
for group in yaml.safe_load(open("deploy/prometheus/rules/rnnserve_alerts.yml"))["groups"]:
    for rule in group["rules"]:
        for sel in re.findall(r'\w+\{[^}]*job\s*=\s*"[^"]*"[^}]*\}', rule["expr"]):
            queries.append((f"alert {rule['alert']} selector", sel))

def query(q):
    url = f"{prom}/api/v1/query?" + urllib.parse.urlencode({"query": q})
    body = json.load(urllib.request.urlopen(url, timeout=10))
    assert body["status"] == "success", body
    return [float(r["value"][1]) for r in body["data"]["result"]]

pending = dict(queries)
deadline = time.time() + 120
while pending and time.time() < deadline:
    for name, q in list(pending.items()):
        values = query(q)
        if any(math.isfinite(v) for v in values):
            print(f"data: {name}: {q} -> {len(values)} series")
            del pending[name]
    if pending:
        time.sleep(2)
for name, q in pending.items():
    print(f"FAIL: no data for {name}: {q} (now {query(q)})")
print(f"{len(queries) - len(pending)} of {len(queries)} queries return data")
sys.exit(1 if pending else 0)
PY
echo "PASS"
