#pragma once

// Admission of one inference request under the process's limits (byte_budget.h,
// model_concurrency.h): both services call Admit() once they know the model, keep the
// Admission until the response is built, and add the decoded tensors' bytes with AddBatch().

#include <cstdint>

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
  // Reserves the decoded tensors of `batch` too.
  absl::Status AddBatch(const engine::Batch& batch);
};

// Reserves `request_bytes` (the serialized request) and, for a model without dynamic
// batching, a place on it. RESOURCE_EXHAUSTED naming the limit; nothing is held then.
absl::StatusOr<Admission> Admit(const RequestLimits& limits, const Servable& model,
                                int64_t request_bytes);

// Bytes of a batch's tensors (inputs and initial states).
int64_t BatchBytes(const engine::Batch& batch);

}  // namespace rnnserve::server::limits
