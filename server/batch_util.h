#pragma once

// Splitting and joining engine batches along the batch axis (axis 0 of every tensor).

#include <cstdint>
#include <vector>

#include "engine/engine.h"
#include "engine/tensor.h"

namespace rnnserve::server {

// Rows [begin, end) of every input, their lengths and initial states, and `continues`
// (final_states is not set).
engine::Batch SliceBatch(const engine::Batch& batch, int64_t begin, int64_t end);

// Rows [begin, end) of one tensor.
engine::Tensor SliceRows(const engine::Tensor& t, int64_t begin, int64_t end);

// Stacks tensors that agree on every axis but the first.
engine::Tensor ConcatRows(const std::vector<engine::Tensor>& parts);

}  // namespace rnnserve::server
