#!/usr/bin/env python3
"""Server-side generation (rnnserve.v1 Generate) against the client-side loop users write today
(one Predict per token, the whole context sent every time, the state thrown away), same run,
same server, same model file.

Model: tests/fixtures/generation/repo/alice_lstm (tf-keras: Embedding(8) -> LSTM(32,
return_sequences) -> Dense(softmax), 37 characters; models/scripts/make_generation_fixtures.py),
served twice by one rnnserve:
  alice_lstm           as the fixture configures it (no batching): Generate's own batcher
                       steps every live generation in one engine call per token;
  alice_lstm_batched   the same file with dynamic_batching {} (work-conserving), the best
                       the Predict loop can get: concurrent Predict calls share engine calls.
Each generation: the prompt "Alice was " (10 characters), then --tokens greedy tokens. The
Predict loop sends ids [1, 10 + t] at step t and takes the argmax of the last step's output.
For each concurrency C in --concurrency, C generations run at once, --rounds times back to back
for each mode; the modes alternate round by round. tokens/s = generated tokens / wall time.
For context, a third number: Generate calls of n=64 samples each (C / 64 calls, or one of
n=C), the same steps without C streams' per-message cost.
Both give the same tokens (checked).

  python3 bench/generation_bench.py --rnnserve build/release/server/rnnserve \\
      --out bench/results/generation-cpu-<date>.json

Needs grpcio, grpcio-tools, setuptools and numpy (the Python client is installed into a
temporary folder from client/python, as the tests do).
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

import grpc
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
from server_process import running_server  # noqa: E402

PROMPT = "Alice was "


def install_client():
    site = tempfile.mkdtemp(prefix="rnnserve_client_")
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--root-user-action=ignore",
                    "--no-build-isolation", "--no-deps", "--target", site,
                    os.path.join(ROOT, "client/python")], check=True)
    sys.path.insert(0, site)


def make_repo():
    repo = tempfile.mkdtemp(prefix="generation_bench_")
    src = os.path.join(ROOT, "tests/fixtures/generation/repo/alice_lstm")
    shutil.copytree(src, os.path.join(repo, "alice_lstm"))
    batched = os.path.join(repo, "alice_lstm_batched")
    shutil.copytree(src, batched)
    with open(os.path.join(batched, "config.pbtxt")) as f:
        text = f.read().replace('name: "alice_lstm"', 'name: "alice_lstm_batched"')
    with open(os.path.join(batched, "config.pbtxt"), "w") as f:
        f.write(text + "dynamic_batching {}\n")
    return repo


async def generate_one(pb, stub, prompt_ids, tokens):
    req = pb.GenerateRequest(model_spec=pb.ModelSpec(name="alice_lstm"), prompt_ids=prompt_ids,
                             max_tokens=tokens)
    out = []
    async for resp in stub.Generate(req):
        out.extend(t.id for t in resp.tokens)
    return out


async def generate_n(pb, stub, prompt_ids, tokens, n):
    """One call of n samples (greedy: n copies of the same tokens)."""
    req = pb.GenerateRequest(model_spec=pb.ModelSpec(name="alice_lstm"), prompt_ids=prompt_ids,
                             max_tokens=tokens, n=n)
    out = [[] for _ in range(n)]
    async for resp in stub.Generate(req):
        for t in resp.tokens:
            out[t.sample].append(t.id)
    return out


async def predict_loop_one(pb, stub, prompt_ids, tokens):
    ctx = list(prompt_ids)
    out = []
    for _ in range(tokens):
        req = pb.PredictRequest(model_spec=pb.ModelSpec(name="alice_lstm_batched"))
        t = req.inputs[INPUT_NAME]
        t.dtype = pb.TYPE_INT64
        t.shape.extend([1, len(ctx)])
        t.raw_content = np.asarray(ctx, "<i8").tobytes()
        resp = await stub.Predict(req)
        y = next(iter(resp.outputs.values()))
        probs = (np.frombuffer(y.raw_content, "<f4") if y.raw_content
                 else np.asarray(y.float_val, np.float32)).reshape(tuple(y.shape))
        ctx.append(int(np.argmax(probs[0, -1])))
        out.append(ctx[-1])
    return out


async def run_round(fn, pb, stub, prompt_ids, tokens, concurrency):
    start = time.perf_counter()
    results = await asyncio.gather(*[fn(pb, stub, prompt_ids, tokens)
                                     for _ in range(concurrency)])
    return time.perf_counter() - start, results


async def bench(address, args):
    from rnnserve_client import proto as pb
    opts = [("grpc.max_receive_message_length", 64 << 20)]
    channel = grpc.aio.insecure_channel(address, options=opts)
    stub = pb.RnnServeStub(channel)
    vocab = json.load(open(os.path.join(
        ROOT, "tests/fixtures/generation/repo/alice_lstm/1/vocab.json")))
    prompt_ids = [vocab[c] for c in PROMPT]
    meta = await stub.ModelMetadata(pb.ModelMetadataRequest(
        model_spec=pb.ModelSpec(name="alice_lstm_batched")))
    global INPUT_NAME
    INPUT_NAME = meta.inputs[0].name
    # Warm-up, and the check that both ways give the same tokens.
    a = await generate_one(pb, stub, prompt_ids, args.tokens)
    b = await predict_loop_one(pb, stub, prompt_ids, args.tokens)
    assert a == b, (a, b)
    rows = []
    for c in args.concurrency:
        times = {"generate": 0.0, "predict_loop": 0.0, "generate_n": 0.0}
        for _ in range(args.rounds):
            for mode, fn in (("generate", generate_one), ("predict_loop", predict_loop_one)):
                dt, results = await run_round(fn, pb, stub, prompt_ids, args.tokens, c)
                assert all(r == a for r in results), mode
                times[mode] += dt
            start = time.perf_counter()
            calls = await asyncio.gather(*[  # n is at most 64 a call
                generate_n(pb, stub, prompt_ids, args.tokens, min(64, c - i))
                for i in range(0, c, 64)])
            times["generate_n"] += time.perf_counter() - start
            assert all(r == a for call in calls for r in call), "generate_n"
        tokens = c * args.tokens * args.rounds
        row = {"concurrency": c, "tokens": tokens,
               "generate_tokens_per_s": tokens / times["generate"],
               "predict_loop_tokens_per_s": tokens / times["predict_loop"],
               "generate_one_call_n_tokens_per_s": tokens / times["generate_n"]}
        row["ratio"] = row["generate_tokens_per_s"] / row["predict_loop_tokens_per_s"]
        print(json.dumps(row), flush=True)
        rows.append(row)
    await channel.close()
    return rows


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rnnserve", default=os.path.join(ROOT, "build/release/server/rnnserve"))
    p.add_argument("--tokens", type=int, default=32)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--concurrency", type=int, nargs="+", default=[1, 64, 256])
    p.add_argument("--out", help="write the results as JSON here")
    args = p.parse_args()
    install_client()
    repo = make_repo()
    with running_server(args.rnnserve, repo) as address:
        rows = asyncio.run(bench(address, args))
    result = {"machine": {"cpu": platform.processor() or platform.machine(),
                          "lscpu_model": subprocess.run(
                              ["sh", "-c", "lscpu | sed -n 's/^Model name: *//p'"],
                              capture_output=True, text=True).stdout.strip(),
                          "cores": os.cpu_count()},
              "tokens_per_generation": args.tokens, "rounds": args.rounds, "rows": rows}
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)
    shutil.rmtree(repo, ignore_errors=True)


if __name__ == "__main__":
    main()
