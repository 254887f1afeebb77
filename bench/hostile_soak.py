#!/usr/bin/env python3
"""Fairness soak: a polite client beside a hostile mix, against the real rnnserve binary (CPU
engine), for --seconds. The hostile caller and the polite caller hold different bearer tokens,
so the server tells them apart (limits/caller_identity.h).

    python3 bench/hostile_soak.py --rnnserve build/release/server/rnnserve --seconds 600 \\
        --out bench/results/hostile-soak-<date>.md

The hostile mix, each part in a process of its own:
  - floods: --flood-threads threads looping 800 KB Predicts ([1, 100000, 2]);
  - Evaluate floods: threads looping 8 MB Evaluates ([25000, 40, 2] with sparse targets);
  - streams that never read: StreamPredict streams that send chunks and never take an answer;
  - sequence squatting: StreamPredict starts of new sequences, never ended;
  - cancel storms: long Predicts ([64, 4000, 2]) with a 20 ms deadline;
  - idle and slow connections on the metrics port (--idle-connections, one byte a second).
The polite client sends the example's Predict (tests/fixtures/example, Keras's numbers) every
--polite-interval-ms. First, alone, it measures its unloaded p99.

Checks (the issue's bar): the polite client's success rate >= 99 % and its p99 <= 5x its
unloaded p99; the server's peak RSS <= --rss-budget-mb (the configured byte budget plus the
process's own) x 1.2; every /metrics scrape answered within 1 s; 0 wrong answers. Prints a
markdown report (and appends it to --out); exit status 0 when every check holds.
"""

import argparse
import json
import multiprocessing as mp
import os
import platform
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from soak import MODEL, ROOT, free_port, install_client, make_repository, proc_status  # noqa


def stubs(site, address, token):
    sys.path.insert(0, site)
    import grpc
    from rnnserve_client import proto as pb
    channel = grpc.insecure_channel(address, options=[("grpc.max_send_message_length", 64 << 20)])
    return grpc, pb, pb.RnnServeStub(channel), [("authorization", f"Bearer {token}")]


def tensor(pb, t, array):
    t.dtype = pb.TYPE_FP32 if array.dtype.kind == "f" else pb.TYPE_INT32
    t.shape.extend(array.shape)
    t.raw_content = array.astype("<f4" if array.dtype.kind == "f" else "<i4").tobytes()


def predict_request(pb, x):
    r = pb.PredictRequest()
    r.model_spec.name = MODEL
    tensor(pb, r.inputs["waveform"], x)
    return r


def hostile(kind, site, address, token, stop, threads):
    import numpy as np
    grpc, pb, stub, md = stubs(site, address, token)
    rng = np.random.default_rng(1)

    def flood():
        r = predict_request(pb, rng.standard_normal((1, 100000, 2), np.float32))
        while not stop.is_set():
            try:
                stub.Predict(r, metadata=md, timeout=30)
            except grpc.RpcError:
                time.sleep(0.001)

    def evaluate():
        r = pb.EvaluateRequest()
        r.model_spec.name = MODEL
        tensor(pb, r.inputs["waveform"], rng.standard_normal((25000, 40, 2), np.float32))
        tensor(pb, r.targets["probabilities"], rng.integers(0, 3, 25000).astype(np.int32))
        while not stop.is_set():
            try:
                stub.Evaluate(r, metadata=md, timeout=60)
            except grpc.RpcError:
                time.sleep(0.001)

    def chunks(start_id, end):
        x = rng.standard_normal((1, 50, 2), np.float32)
        i = start_id
        while not stop.is_set():
            c = pb.StreamPredictRequest(sequence_id=i, start=True, end=end)
            c.model_spec.name = MODEL
            tensor(pb, c.inputs["waveform"], x)
            yield c
            i += 1
            time.sleep(0.01)

    def never_read():
        # Answers pile up in flow control: the stream is never iterated.
        calls = []
        while not stop.is_set():
            try:
                calls.append(stub.StreamPredict(chunks(len(calls) * 1000000, True), metadata=md))
            except grpc.RpcError:
                pass
            time.sleep(0.2)
        for c in calls:
            c.cancel()

    def squat():
        base = 10 ** 9
        while not stop.is_set():
            try:
                for _ in stub.StreamPredict(chunks(base, False), metadata=md, timeout=30):
                    pass
            except grpc.RpcError:
                pass
            base += 10 ** 6

    def cancel_storm():
        r = predict_request(pb, rng.standard_normal((64, 4000, 2), np.float32))
        while not stop.is_set():
            try:
                stub.Predict(r, metadata=md, timeout=0.02)
            except grpc.RpcError:
                pass

    work = {"flood": flood, "evaluate": evaluate, "never_read": never_read, "squat": squat,
            "cancel": cancel_storm}[kind]
    ts = [threading.Thread(target=work, daemon=True) for _ in range(threads)]
    for t in ts:
        t.start()
    stop.wait()


def idle_connections(metrics_port, n, stop):
    socks = []
    for i in range(n):
        if stop.is_set():
            break
        try:
            s = socket.create_connection(("127.0.0.1", metrics_port), timeout=2)
            if i % 2:
                s.sendall(b"GET /metrics HTTP/1.1\r\n")  # slow: one header byte a second
            socks.append(s)
        except OSError:
            pass
    while not stop.is_set():
        for s in socks[1::2]:
            try:
                s.sendall(b"X")
            except OSError:
                pass
        stop.wait(1)
    for s in socks:
        s.close()


def polite(site, address, token, stop, seconds, interval, out_path):
    import numpy as np
    grpc, pb, stub, md = stubs(site, address, token)
    x = np.load(os.path.join(ROOT, "tests/fixtures/example/input.npy")).astype(np.float32)
    want = np.load(os.path.join(ROOT, "tests/fixtures/example/expected.npy"))
    r = predict_request(pb, x)
    lat, failed, wrong, errors = [], 0, 0, {}
    end = time.monotonic() + seconds if seconds else None
    last_write = time.monotonic()

    def write(final):
        # A file, rewritten every few seconds: what was measured survives a child that hangs.
        with open(out_path + ".tmp", "w") as f:
            json.dump({"lat": lat, "failed": failed, "wrong": wrong, "errors": errors,
                       "final": final}, f)
        os.replace(out_path + ".tmp", out_path)

    while not stop.is_set() and (end is None or time.monotonic() < end):
        if time.monotonic() - last_write > 5:
            write(False)
            last_write = time.monotonic()
        t0 = time.monotonic()
        try:
            a = stub.Predict(r, metadata=md, timeout=10)
            o = a.outputs["probabilities"]
            got = (np.frombuffer(o.raw_content, "<f4") if o.raw_content
                   else np.array(o.float_val, np.float32)).reshape(want.shape)
            wrong += int((np.abs(got - want) > 1e-6 + 1e-5 * np.abs(want)).any())
            lat.append(time.monotonic() - t0)
        except grpc.RpcError as e:
            failed += 1
            key = f"{e.code().name}: {e.details()[:100]}"
            errors[key] = errors.get(key, 0) + 1
        time.sleep(max(0.0, interval - (time.monotonic() - t0)))
    write(True)


def read_polite(path, wait_s):
    """The polite client's numbers: its final file, or its last snapshot after `wait_s`."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            with open(path) as f:
                got = json.load(f)
            if got["final"] or time.monotonic() > deadline:
                return got
        except (OSError, ValueError):
            if time.monotonic() > deadline:
                raise
        time.sleep(0.5)


def p99(values):
    v = sorted(values)
    return v[min(len(v) - 1, int(0.99 * len(v)))] if v else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rnnserve", required=True)
    ap.add_argument("--seconds", type=float, default=600)
    ap.add_argument("--unloaded-seconds", type=float, default=20)
    ap.add_argument("--polite-interval-ms", type=float, default=50)
    ap.add_argument("--flood-threads", type=int, default=16)
    ap.add_argument("--idle-connections", type=int, default=250)
    ap.add_argument("--max-inflight-mb", type=int, default=256)
    ap.add_argument("--rss-budget-mb", type=float, default=0,
                    help="default: the byte budget plus the RSS measured when idle")
    ap.add_argument("--server-arg", action="append", default=[])
    ap.add_argument("--out")
    args = ap.parse_args()

    tmp = tempfile.mkdtemp(prefix="hostile_soak_")
    site = os.path.join(tmp, "site")
    install_client(site)
    repo = os.path.join(tmp, "repo")
    make_repository(repo)
    tokens = os.path.join(tmp, "tokens")
    with open(tokens, "w") as f:
        f.write("hostile-token-0123456789\npolite-token-0123456789\n")
    port, metrics_port = free_port(), free_port()
    address = f"127.0.0.1:{port}"
    server = subprocess.Popen(
        [args.rnnserve, "--model-repository", repo, "--port", str(port), "--metrics-port",
         str(metrics_port), "--http-port", "0", "--auth-token-file", tokens,
         "--max-inflight-bytes", str(args.max_inflight_mb << 20), "--log-level", "warning",
         *args.server_arg], stderr=open(os.path.join(tmp, "server.log"), "w"))
    ctx = mp.get_context("spawn")
    stop = ctx.Event()
    stopped = False
    alone_path, loaded_path = os.path.join(tmp, "polite-alone.json"), os.path.join(tmp, "polite.json")
    try:
        for _ in range(600):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=1)
                break
            except OSError:
                time.sleep(0.1)
        time.sleep(2)
        idle_rss = proc_status(server.pid)[0] / 1024
        budget = args.rss_budget_mb or idle_rss + args.max_inflight_mb
        # The polite client runs in processes of its own, alone first: this process never holds
        # a gRPC channel, whose threads could keep it from exiting.
        alone = ctx.Process(target=polite, args=(site, address, "polite-token-0123456789", stop,
                                                 args.unloaded_seconds,
                                                 args.polite_interval_ms / 1000, alone_path),
                            daemon=True)
        alone.start()
        alone.join(timeout=args.unloaded_seconds + 60)
        unloaded = read_polite(alone_path, 10)
        alone.join(timeout=10)
        print(f"unloaded: {len(unloaded['lat'])} OK, {unloaded['failed']} failed", flush=True)
        parts = [("flood", args.flood_threads), ("evaluate", 4), ("never_read", 2),
                 ("squat", 8), ("cancel", 4)]
        procs = [ctx.Process(target=hostile, args=(k, site, address, "hostile-token-0123456789",
                                                   stop, n), daemon=True) for k, n in parts]
        procs.append(ctx.Process(target=idle_connections,
                                 args=(metrics_port, args.idle_connections, stop), daemon=True))
        for p in procs:
            p.start()
        time.sleep(2)
        checker = ctx.Process(target=polite, args=(site, address, "polite-token-0123456789",
                                                   stop, 0, args.polite_interval_ms / 1000,
                                                   loaded_path), daemon=True)
        checker.start()
        peak_rss, scrapes, slow_scrapes, worst_scrape = 0.0, 0, 0, 0.0
        start = time.monotonic()
        while time.monotonic() - start < args.seconds and server.poll() is None:
            peak_rss = max(peak_rss, proc_status(server.pid)[0] / 1024)
            t0 = time.monotonic()
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5)
                took = time.monotonic() - t0
            except OSError:
                took = float("inf")
            scrapes += 1
            slow_scrapes += took > 1.0
            worst_scrape = max(worst_scrape, took)
            time.sleep(max(0.0, 2 - (time.monotonic() - t0)))
        alive = server.poll() is None
        stop.set()
        stopped = True
        print("stopping the hostile mix", flush=True)
        loaded = read_polite(loaded_path, 30)
        # A child killed while it held the event's or the queue's lock leaves it held: neither
        # is touched after this.
        for p in procs + [checker]:
            p.join(timeout=10)
            if p.is_alive():
                p.kill()
    finally:
        if not stopped:
            stop.set()
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()

    n = len(loaded["lat"]) + loaded["failed"]
    success = len(loaded["lat"]) / n if n else 0.0
    base_p99, load_p99 = p99(unloaded["lat"]), p99(loaded["lat"])
    checks = {
        "the server kept running": alive,
        f"polite success rate {100 * success:.2f} % >= 99 %": success >= 0.99,
        f"polite p99 {1e3 * load_p99:.1f} ms <= 5x unloaded {1e3 * base_p99:.1f} ms":
            load_p99 <= 5 * base_p99,
        f"peak RSS {peak_rss:.0f} MB <= 1.2 x {budget:.0f} MB": peak_rss <= 1.2 * budget,
        f"/metrics within 1 s: {scrapes - slow_scrapes}/{scrapes} scrapes (worst "
        f"{worst_scrape:.2f} s)": slow_scrapes == 0,
        f"wrong answers {loaded['wrong'] + unloaded['wrong']}":
            loaded["wrong"] + unloaded["wrong"] == 0,
    }
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo")
                if line.startswith("model name")), platform.processor())
    lines = [f"## Hostile soak, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}", "",
             f"- machine: {cpu}, {os.cpu_count()} cores",
             f"- command: `python3 bench/hostile_soak.py --rnnserve {args.rnnserve} --seconds "
             f"{args.seconds:.0f}`",
             f"- hostile mix: {args.flood_threads} Predict flood threads (800 KB), 4 Evaluate "
             f"(8 MB), 2 never-reading stream openers, 8 sequence squatters, 4 cancel-storm "
             f"threads (20 ms deadlines), {args.idle_connections} idle/slow metrics connections",
             f"- polite: {len(loaded['lat'])} OK, {loaded['failed']} failed "
             f"{loaded['errors'] or ''}; unloaded p99 {1e3 * base_p99:.1f} ms "
             f"({len(unloaded['lat'])} requests)", ""]
    lines += [f"- [{'x' if ok else ' '}] {name}" for name, ok in checks.items()]
    report = "\n".join(lines) + "\n"
    print(report)
    if args.out:
        with open(args.out, "a") as f:
            f.write(report + "\n")
    shutil.rmtree(tmp, ignore_errors=True)
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    # Children that a hung gRPC call keeps alive were killed; nothing is left to wait for.
    os._exit(code)
