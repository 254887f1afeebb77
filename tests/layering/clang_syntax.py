#!/usr/bin/env python3
"""Checks that clang still compiles the sources where compiler-specific code lives (the CPU
kernels' intrinsics and target attributes), so that the clang presets (asan, tsan) cannot
silently stop building: `clang++ -fsyntax-only` with each file's own flags from the build's
compile_commands.json. Exits 77 (ctest's skip) when clang++ is absent."""

import argparse
import concurrent.futures
import json
import os
import shlex
import shutil
import subprocess
import sys


def clang_command(entry):
    args = shlex.split(entry["command"])
    out, skip = ["clang++"], False
    for a in args[1:]:
        if skip:
            skip = False
        elif a == "-o":
            skip = True
        elif a != "-c":
            out.append(a)
    return out + ["-fsyntax-only", "-Wno-unknown-warning-option"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True, help="a build directory with compile_commands.json")
    ap.add_argument("--source", required=True)
    ap.add_argument("--dirs", nargs="+", default=["engine/cpu/", "engine/"])
    args = ap.parse_args()
    if shutil.which("clang++") is None:
        print("SKIP: clang++ is not installed (deploy/install_deps.sh installs it)")
        return 77
    db = os.path.join(args.build, "compile_commands.json")
    if not os.path.exists(db):
        print(f"SKIP: no {db}")
        return 77
    prefixes = [os.path.join(os.path.abspath(args.source), d) for d in args.dirs]
    entries = [e for e in json.load(open(db))
               if e["file"].endswith(".cc") and any(e["file"].startswith(p) for p in prefixes)
               and "/engine/cuda/" not in e["file"]]
    if not entries:
        print("FAIL: no sources matched", args.dirs)
        return 1

    def check(entry):
        r = subprocess.run(clang_command(entry), cwd=entry["directory"], capture_output=True,
                           text=True)
        return entry["file"], r.returncode, r.stderr

    failed = 0
    with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        for path, code, err in pool.map(check, entries):
            if code != 0:
                failed += 1
                print(f"FAIL: clang cannot compile {path}:\n{err[:2000]}")
    print(f"{len(entries) - failed} of {len(entries)} sources compile with clang")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
