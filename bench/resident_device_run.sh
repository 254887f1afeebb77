#!/usr/bin/env bash
# The resident step loop on a GPU machine, in one call: resident_loop_bench on the register and
# the shared-memory kernels (before/after in the same process kind), gpu_resident_loop_test and
# gpu_resident_cellular_test, then, when CELLULAR_MODEL is set, bench/cellular_bench.py with
# resident_step_loop on that model (it must be one the loop runs whole, e.g. lstm256_only of
# bench/cellular_make_models.py: a Dense head sends the step-level side to chunks).
#
# Packing (on the build machine): bench/pack_gpu_device_build.sh with BINS naming the three
# binaries (and rnnserve for the cellular stage), MINIMAL_LIBS=1; the cellular stage also needs
# the Python client (client/python/rnnserve_client with its rnnserve_v1.binpb) in PYLIBS and
# grpcio/numpy on the machine. The tests look for fixtures under the build's source directory:
# SOURCE_DIR (that path) is linked to this checkout.
#
# usage: bench/resident_device_run.sh OUT_DIR
# env:   DEVBUILD (default .devbuild-gpu), SOURCE_DIR, CELLULAR_MODEL, PYLIBS, CELLULAR_ARGS
#        (default: --chunk-steps 32 --procs 8 --clients 256 --seconds 5 --loads 0.7 0.9
#        --mixes uniform longtail)
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT_DIR=$1
DEVBUILD=${DEVBUILD:-$ROOT/.devbuild-gpu}
BIN=$DEVBUILD/bin
mkdir -p "$OUT_DIR"
export LD_LIBRARY_PATH=$DEVBUILD/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
for mod in cudnn cublas cuda_nvrtc; do
  d=$(python3 -c "import nvidia.$mod as m; print(list(m.__path__)[0] + '/lib')" 2>/dev/null) &&
    export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$d
done
if [ -n "${SOURCE_DIR:-}" ] && [ ! -e "$SOURCE_DIR" ]; then
  mkdir -p "$(dirname "$SOURCE_DIR")" && ln -s "$ROOT" "$SOURCE_DIR"
fi
SUMMARY=$OUT_DIR/summary.txt
{
  date -u
  cat "$DEVBUILD/COMMIT" 2>/dev/null
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
} > "$SUMMARY"
# The bench first: a loop that never takes a join would hang it, so a timeout stops the rest.
for cr in lstm:1 lstm:0 gru:1 gru:0; do
  c=${cr%:*} r=${cr#*:}
  timeout 60 stdbuf -oL "$BIN/resident_loop_bench" --cell "$c" --register "$r" \
    > "$OUT_DIR/bench-$c-register$r.txt" 2>&1
  rc=$?
  echo "resident_loop_bench --cell $c --register $r: exit $rc" >> "$SUMMARY"
  [ "$rc" = 124 ] && exit 1
done
for t in gpu_resident_loop_test gpu_resident_cellular_test; do
  (cd "$ROOT" && timeout 120 "$BIN/$t" --gtest_color=no) > "$OUT_DIR/$t.log" 2>&1
  echo "$t: exit $?" >> "$SUMMARY"
done
if [ -n "${CELLULAR_MODEL:-}" ]; then
  PYTHONPATH=${PYLIBS:-}${PYTHONPATH:+:$PYTHONPATH} timeout "${CELLULAR_TIMEOUT:-300}" \
    python3 "$ROOT/bench/cellular_bench.py" --rnnserve "$BIN/rnnserve" \
    --model-dir "$CELLULAR_MODEL" --kind KIND_GPU --out "$OUT_DIR/cellular" \
    --cellular-extra "resident_step_loop: true" --metrics-port 18950 \
    ${CELLULAR_ARGS:---chunk-steps 32 --procs 8 --clients 256 --seconds 5 --loads 0.7 0.9 --mixes uniform longtail} \
    > "$OUT_DIR/cellular.log" 2>&1
  echo "cellular: exit $?" >> "$SUMMARY"
  tar -C "$OUT_DIR" -czf "$OUT_DIR/cellular.tar.gz" cellular && rm -rf "$OUT_DIR/cellular"
fi
cat "$SUMMARY"
