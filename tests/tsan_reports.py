#!/usr/bin/env python3
"""Groups ThreadSanitizer reports by whose code made each access.

    tests/tsan_reports.py build/tsan/sanitizer-reports/*

For each report, each access (and the allocation or location it names) is attributed to the
first frame outside the sanitizer runtime, libstdc++ and abseil: our code (a source path of
this repository) or a library (its file name). A report both of whose accesses are made by a
library is that library's own hand-off; one with an access made by our code is ours to read.
Prints one line per group, most frequent first, with a file to read an example in.
"""

import collections
import re
import sys

PASS_THROUGH = re.compile(
    r"\((libtsan|libstdc\+\+|libabsl_|libc\.so|libgcc_s)|/usr/include/c\+\+/|"
    r"\.\./abseil-[^/]+/|/usr/include/absl/|src/libsanitizer/")
ACCESS = re.compile(r"^\s+(Previous )?(atomic )?(Atomic )?(read|write|Read|Write) of size")
FRAME = re.compile(r"^\s+#\d+ (.*?) (\S+) \((\S+?)\+0x[0-9a-f]+\)")
OURS = re.compile(r"^(\.\./)+(server|engine|models|client|tests|proto)/|^/work/")


def owner(frames):
    for func, path, module in frames:
        line = f"{func} {path} ({module}+"
        if PASS_THROUGH.search(line):
            continue
        if OURS.search(path):
            return f"ours: {func[:80]} {re.sub(r'^(../)+', '', path)}"
        return f"{module}: {func[:80]}"
    return "runtime/abseil only: " + (frames[0][0][:80] if frames else "?")


def reports(path):
    text = open(path, errors="replace").read()
    for chunk in text.split("WARNING: ThreadSanitizer: ")[1:]:
        kind = chunk.split(" (pid", 1)[0].strip()
        stacks, current = [], None
        for line in chunk.splitlines():
            if ACCESS.match(line):
                current = []
                stacks.append(current)
            elif re.match(r"^\s+(Mutex|Location|Thread|SUMMARY)", line):
                current = None
            elif current is not None:
                m = FRAME.match(line)
                if m:
                    current.append(m.groups())
        yield kind, tuple(owner(s) for s in stacks)


def main(paths):
    groups = collections.Counter()
    example = {}
    for p in paths:
        for kind, owners in reports(p):
            key = (kind,) + owners
            groups[key] += 1
            example.setdefault(key, p)
    for key, n in groups.most_common():
        print(f"{n:5d}  {key[0]}  (e.g. {example[key]})")
        for o in key[1:]:
            print(f"         {o}")
    if not groups:
        print("  none")


if __name__ == "__main__":
    main(sys.argv[1:])
