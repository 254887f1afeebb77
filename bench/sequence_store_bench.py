#!/usr/bin/env python3
"""KServe sequence chunks with the in-process state store against the Redis store
(--sequence-store) with each --sequence-durability (chunk: written before each chunk is
answered; drain: kept in memory, written at SIGTERM), same machine, same run, alternating
rounds; optionally also through HAProxy (two Redis-backed replicas, hashing x-sequence-id).

Each of --concurrency client threads streams its own sequences of the example model
(waveform_lstm, 2 features) in chunks of --chunk-steps steps, --chunks chunks a sequence, with
tritonclient (sequence_id / sequence_start / sequence_end, the x-sequence-id header). Per mode:
chunks/s and the p50 / p99 latency of a chunk; the Redis modes also as a ratio to in-process.

  python3 bench/sequence_store_bench.py --rnnserve build/release/server/rnnserve \\
      --concurrency 64 --rounds 3 --seconds 10 [--haproxy]

Needs redis-server (and haproxy for --haproxy), tritonclient[grpc] and numpy.
"""
import argparse
import os
import platform
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np
import tritonclient.grpc as grpcclient

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..")
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
import server_process  # noqa: E402

TOKEN = "bench-token-0123456789"


def start(argv, port):
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while True:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return proc
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"{argv[0]} did not listen on {port}")
        time.sleep(0.05)


def rnnserve(binary, tokens, concurrency, extra):
    port = server_process.free_port()
    proc = start([binary, "--model-repository", os.path.join(ROOT, "models/examples"), "--port",
                  str(port), "--metrics-port", "0", "--http-port", "0", "--log-level", "error",
                  "--drain-seconds",
                  "0", "--auth-token-file", tokens, "--max-concurrent-per-model",
                  str(concurrency), "--fair-floor-percent", "100", *extra], port)
    address = f"127.0.0.1:{port}"
    while not server_process.serving(address, None) and proc.poll() is None:
        time.sleep(0.1)
    return proc, address


def cpu_seconds(pid):
    """User + system CPU time of a process so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run(address, concurrency, seconds, chunk_steps, chunks, first_id):
    latencies, errors, lock, stop = [], [], threading.Lock(), time.monotonic() + seconds
    x = np.random.default_rng(0).standard_normal((1, chunk_steps, 2)).astype(np.float32)

    def worker(w):
        client = grpcclient.InferenceServerClient(address)
        mine, seq = [], 0
        while time.monotonic() < stop:
            sid = first_id + w * 1_000_000 + seq
            seq += 1
            for c in range(chunks):
                inp = grpcclient.InferInput("waveform", list(x.shape), "FP32")
                inp.set_data_from_numpy(x)
                t0 = time.perf_counter()
                try:
                    client.infer("waveform_lstm", [inp], sequence_id=sid,
                                 sequence_start=c == 0, sequence_end=c == chunks - 1,
                                 headers={"authorization": f"Bearer {TOKEN}",
                                          "x-sequence-id": str(sid)})
                except grpcclient.InferenceServerException as e:
                    errors.append(str(e))
                    break
                mine.append(time.perf_counter() - t0)
        with lock:
            latencies.extend(mine)

    threads = [threading.Thread(target=worker, args=(w,)) for w in range(concurrency)]
    began = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    took = time.monotonic() - began
    lat = np.array(latencies) * 1e6
    if errors:
        print(f"{address}: {len(errors)} chunks failed, e.g. {errors[0]}", file=sys.stderr)
    return {"chunks": len(lat), "chunks_per_s": len(lat) / took, "p50_us": float(np.percentile(lat, 50)),
            "p99_us": float(np.percentile(lat, 99)), "errors": len(errors)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rnnserve", required=True)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--chunk-steps", type=int, default=10)
    ap.add_argument("--chunks", type=int, default=10)
    ap.add_argument("--haproxy", action="store_true")
    a = ap.parse_args()
    print("command: python3 " + " ".join(sys.argv), file=sys.stderr)
    work = tempfile.mkdtemp(prefix="rnnserve-store-bench-")
    tokens = os.path.join(work, "tokens")
    with open(tokens, "w") as f:
        f.write(TOKEN + "\n")
    procs = []
    try:
        redis_port = server_process.free_port()
        procs.append(start([shutil.which("redis-server") or "/usr/bin/redis-server", "--port",
                            str(redis_port), "--save", "", "--appendonly", "no", "--dir", work],
                           redis_port))
        store = ["--sequence-store", f"redis://127.0.0.1:{redis_port}"]
        redis_pid = procs[0].pid
        # Per mode: its address, its rnnserve processes, its other processes (Redis, HAProxy).
        modes, servers, others = {}, {}, {}
        p, modes["in-process"] = rnnserve(a.rnnserve, tokens, a.concurrency, [])
        procs.append(p)
        servers["in-process"], others["in-process"] = [p.pid], []
        for durability in ("chunk", "drain"):
            mode = f"redis, durability {durability}"
            p, modes[mode] = rnnserve(a.rnnserve, tokens, a.concurrency,
                                      store + ["--sequence-durability", durability])
            procs.append(p)
            servers[mode], others[mode] = [p.pid], [redis_pid]
        if a.haproxy:
            p, second = rnnserve(a.rnnserve, tokens, a.concurrency, store)
            procs.append(p)
            mode = "redis, durability chunk, via haproxy (2 replicas)"
            servers[mode] = [servers["redis, durability chunk"][0], p.pid]
            port = server_process.free_port()
            cfg = os.path.join(work, "haproxy.cfg")
            with open(cfg, "w") as f:
                f.write("defaults\n  mode http\n  timeout connect 2s\n  timeout client 60s\n"
                        "  timeout server 60s\nfrontend grpc\n"
                        f"  bind 127.0.0.1:{port} proto h2\n  default_backend r\n"
                        "backend r\n  balance hdr(x-sequence-id)\n  hash-type consistent\n"
                        f"  server a {modes['redis, durability chunk']} proto h2\n"
                        f"  server b {second} proto h2\n")
            procs.append(start(["/usr/sbin/haproxy", "-db", "-q", "-f", cfg], port))
            others[mode] = [redis_pid, procs[-1].pid]
            modes[mode] = f"127.0.0.1:{port}"
        results = {m: [] for m in modes}
        for r in range(a.rounds):
            for i, (mode, address) in enumerate(modes.items()):
                before = [sum(cpu_seconds(q) for q in servers[mode]),
                          sum(cpu_seconds(q) for q in others[mode]), time.process_time()]
                res = run(address, a.concurrency, a.seconds, a.chunk_steps, a.chunks,
                          (r * 10 + i + 1) * 10**9)
                after = [sum(cpu_seconds(q) for q in servers[mode]),
                         sum(cpu_seconds(q) for q in others[mode]), time.process_time()]
                n = max(1, res["chunks"])
                for key, b0, b1 in zip(("server_cpu_us", "other_cpu_us", "client_cpu_us"),
                                       before, after):
                    res[key] = (b1 - b0) * 1e6 / n
                results[mode].append(res)
        commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                                capture_output=True, text=True).stdout.strip()
        print(f"# Sequence store: in-process vs Redis\n\n{platform.node()}, "
              f"{os.cpu_count()} cores, {platform.processor() or platform.machine()}, commit "
              f"{commit}; concurrency {a.concurrency}, chunks of {a.chunk_steps} "
              f"steps, {a.chunks} a sequence, {a.rounds} rounds of {a.seconds:g} s per mode "
              "(medians of the rounds)\n")
        print("| mode | chunks/s | p50 µs | p99 µs | chunks/s vs in-process | p50 added µs | "
              "failed chunks | CPU µs a chunk: rnnserve | Redis (+HAProxy) | client |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        keys = ("chunks_per_s", "p50_us", "p99_us", "server_cpu_us", "other_cpu_us",
                "client_cpu_us")
        base = {k: float(np.median([x[k] for x in results["in-process"]])) for k in keys}
        for mode, rs in results.items():
            med = {k: float(np.median([x[k] for x in rs])) for k in keys}
            print(f"| {mode} | {med['chunks_per_s']:.0f} | {med['p50_us']:.0f} | "
                  f"{med['p99_us']:.0f} | {med['chunks_per_s'] / base['chunks_per_s']:.2f} | "
                  f"{med['p50_us'] - base['p50_us']:+.0f} | {sum(x['errors'] for x in rs)} | "
                  f"{med['server_cpu_us']:.0f} | {med['other_cpu_us']:.0f} | "
                  f"{med['client_cpu_us']:.0f} |")
    finally:
        for p in reversed(procs):
            p.terminate()
            p.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
