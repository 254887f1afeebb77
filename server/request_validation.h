#pragma once

// Validation at the edge: a request is checked once against the model's signature, and only
// a batch that passes reaches an engine. Errors are INVALID_ARGUMENT naming the input and the
// expected value.

#include "absl/status/statusor.h"
#include "engine/engine.h"
#include "rnnserve/v1/rnnserve.pb.h"
#include "server/servable.h"

namespace rnnserve::server {

// A single-input model also accepts one input under any name.
absl::StatusOr<engine::Batch> ValidatePredict(const v1::PredictRequest& request,
                                              const Servable& servable);

// The same against `inputs` in place of servable.inputs() (same names and order; e.g. with a
// time axis left free for stream chunks).
absl::StatusOr<engine::Batch> ValidatePredict(const v1::PredictRequest& request,
                                              const Servable& servable,
                                              const std::vector<TensorSignature>& inputs);

// Checks an output filter against the model's outputs.
absl::Status ValidateOutputFilter(const v1::PredictRequest& request, const Servable& servable);

}  // namespace rnnserve::server
