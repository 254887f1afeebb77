"""Summary of bench/server_paired_bench.sh's runs.csv: per round, A's and B's throughput and
server CPU time per request, and the ratios B/A; then the median and mean of each ratio, their
spread (min, max), a 95 % bootstrap interval of the median, and in how many rounds B did worse.

usage: python3 bench/server_paired_report.py RUNS_CSV
"""

import csv
import random
import statistics
import sys

METRICS = (("inferences_per_second", "throughput", "infer/s", "lower"),
           ("server_cpu_us_per_request", "server CPU per request", "us", "higher"),
           ("p50_latency_us", "p50 latency", "us", "higher"))


def bootstrap_median(values, reps=10000, seed=1):
    rng = random.Random(seed)
    medians = sorted(statistics.median(rng.choices(values, k=len(values))) for _ in range(reps))
    return medians[int(0.025 * reps)], medians[int(0.975 * reps) - 1]


def main():
    rows = list(csv.DictReader(open(sys.argv[1])))
    rounds = {}
    for r in rows:
        rounds.setdefault(int(r["round"]), {})[r["binary"]] = r
    pairs = [(rnd, p["A"], p["B"]) for rnd, p in sorted(rounds.items()) if "A" in p and "B" in p]
    if not pairs:
        print("no complete pair")
        return 1
    print("| round | A infer/s | B infer/s | B/A | A CPU us/req | B CPU us/req | B/A "
          "| A p50 us | B p50 us | B/A |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for rnd, a, b in pairs:
        cells = []
        for key, _, _, _ in METRICS:
            if key not in a:  # runs.csv from before the p50 column
                continue
            x, y = float(a[key]), float(b[key])
            cells += [f"{x:.1f}", f"{y:.1f}", f"{y / x:.3f}"]
        print(f"| {rnd} | " + " | ".join(cells) + " |")
    print()
    print(f"pairs: {len(pairs)}")
    for key, name, unit, worse in METRICS:
        if key not in pairs[0][1]:
            continue
        a = [float(p[1][key]) for p in pairs]
        b = [float(p[2][key]) for p in pairs]
        ratios = [y / x for x, y in zip(a, b)]
        lo, hi = bootstrap_median(ratios)
        worse_count = sum((r < 1) if worse == "lower" else (r > 1) for r in ratios)
        print(f"{name}: A median {statistics.median(a):.1f} {unit}, B median "
              f"{statistics.median(b):.1f} {unit}; B/A per pair median {statistics.median(ratios):.3f} "
              f"(95 % bootstrap {lo:.3f}..{hi:.3f}), mean {statistics.mean(ratios):.3f}, "
              f"min {min(ratios):.3f}, max {max(ratios):.3f}; B worse in {worse_count} of "
              f"{len(ratios)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
