#!/usr/bin/env python3
"""Checks the layering rules of docs/architecture.md against the source tree.

The rules are stated once, in the ```layering block of docs/architecture.md ("Layers and who
may include whom"); this script reads them from there and enforces them:

- include rules (`FILES -/-> TARGETS`): no file matched by FILES includes (#include "..." or
  <...>) anything matched by TARGETS;
- link rules (`link: TARGET -/-> TARGETS`): in the CMake link graph (target_link_libraries of
  every CMakeLists.txt and *.cmake), TARGET reaches none of TARGETS, directly or through others;
- always: no cycle between the top-level components (the first directory of a path: engine,
  models, server, client, proto) in the include graph, and no cycle in the CMake link graph of
  the tree's own targets.

Patterns: `dir/` matches every file under dir, `dir/*` the files directly in dir, `<prefix`
an angle include that starts with prefix. A generated protobuf header (`x/y.pb.h` not under a
source directory) counts as proto/. tests/ and bench/ are not checked: they may reach into an
engine's internals.

Usage: check_layering.py [--root DIR]   (exit 1 and one line per violation when a rule breaks)
       check_layering.py --self-test    (builds small trees in a temporary directory and shows
                                         that each kind of violation is caught)
"""

import argparse
import os
import re
import sys
import tempfile

SOURCE_DIRS = ("engine", "models", "server", "client", "proto")
SOURCE_EXTENSIONS = (".h", ".cc", ".cu", ".cuh", ".hpp", ".cpp")
RULES_DOC = os.path.join("docs", "architecture.md")

INCLUDE_RE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*([<"])([^">]+)[">]', re.MULTILINE)
TARGET_RE = re.compile(r"\badd_(?:library|executable)\s*\(\s*([A-Za-z0-9_.+-]+)", re.IGNORECASE)
LINK_RE = re.compile(r"\btarget_link_libraries\s*\(([^()]*)\)", re.IGNORECASE)
LINK_KEYWORDS = {"PUBLIC", "PRIVATE", "INTERFACE", "debug", "optimized", "general"}


class Rules:
    def __init__(self):
        self.include = []  # (from patterns, to patterns, line)
        self.link = []  # (target, forbidden targets, line)


def parse_rules(doc_path):
    """The rules of the ```layering block of the doc."""
    with open(doc_path, encoding="utf-8") as f:
        text = f.read()
    m = re.search(r"```layering\n(.*?)```", text, re.DOTALL)
    if not m:
        raise ValueError(f"{doc_path}: no ```layering block")
    rules = Rules()
    for raw in m.group(1).splitlines():
        line = re.sub(r"(^|\s)#.*$", "", raw).strip()  # a comment: '#' at the start of a word
        if not line:
            continue
        if "-/->" not in line:
            raise ValueError(f"{doc_path}: layering rule without '-/->': {raw!r}")
        text = " ".join(line.split())
        left, right = (s.strip() for s in line.split("-/->", 1))
        targets = right.split()
        if left.startswith("link:"):
            rules.link.append((left[len("link:"):].strip(), targets, text))
        else:
            froms = [p.strip() for p in left.split(",") if p.strip()]
            rules.include.append((froms, targets, text))
    if not rules.include:
        raise ValueError(f"{doc_path}: the ```layering block states no include rule")
    return rules


def matches(pattern, path):
    """Whether a file path or include key matches one pattern."""
    if pattern.startswith("<"):
        return path.startswith(pattern)
    if pattern.endswith("/*"):
        d = pattern[:-1]
        return path.startswith(d) and "/" not in path[len(d):]
    if pattern.endswith("/"):
        return path.startswith(pattern)
    return path == pattern


def include_key(kind, name):
    """What an include names, as the rules see it: a tree path, or '<' + an angle include."""
    if kind == "<":
        return "<" + name
    if name.endswith(".pb.h") and name.split("/", 1)[0] not in SOURCE_DIRS:
        return "proto/" + name  # generated from proto/ into the build tree
    return name


def source_files(root):
    for top in SOURCE_DIRS:
        base = os.path.join(root, top)
        for dirpath, _, files in os.walk(base):
            for name in sorted(files):
                if name.endswith(SOURCE_EXTENSIONS):
                    full = os.path.join(dirpath, name)
                    yield os.path.relpath(full, root).replace(os.sep, "/"), full


def read_includes(root):
    """{file: [(include key, line number)]} for every source file of the checked directories."""
    graph = {}
    for rel, full in source_files(root):
        with open(full, encoding="utf-8", errors="replace") as f:
            text = f.read()
        found = []
        for m in INCLUDE_RE.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            found.append((include_key(m.group(1), m.group(2)), line))
        graph[rel] = found
    return graph


def find_cycle(edges):
    """One cycle of a directed graph {node: set(nodes)} as a list of nodes, or None."""
    color, stack = {}, []

    def visit(n):
        color[n] = 1
        stack.append(n)
        for m in sorted(edges.get(n, ())):
            if color.get(m) == 1:
                return stack[stack.index(m):] + [m]
            if color.get(m) is None:
                found = visit(m)
                if found:
                    return found
        stack.pop()
        color[n] = 2
        return None

    for n in sorted(edges):
        if color.get(n) is None:
            found = visit(n)
            if found:
                return found
    return None


def check_includes(root, rules):
    errors = []
    graph = read_includes(root)
    for path, includes in sorted(graph.items()):
        for froms, targets, text in rules.include:
            if not any(matches(p, path) for p in froms):
                continue
            for key, line in includes:
                for t in targets:
                    if matches(t, key):
                        errors.append(f"{path}:{line}: includes {key.lstrip('<')} "
                                      f"(rule '{text}')")
    # No cycle between top-level components.
    edges = {}
    for path, includes in graph.items():
        src = path.split("/", 1)[0]
        for key, _ in includes:
            if key.startswith("<"):
                continue
            dst = key.split("/", 1)[0]
            if dst in SOURCE_DIRS and dst != src:
                edges.setdefault(src, set()).add(dst)
    cycle = find_cycle(edges)
    if cycle:
        errors.append("include cycle between components: " + " -> ".join(cycle))
    return errors, len(graph)


def cmake_files(root):
    for dirpath, dirnames, files in os.walk(root):
        dirnames[:] = [d for d in dirnames if not d.startswith(".") and d != "build"]
        for name in sorted(files):
            if name == "CMakeLists.txt" or name.endswith(".cmake"):
                yield os.path.join(dirpath, name)


def read_link_graph(root):
    """{target: set(targets it links)} over the targets the tree defines."""
    defined, links = set(), {}
    for path in cmake_files(root):
        with open(path, encoding="utf-8", errors="replace") as f:
            text = re.sub(r"#[^\n]*", "", f.read())
        defined.update(TARGET_RE.findall(text))
        for m in LINK_RE.finditer(text):
            words = m.group(1).split()
            if not words:
                continue
            deps = [w for w in words[1:] if w not in LINK_KEYWORDS]
            links.setdefault(words[0], set()).update(deps)
    return {t: {d for d in deps if d in defined} for t, deps in links.items() if t in defined}


def reachable(edges, start):
    seen, todo = set(), [start]
    while todo:
        for m in edges.get(todo.pop(), ()):
            if m not in seen:
                seen.add(m)
                todo.append(m)
    return seen


def check_links(root, rules):
    errors = []
    edges = read_link_graph(root)
    for target, forbidden, text in rules.link:
        if target not in edges and not any(target in deps for deps in edges.values()):
            errors.append(f"link rule names no target of the tree: '{text}'")
            continue
        reach = reachable(edges, target)
        for f in forbidden:
            if f in reach:
                errors.append(f"CMake: {target} links {f} (rule '{text}')")
    cycle = find_cycle(edges)
    if cycle:
        errors.append("CMake link cycle: " + " -> ".join(cycle))
    return errors


def check(root):
    rules = parse_rules(os.path.join(root, RULES_DOC))
    errors, files = check_includes(root, rules)
    errors += check_links(root, rules)
    return errors, files, rules


# ---------------------------------------------------------------------------------------------
# Self-test: small trees that break one rule each.

SELF_TEST_DOC = """# Architecture
```layering
engine/                           -/->  server/ models/ proto/ client/ <grpcpp/
engine/*, engine/plan/            -/->  engine/cpu/ engine/cuda/
engine/cpu/                       -/->  engine/cuda/
engine/cuda/                      -/->  engine/cpu/
server/                           -/->  engine/cpu/ engine/cuda/
client/                           -/->  server/ engine/
link: rnnserve_engine_core        -/->  rnnserve_engine_cpu rnnserve_engine_cuda
link: rnnserve_engine_cuda        -/->  rnnserve_engine_cpu
```
"""

CLEAN_TREE = {
    "engine/engine.h": '#pragma once\n#include "engine/ir.h"\n',
    "engine/ir.h": "#pragma once\n",
    "engine/plan/masks.h": '#pragma once\n#include "engine/ir.h"\n',
    "engine/cpu/cpu.cc": '#include "engine/engine.h"\n',
    "engine/cuda/cuda.cc": '#include "engine/engine.h"\n#include <cuda_runtime_api.h>\n',
    "models/loader.cc": '#include "engine/ir.h"\n#include "rnnserve/v1/model_config.pb.h"\n',
    "server/servable.cc": '#include "engine/engine.h"\n#include "models/loader.h"\n',
    "client/client.cc": '#include "rnnserve/v1/rnnserve.pb.h"\n',
    "engine/CMakeLists.txt": (
        "add_library(rnnserve_engine_core STATIC engine.cc)\n"
        "add_library(rnnserve_engine_cpu STATIC cpu/cpu.cc)\n"
        "add_library(rnnserve_engine_cuda STATIC cuda/cuda.cc)\n"
        "target_link_libraries(rnnserve_engine_cpu PUBLIC rnnserve_engine_core)\n"
        "target_link_libraries(rnnserve_engine_cuda PUBLIC rnnserve_engine_core # a comment )\n"
        "  absl::status)\n"),
    RULES_DOC: SELF_TEST_DOC,
}

# name: (files changed from the clean tree, text every error must contain)
BROKEN_TREES = {
    "cuda_includes_cpu": ({"engine/cuda/cuda.cc": '#include "engine/cpu/layers.h"\n'},
                          "engine/cuda/cuda.cc:1: includes engine/cpu/layers.h"),
    "cpu_includes_cuda": ({"engine/cpu/cpu.cc": '\n#include "engine/cuda/cuda_model.h"\n'},
                          "engine/cpu/cpu.cc:2: includes engine/cuda/cuda_model.h"),
    "core_includes_cpu": ({"engine/ir.h": '#pragma once\n#include "engine/cpu/panel_gemm.h"\n'},
                          "engine/ir.h:2: includes engine/cpu/panel_gemm.h"),
    "plan_includes_cuda": ({"engine/plan/masks.h": '#include "engine/cuda/kernels.h"\n'},
                           "engine/plan/masks.h:1: includes engine/cuda/kernels.h"),
    "engine_includes_server": ({"engine/cpu/cpu.cc": '#include "server/log.h"\n'},
                               "includes server/log.h"),
    "engine_includes_proto": ({"engine/ir.h": '#include "rnnserve/v1/model_config.pb.h"\n'},
                              "includes proto/rnnserve/v1/model_config.pb.h"),
    "engine_includes_grpc": ({"engine/ir.h": "#include <grpcpp/grpcpp.h>\n"},
                             "includes grpcpp/grpcpp.h"),
    "server_includes_engine_internals": (
        {"server/servable.cc": '#include "engine/cpu/panel_gemm.h"\n'},
        "server/servable.cc:1: includes engine/cpu/panel_gemm.h"),
    "client_includes_server": ({"client/client.cc": '#include "server/servable.h"\n'},
                               "client/client.cc:1: includes server/servable.h"),
    "component_cycle": ({"models/loader.cc": '#include "server/servable.h"\n'},
                        "include cycle between components: models -> server -> models"),
    "engine_link_cycle": (
        {"engine/CMakeLists.txt": CLEAN_TREE["engine/CMakeLists.txt"] +
         "target_link_libraries(rnnserve_engine_core PUBLIC rnnserve_engine_cpu)\n"},
        "rnnserve_engine_core links rnnserve_engine_cpu"),
    "cuda_links_cpu_through_another": (
        {"engine/CMakeLists.txt": CLEAN_TREE["engine/CMakeLists.txt"] +
         "add_library(helper STATIC h.cc)\n"
         "target_link_libraries(helper PRIVATE rnnserve_engine_cpu)\n"
         "target_link_libraries(rnnserve_engine_cuda PRIVATE helper)\n"},
        "CMake: rnnserve_engine_cuda links rnnserve_engine_cpu"),
    "link_cycle_elsewhere": (
        {"server/CMakeLists.txt": "add_library(a STATIC a.cc)\nadd_library(b STATIC b.cc)\n"
                                  "target_link_libraries(a PUBLIC b)\n"
                                  "target_link_libraries(b PUBLIC a)\n"},
        "CMake link cycle: a -> b -> a"),
}


def write_tree(root, files):
    for rel, text in files.items():
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)


def self_test():
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        clean = os.path.join(tmp, "clean")
        write_tree(clean, CLEAN_TREE)
        errors, _, _ = check(clean)
        if errors:
            print("FAIL clean tree reported:\n  " + "\n  ".join(errors))
            failures += 1
        else:
            print("ok   clean tree passes")
        for name, (changes, expected) in BROKEN_TREES.items():
            root = os.path.join(tmp, name)
            write_tree(root, {**CLEAN_TREE, **changes})
            errors, _, _ = check(root)
            if any(expected in e for e in errors):
                print(f"ok   {name}: {errors[0]}")
            else:
                print(f"FAIL {name}: expected an error with {expected!r}, got {errors}")
                failures += 1
        # A doc without the rules block is an error, not a pass.
        nodoc = os.path.join(tmp, "nodoc")
        write_tree(nodoc, {**CLEAN_TREE, RULES_DOC: "# Architecture\n"})
        try:
            check(nodoc)
            print("FAIL a doc without a ```layering block passed")
            failures += 1
        except ValueError as e:
            print(f"ok   no rules block: {e}")
    return failures


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", default=os.path.join(os.path.dirname(__file__), "..", ".."))
    parser.add_argument("--self-test", action="store_true")
    args = parser.parse_args()
    if args.self_test:
        failures = self_test()
        print("self-test:", "FAILED" if failures else "every violation caught")
        return 1 if failures else 0
    root = os.path.abspath(args.root)
    errors, files, rules = check(root)
    for e in errors:
        print(e)
    print(f"{len(errors)} violation(s) of the layering rules of {RULES_DOC} "
          f"({len(rules.include)} include rules, {len(rules.link)} link rules, {files} files)")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
