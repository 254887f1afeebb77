#!/usr/bin/env python3
"""Real Keras models on the CPU: rnnserve's engine (no gRPC) against TF/Keras predict_on_batch
and onnxruntime, on the same file's weights and the same inputs, in paired rounds. Driven by
bench/cpu_real_peers.sh (which builds bench/cpu_real_bench).

Models: the real Keras files of ../shared/models/keras-real (loaded as
models/scripts/make_keras_fixtures.py loads them, with the Keras line that reads each) and the
repository's Keras fixtures with the same layer structure (tests/fixtures/keras). The ONNX peer
is a same-weights conversion built here from the loaded Keras model: the recurrent layers as
ONNX LSTM/GRU nodes (time-major, Keras gate order and activations, hard_sigmoid's alpha of the
Keras line, GRU reset_after as linear_before_reset), Dense as MatMul + Add. Before timing
counts, the three outputs are checked to agree.

Each round times ours (cpu_real_bench's median of --reps runs), then onnxruntime, then Keras,
back to back, so a change in a shared machine's load hits all three; a ratio is the median of
the rounds' ratios (peer time / ours).
"""
import argparse
import datetime
import importlib.util
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
REAL = os.environ.get("RNNSERVE_KERAS_REAL",
                      os.path.join(ROOT, "..", "shared", "models", "keras-real"))
MODELS = [  # name, path, Keras line
    ("aind_nlp_gru_timedistributed", os.path.join(REAL, "aind_nlp_gru_timedistributed.h5"), 2),
    ("arabic_sentiment_lstm", os.path.join(REAL, "arabic_sentiment_lstm.h5"), 2),
    ("elec_gru3_reset_after", os.path.join(REAL, "elec_gru3_reset_after.h5"), 2),
    ("k3_sensor_bilstm", os.path.join(REAL, "k3_sensor_bilstm.h5"), 3),
    ("k3_weather_lstm2", os.path.join(REAL, "k3_weather_lstm2.keras"), 3),
] + [(f"fixture:{n}", os.path.join(ROOT, "tests", "fixtures", "keras", n, f), line)
     for n, f, line in [
    ("Keras2StackedLstm", "model.h5", 2),
    ("Keras2GruResetAfterTrue", "model.h5", 2),
    ("Keras2GruResetAfterFalse", "model.h5", 2),
    ("Keras2BidirectionalLstmConcat", "model.h5", 2),
    ("Keras3StackedBidirectionalTimeDistributed", "model.keras", 3),
]]


def fixture_loader():
    path = os.path.join(ROOT, "models", "scripts", "make_keras_fixtures.py")
    spec = importlib.util.spec_from_file_location("make_keras_fixtures", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def median_ms(fn, reps):
    for _ in range(3):
        fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return float(np.median(times))


# ------------------------------------------------------------------- Keras -> same-weights ONNX
def onnx_of(model, line, T, F):
    """The Keras model as an ONNX graph X [B, T, F] -> Y, with the model's own weights."""
    from onnx import TensorProto, helper
    nodes, inits = [], []
    count = [0]

    def name(prefix):
        count[0] += 1
        return f"{prefix}{count[0]}"

    def const(a, prefix="w"):
        n = name(prefix)
        a = np.asarray(a, dtype=np.float32)
        inits.append(helper.make_tensor(n, TensorProto.FLOAT, a.shape, a.ravel()))
        return n

    def shape_const(v):
        n = name("s")
        inits.append(helper.make_tensor(n, TensorProto.INT64, [len(v)], v))
        return n

    def op(kind, inputs, **attrs):
        out = name(kind.lower())
        nodes.append(helper.make_node(kind, inputs, [out], **attrs))
        return out

    def act(a):
        n = a if isinstance(a, str) else a.__name__
        table = {"sigmoid": ("Sigmoid", None), "tanh": ("Tanh", None), "relu": ("Relu", None),
                 "hard_sigmoid": ("HardSigmoid", (0.2 if line == 2 else 1 / 6, 0.5)),
                 "linear": (None, None), "softmax": ("Softmax", None)}
        return table[n]

    def rnn(layer, x_tm, reverse=False):
        """One direction of a Keras LSTM/GRU on time-major x; returns (Y [T,1,B,H], Y_h)."""
        cls = layer.__class__.__name__
        H = layer.units
        w = layer.get_weights()
        kernel, rec = w[0], w[1]
        bias = w[2] if len(w) > 2 else np.zeros(kernel.shape[1], np.float32)
        if cls == "LSTM":
            order = [0, 3, 1, 2]  # Keras i,f,c,o -> ONNX i,o,f,c
        else:
            order = [0, 1, 2]  # Keras z,r,h = ONNX z,r,h
        blk = lambda a: np.concatenate([a[..., i * H:(i + 1) * H] for i in order], axis=-1)
        W, R = blk(kernel).T[None], blk(rec).T[None]
        if bias.ndim == 2:
            b = np.concatenate([blk(bias[0]), blk(bias[1])])
        else:
            b = np.concatenate([blk(bias), np.zeros_like(bias)])
        f, fa = act(layer.recurrent_activation)
        g, _ = act(layer.activation)
        acts = [f, g] if cls == "GRU" else [f, g, g]
        attrs = dict(hidden_size=H, activations=acts,
                     direction="reverse" if reverse else "forward")
        if fa:
            attrs["activation_alpha"] = [fa[0]] + [1.0] * (len(acts) - 1)
            attrs["activation_beta"] = [fa[1]] + [0.0] * (len(acts) - 1)
        if cls == "GRU":
            attrs["linear_before_reset"] = 1 if layer.reset_after else 0
        y, yh = name("y"), name("yh")
        nodes.append(helper.make_node(cls, [x_tm, const(W), const(R), const(b[None])], [y, yh],
                                      **attrs))
        return y, yh

    x = "X"
    cur = op("Transpose", [x], perm=[1, 0, 2])  # [T, B, F]
    time_major = True  # cur is [T, B, F] while a sequence; [B, F] after a last output
    seq = True
    for layer in model.layers:
        cls = layer.__class__.__name__
        if cls in ("InputLayer", "Dropout", "SpatialDropout1D"):
            continue
        if cls in ("LSTM", "GRU", "Bidirectional"):
            assert seq and time_major, f"{layer.name}: recurrent layer after a last output"
            merge = "concat"
            if cls == "Bidirectional":
                merge = layer.merge_mode
                inner = [(layer.forward_layer, False), (layer.backward_layer, True)]
                rs = layer.forward_layer.return_sequences
            else:
                inner = [(layer, bool(getattr(layer, "go_backwards", False)))]
                rs = layer.return_sequences
            outs = [rnn(l, cur, rev) for l, rev in inner]
            if rs:
                parts = [op("Squeeze", [y, shape_const([1])]) for y, _ in outs]  # [T, B, H]
            else:
                parts = [op("Squeeze", [yh, shape_const([0])]) for _, yh in outs]  # [B, H]
                seq = False
            if len(parts) == 1:
                cur = parts[0]
            elif merge == "concat":
                cur = op("Concat", parts, axis=-1)
            elif merge == "mul":
                cur = op("Mul", parts)
            else:
                cur = op("Add", parts)
                if merge == "ave":
                    cur = op("Mul", [cur, const(np.float32(0.5))])
                else:
                    assert merge == "sum", merge
            continue
        if cls in ("Dense", "TimeDistributed", "Activation"):
            if time_major and seq:
                cur = op("Transpose", [cur], perm=[1, 0, 2])  # [B, T, F]
                time_major = False
            dense = layer.layer if cls == "TimeDistributed" else layer
            if dense.__class__.__name__ == "Dense":
                w = dense.get_weights()
                cur = op("MatMul", [cur, const(w[0])])
                if len(w) > 1:
                    cur = op("Add", [cur, const(w[1])])
            kind, ab = act(dense.activation)
            if kind == "Softmax":
                cur = op(kind, [cur], axis=-1)
            elif kind:
                cur = op(kind, [cur])
            continue
        raise NotImplementedError(f"{layer.name}: {cls} has no ONNX conversion here")
    if seq and time_major:
        cur = op("Transpose", [cur], perm=[1, 0, 2])
    nodes[-1].output[0] = "Y"
    graph = helper.make_graph(
        nodes, "keras", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [None, T, F])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], ir_version=9)


def ours(binary, model_path, x_path, reps, threads, dump=None):
    cmd = [binary, "--model", model_path, "--input", x_path, "--reps", str(reps), "--threads",
           str(threads)]
    if dump:
        cmd += ["--dump", dump]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    f = dict(kv.split("=", 1) for kv in out.split())
    return float(f["median_ms"]), f["kernels"]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--binary", required=True)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--batches", default="1,32")
    p.add_argument("--reps", type=int, default=30)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--only", default="", help="substring of the model names to run")
    p.add_argument("--results", default="")
    p.add_argument("--command", default="bench/cpu_real_peers.sh")
    p.add_argument("--no-real", action="store_true", help="the repository's fixtures only")
    args = p.parse_args()

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import onnxruntime as ort
    import tensorflow as tf
    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    fx = fixture_loader()
    rng = np.random.default_rng(41)
    load_before = os.getloadavg()
    rows = []
    print(f"{'model':50} {'B':>3} | {'ours ms':>8} {'ort ms':>8} {'keras ms':>9} | "
          f"{'x ort':>6} {'x keras':>7} | {'max|diff|':>9} kernels", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        for mname, path, line in MODELS:
            if (args.only and args.only not in mname) or (args.no_real and ":" not in mname):
                continue
            if not os.path.exists(path):
                print(f"{mname}: {path} is absent; skipped", flush=True)
                continue
            k = fx.keras_line(line)
            model = fx.load_real(k, line, path)
            _, T, F = [int(d) if d is not None else None for d in model.inputs[0].shape]
            onnx_bytes = onnx_of(model, line, T, F).SerializeToString()
            so = ort.SessionOptions()
            so.intra_op_num_threads = args.threads
            so.inter_op_num_threads = 1
            sess = ort.InferenceSession(onnx_bytes, so, providers=["CPUExecutionProvider"])
            for B in [int(b) for b in args.batches.split(",")]:
                x = rng.standard_normal((B, T, F)).astype(np.float32)
                x_path = os.path.join(tmp, "x.npy")
                np.save(x_path, x)
                dump = os.path.join(tmp, "ours.npy")
                ort_run = lambda: sess.run(None, {"X": x})[0]
                keras_run = lambda: model.predict_on_batch(x)
                _, kernels = ours(args.binary, path, x_path, 3, args.threads, dump)
                y = np.load(dump)
                diff = max(float(np.max(np.abs(y - ort_run()))),
                           float(np.max(np.abs(y - np.asarray(keras_run())))))
                rounds = []
                for _ in range(args.rounds):
                    o, _ = ours(args.binary, path, x_path, args.reps, args.threads)
                    rounds.append((o, median_ms(ort_run, args.reps),
                                   median_ms(keras_run, args.reps)))
                med = lambda v: float(np.median(v))
                o_ms, r_ms, k_ms = (med([r[i] for r in rounds]) for i in range(3))
                x_ort = med([r[1] / r[0] for r in rounds])
                x_keras = med([r[2] / r[0] for r in rounds])
                rows.append((mname, B, T, F, o_ms, r_ms, k_ms, x_ort, x_keras, diff, kernels))
                print(f"{mname:50} {B:>3} | {o_ms:8.3f} {r_ms:8.3f} {k_ms:9.3f} | {x_ort:6.2f} "
                      f"{x_keras:7.2f} | {diff:9.1e} {kernels}", flush=True)
    load_after = os.getloadavg()
    if not args.results:
        return 0
    cpu = "unknown"
    for l in open("/proc/cpuinfo"):
        if l.startswith("model name"):
            cpu = l.split(":", 1)[1].strip()
            break
    with open(args.results, "w") as f:
        f.write(f"# Real Keras models on the CPU engine vs onnxruntime and Keras — "
                f"{datetime.date.today()}, {args.threads} thread(s)\n\n")
        f.write(f"- Machine: {cpu} (/proc/cpuinfo), {os.cpu_count()} cores; {args.threads} "
                f"thread(s) per system (ours: --threads; onnxruntime: intra_op_num_threads; "
                f"TF: intra-op threads)\n")
        commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                                capture_output=True, text=True).stdout.strip()
        f.write(f"- Commit: {commit or 'unknown'}\n")
        f.write(f"- Command: `{args.command}` (real files from {os.path.normpath(REAL)}, "
                f"RNNSERVE_KERAS_REAL)\n")
        f.write(f"- Peers: onnxruntime {ort.__version__} on a same-weights ONNX conversion "
                f"(LSTM/GRU nodes, MatMul+Add; bench/cpu_real_peers.py), TensorFlow "
                f"{tf.__version__} `predict_on_batch` (Keras 2 files through tf_keras, Keras 3 "
                f"files through keras)\n")
        f.write(f"- Load average (1/5/15 min) before: {load_before[0]:.2f}/{load_before[1]:.2f}/"
                f"{load_before[2]:.2f}, after: {load_after[0]:.2f}/{load_after[1]:.2f}/"
                f"{load_after[2]:.2f}. The machine is shared with other engineers' builds: "
                f"{args.rounds} paired rounds (ours, onnxruntime, Keras back to back), each a "
                f"median of {args.reps} runs after 3 warm-ups; a time is the median of the "
                f"rounds, a ratio (peer ms / ours) the median of the rounds' ratios.\n")
        f.write("- kernels: the recurrent layers' split at this batch (engine placements).\n")
        f.write("- max|diff|: our first output against either peer's.\n\n")
        f.write("| model | B | T | F | ours ms | onnxruntime ms | Keras ms | x onnxruntime | "
                "x Keras | max abs diff | kernels |\n")
        f.write("|---|---|---|---|---|---|---|---|---|---|---|\n")
        for (m, B, T, F, o, r, kk, xr, xk, d, kern) in rows:
            f.write(f"| {m} | {B} | {T} | {F} | {o:.3f} | {r:.3f} | {kk:.3f} | {xr:.2f} | "
                    f"{xk:.2f} | {d:.1e} | {kern} |\n")
    print(f"wrote {args.results}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
