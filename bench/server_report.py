#!/usr/bin/env python3
"""Turns bench/server_bench.sh's CSVs into markdown tables and a PNG plot of throughput
against p99 latency (matplotlib), one panel per model.

Mixed-length runs: real and computed time steps are the change of the server's
rnnserve_batch_timesteps_real_total / _computed_total counters (its /metrics, saved before
and after each run), so they count every request the server ran in that run.

usage: python3 bench/server_report.py RUN_DIR TABLES.md PLOT.png
"""
import csv
import os
import re
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

MODELS = [  # (CSV prefix, title)
    ("", "tiny LSTM (H=32, 8 features), T=10"),
    ("lstm256_", "LSTM H=256 (16 features), T=50"),
]


def row(run_dir, name):
    path = os.path.join(run_dir, f"{name}.csv")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        rows = list(csv.DictReader(f))
    return rows[0] if rows else None


def num(r, key):
    return float(r[key])


def levels(run_dir, prefix):
    out = []
    for name in os.listdir(run_dir):
        if name.startswith(prefix) and name.endswith(".csv"):
            c = name[len(prefix):-4]
            if c.isdigit():
                out.append(int(c))
    return sorted(out)


def load_averages(run_dir):
    out = {}
    path = os.path.join(run_dir, "loadavg.txt")
    if os.path.exists(path):
        for line in open(path):
            name, *avg = line.split()
            out[name] = avg[0] if avg else "?"
    return out


def server_cpu(run_dir):
    """Server CPU µs per request of each run. server_cpu.txt has a line a run: the name, then
    CPU seconds and request count before and after it (runs of 2026-11-26 wrote the name, CPU
    ticks, requests and ticks a second)."""
    out = {}
    path = os.path.join(run_dir, "server_cpu.txt")
    if os.path.exists(path):
        for line in open(path):
            name, *v = line.split()
            v = [float(x) for x in v]
            if len(v) == 4 and v[3] > v[2]:
                out[name] = (v[1] - v[0]) * 1e6 / (v[3] - v[2])
            elif len(v) == 3 and v[1] > 0:
                out[name] = v[0] / v[2] * 1e6 / v[1]
    return out


def counter(path, name, model):
    """The value of counter `name` for model `model` in a Prometheus text file (0 if absent)."""
    pattern = re.compile(rf'^{name}\{{model="{re.escape(model)}",version="[^"]*"\}} (\S+)$')
    total = 0.0
    if os.path.exists(path):
        for line in open(path):
            m = pattern.match(line.strip())
            if m:
                total += float(m.group(1))
    return total


def steps(run_dir, name, model):
    """(real, computed) time steps the server ran for `model` during run `name`."""
    before = os.path.join(run_dir, f"{name}.before.prom")
    after = os.path.join(run_dir, f"{name}.after.prom")
    if not os.path.exists(after):
        return None
    real = (counter(after, "rnnserve_batch_timesteps_real_total", model)
            - counter(before, "rnnserve_batch_timesteps_real_total", model))
    computed = (counter(after, "rnnserve_batch_timesteps_computed_total", model)
                - counter(before, "rnnserve_batch_timesteps_computed_total", model))
    return real, computed


def main():
    run_dir, md_path, png_path = sys.argv[1:4]
    load = load_averages(run_dir)
    cpu = server_cpu(run_dir)
    cpu_cell = lambda name: f"{cpu[name]:.0f}" if name in cpu else "–"
    lines = []

    latency = [(name[:-4], row(run_dir, name[:-4])) for name in sorted(os.listdir(run_dir))
               if name.startswith("latency_c1") and name.endswith(".csv")]
    if latency:
        lines += ["### Tiny model (LSTM H=32, T=10, 8 features), concurrency 1", "",
                  "| run | load avg (1 min) | seq/s | p50 µs | p90 µs | p99 µs "
                  "| server compute infer µs (avg) | server CPU µs/request |",
                  "|---|---:|---:|---:|---:|---:|---:|---:|"]
        for name, r in latency:
            lines.append(f"| {name} | {load.get(name, '?')} | {num(r, 'Inferences/Second'):.0f} "
                         f"| {num(r, 'p50 latency'):.0f} | {num(r, 'p90 latency'):.0f} "
                         f"| {num(r, 'p99 latency'):.0f} | {num(r, 'Server Compute Infer'):.0f} "
                         f"| {cpu_cell(name)} |")
        lines.append("")

    series = {}
    for prefix, title in MODELS:
        cs = sorted(set(levels(run_dir, f"{prefix}off_c")) | set(levels(run_dir, f"{prefix}on_c")))
        if not cs:
            continue
        lines += [f"### Concurrency sweep, {title}: batching off (max_batch_size 1) and on "
                  "(max_batch_size 64, dynamic_batching)", "",
                  "| concurrency | off seq/s | off p50 µs | off p99 µs | on seq/s | on p50 µs "
                  "| on p99 µs | on / off | server CPU µs/request (off, on) | load avg (off, on) |",
                  "|---:|---:|---:|---:|---:|---:|---:|---:|---|---|"]
        series[prefix] = {"off": ([], [], []), "on": ([], [], [])}
        for c in cs:
            off, on = row(run_dir, f"{prefix}off_c{c}"), row(run_dir, f"{prefix}on_c{c}")
            cells = [str(c)]
            for key, r in (("off", off), ("on", on)):
                if r:
                    cells += [f"{num(r, 'Inferences/Second'):.0f}",
                              f"{num(r, 'p50 latency'):.0f}", f"{num(r, 'p99 latency'):.0f}"]
                    series[prefix][key][0].append(num(r, "Inferences/Second"))
                    series[prefix][key][1].append(num(r, "p99 latency"))
                    series[prefix][key][2].append(c)
                else:
                    cells += ["–"] * 3
            ratio = (num(on, "Inferences/Second") / num(off, "Inferences/Second")
                     if on and off else float("nan"))
            cells.append(f"{ratio:.2f}x")
            cells.append(f"{cpu_cell(f'{prefix}off_c{c}')}, {cpu_cell(f'{prefix}on_c{c}')}")
            cells.append(f"{load.get(f'{prefix}off_c{c}', '?')}, "
                         f"{load.get(f'{prefix}on_c{c}', '?')}")
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")

        client = [(b, row(run_dir, f"{prefix}client_b{b}")) for b in (8, 32, 64)]
        if any(r for _, r in client):
            lines += [f"### Client-side batches, {title} (one request carries B sequences), "
                      "concurrency 2", "",
                      "| B | seq/s | p50 µs per request | p99 µs per request |",
                      "|---:|---:|---:|---:|"]
            for b, r in client:
                if r:
                    lines.append(f"| {b} | {num(r, 'Inferences/Second'):.0f} | "
                                 f"{num(r, 'p50 latency'):.0f} | {num(r, 'p99 latency'):.0f} |")
            lines.append("")

    mixed = [(m, c, row(run_dir, f"mixed_{m}_c{c}")) for c in (1, 16, 64) for m in ("off", "on")]
    if any(r for *_, r in mixed):
        info = open(os.path.join(run_dir, "mixed.txt")).read().strip()
        lines += [f"### Mixed lengths, uniform in [10, 500], tiny model ({info})", "",
                  "Time steps: the change of rnnserve_batch_timesteps_real_total and "
                  "_computed_total over the run (server /metrics). Computed = sequences x the "
                  "longest length of each engine batch, what a padding engine (cuDNN) runs.", "",
                  "| batching | concurrency | seq/s | p50 µs | p99 µs | real steps "
                  "| computed steps | computed / real | load avg |",
                  "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for m, c, r in mixed:
            if not r:
                continue
            model = "tiny_lstm_batched" if m == "on" else "tiny_lstm"
            st = steps(run_dir, f"mixed_{m}_c{c}", model)
            real, computed = st if st else (0.0, 0.0)
            ratio = f"{computed / real:.3f}x" if real > 0 else "–"
            lines.append(f"| {m} | {c} | {num(r, 'Inferences/Second'):.0f} | "
                         f"{num(r, 'p50 latency'):.0f} | {num(r, 'p99 latency'):.0f} | "
                         f"{real:.0f} | {computed:.0f} | {ratio} | "
                         f"{load.get(f'mixed_{m}_c{c}', '?')} |")
        lines.append("")

    with open(md_path, "w") as f:
        f.write("\n".join(lines) + "\n")

    panels = [(p, t) for p, t in MODELS if p in series]
    fig, axes = plt.subplots(1, max(1, len(panels)), figsize=(6.5 * max(1, len(panels)), 4.8))
    if len(panels) <= 1:
        axes = [axes]
    labels = {"off": "batching off (max_batch_size 1)",
              "on": "max_batch_size 64 + dynamic_batching"}
    for ax, (prefix, title) in zip(axes, panels):
        for key, style in (("off", "o-"), ("on", "s--")):
            tput, p99, cs = series[prefix][key]
            if not tput:
                continue
            ax.plot(p99, tput, style, label=labels[key])
            for x, y, c in zip(p99, tput, cs):
                ax.annotate(f"c={c}", (x, y), textcoords="offset points", xytext=(4, 4),
                            fontsize=7)
        ax.set_xscale("log")
        ax.set_xlabel("p99 latency (µs, log)")
        ax.set_ylabel("throughput (sequences/s)")
        ax.set_title(f"rnnserve CPU engine, {title}\nperf_analyzer over KServe gRPC, 2 shared cores",
                     fontsize=9)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(png_path, dpi=110)


if __name__ == "__main__":
    main()
