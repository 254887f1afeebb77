#!/usr/bin/env bash
# deploy/install_deps.sh when pip fails: the script fails, and pip's own message is shown. The
# machine is stood in for on PATH: dpkg-query says every Debian package is installed, and a
# python3 imports nothing and whose pip refuses with a message of its own.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
mkdir -p "$W/bin"
cat > "$W/bin/dpkg-query" <<'FAKE'
#!/bin/sh
printf 'install ok installed'
FAKE
cat > "$W/bin/python3" <<'FAKE'
#!/bin/sh
if [ "$1" = -m ] && [ "$2" = pip ]; then
  echo "ERROR: Could not find a version that satisfies the requirement grpcio-tools (stand-in index)" >&2
  exit 1
fi
exit 1  # python3 -c "import X": not installed
FAKE
chmod +x "$W/bin/dpkg-query" "$W/bin/python3"

set +e
PATH="$W/bin:$PATH" TMPDIR="$W" "$ROOT/deploy/install_deps.sh" > "$W/out.log" 2>&1
rc=$?
set -e
cat "$W/out.log"
[ "$rc" -ne 0 ] || { echo "FAIL: install_deps.sh exited 0 although pip failed"; exit 1; }
grep -q "Could not find a version that satisfies the requirement grpcio-tools" "$W/out.log" ||
  { echo "FAIL: pip's message is not shown"; exit 1; }
grep -q "installing PyPI packages with pip" "$W/out.log" ||
  { echo "FAIL: no progress line before pip"; exit 1; }
echo "PASS PipFailureFailsTheScriptWithPipsMessage"

# The progress the scripts print for a long command (deploy/progress.sh): a 600-step build is
# shown as at most 11 lines (each 10 %), and a failure shows the command's last lines.
source "$ROOT/deploy/progress.sh"
# shellcheck disable=SC2016  # the loop runs in the child shell
run_logged "$W/build.log" bash -c 'for i in $(seq 1 600); do echo "[$i/600] Building CXX object o$i.o"; done' \
  > "$W/progress.out"
lines=$(wc -l < "$W/progress.out")
if [ "$lines" -gt 11 ] || ! grep -q "^  100%$" "$W/progress.out"; then
  cat "$W/progress.out"; echo "FAIL: $lines progress lines for 600 build steps"; exit 1
fi
[ "$(wc -l < "$W/build.log")" -eq 600 ] || { echo "FAIL: the log lacks the build's lines"; exit 1; }
if run_logged "$W/fail.log" bash -c 'echo "[ 10%] Building a.o"; echo "a.cc:1: error: boom"; exit 2' \
  > "$W/fail.out"; then
  echo "FAIL: a failed command was reported as passing"; exit 1
fi
grep -q "a.cc:1: error: boom" "$W/fail.out" || { cat "$W/fail.out"; echo "FAIL: no error shown"; exit 1; }
echo "PASS ProgressEveryTenPercentAndTheErrorOnFailure"
