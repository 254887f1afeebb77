#pragma once

// Admission of one inference request under the process's limits (byte_budget.h,
// model_concurrency.h), counted against its caller's fair share of each (fair_share.h): every
// front end (rnnserve.v1 Predict, Evaluate, EvaluateStream and StreamPredict chunks, KServe
// ModelInfer and ModelStreamInfer, the HTTP front ends of KServe and TF Serving, TF Serving's
// gRPC Predict) calls Admit() once it knows the model, keeps the Admission until the response
// is built, and adds the decoded batch with AddBatch(): its tensors' bytes and the engine's
// working memory for it (working_memory.h).

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "engine/engine.h"
#include "server/limits/byte_budget.h"
#include "server/limits/model_concurrency.h"
#include "server/servable.h"

namespace rnnserve::server::limits {

// The limits a service applies; a null member is no limit.
struct RequestLimits {
  ByteBudget* bytes = nullptr;
  ModelConcurrency* concurrency = nullptr;  // models without dynamic batching only
};

struct Admission {
  ByteBudget::Reservation bytes;
  ModelConcurrency::Slot slot;
  const engine::Model* ir = nullptr;  // the admitted model's; read by AddBatch only
  // Reserves the decoded tensors of `batch` and the engine's working memory for it too.
  absl::Status AddBatch(const engine::Batch& batch);
};

// Reserves `request_bytes` (the serialized request) for `caller` (a CallerIdentity) and, for a
// model without dynamic batching, a place on it. RESOURCE_EXHAUSTED naming the limit; nothing
// is held then.
absl::StatusOr<Admission> Admit(const RequestLimits& limits, const Servable& model,
                                const std::string& caller, int64_t request_bytes);

// Bytes of a batch's tensors (inputs and initial states).
int64_t BatchBytes(const engine::Batch& batch);

}  // namespace rnnserve::server::limits
