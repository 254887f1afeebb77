#!/usr/bin/env bash
# The HTTP library choice (docs/architecture.md, "HTTP"): a hello server on cpp-httplib (a
# thread per connection, TCP_NODELAY, backlog SOMAXCONN, as server/http/ sets it up) and one
# on libevent's evhttp (one event loop, as TF Serving uses it), each answering GET with a
# 14-byte JSON; curl (keep-alive) sends N requests one after another, then with 64 in
# parallel. Needs libcpp-httplib-dev and libevent-dev.
#   bench/http_library/run.sh [ROUNDS (3)]
set -euo pipefail
dir=$(cd "$(dirname "$0")" && pwd)
out=$(mktemp -d)
trap 'kill "${pids[@]}" 2>/dev/null || true; rm -rf "$out"' EXIT
g++ -O2 -o "$out/httplib_hello" "$dir/httplib_hello.cc" -lcpp-httplib -pthread
g++ -O2 -o "$out/evhttp_hello" "$dir/evhttp_hello.cc" -levent
pids=()
"$out/httplib_hello" 19801 & pids+=($!)
"$out/evhttp_hello" 19802 & pids+=($!)
sleep 1
run() {  # run NAME PORT CONCURRENCY N: requests/s of N requests
  local name=$1 port=$2 c=$3 n=$4
  local parallel=()
  [ "$c" -gt 1 ] && parallel=(--parallel --parallel-max "$c")
  local s e ok
  s=$(date +%s.%N)
  ok=$(curl -s --no-progress-meter -o /dev/null -w '%{http_code}\n' "${parallel[@]}" \
    "http://127.0.0.1:$port/v2/health/ready?[1-$n]" | grep -c 200)
  e=$(date +%s.%N)
  python3 -c "print('| $name | $c | $ok | %d |' % round($n / ($e - $s)))"
}
echo "| library | concurrency | answered | req/s |"
echo "|---|---|---|---|"
for _ in $(seq "${1:-3}"); do
  for lib in httplib:19801 evhttp:19802; do
    run "${lib%%:*}" "${lib#*:}" 1 5000
    run "${lib%%:*}" "${lib#*:}" 64 40000
  done
done
