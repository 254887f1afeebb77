#!/usr/bin/env bash
# One run on a GPU machine of everything that needs a GPU: the gpu-labelled test binaries, the
# engine-vs-PyTorch benchmark (bench/gpu_peers.py) and the server benchmark on the GPU engine
# (bench/server_bench.sh with bench/server_models_gpu and perf_analyzer).
#
# Binaries come prebuilt (bench/pack_gpu_device_build.sh packs them with the shared libraries
# they link, into .devbuild-gpu/{bin,lib}); the machine needs the NVIDIA driver, cuDNN 9 and
# cuBLAS (the CUDA install or PyTorch's wheels), Python 3 with numpy and PyTorch.
#
# usage: bench/gpu_device_run.sh [OUT_DIR ($OUT or build/gpu-device-run)]
# env:   STAGES  which parts to run, in order (default "tests server peers"; "path" times a
#                small request's engine call layer by layer, bench/gpu_request_path.cc)
#        DEVBUILD  the packed build (default .devbuild-gpu)
#        GPU_TESTS  the test binaries of the "tests" stage (default: every gpu-labelled one)
#        "cpucheck" times the CPU engine (LSTM H=256, c=1) under each kernel set;
#        "profile" runs perf on the server under load (pack with PERF=/usr/bin/perf);
#        "floor" measures gRPC's own cost a request here (bench/grpc_floor.sh);
#        "cellular" runs bench/cellular_bench.py (step-level against request-level batching) on
#        CELLULAR_MODEL (default bench/server_models/lstm256) with CELLULAR_ARGS, for
#        DEVBUILD/bin/rnnserve and, when present, DEVBUILD/bin/rnnserve-before; it needs grpcio,
#        protobuf and the Python client's package (rnnserve_client) on PYTHONPATH (PYLIBS);
#        "c1" runs bench/server_batching_c1.sh once per C1_FLAGS entry (space-separated; flags
#        of one entry joined by commas; "default" for none);
#        "paired" compares DEVBUILD/bin/rnnserve-before with DEVBUILD/bin/rnnserve
#        (bench/server_paired_bench.sh; PAIRED_CASES "model:concurrency ...", PAIRED_ROUNDS)
# Writes OUT_DIR/gpu-tests.log, OUT_DIR/gpu-peers.md (+ .log), OUT_DIR/server-bench.tar.gz
# (+ server-bench.log), OUT_DIR/request-path-*.txt and OUT_DIR/summary.txt.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT_DIR=${1:-${OUT:-$ROOT/build/gpu-device-run}}
DEVBUILD=${DEVBUILD:-$ROOT/.devbuild-gpu}
STAGES=${STAGES:-tests server peers}
BIN=$DEVBUILD/bin
mkdir -p "$OUT_DIR"
export LD_LIBRARY_PATH=$DEVBUILD/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# cuDNN and cuBLAS: PyTorch's wheels when the CUDA install has none.
for mod in cudnn cublas cuda_nvrtc; do
  d=$(python3 -c "import nvidia.$mod as m; print(list(m.__path__)[0] + '/lib')" 2>/dev/null) &&
    export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$d
done
SUMMARY=$OUT_DIR/summary.txt
{
  echo "date: $(date -u +%Y-%m-%dT%H:%MZ)"
  # The packed binaries' commit (pack_gpu_device_build.sh), else the tree's.
  echo "commit: $(tr '\n' ' ' 2>/dev/null < "$DEVBUILD/COMMIT" ||
    git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || cat "$ROOT/COMMIT" 2>/dev/null)"
  nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv,noheader
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores"
  echo "torch: $(python3 -c 'import torch; print(torch.__version__, torch.backends.cudnn.version())' 2>&1)"
} > "$SUMMARY"

# perf_analyzer on cores of its own, the last quarter of the machine's (on 8 cores or more), and
# the server on the rest.
NCPU=$(nproc)
SERVER_CPU_LIST=""; CLIENT_CPU_LIST=""; SERVER_PIN=(); CLIENT_PIN=()
if [ "$NCPU" -ge 8 ]; then
  SERVER_CPU_LIST=0-$((NCPU - NCPU / 4 - 1)); CLIENT_CPU_LIST=$((NCPU - NCPU / 4))-$((NCPU - 1))
  SERVER_PIN=(taskset -c "$SERVER_CPU_LIST"); CLIENT_PIN=(taskset -c "$CLIENT_CPU_LIST")
fi
source "$ROOT/bench/server_common.sh"

# A folder of many small files under OUT_DIR as one .tar.gz: the device machine sends back only
# a limited number of files.
pack_dir() {
  [ -d "$OUT_DIR/$1" ] || return 0
  tar -C "$OUT_DIR" -czf "$OUT_DIR/$1.tar.gz" "$1" && rm -rf "${OUT_DIR:?}/$1"
}

run_tests() {
  local log=$OUT_DIR/gpu-tests.log
  : > "$log"
  for t in ${GPU_TESTS:-gpu_availability_test gpu_conformance_test gpu_engine_test example_model_test \
    gpu_layers_test gpu_host_io_test gpu_fused_lstm_test gpu_torch_test gpu_multi_gpu_test \
    cellular_conformance_test slot_states_test gpu_fused_half_test}; do
    echo "=== $t" >> "$log"
    local start=$SECONDS
    (cd "$ROOT" && timeout 240 "$BIN/$t" --gtest_color=no) >> "$log" 2>&1
    local rc=$?
    echo "exit $rc ($((SECONDS - start)) s)" >> "$log"
    echo "$t: exit $rc, $(grep -c '^\[       OK \]' <(sed -n "/^=== $t\$/,\$p" "$log")) ok," \
      "$(grep -c '^\[  FAILED  \].*ms)$' <(sed -n "/^=== $t\$/,\$p" "$log")) failed," \
      "$(grep -c '^\[  SKIPPED \].*ms)$' <(sed -n "/^=== $t\$/,\$p" "$log")) skipped" >> "$SUMMARY"
  done
}

run_server() {  # SERVER_MODEL_REPO: another repository (default bench/server_models_gpu)
  local dir=$OUT_DIR/server-bench${SERVER_TAG:+-$SERVER_TAG}
  SERVER_CPUS=${SERVER_CPUS:-$SERVER_CPU_LIST} CLIENT_CPUS=${CLIENT_CPUS:-$CLIENT_CPU_LIST} \
    LEVELS=${LEVELS:-1 2 4 8 16 32 64 128 256} INTERVAL_MS=${INTERVAL_MS:-1000} \
    PERF_ANALYZER=$BIN/perf_analyzer RNNSERVE=$BIN/rnnserve \
    MODEL_REPO=${SERVER_MODEL_REPO:-$ROOT/bench/server_models_gpu} \
    timeout 330 bash "$ROOT/bench/server_bench.sh" "$DEVBUILD" "$dir" > "$dir.log" 2>&1
  echo "server bench: exit $?" >> "$SUMMARY"
  tar -C "$OUT_DIR" -czf "$dir.tar.gz" "$(basename "$dir")" && rm -rf "$dir"
}

run_paired() {  # A/B of the server binaries: $BIN/rnnserve-before against $BIN/rnnserve
  # (PAIRED_A / PAIRED_B: other executables, e.g. scripts that add flags)
  local a=${PAIRED_A:-$BIN/rnnserve-before} b=${PAIRED_B:-$BIN/rnnserve}
  [ -x "$a" ] || { echo "paired: no $a" >> "$SUMMARY"; return; }
  for cfg in ${PAIRED_CASES:-tiny_lstm_batched:64 tiny_lstm_batched:256 tiny_lstm:64}; do
    local model=${cfg%%:*} c=${cfg##*:}
    SERVER_CPUS=$SERVER_CPU_LIST CLIENT_CPUS=$CLIENT_CPU_LIST \
      ROUNDS=${PAIRED_ROUNDS:-3} MODEL=$model CONCURRENCY=$c INTERVAL_MS=1000 \
      MODEL_REPO=$ROOT/bench/server_models_gpu PERF_ANALYZER=$BIN/perf_analyzer \
      timeout 200 bash "$ROOT/bench/server_paired_bench.sh" "$a" "$b" \
      "$OUT_DIR/paired-$model-c$c" > "$OUT_DIR/paired-$model-c$c.log" 2>&1
    echo "paired $model c=$c: exit $?; $(grep '^server CPU' "$OUT_DIR/paired-$model-c$c.log")" >> "$SUMMARY"
    pack_dir "paired-$model-c$c"
  done
}

run_profile() {  # where the server's CPU goes under load: perf, per-thread CPU, context switches
  [ -x "$BIN/perf" ] || { echo "profile: no $BIN/perf (pack with PERF=...)" >> "$SUMMARY"; return; }
  local port=18731 metrics_port=18732 c=${PROFILE_CONCURRENCY:-64}
  local repo=${PROFILE_REPO:-$ROOT/bench/server_models_gpu}
  "${SERVER_PIN[@]}" "$BIN/rnnserve" --model-repository "$repo" \
    --port $port --metrics-port $metrics_port --http-port 0 --log-level warning \
    --allow-symlinks-outside-repository --max-concurrent-per-model=512 ${PROFILE_SERVER_ARGS:-} &
  local pid=$!
  wait_for_server $port $metrics_port "$(find "$repo" -mindepth 2 -maxdepth 2 -name config.pbtxt | wc -l)"
  for model in ${PROFILE_MODELS:-tiny_lstm_batched tiny_lstm}; do
    local p=$OUT_DIR/profile${PROFILE_TAG:+-$PROFILE_TAG}-$model-c$c
    "${CLIENT_PIN[@]}" "$BIN/perf_analyzer" -u 127.0.0.1:$port -i grpc -m "$model" \
      --shape x:10,8 --concurrency-range "$c" --measurement-interval 3000 \
      --stability-percentage 999 --max-trials 3 > "$p-perf_analyzer.log" 2>&1 &
    local client=$!
    sleep 3
    "$BIN/perf" record -F 999 -g -p $pid -o "$p.data" -- sleep 4 > "$p-record.log" 2>&1
    "$BIN/perf" stat -e task-clock,context-switches,cpu-migrations -p $pid -- sleep 2 \
      > "$p-stat.txt" 2>&1
    top -H -b -d 2 -n 2 -p $pid 2>/dev/null | awk '/^top -/{n++} n==2' | head -45 > "$p-threads.txt"
    wait $client
    "$BIN/perf" report -i "$p.data" --stdio --no-children -g none --sort dso,sym --percent-limit 0.3 \
      > "$p-symbols.txt" 2>&1
    "$BIN/perf" report -i "$p.data" --stdio --no-children -g none --sort dso --percent-limit 0.1 \
      > "$p-dso.txt" 2>&1
    "$BIN/perf" report -i "$p.data" --stdio --no-children -g none --sort comm --percent-limit 0.1 \
      > "$p-threads-perf.txt" 2>&1
    rm -f "$p.data"
    echo "profile $model c=$c: $(grep -m1 Throughput "$p-perf_analyzer.log")" >> "$SUMMARY"
  done
  kill $pid; wait $pid 2>/dev/null
}

run_cpucheck() {  # the CPU engine on this host: LSTM H=256 T=50 through the server, per kernel set
  if [ ! -d "$ROOT/bench/server_models/lstm256" ]; then  # a pack without SOURCES=1
    echo "cpucheck: skipped, no $ROOT/bench/server_models/lstm256 (pack_gpu_device_build.sh with SOURCES=1 packs it)" >> "$SUMMARY"
    return
  fi
  for set in "" avx2 plain; do
    RNNSERVE_CPU_KERNELS=$set "${SERVER_PIN[@]}" "$BIN/rnnserve" \
      --model-repository "$ROOT/bench/server_models" --port 18901 --metrics-port 18902 --http-port 0 \
      --log-level info > "$OUT_DIR/cpucheck-${set:-best}.log" 2>&1 &
    local pid=$!
    wait_for_server 18901 18902 lstm256
    "${CLIENT_PIN[@]}" "$BIN/perf_analyzer" -u 127.0.0.1:18901 -i grpc -m lstm256 \
      --shape x:50,16 --concurrency-range 1 --measurement-interval 1500 \
      --stability-percentage 999 --max-trials 3 \
      -f "$OUT_DIR/cpucheck-${set:-best}.csv" > /dev/null 2>&1
    echo "cpucheck ${set:-best}: compute infer, p50 µs $(tail -1 "$OUT_DIR/cpucheck-${set:-best}.csv" | cut -d, -f7,10);" \
      "$(grep -m1 'lstm256 v1 instance' "$OUT_DIR/cpucheck-${set:-best}.log" | grep -o 'CPU kernels: [a-z0-9]*')" >> "$SUMMARY"
    kill $pid; wait $pid 2>/dev/null
  done
}

run_floor() {  # the gRPC floor of a request on this host, per threading design (grpc_floor.sh)
  FLOOR=$BIN/grpc_floor SERVER_CPUS=$SERVER_CPU_LIST CLIENT_CPUS=$CLIENT_CPU_LIST \
    PERF_ANALYZER=$BIN/perf_analyzer INTERVAL_MS=1000 \
    timeout 240 bash "$ROOT/bench/grpc_floor.sh" "$DEVBUILD" "$OUT_DIR/floor" ${FLOOR_LEVELS:-1 64 256} \
    > "$OUT_DIR/floor.log" 2>&1
  echo "floor: exit $?" >> "$SUMMARY"
  pack_dir floor
}

run_path() {
  for m in tiny_lstm lstm256; do
    (cd "$ROOT" && timeout 120 "$BIN/gpu_request_path" "bench/server_models/$m/1/model.h5" \
      --steps "$([ $m = tiny_lstm ] && echo 10 || echo 50)") > "$OUT_DIR/request-path-$m.txt" 2>&1
    echo "request path $m: exit $?" >> "$SUMMARY"
  done
}

run_cellular() {
  local model=${CELLULAR_MODEL:-$ROOT/bench/server_models/lstm256}
  local args=${CELLULAR_ARGS:---chunk-steps 32 --procs 8 --clients 256 --seconds 6 --loads 0.5 0.7 0.9 1.2}
  for bin in rnnserve rnnserve-before; do
    [ -x "$BIN/$bin" ] || continue
    local out=$OUT_DIR/cellular${CELLULAR_TAG:+-$CELLULAR_TAG}-$bin
    PYTHONPATH=${PYLIBS:-}${PYTHONPATH:+:$PYTHONPATH} DEVBUILD=$DEVBUILD \
      timeout ${CELLULAR_TIMEOUT:-300} bash "$ROOT/bench/gpu_cellular_run.sh" "$out" "$model" \
      --rnnserve "$BIN/$bin" --metrics-port 18950 $args > "$out.log" 2>&1
    echo "cellular $bin: exit $?" >> "$SUMMARY"
    tar -C "$OUT_DIR" -czf "$out.tar.gz" "$(basename "$out")" && rm -rf "$out"
  done
}

run_chunks() {  # a step-level batching chunk's engine call by batch size (gpu_request_path --chunks)
  (cd "$ROOT" && timeout 200 "$BIN/gpu_request_path" "${CHUNKS_MODEL:-bench/server_models/lstm256/1/model.h5}" \
    --chunks --steps "${CHUNKS_STEPS:-32}" --reps "${CHUNKS_REPS:-300}") > "$OUT_DIR/chunks.txt" 2>&1
  echo "chunks: exit $?" >> "$SUMMARY"
}

run_c1() {  # batching on vs off at concurrency 1 (server_batching_c1.sh), per C1_FLAGS setting
  local i=0
  for flags in ${C1_FLAGS:-default}; do
    i=$((i + 1))
    [ "$flags" = default ] && flags=""
    SERVER_ARGS=${flags//,/ } SERVER_CPUS=$SERVER_CPU_LIST CLIENT_CPUS=$CLIENT_CPU_LIST \
      MODEL_REPO=$ROOT/bench/server_models_gpu RNNSERVE=$BIN/rnnserve RNNSERVE_CLI=$BIN/rnnserve-cli \
      PERF_ANALYZER=$BIN/perf_analyzer WINDOW_MS=${C1_WINDOW_MS:-1000} \
      timeout 200 bash "$ROOT/bench/server_batching_c1.sh" "$DEVBUILD" "${C1_ROUNDS:-5}" \
      > "$OUT_DIR/c1-$i.txt" 2>&1
    echo "c1 ${flags:-default}: $(tail -1 "$OUT_DIR/c1-$i.txt")" >> "$SUMMARY"
  done
}

run_peers() {
  (cd "$ROOT" && PYTHONUNBUFFERED=1 timeout 420 python3 bench/gpu_peers.py \
    --binary "$BIN/gpu_peers" --out "$OUT_DIR/gpu-peers.md" ${PEERS_ARGS:-}) \
    > "$OUT_DIR/gpu-peers.log" 2>&1
  echo "gpu peers: exit $?" >> "$SUMMARY"
}

for stage in $STAGES; do
  start=$SECONDS
  "run_$stage"
  echo "stage $stage: $((SECONDS - start)) s" >> "$SUMMARY"
done
cat "$SUMMARY"
