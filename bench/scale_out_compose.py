#!/usr/bin/env python3
"""Stateful sequences through the scale-out stack (deploy/compose.scale-out.yaml: three rnnserve
replicas, Redis, HAProxy hashing x-sequence-id), with one replica stopped while they stream.

Each of --sequences client threads streams one KServe sequence of the example fixture (row
k % 3 of tests/fixtures/example/input.npy, lengths 40, 25, 12) through the proxy in chunks of
--chunk-steps steps, with tritonclient (sequence_id / sequence_start / sequence_end and the
x-sequence-id header). Steps [0, 12) run first; then --stop (a shell command, e.g.
`podman stop rnnserve-scale-out_rnnserve-2_1`) runs while steps [12, 24) stream; then the rest.
Every sequence's last answer is compared with Keras's (expected.npy, made by
models/scripts/make_example.py). A chunk the proxy refused before any replica ran it (HTTP/2
REFUSED_STREAM, connection refused) or one of a sequence another replica holds and has not
handed over yet (--sequence-durability=drain: UNAVAILABLE "not handed over yet") is resent;
nothing else is. Prints a markdown report.

  python3 bench/scale_out_compose.py --address 127.0.0.1:8500 --token TOKEN \\
      --stop "podman stop -t 30 NAME"
"""
import argparse
import os
import subprocess
import sys
import threading
import time

import numpy as np
import tritonclient.grpc as grpcclient

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
RESEND = ("RST_STREAM with error code 7", "not handed over yet", "Connection refused",
          "failed to connect")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--address", required=True)
    ap.add_argument("--token", required=True)
    ap.add_argument("--sequences", type=int, default=60)
    ap.add_argument("--chunk-steps", type=int, default=4)
    ap.add_argument("--stop", default="", help="shell command run during the second round")
    ap.add_argument("--first-id", type=int, default=int(time.time()) * 1000)
    a = ap.parse_args()
    fixtures = os.path.join(ROOT, "tests", "fixtures", "example")
    x = np.load(os.path.join(fixtures, "input.npy")).astype(np.float32)
    lengths = np.load(os.path.join(fixtures, "lengths.npy"))
    want = np.load(os.path.join(fixtures, "expected.npy"))
    n = a.sequences
    last = [None] * n
    failures = [""] * n
    counts = {"chunks": 0, "resent": 0}
    lock = threading.Lock()
    headers = {"authorization": f"Bearer {a.token}"}

    def stream(k, start, stop):
        client = grpcclient.InferenceServerClient(a.address)
        b, sid = k % 3, a.first_id + k
        t0 = start
        while t0 < min(stop, lengths[b]) and not failures[k]:
            t1 = min(t0 + a.chunk_steps, int(lengths[b]))
            inp = grpcclient.InferInput("waveform", [1, t1 - t0, 2], "FP32")
            inp.set_data_from_numpy(x[b:b + 1, t0:t1])
            for attempt in range(100):
                try:
                    r = client.infer("waveform_lstm", [inp], sequence_id=sid,
                                     sequence_start=t0 == 0, sequence_end=t1 == lengths[b],
                                     headers={**headers, "x-sequence-id": str(sid)})
                    last[k] = r.as_numpy("probabilities").reshape(-1)
                    with lock:
                        counts["chunks"] += 1
                    break
                except grpcclient.InferenceServerException as e:
                    if attempt < 99 and any(m in str(e) for m in RESEND):
                        with lock:
                            counts["resent"] += 1
                        time.sleep(0.1)
                        continue
                    failures[k] = f"steps {t0}: {e}"
                    break
            t0 = t1

    def round_(start, stop):
        threads = [threading.Thread(target=stream, args=(k, start, stop)) for k in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    began = time.monotonic()
    round_(0, 12)
    stopper = None
    stop_out = ""
    if a.stop:
        def run_stop():
            nonlocal stop_out
            p = subprocess.run(a.stop, shell=True, capture_output=True, text=True)
            stop_out = f"exit {p.returncode} after {time.monotonic() - t_stop:.1f} s"
        t_stop = time.monotonic()
        stopper = threading.Thread(target=run_stop)
        stopper.start()
    round_(12, 24)
    if stopper:
        stopper.join()
    round_(24, 40)
    took = time.monotonic() - began
    worst = 0.0
    wrong = 0
    for k in range(n):
        if failures[k] or last[k] is None:
            continue
        d = float(np.max(np.abs(last[k] - want[k % 3])))
        worst = max(worst, d)
        if d > 1e-5 + 1e-5 * float(np.max(np.abs(want[k % 3]))):
            wrong += 1
    failed = sum(1 for f in failures if f)
    print(f"- sequences: {n} (rows of the example fixture, lengths 40/25/12), chunks of "
          f"{a.chunk_steps} steps, {counts['chunks']} chunks answered in {took:.1f} s")
    if a.stop:
        print(f"- during the second round: `{a.stop}`: {stop_out}")
    print(f"- chunks resent after a refusal that ran nothing: {counts['resent']}")
    print(f"- sequences failed: {failed}; finished but unlike Keras: {wrong}; finished equal "
          f"to Keras: {n - failed - wrong} (largest difference {worst:.2e})")
    for k in range(n):
        if failures[k]:
            print(f"  - sequence {k}: {failures[k]}")
    sys.exit(0 if failed == 0 and wrong == 0 else 1)


if __name__ == "__main__":
    main()
