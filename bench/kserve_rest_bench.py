#!/usr/bin/env python3
"""KServe v2 over HTTP (REST with JSON tensors, REST with binary tensor data) against KServe
v2 gRPC ModelInfer, on the real rnnserve binary, the tiny model (bench/server_models:
tiny_lstm_batched, H=32, 8 features, T=10 sent, dynamic batching), at concurrency 1 and 64,
all in the same run on the same server:

  - one Python client for all three protocols (threads, one keep-alive connection or channel
    each; gRPC through grpcio with raw_input_contents, REST through http.client), so the three
    pay the same client machinery;
  - perf_analyzer (C++, `-i grpc` and `-i http`, which sends binary tensor data) for gRPC
    against REST binary, when it is installed.

Reports requests/s and p50/p99 latency of each, and the ratios to gRPC, as a Markdown table.

  bench/kserve_rest_bench.py [--rnnserve build/release/server/rnnserve] [--seconds 5]
                             [--out bench/results/kserve-rest-cpu-DATE.md]
"""

import argparse
import datetime
import http.client
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests/integration"))
import server_process  # noqa: E402

MODEL = "tiny_lstm_batched"
SHAPE = [1, 10, 8]


def rest_bodies(x):
    js = json.dumps({"inputs": [{"name": "x", "shape": SHAPE, "datatype": "FP32",
                                 "data": x.ravel().tolist()}]}).encode()
    header = json.dumps({"inputs": [{"name": "x", "shape": SHAPE, "datatype": "FP32",
                                     "parameters": {"binary_data_size": x.nbytes}}],
                         "parameters": {"binary_data_output": True}}).encode()
    return js, header + x.tobytes(), len(header)


def client_loop(proto, address, x, stop, latencies, errors):
    if proto == "grpc":
        import grpc
        from tritonclient.grpc import service_pb2, service_pb2_grpc
        channel = grpc.insecure_channel(address)
        stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
        req = service_pb2.ModelInferRequest(model_name=MODEL)
        t = req.inputs.add(name="x", datatype="FP32")
        t.shape.extend(SHAPE)
        req.raw_input_contents.append(x.tobytes())
        call = lambda: stub.ModelInfer(req)  # noqa: E731
    else:
        host, port = address.split(":")
        conn = http.client.HTTPConnection(host, int(port))
        js, binary, header_length = rest_bodies(x)
        path = f"/v2/models/{MODEL}/infer"
        if proto == "rest_json":
            body, headers = js, {"Content-Type": "application/json"}
        else:
            body = binary
            headers = {"Content-Type": "application/octet-stream",
                       "Inference-Header-Content-Length": str(header_length)}

        def call():
            conn.request("POST", path, body, headers)
            r = conn.getresponse()
            data = r.read()
            if r.status != 200:
                raise RuntimeError(data[:200])
            if proto == "rest_json":
                json.loads(data)
    while not stop.is_set():
        t0 = time.perf_counter()
        try:
            call()
        except Exception as e:  # noqa: BLE001 - counted and shown
            errors.append(str(e)[:200])
            continue
        latencies.append(time.perf_counter() - t0)


def run(proto, address, concurrency, seconds, x):
    stop = threading.Event()
    lats = [[] for _ in range(concurrency)]
    errors = []
    threads = [threading.Thread(target=client_loop, args=(proto, address, x, stop, lats[i], errors))
               for i in range(concurrency)]
    for t in threads:
        t.start()
    time.sleep(1.0)  # warm-up: connections open, batcher busy
    for l in lats:
        l.clear()
    start = time.perf_counter()
    time.sleep(seconds)
    counted = [list(l) for l in lats]
    elapsed = time.perf_counter() - start
    stop.set()
    for t in threads:
        t.join()
    all_lats = sorted(v for l in counted for v in l)
    if not all_lats:
        return {"rps": 0, "p50_us": float("nan"), "p99_us": float("nan"), "errors": len(errors),
                "error": errors[:1]}
    return {"rps": len(all_lats) / elapsed,
            "p50_us": statistics.median(all_lats) * 1e6,
            "p99_us": all_lats[min(len(all_lats) - 1, int(len(all_lats) * 0.99))] * 1e6,
            "errors": len(errors), "error": errors[:1]}


def perf_analyzer(pa, proto, address, concurrency, seconds):
    with tempfile.NamedTemporaryFile(suffix=".csv") as f:
        cmd = [pa, "-m", MODEL, "-u", address, "-i", proto, "--shape", f"x:{SHAPE[1]},{SHAPE[2]}",
               "--concurrency-range", str(concurrency), "--measurement-interval",
               str(int(seconds * 1000)), "--stability-percentage", "999", "--max-trials", "3",
               "-f", f.name]
        env = dict(os.environ)
        try:  # perf_analyzer loads libcudart.so.12 even for a CPU server (server_bench.sh)
            import nvidia.cuda_runtime as m
            env["LD_LIBRARY_PATH"] = ":".join(
                [list(m.__path__)[0] + "/lib", env.get("LD_LIBRARY_PATH", "")])
        except ImportError:
            pass
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
        if p.returncode != 0:
            print(f"perf_analyzer -i {proto} failed: {p.stdout[-300:]}{p.stderr[-300:]}")
        if p.returncode != 0:
            return None
        rows = open(f.name).read().strip().splitlines()
        head, vals = rows[0].split(","), rows[1].split(",")
        row = dict(zip(head, vals))
        return {"rps": float(row["Inferences/Second"]), "p50_us": float(row["p50 latency"]),
                "p99_us": float(row["p99 latency"]), "errors": 0, "error": []}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rnnserve", default=os.path.join(ROOT, "build/release/server/rnnserve"))
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    x = np.random.default_rng(0).standard_normal(SHAPE).astype(np.float32)
    http_port = server_process.free_port()
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
                if l.startswith("model name")), platform.processor())
    pa = shutil.which("perf_analyzer") or "/opt/perf_analyzer/bin/perf_analyzer"
    if not os.path.exists(pa):
        pa = None
        print("perf_analyzer not found: the Python client only")
    results = []
    with server_process.running_server(
            args.rnnserve, os.path.join(ROOT, "bench/server_models"), timeout_s=120,
            extra=["--http-port", str(http_port), "--max-concurrent-per-model", "512",
                   "--allow-symlinks-outside-repository"]) as grpc_address:
        http_address = f"127.0.0.1:{http_port}"
        for c in (1, 64):
            for proto in ("grpc", "rest_binary", "rest_json"):
                r = run(proto, grpc_address if proto == "grpc" else http_address, c,
                        args.seconds, x)
                results.append(("python", proto, c, r))
                print(f"python {proto:12s} c={c:3d} {r['rps']:9.0f} req/s  p50 "
                      f"{r['p50_us']:8.0f} us  p99 {r['p99_us']:8.0f} us  errors {r['errors']}",
                      flush=True)
            if pa:
                for proto in ("grpc", "http"):
                    r = perf_analyzer(pa, proto, grpc_address if proto == "grpc" else http_address,
                                      c, args.seconds)
                    if r is None:
                        continue
                    name = "grpc" if proto == "grpc" else "rest_binary"
                    results.append(("perf_analyzer", name, c, r))
                    print(f"perf_analyzer {name:12s} c={c:3d} {r['rps']:9.0f} req/s  p50 "
                          f"{r['p50_us']:8.0f} us  p99 {r['p99_us']:8.0f} us", flush=True)

    base = {(tool, c): r for tool, proto, c, r in results if proto == "grpc"}
    lines = [f"# KServe v2 REST (JSON, binary) against gRPC, {datetime.date.today()}", "",
             f"Machine: {cpu}, {os.cpu_count()} cores (server and client on the same cores, "
             "shared with other work). Model: bench/server_models/tiny_lstm_batched (H=32, "
             "8 features, T=10, dynamic batching), batch 1 per request.", "",
             f"Command: `{' '.join(['bench/kserve_rest_bench.py', *sys.argv[1:]])}` "
             f"({args.seconds:g} s per run, after 1 s of warm-up).", "",
             "| client | protocol | concurrency | req/s | x gRPC | p50 us | x gRPC | p99 us | "
             "errors |", "|---|---|---|---|---|---|---|---|---|"]
    for tool, proto, c, r in results:
        b = base.get((tool, c))
        ratio_rps = r["rps"] / b["rps"] if b and b["rps"] else float("nan")
        ratio_p50 = r["p50_us"] / b["p50_us"] if b and b["p50_us"] else float("nan")
        lines.append(f"| {tool} | {proto} | {c} | {r['rps']:.0f} | {ratio_rps:.2f} | "
                     f"{r['p50_us']:.0f} | {ratio_p50:.2f} | {r['p99_us']:.0f} | {r['errors']} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
