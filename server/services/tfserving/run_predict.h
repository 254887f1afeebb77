#pragma once

// The one way a TF Serving Predict runs, for gRPC and REST alike: the decoded request is
// admitted under the process's limits (server/limits/admission.h), checked by the core's one
// validation (core::ValidateOutputFilter, core::Validate) and queued on the model's scheduler
// (Servable::RunAsync), as rnnserve.v1 Predict does.

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "engine/tensor.h"
#include "server/core/request.h"
#include "server/limits/admission.h"
#include "server/servable.h"

namespace rnnserve::server::tfserving {

// The model's outputs (one per Servable::outputs(), those RunOptions::allocate_outputs placed
// included), or the error.
using PredictDone = absl::AnyInvocable<void(absl::StatusOr<std::vector<engine::Tensor>>)>;

// Runs `request` on `model` and calls `done` exactly once: on this thread when the request is
// refused, else on the thread that finishes its batch. `request_bytes`: its size on the wire.
// The bytes `request`'s views point at must stay valid until `done` runs; `request` itself need
// not. The admission (counted against `options.caller`'s share) is released before `done` runs.
void RunPredict(std::shared_ptr<const Servable> model, const core::Request& request,
                int64_t request_bytes, const limits::RequestLimits& limits, RunOptions options,
                PredictDone done);

}  // namespace rnnserve::server::tfserving
