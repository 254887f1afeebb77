"""perf_analyzer (the official Triton load tool) runs a short concurrency sweep (1 to 4) against
the real rnnserve binary over the KServe gRPC protocol and must exit 0 with a result for every
concurrency level. Timing is not judged here (bench/ measures speed)."""

import argparse
import csv
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import server_process  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--server", required=True, help="the rnnserve binary")
    ap.add_argument("--source-dir", required=True)
    args = ap.parse_args()
    pa = server_process.find_perf_analyzer()
    if pa is None:
        server_process.skip("perf_analyzer not found ($PERF_ANALYZER, PATH, "
                           "/opt/perf_analyzer/bin); see docs/kserve.md for the install line")
    env = server_process.perf_analyzer_env()
    probe = subprocess.run([pa, "--version"], env=env, capture_output=True, text=True)
    if "error while loading shared libraries" in probe.stderr or "GLIBC" in probe.stderr:
        server_process.skip(f"{pa} cannot run on this system: {probe.stderr.strip()}")

    with tempfile.TemporaryDirectory() as tmp, server_process.running_server(
            args.server, os.path.join(args.source_dir, "models/examples")) as url:
        report = os.path.join(tmp, "sweep.csv")
        cmd = [pa, "-m", "waveform_lstm", "-u", url, "-i", "grpc",
               "--shape", "waveform:20,2", "-b", "1",
               "--concurrency-range", "1:4",
               "--measurement-interval", "300", "--stability-percentage", "999",
               "--max-trials", "3", "-f", report]
        print(" ".join(cmd), flush=True)
        run = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=240)
        print(run.stdout[-4000:], run.stderr[-2000:], flush=True)
        if run.returncode != 0:
            print(f"FAIL perf_analyzer exited {run.returncode}")
            print("0 passed, 1 failed")
            return 1
        with open(report) as f:
            rows = list(csv.DictReader(f))
        levels = sorted(int(r["Concurrency"]) for r in rows)
        ok = levels == [1, 2, 3, 4] and all(float(r["Inferences/Second"]) > 0 for r in rows)
        print(f"{'PASS' if ok else 'FAIL'} PerfAnalyzerSweepCoversConcurrency1To4 {levels}")
        print(f"{int(ok)} passed, {int(not ok)} failed")
        return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
