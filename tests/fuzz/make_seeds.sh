#!/usr/bin/env bash
# Writes the seed corpora of the request-path and config.pbtxt fuzz targets from the protobuf
# text below (protoc --encode, Debian's protobuf-compiler): one valid request of each kind the
# targets take, plus a few near misses. Each request seed starts with the target's selector
# byte (fuzz target sources say what its bits pick).
#
#   tests/fuzz/make_seeds.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
out=tests/fuzz/corpus

# seed TARGET NAME SELECTOR MESSAGE TEXT
seed() {
  local dir="$out/$1"
  mkdir -p "$dir"
  { printf "\\x$(printf %02x "$3")"; protoc -Iproto --encode="$4" \
      proto/rnnserve/v1/rnnserve.proto proto/inference/grpc_service.proto \
      proto/tensorflow_serving/apis/predict.proto \
      proto/tensorflow_serving/apis/get_model_metadata.proto <<<"$5"; } >"$dir/$2"
}

# text_seed TARGET NAME SELECTOR TEXT: a seed whose wire part is text (JSON, a path).
text_seed() {
  mkdir -p "$out/$1"
  { printf "\\x$(printf %02x "$3")"; printf '%s' "$4"; } >"$out/$1/$2"
}

floats() {  # N values
  local n=$1 i
  for ((i = 0; i < n; i++)); do printf 'float_val: 0.%d ' $((i % 9 + 1)); done
}

input_2x5x2="inputs { key: \"waveform\" value { dtype: TYPE_FP32 shape: [2, 5, 2] $(floats 20) } }"
seed predict_request_fuzz predict 4 rnnserve.v1.PredictRequest \
  "model_spec { name: \"waveform_lstm\" } $input_2x5x2"
seed predict_request_fuzz predict_lengths_states 4 rnnserve.v1.PredictRequest \
  "model_spec { name: \"waveform_lstm\" } $input_2x5x2 lengths: [5, 3] return_states: true
   output_filter: \"probabilities\"
   initial_states { key: \"lstm_1\" value {
     states { dtype: TYPE_FP32 shape: [2, 32] $(floats 64) }
     states { dtype: TYPE_FP32 shape: [2, 32] $(floats 64) } } }"
seed predict_request_fuzz predict_raw 4 rnnserve.v1.PredictRequest \
  "model_spec { name: \"waveform_lstm\" }
   inputs { key: \"waveform\" value { dtype: TYPE_FP32 shape: [1, 2, 2]
     raw_content: \"\\000\\000\\200\\077\\000\\000\\000\\100\\000\\000\\100\\100\\000\\000\\200\\100\" } }"
seed predict_request_fuzz predict_unknown_model 0 rnnserve.v1.PredictRequest \
  "model_spec { name: \"nope\" version: 3 } $input_2x5x2"
seed predict_request_fuzz evaluate 5 rnnserve.v1.EvaluateRequest \
  "model_spec { name: \"waveform_lstm\" } $input_2x5x2
   targets { key: \"probabilities\" value { dtype: TYPE_INT64 shape: [2] int64_val: [0, 2] } }
   sample_weight { dtype: TYPE_FP32 shape: [2] float_val: [1, 0.5] }
   loss: \"sparse_categorical_crossentropy\" metrics: \"accuracy\""
seed predict_request_fuzz metadata 6 rnnserve.v1.ModelMetadataRequest \
  "model_spec { name: \"waveform_lstm\" }"
seed predict_request_fuzz list 3 rnnserve.v1.ListModelsRequest ""

infer="model_name: \"waveform_lstm\" inputs { name: \"waveform\" datatype: \"FP32\" shape: [1, 4, 2]
  contents { fp32_contents: [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8] } }"
seed kserve_request_fuzz infer 4 inference.ModelInferRequest "$infer"
seed kserve_request_fuzz infer_raw_outputs 4 inference.ModelInferRequest \
  "model_name: \"waveform_lstm\" model_version: \"1\" id: \"r1\"
   inputs { name: \"waveform\" datatype: \"FP32\" shape: [1, 2, 2] }
   raw_input_contents: \"\\000\\000\\200\\077\\000\\000\\000\\100\\000\\000\\100\\100\\000\\000\\200\\100\"
   outputs { name: \"probabilities\" }
   parameters { key: \"priority\" value { int64_param: 1 } }"
seed kserve_request_fuzz infer_lengths 4 inference.ModelInferRequest \
  "$infer inputs { name: \"lengths\" datatype: \"INT32\" shape: [1] contents { int_contents: [3] } }"
seed kserve_request_fuzz sequence_start 4 inference.ModelInferRequest \
  "$infer parameters { key: \"sequence_id\" value { int64_param: 7 } }
   parameters { key: \"sequence_start\" value { bool_param: true } }"
seed kserve_request_fuzz sequence_chunk_end 5 inference.ModelInferRequest \
  "$infer parameters { key: \"sequence_id\" value { int64_param: 7 } }
   parameters { key: \"sequence_end\" value { bool_param: true } }"
seed kserve_request_fuzz metadata 6 inference.ModelMetadataRequest \
  "name: \"waveform_lstm\" version: \"1\""
seed kserve_request_fuzz ready 7 inference.ModelReadyRequest "name: \"waveform_lstm\""

tensor_2x5x2="inputs { key: \"waveform\" value { dtype: DT_FLOAT
  tensor_shape { dim { size: 2 } dim { size: 5 } dim { size: 2 } } $(floats 20) } }"
seed tfserving_request_fuzz predict 4 tensorflow.serving.PredictRequest \
  "model_spec { name: \"waveform_lstm\" signature_name: \"serving_default\" } $tensor_2x5x2"
seed tfserving_request_fuzz predict_content 4 tensorflow.serving.PredictRequest \
  "model_spec { name: \"waveform_lstm\" version { value: 1 } } output_filter: \"probabilities\"
   inputs { key: \"waveform\" value { dtype: DT_FLOAT
     tensor_shape { dim { size: 1 } dim { size: 2 } dim { size: 2 } }
     tensor_content: \"\\000\\000\\200\\077\\000\\000\\000\\100\\000\\000\\100\\100\\000\\000\\200\\100\" } }"
seed tfserving_request_fuzz metadata 6 tensorflow.serving.GetModelMetadataRequest \
  "model_spec { name: \"waveform_lstm\" } metadata_field: \"signature_def\""
text_seed tfserving_request_fuzz rest_instances 5 \
  '{"signature_name": "serving_default", "instances": [[[0.1, 0.2], [0.3, 0.4]], [[0.5, 0.6], [0.7, 0.8]]]}'
text_seed tfserving_request_fuzz rest_named_instances 5 \
  '{"instances": [{"waveform": [[0.1, 0.2], [0.3, 0.4]]}, {"waveform": [[1e3, -2], [0, 1]]}]}'
text_seed tfserving_request_fuzz rest_inputs 5 '{"inputs": {"waveform": [[[0.1, 0.2]]]}}'
text_seed tfserving_request_fuzz rest_status_path 3 '/v1/models/waveform_lstm/versions/1'
text_seed tfserving_request_fuzz rest_metadata_path 3 '/v1/models/waveform_lstm/labels/stable/metadata'
text_seed tfserving_request_fuzz rest_predict_path 3 '/v1/models/waveform_lstm:predict'

mkdir -p "$out/model_config_fuzz"
cat >"$out/model_config_fuzz/batching.pbtxt" <<'PBTXT'
max_batch_size: 8
input { name: "waveform" reject_non_finite: true }
instance_group { kind: KIND_CPU count: 2 }
optimization { cpu_threads: 1 }
dynamic_batching { max_queue_delay_microseconds: 100 preferred_batch_size: [4] max_queue_size: 16 }
PBTXT
cat >"$out/model_config_fuzz/sequences.pbtxt" <<'PBTXT'
platform: "keras_h5"
version_policy { latest { num_versions: 2 } }
sequence_batching { max_sequences: 4 max_sequence_idle_microseconds: 1000000 }
instance_group { kind: KIND_AUTO }
PBTXT
cat >"$out/model_config_fuzz/plain.pbtxt" <<'PBTXT'
max_batch_size: 0
output { name: "probabilities" }
PBTXT

# KServe REST bodies (kserve_rest_fuzz.cc): selector byte, two bytes of header length, body.
python3 - <<'PY'
import json, os, struct
d = "tests/fuzz/corpus/kserve_rest_fuzz/"
os.makedirs(d, exist_ok=True)
x = [0.1 * i for i in range(12)]
def put(name, head, body):
    with open(d + name, "wb") as f:
        f.write(bytes(head) + body)
put("infer_json", [0, 0, 0], json.dumps(
    {"inputs": [{"name": "waveform", "shape": [2, 3, 2], "datatype": "FP32", "data": x}]}).encode())
put("infer_nested_lengths", [1, 0, 0], json.dumps(
    {"id": "a", "inputs": [{"name": "waveform", "shape": [2, 3, 2], "datatype": "FP32",
                            "data": [[[1, 2], [3, 4], [5, 6]], [[1, 2], [3, 4], [5, 6]]]},
                           {"name": "lengths", "shape": [2], "datatype": "INT32", "data": [3, 2]}],
     "outputs": [{"name": "probabilities", "parameters": {"binary_data": True}}],
     "parameters": {"priority": 1, "timeout": 1000000}}).encode())
h = json.dumps({"inputs": [{"name": "waveform", "shape": [1, 3, 2], "datatype": "FP32",
                            "parameters": {"binary_data_size": 24}}],
                "parameters": {"binary_data_output": True}}).encode()
put("infer_binary", [4, len(h) & 255, len(h) >> 8], h + struct.pack("6f", *x[:6]))
put("infer_sequence", [0, 0, 0], json.dumps(
    {"inputs": [{"name": "waveform", "shape": [1, 3, 2], "datatype": "FP32", "data": x[:6]}],
     "parameters": {"sequence_id": 5, "sequence_start": True, "sequence_end": True}}).encode())
put("index", [3, 0, 0], b'{"ready": true}')
put("ready", [2, 0, 0], b"")
PY
echo "seeds written under $out"
