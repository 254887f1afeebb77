#pragma once

// KServe v2 REST inference bodies <-> the request core (infer_codec.h's InferInputs and
// DecodedInfer), for the HTTP front end (rest_routes.h).
//
// A request body is a JSON header, optionally followed by the tensors' bytes (the binary
// tensor data extension): with `Inference-Header-Content-Length: N` the first N bytes are the
// JSON and the rest the binary data, in the order of the inputs that carry
// "parameters": {"binary_data_size": bytes}. Each input is either
//   {"name", "shape", "datatype", "data": [...]}  values row-major, flat or nested arrays
//   {"name", "shape", "datatype", "parameters": {"binary_data_size": n}}  n bytes of the body
// A binary input is a view of the body's bytes (nothing is copied); JSON values are converted
// once into arrays the request holds. Request "parameters" are the gRPC ones (infer_codec.h:
// lengths, priority, timeout, sequence_id/start/end) as JSON values; "binary_data_output":
// true sends every output as binary data, and an output's own "parameters": {"binary_data"}
// decides for it. The default is JSON data.
//
// Errors are INVALID_ARGUMENT naming the input and what was expected: malformed JSON, a
// field of the wrong type, a datatype other than FP32, FP64, INT32, INT64, data that does not
// fill the shape, binary sizes that do not add up to the bytes after the header, a header
// length past the body.
//
// The response is JSON, {"model_name", "model_version", "id"?, "outputs": [{"name",
// "datatype", "shape", "data" | "parameters": {"binary_data_size"}}]}, followed by the binary
// outputs' bytes when any is binary; `header_length` is then the JSON's size (the response's
// Inference-Header-Content-Length).

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/tensor.h"
#include "server/services/kserve/infer_codec.h"

namespace rnnserve::server::kserve {

struct RestInferRequest {
  std::string id;
  InferParameters parameters;
  // Views of the body (binary data) or of `values`; `inputs.parameters` points at
  // `parameters`, so the struct must not be copied or moved once the views are taken.
  InferInputs inputs;
  std::vector<std::unique_ptr<std::string>> values;  // JSON data, converted
};

// Parses `body`; `header_length` is Inference-Header-Content-Length (nullopt: absent). The
// request keeps views into `body`, which must outlive it.
absl::Status ParseRestInfer(absl::string_view body, std::optional<size_t> header_length,
                            RestInferRequest* request);

struct RestInferResponse {
  std::string body;
  std::optional<size_t> header_length;  // set when binary outputs follow the JSON
};

// The response for `outputs` as Servable::Run returned them.
RestInferResponse EncodeRestInfer(const Servable& ran_on, const DecodedInfer& decoded,
                                  const std::vector<engine::Tensor>& outputs,
                                  const std::string& id);

}  // namespace rnnserve::server::kserve
