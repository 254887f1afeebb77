#!/usr/bin/env bash
# Runs the GPU image's payload (deploy/docker/gpu_payload.sh) on a GPU machine: every
# gpu-labelled test binary, then one served predict: the image's rnnserve on models/examples,
# its rnnserve-cli asking gRPC health, predict (compared with Keras's numbers) and metadata
# (which engine runs each layer), then SIGTERM and the drain. Run it from the root of a
# checkout of the commit the payload was built from (the tests read its fixtures under /src,
# the source directory compiled in, which this links to the checkout).
#
#   build/rnnserve-gpu-payload/run_gpu_payload.sh OUT_DIR
# Writes OUT_DIR/gpu-payload-tests.log, OUT_DIR/gpu-payload-serve.log and
# OUT_DIR/gpu-payload-summary.txt.
set -uo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
REPO="$PWD"
OUT_DIR="$(mkdir -p "${1:-${OUT:-$REPO/build/gpu-payload-run}}" && cd "${1:-${OUT:-$REPO/build/gpu-payload-run}}" && pwd)"
BIN="$HERE/bin"
SUMMARY="$OUT_DIR/gpu-payload-summary.txt"
export LD_LIBRARY_PATH="$HERE/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# cuDNN, cuBLAS and NVRTC: the payload's own (INCLUDE_CUDA=1), the CUDA install, or PyTorch's
# wheels.
for d in /usr/local/cuda/lib64 /usr/local/cuda/lib; do
  [ -d "$d" ] && LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$d"
done
for mod in cudnn cublas cuda_nvrtc cuda_runtime; do
  d=$(python3 -c "import nvidia.$mod as m; print(list(m.__path__)[0] + '/lib')" 2>/dev/null) &&
    LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$d"
done
export LD_LIBRARY_PATH

if [ "$(readlink -f /src 2>/dev/null)" != "$REPO" ]; then
  if [ -e /src ] && [ ! -L /src ]; then
    echo "warning: /src exists and is not this checkout; tests that read fixtures will fail"
  else
    ln -sfn "$REPO" /src 2>/dev/null || sudo ln -sfn "$REPO" /src ||
      echo "warning: cannot link /src to $REPO; tests that read fixtures will fail"
  fi
fi

{
  echo "date: $(date -u +%Y-%m-%dT%H:%MZ)"
  echo "payload: commit $(cat "$HERE/COMMIT"), image $(cat "$HERE/IMAGE")"
  echo "checkout: $(git -C "$REPO" rev-parse --short HEAD 2>/dev/null)"
  nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv,noheader
  echo "missing libraries: $(ldd "$BIN"/* 2>/dev/null | grep 'not found' | sort -u | xargs)"
} > "$SUMMARY"

log="$OUT_DIR/gpu-payload-tests.log"
: > "$log"
failed=0
for t in "$BIN"/gpu_*_test "$BIN"/example_model_test; do
  name="$(basename "$t")"
  echo "=== $name" >> "$log"
  start=$SECONDS
  (cd "$REPO" && timeout 300 "$t" --gtest_color=no) >> "$log" 2>&1
  rc=$?
  [ "$rc" = 0 ] || failed=1
  section="$(sed -n "/^=== $name\$/,\$p" "$log")"
  echo "$name: exit $rc ($((SECONDS - start)) s), $(grep -c '^\[       OK \]' <<<"$section") ok," \
    "$(grep -c '^\[  FAILED  \].*ms)$' <<<"$section") failed," \
    "$(grep -c '^\[  SKIPPED \].*ms)$' <<<"$section") skipped" >> "$SUMMARY"
done

# One served predict, as the image serves it (entrypoint arguments of gpu.Dockerfile).
serve_log="$OUT_DIR/gpu-payload-serve.log"
port=$((20000 + RANDOM % 20000))
"$BIN/rnnserve" --model-repository "$REPO/models/examples" --host 127.0.0.1 --port "$port" \
  --metrics-port 0 --http-port 0 --log-level info > "$serve_log" 2>&1 &
pid=$!
healthy=0
for _ in $(seq 120); do
  if "$BIN/rnnserve-cli" health --server "127.0.0.1:$port" >/dev/null 2>&1; then healthy=1; break; fi
  sleep 1
done
echo "serve: healthy=$healthy" >> "$SUMMARY"
npz="$OUT_DIR/gpu-payload-predict.npz"
if "$BIN/rnnserve-cli" predict --server "127.0.0.1:$port" --model waveform_lstm \
    --input "$REPO/models/examples/waveform_lstm/sample_input.json" --output "$npz" >> "$serve_log" 2>&1 &&
  python3 - "$npz" "$REPO/tests/fixtures/example/expected.npy" >> "$SUMMARY" 2>&1 <<'PY'
import sys
import numpy as np
got = np.load(sys.argv[1])["probabilities"]
want = np.load(sys.argv[2])
err = float(np.max(np.abs(got - want)))
ok = got.shape == want.shape and np.allclose(got, want, rtol=1e-5, atol=1e-6)
print(f"serve: predict {got.shape}, max |diff| vs Keras {err:.2e}: {'PASS' if ok else 'FAIL'}")
sys.exit(0 if ok else 1)
PY
then :; else failed=1; echo "serve: predict FAILED (see gpu-payload-serve.log)" >> "$SUMMARY"; fi
"$BIN/rnnserve-cli" metadata --server "127.0.0.1:$port" --model waveform_lstm >> "$serve_log" 2>&1
grep -i "engine\|cuda\|cudnn" "$serve_log" | head -5 | sed 's/^/serve: /' >> "$SUMMARY"
kill -TERM "$pid"
wait "$pid"
rc=$?
echo "serve: SIGTERM, exit $rc" >> "$SUMMARY"
[ "$rc" = 0 ] || failed=1
cat "$SUMMARY"
exit "$failed"
