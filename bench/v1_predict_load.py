"""Closed-loop load on rnnserve.v1 Predict, perf_analyzer's counterpart for our own protocol:
CONCURRENCY calls in flight (grpc.aio), x = [1, T, F] FP32 as raw_content, for SECONDS after a
one-second warm-up. Writes a one-row CSV with perf_analyzer's column names ("Inferences/Second",
"p50 latency" in us), so bench/server_paired_bench.sh reads it the same way.

usage: python3 bench/v1_predict_load.py ADDRESS MODEL INPUT:T,F CONCURRENCY SECONDS OUT_CSV
"""

import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time

import grpc
import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def stubs():
    out = tempfile.mkdtemp(prefix="rnnserve_v1_")
    subprocess.run([sys.executable, "-m", "grpc_tools.protoc", f"-I{ROOT}/proto",
                    f"--python_out={out}", f"--grpc_python_out={out}",
                    "rnnserve/v1/rnnserve.proto", "rnnserve/v1/model_config.proto"], check=True)
    sys.path.insert(0, out)
    from rnnserve.v1 import model_config_pb2, rnnserve_pb2, rnnserve_pb2_grpc  # noqa: E402
    return rnnserve_pb2, rnnserve_pb2_grpc, model_config_pb2.TYPE_FP32


async def main():
    address, model, spec, concurrency, seconds, out_csv = sys.argv[1:7]
    name, dims = spec.split(":")
    T, F = map(int, dims.split(","))
    pb, pb_grpc, fp32 = stubs()
    request = pb.PredictRequest()
    request.model_spec.name = model
    x = request.inputs[name]
    x.dtype = fp32
    x.shape.extend([1, T, F])
    x.raw_content = np.random.default_rng(1).standard_normal((1, T, F), np.float32).tobytes()
    latencies = []
    async with grpc.aio.insecure_channel(address) as channel:
        stub = pb_grpc.RnnServeStub(channel)
        start = time.perf_counter()
        measure_from = start + 1.0
        end = measure_from + float(seconds)

        async def worker():
            while True:
                t0 = time.perf_counter()
                if t0 >= end:
                    return
                await stub.Predict(request)
                if t0 >= measure_from:
                    latencies.append(time.perf_counter() - t0)

        await asyncio.gather(*(worker() for _ in range(int(concurrency))))
    with open(out_csv, "w") as f:
        f.write("Concurrency,Inferences/Second,p50 latency\n")
        f.write(f"{concurrency},{len(latencies) / float(seconds):.1f},"
                f"{statistics.median(latencies) * 1e6:.0f}\n")


if __name__ == "__main__":
    asyncio.run(main())
