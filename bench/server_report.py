#!/usr/bin/env python3
"""Turns bench/server_bench.sh's CSVs into markdown tables and a PNG plot of throughput
against p99 latency (matplotlib).

usage: python3 bench/server_report.py RUN_DIR TABLES.md PLOT.png
"""
import csv
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


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


def main():
    run_dir, md_path, png_path = sys.argv[1:4]
    lines = []
    r = row(run_dir, "latency_c1")
    if r:
        lines += ["### Tiny model (LSTM H=32, T=10, 8 features), concurrency 1", "",
                  "| seq/s | p50 µs | p90 µs | p99 µs | server compute infer µs (avg) |",
                  "|---:|---:|---:|---:|---:|",
                  f"| {num(r, 'Inferences/Second'):.0f} | {num(r, 'p50 latency'):.0f} | "
                  f"{num(r, 'p90 latency'):.0f} | {num(r, 'p99 latency'):.0f} | "
                  f"{num(r, 'Server Compute Infer'):.0f} |", ""]

    lines += ["### Concurrency sweep, T=10: batching off (max_batch_size 1) and on "
              "(max_batch_size 64, dynamic_batching)", "",
              "| concurrency | off seq/s | off p50 µs | off p99 µs | on seq/s | on p50 µs "
              "| on p99 µs | on / off |",
              "|---:|---:|---:|---:|---:|---:|---:|---:|"]
    series = {"off": ([], [], []), "on": ([], [], [])}
    for c in sorted(set(levels(run_dir, "off_c")) | set(levels(run_dir, "on_c"))):
        off, on = row(run_dir, f"off_c{c}"), row(run_dir, f"on_c{c}")
        cells = [str(c)]
        for key, r in (("off", off), ("on", on)):
            if r:
                cells += [f"{num(r, 'Inferences/Second'):.0f}", f"{num(r, 'p50 latency'):.0f}",
                          f"{num(r, 'p99 latency'):.0f}"]
                series[key][0].append(num(r, "Inferences/Second"))
                series[key][1].append(num(r, "p99 latency"))
                series[key][2].append(c)
            else:
                cells += ["–"] * 3
        ratio = (num(on, "Inferences/Second") / num(off, "Inferences/Second")
                 if on and off else float("nan"))
        cells.append(f"{ratio:.2f}x")
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")

    client = [(b, row(run_dir, f"client_b{b}")) for b in (8, 32, 64)]
    if any(r for _, r in client):
        lines += ["### Client-side batches (one request carries B sequences), concurrency 2", "",
                  "| B | seq/s | p50 µs per request | p99 µs per request |",
                  "|---:|---:|---:|---:|"]
        for b, r in client:
            if r:
                lines.append(f"| {b} | {num(r, 'Inferences/Second'):.0f} | "
                             f"{num(r, 'p50 latency'):.0f} | {num(r, 'p99 latency'):.0f} |")
        lines.append("")

    mixed = [(m, c, row(run_dir, f"mixed_{m}_c{c}")) for c in (1, 16) for m in ("off", "on")]
    if any(r for *_, r in mixed):
        info = open(os.path.join(run_dir, "mixed.txt")).read().strip()
        lines += [f"### Mixed lengths, uniform in [10, 500] ({info})", "",
                  "| batching | concurrency | seq/s | p50 µs | p99 µs |",
                  "|---|---:|---:|---:|---:|"]
        for m, c, r in mixed:
            if r:
                lines.append(f"| {m} | {c} | {num(r, 'Inferences/Second'):.0f} | "
                             f"{num(r, 'p50 latency'):.0f} | {num(r, 'p99 latency'):.0f} |")
        lines.append("")

    preview = levels(run_dir, "preview_c")
    if preview:
        lines += ["### Preview: the dynamic batcher (branch batching, not on main), "
                  "tiny_lstm_batched, T=10", "",
                  "| concurrency | seq/s | p50 µs | p99 µs | vs batching off |",
                  "|---:|---:|---:|---:|---:|"]
        series["preview"] = ([], [], [])
        for c in preview:
            r, off = row(run_dir, f"preview_c{c}"), row(run_dir, f"off_c{c}")
            ratio = (f"{num(r, 'Inferences/Second') / num(off, 'Inferences/Second'):.2f}x"
                     if off else "–")
            lines.append(f"| {c} | {num(r, 'Inferences/Second'):.0f} | "
                         f"{num(r, 'p50 latency'):.0f} | {num(r, 'p99 latency'):.0f} | {ratio} |")
            series["preview"][0].append(num(r, "Inferences/Second"))
            series["preview"][1].append(num(r, "p99 latency"))
            series["preview"][2].append(c)
        lines.append("")

    with open(md_path, "w") as f:
        f.write("\n".join(lines) + "\n")

    fig, ax = plt.subplots(figsize=(7, 4.5))
    labels = {"off": "batching off (max_batch_size 1)",
              "on": "max_batch_size 64 + dynamic_batching",
              "preview": "dynamic batcher preview (branch batching)"}
    for key, style in (("off", "o-"), ("on", "s--"), ("preview", "^-")):
        tput, p99, cs = series.get(key, ([], [], []))
        if not tput:
            continue
        label = labels[key]
        ax.plot(p99, tput, style, label=label)
        for x, y, c in zip(p99, tput, cs):
            ax.annotate(f"c={c}", (x, y), textcoords="offset points", xytext=(4, 4), fontsize=7)
    ax.set_xscale("log")
    ax.set_xlabel("p99 latency (µs, log)")
    ax.set_ylabel("throughput (sequences/s)")
    ax.set_title("rnnserve, tiny LSTM (H=32, T=10), CPU engine, perf_analyzer over KServe gRPC")
    ax.title.set_fontsize(9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(png_path, dpi=110)


if __name__ == "__main__":
    main()
