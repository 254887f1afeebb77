#pragma once

// ModelInferRequest -> a validated engine batch, and engine outputs -> ModelInferResponse.
//
// Decoding makes the protocol-neutral request (server/core/request.h) out of views of the
// KServe tensors (raw_input_contents, or the typed contents) and runs the one edge validation
// every protocol shares: names, shapes (batch axis first), lengths and finite values are
// checked there, and an FP32 (or INT64) input reaches the engine as a view of the request's
// bytes. What is KServe's own is checked here: datatype strings, raw_input_contents against
// the inputs and their byte sizes, requested outputs, and the request parameters.
//
// Encoding: AllocateInfer places the outputs in the response before they are computed (the
// dynamic batcher writes each request's rows there); EncodeInfer then fills in what is not in
// place yet, so an output is copied once from the engine to the response.
//
// Request parameters:
//   lengths      string_param "40,25,12": per-sequence lengths (size = batch). An INT32 or
//                INT64 input named "lengths", shape [batch], does the same for a model without
//                an input of that name.
//   priority     int64_param / uint64_param: 0 is the highest (RunOptions::priority).
//   timeout      int64_param / uint64_param, microseconds: the request fails with
//                DEADLINE_EXCEEDED if it has not started by then.
//   sequence_id, sequence_start, sequence_end: see sequence.h.
// Requested output parameters:
//   binary_data  bool_param false: the output comes as typed contents; otherwise (default)
//                as raw_output_contents.

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/engine.h"
#include "inference/grpc_service.pb.h"
#include "server/servable.h"
#include "server/services/kserve/sequence.h"

namespace rnnserve::server::kserve {

struct DecodedInfer {
  engine::Batch batch;
  struct Output {
    int index = 0;    // into Servable::outputs()
    bool raw = true;  // raw_output_contents, or typed contents
  };
  std::vector<Output> outputs;  // in the order the response lists them
  RunOptions options;           // priority and the timeout's deadline
  std::optional<SequenceIdentity> sequence;
};

absl::StatusOr<DecodedInfer> DecodeInfer(const inference::ModelInferRequest& request,
                                         const Servable& servable);

// What each transport (gRPC above, HTTP in rest_codec.h) hands the decoding both share: its
// inputs as views (datatype parsed, values not checked yet), the request's parameters, and the
// outputs asked for with whether each goes as binary (raw) data.
struct InferInputs {
  std::vector<core::InputView> inputs;
  const InferParameters* parameters = nullptr;        // null: none
  std::vector<std::pair<std::string, bool>> outputs;  // name, raw; empty: every output
  bool default_raw = true;                            // how every output goes when none is named
};

// The rest of DecodeInfer: lengths, datatypes against the model's, the shared validation,
// requested outputs, sequence and scheduling parameters.
absl::StatusOr<DecodedInfer> DecodeViews(InferInputs given, const Servable& servable);

// For RunOptions::allocate_outputs: the requested outputs' buffers in `response`. `servable`,
// `decoded` and `response` must outlive the run.
OutputAllocator AllocateInfer(const Servable& servable, const DecodedInfer& decoded,
                              inference::ModelInferResponse* response);

// `outputs` as Servable::Run returned them (one per Servable::outputs()).
void EncodeInfer(const Servable& servable, const DecodedInfer& decoded,
                 const std::vector<engine::Tensor>& outputs,
                 inference::ModelInferResponse* response);

}  // namespace rnnserve::server::kserve
