#!/usr/bin/env bash
# bench/pack_gpu_device_build.sh on a stand-in build tree (every packed binary a copy of a real
# ELF executable, /bin/true): a perf_analyzer that PATH finds through a pyenv shim is packed as
# the binary the shim runs, a wrapper script that is not a shim is refused naming
# PERF_ANALYZER, and SOURCES=1 packs bench/server_models (the cpucheck stage's repository of
# bench/gpu_device_run.sh) beside bench/server_models_gpu.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
PACK="$ROOT/bench/pack_gpu_device_build.sh"
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
ELF=/bin/true
fail() { echo "FAIL: $*"; exit 1; }

build=$W/build
for b in server/rnnserve bench/gpu_peers bench/gpu_request_path bench/cpu_rnn_bench \
  bench/grpc_floor client/rnnserve-cli; do
  mkdir -p "$(dirname "$build/$b")"
  cp "$ELF" "$build/$b"
done
mkdir -p "$build/tests"
for t in gpu_availability_test gpu_conformance_test gpu_engine_test example_model_test \
  gpu_layers_test gpu_host_io_test gpu_fused_lstm_test gpu_fused_half_test gpu_torch_test \
  gpu_multi_gpu_test cellular_conformance_test slot_states_test gpu_metrics_test; do
  cp "$ELF" "$build/tests/$t"
done

# A pyenv installation as PATH sees it: shims/perf_analyzer is pyenv's bash shim; `pyenv which`
# names the version's binary.
mkdir -p "$W/pyenv/shims" "$W/pyenv/bin" "$W/pyenv/versions/3.11/bin"
cp "$ELF" "$W/pyenv/versions/3.11/bin/perf_analyzer"
cat > "$W/pyenv/shims/perf_analyzer" <<SHIM
#!/usr/bin/env bash
set -e
program="\${0##*/}"
export PYENV_ROOT="$W/pyenv"
exec "$W/pyenv/bin/pyenv" exec "\$program" "\$@"
SHIM
cat > "$W/pyenv/bin/pyenv" <<PYENV
#!/usr/bin/env bash
[ "\$1" = which ] && [ "\$2" = perf_analyzer ] && { echo "$W/pyenv/versions/3.11/bin/perf_analyzer"; exit 0; }
exit 1
PYENV
chmod +x "$W/pyenv/shims/perf_analyzer" "$W/pyenv/bin/pyenv"

# SOURCES=1 copies ../shared/models when it exists; a copy of the tree without it keeps the pack
# small and the test independent of what lies beside the checkout.
src=$W/tree/rnnserve
mkdir -p "$src"
(cd "$ROOT" && tar -cf - bench tests/fixtures/example models/examples) | tar -C "$src" -xf -
git -C "$src" init -q && git -C "$src" -c user.email=t@t -c user.name=t commit -q --allow-empty -m t

dest=$W/pack
PATH="$W/pyenv/shims:$W/pyenv/bin:$PATH" SOURCES=1 bash "$src/bench/pack_gpu_device_build.sh" \
  "$build" "$dest" > "$W/pack.log" 2>&1 || { cat "$W/pack.log"; fail "the pack failed"; }
[ "$(head -c 4 "$dest/bin/perf_analyzer" | tail -c 3)" = ELF ] ||
  fail "bin/perf_analyzer is not the binary: $(head -c 80 "$dest/bin/perf_analyzer")"
echo "PASS PyenvShimResolvedToTheBinary"
for m in "$ROOT"/bench/server_models/*/; do
  [ -d "$dest/src/bench/server_models/$(basename "$m")" ] ||
    fail "SOURCES=1 did not pack bench/server_models/$(basename "$m")"
done
[ -d "$dest/src/bench/server_models_gpu" ] || fail "SOURCES=1 did not pack bench/server_models_gpu"
echo "PASS SourcesPackTheCpucheckModels"

cat > "$W/wrapper" <<'WRAP'
#!/bin/sh
exec /opt/somewhere/perf_analyzer "$@"
WRAP
chmod +x "$W/wrapper"
if PERF_ANALYZER="$W/wrapper" bash "$PACK" "$build" "$W/pack2" > "$W/pack2.log" 2>&1; then
  fail "a wrapper script was packed as perf_analyzer"
fi
grep -q "not an ELF executable.*set PERF_ANALYZER" "$W/pack2.log" ||
  fail "the refusal does not say why: $(cat "$W/pack2.log")"
echo "PASS WrapperScriptRefusedNamingPerfAnalyzer"
