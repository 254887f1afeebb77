#!/usr/bin/env python3
"""Side-by-side CPU timings: rnnserve's CPU engine, onnxruntime and TensorFlow/Keras, on the
same weights and inputs, in one run. Driven by bench/cpu_peers.sh (which builds the binary).

For every shape: random weights in the canonical layout go to a case file that our bench
binary reads; the same weights are converted into an ONNX LSTM/GRU node (onnxruntime) and a
Keras layer (TensorFlow backend). Each system runs the whole sequence batch REPS times after
warm-up; the median is reported. The three outputs are checked to agree before timing counts.
"""
import argparse
import datetime
import os
import platform
import subprocess
import sys
import tempfile
import time

import numpy as np

SHAPES = [  # (cell, B, T, I, H)
    ("lstm", 1, 100, 256, 256), ("lstm", 1, 100, 512, 512), ("lstm", 1, 100, 1024, 1024),
    ("lstm", 8, 100, 512, 512), ("lstm", 64, 100, 512, 512), ("lstm", 32, 50, 64, 128),
    ("gru", 1, 100, 256, 256), ("gru", 1, 100, 512, 512), ("gru", 1, 100, 1024, 1024),
    ("gru", 8, 100, 512, 512), ("gru", 64, 100, 512, 512), ("gru", 32, 50, 64, 128),
]


def cpu_seconds(who=None):
    import resource
    r = resource.getrusage(resource.RUSAGE_SELF if who is None else who)
    return r.ru_utime + r.ru_stime


def median_ms(fn, reps):
    """Median wall ms, and CPU ms (all threads, user + sys) per run."""
    for _ in range(3):
        fn()
    times = []
    c0 = cpu_seconds()
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return float(np.median(times)), (cpu_seconds() - c0) / reps * 1e3


def make_case(cell, B, T, I, H, rng):
    G = 4 if cell == "lstm" else 3
    s = 1.0 / np.sqrt(H)
    return dict(W=rng.uniform(-s, s, (G * H, I)).astype(np.float32),
                R=rng.uniform(-s, s, (G * H, H)).astype(np.float32),
                bW=rng.uniform(-s, s, G * H).astype(np.float32),
                bR=rng.uniform(-s, s, G * H).astype(np.float32),
                x=rng.standard_normal((B, T, I)).astype(np.float32))


def blocks(a, order, H):
    return np.concatenate([a[i * H:(i + 1) * H] for i in order], axis=0)


def onnx_model(cell, c):
    """The case as one ONNX LSTM/GRU node, X [T, B, I] -> Y [T, 1, B, H]."""
    from onnx import TensorProto, helper
    B, T, I = c["x"].shape
    H = c["R"].shape[1]
    order = [0, 3, 1, 2] if cell == "lstm" else [1, 0, 2]  # canonical -> ONNX i,o,f,c / z,r,h
    W = blocks(c["W"], order, H)[None]
    R = blocks(c["R"], order, H)[None]
    Bias = np.concatenate([blocks(c["bW"], order, H), blocks(c["bR"], order, H)])[None]
    inits = [helper.make_tensor(n, TensorProto.FLOAT, v.shape, v.ravel())
             for n, v in (("W", W), ("R", R), ("B", Bias))]
    attrs = dict(hidden_size=H)
    if cell == "gru":
        attrs["linear_before_reset"] = 1
    node = helper.make_node(cell.upper(), ["X", "W", "R", "B"], ["Y"], **attrs)
    graph = helper.make_graph([node], "peer", [
        helper.make_tensor_value_info("X", TensorProto.FLOAT, [T, B, I])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], ir_version=9)


def ort_session_runner(model_bytes, c, threads):
    """Runs an ONNX model made by onnx_model (or a quantised copy of it) on the case's input."""
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    sess = ort.InferenceSession(model_bytes, so, providers=["CPUExecutionProvider"])
    xt = np.ascontiguousarray(np.transpose(c["x"], (1, 0, 2)))
    run = lambda: sess.run(None, {"X": xt})[0]
    out = lambda: np.transpose(run()[:, 0], (1, 0, 2))  # [T, 1, B, H] -> [B, T, H]
    return run, out


def ort_runner(cell, c, threads):
    return ort_session_runner(onnx_model(cell, c).SerializeToString(), c, threads)


def keras_runner(cell, c):
    import keras
    import tensorflow as tf
    B, T, I = c["x"].shape
    H = c["R"].shape[1]
    if cell == "lstm":
        layer = keras.layers.LSTM(H, return_sequences=True)
        layer.build((B, T, I))
        layer.set_weights([c["W"].T, c["R"].T, c["bW"] + c["bR"]])
    else:
        swap = lambda a: np.concatenate([a[H:2 * H], a[:H], a[2 * H:]])  # r,z,n -> z,r,h
        layer = keras.layers.GRU(H, return_sequences=True, reset_after=True)
        layer.build((B, T, I))
        layer.set_weights([swap(c["W"]).T, swap(c["R"]).T, np.stack([swap(c["bW"]),
                                                                     swap(c["bR"])])])
    x = tf.constant(c["x"])
    fn = tf.function(lambda v: layer(v, training=False))
    run = lambda: fn(x).numpy()
    return run, run


def ours(binary, cell, path, reps, threads, dump=None, weights="fp32"):
    """Median wall ms, CPU ms per run (from two runs of different lengths, so loading the case
    and packing the weights cancel out), and bytes per compiled instance."""
    import resource
    results, cpu = [], []
    for n in (reps, 2 * reps):
        env = dict(os.environ)
        if dump:
            env["RNNSERVE_BENCH_DUMP"] = dump
        c0 = cpu_seconds(resource.RUSAGE_CHILDREN)
        out = subprocess.run([binary, "--case", path, "--cell", cell, "--reps", str(n),
                              "--threads", str(threads), "--weights", weights], check=True, capture_output=True,
                             text=True, env=env).stdout
        cpu.append(cpu_seconds(resource.RUSAGE_CHILDREN) - c0)
        results.append(dict(kv.split("=") for kv in out.split()))
    fields = results[1]
    return (float(fields["median_ms"]), (cpu[1] - cpu[0]) / reps * 1e3, int(fields["bytes"]))


NUMPY_GEMM = """
import resource, numpy as np
def cpu():
    return resource.getrusage(resource.RUSAGE_SELF).ru_utime
for m, n, k in [(6400, 2048, 512), (64, 1024, 512), (1, 1024, 512)]:
    a = np.random.rand(m, k).astype(np.float32); b = np.random.rand(k, n).astype(np.float32)
    a @ b
    reps = 3 if m > 1000 else 300
    t = cpu()
    for _ in range(reps):
        a @ b
    print(f"{m} {n} {k} {2 * m * n * k * reps / (cpu() - t) / 1e9:.1f}")
"""


def gemm_table(binary):
    """Single-threaded GEMM GFLOP/s: our panel GEMM, Eigen, and OpenBLAS (numpy's, one thread,
    OPENBLAS_CORETYPE unset so it picks its native kernel), in CPU time."""
    ours = subprocess.run([binary, "--gemm"], check=True, capture_output=True, text=True).stdout
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")}
    env["OPENBLAS_NUM_THREADS"] = "1"
    blas = subprocess.run([sys.executable, "-c", NUMPY_GEMM], check=True, capture_output=True,
                          text=True, env=env).stdout.split("\n")
    rows = []
    for line, b in zip(ours.strip().split("\n"), blas):
        f = dict(kv.split("=") for kv in line.split()[1:])
        rows.append((int(f["m"]), int(f["n"]), int(f["k"]), float(f["ours_gflops"]),
                     float(f["eigen_gflops"]), float(b.split()[3])))
    return rows


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--binary", required=True)
    p.add_argument("--reps", type=int, default=15)
    p.add_argument("--rounds", type=int, default=5, help="paired rounds of ours, ort and TF")
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--results", default="")
    p.add_argument("--command", default="bench/cpu_peers.sh")
    p.add_argument("--only", default="", help="e.g. lstm: only shapes of that cell")
    p.add_argument("--max-hidden", type=int, default=0,
                   help="only shapes of at most this many units (0: all)")
    p.add_argument("--build", default="", help="how the binary was built, for the results")
    args = p.parse_args()

    import onnxruntime
    import tensorflow as tf
    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    rng = np.random.default_rng(3)
    load_before = os.getloadavg()
    bw = subprocess.run([args.binary, "--bandwidth", "--threads", str(args.threads)],
                        check=True, capture_output=True, text=True).stdout
    read_gbps = float(bw.strip().split("=")[1])
    gemm = gemm_table(args.binary)
    for m, n, k, o, e, b in gemm:
        print(f"gemm [{m}x{k}]x[{k}x{n}] 1 thread: ours {o:.1f}, Eigen {e:.1f}, OpenBLAS {b:.1f} GFLOP/s")
    rows = []
    header = (f"{'cell':5} {'B':>3} {'T':>4} {'I':>5} {'H':>5} | {'ours ms':>8} {'ort ms':>8} "
              f"{'tf ms':>8} | {'x ort':>6} {'x tf':>6} | cpu ms {'ours':>7} {'ort':>7} {'tf':>7} "
              f"| {'max|diff|':>9} {'bytes':>10}")
    print(f"read bandwidth {read_gbps:.1f} GB/s, {args.threads} threads")
    print(header)
    with tempfile.TemporaryDirectory() as tmp:
        for cell, B, T, I, H in SHAPES:
            if (args.only and cell != args.only) or (args.max_hidden and H > args.max_hidden):
                continue
            c = make_case(cell, B, T, I, H, rng)
            path = os.path.join(tmp, "case.npz")
            np.savez(path, **c)
            dump = os.path.join(tmp, "ours.npz")
            ort_run, ort_out = ort_runner(cell, c, args.threads)
            tf_run, tf_out = keras_runner(cell, c)
            # Paired rounds: each round times ours, then onnxruntime, then TF back to back, so
            # a change in the shared machine's speed hits all three; a ratio is the median of
            # the rounds' ratios, a time the median of the rounds' medians.
            rounds = []
            for _ in range(args.rounds):
                o = ours(args.binary, cell, path, args.reps, args.threads, dump)
                rounds.append((o, median_ms(ort_run, args.reps), median_ms(tf_run, args.reps)))
            med = lambda v: float(np.median(v))
            ours_ms, ours_cpu = med([o[0] for o, _, _ in rounds]), med([o[1] for o, _, _ in rounds])
            nbytes = rounds[0][0][2]
            ort_ms, ort_cpu = med([r[0] for _, r, _ in rounds]), med([r[1] for _, r, _ in rounds])
            tf_ms, tf_cpu = med([t[0] for _, _, t in rounds]), med([t[1] for _, _, t in rounds])
            x_ort = med([r[0] / o[0] for o, r, _ in rounds])
            x_tf = med([t[0] / o[0] for o, _, t in rounds])
            y = np.load(dump)["y"]
            diff = max(float(np.max(np.abs(y - ort_out()))), float(np.max(np.abs(y - tf_out()))))
            row = (cell, B, T, I, H, ours_ms, ort_ms, tf_ms, x_ort, x_tf,
                   diff, nbytes, ours_cpu, ort_cpu, tf_cpu)
            rows.append(row)
            print(f"{cell:5} {B:>3} {T:>4} {I:>5} {H:>5} | {ours_ms:8.2f} {ort_ms:8.2f} "
                  f"{tf_ms:8.2f} | {row[8]:6.2f} {row[9]:6.2f} | cpu ms {ours_cpu:7.1f} "
                  f"{ort_cpu:7.1f} {tf_cpu:7.1f} | {diff:9.2e} {nbytes:>10}", flush=True)
    load_after = os.getloadavg()
    if not args.results:
        return 0
    cpu = platform.processor()
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    floor_ms = lambda cell, H, T: T * (4 if cell == "lstm" else 3) * H * H * 4 / (read_gbps * 1e9) * 1e3
    with open(args.results, "w") as f:
        f.write(f"# CPU engine vs onnxruntime and TensorFlow/Keras — {datetime.date.today()}\n\n")
        f.write(f"- Machine: {cpu}, {os.cpu_count()} cores, {args.threads} threads per system\n")
        f.write(f"- Command: `{args.command}`\n")
        if args.build:
            f.write(f"- Build: {args.build}\n")
        f.write(f"- Peers: onnxruntime {onnxruntime.__version__} (intra_op_num_threads="
                f"{args.threads}), TensorFlow {tf.__version__} with Keras layers "
                f"(tf.function, intra-op threads {args.threads})\n")
        f.write(f"- Load average (1/5/15 min) before: {load_before[0]:.2f}/{load_before[1]:.2f}/"
                f"{load_before[2]:.2f}, after: {load_after[0]:.2f}/{load_after[1]:.2f}/"
                f"{load_after[2]:.2f} (the machine is shared; other builds may have run)\n")
        f.write(f"- {args.rounds} paired rounds (ours, onnxruntime, TF back to back); each "
                f"round's time is a median of {args.reps} runs; a time below is the median of the "
                f"rounds, a speed-up the median of the rounds' speed-ups.\n")
        f.write(f"- Each median of {args.reps} runs follows 3 warm-ups, whole batch, return_sequences; "
                f"the same random weights and input for all three; max|diff| is the largest "
                f"difference of our output from either peer's.\n")
        f.write("- CPU ms: user + sys time of all the system's threads per run (spin-waiting "
                "included), the work a quiet machine turns into wall time.\n")
        f.write(f"- Read bandwidth ({args.threads} threads, 1 GiB buffer): {read_gbps:.1f} GB/s. "
                f"Memory floor = T x (recurrent weight bytes) / bandwidth, the time to read R "
                f"once per step from memory.\n\n")
        f.write("| cell | B | T | I | H | ours ms | onnxruntime ms | TF/Keras ms | "
                "x onnxruntime | x TF | CPU ms ours | CPU ms onnxruntime | CPU ms TF | "
                "floor ms | ours/floor | max abs diff | bytes/instance |\n")
        f.write("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
        for (cell, B, T, I, H, o, r, t, xr, xt, diff, nb, oc, rc, tc) in rows:
            fl = floor_ms(cell, H, T)
            f.write(f"| {cell} | {B} | {T} | {I} | {H} | {o:.2f} | {r:.2f} | {t:.2f} | "
                    f"{xr:.2f} | {xt:.2f} | {oc:.1f} | {rc:.1f} | {tc:.1f} | {fl:.2f} | "
                    f"{o / fl:.2f} | {diff:.1e} | {nb} |\n")
        f.write("\n## GEMM back-end (one thread, GFLOP/s in CPU time)\n\n")
        f.write("| GEMM [m x k] x [k x n] | ours (panel GEMM) | Eigen 3.4 | OpenBLAS |\n")
        f.write("|---|---|---|---|\n")
        for m, n, k, o, e, b in gemm:
            f.write(f"| [{m} x {k}] x [{k} x {n}] | {o:.1f} | {e:.1f} | {b:.1f} |\n")
        f.write("\nOpenBLAS here is the build numpy ships (run with OPENBLAS_CORETYPE and "
                "OPENBLAS_L2_SIZE unset for that command only, OPENBLAS_NUM_THREADS=1).\n")
    print(f"wrote {args.results}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
