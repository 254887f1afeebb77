#!/usr/bin/env python3
"""Step-level (cellular) batching against request-level dynamic batching, open loop.

One rnnserve serves the same Keras model file twice: <model>_dynamic (dynamic_batching,
work-conserving) and <model>_cellular (cellular_batching). For each length mix:
  1. capacity: the request-level batcher's throughput with 32 clients sending back to back;
  2. the unloaded latency of a 500-step sequence (the SLO is 2x it);
  3. Poisson arrivals (exponential gaps, one sequence per request, lengths drawn from the mix)
     at fractions of that capacity, for each mode: achieved sequences/s, p50 and p99 latency.
Then, per mode, the most sequences/s served with p99 within the SLO.

Length mixes: uniform 10..500, and a long tail (80 % in 10..50, 20 % in 300..500).

  python3 bench/cellular_bench.py --rnnserve build/release/server/rnnserve \
      --model-dir bench/server_models/lstm256 --features 16 --out build/cellular-bench

Writes results.json and results.md (and throughput_vs_p99.png when matplotlib is present) to
--out. Needs the Python client (pip install ./client/python) and numpy.
"""
import argparse
import asyncio
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

import grpc
import numpy as np

from rnnserve_client import proto as cfg
from rnnserve_client import proto as pb
from rnnserve_client import proto as pb_grpc

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
from server_process import running_server  # noqa: E402


def lengths_for(mix, n, rng):
    if mix == "uniform":
        return rng.integers(10, 501, size=n)
    short = rng.random(n) < 0.8
    return np.where(short, rng.integers(10, 51, size=n), rng.integers(300, 501, size=n))


def make_repo(model_dir, slots, chunk_steps, threads, kind, dynamic_ratio=None,
              cellular_extra=""):
    repo = tempfile.mkdtemp(prefix="cellular-bench-")
    model_file = os.path.abspath(os.path.join(model_dir, "1", "model.h5"))
    common = ['platform: "keras_h5"', f"max_batch_size: {slots}",
              f"instance_group {{ kind: {kind} count: 1 }}",
              f"optimization {{ cpu_threads: {threads} }}"]
    dynamic = "dynamic_batching { }"
    if dynamic_ratio is not None:  # the dynamic batcher's bound on padding (docs/batching.md)
        dynamic += (f'\nparameters {{ key: "max_computed_steps_ratio" '
                    f'value: "{dynamic_ratio:g}" }}')
    modes = {"dynamic": dynamic,
             "cellular": f"cellular_batching {{ max_active_sequences: {slots} "
                         f"chunk_steps: {chunk_steps} {cellular_extra}}}"}
    for mode, block in modes.items():
        d = os.path.join(repo, f"m_{mode}")
        os.makedirs(os.path.join(d, "1"))
        os.symlink(model_file, os.path.join(d, "1", "model.h5"))
        with open(os.path.join(d, "config.pbtxt"), "w") as f:
            f.write("\n".join([f'name: "m_{mode}"', *common, block]) + "\n")
    return repo


def request(model, x):
    t = pb.Tensor(shape=list(x.shape), dtype=cfg.TYPE_FP32,
                  raw_content=np.ascontiguousarray(x, dtype="<f4").tobytes())
    r = pb.PredictRequest(model_spec=pb.ModelSpec(name=model))
    r.inputs["x"].CopyFrom(t)
    return r


class Inputs:
    """Pre-built requests per length, so the generator spends no time on encoding."""

    def __init__(self, features, seed=0):
        rng = np.random.default_rng(seed)
        self.x = rng.standard_normal((1, 500, features)).astype(np.float32)
        self.cache = {}

    def get(self, model, length):
        key = (model, int(length))
        if key not in self.cache:
            self.cache[key] = request(model, self.x[:, :length])
        return self.cache[key]


async def closed_loop(stub, inputs, model, lengths, clients, seconds):
    done = 0
    end = time.perf_counter() + seconds
    idx = [0]

    async def client():
        nonlocal done
        while time.perf_counter() < end:
            i = idx[0]
            idx[0] += 1
            await stub.Predict(inputs.get(model, lengths[i % len(lengths)]))
            done += 1

    start = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(clients)))
    return done / (time.perf_counter() - start)


async def open_loop(stub, inputs, model, lengths, rate, seconds, rng, raw=False):
    """Poisson arrivals at `rate` sequences/s for `seconds`; latencies of the completed."""
    gaps = rng.exponential(1.0 / rate, size=int(rate * seconds * 1.5) + 10)
    latencies, errors, tasks, error_kinds = [], [0], [], set()

    async def one(i):
        t0 = time.perf_counter()
        try:
            await stub.Predict(inputs.get(model, lengths[i % len(lengths)]))
            latencies.append(time.perf_counter() - t0)
        except grpc.aio.AioRpcError as e:
            errors[0] += 1
            if len(error_kinds) < 3:
                error_kinds.add(f"{e.code().name}: {e.details()[:120]}")

    start = time.perf_counter()
    next_at = start
    i = 0
    while True:
        next_at += gaps[i % len(gaps)]
        if next_at - start > seconds:
            break
        delay = next_at - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.ensure_future(one(i)))
        i += 1
    await asyncio.gather(*tasks)
    elapsed = time.perf_counter() - start
    if raw:
        return {"latencies": latencies, "sent": i, "errors": errors[0], "elapsed": elapsed,
                "error_kinds": sorted(error_kinds)}
    lat = np.array(latencies) * 1e3
    return {"offered": rate, "sent": i, "completed": len(latencies), "errors": errors[0],
            "error_kinds": sorted(error_kinds),
            "throughput": len(latencies) / elapsed,
            "p50_ms": float(np.percentile(lat, 50)) if len(lat) else None,
            "p99_ms": float(np.percentile(lat, 99)) if len(lat) else None}


def _worker(job):
    """One load process: ("closed", ...) or ("open", ...) against `address`."""
    address, what, model, lengths, value, seconds, features, seed = job

    async def go():
        opts = [("grpc.max_send_message_length", 64 << 20),
                ("grpc.max_receive_message_length", 64 << 20)]
        channel = grpc.aio.insecure_channel(address, options=opts)
        stub = pb_grpc.RnnServeStub(channel)
        inputs = Inputs(features)
        if what == "closed":
            r = await closed_loop(stub, inputs, model, lengths, value, seconds)
        else:
            r = await open_loop(stub, inputs, model, lengths, value, seconds,
                                np.random.default_rng(seed), raw=True)
        await channel.close()
        return r

    return asyncio.run(go())


def spread(address, procs, what, model, lengths, value, seconds, features, seed):
    """Runs the load in `procs` processes (value split between them) and merges the results."""
    import multiprocessing
    share = value / procs if what == "open" else max(1, int(round(value / procs)))
    jobs = [(address, what, model, lengths[i::procs], share, seconds, features, seed + i)
            for i in range(procs)]
    with multiprocessing.get_context("spawn").Pool(procs) as pool:
        parts = pool.map(_worker, jobs)
    if what == "closed":
        return sum(parts)
    lat = np.concatenate([np.array(p["latencies"]) for p in parts]) * 1e3
    completed = sum(len(p["latencies"]) for p in parts)
    elapsed = max(p["elapsed"] for p in parts)
    return {"offered": value, "sent": sum(p["sent"] for p in parts), "completed": completed,
            "errors": sum(p["errors"] for p in parts), "throughput": completed / elapsed,
            "error_kinds": sorted({k for p in parts for k in p["error_kinds"]}),
            "p50_ms": float(np.percentile(lat, 50)) if len(lat) else None,
            "p99_ms": float(np.percentile(lat, 99)) if len(lat) else None}


async def run(args, address):
    opts = [("grpc.max_send_message_length", 64 << 20), ("grpc.max_receive_message_length", 64 << 20)]
    channel = grpc.aio.insecure_channel(address, options=opts)
    stub = pb_grpc.RnnServeStub(channel)
    inputs = Inputs(args.features)
    results = {"mixes": {}}
    for mix in args.mixes:
        rng = np.random.default_rng(1)
        lengths = lengths_for(mix, 20000, rng)
        for m in ("dynamic", "cellular"):  # warm both up
            await closed_loop(stub, inputs, f"m_{m}", lengths, 8, 2)
        if args.capacity:  # loads as fractions of a given rate (to compare settings at one rate)
            capacity = args.capacity
        elif args.procs > 1:
            capacity = spread(address, args.procs, "closed", "m_dynamic", lengths,
                              args.clients, args.seconds, args.features, 0)
        else:
            capacity = await closed_loop(stub, inputs, "m_dynamic", lengths, args.clients,
                                         args.seconds)
        single = []
        for _ in range(5):
            t0 = time.perf_counter()
            await stub.Predict(inputs.get("m_dynamic", 500))
            single.append(time.perf_counter() - t0)
        unloaded_500_ms = float(np.median(single)) * 1e3
        rows = {"dynamic": [], "cellular": []}
        for load in args.loads:
            for m in ("dynamic", "cellular"):
                before = scrape_engine_calls(args.metrics_port, f"m_{m}")
                if args.procs > 1:
                    r = spread(address, args.procs, "open", f"m_{m}", lengths, load * capacity,
                               args.seconds, args.features, int(load * 100))
                else:
                    r = await open_loop(stub, inputs, f"m_{m}", lengths, load * capacity,
                                        args.seconds, np.random.default_rng(int(load * 100)))
                r["load"] = load
                r["call_ms"], r["call_rows"] = chunk_stats(
                    before, scrape_engine_calls(args.metrics_port, f"m_{m}"))
                rows[m].append(r)
                print(f"{mix} {m:8s} load {load:.2f}: {r['throughput']:.1f} seq/s "
                      f"p50 {r['p50_ms']:.1f} ms p99 {r['p99_ms']:.1f} ms errors {r['errors']} "
                      f"{r['error_kinds']} engine call {r['call_ms']} ms x {r['call_rows']} rows",
                      flush=True)
        results["mixes"][mix] = {"capacity": capacity, "unloaded_500_ms": unloaded_500_ms,
                                 "slo_ms": 2 * unloaded_500_ms, "rows": rows}
    await channel.close()
    return results


def scrape_engine_calls(port, model):
    """Sums of the model's engine-call histograms on the metrics endpoint: compute seconds,
    calls and sequences (each cellular chunk is one call)."""
    if not port:
        return None
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    want = {"rnnserve_compute_duration_seconds_sum": "seconds",
            "rnnserve_compute_duration_seconds_count": "calls",
            "rnnserve_batch_size_sum": "sequences"}
    out = {v: 0.0 for v in want.values()}
    for line in text.splitlines():
        if line.startswith("#") or f'model="{model}"' not in line:
            continue
        name, value = line.split("{", 1)[0], line.rsplit(" ", 1)[-1]
        if name in want:
            out[want[name]] += float(value)
    return out


def chunk_stats(before, after):
    """Mean engine call (ms) and rows per call between two scrapes."""
    if not before or not after or after["calls"] <= before["calls"]:
        return None, None
    calls = after["calls"] - before["calls"]
    return ((after["seconds"] - before["seconds"]) / calls * 1e3,
            (after["sequences"] - before["sequences"]) / calls)


def best_under_slo(rows, slo):
    ok = [r["throughput"] for r in rows if r["p99_ms"] is not None and r["p99_ms"] <= slo]
    return max(ok) if ok else 0.0


def report(args, results):
    lines = [f"# Cellular vs request-level batching, {results['machine']}", "",
             f"model: {args.model_dir}, chunk_steps {args.chunk_steps}, slots {args.slots}, "
             f"cpu_threads {args.threads}, {args.kind}, {args.seconds} s per point, "
             f"cellular_batching extra: {args.cellular_extra or 'none'}, "
             f"request-level max_computed_steps_ratio "
             f"{'default' if args.dynamic_ratio is None else f'{args.dynamic_ratio:g}'}, "
             f"{args.procs} load process(es)", ""]
    for mix, m in results["mixes"].items():
        lines += [f"## Lengths: {mix}", "",
                  f"request-level capacity ({'given' if args.capacity else f'{args.clients} clients, closed loop'}): "
                  f"{m['capacity']:.1f} seq/s; "
                  f"unloaded 500-step latency {m['unloaded_500_ms']:.1f} ms, SLO "
                  f"{m['slo_ms']:.1f} ms", "",
                  "| load | dynamic seq/s | dynamic p50 ms | dynamic p99 ms | cellular seq/s | "
                  "cellular p50 ms | cellular p99 ms | p99 cellular / dynamic |",
                  "|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for d, c in zip(m["rows"]["dynamic"], m["rows"]["cellular"]):
            ratio = c["p99_ms"] / d["p99_ms"] if d["p99_ms"] and c["p99_ms"] else float("nan")
            lines.append(f"| {d['load']:.2f} | {d['throughput']:.1f} | {d['p50_ms']:.1f} | "
                         f"{d['p99_ms']:.1f} | {c['throughput']:.1f} | {c['p50_ms']:.1f} | "
                         f"{c['p99_ms']:.1f} | {ratio:.2f} |")
        bd = best_under_slo(m["rows"]["dynamic"], m["slo_ms"])
        bc = best_under_slo(m["rows"]["cellular"], m["slo_ms"])
        gain = bc / bd if bd > 0 else float("inf")
        calls = [(d["load"], d.get("call_ms"), d.get("call_rows"), c.get("call_ms"),
                  c.get("call_rows")) for d, c in zip(m["rows"]["dynamic"], m["rows"]["cellular"])]
        if any(x[3] for x in calls):
            lines += ["", "engine calls (from the server's metrics): mean ms and rows a call",
                      "", "| load | dynamic ms | dynamic rows | cellular chunk ms | cellular rows |",
                      "|---:|---:|---:|---:|---:|"]
            fmt = lambda v: f"{v:.3f}" if v is not None else "-"  # noqa: E731
            for load, dm, dr, cm, cr in calls:
                lines.append(f"| {load:.2f} | {fmt(dm)} | {fmt(dr)} | {fmt(cm)} | {fmt(cr)} |")
        lines += ["", f"most seq/s with p99 <= SLO: dynamic {bd:.1f}, cellular {bc:.1f} "
                      f"({gain:.2f}x)", ""]
    return "\n".join(lines) + "\n"


def plot(results, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    mixes = list(results["mixes"])
    fig, axes = plt.subplots(1, len(mixes), figsize=(6 * len(mixes), 4.5), squeeze=False)
    for ax, mix in zip(axes[0], mixes):
        m = results["mixes"][mix]
        for mode in ("dynamic", "cellular"):
            rows = m["rows"][mode]
            ax.plot([r["offered"] for r in rows], [r["p99_ms"] for r in rows], "o-", label=f"{mode} p99")
            ax.plot([r["offered"] for r in rows], [r["p50_ms"] for r in rows], "x--", label=f"{mode} p50")
        ax.axhline(m["slo_ms"], color="grey", lw=0.8, label="SLO (2x unloaded 500 steps)")
        ax.set_title(f"lengths {mix}")
        ax.set_xlabel("offered load (sequences/s)")
        ax.set_ylabel("latency (ms)")
        ax.set_yscale("log")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rnnserve", default="build/release/server/rnnserve")
    p.add_argument("--model-dir", default=os.path.join(HERE, "server_models", "lstm256"))
    p.add_argument("--features", type=int, default=16)
    p.add_argument("--slots", type=int, default=64)
    p.add_argument("--chunk-steps", type=int, default=8)
    p.add_argument("--threads", type=int, default=1, help="cpu_threads of each model")
    p.add_argument("--kind", default="KIND_CPU", help="instance_group kind (KIND_GPU on a GPU)")
    p.add_argument("--clients", type=int, default=32, help="closed-loop clients for capacity")
    p.add_argument("--capacity", type=float, default=0,
                   help="take this as the request-level capacity (seq/s) instead of measuring it")
    p.add_argument("--procs", type=int, default=1, help="load generator processes")
    p.add_argument("--seconds", type=float, default=20)
    p.add_argument("--loads", type=float, nargs="+", default=[0.5, 0.7, 0.9, 1.1, 1.3])
    p.add_argument("--mixes", nargs="+", default=["uniform", "longtail"])
    p.add_argument("--out", default="build/cellular-bench")
    p.add_argument("--extra", nargs="*", default=[], help="more rnnserve flags")
    p.add_argument("--dynamic-ratio", type=float, default=None,
                   help="max_computed_steps_ratio of the request-level model (default: the "
                        "server's, 1.1; 0: any lengths share a batch)")
    p.add_argument("--cellular-extra", default="",
                   help='more cellular_batching fields, e.g. "resident_step_loop: true"')
    p.add_argument("--metrics-port", type=int, default=0,
                   help="serve metrics on this port and report each mode's mean engine call")
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)
    repo = make_repo(args.model_dir, args.slots, args.chunk_steps, args.threads, args.kind,
                     args.dynamic_ratio, cellular_extra=args.cellular_extra)
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")),
               platform.processor())
    try:
        with running_server(args.rnnserve, repo, timeout_s=120,
                            extra=["--max-concurrent-per-model", "100000",
                                   # one host's clients are one caller, and both modes must
                                   # take every arrival: no byte budget or fair share refuses
                                   "--max-inflight-bytes", str(1 << 36), "--fair-floor-percent",
                                   "100",
                                   "--allow-symlinks-outside-repository", *args.extra,
                                   *(["--metrics-port", str(args.metrics_port)]
                                     if args.metrics_port else [])]) as address:
            results = asyncio.run(run(args, address))
    finally:
        shutil.rmtree(repo, ignore_errors=True)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=HERE).stdout.strip()
    results["machine"] = f"{os.cpu_count()} cores, {cpu}"
    results["commit"] = commit
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump(results, f, indent=1)
    text = report(args, results)
    with open(os.path.join(args.out, "results.md"), "w") as f:
        f.write(text)
    plot(results, os.path.join(args.out, "latency_vs_load.png"))
    print(text)


if __name__ == "__main__":
    main()
