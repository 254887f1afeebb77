#pragma once

// An estimate, made at admission, of the memory an engine works in while it runs one batch:
// what the request's tensors do not show but the batch makes the engine hold (a recurrent
// layer's input projections for every step, [T, B, G*H] per direction, and its outputs,
// [T, B, H']). The engines size their scratch per call and say nothing per batch
// (CompiledModel::memory_bytes is weights and the scratch of the last run), so it is computed
// from the model's IR, conservatively:
//
//   bytes = 4 * positions * sum over layers of width(layer)
//
// positions: the largest input's rows x steps (its elements over its last axis for inputs of
// rank 3 or more; its elements otherwise); width: per recurrent layer
// directions x (gates x H + output size); per Dense, Conv1D or Embedding its output size; any
// other layer the width before it. Every layer's buffer is counted as if none were reused, so
// the estimate is at or above what the CPU engine holds for the batch.

#include <cstdint>

#include "engine/engine.h"
#include "engine/ir.h"

namespace rnnserve::server::limits {

int64_t WorkingBytes(const engine::Model& ir, const engine::Batch& batch);

}  // namespace rnnserve::server::limits
