#pragma once

// The request-lengths ops on host tensors (engine/lengths_rewrite.h puts them into a model):
// kAttachRequestLengths, kGatherAtLengths and kZeroPastLengths (engine/ir.h). The CPU engine
// runs them on values that carry their lengths (engine/cpu/tensor_ops.h, RunLengthsOp);
// EvaluateTensorOp runs them without lengths.

#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "engine/ir.h"
#include "engine/tensor.h"

namespace rnnserve::engine {

// The op on x under the request's `lengths` (empty: none given).
absl::Status EvalLengthsOp(const TensorOpSpec& spec, const Tensor& x,
                           absl::Span<const int32_t> lengths, Tensor* out);

}  // namespace rnnserve::engine
