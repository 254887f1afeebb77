#!/usr/bin/env python3
"""The GPU engine against PyTorch's nn.LSTM / nn.GRU on the same weights, in the same run.

For every shape of issue 5 and every math mode (fp32, tf32, fp16, bf16) this script builds the
PyTorch module with random weights, times it (CUDA events, median of REPS after WARMUP; eagerly
and replayed from a CUDA graph), saves its weights and input, then runs the engine's benchmark
binary (gpu_peers, built from bench/gpu_peers.cc) over all cases and writes a Markdown table.

PyTorch's modes: fp32 turns TF32 off (torch.backends.cudnn.allow_tf32 is on by default, which
would make PyTorch's "FP32" a TF32 run); tf32 turns it on; fp16 / bf16 run the module in that
dtype. Both sides get full-length batch-first input [B, T, I] with I = H.

  python3 bench/gpu_peers.py --binary build/release/bench/gpu_peers --out results.md
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

import numpy as np
import torch

WARMUP, REPS = 20, 60

# name, cell, H, layers, bidirectional, B, T  (I = H)
SHAPES = [
    ("lstm_b1_t10_h32", "lstm", 32, 1, 0, 1, 10),  # bench/server_models' tiny model's LSTM
    ("lstm_b1_t100_h256", "lstm", 256, 1, 0, 1, 100),
    ("lstm_b1_t100_h512", "lstm", 512, 1, 0, 1, 100),
    ("lstm_b1_t100_h1024", "lstm", 1024, 1, 0, 1, 100),
    ("lstm_b2_t100_h512", "lstm", 512, 1, 0, 2, 100),
    ("lstm_b4_t100_h512", "lstm", 512, 1, 0, 4, 100),
    ("lstm_b8_t100_h512", "lstm", 512, 1, 0, 8, 100),
    ("lstm_b8_t100_h1024", "lstm", 1024, 1, 0, 8, 100),
    ("lstm_b16_t100_h512", "lstm", 512, 1, 0, 16, 100),
    ("lstm_b32_t100_h512", "lstm", 512, 1, 0, 32, 100),
    ("lstm_b64_t100_h512", "lstm", 512, 1, 0, 64, 100),
    ("lstm_b64_t100_h1024", "lstm", 1024, 1, 0, 64, 100),
    ("lstm_b256_t100_h1024", "lstm", 1024, 1, 0, 256, 100),
    ("lstm_b1024_t50_h512", "lstm", 512, 1, 0, 1024, 50),
    ("lstm_b64_t100_h512_2l_bidir", "lstm", 512, 2, 1, 64, 100),
    ("lstm_b1_t100_h512_bidir", "lstm", 512, 1, 1, 1, 100),  # both directions, one launch
    ("lstm_b8_t100_h512_bidir", "lstm", 512, 1, 1, 8, 100),
    ("lstm_b1_t100_h1024_bidir", "lstm", 1024, 1, 1, 1, 100),
    ("lstm_b1_t100_h512_2l", "lstm", 512, 2, 0, 1, 100),  # stacked: both layers in one launch
    ("lstm_b4_t100_h512_2l", "lstm", 512, 2, 0, 4, 100),
    ("lstm_b8_t100_h512_2l", "lstm", 512, 2, 0, 8, 100),
    ("lstm_b1_t100_h256_2l", "lstm", 256, 2, 0, 1, 100),
    ("lstm_b1_t100_h256_4l", "lstm", 256, 4, 0, 1, 100),
    ("lstm_b1_t100_h512_3l", "lstm", 512, 3, 0, 1, 100),
    ("lstm_b32_t1500_h256", "lstm", 256, 1, 0, 32, 1500),
    ("lstm_b1_t100_h64", "lstm", 64, 1, 0, 1, 100),
    ("lstm_b1_t100_h128", "lstm", 128, 1, 0, 1, 100),
    ("lstm_b8_t100_h64", "lstm", 64, 1, 0, 8, 100),
    ("lstm_b32_t100_h64", "lstm", 64, 1, 0, 32, 100),
    ("lstm_b256_t100_h64", "lstm", 64, 1, 0, 256, 100),
    ("gru_b1_t10_h32", "gru", 32, 1, 0, 1, 10),
    ("gru_b1_t100_h64", "gru", 64, 1, 0, 1, 100),
    ("gru_b1_t100_h128", "gru", 128, 1, 0, 1, 100),
    ("gru_b64_t100_h64", "gru", 64, 1, 0, 64, 100),
    ("gru_b1_t100_h256", "gru", 256, 1, 0, 1, 100),
    ("gru_b1_t100_h512", "gru", 512, 1, 0, 1, 100),
    ("gru_b1_t100_h1024", "gru", 1024, 1, 0, 1, 100),
    ("gru_b2_t100_h512", "gru", 512, 1, 0, 2, 100),
    ("gru_b4_t100_h512", "gru", 512, 1, 0, 4, 100),
    ("gru_b8_t100_h512", "gru", 512, 1, 0, 8, 100),
    ("gru_b8_t100_h1024", "gru", 1024, 1, 0, 8, 100),
    ("gru_b16_t100_h512", "gru", 512, 1, 0, 16, 100),
    ("gru_b32_t100_h512", "gru", 512, 1, 0, 32, 100),
    ("gru_b64_t100_h512", "gru", 512, 1, 0, 64, 100),
    ("gru_b256_t100_h1024", "gru", 1024, 1, 0, 256, 100),
    ("gru_b1_t100_h512_2l", "gru", 512, 2, 0, 1, 100),
    ("gru_b1_t100_h256_3l", "gru", 256, 3, 0, 1, 100),
    ("gru_b8_t100_h512_2l", "gru", 512, 2, 0, 8, 100),
    ("gru_b1_t100_h512_bidir", "gru", 512, 1, 1, 1, 100),
    ("gru_b4_t100_h256_bidir", "gru", 256, 1, 1, 4, 100),
    # GRU reset_after=False (Keras 2's GRU, ONNX linear_before_reset=0), which neither cuDNN nor
    # torch.nn.GRU computes: PyTorch runs GruResetBefore below, a step at a time (fp32 only).
    ("gru_before_b1_t100_h512", "gru_before", 512, 1, 0, 1, 100),
    ("gru_before_b8_t100_h512", "gru_before", 512, 1, 0, 8, 100),
    ("gru_before_b64_t100_h512", "gru_before", 512, 1, 0, 64, 100),
    ("gru_before_b1_t100_h512_bidir", "gru_before", 512, 1, 1, 1, 100),
    ("gru_before_b8_t100_h512_bidir", "gru_before", 512, 1, 1, 8, 100),
    ("gru_before_b64_t100_h512_bidir", "gru_before", 512, 1, 1, 64, 100),
    # Two layers, one on the other: both in one launch of the stacked kernel where faster.
    ("gru_before_b1_t100_h512_2l", "gru_before", 512, 2, 0, 1, 100),
    ("gru_before_b8_t100_h512_2l", "gru_before", 512, 2, 0, 8, 100),
    ("gru_before_b1_t100_h256_3l", "gru_before", 256, 3, 0, 1, 100),
]
MODES = ["fp32", "tf32", "fp16", "bf16"]
DTYPES = {"fp32": torch.float32, "tf32": torch.float32, "fp16": torch.float16,
          "bf16": torch.bfloat16}


def median_ms(fn):
    for _ in range(WARMUP):
        fn()
    torch.cuda.synchronize()
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
          for _ in range(REPS)]
    for s, e in ev:
        s.record()
        fn()
        e.record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in ev)


class GruResetBefore(torch.nn.Module):
    """GRU with the reset gate applied before the recurrent matmul of the n gate (Keras's
    reset_after=False): n = tanh(W_n x + b_in + b_hn + R_n (r * h)). nn.GRU's parameter names,
    shapes and gate order (r, z, n); batch-first; the input projection of all steps in one
    matmul, then one step at a time."""

    def __init__(self, I, H, num_layers, bidirectional):
        super().__init__()
        self.H, self.layers, self.dirs = H, num_layers, 2 if bidirectional else 1
        for l in range(num_layers):
            for d in range(self.dirs):
                sfx = f"_l{l}" + ("_reverse" if d else "")
                isz = I if l == 0 else self.dirs * H
                self.register_parameter("weight_ih" + sfx,
                                        torch.nn.Parameter(torch.empty(3 * H, isz)))
                self.register_parameter("weight_hh" + sfx,
                                        torch.nn.Parameter(torch.empty(3 * H, H)))
                self.register_parameter("bias_ih" + sfx, torch.nn.Parameter(torch.empty(3 * H)))
                self.register_parameter("bias_hh" + sfx, torch.nn.Parameter(torch.empty(3 * H)))

    def direction(self, x, sfx, reverse):
        H = self.H
        W, R = getattr(self, "weight_ih" + sfx), getattr(self, "weight_hh" + sfx)
        xp = torch.addmm(getattr(self, "bias_ih" + sfx) + getattr(self, "bias_hh" + sfx),
                         x.reshape(-1, x.shape[-1]), W.t()).view(x.shape[0], x.shape[1], 3 * H)
        r_rz, r_n = R[: 2 * H].t(), R[2 * H:].t()
        h = x.new_zeros(x.shape[0], H)
        out = [None] * x.shape[1]
        for t in (reversed(range(x.shape[1])) if reverse else range(x.shape[1])):
            g = xp[:, t]
            r, z = torch.sigmoid(torch.addmm(g[:, : 2 * H], h, r_rz)).chunk(2, 1)
            n = torch.tanh(torch.addmm(g[:, 2 * H:], r * h, r_n))
            h = torch.lerp(n, h, z)  # (1 - z) * n + z * h
            out[t] = h
        return torch.stack(out, 1)

    def forward(self, x):
        for l in range(self.layers):
            x = torch.cat([self.direction(x, f"_l{l}" + ("_reverse" if d else ""), d == 1)
                           for d in range(self.dirs)], -1)
        return x, None


def torch_case(cell, H, layers, bidir, B, T, mode, workdir, name):
    torch.backends.cudnn.allow_tf32 = mode == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = mode == "tf32"
    # The case's own seed, the same in every run (str's hash() differs from process to process).
    torch.manual_seed(zlib.crc32(name.encode()))
    cls = {"lstm": torch.nn.LSTM, "gru": torch.nn.GRU, "gru_before": GruResetBefore}[cell]
    if cell == "gru_before":
        m = cls(H, H, layers, bool(bidir))
    else:
        m = cls(H, H, num_layers=layers, bidirectional=bool(bidir), batch_first=True)
    with torch.no_grad():
        for p in m.parameters():
            p.uniform_(-1.0 / np.sqrt(H), 1.0 / np.sqrt(H))
    x = torch.randn(B, T, H)
    wpath, xpath = workdir / f"{name}.npz", workdir / f"{name}.x.npy"
    np.savez(wpath, **{k: v.numpy() for k, v in m.state_dict().items()})
    np.save(xpath, x.numpy())
    dt = DTYPES[mode]
    m = m.cuda().to(dt).eval()
    xd = x.cuda().to(dt)
    res = {}
    with torch.inference_mode():
        try:
            res["torch_eager"] = median_ms(lambda: m(xd))
            y = m(xd)[0].float().cpu().numpy()
        except Exception as e:  # a mode PyTorch cannot run is reported, not fatal
            res["torch_error"] = str(e).splitlines()[0][:80]
            return res, None, wpath, xpath
        try:
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                for _ in range(3):
                    m(xd)
            torch.cuda.current_stream().wait_stream(s)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                m(xd)
            res["torch_graph"] = median_ms(g.replay)
        except Exception as e:
            res["torch_graph_error"] = str(e).splitlines()[0][:80]
    del m, xd
    torch.cuda.empty_cache()
    return res, y, wpath, xpath


def fmt(v):
    return "n/a" if v is None or v < 0 else f"{v:.3f}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--only", nargs="*", help="shape names to run")
    ap.add_argument("--modes", nargs="*", default=MODES)
    args = ap.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="gpu_peers_"))
    rows, manifest, ys = [], [], {}
    t0 = time.time()
    for shape in SHAPES:
        name, cell, H, layers, bidir, B, T = shape
        if args.only and name not in args.only:
            continue
        for mode in args.modes:
            if cell == "gru_before" and mode != "fp32":
                continue  # the engine computes it in exact FP32 only
            case = f"{name}_{mode}"
            res, y, wpath, xpath = torch_case(cell, H, layers, bidir, B, T, mode, workdir, case)
            ys[case] = y
            rows.append((case, shape, mode, res))
            manifest.append(f"{case} {cell} {H} {H} {layers} {bidir} {B} {T} {mode} {wpath} "
                            f"{xpath} {workdir / (case + '.out.npy')}")
            print(f"torch {case}: {res}", flush=True)
    (workdir / "manifest.txt").write_text("\n".join(manifest) + "\n")
    results_path = workdir / "results.txt"
    proc = subprocess.run([args.binary, str(workdir / "manifest.txt"), str(results_path)],
                          text=True, capture_output=True)
    print(proc.stdout, proc.stderr, flush=True)
    ours = {}
    for line in results_path.read_text().splitlines():
        parts = line.split(" ", 1)
        kv = {}
        for tok in (parts[1].split(" ") if len(parts) > 1 else []):
            if "=" in tok:
                k, v = tok.split("=", 1)
                kv[k] = v
        ours[parts[0]] = kv

    algo_names = {"0": "std", "1": "ps", "2": "pd", "3": "ps_small_h", "100": "fused",
                  "101": "fused_cluster", "102": "std_seq", "103": "fused_batched",
                  "fused_recurrent": "fused_recurrent"}
    out = ["| case | mode | PyTorch eager ms | PyTorch graph ms | ours eager ms (algo) |"
           " ours graph ms | ours as the engine runs it ms (algo) | eager speedup | graph speedup |"
           " engine vs PyTorch's best |"
           " per algorithm ms (eager) | Run() with host IO ms, pageable / pinned input |"
           " compute + PCIe floor ms | pinned Run() / floor | max rel diff vs PyTorch |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for case, shape, mode, res in rows:
        o = ours.get(case, {})
        f = lambda k: float(o[k]) if k in o else None  # noqa: E731
        te, tg, oe, og = res.get("torch_eager"), res.get("torch_graph"), f("auto_ms"), f("graph_ms")
        sp_e = f"{te / oe:.2f}x" if te and oe and oe > 0 else "n/a"
        sp_g = f"{tg / og:.2f}x" if tg and og and og > 0 else "n/a"
        oen = f("engine_ms")
        tbest = min(v for v in (te, tg) if v) if (te or tg) else None
        sp_b = f"{tbest / oen:.2f}x" if tbest and oen and oen > 0 else "n/a"
        per_algo = ", ".join(f"{algo_names.get(k[5:-3], k)} {fmt(float(v))}"
                             for k, v in o.items() if k.startswith("algo_"))
        if o.get("fused_kernels_ms"):  # what each of the fused algorithm's kernels took
            per_algo += " (fused: " + ", ".join(
                f"{k} {fmt(float(v))}" for k, v in
                (kv.split(":") for kv in o["fused_kernels_ms"].split(","))) + ")"
        diff = "n/a"
        out_npy = workdir / f"{case}.out.npy"
        if ys.get(case) is not None and out_npy.exists():
            a, b = np.load(out_npy), ys[case]
            diff = f"{np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-30):.1e}"
        err = res.get("torch_error") or o.get("error") or ""
        floor = oen + f("io_floor_ms") if oen and f("io_floor_ms") else None
        io_ratio = f"{f('run_pinned_ms') / floor:.2f}x" if floor and f("run_pinned_ms") else "n/a"
        out.append(f"| {case.rsplit('_', 1)[0]} | {mode} | {fmt(te)} | {fmt(tg)} | "
                   f"{fmt(oe)} ({o.get('auto_algo', '?')}) | {fmt(og)} | "
                   f"{fmt(f('engine_ms'))} ({o.get('engine_algo', '?')}) | "
                   f"{sp_e} | {sp_g} | {sp_b} | "
                   f"{per_algo} | {fmt(f('run_ms'))} / {fmt(f('run_pinned_ms'))} | "
                   f"{fmt(floor)} | {io_ratio} | {diff}{' ' + err if err else ''} |")
    dev = torch.cuda.get_device_name(0)
    link = ours.get("pcie", {})
    header = [f"device: {dev}; torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}"
              f" (PyTorch's); {REPS} timed runs after {WARMUP} warm-up, CUDA events, median;"
              f" wall {time.time() - t0:.0f} s",
              f"PCIe, pinned 256 MiB copies: host to device {link.get('h2d_gbps', '?')} GB/s,"
              f" device to host {link.get('d2h_gbps', '?')} GB/s. The floor of a case is the"
              " engine's compute plus its input and output at those rates.", ""]
    Path(args.out).write_text("\n".join(header + out) + "\n")
    print("\n".join(header + out))
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
