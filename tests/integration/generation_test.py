#!/usr/bin/env python3
"""Generate against the real server with the Python client (installed as a user installs it):
the generation fixtures' models (models/scripts/make_generation_fixtures.py, trained by tf-keras)
give Keras's own greedy loop token for token for 200 tokens, alone and side by side in one
batch; seeded sampling is reproducible and its first step's token frequencies match Keras's
softmax (chi-square, fixed seeds); bad requests are INVALID_ARGUMENT / FAILED_PRECONDITION with
a clear message, a cancelled stream is dropped, and the server goes on serving; a Generate
counts against the byte budget. On a model served with cellular batching each sample
generates in a slot of the step-level scheduler. Generate runs on gRPC's callback API: more
generations than the server has threads run at once, bounded by --max-generations.

  python3 generation_test.py <repo root> <rnnserve binary> <rnnserve-cli binary> [case ...]

Exits 77 (skipped) when grpcio/grpcio-tools/numpy/setuptools are missing.
"""
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import server_process  # noqa: E402

ROOT, SERVER, CLI = sys.argv[1], sys.argv[2], sys.argv[3]
try:
    import numpy as np  # noqa: F401
    import grpc  # noqa: F401
    import grpc_tools  # noqa: F401
    import setuptools  # noqa: F401
except ImportError as e:
    server_process.skip(f"{e} (deploy/install_deps.sh)")

site = tempfile.TemporaryDirectory(prefix="rnnserve_client_")
subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--root-user-action=ignore",
                "--no-build-isolation", "--no-deps", "--target", site.name,
                os.path.join(ROOT, "client/python")], check=True)
sys.path.insert(0, site.name)
from rnnserve_client import Client, RnnServeError  # noqa: E402

FIXTURES = os.path.join(ROOT, "tests/fixtures/generation")
EXPECTED = json.load(open(os.path.join(FIXTURES, "expected.json")))


def tokens(events, sample=0):
    return [e["id"] for e in events if "id" in e and e["sample"] == sample]


def finish(events, sample=0):
    return next(e for e in events if "finish" in e and e["sample"] == sample)


def greedy_equals_keras(c):
    for model, want in EXPECTED.items():
        for prompt in (want["prompt"], want["prompt_ids"]):
            events = list(c.generate(model, prompt, max_tokens=200))
            got = tokens(events)
            first_bad = next((i for i, (a, b) in enumerate(zip(got, want["greedy_ids"]))
                              if a != b), None)
            assert got == want["greedy_ids"], (model, first_bad, got[:first_bad + 3])
            text = "".join(e["text"] for e in events if "id" in e)
            assert text == want["greedy_text"], (model, text)
            assert finish(events) == {"sample": 0, "finish": "LENGTH", "tokens": 200}, events[-1]


def first_steps(model):
    """The sequences that have started in the model's step-level slots (its time to first step
    histogram's count)."""
    page = urllib.request.urlopen(f"http://127.0.0.1:{METRICS_PORT}/metrics", timeout=10).read()
    prefix = f'rnnserve_time_to_first_step_seconds_count{{model="{model}",'
    for line in page.decode().splitlines():
        if line.startswith(prefix):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def every_scheduler_gives_keras_greedy(c):
    # The generator's engine calls go through the model's scheduler: request-level batching
    # carries the states as the direct one does; with step-level batching each generation is
    # one sequence in a slot from its prompt to its last token (3 sequences started for 3
    # generations, not one per token), its sampled token fed back.
    want = EXPECTED["alice_lstm"]
    before = first_steps("alice_lstm_cellular")
    for model in ("alice_lstm_dynamic", "alice_lstm_cellular"):
        scheduler = c.metadata(model).scheduler
        assert scheduler == model.rsplit("_", 1)[1], (model, scheduler)
        results = {}

        def run(i, model=model):
            results[i] = tokens(list(c.generate(model, want["prompt"], max_tokens=200)))
        threads = [threading.Thread(target=run, args=(i,)) for i in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for i in range(3):
            assert results.get(i) == want["greedy_ids"], (model, i)
    started = first_steps("alice_lstm_cellular") - before
    assert started == 3, started


def concurrent_generations_equal_keras(c):
    # Side by side the generations share each step's engine call; each still gets its own loop.
    results, errors = {}, []

    def run(i, model):
        try:
            results[i] = tokens(list(c.generate(model, EXPECTED[model]["prompt"],
                                                max_tokens=200)))
        except Exception as e:  # noqa: BLE001
            errors.append(e)
    models = [m for m in EXPECTED for _ in range(6)]
    threads = [threading.Thread(target=run, args=(i, m)) for i, m in enumerate(models)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for i, m in enumerate(models):
        assert results[i] == EXPECTED[m]["greedy_ids"], (i, m)


def seeded_sampling_reproducible(c):
    for model, want in EXPECTED.items():
        args = dict(max_tokens=50, temperature=0.8, top_k=10, top_p=0.95, n=3)
        a = list(c.generate(model, want["prompt"], seed=7, **args))
        b = list(c.generate(model, want["prompt"], seed=7, **args))
        d = list(c.generate(model, want["prompt"], seed=8, **args))
        assert a == b, model
        assert [tokens(a, s) for s in range(3)] != [tokens(d, s) for s in range(3)], model
        assert tokens(a, 0) != tokens(a, 1), model  # samples are seeded apart
        for s in range(3):
            assert len(tokens(a, s)) == 50 and finish(a, s)["finish"] == "LENGTH"


def chi2_bound(df, z=3.29):
    """The chi-square quantile at 1 - 5e-4 (Wilson-Hilferty), df degrees of freedom."""
    return df * (1 - 2 / (9 * df) + z * math.sqrt(2 / (9 * df))) ** 3


def first_step_frequencies_match_softmax(c):
    for model, want in EXPECTED.items():
        p = np.array(want["first_step_probs"])
        counts = np.zeros(len(p))
        draws = 0
        for seed in range(40):  # 40 x 64 samples, fixed seeds: a deterministic test
            for e in c.generate(model, want["prompt_ids"], max_tokens=1, temperature=1.0,
                                seed=seed, n=64):
                if "id" in e:
                    counts[e["id"]] += 1
                    draws += 1
        expected = p * draws
        big = expected >= 5  # tokens expected fewer than 5 times are pooled into one bin
        obs = np.append(counts[big], counts[~big].sum())
        exp = np.append(expected[big], expected[~big].sum())
        keep = exp > 0
        chi2 = float((((obs - exp) ** 2)[keep] / exp[keep]).sum())
        df = int(keep.sum()) - 1
        assert draws == 40 * 64 and chi2 < chi2_bound(df), (model, chi2, df, chi2_bound(df))
        print(f"{model}: chi2 {chi2:.1f} over {df} df (bound {chi2_bound(df):.1f})")


def refused(c, model, prompt, code, words, **kw):
    try:
        list(c.generate(model, prompt, **kw))
    except RnnServeError as e:
        assert e.code.name == code and all(w in str(e) for w in words), (e, words)
        return
    raise AssertionError(f"accepted: {model} {prompt!r} {kw}")


def bad_requests_refused(c):
    v = EXPECTED["alice_lstm"]["vocab_size"]
    refused(c, "alice_lstm", [1, v + 3], "INVALID_ARGUMENT", ["prompt_ids[1]", f"[0, {v})"])
    refused(c, "alice_lstm", [], "INVALID_ARGUMENT", ["prompt is empty"])
    refused(c, "alice_lstm", "", "INVALID_ARGUMENT", ["prompt is empty"])
    refused(c, "alice_lstm", "Alice~", "INVALID_ARGUMENT", ["'~'", "vocab.json"])
    refused(c, "alice_window", "Alice was beginning to", "INVALID_ARGUMENT",
            ["22 tokens", "window of 16"])
    refused(c, "alice_lstm", "Alice", "INVALID_ARGUMENT", ["max_tokens is 5000", "1 to 4096"],
            max_tokens=5000)
    refused(c, "alice_lstm", "Alice", "INVALID_ARGUMENT", ["max_tokens is 0"], max_tokens=0)
    refused(c, "alice_lstm", "Alice", "INVALID_ARGUMENT", ["temperature"], temperature=-1)
    refused(c, "alice_lstm", "Alice", "INVALID_ARGUMENT", ["n is 65"], n=65)
    refused(c, "waveform_lstm", [1, 2], "FAILED_PRECONDITION",
            ["waveform_lstm cannot generate"])
    refused(c, "no_such_model", [1], "NOT_FOUND", ["no_such_model"])


def stop_strings_and_ids_end_samples(c):
    want = EXPECTED["alice_lstm"]
    text = want["greedy_text"]
    stop = text[5:9]
    events = list(c.generate("alice_lstm", want["prompt"], max_tokens=200, stop=[stop]))
    got = "".join(e["text"] for e in events if "id" in e)
    assert got == text[:9] and finish(events)["finish"] == "STOP", (got, events[-1])
    stop_id = want["greedy_ids"][3]
    events = list(c.generate("alice_lstm", want["prompt"], max_tokens=200, stop_ids=[stop_id]))
    first = want["greedy_ids"].index(stop_id)
    assert tokens(events) == want["greedy_ids"][:first], events
    assert finish(events) == {"sample": 0, "finish": "STOP", "tokens": first}


def cancelled_mid_stream_then_serves(c):
    want = EXPECTED["alice_lstm"]
    for _ in range(3):
        gen = c.generate("alice_lstm", want["prompt"], max_tokens=4000, temperature=1.0)
        got = [next(gen) for _ in range(5)]
        assert len(got) == 5
        gen.close()  # cancels the call
    greedy_equals_keras(c)


def cli_streams_keras_greedy_text(c):
    want = EXPECTED["alice_lstm"]
    p = subprocess.run([CLI, "generate", "--server", ADDRESS, "--model", "alice_lstm",
                        "--prompt", want["prompt"], "--max-tokens", "200", "--temperature", "0"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout == want["greedy_text"] + "\n", p.stdout
    assert "sample 0: length after 200 tokens" in p.stderr, p.stderr
    p = subprocess.run([CLI, "generate", "--server", ADDRESS, "--model", "alice_window",
                        "--prompt", "Alice was beginning to"], capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 1 and "INVALID_ARGUMENT" in p.stderr, (p.returncode, p.stderr)


def max_generations_bounds_generate():
    """A second server with --max-generations 1: a Generate past the bound is
    RESOURCE_EXHAUSTED naming it; once the first ends, the next one runs."""
    with server_process.running_server(SERVER, repo.name, extra=(
            "--max-generations", "1")) as address:
        c = Client(address, timeout=120)
        want = EXPECTED["alice_lstm"]
        first = c.generate("alice_lstm", want["prompt"], max_tokens=4000, temperature=1.0)
        next(first)
        refused(c, "alice_lstm", want["prompt"], "RESOURCE_EXHAUSTED",
                ["--max-generations=1"], max_tokens=3)
        first.close()
        for _ in range(100):  # the cancelled stream closes when its handler sees it
            try:
                got = tokens(list(c.generate("alice_lstm", want["prompt"], max_tokens=200)))
                break
            except RnnServeError as e:
                assert e.code.name == "RESOURCE_EXHAUSTED", e
                time.sleep(0.05)
        assert got == want["greedy_ids"]


def more_generations_than_server_threads_complete():
    """A third server with 4 gRPC threads (pollers included): 12 generations are open at once,
    each holding its first tokens before any reads on (a synchronous handler would hold a
    thread each), and all complete with Keras's greedy tokens."""
    with server_process.running_server(SERVER, repo.name, extra=(
            "--grpc-max-threads", "4", "--max-streams", "2")) as address:
        c = Client(address, timeout=120)
        want = EXPECTED["alice_lstm"]
        count, tokens_each, samples = 12, 2000, 4
        all_open = threading.Barrier(count + 1, timeout=60)
        results, errors = {}, []

        def run(i):
            try:
                gen = c.generate("alice_lstm", want["prompt"], max_tokens=tokens_each, n=samples)
                events = [next(gen)]
                all_open.wait()
                events.extend(gen)
                results[i] = events
            except Exception as e:  # noqa: BLE001
                errors.append(repr(e))
                all_open.abort()
        threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
        for t in threads:
            t.start()
        all_open.wait()  # every generation has streamed its first tokens
        for t in threads:
            t.join()
        assert not errors, errors
        for i in range(count):
            for s in range(samples):
                got = tokens(results[i], s)
                assert len(got) == tokens_each and got[:200] == want["greedy_ids"], (i, s)
                assert finish(results[i], s)["finish"] == "LENGTH"


def generations_count_against_the_byte_budget():
    """A second server with a byte budget of 8000: a Generate whose prompt's ids for its
    samples (8 bytes each) do not fit is RESOURCE_EXHAUSTED naming the budget; a small one runs."""
    with server_process.running_server(SERVER, repo.name, extra=(
            "--max-inflight-bytes", "8000")) as address:
        c = Client(address, timeout=120)
        want = EXPECTED["alice_lstm"]
        refused(c, "alice_lstm", want["prompt_ids"] * 4, "RESOURCE_EXHAUSTED",
                ["--max-inflight-bytes=8000"], max_tokens=3, n=64)
        got = tokens(list(c.generate("alice_lstm", want["prompt"], max_tokens=200)))
        assert got == want["greedy_ids"]


CASES = [greedy_equals_keras, concurrent_generations_equal_keras,
         every_scheduler_gives_keras_greedy, seeded_sampling_reproducible,
         first_step_frequencies_match_softmax, bad_requests_refused,
         stop_strings_and_ids_end_samples, cancelled_mid_stream_then_serves,
         cli_streams_keras_greedy_text]

repo = tempfile.TemporaryDirectory(prefix="generation_repo_")
shutil.copytree(os.path.join(FIXTURES, "repo"), repo.name, dirs_exist_ok=True)
shutil.copytree(os.path.join(ROOT, "models/examples/waveform_lstm"),
                os.path.join(repo.name, "waveform_lstm"))
for suffix, batching in (("dynamic", "dynamic_batching {}"),
                         ("cellular", "cellular_batching { max_active_sequences: 8 }")):
    d = os.path.join(repo.name, f"alice_lstm_{suffix}")
    shutil.copytree(os.path.join(FIXTURES, "repo/alice_lstm"), d)
    with open(os.path.join(d, "config.pbtxt")) as f:
        text = f.read().replace('"alice_lstm"', f'"alice_lstm_{suffix}"')
    with open(os.path.join(d, "config.pbtxt"), "w") as f:
        f.write(text + batching + "\n")
only = set(sys.argv[4:])
METRICS_PORT = server_process.free_port()
with server_process.running_server(SERVER, repo.name,
                                   extra=("--metrics-port", str(METRICS_PORT))) as address:
    ADDRESS = address
    c = Client(address, timeout=120)
    for case in CASES:
        if only and case.__name__ not in only:
            continue
        case(c)
        print(f"{case.__name__}: ok", flush=True)
for case in (max_generations_bounds_generate, more_generations_than_server_threads_complete,
             generations_count_against_the_byte_budget):
    if not only or case.__name__ in only:
        case()
        print(f"{case.__name__}: ok", flush=True)
