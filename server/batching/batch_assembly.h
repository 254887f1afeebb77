#pragma once

// The splitting and joining policy of the dynamic batcher: rows of many requests into one
// engine batch, and the engine's outputs back to each request.
//
// Inputs whose time axis is flagged are zero-padded to the batch's longest T. The batch
// carries per-sequence lengths whenever a request gave lengths or the requests' T differ:
// a row's given length, or its request's T. (The engines bound lengths that the model's
// masking derives from the data by these, so a request without lengths means the same in any
// batch.) Outputs whose time axis is flagged are cropped back to each request's own T.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/types/span.h"
#include "engine/engine.h"
#include "engine/tensor.h"
#include "server/batching/batch_former.h"

namespace rnnserve::server::batching {

struct GatheredBatch {
  engine::Batch batch;       // inputs [rows, T_max, ...], lengths and initial states as above
  int64_t padded_steps = 0;  // T_max: the longest T among the rows' requests
  // Some row's request asked for final states: point batch.final_states somewhere.
  bool wants_final_states = false;
};

// The rows, in order, as one engine batch. The rows' requests can share a batch
// (QueuedRequest::CanShareBatchWith). The batch's tensors come from `model`'s NewHostTensor
// (page-locked on the GPU engine).
GatheredBatch GatherRows(absl::Span<const BatchRow> rows, const std::vector<bool>& input_time_axis,
                         const engine::CompiledModel& model);

struct Delivered {
  int64_t completed = 0;  // requests answered by this delivery
  int64_t failed = 0;     // requests failed by it (outputs that do not fit)
};

// Hands each request its rows of `outputs` (one tensor per model output, [rows, ...]) and of
// `final_states` (null when no request asked). Fails every request of the batch with INTERNAL
// when these do not hold one row per batch row.
Delivered ScatterRows(absl::Span<const BatchRow> rows, const std::vector<engine::Tensor>& outputs,
                      const std::map<std::string, std::vector<engine::Tensor>>* final_states,
                      const std::vector<bool>& output_time_axis, int64_t padded_steps);

// Fails each distinct request of `rows` with `status`; returns how many it failed.
int64_t FailRows(absl::Span<const BatchRow> rows, const absl::Status& status);

}  // namespace rnnserve::server::batching
