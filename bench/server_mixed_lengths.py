#!/usr/bin/env python3
"""Writes a perf_analyzer --input-data file for the mixed-length workload: N sequences for the
tiny benchmark model (input "x", 8 features), lengths uniform in [10, 500], fixed seed.
Prints the real time steps per request on average.

Run: python3 bench/server_mixed_lengths.py OUT.json [N]
"""
import json
import sys

import numpy as np


def main():
    out = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 64
    rng = np.random.default_rng(11)
    data, steps = [], []
    for _ in range(n):
        t = int(rng.integers(10, 501))
        steps.append(t)
        x = rng.normal(0, 1, (t, 8)).astype(np.float32)
        data.append({"x": {"content": [round(float(v), 4) for v in x.ravel()], "shape": [t, 8]}})
    with open(out, "w") as f:
        json.dump({"data": data}, f)
    print(f"{n} sequences, mean length {np.mean(steps):.1f}, min {min(steps)}, max {max(steps)}")


if __name__ == "__main__":
    main()
