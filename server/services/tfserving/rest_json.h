#pragma once

// TF Serving's REST :predict bodies <-> the request core, in TF Serving's JSON layout
// (https://www.tensorflow.org/tfx/serving/api_rest):
//
//   Request  {"signature_name": "...",              optional; "" or "serving_default"
//             "instances": [row, row, ...]}          row format: each row one batch entry, a
//                                                    value (a model with one input) or an
//                                                    object {"<input>": value, ...}
//         or {"inputs": value | {"<input>": value}}  columnar format: whole tensors, batch
//                                                    axis first
//   Response {"predictions": [row, ...]}              to "instances": each row the model's one
//                                                    output's value, or {"<output>": value}
//            {"outputs": value | {"<output>": value}} to "inputs"
//
// Values are nested lists of numbers; every list at one depth has the same length (ragged
// values are INVALID_ARGUMENT naming the input). Float inputs take any number, integer inputs
// (token ids) whole numbers. {"b64": "..."} carries bytes, which no served model takes: it is
// INVALID_ARGUMENT naming the input. Output floats are written in their shortest exact form;
// NaN and infinities as NaN, Infinity, -Infinity, as TF Serving writes them.
//
// The decoded values are copied once out of the JSON into buffers the decoded request owns
// (JSON text cannot be viewed as numbers); the core request's views point there.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/tensor.h"
#include "server/core/request.h"
#include "server/servable.h"

namespace rnnserve::server::tfserving {

struct JsonPredict {
  core::Request request;  // its views point into `floats` and `ints`
  std::string signature_name;
  bool row_format = true;  // "instances"; false: "inputs"
  std::vector<std::vector<float>> floats;
  std::vector<std::vector<int64_t>> ints;
};

// The body of a :predict against `model`'s inputs; INVALID_ARGUMENT for malformed JSON, a
// missing or doubled "instances"/"inputs", unknown or missing inputs, ragged values and values
// of the wrong type. The result is not moved: its request views its own buffers.
absl::StatusOr<std::unique_ptr<JsonPredict>> DecodeJsonPredict(absl::string_view body,
                                                               const Servable& model);

// The answer to a :predict in the format it came in (`row_format`), from `outputs` (one per
// Servable::outputs()). Row format needs every output's first axis to be the batch; outputs
// that disagree are INVALID_ARGUMENT (use the columnar format).
absl::StatusOr<std::string> EncodeJsonPredict(const Servable& model, bool row_format,
                                              const std::vector<engine::Tensor>& outputs);

// {"error": "<message>"}.
std::string JsonError(absl::string_view message);

}  // namespace rnnserve::server::tfserving
