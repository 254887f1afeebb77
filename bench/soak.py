#!/usr/bin/env python3
"""Soak: rnnserve on the CPU engine at saturation for a while, with a version swap every few
seconds and a hostile client mixing the bad requests of docs/errors.md (and worse).

    python3 bench/soak.py --rnnserve build/release/server/rnnserve --seconds 600 --out FILE.md

What it checks, and prints as a markdown report:
  - every valid Predict is answered OK with Keras's numbers (tests/fixtures/example/expected.npy,
    made by Keras; |got - want| <= 1e-6 + 1e-5 |want|): 0 failed, 0 wrong;
  - every bad request is refused with a client-error code (never UNKNOWN, INTERNAL, or a lost
    connection), and the server keeps serving;
  - the server's RSS after the first minute grows less than 5 % to the end, and its thread count
    stays bounded;
  - SIGTERM at the end exits 0.
Exit status 0 when all of these hold, 1 otherwise.

The load comes from --workers processes (Python gRPC, one channel each, back to back). The
hostile client runs in its own process. Needs numpy and grpcio; the rnnserve.v1 messages and
stub come from the Python client package (rnnserve_client.proto), installed into a temporary
directory from client/python.
"""

import argparse
import multiprocessing as mp
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
MODEL = "waveform_lstm"
# Codes a bad request may get: the client's fault, or a limit it reached.
CLIENT_CODES = {"INVALID_ARGUMENT", "NOT_FOUND", "RESOURCE_EXHAUSTED", "DEADLINE_EXCEEDED",
                "FAILED_PRECONDITION", "OUT_OF_RANGE", "ALREADY_EXISTS", "PERMISSION_DENIED",
                "UNIMPLEMENTED", "UNAUTHENTICATED"}


def install_client(site):
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", site,
                    os.path.join(ROOT, "client/python")], check=True,
                   stdout=subprocess.DEVNULL)


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_repository(repo):
    """The example model, version 1, in a repository of its own."""
    src = os.path.join(ROOT, "models/examples", MODEL)
    dst = os.path.join(repo, MODEL)
    os.makedirs(os.path.join(dst, "1"))
    shutil.copy(os.path.join(src, "config.pbtxt"), dst)
    shutil.copy(os.path.join(src, "1/model.h5"), os.path.join(dst, "1"))
    return dst


def proc_status(pid):
    rss_kb = threads = 0
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss_kb = int(line.split()[1])
            elif line.startswith("Threads:"):
                threads = int(line.split()[1])
    return rss_kb, threads


def valid_worker(site, address, stop, counts, lock):
    sys.path.insert(0, site)
    import grpc
    import numpy as np
    from rnnserve_client import proto as cfg
    from rnnserve_client import proto as pb
    from rnnserve_client import proto as pb_grpc

    x = np.load(os.path.join(ROOT, "tests/fixtures/example/input.npy")).astype("<f4")
    want = np.load(os.path.join(ROOT, "tests/fixtures/example/expected.npy"))
    request = pb.PredictRequest()
    request.model_spec.name = MODEL
    t = request.inputs["waveform"]
    t.dtype = cfg.TYPE_FP32
    t.shape.extend(x.shape)
    t.raw_content = x.tobytes()
    stub = pb_grpc.RnnServeStub(grpc.insecure_channel(address))
    ok = failed = wrong = 0
    versions = set()
    errors = {}
    while not stop.is_set():
        try:
            r = stub.Predict(request, timeout=30)
        except grpc.RpcError as e:
            failed += 1
            key = f"{e.code().name}: {e.details()[:120]}"
            errors[key] = errors.get(key, 0) + 1
            continue
        out = r.outputs["probabilities"]
        got = (np.frombuffer(out.raw_content, "<f4") if out.raw_content
               else np.array(out.float_val, np.float32)).reshape(tuple(out.shape))
        if got.shape != want.shape or (np.abs(got - want) > 1e-6 + 1e-5 * np.abs(want)).any():
            wrong += 1
        else:
            ok += 1
        versions.add(r.model_spec.version)
    with lock:
        counts["ok"] += ok
        counts["failed"] += failed
        counts["wrong"] += wrong
        counts["versions"] = sorted(set(counts["versions"]) | versions)
        merged = dict(counts["errors"])
        for k, v in errors.items():
            merged[k] = merged.get(k, 0) + v
        counts["errors"] = merged


def bad_requests(pb, cfg):
    """(label, method, request, codes) for requests the server must answer without harm:
    refused with a client-error code, or with one of `codes` besides."""

    def predict(name=MODEL, shape=(2, 5, 2), values=None, dtype=None, raw=None, lengths=(),
                input_name="waveform", version=0, output_filter=()):
        r = pb.PredictRequest()
        r.model_spec.name = name
        r.model_spec.version = version
        t = r.inputs[input_name]
        t.dtype = cfg.TYPE_FP32 if dtype is None else dtype
        t.shape.extend(shape)
        if raw is not None:
            t.raw_content = raw
        else:
            n = 1
            for d in shape:
                n *= max(d, 0)
            t.float_val.extend([0.5] * n if values is None else values)
        r.lengths.extend(lengths)
        r.output_filter.extend(output_filter)
        return r

    nan = float("nan")
    two_inputs = predict()
    two_inputs.inputs["extra"].CopyFrom(two_inputs.inputs["waveform"])
    out = [
        ("unknown model", "Predict", predict(name="no_such_model")),
        ("unknown version", "Predict", predict(version=999999999)),
        ("no inputs", "Predict", pb.PredictRequest(model_spec=pb.ModelSpec(name=MODEL))),
        ("int32 values", "Predict", predict(dtype=cfg.TYPE_INT32, values=[])),
        ("wrong rank", "Predict", predict(shape=(10, 2))),
        ("wrong feature size", "Predict", predict(shape=(2, 5, 3))),
        ("too few values", "Predict", predict(values=[0.5] * 19)),
        ("raw of wrong size", "Predict", predict(raw=b"\0" * 76)),
        ("negative dimension", "Predict", predict(shape=(2, -5, 2), values=[])),
        ("empty batch", "Predict", predict(shape=(0, 5, 2))),
        ("empty time axis", "Predict", predict(shape=(2, 0, 2))),
        ("one length for two", "Predict", predict(lengths=(5,))),
        ("negative length", "Predict", predict(lengths=(5, -1))),
        ("length past T", "Predict", predict(lengths=(5, 6))),
        ("nan values (the example accepts them)", "Predict", predict(values=[nan] * 20),
         {"OK"}),
        ("fp64 dtype", "Predict", predict(dtype=cfg.TYPE_FP64, values=[])),
        ("2e10 elements", "Predict", predict(shape=(100000, 100000, 2), values=[])),
        ("unknown output", "Predict", predict(output_filter=("logits",))),
        ("NUL in model name", "Predict", predict(name="waveform\0lstm")),
        ("10 KB model name", "Predict", predict(name="m" * 10240)),
        ("10,000-dimension shape", "Predict", predict(shape=(1,) * 10000, values=[])),
        ("two inputs for a one-input model", "Predict", two_inputs),
        ("metadata of unknown model", "ModelMetadata",
         pb.ModelMetadataRequest(model_spec=pb.ModelSpec(name="no_such_model"))),
        ("load outside the repository", "LoadModel", pb.LoadModelRequest(name="../outside")),
        ("unload unknown model", "UnloadModel", pb.UnloadModelRequest(name="never_loaded")),
        ("load a name with a NUL", "LoadModel", pb.LoadModelRequest(name="bogus\0name")),
        ("load a 10 KB name", "LoadModel", pb.LoadModelRequest(name="m" * 10240)),
    ]
    return [r if len(r) == 4 else (*r, set()) for r in out]


def hostile_worker(site, address, stop, counts, lock):
    sys.path.insert(0, site)
    import grpc
    from rnnserve_client import proto as cfg
    from rnnserve_client import proto as pb
    from rnnserve_client import proto as pb_grpc

    channel = grpc.insecure_channel(address)
    stub = pb_grpc.RnnServeStub(channel)
    garbage = channel.unary_unary("/rnnserve.v1.RnnServe/Predict",
                                  request_serializer=lambda b: b,
                                  response_deserializer=lambda b: b)
    requests = bad_requests(pb, cfg)
    sent = 0
    codes = {}
    unexpected = {}
    i = 0
    while not stop.is_set():
        if i % (len(requests) + 1) == len(requests):
            # gRPC itself answers a body that is not the method's message: INTERNAL.
            label, allowed = "undecodable bytes", {"INTERNAL"}
            call = lambda: garbage(os.urandom(64), timeout=10)  # noqa: E731
        else:
            label, method, request, allowed = requests[i % (len(requests) + 1)]
            call = (lambda m=method, r=request: getattr(stub, m)(r, timeout=10))
        i += 1
        try:
            call()
            code = "OK"
        except grpc.RpcError as e:
            code = e.code().name
        sent += 1
        codes[code] = codes.get(code, 0) + 1
        if code not in CLIENT_CODES and code not in allowed:
            unexpected[f"{label}: {code}"] = unexpected.get(f"{label}: {code}", 0) + 1
    with lock:
        counts["bad_sent"] += sent
        counts["bad_codes"] = codes
        counts["bad_unexpected"] = unexpected


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rnnserve", default=os.path.join(ROOT, "build/release/server/rnnserve"))
    ap.add_argument("--seconds", type=int, default=600)
    ap.add_argument("--swap-seconds", type=int, default=10)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--max-threads", type=int, default=256,
                    help="the bound the server's thread count must stay under")
    ap.add_argument("--out", default="")
    ap.add_argument("--server-arg", action="append", default=[],
                    help="an extra rnnserve flag, e.g. --server-arg=--max-streams=64")
    args = ap.parse_args()

    work = tempfile.mkdtemp(prefix="rnnserve_soak_")
    site = os.path.join(work, "site")
    install_client(site)
    repo = os.path.join(work, "repo")
    model_dir = make_repository(repo)
    port = free_port()
    log = open(os.path.join(work, "server.log"), "w")
    server = subprocess.Popen(
        [args.rnnserve, "--model-repository", repo, "--port", str(port), "--metrics-port", "0", "--http-port", "0",
         "--repository-poll-seconds", "1", "--log-level", "warning", *args.server_arg],
        stdout=log, stderr=subprocess.STDOUT)
    address = f"127.0.0.1:{port}"
    sys.path.insert(0, site)
    import grpc
    from rnnserve_client import proto as pb
    from rnnserve_client import proto as pb_grpc
    stub = pb_grpc.RnnServeStub(grpc.insecure_channel(address))
    deadline = time.monotonic() + 120
    while True:
        try:
            stub.ModelMetadata(pb.ModelMetadataRequest(model_spec=pb.ModelSpec(name=MODEL)),
                               timeout=5)
            break
        except grpc.RpcError:
            if server.poll() is not None or time.monotonic() > deadline:
                sys.exit(f"rnnserve did not serve {MODEL} (log: {log.name})")
            time.sleep(0.2)

    manager = mp.Manager()
    counts = manager.dict(ok=0, failed=0, wrong=0, versions=[], errors={}, bad_sent=0,
                          bad_codes={}, bad_unexpected={})
    lock = manager.Lock()
    stop = mp.Event()
    procs = [mp.Process(target=valid_worker, args=(site, address, stop, counts, lock))
             for _ in range(args.workers)]
    procs.append(mp.Process(target=hostile_worker, args=(site, address, stop, counts, lock)))
    for p in procs:
        p.start()

    start = time.monotonic()
    samples = []  # (seconds, rss_kb, threads)
    version = 1
    next_swap = start + args.swap_seconds
    swaps = 0
    while time.monotonic() - start < args.seconds:
        time.sleep(1)
        if server.poll() is not None:
            break
        samples.append((time.monotonic() - start, *proc_status(server.pid)))
        if time.monotonic() >= next_swap:
            # A new version appears; the one before the current goes: the server keeps serving
            # the newest while it swaps.
            version += 1
            os.makedirs(os.path.join(model_dir, str(version)))
            shutil.copy(os.path.join(model_dir, str(version - 1), "model.h5"),
                        os.path.join(model_dir, str(version)))
            if version > 2:
                shutil.rmtree(os.path.join(model_dir, str(version - 2)))
            swaps += 1
            next_swap += args.swap_seconds
    stop.set()
    for p in procs:
        p.join(timeout=60)
    alive = server.poll() is None
    exit_code = None
    if alive:
        server.send_signal(signal.SIGTERM)
        try:
            exit_code = server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            server.kill()
            exit_code = "hung on SIGTERM"
    else:
        exit_code = f"died during the run ({server.returncode})"

    after_minute = [s for s in samples if s[0] >= 60] or samples
    rss_start = after_minute[0][1]
    rss_end = samples[-1][1]
    rss_max = max(s[1] for s in samples)
    growth = 100.0 * (rss_end - rss_start) / rss_start
    max_threads = max(s[2] for s in samples)
    elapsed = samples[-1][0]
    c = dict(counts)
    checks = {
        "the server ran to the end": alive,
        "0 failed valid requests": c["ok"] > 0 and c["failed"] == 0,
        "0 wrong answers": c["wrong"] == 0,
        "every bad request refused with a client-error code": not c["bad_unexpected"],
        "RSS growth after the first minute < 5 %": growth < 5.0,
        f"threads stay under {args.max_threads}": max_threads < args.max_threads,
        "SIGTERM exits 0": exit_code == 0,
    }
    lines = [
        f"- duration: {elapsed:.0f} s, {args.workers} valid clients + 1 hostile client, "
        f"a version swap every {args.swap_seconds} s ({swaps} swaps; answers came from versions "
        f"{c['versions'][0] if c['versions'] else '-'}..{c['versions'][-1] if c['versions'] else '-'})",
        f"- valid Predicts: {c['ok']} OK ({c['ok'] / elapsed:.0f}/s), {c['failed']} failed, "
        f"{c['wrong']} wrong",
        f"- bad requests: {c['bad_sent']} sent; codes: "
        + ", ".join(f"{k} {v}" for k, v in sorted(c["bad_codes"].items())),
        f"- RSS: {rss_start / 1024:.1f} MiB at {after_minute[0][0]:.0f} s, {rss_end / 1024:.1f} MiB "
        f"at the end ({growth:+.2f} %), max {rss_max / 1024:.1f} MiB",
        f"- threads: max {max_threads} (at start {samples[0][2]})",
        f"- SIGTERM: exit {exit_code}",
        "",
        "| check | result |",
        "|---|---|",
    ] + [f"| {k} | {'pass' if v else 'FAIL'} |" for k, v in checks.items()]
    if c["errors"]:
        lines += ["", "Failed valid requests:"] + [f"- {k}: {v}" for k, v in c["errors"].items()]
    if c["bad_unexpected"]:
        lines += ["", "Bad requests answered with an unexpected code:"] + [
            f"- {k}: {v}" for k, v in c["bad_unexpected"].items()]
    report = "\n".join(lines) + "\n"
    print(report)
    if args.out:
        with open(args.out, "a") as f:
            f.write(report)
    shutil.rmtree(work, ignore_errors=True)
    sys.exit(0 if all(checks.values()) else 1)


if __name__ == "__main__":
    main()
