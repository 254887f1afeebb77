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
                       the Predict loop can get: concurrent Predict calls share engine calls;
  alice_lstm_cellular  the same file with cellular_batching {} (256 slots): Generate runs each
                       generation as a sequence in the step-level scheduler's slots, its
                       sampled token fed back (the "slots" column).
Each generation: the prompt "Alice was " (10 characters), then --tokens greedy tokens. The
Predict loop sends ids [1, 10 + t] at step t and takes the argmax of the last step's output.
For each concurrency C in --concurrency, C generations run at once, --rounds times back to back
for each mode; the modes alternate round by round. tokens/s = generated tokens / wall time.
For context, a third number: Generate calls of n=64 samples each (C / 64 calls, or one of
n=C), the same steps without C streams' per-message cost.
All give the same tokens (checked).

With --floor (bench/generation_floor.cc, built as build/release/bench/generation_floor), first
the cost of one token at concurrency 1 against its parts, same run, same client: the engine's
single step of the model (ids [1, 1] from states, no scheduler) and the server's token loop
without gRPC, timed in-process by `generation_floor step`; a stream's message, timed as this
client reading --floor-tokens one-token messages from `generation_floor serve` (Generate with
no model, callback API); and a Generate of --floor-tokens greedy tokens on alice_lstm and on
alice_lstm_cellular, per token. The bound checked: token <= 2 x step + message.

  python3 bench/generation_bench.py --rnnserve build/release/server/rnnserve \\
      --floor build/release/bench/generation_floor \\
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
    cellular = os.path.join(repo, "alice_lstm_cellular")
    shutil.copytree(src, cellular)
    with open(os.path.join(cellular, "config.pbtxt"), "w") as f:
        f.write(text.replace("alice_lstm_batched", "alice_lstm_cellular") +
                "cellular_batching {}\n")
    return repo


async def generate_one(pb, stub, prompt_ids, tokens, model="alice_lstm", messages=None):
    req = pb.GenerateRequest(model_spec=pb.ModelSpec(name=model), prompt_ids=prompt_ids,
                             max_tokens=tokens)
    out = []
    async for resp in stub.Generate(req):
        out.extend(t.id for t in resp.tokens)
        if messages is not None:
            messages.append(len(resp.tokens))
    return out


async def generate_slots(pb, stub, prompt_ids, tokens):
    return await generate_one(pb, stub, prompt_ids, tokens, model="alice_lstm_cellular")


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
    assert await generate_slots(pb, stub, prompt_ids, args.tokens) == a
    rows = []
    for c in args.concurrency:
        times = {"generate": 0.0, "predict_loop": 0.0, "generate_n": 0.0, "generate_slots": 0.0}
        for _ in range(args.rounds):
            for mode, fn in (("generate", generate_one), ("predict_loop", predict_loop_one),
                             ("generate_slots", generate_slots)):
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
               "generate_one_call_n_tokens_per_s": tokens / times["generate_n"],
               "generate_slots_tokens_per_s": tokens / times["generate_slots"]}
        row["ratio"] = row["generate_tokens_per_s"] / row["predict_loop_tokens_per_s"]
        row["slots_ratio"] = row["generate_slots_tokens_per_s"] / row["predict_loop_tokens_per_s"]
        print(json.dumps(row), flush=True)
        rows.append(row)
    await channel.close()
    return rows


async def floor(address, floor_address, args, parts):
    """A token at concurrency 1 against the engine's step and a stream's message."""
    from rnnserve_client import proto as pb
    opts = [("grpc.max_receive_message_length", 64 << 20)]
    server = grpc.aio.insecure_channel(address, options=opts)
    peer = grpc.aio.insecure_channel(floor_address, options=opts)
    stub, peer_stub = pb.RnnServeStub(server), pb.RnnServeStub(peer)
    vocab = json.load(open(os.path.join(
        ROOT, "tests/fixtures/generation/repo/alice_lstm/1/vocab.json")))
    prompt_ids = [vocab[c] for c in PROMPT]
    n = args.floor_tokens
    times = {"message": [], "alice_lstm": [], "alice_lstm_cellular": []}
    messages = {"alice_lstm": [], "alice_lstm_cellular": []}
    for r in range(args.floor_rounds + 1):  # the first round: warm-up
        start = time.perf_counter()
        got = await generate_one(pb, peer_stub, prompt_ids, n, model="floor")
        dt = time.perf_counter() - start
        assert len(got) == n
        if r:
            times["message"].append(dt / n * 1e6)
        for model in ("alice_lstm", "alice_lstm_cellular"):
            counts = []
            start = time.perf_counter()
            got = await generate_one(pb, stub, prompt_ids, n, model=model, messages=counts)
            dt = time.perf_counter() - start
            assert len(got) == n
            if r:
                times[model].append(dt / n * 1e6)
                messages[model].append(len(counts))
    await server.close()
    await peer.close()
    med = {k: float(np.median(v)) for k, v in times.items()}
    bound = 2 * parts["engine_step_us"] + med["message"]
    out = {"tokens": n, "rounds": args.floor_rounds, **parts,
           "message_us": med["message"], "bound_us": bound}
    for model in ("alice_lstm", "alice_lstm_cellular"):
        out[f"{model}_token_us"] = med[model]
        out[f"{model}_messages"] = float(np.median(messages[model]))
        out[f"{model}_within_bound"] = med[model] <= bound
    out["samples_us"] = times
    print(json.dumps({k: v for k, v in out.items() if k != "samples_us"}), flush=True)
    return out


def run_floor(args, repo, address):
    step = subprocess.run([args.floor, "step", os.path.join(repo, "alice_lstm"),
                           "--tokens", str(args.floor_tokens)],
                          capture_output=True, text=True, check=True)
    parts = json.loads(step.stdout.strip().splitlines()[-1])
    from server_process import free_port
    port = free_port()
    proc = subprocess.Popen([args.floor, "serve", "--port", str(port)], stdout=subprocess.PIPE,
                            text=True)
    try:
        assert proc.stdout.readline().startswith("listening")
        return asyncio.run(floor(address, f"127.0.0.1:{port}", args, parts))
    finally:
        proc.terminate()
        proc.wait()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rnnserve", default=os.path.join(ROOT, "build/release/server/rnnserve"))
    p.add_argument("--tokens", type=int, default=32)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--concurrency", type=int, nargs="+", default=[1, 64, 256])
    p.add_argument("--out", help="write the results as JSON here")
    p.add_argument("--floor", help="the generation_floor binary: also time a token's parts")
    p.add_argument("--floor-tokens", type=int, default=2000)
    p.add_argument("--floor-rounds", type=int, default=7)
    p.add_argument("--skip-concurrency", action="store_true",
                   help="only the --floor measure")
    args = p.parse_args()
    install_client()
    repo = make_repo()
    floor_result, rows = None, []
    with running_server(args.rnnserve, repo) as address:
        if args.floor:
            floor_result = run_floor(args, repo, address)
        if not args.skip_concurrency:
            rows = asyncio.run(bench(address, args))
    result = {"machine": {"cpu": platform.processor() or platform.machine(),
                          "lscpu_model": subprocess.run(
                              ["sh", "-c", "lscpu | sed -n 's/^Model name: *//p'"],
                              capture_output=True, text=True).stdout.strip(),
                          "cores": os.cpu_count()},
              "tokens_per_generation": args.tokens, "rounds": args.rounds, "rows": rows,
              "floor": floor_result}
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)
    shutil.rmtree(repo, ignore_errors=True)


if __name__ == "__main__":
    main()
