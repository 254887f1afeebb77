# shellcheck shell=bash
# Sourced by deploy/install_deps.sh, deploy/serve.sh and tests/run.sh: a line for each step that
# can take minutes, and for a long command (a build, the tests) its progress every 10 % instead
# of each of its lines. The whole output of such a command goes to a log file, whose last lines
# are printed if it fails.

# step MESSAGE: "<script>: MESSAGE".
step() { echo "$(basename "$0"): $*"; }

# run_logged LOG CMD...: runs CMD, its output to LOG. Prints "  N%" as the progress lines of
# make ("[ 42%] ..."), ninja ("[12/345] ...") or ctest ("  12/345 Test ...") cross each 10 %,
# and every failed test's line (not the skipped ones) at once. On failure: LOG's last 40 lines, and CMD's exit status.
run_logged() {
  local log=$1 rc errexit=$-
  shift
  mkdir -p "$(dirname "$log")"
  set +e
  "$@" 2>&1 | tee "$log" | awk '
    function show(p) { p = int(p / 10) * 10; if (p > last) { last = p; print "  " p "%"; fflush() } }
    BEGIN { last = -1 }
    match($0, /^\[ *[0-9]+%\]/) { s = substr($0, RSTART + 1, RLENGTH - 3); show(s + 0); next }
    match($0, /^\[[0-9]+\/[0-9]+\]/) { split(substr($0, 2, RLENGTH - 2), f, "/"); show(100 * f[1] / f[2]); next }
    match($0, /^ *[0-9]+\/[0-9]+ Test +#/) {
      split($1, f, "/"); show(100 * f[1] / f[2])
      if ($0 ~ /\*\*\*/ && $0 !~ /Skipped/) { print "  " $0; fflush() }
    }'
  rc=${PIPESTATUS[0]}
  case $errexit in *e*) set -e ;; esac
  if [ "$rc" -ne 0 ]; then
    echo "---- last lines of $log"
    tail -n 40 "$log"
    echo "---- $(basename "$0"): '$*' failed with exit status $rc; its whole output: $log"
  fi
  return "$rc"
}
