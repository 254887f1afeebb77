#!/usr/bin/env python3
"""Reduced-precision CPU weights, timed in one run on the same weights and inputs:

- BF16 against our own FP32 (LSTM B=1 T=100, H=512 and 1024; target >= 1.7x; with the amx kernel
  set, at B >= 8 H=512, target >= 3x);
- INT8 against onnxruntime's quantised LSTM, made by onnxruntime.quantization.quantize_dynamic
  (weights QInt8) from the FP32 ONNX model of bench/cpu_peers.py (LSTM T=100 H=512 at B=1, 8
  and 64, and H=1024 at B=1; target >= 1.3x; with the amx kernel set, at B >= 8, >= 2x).

The kernel set is the process's (RNNSERVE_CPU_KERNELS, else the best the CPU has); the results
name the one that ran.

Paired rounds: each round times our FP32, BF16 and INT8, onnxruntime FP32 and onnxruntime
INT8 back to back, so a change in the shared machine's speed hits all of them; a time is the
median of the rounds' medians, a speed-up the median of the rounds' speed-ups. Each output is
compared with onnxruntime's FP32 output (max abs diff). Driven by bench/cpu_quant_peers.sh.
Needs numpy, onnx and onnxruntime (pip); CI does not run it.
"""
import argparse
import datetime
import os
import subprocess
import sys
import tempfile

import numpy as np

from cpu_peers import make_case, median_ms, onnx_model, ort_session_runner, ours

SHAPES = [  # (B, T, I, H): LSTM
    (1, 100, 512, 512), (1, 100, 1024, 1024), (8, 100, 512, 512), (64, 100, 512, 512),
]
BF16_TARGET, INT8_TARGET = 1.7, 1.3
AMX_BF16_TARGET, AMX_INT8_TARGET = 3.0, 2.0  # at B >= 8 (issue #41)


def quantised(model, tmp):
    """onnxruntime's dynamic quantisation of the FP32 model; returns its bytes and op types."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic
    src, dst = os.path.join(tmp, "fp32.onnx"), os.path.join(tmp, "int8.onnx")
    onnx.save(model, src)
    quantize_dynamic(src, dst, weight_type=QuantType.QInt8)
    q = onnx.load(dst)
    return q.SerializeToString(), sorted({n.op_type for n in q.graph.node})


def cpu_flags():
    name, flags = "unknown CPU", []
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name") and name == "unknown CPU":
            name = line.split(":", 1)[1].strip()
        if line.startswith("flags"):
            flags = [f for f in line.split(":", 1)[1].split()
                     if f.startswith(("avx", "fma", "amx"))]
            break
    return name, flags


def kernel_set(binary, path, threads):
    """The kernel set the bench binary runs (its kernels= field)."""
    out = subprocess.run([binary, "--case", path, "--cell", "lstm", "--reps", "4", "--threads",
                          str(threads)], check=True, capture_output=True, text=True).stdout
    return dict(kv.split("=") for kv in out.split()).get("kernels", "unknown")


def bench_shape(binary, B, T, I, H, args, tmp, rng):
    c = make_case("lstm", B, T, I, H, rng)
    path = os.path.join(tmp, "case.npz")
    np.savez(path, **c)
    if not args.kernels:
        args.kernels = kernel_set(binary, path, args.threads)
    model = onnx_model("lstm", c)
    q_bytes, q_ops = quantised(model, tmp)
    ort32_run, ort32_out = ort_session_runner(model.SerializeToString(), c, args.threads)
    ort8_run, ort8_out = ort_session_runner(q_bytes, c, args.threads)
    ref = ort32_out()
    rounds, diffs = [], {}
    for _ in range(args.rounds):
        r = {}
        for w in ("fp32", "bf16", "int8"):
            dump = os.path.join(tmp, f"ours_{w}.npz")
            r[w] = ours(binary, "lstm", path, args.reps, args.threads, dump, weights=w)[0]
        r["ort32"] = median_ms(ort32_run, args.reps)[0]
        r["ort8"] = median_ms(ort8_run, args.reps)[0]
        rounds.append(r)
    for w in ("fp32", "bf16", "int8"):
        diffs[w] = float(np.max(np.abs(np.load(os.path.join(tmp, f"ours_{w}.npz"))["y"] - ref)))
    diffs["ort8"] = float(np.max(np.abs(ort8_out() - ref)))
    med = lambda v: float(np.median(v))
    row = dict(B=B, T=T, I=I, H=H, ops=q_ops, diffs=diffs,
               ms={k: med([r[k] for r in rounds]) for k in rounds[0]},
               bf16_x=med([r["fp32"] / r["bf16"] for r in rounds]),
               int8_x_ort8=med([r["ort8"] / r["int8"] for r in rounds]),
               int8_x_fp32=med([r["fp32"] / r["int8"] for r in rounds]),
               fp32_x_ort32=med([r["ort32"] / r["fp32"] for r in rounds]))
    return row


def write_results(path, args, rows, load_before, load_after):
    import onnxruntime
    name, flags = cpu_flags()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    with open(path, "w") as f:
        f.write(f"# CPU reduced-precision weights vs FP32 and onnxruntime's quantised LSTM — "
                f"{datetime.date.today()}\n\n")
        f.write(f"- Machine: {name}, {os.cpu_count()} cores, flags {' '.join(flags)}; "
                f"{args.threads} threads per system\n")
        f.write(f"- Commit: {commit}; command: `{args.command}`; CPU kernel set that ran: "
                f"{args.kernels} (RNNSERVE_CPU_KERNELS="
                f"{os.environ.get('RNNSERVE_CPU_KERNELS', 'unset: the best this CPU has')})\n")
        f.write(f"- Peer: onnxruntime {onnxruntime.__version__} (intra_op_num_threads="
                f"{args.threads}); INT8 peer = `quantize_dynamic(weight_type=QInt8)` of the same "
                f"FP32 ONNX LSTM (ops after quantisation: {', '.join(rows[0]['ops'])})\n")
        f.write(f"- Load average (1/5/15 min) before: {'/'.join(f'{x:.2f}' for x in load_before)}"
                f", after: {'/'.join(f'{x:.2f}' for x in load_after)} (shared machine)\n")
        f.write(f"- {args.rounds} paired rounds (our FP32, BF16, INT8, onnxruntime FP32, INT8 back "
                f"to back), each a median of {args.reps} runs after 3 warm-ups; a time is the "
                f"median of the rounds, a speed-up the median of the rounds' speed-ups. LSTM, "
                f"return_sequences, T=100. max abs diff: largest difference from onnxruntime's FP32 "
                f"output.\n\n")
        amx = args.kernels == "amx"
        f.write("| B | T | I | H | ours FP32 ms | ours BF16 ms | ours INT8 ms | ort FP32 ms | "
                f"ort INT8 ms | BF16 x our FP32 (target {BF16_TARGET}"
                f"{f'; {AMX_BF16_TARGET} at B >= 8' if amx else ''}) | INT8 x ort INT8 (target "
                f"{INT8_TARGET}{f'; {AMX_INT8_TARGET} at B >= 8' if amx else ''}) | "
                "INT8 x our FP32 | FP32 x ort FP32 | max abs diff BF16 | INT8 | ort INT8 |\n")
        f.write("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
        for r in rows:
            m, d = r["ms"], r["diffs"]
            f.write(f"| {r['B']} | {r['T']} | {r['I']} | {r['H']} | {m['fp32']:.2f} | "
                    f"{m['bf16']:.2f} | {m['int8']:.2f} | {m['ort32']:.2f} | {m['ort8']:.2f} | "
                    f"{r['bf16_x']:.2f} | {r['int8_x_ort8']:.2f} | {r['int8_x_fp32']:.2f} | "
                    f"{r['fp32_x_ort32']:.2f} | {d['bf16']:.1e} | {d['int8']:.1e} | "
                    f"{d['ort8']:.1e} |\n")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--binary", required=True)
    p.add_argument("--reps", type=int, default=15)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--results", default="")
    p.add_argument("--command", default="bench/cpu_quant_peers.sh")
    p.add_argument("--shapes", default="", help="e.g. 8x512: only these BxH of SHAPES")
    args = p.parse_args()
    args.kernels = ""
    only = set(args.shapes.split(",")) if args.shapes else None
    rng = np.random.default_rng(3)
    load_before = os.getloadavg()
    rows = []
    print(f"{'B':>3} {'H':>5} | {'fp32':>7} {'bf16':>7} {'int8':>7} {'ort32':>7} {'ort8':>7} ms | "
          f"bf16/fp32 int8/ort8 int8/fp32 fp32/ort32")
    with tempfile.TemporaryDirectory() as tmp:
        for B, T, I, H in SHAPES:
            if only and f"{B}x{H}" not in only:
                continue
            r = bench_shape(args.binary, B, T, I, H, args, tmp, rng)
            rows.append(r)
            m = r["ms"]
            print(f"[{args.kernels}] {B:>3} {H:>5} | {m['fp32']:7.2f} {m['bf16']:7.2f} {m['int8']:7.2f} "
                  f"{m['ort32']:7.2f} {m['ort8']:7.2f} ms | {r['bf16_x']:9.2f} "
                  f"{r['int8_x_ort8']:10.2f} {r['int8_x_fp32']:9.2f} {r['fp32_x_ort32']:10.2f}"
                  f" | diffs {r['diffs']}", flush=True)
    if args.results:
        write_results(args.results, args, rows, load_before, os.getloadavg())
        print(f"wrote {args.results}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
